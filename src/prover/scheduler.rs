//! The scheduler: places each waiting partition on a device, highest priority first, under
//! the in-flight bound (with its reserve for urgent partitions: [`InFlightLimiter`]).

use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};

use crate::actors::job::PartitionJob;
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

/// Files an arriving ticket: into the line, or aside while it backs off.
fn file(
    ticket: Ticket,
    now: Instant,
    waiting: &mut BinaryHeap<Waiting>,
    delayed: &mut Vec<Ticket>,
    sequence: &mut u64,
) {
    if ticket.not_before.is_some_and(|at| at > now) {
        delayed.push(ticket);
        return;
    }
    waiting.push(Waiting { sequence: *sequence, ticket });
    *sequence += 1;
}

/// Fails a ticket that will not be placed (no attempt of it ran, and none will).
fn refuse(ticket: Ticket, err: Error) {
    ticket.request.complete(ticket.index, usize::MAX, usize::MAX, ticket.input, vec![], Err(err));
}

/// The tickets of `delayed` whose time has come, taken out of it.
fn extract_due(delayed: &mut Vec<Ticket>, now: Instant) -> Vec<Ticket> {
    let (due, later): (Vec<Ticket>, Vec<Ticket>) =
        delayed.drain(..).partition(|t| t.not_before.is_none_or(|at| at <= now));
    *delayed = later;
    due
}

/// Where a partition goes.
enum Placement {
    On(Arc<DevicePipeline>),
    /// Not now: the devices it may use are being recovered.
    Wait,
    /// Never: none of its devices can take it.
    Nowhere(Error),
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
    /// Where a, b and c of partitions synthesized from recorded matrices are evaluated (the
    /// device only with `verify_proofs`: see `ProverConfig::constraint_evaluation`).
    pub constraint_evaluation: crate::circuit::ConstraintEvaluation,
}

impl Scheduler {
    /// Runs until the prover stops.
    pub fn run(self) {
        let mut waiting = BinaryHeap::new();
        // Tickets backing off (memory pressure), placed once their time has come.
        let mut delayed: Vec<Ticket> = Vec::new();
        let mut sequence = 0u64;
        let tick = Duration::from_millis(20);
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                // What waits, and what arrived and was never taken (a retry sent meanwhile).
                let arrived: Vec<Ticket> = self.incoming.try_iter().collect();
                for ticket in waiting.drain().map(|w: Waiting| w.ticket).chain(arrived).chain(delayed.drain(..)) {
                    refuse(ticket, Error::ShutDown);
                }
                return;
            }
            let now = Instant::now();
            for ticket in extract_due(&mut delayed, now) {
                waiting.push(Waiting { sequence, ticket });
                sequence += 1;
            }
            if waiting.is_empty() {
                match self.incoming.recv_timeout(tick) {
                    Ok(ticket) => file(ticket, now, &mut waiting, &mut delayed, &mut sequence),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            // Everything that arrived is filed before the token is asked for, so that the
            // token is asked for at the priority of the best of it: an urgent partition may
            // take the limiter's reserve, and does not wait for a normal one to finish.
            while let Ok(ticket) = self.incoming.try_recv() {
                file(ticket, now, &mut waiting, &mut delayed, &mut sequence);
            }
            let Some(best) = waiting.peek().map(|w| w.ticket.request.priority) else { continue };
            let Some(mut token) = self.limiter.acquire_for(best, tick) else { continue };
            // And what arrived while it waited: the best of that goes first (the token fits
            // it, as nothing that arrived ranks below what the token was asked for).
            while let Ok(ticket) = self.incoming.try_recv() {
                file(ticket, now, &mut waiting, &mut delayed, &mut sequence);
            }
            let Some(Waiting { ticket, sequence: place }) = waiting.pop() else { continue };
            if ticket.request.is_cancelled() {
                refuse(ticket, Error::Cancelled);
                continue;
            }
            let pipeline = match self.place(&ticket) {
                Placement::On(pipeline) => pipeline,
                Placement::Wait => {
                    // Every device it may use is being recovered: it waits, in its place.
                    waiting.push(Waiting { sequence: place, ticket });
                    drop(token);
                    std::thread::sleep(tick);
                    continue;
                }
                Placement::Nowhere(err) => {
                    refuse(ticket, err);
                    continue;
                }
            };
            tracing::debug!(
                request = ticket.request.id,
                partition = ticket.index,
                device = pipeline.ordinal,
                priority = ?ticket.request.priority,
                "placing a partition"
            );
            token.placed_on(pipeline.load_counter(), &ticket.request, pipeline.ordinal);
            ticket.request.mark_placed();
            let job = self.job(ticket, pipeline.clone(), token);
            pipeline.admit(job);
        }
    }

    /// The device for a partition: one that already holds its key, else the least loaded,
    /// among the devices the request allows that take work.
    fn place(&self, ticket: &Ticket) -> Placement {
        let allowed = |p: &&Arc<DevicePipeline>| {
            ticket.request.devices.as_ref().is_none_or(|devices| devices.contains(&p.ordinal))
        };
        let allowed: Vec<_> = self.pipelines.iter().filter(allowed).collect();
        if allowed.is_empty() {
            return Placement::Nowhere(Error::Config(format!(
                "request {} asks for devices {:?}, which this prover does not have",
                ticket.request.id, ticket.request.devices
            )));
        }
        let in_service: Vec<_> = allowed.iter().copied().filter(|p| p.takes_work()).collect();
        if in_service.is_empty() {
            let recoverable = allowed.iter().any(|p| p.is_broken());
            return match recoverable {
                true => Placement::Wait,
                false => Placement::Nowhere(Error::DeviceBroken {
                    device: allowed[0].ordinal,
                    message: format!("every device request {} may use is out of service", ticket.request.id),
                }),
            };
        }
        let allowed = in_service;
        // Prefer devices that are healthy and that this partition has not failed on.
        let healthy: Vec<_> =
            allowed.iter().copied().filter(|p| !p.is_failing() && !ticket.avoid.contains(&p.ordinal)).collect();
        let candidates = if healthy.is_empty() { allowed } else { healthy };
        let least_loaded = |pipelines: &[&Arc<DevicePipeline>]| {
            pipelines.iter().min_by_key(|p| (p.load() * 1000) / p.workers()).map(|p| (*p).clone())
        };
        let holding: Vec<_> = candidates.iter().copied().filter(|p| p.holds_key(&ticket.request.key)).collect();
        // Affinity to a resident key, unless that device is far busier than another.
        let chosen = match least_loaded(&holding) {
            Some(p) if p.load() <= p.workers() * 2 => Some(p),
            _ => least_loaded(&candidates),
        };
        chosen.map_or(Placement::Wait, Placement::On)
    }

    fn job(
        &self,
        ticket: Ticket,
        pipeline: Arc<DevicePipeline>,
        token: crate::request::InFlightToken,
    ) -> Box<PartitionJob> {
        let request = ticket.request;
        // A circuit's domain is its key's until the synthesis stage knows its witness.
        let log_n = match ticket.input.domain() {
            Some(domain) => domain.map(|d| d.log_n()).unwrap_or(0),
            None => (request.key.h.len() + 1).trailing_zeros(),
        };
        Box::new(PartitionJob {
            index: ticket.index,
            partition_id: self.next_partition_id.fetch_add(1, Ordering::SeqCst),
            key: request.key.clone(),
            r: request.r[ticket.index],
            s: request.s[ticket.index],
            request,
            input: ticket.input,
            log_n,
            worker: pipeline.next_worker(),
            faults: pipeline.faults.clone(),
            pipeline,
            failure: FailureSlot::new(),
            timeline: self.timeline.clone(),
            attempt: ticket.attempt,
            requeues: ticket.requeues,
            avoid: ticket.avoid,
            pending_results: None,
            buffers: None,
            staged: None,
            resident_key: None,
            matrices: None,
            key_chunk_points: None,
            msm_pass_points: usize::MAX,
            key_pins: Vec::new(),
            admission: None,
            grant: None,
            host_grant: None,
            streams_used: Vec::new(),
            htod_done: None,
            ntt_done: None,
            msm_done: None,
            dtoh_done: None,
            proof: None,
            _token: Some(token),
            stage: Stage::ALL[0],
            verify: self.verify_proofs,
            evaluation: self.constraint_evaluation,
            finished: false,
        })
    }
}
