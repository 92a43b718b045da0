//! The gRPC service: checks each request, maps it onto the job table and the prover, and
//! answers with typed statuses whose messages say what to change.
// tonic's `Status` is large, and it is what every handler returns: boxing it in the helpers
// only to unbox it at the boundary would buy nothing.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tonic::{Request, Response, Status};

use super::jobs::{JobState, JobTable, JobView, Missing, SubmitRefused};
use super::metrics;
use super::pb;
use super::pb::proving_service_server::ProvingService;
use super::worker::{Lookup, SrsTable};
use crate::filecoin::{check_sector_size, sector_size_name, KeyName, ProofKind, VanillaRequest};
use crate::params::cache::KeyTier;
use crate::prover::{Priority, Prover};

/// Longest idempotency key accepted: keys are held in memory for as long as their jobs.
pub const MAX_KEY_BYTES: usize = 256;

/// The service's state.
pub struct ProvingDaemon {
    pub table: Arc<JobTable>,
    pub prover: Arc<Prover>,
    pub srs: Arc<SrsTable>,
    /// The parameter directory, where `PreloadSRS` loads a key by name.
    pub params_dir: std::path::PathBuf,
    /// Largest vanilla blob a submit may carry.
    pub max_vanilla_bytes: usize,
    pub started: Instant,
    /// Times this daemon replaced itself after a GPU broke (see [`super::restart`]).
    pub restarts: u32,
    /// Each GPU's busy time, for the metrics ([`metrics::sample_gpu_busy`] fills it).
    pub gpu_busy: Arc<metrics::GpuBusy>,
}

pub(crate) fn kind_from_pb(value: i32) -> Result<ProofKind, Status> {
    let names = "PROOF_KIND_POREP_C2, PROOF_KIND_SNAP_DEALS, PROOF_KIND_WINDOW_POST or PROOF_KIND_WINNING_POST";
    match pb::ProofKind::try_from(value) {
        Ok(pb::ProofKind::PorepC2) => Ok(ProofKind::Porep),
        Ok(pb::ProofKind::SnapDeals) => Ok(ProofKind::Snap),
        Ok(pb::ProofKind::WindowPost) => Ok(ProofKind::WindowPost),
        Ok(pb::ProofKind::WinningPost) => Ok(ProofKind::WinningPost),
        Ok(pb::ProofKind::Unspecified) => {
            Err(Status::invalid_argument(format!("the proof kind is not set; set {names}")))
        }
        Err(_) => Err(Status::invalid_argument(format!("unknown proof kind {value}; this daemon proves {names}"))),
    }
}

fn kind_to_pb(kind: ProofKind) -> pb::ProofKind {
    match kind {
        ProofKind::Porep => pb::ProofKind::PorepC2,
        ProofKind::Snap => pb::ProofKind::SnapDeals,
        ProofKind::WindowPost => pb::ProofKind::WindowPost,
        ProofKind::WinningPost => pb::ProofKind::WinningPost,
    }
}

fn priority_from_pb(value: i32, kind: ProofKind) -> Result<Priority, Status> {
    match pb::Priority::try_from(value) {
        Ok(pb::Priority::Unspecified) => Ok(kind.priority()),
        Ok(pb::Priority::Low) => Ok(Priority::Low),
        Ok(pb::Priority::Normal) => Ok(Priority::Normal),
        Ok(pb::Priority::High) => Ok(Priority::High),
        Ok(pb::Priority::Critical) => Ok(Priority::Critical),
        Err(_) => Err(Status::invalid_argument(format!(
            "unknown priority {value}; use PRIORITY_LOW, _NORMAL, _HIGH, _CRITICAL or leave it unset for the kind's own"
        ))),
    }
}

pub(crate) fn state_to_pb(state: JobState) -> pb::JobState {
    match state {
        JobState::Queued => pb::JobState::Queued,
        JobState::Running => pb::JobState::Running,
        JobState::Succeeded => pb::JobState::Succeeded,
        JobState::Failed => pb::JobState::Failed,
        JobState::Cancelled => pb::JobState::Cancelled,
    }
}

fn result_of(view: &JobView) -> pb::ProofResult {
    let t = &view.timings;
    pb::ProofResult {
        job_id: view.id.clone(),
        state: state_to_pb(view.state) as i32,
        kind: kind_to_pb(view.kind) as i32,
        proof: view.proof.to_vec(),
        partitions: view.partitions as u32,
        error: view.error.clone(),
        timings: Some(pb::Timings {
            queue_wait: t.queue,
            key_load: t.key_load,
            synthesis: t.synthesis,
            gpu: t.gpu,
            verify: t.verify,
            total: t.total,
        }),
        submitted_at_ms: view.submitted_at_ms,
        started_at_ms: view.started_at_ms,
        finished_at_ms: view.finished_at_ms,
    }
}

fn tier_name(tier: KeyTier) -> &'static str {
    match tier {
        KeyTier::Hot => "hot",
        KeyTier::Warm => "warm",
        KeyTier::Cold => "cold",
    }
}

impl ProvingDaemon {
    fn submit(&self, request: pb::SubmitProofRequest) -> Result<pb::SubmitProofResponse, Status> {
        let key = request.idempotency_key;
        if key.is_empty() {
            return Err(Status::invalid_argument(
                "idempotency_key is empty; give every proof a key of its own (a retry reuses it)",
            ));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(Status::invalid_argument(format!(
                "idempotency_key has {} bytes, more than the {MAX_KEY_BYTES} accepted",
                key.len()
            )));
        }
        let kind = kind_from_pb(request.kind)?;
        let priority = priority_from_pb(request.priority, kind)?;
        if request.vanilla.len() > self.max_vanilla_bytes {
            return Err(Status::resource_exhausted(format!(
                "the vanilla proof has {} bytes, more than this daemon's limit of {} (--max-vanilla-bytes)",
                request.vanilla.len(),
                self.max_vanilla_bytes
            )));
        }
        check_sector_size(request.sector_size).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let text = std::str::from_utf8(&request.vanilla)
            .map_err(|e| Status::invalid_argument(format!("the vanilla proof is not UTF-8 JSON: {e}")))?;
        let vanilla = VanillaRequest::parse(text)
            .map_err(|why| Status::invalid_argument(format!("the vanilla proof is malformed: {why}")))?;
        if vanilla.kind() != kind {
            return Err(Status::invalid_argument(format!(
                "the request is for a {kind} proof but the vanilla proof is a {}",
                vanilla.kind()
            )));
        }
        if vanilla.sector_size() != request.sector_size {
            return Err(Status::invalid_argument(format!(
                "the request says sector size {} ({}) but the vanilla proof is of a {} sector",
                request.sector_size,
                sector_size_name(request.sector_size),
                sector_size_name(vanilla.sector_size())
            )));
        }
        let mut digest = Sha256::new();
        digest.update([kind as u8]);
        digest.update(request.sector_size.to_le_bytes());
        digest.update(&request.vanilla);
        let digest: [u8; 32] = digest.finalize().into();
        let bytes = request.vanilla.len() as u64;
        match self.table.submit_sized(&key, digest, priority, vanilla, bytes) {
            Ok(submitted) => {
                if !submitted.existing {
                    tracing::info!(job = %submitted.job.id, %kind, ?priority, "queued");
                }
                Ok(pb::SubmitProofResponse {
                    job_id: submitted.job.id.clone(),
                    existing: submitted.existing,
                    state: state_to_pb(submitted.job.view().state) as i32,
                })
            }
            Err(SubmitRefused::KeyReused { job }) => Err(Status::already_exists(format!(
                "idempotency key {key:?} already names job {job}, submitted with another request; use a new key \
                 for a new proof"
            ))),
            Err(SubmitRefused::QueueFull { max }) => Err(Status::resource_exhausted(format!(
                "{max} jobs are queued already (--max-queued); submit again once some have run"
            ))),
            Err(SubmitRefused::QueueBytesFull { max, queued }) => Err(Status::resource_exhausted(format!(
                "the queued jobs' vanilla proofs hold {queued} bytes, and this one's {bytes} more would pass the \
                 bound of {max} (--max-queued-bytes); submit again once some have run"
            ))),
            Err(SubmitRefused::ShuttingDown) => {
                Err(Status::unavailable("the daemon is shutting down and takes no new jobs; submit to its successor"))
            }
            Err(SubmitRefused::Restarting { why }) => Err(Status::unavailable(format!(
                "the daemon is restarting itself ({why}); its queued jobs carry over: submit again in a few seconds"
            ))),
        }
    }

    fn job(&self, id: &str) -> Result<Arc<super::jobs::Job>, Status> {
        self.table.get(id).map_err(|missing| match missing {
            Missing::EarlierRun { instance } => Status::not_found(format!(
                "job {id} belongs to an earlier run of the daemon (instance {instance}), which ended before \
                 this one (instance {}) started; its result is lost: submit the proof again",
                self.table.instance
            )),
            Missing::Forgotten => Status::not_found(format!(
                "job {id} ended long enough ago to have been forgotten (--keep-finished, --keep-finished-secs); \
                 submit the proof again if its result was not collected"
            )),
            Missing::NoSuchJob => Status::not_found(format!("no job {id:?}: ids are what SubmitProof returns")),
        })
    }

    /// Waits for the job to end (or, `until_started`, to leave the queue), or for the process
    /// to go away ([`super::jobs::JobTable::release_awaiters`]): a wait never outlives it, so
    /// it never holds the server's graceful end.
    async fn await_job(&self, id: &str, timeout_ms: u64, until_started: bool) -> Result<pb::ProofResult, Status> {
        let job = self.job(id)?;
        let mut watch = job.subscribe();
        let mut released = self.table.released();
        let going = async move {
            // The sender lives with the table, which this call holds: it cannot close.
            if released.wait_for(|r| *r).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let ended = async {
            // The sender lives with the job, which this call holds: the channel cannot close.
            let reached =
                |v: &JobView| v.state.is_final() || v.carried || (until_started && v.state != JobState::Queued);
            let view = watch.wait_for(reached).await.map(|v| v.clone());
            view.map_err(|_| Status::internal(format!("job {id} lost its state channel (a bug)")))
        };
        let bounded = async {
            if timeout_ms == 0 {
                return ended.await;
            }
            match tokio::time::timeout(Duration::from_millis(timeout_ms), ended).await {
                Ok(view) => view,
                Err(_) => {
                    let state = job.view().state;
                    Err(Status::deadline_exceeded(format!(
                        "job {id} is still {} after {timeout_ms} ms; call AwaitProof again",
                        if state == JobState::Queued { "queued" } else { "running" }
                    )))
                }
            }
        };
        let view = tokio::select! {
            view = bounded => view?,
            () = going => {
                let view = job.view();
                if !view.state.is_final() && !view.carried {
                    return Err(Status::unavailable(format!(
                        "the daemon shut down while job {id} was still {}: its result is lost with this process; \
                         submit it again to the daemon's successor",
                        if view.state == JobState::Queued { "queued" } else { "running" }
                    )));
                }
                view
            }
        };
        if view.carried && !view.state.is_final() {
            // The restart ends this process's wait; the job goes on in the next process.
            return Err(Status::unavailable(format!(
                "the daemon is restarting (a GPU broke) and job {id} carries over: call AwaitProof for {id} again \
                 once the daemon serves"
            )));
        }
        Ok(result_of(&view))
    }

    /// What `GetStatus` answers; `/status` serves the same ([`super::http`]). Blocking.
    pub(crate) fn status(&self) -> pb::StatusResponse {
        // Each running job with the devices its partitions are on now.
        let running: Vec<(String, Vec<usize>)> =
            self.table.running().into_iter().map(|job| (job.id.clone(), job.devices_in_use())).collect();
        let infos: Vec<_> = self.prover.devices().iter().map(|d| d.info()).collect();
        let free = self.prover.device_free_bytes();
        let gpus = self
            .prover
            .device_status()
            .into_iter()
            .map(|d| {
                let info = infos.iter().find(|i| i.ordinal == d.ordinal);
                let index = infos.iter().position(|i| i.ordinal == d.ordinal);
                pb::Gpu {
                    ordinal: d.ordinal as u32,
                    name: info.map(|i| i.name.clone()).unwrap_or_default(),
                    total_bytes: info.map_or(0, |i| i.capacity_bytes),
                    free_bytes: index.and_then(|i| free.get(i).copied().flatten()).unwrap_or(0),
                    health: format!("{:?}", d.health),
                    partitions_in_flight: d.in_flight as u32,
                    current_jobs: running
                        .iter()
                        .filter(|(_, devices)| devices.contains(&d.ordinal))
                        .map(|(id, _)| id.clone())
                        .collect(),
                    memory_budget_bytes: d.memory_budget_bytes,
                    key_residency: d
                        .keys
                        .iter()
                        .map(|k| pb::KeyResidency {
                            resident: k.resident.iter().map(|v| v.to_string()).collect(),
                            streamed: k.streamed.iter().map(|v| v.to_string()).collect(),
                            resident_bytes: k.resident_bytes,
                            chunk_points: k.chunk_points.unwrap_or(0) as u64,
                            partitions: k.partitions as u32,
                        })
                        .collect(),
                }
            })
            .collect();
        let keys = self
            .prover
            .key_cache_status()
            .entries
            .into_iter()
            .map(|e| pb::Key {
                params_file: e.identity.file.map(|f| f.path.display().to_string()).unwrap_or_default(),
                tier: tier_name(e.tier).to_string(),
                host_bytes: e.bytes,
                devices: e.devices.iter().map(|d| *d as u32).collect(),
                hits: e.hits,
                loads: e.loads,
            })
            .collect();
        let queues = self.table.queue_counts();
        let counters = self.table.counters();
        let held = self.prover.held().ok().map(|h| pb::Held {
            budget_leaked_bytes: h.budget_leaked_bytes,
            pinned_leaked_bytes: h.pinned_leaked_bytes,
            synthesis_host_bytes: h.synthesis_host_bytes,
            waiting_grants: h.waiting_grants as u32,
            unfinished_requests: h.unfinished_requests as u32,
        });
        pb::StatusResponse {
            instance: self.table.instance.clone(),
            backend: format!("{:?}", self.prover.backend()).to_lowercase(),
            uptime_seconds: self.started.elapsed().as_secs_f64(),
            gpus,
            keys,
            queues: Some(pb::Queues {
                queued: queues.queued.iter().sum::<usize>() as u32,
                running: queues.running as u32,
                queued_critical: queues.queued[0] as u32,
                queued_high: queues.queued[1] as u32,
                queued_normal: queues.queued[2] as u32,
                queued_low: queues.queued[3] as u32,
            }),
            proofs_completed: counters.completed,
            proofs_failed: counters.failed,
            proofs_cancelled: counters.cancelled,
            held,
            shutting_down: self.table.is_closing(),
            restarts: self.restarts,
        }
    }

    fn srs(&self, request: &pb::SrsRequest, preload: bool) -> Result<pb::SrsResponse, Status> {
        let kind = kind_from_pb(request.kind)?;
        check_sector_size(request.sector_size).map_err(|e| Status::invalid_argument(e.to_string()))?;
        let name = KeyName { kind, sector_size: request.sector_size };
        let key = if preload {
            // A key never proven with, or evicted from host memory, is loaded by name.
            // A missing or damaged parameter file is the node's to fix; a broken invariant is ours.
            let key = self.srs.key_or_load(&self.prover, &self.params_dir, name).map_err(|e| match e {
                crate::Error::Internal(_) | crate::Error::Panicked { .. } => {
                    Status::internal(format!("loading the {name} key: {e}"))
                }
                _ => Status::failed_precondition(format!("loading the {name} key: {e}")),
            })?;
            self.prover
                .preload(&key, None)
                .map_err(|e| Status::resource_exhausted(format!("preloading the {name} key: {e}")))?;
            key
        } else {
            let key = match self.srs.key(kind, request.sector_size) {
                Lookup::Found(key) => key,
                // Nothing of it is on a device or in host memory: already evicted.
                Lookup::Cold | Lookup::NeverProven => {
                    return Ok(pb::SrsResponse { tier: "cold".into(), devices: Vec::new() })
                }
            };
            self.prover.evict(&key, None);
            key
        };
        let devices: Vec<u32> = self
            .prover
            .devices()
            .iter()
            .map(|d| d.info().ordinal)
            .filter(|o| self.prover.is_resident(&key, *o))
            .map(|o| o as u32)
            .collect();
        let tier = if devices.is_empty() { "warm" } else { "hot" };
        Ok(pb::SrsResponse { tier: tier.into(), devices })
    }
}

#[tonic::async_trait]
impl ProvingService for Arc<ProvingDaemon> {
    async fn submit_proof(
        &self,
        request: Request<pb::SubmitProofRequest>,
    ) -> Result<Response<pb::SubmitProofResponse>, Status> {
        off_runtime(self, move |daemon| daemon.submit(request.into_inner())).await.map(Response::new)
    }

    async fn await_proof(&self, request: Request<pb::AwaitProofRequest>) -> Result<Response<pb::ProofResult>, Status> {
        let request = request.into_inner();
        self.await_job(&request.job_id, request.timeout_ms, request.until_started).await.map(Response::new)
    }

    async fn prove(&self, request: Request<pb::ProveRequest>) -> Result<Response<pb::ProofResult>, Status> {
        let request = request.into_inner();
        let submit = request.submit.ok_or_else(|| Status::invalid_argument("Prove needs its submit request"))?;
        let submitted = off_runtime(self, move |daemon| daemon.submit(submit)).await?;
        self.await_job(&submitted.job_id, request.timeout_ms, false).await.map(Response::new)
    }

    async fn cancel_proof(
        &self,
        request: Request<pb::CancelProofRequest>,
    ) -> Result<Response<pb::CancelProofResponse>, Status> {
        let id = request.into_inner().job_id;
        let job = self.job(&id)?;
        let state = self.table.cancel(&job, "cancelled by a CancelProof call");
        tracing::info!(job = %id, ?state, "cancel asked for");
        let state = if state == JobState::Running {
            // A running job stops at its partitions' next stage, or, while its first partition
            // is still synthesized and its key found, when its partitions are queued: wait a
            // little for that; past it the answer is RUNNING and AwaitProof tells the end.
            let mut watch = job.subscribe();
            let ended = async move { watch.wait_for(|v| v.state.is_final()).await.map(|v| v.state) };
            tokio::time::timeout(Duration::from_secs(10), ended)
                .await
                .ok()
                .and_then(|s| s.ok())
                .unwrap_or(JobState::Running)
        } else {
            state
        };
        Ok(Response::new(pb::CancelProofResponse { state: state_to_pb(state) as i32 }))
    }

    async fn get_status(&self, _: Request<pb::GetStatusRequest>) -> Result<Response<pb::StatusResponse>, Status> {
        off_runtime(self, |daemon| Ok(daemon.status())).await.map(Response::new)
    }

    async fn get_metrics(&self, _: Request<pb::GetMetricsRequest>) -> Result<Response<pb::MetricsResponse>, Status> {
        let text = off_runtime(self, |daemon| Ok(metrics::exposition(daemon))).await?;
        Ok(Response::new(pb::MetricsResponse { text }))
    }

    async fn preload_srs(&self, request: Request<pb::SrsRequest>) -> Result<Response<pb::SrsResponse>, Status> {
        // Uploading a key takes seconds on a GPU, loading one minutes.
        off_runtime(self, move |daemon| daemon.srs(&request.into_inner(), true)).await.map(Response::new)
    }

    async fn evict_srs(&self, request: Request<pb::SrsRequest>) -> Result<Response<pb::SrsResponse>, Status> {
        off_runtime(self, move |daemon| daemon.srs(&request.into_inner(), false)).await.map(Response::new)
    }
}

/// Runs a handler's blocking part (parsing and hashing a vanilla blob of up to
/// `--max-vanilla-bytes`, the status's reads of the prover, a key's load) on tokio's blocking
/// pool. The runtime's few async threads then only move bytes and wake awaiters, so an
/// `AwaitProof` is answered as soon as its job ends, whatever other calls are doing; and a
/// handler that the server drops at its end leaves no async thread blocked.
async fn off_runtime<T: Send + 'static>(
    daemon: &Arc<ProvingDaemon>,
    work: impl FnOnce(&ProvingDaemon) -> Result<T, Status> + Send + 'static,
) -> Result<T, Status> {
    let daemon = daemon.clone();
    tokio::task::spawn_blocking(move || work(&daemon))
        .await
        .unwrap_or_else(|e| Err(Status::internal(format!("a request handler failed (a bug; please report it): {e}"))))
}
