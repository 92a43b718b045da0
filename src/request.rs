//! A proof request in flight: its partitions' outcomes, cancellation, status, and the handle
//! its owner awaits (blocking or async). Plain shared state: the prover creates it, the actors
//! report into it, and neither is needed to read it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bellperson::groth16::Proof;
use blstrs::{Bls12, Scalar};
use crossbeam_channel::Sender;
use parking_lot::{Condvar, Mutex};

use crate::circuit::{Assignment, DeferredCircuit, Witness, WitnessShape};
use crate::error::{Error, Result};
use crate::math::Domain;
use crate::params::ProvingKey;

/// How urgent a request is. A waiting partition of higher priority is admitted before any
/// waiting partition of lower priority; running work is never interrupted.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Low,
    #[default]
    Normal,
    High,
    Critical,
}

/// What a partition is proved from.
#[derive(Clone, Debug)]
pub enum PartitionInput {
    /// A synthesized witness.
    Witness(Arc<Witness>),
    /// A circuit the synthesis stage synthesizes; once it has, the partition carries its
    /// witness or assignment (a retry does not synthesize again).
    Circuit(Arc<DeferredCircuit>),
    /// A circuit synthesized witness-only: the device evaluates its a, b and c from the key's
    /// recorded matrices.
    Assignment(Arc<Assignment>),
}

impl PartitionInput {
    /// The whole witness, when the host has it.
    pub fn witness(&self) -> Option<&Arc<Witness>> {
        match self {
            PartitionInput::Witness(witness) => Some(witness),
            PartitionInput::Circuit(_) | PartitionInput::Assignment(_) => None,
        }
    }

    /// Whether it is synthesized (a witness or an assignment), not a circuit.
    pub fn is_synthesized(&self) -> bool {
        !matches!(self, PartitionInput::Circuit(_))
    }

    /// The shape the key must have, once synthesized.
    pub fn shape(&self) -> Option<WitnessShape> {
        match self {
            PartitionInput::Witness(witness) => Some(witness.shape()),
            PartitionInput::Assignment(assignment) => Some(assignment.shape()),
            PartitionInput::Circuit(_) => None,
        }
    }

    /// The domain of its constraints, once synthesized.
    pub fn domain(&self) -> Option<Result<Domain>> {
        match self {
            PartitionInput::Witness(witness) => Some(witness.domain()),
            PartitionInput::Assignment(assignment) => Some(assignment.domain()),
            PartitionInput::Circuit(_) => None,
        }
    }

    /// The public inputs its proof is verified against, once synthesized.
    pub fn public_inputs(&self) -> Option<&[Scalar]> {
        match self {
            PartitionInput::Witness(witness) => Some(witness.public_inputs()),
            PartitionInput::Assignment(assignment) => Some(assignment.public_inputs()),
            PartitionInput::Circuit(_) => None,
        }
    }
}

/// One partition waiting to be placed on a device.
pub struct Ticket {
    pub request: Arc<RequestState>,
    pub index: usize,
    pub input: PartitionInput,
    pub attempt: usize,
    /// Devices this partition failed on before.
    pub avoid: Vec<usize>,
    /// Times the partition went round again for a failure that was not its own (see
    /// [`MAX_REQUEUES`]); these do not count as attempts.
    pub requeues: usize,
    /// Not to be placed before this (a partition backing off from memory pressure).
    pub not_before: Option<std::time::Instant>,
}

/// How long a partition that ran out of device memory the budget had granted waits before it
/// goes round again: another process holds the memory, and may give it back. Doubles with
/// each requeue, up to two seconds.
fn pressure_backoff(requeues: usize) -> std::time::Duration {
    std::time::Duration::from_millis(100u64 << requeues.min(5)).min(std::time::Duration::from_secs(2))
}

/// How often a partition is sent round again, without spending an attempt, for a failure that
/// was not its own: in another partition's work (a shared key's upload), or memory another
/// process took. The bound stops a key whose every upload fails, or memory that never comes
/// back, from sending it round for ever.
pub const MAX_REQUEUES: usize = 8;

/// Where a request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct RequestStatus {
    pub partitions: usize,
    pub proved: usize,
    pub failed: usize,
    pub cancelled: bool,
    pub finished: bool,
}

struct Outcomes {
    results: Vec<Option<Result<Proof<Bls12>>>>,
    /// The attempt each outcome came from, and how often it went round again before it for
    /// failures not its own.
    attempts: Vec<usize>,
    requeues: Vec<usize>,
    finished: usize,
    wakers: Vec<Waker>,
}

/// The shared state of one request.
pub struct RequestState {
    pub id: u64,
    pub key: Arc<ProvingKey>,
    pub r: Vec<Scalar>,
    pub s: Vec<Scalar>,
    pub priority: Priority,
    /// Devices this request may use (None: any).
    pub devices: Option<Vec<usize>>,
    retries: usize,
    resubmit: Sender<Ticket>,
    cancelled: AtomicBool,
    outcomes: Mutex<Outcomes>,
    changed: Condvar,
    /// When the request was queued, and when its first partition was placed on a device: the
    /// difference is the time it waited for the pipeline.
    submitted: std::time::Instant,
    first_placed: std::sync::OnceLock<std::time::Instant>,
    /// Partitions of this request in flight on each device (ordinal, count), counted by their
    /// [`InFlightToken`]s: where the request runs now.
    on_devices: Mutex<Vec<(usize, usize)>>,
}

impl RequestState {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: u64,
        key: Arc<ProvingKey>,
        r: Vec<Scalar>,
        s: Vec<Scalar>,
        priority: Priority,
        devices: Option<Vec<usize>>,
        retries: usize,
        resubmit: Sender<Ticket>,
    ) -> Arc<RequestState> {
        let partitions = r.len();
        Arc::new(RequestState {
            id,
            key,
            r,
            s,
            priority,
            devices,
            retries,
            resubmit,
            cancelled: AtomicBool::new(false),
            outcomes: Mutex::new(Outcomes {
                results: (0..partitions).map(|_| None).collect(),
                attempts: vec![0; partitions],
                requeues: vec![0; partitions],
                finished: 0,
                wakers: Vec::new(),
            }),
            changed: Condvar::new(),
            submitted: std::time::Instant::now(),
            first_placed: std::sync::OnceLock::new(),
            on_devices: Mutex::new(Vec::new()),
        })
    }

    /// Notes that a partition went to a device; only the first counts.
    pub(crate) fn mark_placed(&self) {
        let _ = self.first_placed.set(std::time::Instant::now());
    }

    /// Counts one more (`arrived`) or one fewer partition of this request on device `ordinal`.
    fn count_on_device(&self, ordinal: usize, arrived: bool) {
        let mut on = self.on_devices.lock();
        match on.iter().position(|(o, _)| *o == ordinal) {
            Some(i) if arrived => on[i].1 += 1,
            Some(i) => {
                on[i].1 -= 1;
                if on[i].1 == 0 {
                    on.swap_remove(i);
                }
            }
            None if arrived => on.push((ordinal, 1)),
            None => debug_assert!(false, "a partition left device {ordinal}, where none of its request was"),
        }
    }

    pub fn partitions(&self) -> usize {
        self.r.len()
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    /// Records a partition's outcome, or sends a failed partition round again if the retry
    /// policy allows and the failure could pass.
    #[allow(clippy::too_many_arguments)]
    pub fn complete(
        self: &Arc<Self>,
        index: usize,
        attempt: usize,
        requeues: usize,
        input: PartitionInput,
        avoid: Vec<usize>,
        outcome: Result<Proof<Bls12>>,
    ) {
        if let Err(err) = &outcome {
            let requeue = requeues < MAX_REQUEUES;
            let again = match err.root_cause() {
                // Another partition's failure (the shared key's upload it queued): this one
                // goes round again as it was, without spending an attempt.
                // (Lazily: a refused partition reports usize::MAX attempts and requeues, and
                // an eager `+ 1` on it overflows.)
                Error::SharedKeyFailed { .. } => requeue.then(|| (attempt, requeues + 1, None)),
                // Memory the budget granted but the driver did not have: another process holds
                // it. Pressure, not a failure of the device or the partition: wait and retry.
                Error::OutOfMemory { .. } => requeue
                    .then(|| (attempt, requeues + 1, Some(std::time::Instant::now() + pressure_backoff(requeues)))),
                _ if Self::retryable(err) => (attempt < self.retries).then(|| (attempt + 1, requeues, None)),
                _ => None,
            };
            if let Some((attempt, requeues, not_before)) = again.filter(|_| !self.is_cancelled()) {
                tracing::warn!(request = self.id, partition = index, attempt, %err, "sending a failed partition round again");
                let ticket = Ticket { request: self.clone(), index, input, attempt, avoid, requeues, not_before };
                // A prover that stopped takes nothing: the failure stands.
                if self.resubmit.send(ticket).is_ok() {
                    return;
                }
            }
        }
        let wakers = {
            let mut outcomes = self.outcomes.lock();
            if outcomes.results[index].is_some() {
                // Given up on by a shutdown: the outcome the caller saw stands.
                return;
            }
            outcomes.finished += 1;
            outcomes.results[index] = Some(outcome);
            outcomes.attempts[index] = attempt;
            outcomes.requeues[index] = requeues;
            std::mem::take(&mut outcomes.wakers)
        };
        self.changed.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Whether a failure could pass on another attempt: the device's own failures (and lost
    /// work) could; what the same inputs would fail on again could not.
    fn retryable(err: &Error) -> bool {
        !matches!(
            err.root_cause(),
            Error::Cancelled
                | Error::ShutDown
                | Error::PlanExceedsDevice { .. }
                | Error::WitnessExceedsHostBudget { .. }
                | Error::ParamsMismatch { .. }
                | Error::UnexpectedIdentity
                | Error::InvalidPoint(_)
                | Error::MalformedWitness(_)
                | Error::MissingAssignment
                | Error::Synthesis(_)
                | Error::MatricesMismatch { .. }
                | Error::Unsatisfied { .. }
                | Error::UnsatisfiedWitness { .. }
                | Error::EmptyCircuit
                | Error::DomainTooLarge { .. }
                | Error::RandomnessLength { .. }
                | Error::EmptyRequest
        )
    }

    pub fn status(&self) -> RequestStatus {
        let outcomes = self.outcomes.lock();
        let proved = outcomes.results.iter().filter(|r| matches!(r, Some(Ok(_)))).count();
        let failed = outcomes.results.iter().filter(|r| matches!(r, Some(Err(_)))).count();
        RequestStatus {
            partitions: outcomes.results.len(),
            proved,
            failed,
            cancelled: self.is_cancelled(),
            finished: outcomes.finished == outcomes.results.len(),
        }
    }

    /// Waits until every partition has finished or `deadline` has passed; whether they have.
    pub(crate) fn wait_until(&self, deadline: std::time::Instant) -> bool {
        let mut outcomes = self.outcomes.lock();
        while outcomes.finished < outcomes.results.len() {
            if self.changed.wait_until(&mut outcomes, deadline).timed_out() {
                return outcomes.finished == outcomes.results.len();
            }
        }
        true
    }

    /// Gives up on the partitions that have not finished: each fails with `err` now (their
    /// work, if it ever ends, finds its outcome taken). Returns how many there were.
    pub(crate) fn abandon(&self, err: Error) -> usize {
        let (abandoned, wakers) = {
            let mut outcomes = self.outcomes.lock();
            let open: Vec<usize> = (0..outcomes.results.len()).filter(|&i| outcomes.results[i].is_none()).collect();
            for &i in &open {
                outcomes.results[i] = Some(Err(err.clone()));
            }
            outcomes.finished += open.len();
            (open.len(), std::mem::take(&mut outcomes.wakers))
        };
        self.changed.notify_all();
        wakers.into_iter().for_each(Waker::wake);
        abandoned
    }

    /// Partitions whose outcome is a failure `matching` its root cause.
    pub(crate) fn count_failed_with(&self, matching: impl Fn(&Error) -> bool) -> usize {
        let outcomes = self.outcomes.lock();
        outcomes.results.iter().filter(|r| matches!(r, Some(Err(e)) if matching(e.root_cause()))).count()
    }

    fn take_each(&self) -> Vec<Result<Proof<Bls12>>> {
        let outcomes = self.outcomes.lock();
        outcomes.results.iter().map(|r| r.clone().unwrap_or(Err(Error::ShutDown))).collect()
    }
}

/// Folds per-partition outcomes into the request's: every proof, or the first failure.
fn all_or_first_error(each: Vec<Result<Proof<Bls12>>>) -> Result<Vec<Proof<Bls12>>> {
    each.into_iter().collect()
}

/// What the submitter of a request holds: await it, cancel it, ask where it stands.
///
/// Dropping a handle, the last one included, does not cancel its request (nor does dropping a
/// [`ProofHandle::wait_async`] future): the partitions run to the end, their proofs are
/// discarded, and everything they held is released, as for a request that is waited on. A node
/// drops handles for reasons other than a wish to cancel (a waiting task that is aborted or
/// times out, a `select!` that takes another branch, a clone handed to a thread that ends), and
/// a proof that has taken its device time is worth more finished than stopped halfway; so a
/// cancel is always asked for with [`ProofHandle::cancel`], and a drop is never one.
/// `Prover::shutdown` treats such a request as any other: `Drain` waits for it, `Cancel`
/// cancels it.
#[derive(Clone)]
pub struct ProofHandle {
    pub(crate) state: Arc<RequestState>,
}

impl ProofHandle {
    pub fn id(&self) -> u64 {
        self.state.id
    }

    /// Blocks until every partition has finished; the proofs in partition order, or the first
    /// failure (which names the partition and the stage).
    pub fn wait(&self) -> Result<Vec<Proof<Bls12>>> {
        all_or_first_error(self.wait_each())
    }

    /// Blocks until every partition has finished; each partition's own outcome.
    pub fn wait_each(&self) -> Vec<Result<Proof<Bls12>>> {
        let mut outcomes = self.state.outcomes.lock();
        while outcomes.finished < outcomes.results.len() {
            self.state.changed.wait(&mut outcomes);
        }
        drop(outcomes);
        self.state.take_each()
    }

    /// Awaits the proofs from async code; never blocks the executor.
    pub fn wait_async(&self) -> WaitProofs {
        WaitProofs { state: self.state.clone() }
    }

    /// Cancels the request: waiting partitions never start, running ones stop at their next
    /// stage, and everything they held is released.
    pub fn cancel(&self) {
        self.state.cancel();
    }

    pub fn status(&self) -> RequestStatus {
        self.state.status()
    }

    /// The attempt each partition's outcome came from (0: the first), as far as they are in:
    /// with the fault injector's log, what tells a partition's own failure from a cascade.
    pub fn attempts(&self) -> Vec<usize> {
        self.state.outcomes.lock().attempts.clone()
    }

    /// How often each partition went round again for failures not its own (another
    /// partition's key upload, memory pressure) before its outcome.
    pub fn requeues(&self) -> Vec<usize> {
        self.state.outcomes.lock().requeues.clone()
    }

    /// The devices (ordinals, ascending) that hold partitions of this request in flight now:
    /// placed there and not yet finished. Empty before its first placement and after its end.
    pub fn devices_in_use(&self) -> Vec<usize> {
        let mut devices: Vec<usize> = self.state.on_devices.lock().iter().map(|(o, _)| *o).collect();
        devices.sort_unstable();
        devices
    }

    /// How long the request waited before its first partition was placed on a device (None
    /// while it still waits).
    pub fn queued_for(&self) -> Option<std::time::Duration> {
        self.state.first_placed.get().map(|placed| placed.saturating_duration_since(self.state.submitted))
    }
}

/// The future behind [`ProofHandle::wait_async`].
pub struct WaitProofs {
    state: Arc<RequestState>,
}

impl Future for WaitProofs {
    type Output = Result<Vec<Proof<Bls12>>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        {
            let mut outcomes = self.state.outcomes.lock();
            if outcomes.finished < outcomes.results.len() {
                // One waker per task: a future polled again does not add another.
                if !outcomes.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                    outcomes.wakers.push(cx.waker().clone());
                }
                return Poll::Pending;
            }
        }
        Poll::Ready(all_or_first_error(self.state.take_each()))
    }
}

/// Partitions of [`Priority::High`] or above that may be in flight beyond the bound, by
/// default: a Winning PoSt's partition then enters the pipeline at once, even while normal
/// partitions hold every token, instead of waiting for one of them to finish.
pub const URGENT_IN_FLIGHT_RESERVE: usize = 1;

/// Bounds the partitions in flight: a token is taken before a partition enters any actor's
/// mailbox and returned when it finishes, so mailboxes never grow without bound. Partitions
/// of [`Priority::High`] or above may also take the `reserve` tokens that the others may not,
/// so that no urgent partition waits for a normal one to finish before it enters.
#[derive(Clone)]
pub struct InFlightLimiter {
    tokens: Arc<Tokens>,
}

struct Tokens {
    out: Mutex<usize>,
    returned: Condvar,
    limit: usize,
    reserve: usize,
}

impl InFlightLimiter {
    /// A bound of `limit`, with [`URGENT_IN_FLIGHT_RESERVE`] more for urgent partitions.
    pub fn new(limit: usize) -> InFlightLimiter {
        InFlightLimiter::with_reserve(limit, URGENT_IN_FLIGHT_RESERVE)
    }

    /// A bound of `limit` for every partition, and `reserve` more that only partitions of
    /// [`Priority::High`] or above may take.
    pub fn with_reserve(limit: usize, reserve: usize) -> InFlightLimiter {
        let tokens = Tokens { out: Mutex::new(0), returned: Condvar::new(), limit: limit.max(1), reserve };
        InFlightLimiter { tokens: Arc::new(tokens) }
    }

    /// Takes a token for a normal partition, waiting up to `timeout` for one to come back.
    pub fn acquire(&self, timeout: std::time::Duration) -> Option<InFlightToken> {
        self.acquire_for(Priority::Normal, timeout)
    }

    /// Takes a token for a partition of `priority`, waiting up to `timeout` for one: an
    /// urgent one ([`Priority::High`] or above) may take the reserve.
    pub fn acquire_for(&self, priority: Priority, timeout: std::time::Duration) -> Option<InFlightToken> {
        let tokens = &self.tokens;
        let bound = tokens.limit + if priority >= Priority::High { tokens.reserve } else { 0 };
        let deadline = std::time::Instant::now() + timeout;
        let mut out = tokens.out.lock();
        while *out >= bound {
            if tokens.returned.wait_until(&mut out, deadline).timed_out() && *out >= bound {
                return None;
            }
        }
        *out += 1;
        Some(InFlightToken { tokens: tokens.clone(), load: None, request: None })
    }

    /// Tokens out right now.
    pub fn in_flight(&self) -> usize {
        *self.tokens.out.lock()
    }
}

/// A partition's place in flight; returned when dropped.
pub struct InFlightToken {
    tokens: Arc<Tokens>,
    load: Option<Arc<AtomicUsize>>,
    /// The request whose partition this is, and the device it was placed on.
    request: Option<(Arc<RequestState>, usize)>,
}

impl InFlightToken {
    /// Counts the partition in `load` (device `ordinal`'s partitions in flight) and among
    /// `request`'s partitions on that device, until the token is returned. A token is placed
    /// once: a partition that goes round again takes a new one.
    pub fn placed_on(&mut self, load: Arc<AtomicUsize>, request: &Arc<RequestState>, ordinal: usize) {
        debug_assert!(self.load.is_none() && self.request.is_none(), "a token placed twice");
        load.fetch_add(1, Ordering::SeqCst);
        self.load = Some(load);
        request.count_on_device(ordinal, true);
        self.request = Some((request.clone(), ordinal));
    }
}

impl Drop for InFlightToken {
    fn drop(&mut self) {
        if let Some(load) = self.load.take() {
            load.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some((request, ordinal)) = self.request.take() {
            request.count_on_device(ordinal, false);
        }
        *self.tokens.out.lock() -= 1;
        self.tokens.returned.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn urgent_partitions_take_the_reserve_and_normal_ones_never_do() {
        let limiter = InFlightLimiter::with_reserve(2, 1);
        let normal: Vec<_> = (0..2).map(|_| limiter.acquire(Duration::ZERO).unwrap()).collect();
        // Every normal token is out: a normal partition waits, an urgent one enters.
        assert!(limiter.acquire_for(Priority::Normal, Duration::ZERO).is_none());
        assert!(limiter.acquire_for(Priority::Low, Duration::ZERO).is_none());
        let urgent = limiter.acquire_for(Priority::Critical, Duration::ZERO).expect("the reserve was not there");
        assert_eq!(limiter.in_flight(), 3);
        // The reserve is bounded too.
        assert!(limiter.acquire_for(Priority::High, Duration::ZERO).is_none());
        // A token back is for whoever asks next, within its class's bound.
        drop(urgent);
        assert!(limiter.acquire_for(Priority::Normal, Duration::ZERO).is_none(), "a normal partition took the reserve");
        assert!(limiter.acquire_for(Priority::High, Duration::ZERO).is_some());
        drop(normal);
        assert_eq!(limiter.in_flight(), 0);
        // The twin: without a reserve, an urgent partition waits like the others.
        let plain = InFlightLimiter::with_reserve(1, 0);
        let _held = plain.acquire(Duration::ZERO).unwrap();
        assert!(plain.acquire_for(Priority::Critical, Duration::ZERO).is_none());
    }

    #[test]
    fn a_waiting_acquire_takes_the_token_given_back() {
        let limiter = InFlightLimiter::with_reserve(1, 0);
        let held = limiter.acquire(Duration::ZERO).unwrap();
        let (taken_tx, taken_rx) = crossbeam_channel::bounded(1);
        let waiter = {
            let limiter = limiter.clone();
            std::thread::spawn(move || {
                let token = limiter.acquire(Duration::from_secs(600));
                let _ = taken_tx.send(token.is_some());
                token
            })
        };
        drop(held);
        assert_eq!(taken_rx.recv_timeout(Duration::from_secs(600)), Ok(true));
        drop(waiter.join().unwrap());
        assert_eq!(limiter.in_flight(), 0);
    }
}
