//! One generic sync actor runs every stage: it times the stage on its own track, turns errors
//! and panics into a failure of that partition alone, restarts itself after a panic, and
//! passes the partition on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;

use super::job::PartitionJob;
use super::pipeline::Advance;
use crate::backend::host_queue::panic_message;
use crate::error::{Error, Result};
use crate::stage::Stage;
use crate::timeline::Track;

/// What a stage does to a partition. Returning `Ok` passes the partition to the next stage
/// (after the last, the partition is finished with its proof).
pub trait StageLogic: Default + Send + Unpin + 'static {
    /// The stage's line in the stage list (`stage.rs`).
    const STAGE: Stage;
    /// How many instances run per device.
    const THREADS: Threads;

    /// Waits for the stage's inputs (not timed as the stage's own work).
    fn inputs_ready(&mut self, _job: &mut PartitionJob) -> Result<()> {
        Ok(())
    }

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()>;
}

/// How many threads run a stage's actor on each device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// One: the stage handles the device's partitions in the order they arrive.
    One,
    /// One per worker (compute stream), so that the workers' partitions overlap.
    PerWorker,
    /// One per partition the device takes in flight: host work as long as the device's
    /// (synthesis), so that every partition in flight can be at it at once.
    PerPartitionInFlight,
}

/// A sync actor running one stage's logic on its own thread.
pub struct StageActor<S: StageLogic> {
    logic: S,
    device: usize,
    worker: usize,
}

impl<S: StageLogic> Actor for StageActor<S> {
    type Context = SyncContext<Self>;
}

impl<S: StageLogic> StageActor<S> {
    /// Starts the stage's instances for a device with `workers` workers and up to
    /// `in_flight` partitions in flight, each on its own thread (a fresh instance replaces one
    /// after a panic: actix's sync arbiter restarts an actor that stops).
    pub fn start(device: usize, workers: usize, in_flight: usize) -> Addr<StageActor<S>> {
        let threads = match S::THREADS {
            Threads::One => 1,
            Threads::PerWorker => workers.max(1),
            // The partitions in flight, and the urgent ones the in-flight bound lets past it.
            Threads::PerPartitionInFlight => in_flight.max(1) + crate::request::URGENT_IN_FLIGHT_RESERVE,
        };
        let next_worker = Arc::new(AtomicUsize::new(0));
        SyncArbiter::start(threads, move || StageActor {
            logic: S::default(),
            device,
            worker: next_worker.fetch_add(1, Ordering::SeqCst) % threads,
        })
    }
}

impl<S: StageLogic> Handler<Advance> for StageActor<S> {
    type Result = ();

    fn handle(&mut self, Advance(job): Advance, ctx: &mut SyncContext<Self>) {
        // A panic outside the stage's own logic (in passing the job on, in finishing it, in
        // the timeline) would otherwise unwind out of the handler and end this thread for
        // good: a stage with one thread per device would then take no more partitions. The
        // job, dropped while unwinding, reports its own failure; a fresh instance replaces
        // this one.
        let device = self.device;
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| self.run(job, ctx))) {
            tracing::error!(
                stage = %S::STAGE,
                device,
                message = %panic_message(&panic),
                "a stage actor panicked outside its stage; restarting it"
            );
            ctx.stop();
        }
    }
}

impl<S: StageLogic> StageActor<S> {
    fn run(&mut self, mut job: Box<PartitionJob>, ctx: &mut SyncContext<Self>) {
        job.stage = S::STAGE;
        // Faults are drawn for this attempt of this partition in this stage, and only while
        // the stage works: not while the job is finished or passed on.
        let faults = job.faults.clone();
        let scope = job.fault_scope();
        let drawing = faults.enter(scope, S::STAGE);
        if job.faults.loses_job_at(S::STAGE) {
            // Dropped without an outcome: the job's own drop must report its failure.
            drop(drawing);
            drop(job);
            return;
        }
        if job.request.is_cancelled() {
            drop(drawing);
            job.finish(Err(Error::Cancelled));
            return;
        }
        let span = tracing::debug_span!("stage", stage = %S::STAGE, partition = job.partition_id, request = job.request.id, device = self.device, worker = self.worker);
        let _entered = span.enter();
        let mut start = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            self.logic.inputs_ready(&mut job)?;
            start = Instant::now();
            job.faults.maybe_panic(S::STAGE)?;
            self.logic.advance(&mut job)
        }));
        let track =
            Track::Actor { name: S::STAGE.name().to_string(), device: Some(self.device), worker: Some(self.worker) };
        job.timeline.record(track, S::STAGE, job.partition_id, start, Instant::now(), job.stage_args(S::STAGE));
        job.faults.maybe_panic_outside(S::STAGE);
        drop(drawing);
        match outcome {
            Ok(Ok(())) => job.forward_after(S::STAGE),
            Ok(Err(err)) => {
                tracing::warn!(%err, "stage failed");
                let index = job.index;
                job.finish(Err(err.in_stage(index, S::STAGE)))
            }
            Err(panic) => {
                let err = Error::Panicked { stage: S::STAGE, message: panic_message(&panic) };
                tracing::error!(%err, "stage panicked; restarting the actor");
                let index = job.index;
                job.finish(Err(err.in_stage(index, S::STAGE)));
                // A fresh instance replaces this one; the pool keeps its size.
                ctx.stop();
            }
        }
    }
}
