//! The door Curio already knows: `cuzk.v1.ProvingEngine` (proto/cuzk.proto), served beside
//! snarkpipe's own service on the same socket, the same job table and the same prover.
//!
//! Each call is turned into the snarkpipe service's own call ([`ProvingDaemon`]), so that
//! checks, statuses, idempotency and bounds are one code path for both doors:
//!
//! - the request's node formats (Curio's C1 envelope, filecoin-ffi's bincode vanilla proofs,
//!   registered proofs in filecoin-ffi's numbering, the miner's actor id) become a vanilla job
//!   ([`crate::filecoin::node_formats`]);
//! - `request_id` becomes the idempotency key together with a digest of the job, so that a
//!   retry of the same proof finds its job, and the same name reused for another proof (a
//!   sector sealed again under a new ticket) is a proof of its own rather than a refusal;
//! - results, timings (milliseconds), queues, GPUs and keys are read back in the contract's
//!   shapes; keys are named by circuit id (`porep-32g`, `wpost-32g`, `winning-32g`, `snap-32g`).

// tonic's `Status` is what every handler returns (see service.rs).
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::time::Instant;

use sha2::{Digest, Sha256};
use tonic::{Code, Request, Response, Status};

use super::cuzk_pb as cz;
use super::cuzk_pb::proving_engine_server::{ProvingEngine, ProvingEngineServer};
use super::jobs::JobState;
use super::pb;
use super::pb::proving_service_server::ProvingService;
use super::service::ProvingDaemon;
use super::worker::Lookup;
use crate::filecoin::node_formats::{self, NodeFormatError, PorepInput};
use crate::filecoin::{sector_size_name, KeyName, ProofKind, VanillaRequest, SECTOR_SIZES};

/// Longest `request_id` taken: the idempotency key adds a prefix and a digest to it, and the
/// daemon bounds keys (see [`super::service::MAX_KEY_BYTES`]).
pub const MAX_REQUEST_ID_BYTES: usize = 200;

/// The service: the snarkpipe daemon seen through the cuzk contract.
pub struct CuzkDoor {
    daemon: Arc<ProvingDaemon>,
}

impl CuzkDoor {
    /// The tonic service for `daemon`, taking messages large enough to carry a C1 envelope of
    /// `max_vanilla_bytes` (base64 makes a C1 output a third larger) and a little more.
    pub fn server(daemon: Arc<ProvingDaemon>, max_vanilla_bytes: usize) -> ProvingEngineServer<CuzkDoor> {
        let max_message = (max_vanilla_bytes / 3).saturating_mul(4).saturating_add(1 << 20);
        ProvingEngineServer::new(CuzkDoor { daemon })
            .max_decoding_message_size(max_message)
            .max_encoding_message_size(64 << 20)
    }
}

fn invalid(why: impl std::fmt::Display) -> Status {
    Status::invalid_argument(why.to_string())
}

fn node_error(err: NodeFormatError) -> Status {
    invalid(err)
}

/// The contract's name of a kind, as GetStatus reports it.
fn kind_name(kind: ProofKind) -> &'static str {
    match kind {
        ProofKind::Porep => "POREP_SEAL_COMMIT",
        ProofKind::Snap => "SNAP_DEALS_UPDATE",
        ProofKind::WindowPost => "WINDOW_POST_PARTITION",
        ProofKind::WinningPost => "WINNING_POST",
    }
}

fn kind_from_cuzk(value: i32) -> Result<ProofKind, Status> {
    let names = "POREP_SEAL_COMMIT, SNAP_DEALS_UPDATE, WINDOW_POST_PARTITION or WINNING_POST";
    match cz::ProofKind::try_from(value) {
        Ok(cz::ProofKind::PorepSealCommit) => Ok(ProofKind::Porep),
        Ok(cz::ProofKind::SnapDealsUpdate) => Ok(ProofKind::Snap),
        Ok(cz::ProofKind::WindowPostPartition) => Ok(ProofKind::WindowPost),
        Ok(cz::ProofKind::WinningPost) => Ok(ProofKind::WinningPost),
        Ok(cz::ProofKind::Unspecified) => Err(invalid(format!("proof_kind is not set; set {names}"))),
        Err(_) => Err(invalid(format!("unknown proof_kind {value}; this daemon proves {names}"))),
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

fn priority_to_pb(value: i32) -> Result<pb::Priority, Status> {
    match cz::Priority::try_from(value) {
        Ok(cz::Priority::Unspecified) => Ok(pb::Priority::Unspecified),
        Ok(cz::Priority::Low) => Ok(pb::Priority::Low),
        Ok(cz::Priority::Normal) => Ok(pb::Priority::Normal),
        Ok(cz::Priority::High) => Ok(pb::Priority::High),
        Ok(cz::Priority::Critical) => Ok(pb::Priority::Critical),
        Err(_) => Err(invalid(format!("unknown priority {value}; use LOW, NORMAL, HIGH or CRITICAL"))),
    }
}

fn bytes32(what: &str, bytes: &[u8]) -> Result<[u8; 32], Status> {
    bytes.try_into().map_err(|_| invalid(format!("{what} must be 32 bytes; it has {}", bytes.len())))
}

/// The circuit id of a key: `porep-32g`, `snap-2k`, `wpost-512m`, `winning-64g`.
pub fn circuit_id(name: KeyName) -> String {
    let kind = match name.kind {
        ProofKind::Porep => "porep",
        ProofKind::Snap => "snap",
        ProofKind::WindowPost => "wpost",
        ProofKind::WinningPost => "winning",
    };
    let size = sector_size_name(name.sector_size).replace(' ', "");
    let size = size.trim_end_matches("iB").to_ascii_lowercase();
    format!("{kind}-{size}")
}

/// Reads a circuit id; snarkpipe's own key names (`window-post-32g`) are taken too.
pub fn parse_circuit_id(id: &str) -> Result<KeyName, Status> {
    let usage = || {
        invalid(format!(
            "circuit_id {id:?} is not one this daemon knows: write KIND-SIZE, KIND one of porep, snap, wpost, winning \
             and SIZE one of 2k, 8m, 512m, 32g, 64g (porep-32g, wpost-64g)"
        ))
    };
    let lower = id.trim().to_ascii_lowercase();
    let (kind, size) = lower.rsplit_once('-').ok_or_else(usage)?;
    let kind = match kind {
        "porep" | "porep-c2" | "seal" => ProofKind::Porep,
        "snap" | "snap-deals" | "update" => ProofKind::Snap,
        "wpost" | "window" | "window-post" => ProofKind::WindowPost,
        "winning" | "winpost" | "winning-post" => ProofKind::WinningPost,
        _ => return Err(usage()),
    };
    format!("{}-{size}", kind.name()).parse::<KeyName>().map_err(|_| usage())
}

/// What a submit asks for, as a vanilla job of the snarkpipe service.
struct Asked {
    kind: ProofKind,
    job: VanillaRequest,
}

/// Turns the contract's request into a vanilla job, checking each field against the others.
fn asked(request: &cz::SubmitProofRequest) -> Result<Asked, Status> {
    let kind = kind_from_cuzk(request.proof_kind)?;
    let registered = request.registered_proof;
    let job = match kind {
        ProofKind::Porep => {
            let proof = node_formats::seal_proof_from_ffi(registered).map_err(node_error)?;
            node_formats::check_seal_proof_supported(proof).map_err(node_error)?;
            if request.vanilla_proof.is_empty() {
                return Err(invalid(
                    "a PoRep's C1 output goes in vanilla_proof (Curio's envelope, or filecoin-ffi's JSON); it is empty",
                ));
            }
            let porep = match node_formats::porep_input_format(&request.vanilla_proof).map_err(node_error)? {
                PorepInput::Envelope => node_formats::porep_job_from_envelope(&request.vanilla_proof, request.miner_id),
                PorepInput::FfiC1 => {
                    node_formats::porep_job_from_ffi_c1(&request.vanilla_proof, request.miner_id, request.sector_number)
                }
                PorepInput::SnarkpipeJob => return Err(invalid(
                    "vanilla_proof holds a snarkpipe job file; this door takes Curio's C1 envelope or filecoin-ffi's \
                         C1 output (send snarkpipe jobs to snarkpipe.v1.ProvingService)",
                )),
            }
            .map_err(node_error)?;
            if porep.proof != proof {
                return Err(invalid(format!(
                    "registered_proof {registered} is {proof:?} but the C1 output is of {:?}",
                    porep.proof
                )));
            }
            if porep.sector_number != request.sector_number {
                return Err(invalid(format!(
                    "sector_number is {} but the C1 envelope is of sector {}",
                    request.sector_number, porep.sector_number
                )));
            }
            porep.job
        }
        ProofKind::WindowPost | ProofKind::WinningPost => {
            let proof = node_formats::post_proof_from_ffi(registered).map_err(node_error)?;
            let typ = match kind {
                ProofKind::WindowPost => filecoin_proofs_api::PoStType::Window,
                _ => filecoin_proofs_api::PoStType::Winning,
            };
            if proof.typ() != typ {
                return Err(invalid(format!(
                    "registered_proof {registered} is {proof:?}, a {:?} PoSt, but proof_kind is {}",
                    proof.typ(),
                    kind_name(kind)
                )));
            }
            let randomness = bytes32("randomness", &request.randomness)?;
            let partition = (kind == ProofKind::WindowPost).then_some(request.partition_index as usize);
            node_formats::post_job_from_ffi(
                proof,
                &request.vanilla_proofs,
                randomness,
                node_formats::prover_id_of_miner(request.miner_id),
                partition,
            )
            .map_err(node_error)?
        }
        ProofKind::Snap => {
            let proof = node_formats::update_proof_from_ffi(registered).map_err(node_error)?;
            node_formats::snap_job_from_ffi(
                proof,
                &request.vanilla_proofs,
                bytes32("comm_r_old", &request.comm_r_old)?,
                bytes32("comm_r_new", &request.comm_r_new)?,
                bytes32("comm_d_new", &request.comm_d_new)?,
            )
            .map_err(node_error)?
        }
    };
    if job.sector_size() != request.sector_size {
        return Err(invalid(format!(
            "sector_size is {} ({}) but registered_proof {registered} is of a {} sector",
            request.sector_size,
            sector_size_name(request.sector_size),
            sector_size_name(job.sector_size())
        )));
    }
    Ok(Asked { kind, job })
}

fn await_response(job_id: &str, result: pb::ProofResult) -> cz::AwaitProofResponse {
    use cz::await_proof_response::Status as S;
    let status = match pb::JobState::try_from(result.state) {
        Ok(pb::JobState::Succeeded) => S::Completed,
        Ok(pb::JobState::Failed) => S::Failed,
        Ok(pb::JobState::Cancelled) => S::Cancelled,
        _ => S::Unknown,
    };
    let t = result.timings.unwrap_or_default();
    let ms = |seconds: f64| (seconds * 1000.0).round().max(0.0) as u64;
    cz::AwaitProofResponse {
        job_id: job_id.to_string(),
        status: status as i32,
        proof: result.proof,
        error_message: result.error,
        queue_wait_ms: ms(t.queue_wait),
        srs_load_ms: ms(t.key_load),
        synthesis_ms: ms(t.synthesis),
        gpu_compute_ms: ms(t.gpu),
        total_ms: ms(t.total),
    }
}

impl CuzkDoor {
    async fn submit(&self, request: cz::SubmitProofRequest) -> Result<cz::SubmitProofResponse, Status> {
        let id = &request.request_id;
        if id.is_empty() {
            return Err(invalid("request_id is empty; name every proof (a retry reuses the name)"));
        }
        if id.len() > MAX_REQUEST_ID_BYTES {
            return Err(invalid(format!(
                "request_id has {} bytes, more than the {MAX_REQUEST_ID_BYTES} accepted",
                id.len()
            )));
        }
        let priority = priority_to_pb(request.priority)?;
        // Decoding a large C1 envelope takes a while: off the runtime's async threads.
        let (asked, json) = tokio::task::block_in_place(|| {
            let asked = asked(&request)?;
            let json = node_formats::job_json(&asked.job);
            Ok::<_, Status>((asked, json))
        })?;
        let digest = hex::encode(&Sha256::digest(json.as_bytes())[..12]);
        let key = format!("cuzk/{id}/{digest}");
        let submit = pb::SubmitProofRequest {
            idempotency_key: key,
            kind: kind_to_pb(asked.kind) as i32,
            sector_size: asked.job.sector_size(),
            vanilla: json.into_bytes(),
            priority: priority as i32,
        };
        let submitted = ProvingService::submit_proof(&self.daemon, Request::new(submit)).await?.into_inner();
        let (queue_position, assigned_gpu) = self.place_of(&submitted.job_id);
        Ok(cz::SubmitProofResponse { job_id: submitted.job_id, queue_position, assigned_gpu })
    }

    /// Jobs queued ahead of this one, and the GPU it is on (if any).
    fn place_of(&self, job_id: &str) -> (u32, String) {
        let Ok(job) = self.daemon.table.get(job_id) else { return (0, String::new()) };
        let gpu = job.devices_in_use().first().map(|d| d.to_string()).unwrap_or_default();
        let view = job.view();
        if view.state != JobState::Queued {
            return (0, gpu);
        }
        let ahead = self
            .daemon
            .table
            .unfinished()
            .iter()
            .filter(|other| other.id != job.id)
            .filter(|other| {
                let v = other.view();
                v.state == JobState::Queued
                    && (other.priority > job.priority
                        || (other.priority == job.priority && v.submitted_at_ms <= view.submitted_at_ms))
            })
            .count();
        (ahead as u32, gpu)
    }

    async fn await_job(&self, job_id: &str, timeout_ms: u64) -> Result<cz::AwaitProofResponse, Status> {
        let request = pb::AwaitProofRequest { job_id: job_id.to_string(), timeout_ms, until_started: false };
        match ProvingService::await_proof(&self.daemon, Request::new(request)).await {
            Ok(result) => Ok(await_response(job_id, result.into_inner())),
            // The contract says a wait that ran out in a status of its own, not an error.
            Err(status) if status.code() == Code::DeadlineExceeded => Ok(cz::AwaitProofResponse {
                job_id: job_id.to_string(),
                status: cz::await_proof_response::Status::Timeout as i32,
                error_message: status.message().to_string(),
                ..Default::default()
            }),
            Err(status) => Err(status),
        }
    }

    /// The key of `name` as the daemon holds it, and whether it is on a device.
    fn key_state(&self, name: KeyName) -> (Lookup, bool) {
        let lookup = self.daemon.srs.key(name.kind, name.sector_size);
        let hot = match &lookup {
            Lookup::Found(key) => {
                self.daemon.prover.devices().iter().any(|d| self.daemon.prover.is_resident(key, d.info().ordinal))
            }
            _ => false,
        };
        (lookup, hot)
    }

    fn status(&self, ours: pb::StatusResponse) -> cz::GetStatusResponse {
        let unfinished = self.daemon.table.unfinished();
        let kind_of = |id: &str| unfinished.iter().find(|j| j.id == id).map(|j| j.kind);
        let gpus = ours
            .gpus
            .iter()
            .map(|g| {
                let job = g.current_jobs.first().cloned().unwrap_or_default();
                cz::GpuStatus {
                    ordinal: g.ordinal,
                    name: g.name.clone(),
                    vram_total_bytes: g.total_bytes,
                    vram_free_bytes: g.free_bytes,
                    current_proof_kind: kind_of(&job).map(kind_name).unwrap_or_default().to_string(),
                    current_job_id: job,
                }
            })
            .collect();
        let mut loaded_srs = Vec::new();
        for kind in ProofKind::ALL {
            for sector_size in SECTOR_SIZES {
                let name = KeyName { kind, sector_size };
                let (lookup, hot) = self.key_state(name);
                let (tier, size_bytes) = match &lookup {
                    Lookup::Found(key) if hot => (cz::srs_status::Tier::Hot, key.host_bytes()),
                    Lookup::Found(key) => (cz::srs_status::Tier::Warm, key.host_bytes()),
                    Lookup::Cold => (cz::srs_status::Tier::Cold, 0),
                    Lookup::NeverProven => continue,
                };
                let ref_count = unfinished
                    .iter()
                    .filter(|j| j.kind == kind && j.sector_size == sector_size && j.view().state == JobState::Running)
                    .count() as u32;
                loaded_srs.push(cz::SrsStatus {
                    circuit_id: circuit_id(name),
                    tier: tier as i32,
                    size_bytes,
                    ref_count,
                });
            }
        }
        let queues = ProofKind::ALL
            .iter()
            .map(|kind| {
                let of_kind = unfinished.iter().filter(|j| j.kind == *kind);
                let pending = of_kind.clone().filter(|j| j.view().state == JobState::Queued).count() as u32;
                let in_progress = of_kind.filter(|j| j.view().state == JobState::Running).count() as u32;
                cz::QueueStatus { proof_kind: kind_name(*kind).to_string(), pending, in_progress }
            })
            .collect();
        let pinned: u64 = self.daemon.prover.pinned_ranges().iter().map(|r| r.len as u64).sum();
        cz::GetStatusResponse {
            gpus,
            loaded_srs,
            queues,
            total_proofs_completed: ours.proofs_completed,
            total_proofs_failed: ours.proofs_failed,
            uptime_seconds: ours.uptime_seconds as u64,
            pinned_memory_bytes: pinned,
            // snarkpipe bounds page-locked memory through its host budgets, not by a limit of its own.
            pinned_memory_limit_bytes: 0,
        }
    }

    async fn srs(&self, circuit: &str, preload: bool) -> Result<(bool, u64), Status> {
        let name = parse_circuit_id(circuit)?;
        let (lookup, was_hot) = self.key_state(name);
        let bytes = match &lookup {
            Lookup::Found(key) => key.device_bytes(),
            _ => 0,
        };
        let request = pb::SrsRequest { kind: kind_to_pb(name.kind) as i32, sector_size: name.sector_size };
        if preload {
            ProvingService::preload_srs(&self.daemon, Request::new(request)).await?;
        } else {
            ProvingService::evict_srs(&self.daemon, Request::new(request)).await?;
        }
        Ok((was_hot, bytes))
    }
}

#[tonic::async_trait]
impl ProvingEngine for CuzkDoor {
    async fn submit_proof(
        &self,
        request: Request<cz::SubmitProofRequest>,
    ) -> Result<Response<cz::SubmitProofResponse>, Status> {
        self.submit(request.into_inner()).await.map(Response::new)
    }

    async fn await_proof(
        &self,
        request: Request<cz::AwaitProofRequest>,
    ) -> Result<Response<cz::AwaitProofResponse>, Status> {
        let request = request.into_inner();
        self.await_job(&request.job_id, request.timeout_ms).await.map(Response::new)
    }

    async fn prove(&self, request: Request<cz::ProveRequest>) -> Result<Response<cz::ProveResponse>, Status> {
        let submit = request.into_inner().submit.ok_or_else(|| invalid("Prove needs its submit request"))?;
        let submitted = self.submit(submit).await?;
        let result = self.await_job(&submitted.job_id, 0).await?;
        Ok(Response::new(cz::ProveResponse { result: Some(result) }))
    }

    async fn cancel_proof(
        &self,
        request: Request<cz::CancelProofRequest>,
    ) -> Result<Response<cz::CancelProofResponse>, Status> {
        let job_id = request.into_inner().job_id;
        let was_running = self.daemon.table.get(&job_id).is_ok_and(|job| job.view().state == JobState::Running);
        ProvingService::cancel_proof(&self.daemon, Request::new(pb::CancelProofRequest { job_id })).await?;
        Ok(Response::new(cz::CancelProofResponse { was_running }))
    }

    async fn get_status(&self, _: Request<cz::GetStatusRequest>) -> Result<Response<cz::GetStatusResponse>, Status> {
        let ours = ProvingService::get_status(&self.daemon, Request::new(pb::GetStatusRequest {})).await?;
        Ok(Response::new(self.status(ours.into_inner())))
    }

    async fn get_metrics(&self, _: Request<cz::GetMetricsRequest>) -> Result<Response<cz::GetMetricsResponse>, Status> {
        let ours = ProvingService::get_metrics(&self.daemon, Request::new(pb::GetMetricsRequest {})).await?;
        Ok(Response::new(cz::GetMetricsResponse { prometheus_text: ours.into_inner().text }))
    }

    async fn preload_srs(
        &self,
        request: Request<cz::PreloadSrsRequest>,
    ) -> Result<Response<cz::PreloadSrsResponse>, Status> {
        let started = Instant::now();
        let (already_loaded, _) = self.srs(&request.into_inner().circuit_id, true).await?;
        let load_time_ms = started.elapsed().as_millis() as u64;
        Ok(Response::new(cz::PreloadSrsResponse { already_loaded, load_time_ms }))
    }

    async fn evict_srs(&self, request: Request<cz::EvictSrsRequest>) -> Result<Response<cz::EvictSrsResponse>, Status> {
        let (was_loaded, bytes) = self.srs(&request.into_inner().circuit_id, false).await?;
        Ok(Response::new(cz::EvictSrsResponse { was_loaded, freed_bytes: if was_loaded { bytes } else { 0 } }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn circuit_ids_round_trip_for_every_kind_and_size() {
        for kind in ProofKind::ALL {
            for sector_size in SECTOR_SIZES {
                let name = KeyName { kind, sector_size };
                let id = circuit_id(name);
                assert_eq!(parse_circuit_id(&id).unwrap(), name, "{id}");
            }
        }
        assert_eq!(circuit_id(KeyName { kind: ProofKind::Porep, sector_size: 32 << 30 }), "porep-32g");
        assert_eq!(circuit_id(KeyName { kind: ProofKind::WindowPost, sector_size: 2048 }), "wpost-2k");
        assert_eq!(parse_circuit_id("window-post-32g").unwrap().kind, ProofKind::WindowPost);
        for bad in ["porep", "porep-4k", "lottery-32g", "-32g", "wpost-"] {
            let err = parse_circuit_id(bad).unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument, "{bad}");
            assert!(err.message().contains("porep-32g"), "{bad}: {}", err.message());
        }
    }
}
