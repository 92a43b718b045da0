//! The daemon's jobs: one per idempotency key, queued by priority, run by the workers, kept a
//! bounded while after they end so that a late `AwaitProof` still finds its result.
//!
//! Invariants:
//! - an idempotency key names at most one live job, and a job is reachable by its id for as
//!   long as its key is;
//! - a job's state only moves forward (queued → running → an end, or queued → an end), with
//!   one exception: a running job whose GPU broke goes back to queued, to be carried into the
//!   restarted daemon ([`JobTable::requeue`], [`JobTable::take_for_restart`]). Its watch channel
//!   always holds its latest view, so an awaiter that subscribes late misses nothing;
//! - locks are taken in one order: the table's state, then a job's inner state or its view
//!   (`finish` updates views under the table's lock); so nothing that holds a view (a
//!   `wait_for` condition) may take the table's lock;
//! - finished jobs are forgotten beyond `keep_finished` of them or after `keep_for`, and queued
//!   ones beyond `max_queued` are refused: the table's memory is bounded whatever the clients do.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::{Condvar, Mutex};
use tokio::sync::watch;

use crate::filecoin::{ProofKind, ProofTimings, VanillaRequest};
use crate::prover::{Priority, ProofHandle};

/// Where a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    Queued,
    Running,
    Succeeded,
    Failed,
    Cancelled,
}

impl JobState {
    pub fn is_final(self) -> bool {
        matches!(self, JobState::Succeeded | JobState::Failed | JobState::Cancelled)
    }
}

/// A job as clients see it: what its watch channel carries.
#[derive(Debug, Clone)]
pub struct JobView {
    pub id: String,
    pub kind: ProofKind,
    pub state: JobState,
    /// filecoin-proofs' encoding, accepted by its verifier (succeeded jobs only).
    pub proof: Arc<[u8]>,
    pub partitions: usize,
    /// Why it failed or was cancelled.
    pub error: String,
    pub timings: ProofTimings,
    /// Unix milliseconds of the daemon's clock; 0 for what has not happened.
    pub submitted_at_ms: u64,
    pub started_at_ms: u64,
    pub finished_at_ms: u64,
    /// Put back in the queue for the daemon's restart ([`JobTable::requeue`]).
    pub requeued: bool,
    /// Taken into the restarted daemon ([`JobTable::take_for_restart`]): this process will
    /// not end it, so its awaiters here are told to await it there.
    pub carried: bool,
}

/// How a job ended, as the worker reports it.
pub enum Outcome {
    Proven { proof: Vec<u8>, partitions: usize, timings: ProofTimings },
    Failed(String),
}

/// A queued job as the restart carries it into the next process: everything that makes it the
/// same job there (its id, idempotency key, digest, priority and submit time) and its request.
pub struct CarriedJob {
    pub id: String,
    pub key: String,
    pub digest: [u8; 32],
    pub priority: Priority,
    pub submitted_at_ms: u64,
    pub request: VanillaRequest,
}

/// One proof job.
pub struct Job {
    pub id: String,
    pub kind: ProofKind,
    pub priority: Priority,
    pub sector_size: u64,
    /// The digest of what was asked (kind, sector size, vanilla bytes): a key reused for
    /// another request is refused rather than answered with the first one's proof.
    digest: [u8; 32],
    /// Its place among jobs of its priority (older first), kept when it is requeued.
    order: u64,
    submitted: Instant,
    view: watch::Sender<JobView>,
    inner: Mutex<JobInner>,
}

#[derive(Default)]
struct JobInner {
    /// Taken by the worker that runs the job.
    request: Option<VanillaRequest>,
    /// The pipeline request, once the worker has submitted it: what a cancel stops.
    handle: Option<ProofHandle>,
    /// Why the job was asked to stop, once it was.
    cancelled: Option<String>,
    /// Stopped by a restart, not by a client: it goes back to the queue when it fails.
    interrupted: bool,
    started: Option<Instant>,
}

impl Job {
    pub fn view(&self) -> JobView {
        self.view.borrow().clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<JobView> {
        self.view.subscribe()
    }

    /// Records the pipeline request of a running job; a cancel asked for before it existed
    /// takes effect on it now.
    pub fn attach(&self, handle: &ProofHandle) {
        let mut inner = self.inner.lock();
        if inner.cancelled.is_some() {
            handle.cancel();
        }
        inner.handle = Some(handle.clone());
    }

    /// The devices (ordinals) its partitions are in flight on now: none while its first
    /// partition is synthesized or its partitions wait for a device.
    pub fn devices_in_use(&self) -> Vec<usize> {
        self.inner.lock().handle.as_ref().map(|h| h.devices_in_use()).unwrap_or_default()
    }

    /// Whether a restart stopped it (see [`JobTable::interrupt`]).
    pub fn is_interrupted(&self) -> bool {
        self.inner.lock().interrupted
    }

    /// Why the job was asked to stop, if it was.
    pub fn cancel_reason(&self) -> Option<String> {
        self.inner.lock().cancelled.clone()
    }

    /// Seconds it waited in the daemon's queue before a worker took it.
    pub fn queue_wait(&self) -> Duration {
        self.inner.lock().started.map_or(Duration::ZERO, |s| s.saturating_duration_since(self.submitted))
    }

    pub fn since_submitted(&self) -> Duration {
        self.submitted.elapsed()
    }

    fn update(&self, change: impl FnOnce(&mut JobView)) {
        self.view.send_modify(change);
    }
}

/// What bounds the table.
#[derive(Debug, Clone, Copy)]
pub struct JobLimits {
    /// Jobs waiting for a worker; a submit beyond it is refused.
    pub max_queued: usize,
    /// Finished jobs kept for `AwaitProof` and idempotent resubmits.
    pub keep_finished: usize,
    pub keep_for: Duration,
}

impl Default for JobLimits {
    fn default() -> Self {
        JobLimits { max_queued: 4096, keep_finished: 10_000, keep_for: Duration::from_secs(3600) }
    }
}

/// Why a submit was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SubmitRefused {
    /// The key already names a job for another request.
    KeyReused {
        job: String,
    },
    QueueFull {
        max: usize,
    },
    ShuttingDown,
    /// A GPU broke and the daemon is restarting itself to have it back.
    Restarting {
        why: String,
    },
}

/// What a submit did.
pub struct Submitted {
    pub job: Arc<Job>,
    /// The key already named this job: nothing new was queued.
    pub existing: bool,
}

/// Why a job id finds no job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    /// An id of an earlier run of the daemon: its jobs ended with that run.
    EarlierRun {
        instance: String,
    },
    /// One of this run's, finished and since forgotten.
    Forgotten,
    NoSuchJob,
}

/// Counts since the daemon started.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counters {
    pub submitted: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Seconds from submit to end, summed over completed jobs.
    pub completed_seconds: f64,
}

/// Queue lengths by priority, and jobs running.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueCounts {
    pub queued: [usize; 4],
    pub running: usize,
}

/// The job table and its priority queue.
pub struct JobTable {
    /// Names this run: the prefix of its job ids.
    pub instance: String,
    limits: JobLimits,
    state: Mutex<TableState>,
    /// Signalled when a job is queued or the table closes (the workers wait on it).
    work: Condvar,
}

#[derive(Default)]
struct TableState {
    jobs: HashMap<String, Arc<Job>>,
    by_key: HashMap<String, String>,
    /// The key of each job, to forget it with the job.
    key_of: HashMap<String, String>,
    /// Highest priority first, then the oldest. Cancelled jobs stay in it until popped.
    queue: BinaryHeap<(Priority, Reverse<u64>, String)>,
    finished: VecDeque<(Instant, String)>,
    next: u64,
    queued: usize,
    running: usize,
    closing: bool,
    /// Set when a restart is pending: submits are refused with it and no job is handed out.
    restarting: Option<String>,
    counters: Counters,
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn priority_index(p: Priority) -> usize {
    match p {
        Priority::Critical => 0,
        Priority::High => 1,
        Priority::Normal => 2,
        Priority::Low => 3,
    }
}

impl JobTable {
    pub fn new(instance: String, limits: JobLimits) -> JobTable {
        JobTable { instance, limits, state: Mutex::new(TableState::default()), work: Condvar::new() }
    }

    /// Queues `request` under `key`, or returns the job the key already names.
    pub fn submit(
        &self,
        key: &str,
        digest: [u8; 32],
        priority: Priority,
        request: VanillaRequest,
    ) -> Result<Submitted, SubmitRefused> {
        let mut state = self.state.lock();
        self.prune(&mut state);
        if let Some(job) = state.by_key.get(key).and_then(|id| state.jobs.get(id)) {
            if job.digest != digest {
                return Err(SubmitRefused::KeyReused { job: job.id.clone() });
            }
            return Ok(Submitted { job: job.clone(), existing: true });
        }
        if let Some(why) = &state.restarting {
            return Err(SubmitRefused::Restarting { why: why.clone() });
        }
        if state.closing {
            return Err(SubmitRefused::ShuttingDown);
        }
        if state.queued >= self.limits.max_queued {
            return Err(SubmitRefused::QueueFull { max: self.limits.max_queued });
        }
        let seq = state.next;
        let id = format!("{}-{seq}", self.instance);
        let job = self.insert(
            &mut state,
            CarriedJob { id, key: key.to_string(), digest, priority, submitted_at_ms: unix_ms(), request },
        );
        state.counters.submitted += 1;
        drop(state);
        self.work.notify_one();
        Ok(Submitted { job, existing: false })
    }

    /// Queues a job an earlier run of this daemon had queued when it restarted, under its old
    /// id and key, so that a client awaiting that id finds it here. Not refused for a full
    /// queue: it was within the bound when it was accepted.
    pub fn resume(&self, carried: CarriedJob) -> Arc<Job> {
        let mut state = self.state.lock();
        let job = self.insert(&mut state, carried);
        drop(state);
        self.work.notify_one();
        job
    }

    fn insert(&self, state: &mut TableState, carried: CarriedJob) -> Arc<Job> {
        let CarriedJob { id, key, digest, priority, submitted_at_ms, request } = carried;
        let order = state.next;
        state.next += 1;
        let kind = request.kind();
        let view = JobView {
            id: id.clone(),
            kind,
            state: JobState::Queued,
            proof: Arc::from(Vec::new()),
            partitions: 0,
            error: String::new(),
            timings: ProofTimings::default(),
            submitted_at_ms,
            started_at_ms: 0,
            finished_at_ms: 0,
            requeued: false,
            carried: false,
        };
        // A carried job's wait counts from its first submit, as far as this clock reaches back.
        let waited = Duration::from_millis(unix_ms().saturating_sub(submitted_at_ms));
        let now = Instant::now();
        let job = Arc::new(Job {
            id: id.clone(),
            kind,
            priority,
            sector_size: request.sector_size(),
            digest,
            order,
            submitted: now.checked_sub(waited).unwrap_or(now),
            view: watch::Sender::new(view),
            inner: Mutex::new(JobInner { request: Some(request), ..JobInner::default() }),
        });
        state.jobs.insert(id.clone(), job.clone());
        state.by_key.insert(key.clone(), id.clone());
        state.key_of.insert(id.clone(), key);
        state.queue.push((priority, Reverse(order), id));
        state.queued += 1;
        job
    }

    pub fn get(&self, id: &str) -> Result<Arc<Job>, Missing> {
        let state = self.state.lock();
        if let Some(job) = state.jobs.get(id) {
            return Ok(job.clone());
        }
        match id.rsplit_once('-') {
            Some((instance, seq)) if instance == self.instance => match seq.parse::<u64>() {
                Ok(seq) if seq < state.next => Err(Missing::Forgotten),
                _ => Err(Missing::NoSuchJob),
            },
            Some((instance, seq)) if !instance.is_empty() && seq.parse::<u64>().is_ok() => {
                Err(Missing::EarlierRun { instance: instance.to_string() })
            }
            _ => Err(Missing::NoSuchJob),
        }
    }

    /// The next job to run, the most urgent first; blocks while there is none. None once the
    /// table is closed and its queue empty: the worker then exits.
    pub fn next_job(&self) -> Option<(Arc<Job>, VanillaRequest)> {
        let mut state = self.state.lock();
        loop {
            // A pending restart hands out nothing: what is queued goes to the next process.
            while state.restarting.is_none() {
                let Some((_, _, id)) = state.queue.pop() else { break };
                let Some(job) = state.jobs.get(&id).cloned() else { continue };
                let mut inner = job.inner.lock();
                // A job cancelled while queued is already final; it only leaves the heap here.
                let Some(request) = inner.request.take() else { continue };
                inner.started = Some(Instant::now());
                drop(inner);
                state.queued -= 1;
                state.running += 1;
                job.update(|v| {
                    v.state = JobState::Running;
                    v.started_at_ms = unix_ms();
                });
                return Some((job, request));
            }
            if state.closing || state.restarting.is_some() {
                return None;
            }
            self.work.wait(&mut state);
        }
    }

    /// Records how a running job ended. A failure after a cancel was asked for is the cancel.
    pub fn finish(&self, job: &Job, outcome: Outcome) {
        let cancelled = job.cancel_reason();
        job.inner.lock().handle = None;
        let mut state = self.state.lock();
        state.running -= 1;
        let end = match outcome {
            Outcome::Proven { proof, partitions, timings } => {
                state.counters.completed += 1;
                state.counters.completed_seconds += timings.total;
                job.update(|v| {
                    v.proof = Arc::from(proof);
                    v.partitions = partitions;
                    v.timings = timings;
                });
                JobState::Succeeded
            }
            Outcome::Failed(why) => {
                let (end, error) = match cancelled {
                    Some(reason) => (JobState::Cancelled, reason),
                    None => (JobState::Failed, why),
                };
                if end == JobState::Cancelled {
                    state.counters.cancelled += 1;
                } else {
                    state.counters.failed += 1;
                }
                job.update(|v| v.error = error);
                end
            }
        };
        job.update(|v| {
            v.state = end;
            v.finished_at_ms = unix_ms();
        });
        state.finished.push_back((Instant::now(), job.id.clone()));
        self.prune(&mut state);
    }

    /// Puts a running job back in the queue with its request: not its own failure, the GPU it
    /// ran on broke (or the restart interrupted it), so the restarted daemon proves it. A job a
    /// client asked to stop ends cancelled instead.
    pub fn requeue(&self, job: &Job, request: VanillaRequest, why: &str) {
        let mut state = self.state.lock();
        let mut inner = job.inner.lock();
        // Checked under the table's lock, which a cancel takes too: a cancel cannot slip in
        // between the check and the requeue.
        if inner.cancelled.is_some() {
            drop(inner);
            drop(state);
            return self.finish(job, Outcome::Failed(why.to_string()));
        }
        inner.request = Some(request);
        inner.handle = None;
        inner.started = None;
        inner.interrupted = false;
        drop(inner);
        state.running -= 1;
        state.queued += 1;
        state.queue.push((job.priority, Reverse(job.order), job.id.clone()));
        job.update(|v| {
            v.state = JobState::Queued;
            v.started_at_ms = 0;
            v.error = why.to_string();
            v.requeued = true;
        });
        drop(state);
        self.work.notify_one();
    }

    /// Asks a job to stop: a queued one ends cancelled at once, a running one stops at its
    /// partitions' next stage. An ended job is left as it ended. Returns its state now.
    pub fn cancel(&self, job: &Job, reason: &str) -> JobState {
        self.cancel_where(job, reason, true)
    }

    /// Cancels the job if it is still queued; a running or ended one is left alone. Returns
    /// its state now.
    pub fn cancel_if_queued(&self, job: &Job, reason: &str) -> JobState {
        self.cancel_where(job, reason, false)
    }

    fn cancel_where(&self, job: &Job, reason: &str, running_too: bool) -> JobState {
        let mut state = self.state.lock();
        let mut inner = job.inner.lock();
        if job.view.borrow().state.is_final() {
            return job.view.borrow().state;
        }
        if inner.request.is_none() && !running_too {
            return JobState::Running;
        }
        inner.cancelled.get_or_insert_with(|| reason.to_string());
        if inner.request.take().is_some() {
            // Still queued: it never runs (the heap entry is skipped when popped).
            drop(inner);
            state.queued -= 1;
            state.counters.cancelled += 1;
            job.update(|v| {
                v.state = JobState::Cancelled;
                v.error = reason.to_string();
                v.finished_at_ms = unix_ms();
            });
            state.finished.push_back((Instant::now(), job.id.clone()));
            return JobState::Cancelled;
        }
        if let Some(handle) = &inner.handle {
            handle.cancel();
        }
        JobState::Running
    }

    /// Prepares a restart: from now on submits are refused with `why`, and no queued job is
    /// handed out (the workers exit once their running jobs end). What is queued then is
    /// taken by [`JobTable::take_for_restart`].
    pub fn hold_for_restart(&self, why: &str) {
        self.state.lock().restarting.get_or_insert_with(|| why.to_string());
        self.work.notify_all();
    }

    /// Stops a running job for the restart: its pipeline request is cancelled, and the
    /// worker requeues it when it fails ([`Job::is_interrupted`]). A queued or ended job is
    /// left alone.
    pub fn interrupt(&self, job: &Job) {
        let mut inner = job.inner.lock();
        if inner.request.is_some() || job.view.borrow().state.is_final() {
            return;
        }
        inner.interrupted = true;
        if let Some(handle) = &inner.handle {
            handle.cancel();
        }
    }

    /// The queued jobs, in the order they would run, with their requests: what the restarted
    /// daemon queues again ([`JobTable::resume`]). Each leaves this table's queue (its view
    /// stays queued, for an awaiter of this process until it exits).
    pub fn take_for_restart(&self) -> Vec<CarriedJob> {
        let mut state = self.state.lock();
        let mut carried = Vec::new();
        while let Some((_, _, id)) = state.queue.pop() {
            let Some(job) = state.jobs.get(&id).cloned() else { continue };
            let Some(request) = job.inner.lock().request.take() else { continue };
            state.queued -= 1;
            job.update(|v| v.carried = true);
            let key = state.key_of.get(&id).cloned().unwrap_or_default();
            carried.push(CarriedJob {
                id,
                key,
                digest: job.digest,
                priority: job.priority,
                submitted_at_ms: job.view.borrow().submitted_at_ms,
                request,
            });
        }
        carried
    }

    /// Refuses new jobs from now on and wakes the workers, which exit once the queue is empty.
    pub fn close(&self) {
        self.state.lock().closing = true;
        self.work.notify_all();
    }

    pub fn is_closing(&self) -> bool {
        self.state.lock().closing
    }

    /// Jobs not yet ended, queued ones first.
    pub fn unfinished(&self) -> Vec<Arc<Job>> {
        let state = self.state.lock();
        let mut jobs: Vec<Arc<Job>> =
            state.jobs.values().filter(|j| !j.view.borrow().state.is_final()).cloned().collect();
        jobs.sort_by_key(|j| (j.view.borrow().state != JobState::Queued, j.id.clone()));
        jobs
    }

    /// The jobs running now, by id.
    pub fn running(&self) -> Vec<Arc<Job>> {
        let state = self.state.lock();
        let mut jobs: Vec<Arc<Job>> =
            state.jobs.values().filter(|j| j.view.borrow().state == JobState::Running).cloned().collect();
        jobs.sort_by(|a, b| a.id.cmp(&b.id));
        jobs
    }

    pub fn counters(&self) -> Counters {
        self.state.lock().counters
    }

    pub fn queue_counts(&self) -> QueueCounts {
        let state = self.state.lock();
        let mut counts = QueueCounts { running: state.running, ..QueueCounts::default() };
        for job in state.jobs.values().filter(|j| j.view.borrow().state == JobState::Queued) {
            counts.queued[priority_index(job.priority)] += 1;
        }
        counts
    }

    /// Jobs the table holds, ended ones included (bounded by the limits).
    pub fn len(&self) -> usize {
        self.state.lock().jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets the finished jobs beyond the count limit or older than the age limit.
    fn prune(&self, state: &mut TableState) {
        let now = Instant::now();
        while let Some((ended, id)) = state.finished.front().cloned() {
            let too_many = state.finished.len() > self.limits.keep_finished;
            let too_old = now.saturating_duration_since(ended) > self.limits.keep_for;
            if !too_many && !too_old {
                break;
            }
            state.finished.pop_front();
            state.jobs.remove(&id);
            if let Some(key) = state.key_of.remove(&id) {
                if state.by_key.get(&key) == Some(&id) {
                    state.by_key.remove(&key);
                }
            }
        }
        // The heap keeps cancelled jobs' entries until popped; with a full heap of them and no
        // worker popping (all busy), drop them here so it stays within the queue bound.
        if state.queue.len() > 2 * self.limits.max_queued.max(1) {
            let jobs = &state.jobs;
            let live: Vec<_> = std::mem::take(&mut state.queue)
                .into_iter()
                .filter(|(_, _, id)| jobs.get(id).is_some_and(|j| j.view.borrow().state == JobState::Queued))
                .collect();
            state.queue = live.into();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: &str) -> VanillaRequest {
        let text = format!(
            r#"{{"kind":"{kind}","sector_size":2048,"api_version":"1.2.0","randomness":{z},"prover_id":{z},"vanilla_proofs":[]}}"#,
            z = serde_json::to_string(&[0u8; 32]).unwrap()
        );
        VanillaRequest::parse(&text).unwrap()
    }

    fn table(limits: JobLimits) -> JobTable {
        JobTable::new("test".into(), limits)
    }

    #[test]
    fn a_key_names_one_job_and_another_request_under_it_is_refused() {
        let jobs = table(JobLimits::default());
        let first = jobs.submit("k", [1; 32], Priority::Normal, request("window-post")).unwrap();
        let again = jobs.submit("k", [1; 32], Priority::Normal, request("window-post")).unwrap();
        assert!(!first.existing && again.existing);
        assert_eq!(first.job.id, again.job.id);
        let other = jobs.submit("k", [2; 32], Priority::Normal, request("window-post")).err();
        assert_eq!(other, Some(SubmitRefused::KeyReused { job: first.job.id.clone() }));
        assert_eq!(jobs.counters().submitted, 1);
    }

    #[test]
    fn the_most_urgent_job_runs_first_then_the_oldest() {
        let jobs = table(JobLimits::default());
        let a = jobs.submit("a", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let b = jobs.submit("b", [2; 32], Priority::Normal, request("window-post")).unwrap().job;
        let c = jobs.submit("c", [3; 32], Priority::Critical, request("winning-post")).unwrap().job;
        let order: Vec<String> = (0..3).map(|_| jobs.next_job().unwrap().0.id.clone()).collect();
        assert_eq!(order, [c.id.clone(), a.id.clone(), b.id.clone()]);
    }

    #[test]
    fn a_queued_job_cancelled_never_runs() {
        let jobs = table(JobLimits::default());
        let a = jobs.submit("a", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let b = jobs.submit("b", [2; 32], Priority::Normal, request("window-post")).unwrap().job;
        assert_eq!(jobs.cancel(&a, "test"), JobState::Cancelled);
        assert_eq!(a.view().error, "test");
        let (next, _) = jobs.next_job().unwrap();
        assert_eq!(next.id, b.id);
        // Cancelling an ended job leaves it as it ended.
        jobs.finish(&next, Outcome::Failed("broken".into()));
        assert_eq!(jobs.cancel(&b, "late"), JobState::Failed);
        assert_eq!(b.view().error, "broken");
        let counters = jobs.counters();
        assert_eq!((counters.cancelled, counters.failed), (1, 1));
    }

    #[test]
    fn cancel_if_queued_leaves_a_running_job_alone() {
        let jobs = table(JobLimits::default());
        let a = jobs.submit("a", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let b = jobs.submit("b", [2; 32], Priority::Normal, request("window-post")).unwrap().job;
        let (running, _) = jobs.next_job().unwrap();
        assert_eq!(running.id, a.id);
        assert_eq!(jobs.cancel_if_queued(&a, "shutdown"), JobState::Running);
        assert_eq!(jobs.cancel_if_queued(&b, "shutdown"), JobState::Cancelled);
        jobs.finish(&running, Outcome::Proven { proof: vec![1], partitions: 1, timings: ProofTimings::default() });
        assert_eq!(a.view().state, JobState::Succeeded);
    }

    #[test]
    fn a_running_job_asked_to_stop_ends_cancelled_when_it_fails() {
        let jobs = table(JobLimits::default());
        let a = jobs.submit("a", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let (running, _) = jobs.next_job().unwrap();
        assert_eq!(jobs.cancel(&a, "stop"), JobState::Running);
        jobs.finish(&running, Outcome::Failed("the request was cancelled".into()));
        assert_eq!((a.view().state, a.view().error.as_str()), (JobState::Cancelled, "stop"));
    }

    #[test]
    fn finished_jobs_are_forgotten_beyond_the_count_and_their_keys_with_them() {
        let jobs = table(JobLimits { keep_finished: 2, ..JobLimits::default() });
        let mut ids = Vec::new();
        for i in 0..5u8 {
            let job = jobs.submit(&format!("k{i}"), [i; 32], Priority::Normal, request("window-post")).unwrap().job;
            let (running, _) = jobs.next_job().unwrap();
            jobs.finish(&running, Outcome::Failed("x".into()));
            ids.push(job.id.clone());
        }
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs.get(&ids[0]).err(), Some(Missing::Forgotten));
        assert!(jobs.get(&ids[4]).is_ok());
        assert_eq!(jobs.get("other-3").err(), Some(Missing::EarlierRun { instance: "other".into() }));
        assert_eq!(jobs.get("test-99").err(), Some(Missing::NoSuchJob));
        // A forgotten job's key is free again: a resubmit is a new job.
        let again = jobs.submit("k0", [0; 32], Priority::Normal, request("window-post")).unwrap();
        assert!(!again.existing);
    }

    #[test]
    fn a_job_the_gpu_failed_is_requeued_held_and_carried_with_its_key_into_the_next_table() {
        let jobs = table(JobLimits::default());
        let a = jobs.submit("a", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let b = jobs.submit("b", [2; 32], Priority::Normal, request("window-post")).unwrap().job;
        let c = jobs.submit("c", [3; 32], Priority::Low, request("window-post")).unwrap().job;
        let (running, request_a) = jobs.next_job().unwrap();
        assert_eq!(running.id, a.id);
        jobs.hold_for_restart("GPU 0 broke");
        jobs.requeue(&running, request_a, "GPU 0 broke");
        assert_eq!((a.view().state, a.view().error.as_str()), (JobState::Queued, "GPU 0 broke"));
        assert!(a.view().requeued && !b.view().requeued);
        assert!(jobs.next_job().is_none(), "a held table handed out a job");
        let refused = jobs.submit("d", [4; 32], Priority::Normal, request("window-post")).err();
        assert_eq!(refused, Some(SubmitRefused::Restarting { why: "GPU 0 broke".into() }));
        let carried = jobs.take_for_restart();
        let order: Vec<_> = carried.iter().map(|j| (j.id.clone(), j.key.clone(), j.digest)).collect();
        assert_eq!(
            order,
            [
                (a.id.clone(), "a".into(), [1; 32]),
                (b.id.clone(), "b".into(), [2; 32]),
                (c.id.clone(), "c".into(), [3; 32])
            ]
        );
        assert!(a.view().carried && b.view().carried && !a.view().state.is_final());

        let next = JobTable::new("next".into(), JobLimits::default());
        for job in carried {
            next.resume(job);
        }
        let order: Vec<String> = (0..3).map(|_| next.next_job().unwrap().0.id.clone()).collect();
        assert_eq!(order, [a.id.clone(), b.id.clone(), c.id.clone()]);
        let again = next.submit("b", [2; 32], Priority::Normal, request("window-post")).unwrap();
        assert!(again.existing && again.job.id == b.id, "the key did not come along");
        assert!(next.get(&c.id).is_ok());
        let fresh = next.submit("e", [5; 32], Priority::Normal, request("window-post")).unwrap().job;
        assert!(fresh.id.starts_with("next-"));
    }

    #[test]
    fn a_client_cancel_wins_over_a_requeue() {
        let jobs = table(JobLimits::default());
        let a = jobs.submit("a", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let (running, request_a) = jobs.next_job().unwrap();
        assert_eq!(jobs.cancel(&a, "stop"), JobState::Running);
        jobs.requeue(&running, request_a, "GPU 0 broke");
        assert_eq!((a.view().state, a.view().error.as_str()), (JobState::Cancelled, "stop"));
        assert!(jobs.take_for_restart().is_empty());
    }

    #[test]
    fn the_queue_is_bounded_and_a_closed_table_takes_nothing() {
        let jobs = table(JobLimits { max_queued: 1, ..JobLimits::default() });
        jobs.submit("a", [1; 32], Priority::Normal, request("window-post")).unwrap();
        let full = jobs.submit("b", [2; 32], Priority::Normal, request("window-post")).err();
        assert_eq!(full, Some(SubmitRefused::QueueFull { max: 1 }));
        jobs.close();
        let closed = jobs.submit("c", [3; 32], Priority::Normal, request("window-post")).err();
        assert_eq!(closed, Some(SubmitRefused::ShuttingDown));
        // The queued job is still handed out; then the workers are told to stop.
        assert!(jobs.next_job().is_some());
        assert!(jobs.next_job().is_none());
    }
}
