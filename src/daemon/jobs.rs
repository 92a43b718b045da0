//! The daemon's jobs: one per idempotency key, queued by priority, run by the workers, kept a
//! bounded while after they end so that a late `AwaitProof` still finds its result.
//!
//! Invariants:
//! - an idempotency key names at most one live job, and a job is reachable by its id for as
//!   long as its key is;
//! - a job's state only moves forward (queued → running → an end, or queued → an end), and its
//!   watch channel always holds its latest view, so an awaiter that subscribes late misses
//!   nothing;
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
}

/// How a job ended, as the worker reports it.
pub enum Outcome {
    Proven { proof: Vec<u8>, partitions: usize, timings: ProofTimings },
    Failed(String),
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
        if state.closing {
            return Err(SubmitRefused::ShuttingDown);
        }
        if state.queued >= self.limits.max_queued {
            return Err(SubmitRefused::QueueFull { max: self.limits.max_queued });
        }
        let seq = state.next;
        state.next += 1;
        let id = format!("{}-{seq}", self.instance);
        let kind = request.kind();
        let view = JobView {
            id: id.clone(),
            kind,
            state: JobState::Queued,
            proof: Arc::from(Vec::new()),
            partitions: 0,
            error: String::new(),
            timings: ProofTimings::default(),
            submitted_at_ms: unix_ms(),
            started_at_ms: 0,
            finished_at_ms: 0,
        };
        let job = Arc::new(Job {
            id: id.clone(),
            kind,
            priority,
            sector_size: request.sector_size(),
            digest,
            submitted: Instant::now(),
            view: watch::Sender::new(view),
            inner: Mutex::new(JobInner { request: Some(request), ..JobInner::default() }),
        });
        state.jobs.insert(id.clone(), job.clone());
        state.by_key.insert(key.to_string(), id.clone());
        state.key_of.insert(id.clone(), key.to_string());
        state.queue.push((priority, Reverse(seq), id));
        state.queued += 1;
        state.counters.submitted += 1;
        drop(state);
        self.work.notify_one();
        Ok(Submitted { job, existing: false })
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
            while let Some((_, _, id)) = state.queue.pop() {
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
            if state.closing {
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
