//! The scheduler: places each waiting partition on a device, highest priority first, under
//! the in-flight bound.

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::actors::messages::PartitionJob;
use crate::actors::DevicePipeline;
use crate::backend::FailureSlot;
use crate::error::Error;
use crate::request::{InFlightLimiter, Ticket};
use crate::stage::Stage;
use crate::timeline::TimelineRecorder;

/// A ticket in the waiting queue: higher priority first, then first come first served.
struct Waiting {
    sequence: u64,
    ticket: Ticket,
}

impl Waiting {
    fn rank(&self) -> (crate::prover::Priority, std::cmp::Reverse<u64>) {
        (self.ticket.request.priority, std::cmp::Reverse(self.sequence))
    }
}

impl PartialEq for Waiting {
    fn eq(&self, other: &Self) -> bool {
        self.rank() == other.rank()
    }
}
impl Eq for Waiting {}
impl PartialOrd for Waiting {
    fn partial_cmp(&self, other: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiting {
    fn cmp(&self, other: &Self) -> CmpOrdering {
        self.rank().cmp(&other.rank())
    }
}

/// What the scheduler thread needs.
pub struct Scheduler {
    pub incoming: Receiver<Ticket>,
    pub pipelines: Vec<Arc<DevicePipeline>>,
    pub limiter: InFlightLimiter,
    pub timeline: TimelineRecorder,
    pub stopping: Arc<AtomicBool>,
    pub next_partition_id: Arc<AtomicUsize>,
    /// Whether partitions verify their proofs before returning them.
    pub verify_proofs: bool,
}

impl Scheduler {
    /// Runs until the prover stops.
    pub fn run(self) {
        let mut waiting = BinaryHeap::new();
        let mut sequence = 0u64;
        let tick = Duration::from_millis(20);
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                for Waiting { ticket, .. } in waiting.drain() {
                    ticket.request.complete(ticket.index, usize::MAX, ticket.witness, vec![], Err(Error::ShutDown));
                }
                return;
            }
            if waiting.is_empty() {
                match self.incoming.recv_timeout(tick) {
                    Ok(ticket) => {
                        waiting.push(Waiting { sequence, ticket });
                        sequence += 1;
                    }
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            let Some(mut token) = self.limiter.acquire(tick) else { continue };
            // Take everything that arrived meanwhile, so the best of it goes first.
            while let Ok(ticket) = self.incoming.try_recv() {
                waiting.push(Waiting { sequence, ticket });
                sequence += 1;
            }
            let Some(Waiting { ticket, .. }) = waiting.pop() else { continue };
            if ticket.request.is_cancelled() {
                ticket.request.complete(ticket.index, usize::MAX, ticket.witness, vec![], Err(Error::Cancelled));
                continue;
            }
            let Some(pipeline) = self.place(&ticket) else {
                let err = Error::Config(format!(
                    "request {} asks for devices {:?}, which this prover does not have",
                    ticket.request.id, ticket.request.devices
                ));
                ticket.request.complete(ticket.index, usize::MAX, ticket.witness, vec![], Err(err));
                continue;
            };
            tracing::debug!(
                request = ticket.request.id,
                partition = ticket.index,
                device = pipeline.ordinal,
                priority = ?ticket.request.priority,
                "placing a partition"
            );
            token.placed_on(pipeline.load_counter());
            ticket.request.mark_placed();
            let job = self.job(ticket, pipeline.clone(), token);
            pipeline.admit(job);
        }
    }

    /// The device for a partition: one that already holds its key, else the least loaded,
    /// among the devices the request allows.
    fn place(&self, ticket: &Ticket) -> Option<Arc<DevicePipeline>> {
        let allowed = |p: &&Arc<DevicePipeline>| {
            ticket.request.devices.as_ref().is_none_or(|devices| devices.contains(&p.ordinal))
        };
        let allowed: Vec<_> = self.pipelines.iter().filter(allowed).collect();
        // Prefer devices that are healthy and that this partition has not failed on.
        let healthy: Vec<_> =
            allowed.iter().copied().filter(|p| !p.is_failing() && !ticket.avoid.contains(&p.ordinal)).collect();
        let candidates = if healthy.is_empty() { allowed } else { healthy };
        let least_loaded = |pipelines: &[&Arc<DevicePipeline>]| {
            pipelines.iter().min_by_key(|p| (p.load() * 1000) / p.workers()).map(|p| (*p).clone())
        };
        let holding: Vec<_> = candidates.iter().copied().filter(|p| p.holds_key(&ticket.request.key)).collect();
        // Affinity to a resident key, unless that device is far busier than another.
        match least_loaded(&holding) {
            Some(p) if p.load() <= p.workers() * 2 => Some(p),
            _ => least_loaded(&candidates),
        }
    }

    fn job(
        &self,
        ticket: Ticket,
        pipeline: Arc<DevicePipeline>,
        token: crate::request::InFlightToken,
    ) -> Box<PartitionJob> {
        let request = ticket.request;
        let log_n = ticket.witness.domain().map(|d| d.log_n()).unwrap_or(0);
        Box::new(PartitionJob {
            index: ticket.index,
            partition_id: self.next_partition_id.fetch_add(1, Ordering::SeqCst),
            key: request.key.clone(),
            r: request.r[ticket.index],
            s: request.s[ticket.index],
            request,
            witness: ticket.witness,
            log_n,
            worker: pipeline.next_worker(),
            faults: pipeline.faults.clone(),
            pipeline,
            failure: FailureSlot::new(),
            timeline: self.timeline.clone(),
            attempt: ticket.attempt,
            avoid: ticket.avoid,
            pending_results: None,
            buffers: None,
            staged: None,
            resident_key: None,
            key_chunk_points: None,
            msm_pass_points: usize::MAX,
            key_pins: Vec::new(),
            admission: None,
            grant: None,
            streams_used: Vec::new(),
            htod_done: None,
            ntt_done: None,
            msm_done: None,
            dtoh_done: None,
            proof: None,
            _token: Some(token),
            stage: Stage::ALL[0],
            verify: self.verify_proofs,
            finished: false,
        })
    }
}
