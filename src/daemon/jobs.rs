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
//! - once the carry is taken, every job not ended is carried, running ones included (a job
//!   loading its key cannot be stopped mid-load; the exec ends it): nothing is requeued into a
//!   table that no process will read again, so no awaiter waits on a job neither carried nor
//!   ended;
//! - an idempotency key whose job failed or was cancelled names no result: submitted again,
//!   it starts a new job (nodes retry with the same key); one whose job succeeded returns it;
//! - [`JobTable::release_awaiters`] ends every wait on this table's jobs: the process is
//!   going away, and a wait must not hold the gRPC server's graceful end;
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

/// A finished proof the restart carries into the next process, so that a client that had not
/// collected it yet still finds it there under the job's id and key.
#[derive(Debug, Clone, PartialEq)]
pub struct CarriedProof {
    pub id: String,
    pub key: String,
    pub digest: [u8; 32],
    pub kind: ProofKind,
    pub sector_size: u64,
    pub proof: Vec<u8>,
    pub partitions: usize,
    pub timings: ProofTimings,
    pub submitted_at_ms: u64,
    pub started_at_ms: u64,
    pub finished_at_ms: u64,
}

/// A queued job as the restart carries it into the next process: everything that makes it the
/// same job there (its id, idempotency key, digest, priority and submit time) and its request.
pub struct CarriedJob {
    pub id: String,
    pub key: String,
    pub digest: [u8; 32],
    pub priority: Priority,
    pub submitted_at_ms: u64,
    /// Shared with the worker while the job runs, so that a running job can be carried.
    pub request: Arc<VanillaRequest>,
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
    /// The bytes of its vanilla proof as submitted, counted against the queue's byte bound
    /// while it waits.
    vanilla_bytes: u64,
    submitted: Instant,
    view: watch::Sender<JobView>,
    inner: Mutex<JobInner>,
}

#[derive(Default)]
struct JobInner {
    /// The request while queued: taken by the worker that runs the job.
    request: Option<Arc<VanillaRequest>>,
    /// The request while running: what the restart carries if the job does not stop.
    running: Option<Arc<VanillaRequest>>,
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
    /// An interrupt (the restart) asked for before it existed likewise: a job that was still
    /// loading its key or synthesizing its first partition sees it here.
    pub fn attach(&self, handle: &ProofHandle) {
        let mut inner = self.inner.lock();
        if inner.cancelled.is_some() || inner.interrupted {
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
    /// Bytes of vanilla proofs that may wait for a worker together (a queue of 4096 PoRep
    /// blobs of tens of MB would be hundreds of GB); a submit beyond it is refused.
    pub max_queued_bytes: u64,
}

impl Default for JobLimits {
    fn default() -> Self {
        JobLimits {
            max_queued: 4096,
            keep_finished: 10_000,
            keep_for: Duration::from_secs(3600),
            max_queued_bytes: 8 << 30,
        }
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
    /// The queued vanilla proofs together would pass the byte bound.
    QueueBytesFull {
        max: u64,
        queued: u64,
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
    /// The same ends by proof kind, and the queue waits (`/metrics`).
    pub kinds: super::metrics::KindCounts,
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
    /// True once the process is going away: every wait on a job ends ([`JobTable::release_awaiters`]).
    released: watch::Sender<bool>,
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
    /// Vanilla bytes of the queued jobs.
    queued_bytes: u64,
    running: usize,
    closing: bool,
    /// The restart's carry was taken: the jobs not ended are the next process's.
    carry_taken: bool,
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
        JobTable {
            instance,
            limits,
            state: Mutex::new(TableState::default()),
            work: Condvar::new(),
            released: watch::Sender::new(false),
        }
    }

    /// Queues `request` under `key`, or returns the job the key already names.
    pub fn submit(
        &self,
        key: &str,
        digest: [u8; 32],
        priority: Priority,
        request: VanillaRequest,
    ) -> Result<Submitted, SubmitRefused> {
        self.submit_sized(key, digest, priority, request, 0)
    }

    /// [`JobTable::submit`] for a request whose vanilla proof had `vanilla_bytes` bytes,
    /// counted against [`JobLimits::max_queued_bytes`] while it waits.
    pub fn submit_sized(
        &self,
        key: &str,
        digest: [u8; 32],
        priority: Priority,
        request: VanillaRequest,
        vanilla_bytes: u64,
    ) -> Result<Submitted, SubmitRefused> {
        let mut state = self.state.lock();
        self.prune(&mut state);
        if let Some(job) = state.by_key.get(key).and_then(|id| state.jobs.get(id)) {
            // A job that failed or was cancelled holds no result: the same key again is a retry,
            // and a retry gets a new job (below). One live or succeeded answers for the key.
            let ended_without_proof = matches!(job.view.borrow().state, JobState::Failed | JobState::Cancelled);
            if !ended_without_proof {
                if job.digest != digest {
                    return Err(SubmitRefused::KeyReused { job: job.id.clone() });
                }
                return Ok(Submitted { job: job.clone(), existing: true });
            }
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
        // One blob larger than the whole bound is still taken into an empty queue: the
        // per-request limit (--max-vanilla-bytes) is what refuses it.
        if state.queued > 0 && state.queued_bytes.saturating_add(vanilla_bytes) > self.limits.max_queued_bytes {
            return Err(SubmitRefused::QueueBytesFull {
                max: self.limits.max_queued_bytes,
                queued: state.queued_bytes,
            });
        }
        let seq = state.next;
        let id = format!("{}-{seq}", self.instance);
        let job = self.insert(
            &mut state,
            CarriedJob {
                id,
                key: key.to_string(),
                digest,
                priority,
                submitted_at_ms: unix_ms(),
                request: Arc::new(request),
            },
            vanilla_bytes,
        );
        state.counters.submitted += 1;
        drop(state);
        // Every worker looks: one reserved for urgent work must not swallow the only wakeup
        // of a normal job (see [`JobTable::next_job_at_least`]).
        self.work.notify_all();
        Ok(Submitted { job, existing: false })
    }

    /// Queues a job an earlier run of this daemon had queued when it restarted, under its old
    /// id and key, so that a client awaiting that id finds it here. Not refused for a full
    /// queue: it was within the bound when it was accepted.
    pub fn resume(&self, carried: CarriedJob) -> Arc<Job> {
        let mut state = self.state.lock();
        let job = self.insert(&mut state, carried, 0);
        drop(state);
        self.work.notify_all();
        job
    }

    fn insert(&self, state: &mut TableState, carried: CarriedJob, vanilla_bytes: u64) -> Arc<Job> {
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
            vanilla_bytes,
            submitted: now.checked_sub(waited).unwrap_or(now),
            view: watch::Sender::new(view),
            inner: Mutex::new(JobInner { request: Some(request), ..JobInner::default() }),
        });
        state.jobs.insert(id.clone(), job.clone());
        state.by_key.insert(key.clone(), id.clone());
        state.key_of.insert(id.clone(), key);
        state.queue.push((priority, Reverse(order), id));
        state.queued += 1;
        state.queued_bytes += vanilla_bytes;
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
    pub fn next_job(&self) -> Option<(Arc<Job>, Arc<VanillaRequest>)> {
        self.next_job_at_least(Priority::Low)
    }

    /// [`JobTable::next_job`] for a worker kept for urgent work: it takes only jobs of
    /// `at_least` this priority, so that such a job never waits for a worker while normal
    /// work holds all the others. The queue is a heap by priority: its top is the most urgent
    /// job, so a worker that finds the top below its floor has nothing to take.
    pub fn next_job_at_least(&self, at_least: Priority) -> Option<(Arc<Job>, Arc<VanillaRequest>)> {
        let mut state = self.state.lock();
        loop {
            // A pending restart hands out nothing: what is queued goes to the next process.
            while state.restarting.is_none() {
                match state.queue.peek() {
                    Some((priority, _, _)) if *priority >= at_least => {}
                    _ => break,
                }
                let Some((_, _, id)) = state.queue.pop() else { break };
                let Some(job) = state.jobs.get(&id).cloned() else { continue };
                let mut inner = job.inner.lock();
                // A job cancelled while queued is already final; it only leaves the heap here.
                let Some(request) = inner.request.take() else { continue };
                inner.started = Some(Instant::now());
                state.counters.kinds.started(job.kind, job.submitted.elapsed());
                inner.running = Some(request.clone());
                drop(inner);
                state.queued -= 1;
                state.queued_bytes = state.queued_bytes.saturating_sub(job.vanilla_bytes);
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
    /// A job already carried into the next process is that process's to end: its view here
    /// stays as the carry left it.
    pub fn finish(&self, job: &Job, outcome: Outcome) {
        let cancelled = job.cancel_reason();
        {
            let mut inner = job.inner.lock();
            inner.handle = None;
            inner.running = None;
        }
        let mut state = self.state.lock();
        state.running -= 1;
        if job.view.borrow().carried {
            return;
        }
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
        state.counters.kinds.ended(job.kind, end);
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
    pub fn requeue(&self, job: &Job, request: Arc<VanillaRequest>, why: &str) {
        let mut state = self.state.lock();
        let mut inner = job.inner.lock();
        // Checked under the table's lock, which a cancel takes too: a cancel cannot slip in
        // between the check and the requeue.
        if inner.cancelled.is_some() {
            drop(inner);
            drop(state);
            return self.finish(job, Outcome::Failed(why.to_string()));
        }
        inner.handle = None;
        inner.running = None;
        if job.view.borrow().carried || state.carry_taken {
            // The carry has been taken: the job went with it (it ran when the carry was
            // taken), and no process reads this queue again. Requeued here, it would be neither
            // carried nor ended, and its awaiters would wait for ever.
            drop(inner);
            state.running -= 1;
            return;
        }
        inner.request = Some(request);
        inner.started = None;
        inner.interrupted = false;
        drop(inner);
        state.running -= 1;
        state.queued += 1;
        state.queued_bytes += job.vanilla_bytes;
        state.queue.push((job.priority, Reverse(job.order), job.id.clone()));
        job.update(|v| {
            v.state = JobState::Queued;
            v.started_at_ms = 0;
            v.error = why.to_string();
            v.requeued = true;
        });
        drop(state);
        self.work.notify_all();
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
        if job.view.borrow().carried && running_too {
            // Carried, but the carry is written only once the server has stopped taking calls:
            // the cancel is recorded here and the job left out of it ([`JobTable::still_carried`]),
            // so a cancel sent during the restart is not lost.
            drop(inner);
            state.counters.cancelled += 1;
            state.counters.kinds.ended(job.kind, JobState::Cancelled);
            job.update(|v| {
                v.state = JobState::Cancelled;
                v.error = reason.to_string();
                v.finished_at_ms = unix_ms();
            });
            return JobState::Cancelled;
        }
        if inner.request.take().is_some() {
            // Still queued: it never runs (the heap entry is skipped when popped).
            drop(inner);
            state.queued -= 1;
            state.queued_bytes = state.queued_bytes.saturating_sub(job.vanilla_bytes);
            state.counters.cancelled += 1;
            state.counters.kinds.ended(job.kind, JobState::Cancelled);
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

    /// Stops a running job for the restart: its pipeline request is cancelled (now, or when
    /// the worker submits it: [`Job::attach`]), and the worker requeues it when it fails
    /// ([`Job::is_interrupted`]). A queued or ended job is left alone.
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

    /// The jobs not ended, in the order they would run, with their requests: what the
    /// restarted daemon queues again ([`JobTable::resume`]). The queued ones leave this
    /// table's queue; the ones still running (an interrupt that did not take: a key still
    /// loading) are carried too, and whatever they do here from now on changes nothing
    /// ([`JobTable::finish`], [`JobTable::requeue`]). Each view is marked carried, which ends
    /// its awaiters' waits in this process.
    pub fn take_for_restart(&self) -> Vec<CarriedJob> {
        let mut state = self.state.lock();
        state.carry_taken = true;
        let mut taken = Vec::new();
        while let Some((_, _, id)) = state.queue.pop() {
            let Some(job) = state.jobs.get(&id).cloned() else { continue };
            let Some(request) = job.inner.lock().request.take() else { continue };
            state.queued -= 1;
            state.queued_bytes = state.queued_bytes.saturating_sub(job.vanilla_bytes);
            taken.push((job, request));
        }
        let running: Vec<Arc<Job>> =
            state.jobs.values().filter(|j| !j.view.borrow().state.is_final()).cloned().collect();
        for job in running {
            let request = job.inner.lock().running.clone();
            if let Some(request) = request {
                taken.push((job, request));
            }
        }
        taken.sort_by_key(|(job, _)| (Reverse(job.priority), job.order));
        taken
            .into_iter()
            .map(|(job, request)| {
                job.update(|v| v.carried = true);
                CarriedJob {
                    id: job.id.clone(),
                    key: state.key_of.get(&job.id).cloned().unwrap_or_default(),
                    digest: job.digest,
                    priority: job.priority,
                    submitted_at_ms: job.view.borrow().submitted_at_ms,
                    request,
                }
            })
            .collect()
    }

    /// Of the jobs [`JobTable::take_for_restart`] took, those still to carry: a job cancelled
    /// since (a CancelProof during the restart) is left out.
    pub fn still_carried(&self, carried: Vec<CarriedJob>) -> Vec<CarriedJob> {
        let state = self.state.lock();
        carried
            .into_iter()
            .filter(|c| state.jobs.get(&c.id).is_none_or(|job| !job.view.borrow().state.is_final()))
            .collect()
    }

    /// The succeeded jobs this table still keeps, with their proofs: what the restart carries
    /// so that a proof not yet collected survives it ([`JobTable::resume_proof`]).
    pub fn finished_proofs(&self) -> Vec<CarriedProof> {
        let state = self.state.lock();
        state
            .finished
            .iter()
            .filter_map(|(_, id)| state.jobs.get(id))
            .filter(|job| job.view.borrow().state == JobState::Succeeded)
            .map(|job| {
                let view = job.view();
                CarriedProof {
                    id: job.id.clone(),
                    key: state.key_of.get(&job.id).cloned().unwrap_or_default(),
                    digest: job.digest,
                    kind: job.kind,
                    sector_size: job.sector_size,
                    proof: view.proof.to_vec(),
                    partitions: view.partitions,
                    timings: view.timings,
                    submitted_at_ms: view.submitted_at_ms,
                    started_at_ms: view.started_at_ms,
                    finished_at_ms: view.finished_at_ms,
                }
            })
            .collect()
    }

    /// Keeps a proof an earlier run of this daemon finished before it restarted, under its old
    /// id and key, as a succeeded job: an AwaitProof or a resubmit finds it as it would have
    /// there. Counted among the finished jobs (their bounds apply), not among this run's proofs.
    pub fn resume_proof(&self, carried: CarriedProof) -> Arc<Job> {
        let mut state = self.state.lock();
        let order = state.next;
        state.next += 1;
        let view = JobView {
            id: carried.id.clone(),
            kind: carried.kind,
            state: JobState::Succeeded,
            proof: Arc::from(carried.proof),
            partitions: carried.partitions,
            error: String::new(),
            timings: carried.timings,
            submitted_at_ms: carried.submitted_at_ms,
            started_at_ms: carried.started_at_ms,
            finished_at_ms: carried.finished_at_ms,
            requeued: false,
            carried: false,
        };
        let job = Arc::new(Job {
            id: carried.id.clone(),
            kind: carried.kind,
            priority: Priority::Normal,
            sector_size: carried.sector_size,
            digest: carried.digest,
            order,
            vanilla_bytes: 0,
            submitted: Instant::now(),
            view: watch::Sender::new(view),
            inner: Mutex::new(JobInner::default()),
        });
        state.jobs.insert(carried.id.clone(), job.clone());
        state.by_key.insert(carried.key.clone(), carried.id.clone());
        state.key_of.insert(carried.id.clone(), carried.key);
        state.finished.push_back((Instant::now(), carried.id));
        self.prune(&mut state);
        job
    }

    /// Ends every wait on this table's jobs, those to come included ([`JobTable::released`]):
    /// the process is going away, and what has not ended by now ends with it (or was carried).
    pub fn release_awaiters(&self) {
        self.released.send_replace(true);
    }

    /// Becomes true when [`JobTable::release_awaiters`] is called: an awaiter selects on it
    /// beside its job's view.
    pub fn released(&self) -> watch::Receiver<bool> {
        self.released.subscribe()
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

    #[test]
    fn a_key_whose_job_failed_or_was_cancelled_starts_a_new_job_and_a_succeeded_one_answers() {
        let jobs = table(JobLimits::default());
        let failed = jobs.submit("f", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let (running, _) = jobs.next_job().unwrap();
        jobs.finish(&running, Outcome::Failed("the GPU ran out of memory".into()));
        let retry = jobs.submit("f", [1; 32], Priority::Normal, request("window-post")).unwrap();
        assert!(!retry.existing && retry.job.id != failed.id, "a retry of a failed job got the failure back");
        assert_eq!(retry.job.view().state, JobState::Queued);
        // The old job is still found by its id, as it ended.
        assert_eq!(jobs.get(&failed.id).unwrap().view().state, JobState::Failed);

        let cancelled = jobs.submit("c", [2; 32], Priority::Normal, request("window-post")).unwrap().job;
        assert_eq!(jobs.cancel(&cancelled, "stop"), JobState::Cancelled);
        let retry = jobs.submit("c", [2; 32], Priority::Normal, request("window-post")).unwrap();
        assert!(!retry.existing && retry.job.id != cancelled.id);

        // The twin: a succeeded job answers for its key, and another request under it is refused.
        let jobs = table(JobLimits::default());
        let done = jobs.submit("s", [3; 32], Priority::Normal, request("window-post")).unwrap().job;
        let (running, _) = jobs.next_job().unwrap();
        jobs.finish(&running, Outcome::Proven { proof: vec![7], partitions: 1, timings: ProofTimings::default() });
        let again = jobs.submit("s", [3; 32], Priority::Normal, request("window-post")).unwrap();
        assert!(again.existing && again.job.id == done.id && &*again.job.view().proof == [7]);
        let other = jobs.submit("s", [4; 32], Priority::Normal, request("window-post")).err();
        assert_eq!(other, Some(SubmitRefused::KeyReused { job: done.id.clone() }));
    }

    #[test]
    fn a_job_still_running_when_the_carry_is_taken_is_carried_and_never_requeued_here() {
        let jobs = table(JobLimits::default());
        let slow = jobs.submit("slow", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let queued = jobs.submit("q", [2; 32], Priority::Critical, request("winning-post")).unwrap().job;
        let (running, request_critical) = jobs.next_job_at_least(Priority::Normal).unwrap();
        assert_eq!(running.id, queued.id);
        let (running_slow, request_slow) = jobs.next_job().unwrap();
        assert_eq!(running_slow.id, slow.id);
        jobs.hold_for_restart("GPU 0 broke");
        jobs.requeue(&running, request_critical, "GPU 0 broke");
        // The slow job is still loading its key: the interrupt is only a flag for now.
        jobs.interrupt(&slow);
        assert!(slow.is_interrupted());
        let mut watch = slow.subscribe();
        let carried = jobs.take_for_restart();
        let ids: Vec<_> = carried.iter().map(|j| j.id.clone()).collect();
        assert_eq!(ids, [queued.id.clone(), slow.id.clone()], "the job that did not stop was left behind");
        assert!(watch.has_changed().unwrap() && watch.borrow_and_update().carried);
        // Its worker comes back late: the job is not queued again here, nor ended.
        jobs.requeue(&running_slow, request_slow, "interrupted by the daemon's restart");
        assert!(jobs.take_for_restart().is_empty(), "a job was queued again after the carry");
        assert_eq!(jobs.queue_counts().running, 0);
        assert!(slow.view().carried && slow.view().state == JobState::Running);
        // The twin: before the carry, a requeue does queue it again.
        let jobs = table(JobLimits::default());
        jobs.submit("a", [1; 32], Priority::Normal, request("window-post")).unwrap();
        let (running, request_a) = jobs.next_job().unwrap();
        jobs.requeue(&running, request_a, "GPU 0 broke");
        assert_eq!(jobs.queue_counts().queued[2], 1);
    }

    #[test]
    fn released_awaiters_see_it_even_when_they_subscribe_later() {
        let jobs = table(JobLimits::default());
        let early = jobs.released();
        assert!(!*early.borrow());
        jobs.release_awaiters();
        assert!(*early.borrow() && *jobs.released().borrow());
    }

    #[test]
    fn the_bytes_of_queued_vanilla_proofs_are_bounded() {
        let jobs = table(JobLimits { max_queued_bytes: 100, ..JobLimits::default() });
        // One blob over the bound still goes into an empty queue (the per-request limit is
        // what refuses a blob on its own).
        jobs.submit_sized("big", [1; 32], Priority::Normal, request("window-post"), 150).unwrap();
        let refused = jobs.submit_sized("b", [2; 32], Priority::Normal, request("window-post"), 1).err();
        assert_eq!(refused, Some(SubmitRefused::QueueBytesFull { max: 100, queued: 150 }));
        let (running, _) = jobs.next_job().unwrap();
        let c = jobs.submit_sized("c", [3; 32], Priority::Normal, request("window-post"), 60).unwrap().job;
        let refused = jobs.submit_sized("d", [4; 32], Priority::Normal, request("window-post"), 41).err();
        assert_eq!(refused, Some(SubmitRefused::QueueBytesFull { max: 100, queued: 60 }));
        jobs.submit_sized("e", [5; 32], Priority::Normal, request("window-post"), 40).unwrap();
        // A cancel gives its bytes back.
        let f = jobs.submit("f", [6; 32], Priority::Normal, request("window-post")).unwrap().job;
        jobs.cancel(&f, "stop");
        jobs.cancel(&c, "stop");
        jobs.submit_sized("g", [7; 32], Priority::Normal, request("window-post"), 60).unwrap();
        jobs.finish(&running, Outcome::Failed("x".into()));
    }

    #[test]
    fn a_reserved_worker_takes_only_urgent_jobs() {
        let jobs = table(JobLimits::default());
        let normal = jobs.submit("n", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let critical = jobs.submit("c", [2; 32], Priority::Critical, request("winning-post")).unwrap().job;
        assert_eq!(jobs.next_job_at_least(Priority::High).unwrap().0.id, critical.id);
        // Only normal work is left: a closed table sends the reserved worker away without it,
        // and a general worker still takes it.
        jobs.close();
        assert!(jobs.next_job_at_least(Priority::High).is_none());
        assert_eq!(jobs.next_job().unwrap().0.id, normal.id);
    }

    #[test]
    fn a_cancel_during_the_restart_keeps_the_job_out_of_the_carry() {
        let jobs = table(JobLimits::default());
        let a = jobs.submit("a", [1; 32], Priority::Normal, request("window-post")).unwrap().job;
        let b = jobs.submit("b", [2; 32], Priority::Normal, request("window-post")).unwrap().job;
        jobs.hold_for_restart("GPU 0 broke");
        let carried = jobs.take_for_restart();
        assert_eq!(carried.len(), 2);
        // The server still takes calls until it stops: a cancel comes in for a carried job.
        assert_eq!(jobs.cancel(&a, "cancelled by a CancelProof call"), JobState::Cancelled);
        let kept: Vec<String> = jobs.still_carried(carried).into_iter().map(|j| j.id).collect();
        assert_eq!(kept, [b.id.clone()], "the cancelled job went on into the next process");
        assert_eq!(a.view().state, JobState::Cancelled);
    }

    #[test]
    fn a_finished_proof_is_carried_and_found_by_id_and_key_in_the_next_table() {
        let jobs = table(JobLimits::default());
        let done = jobs.submit("done", [1; 32], Priority::Critical, request("winning-post")).unwrap().job;
        let failed = jobs.submit("failed", [2; 32], Priority::Normal, request("window-post")).unwrap().job;
        let (first, _) = jobs.next_job().unwrap();
        jobs.finish(&first, Outcome::Proven { proof: vec![9; 192], partitions: 1, timings: ProofTimings::default() });
        let (second, _) = jobs.next_job().unwrap();
        jobs.finish(&second, Outcome::Failed("x".into()));
        assert_eq!((first.id.as_str(), second.id.as_str()), (done.id.as_str(), failed.id.as_str()));
        let proofs = jobs.finished_proofs();
        assert_eq!(proofs.iter().map(|p| p.id.clone()).collect::<Vec<_>>(), [done.id.clone()]);
        let next = JobTable::new("next".into(), JobLimits::default());
        for proof in proofs {
            next.resume_proof(proof);
        }
        let found = next.get(&done.id).unwrap().view();
        assert_eq!((found.state, &*found.proof), (JobState::Succeeded, &[9u8; 192][..]));
        let again = next.submit("done", [1; 32], Priority::Critical, request("winning-post")).unwrap();
        assert!(again.existing && again.job.id == done.id);
        // The twin: a failed job is not carried, so its key starts afresh there.
        assert!(next.get(&failed.id).is_err());
        assert!(!next.submit("failed", [2; 32], Priority::Normal, request("window-post")).unwrap().existing);
    }
}
