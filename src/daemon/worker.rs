//! The workers: threads that take the most urgent job, prove it on the shared [`Prover`] and
//! record its end. Proving blocks (synthesis runs on the calling thread), so workers are OS
//! threads, never tasks of the gRPC runtime.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use parking_lot::Mutex;

use super::jobs::{Job, JobTable, Outcome};
use super::restart::RestartPolicy;
use crate::filecoin::{FilecoinProver, KeyName, ProofKind, VanillaRequest};
use crate::params::ProvingKey;
use crate::prover::{Priority, ProofHandle, Prover};

/// The proving key each kind and sector size was last proven with or loaded as, as the
/// prover's key cache holds it: what `PreloadSRS` and `EvictSRS` act on. Held weakly, so that the cache's own
/// eviction (its host-memory bound) is not defeated by this table.
#[derive(Default)]
pub struct SrsTable {
    keys: Mutex<HashMap<(ProofKind, u64), Weak<ProvingKey>>>,
}

impl SrsTable {
    fn remember(&self, kind: ProofKind, sector_size: u64, key: &Arc<ProvingKey>) {
        self.keys.lock().insert((kind, sector_size), Arc::downgrade(key));
    }

    /// The key `name` names: the one remembered while it is in host memory, else loaded from
    /// the parameter directory without a proof ([`FilecoinProver::load_key`]) and remembered.
    /// Blocks for as long as the load takes (the parameter file's read; for a large sector,
    /// a minute or more of recording the blank circuit).
    pub fn key_or_load(&self, prover: &Prover, params_dir: &Path, name: KeyName) -> crate::Result<Arc<ProvingKey>> {
        if let Lookup::Found(key) = self.key(name.kind, name.sector_size) {
            return Ok(key);
        }
        let key = FilecoinProver::with_params_dir(prover, params_dir)?.load_key(name.kind, name.sector_size)?;
        self.remember(name.kind, name.sector_size, &key);
        Ok(key)
    }

    /// The key of `kind` and `sector_size`, if one was proven with and is still in host memory.
    pub fn key(&self, kind: ProofKind, sector_size: u64) -> Lookup {
        match self.keys.lock().get(&(kind, sector_size)) {
            None => Lookup::NeverProven,
            Some(weak) => weak.upgrade().map_or(Lookup::Cold, Lookup::Found),
        }
    }
}

/// What [`SrsTable::key`] found.
pub enum Lookup {
    Found(Arc<ProvingKey>),
    /// Proven with once, since evicted from host memory: the next proof loads it again.
    Cold,
    /// Neither proven nor loaded by this daemon yet.
    NeverProven,
}

/// What every worker shares.
pub struct Workshop {
    pub table: Arc<JobTable>,
    pub prover: Arc<Prover>,
    pub params_dir: PathBuf,
    pub srs: Arc<SrsTable>,
    /// Whether a job that a broken GPU failed waits for the daemon's restart
    /// ([`super::restart`]) instead of failing.
    pub restart: RestartPolicy,
}

/// Starts `count` workers; each exits once the table is closed and its queue is empty.
pub fn start_workers(shop: Arc<Workshop>, count: usize) -> Vec<std::thread::JoinHandle<()>> {
    start_workers_with_reserve(shop, count, 0)
}

/// The lowest priority a reserved worker takes: a Winning PoSt (critical) or a Window PoSt
/// (high) loses money when late; a PoRep (normal) does not.
pub const RESERVED_FOR: Priority = Priority::High;

/// Starts `count` workers that take any job, and `reserved` more that take only jobs of
/// [`RESERVED_FOR`] or above: with every general worker on a PoRep, an urgent job still
/// starts at once, beside them, instead of waiting for a whole PoRep to end. Each exits
/// once the table is closed and its queue is empty.
pub fn start_workers_with_reserve(
    shop: Arc<Workshop>,
    count: usize,
    reserved: usize,
) -> Vec<std::thread::JoinHandle<()>> {
    let general = (0..count.max(1)).map(|i| (format!("daemon-worker-{i}"), Priority::Low));
    let urgent = (0..reserved).map(|i| (format!("daemon-urgent-{i}"), RESERVED_FOR));
    general
        .chain(urgent)
        .map(|(name, floor)| {
            let shop = shop.clone();
            std::thread::Builder::new()
                .name(name)
                .spawn(move || {
                    while let Some((job, request)) = shop.table.next_job_at_least(floor) {
                        match prove(&shop, &job, request) {
                            Ending::Ended(outcome) => shop.table.finish(&job, outcome),
                            Ending::Requeue { request, why } => shop.table.requeue(&job, request, &why),
                        }
                    }
                })
                .expect("spawning a daemon worker thread")
        })
        .collect()
}

/// How a worker's turn with a job ended.
enum Ending {
    Ended(Outcome),
    /// Not the job's own failure: the GPU broke under it (or the restart interrupted it); it
    /// goes back to the queue for the restarted daemon.
    Requeue {
        request: Arc<VanillaRequest>,
        why: String,
    },
}

fn prove(shop: &Workshop, job: &Arc<Job>, request: Arc<VanillaRequest>) -> Ending {
    let span = tracing::info_span!("job", id = %job.id, kind = %job.kind);
    let _entered = span.enter();
    tracing::info!(queued_for = job.queue_wait().as_secs_f64(), "proving");
    let attach = |handle: &ProofHandle| job.attach(handle);
    // A panic in a circuit or in filecoin-proofs ends this job, not the worker or the daemon.
    let proven = std::panic::catch_unwind(AssertUnwindSafe(|| {
        FilecoinProver::with_params_dir(&shop.prover, &shop.params_dir)?.on_submitted(&attach).prove_job(&request)
    }));
    match proven {
        Ok(Ok(proven)) => {
            if let Some(key) = &proven.key {
                shop.srs.remember(job.kind, job.sector_size, key);
            }
            let mut timings = proven.timings;
            timings.queue += job.queue_wait().as_secs_f64();
            timings.total = job.since_submitted().as_secs_f64();
            tracing::info!(seconds = timings.total, "proven and verified");
            Ending::Ended(Outcome::Proven { proof: proven.bytes, partitions: proven.partitions, timings })
        }
        Ok(Err(_)) if job.is_interrupted() => {
            tracing::info!("interrupted by the daemon's restart: queued again");
            Ending::Requeue { request, why: "interrupted by the daemon's restart; it is proven after it".into() }
        }
        // Not the job's fault: the GPU broke under it, and the restart gives the GPU back.
        Ok(Err(err)) if err.breaks_device() && !shop.prover.needs_restart().is_empty() && shop.restart.allows_now() => {
            tracing::warn!(%err, "the GPU broke under the job: queued again for the daemon's restart");
            // Held before the requeue, so that no worker takes the job again before the restart
            // (it would fail at once on the broken GPU, and again, and again).
            shop.table.hold_for_restart(&format!("a GPU broke: {err}"));
            Ending::Requeue { request, why: format!("queued again for the daemon's restart: {err}") }
        }
        Ok(Err(err)) => {
            tracing::warn!(%err, "failed");
            Ending::Ended(Outcome::Failed(err.to_string()))
        }
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "no message".into());
            tracing::error!(%message, "proving panicked");
            Ending::Ended(Outcome::Failed(format!("proving panicked (a bug; please report it): {message}")))
        }
    }
}
