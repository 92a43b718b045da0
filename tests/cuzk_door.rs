//! Curio's door: `snarkpipe serve` (the real binary, CPU backend) driven through the
//! `cuzk.v1.ProvingEngine` contract by the tonic client generated from proto/cuzk.proto, each
//! request filled field by field as Curio's `lib/ffi/cuzk_funcs.go` fills it, from inputs made
//! as a node makes them (tests/node_fixtures: filecoin-proofs-api's own sealing, C1 and
//! single-vanilla-proof calls). Every proof is checked with filecoin-proofs-api's verifiers,
//! with twins that must be rejected.
//!
//! - over a Unix socket: PoRep (Curio's envelope) and SnapDeals; PreloadSRS then EvictSRS;
//!   bad requests get INVALID_ARGUMENT naming what is wrong while the PoRep goes on; a
//!   request id whose job was cancelled, or failed, proves anew when retried;
//! - over loopback TCP: Window PoSt (one partition) and Winning PoSt;
//! - the wire itself: method paths called by their literal names, and field numbers and types
//!   checked against hand-written protobuf bytes.
#![cfg(feature = "filecoin")]

mod filecoin;
mod node_fixtures;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use node_fixtures as node;
use prost::Message;
use snarkpipe::daemon::cuzk_pb::{self as cz, proving_engine_client::ProvingEngineClient};
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::Code;

type Client = ProvingEngineClient<Channel>;

/// Far above a 2 KiB proof on two cores: only a hang trips it.
const PROOF_BOUND: Duration = Duration::from_secs(20 * 60);

/// Where a test daemon listens.
enum Listen {
    Unix(PathBuf),
    Loopback,
}

/// A `snarkpipe serve` process, killed when dropped.
struct Daemon {
    child: Child,
    /// `unix:PATH` or `HOST:PORT`, as its ready line said.
    address: String,
    log: PathBuf,
}

impl Daemon {
    fn start(listen: Listen, params_dir: &Path, log: PathBuf) -> Daemon {
        let listen = match &listen {
            Listen::Unix(path) => format!("unix:{}", path.display()),
            Listen::Loopback => "127.0.0.1:0".to_string(),
        };
        let mut child = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
            .args(["serve", "--listen", &listen, "--backend", "cpu", "--concurrent-jobs", "1"])
            .arg("--params-dir")
            .arg(params_dir)
            // The watchdog's default suits a GPU; a PoRep's MSMs on two shared cores take longer.
            .args(["--stage-timeout-secs", "3600"])
            .env("SNARKPIPE_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting snarkpipe serve");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The ready line comes once the listener is bound.
        let line = match lines.next() {
            Some(Ok(line)) if line.contains("listening on ") => line,
            other => {
                let _ = child.kill();
                panic!("the daemon did not start ({other:?}): {}", std::fs::read_to_string(&log).unwrap_or_default())
            }
        };
        let address = line.split("listening on ").nth(1).unwrap().split(' ').next().unwrap().to_string();
        // Drain the rest so the daemon never blocks on a full pipe.
        std::thread::spawn(move || lines.map_while(|l| l.ok()).for_each(drop));
        Daemon { child, address, log }
    }

    async fn channel(&self) -> Channel {
        match self.address.strip_prefix("unix:") {
            Some(path) => {
                let path = PathBuf::from(path);
                Endpoint::try_from("http://localhost")
                    .unwrap()
                    .connect_with_connector(tower::service_fn(move |_: Uri| {
                        let path = path.clone();
                        async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(path).await?)) }
                    }))
                    .await
                    .expect("connecting to the daemon's socket")
            }
            None => Endpoint::try_from(format!("http://{}", self.address)).unwrap().connect().await.unwrap(),
        }
    }

    async fn client(&self) -> Client {
        // Curio's own limits.
        ProvingEngineClient::new(self.channel().await)
            .max_decoding_message_size(256 << 20)
            .max_encoding_message_size(256 << 20)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A PoRep request as `PoRepSnarkCuzk` builds it.
fn porep_request(request_id: &str) -> cz::SubmitProofRequest {
    let sector = node::sector();
    cz::SubmitProofRequest {
        request_id: request_id.to_string(),
        proof_kind: cz::ProofKind::PorepSealCommit as i32,
        sector_size: 2048,
        registered_proof: node::SEAL_PROOF_FFI,
        priority: cz::Priority::Normal as i32,
        vanilla_proof: node::envelope(sector),
        sector_number: sector.sector_number,
        miner_id: sector.miner_id,
        ..Default::default()
    }
}

/// A SnapDeals request as `ProveUpdateCuzk` builds it.
fn snap_request(request_id: &str) -> cz::SubmitProofRequest {
    let (sector, update) = (node::sector(), node::update());
    cz::SubmitProofRequest {
        request_id: request_id.to_string(),
        proof_kind: cz::ProofKind::SnapDealsUpdate as i32,
        sector_size: 2048,
        registered_proof: node::UPDATE_PROOF_FFI,
        priority: cz::Priority::Normal as i32,
        vanilla_proofs: update.vanilla_proofs.clone(),
        sector_number: sector.sector_number,
        miner_id: sector.miner_id,
        comm_r_old: update.comm_r_old.to_vec(),
        comm_r_new: update.comm_r_new.to_vec(),
        comm_d_new: update.comm_d_new.to_vec(),
        ..Default::default()
    }
}

/// A Window (partition 0) or Winning PoSt request as `WindowPoStCuzk` and `WinningPoStCuzk`
/// build it, with fresh randomness.
fn post_request(request_id: &str, window: bool) -> (cz::SubmitProofRequest, [u8; 32]) {
    let sector = node::sector();
    let randomness = node::fr_bytes(&mut rand::thread_rng());
    let (proof, ffi, kind, priority) = if window {
        (node::WINDOW_PROOF, node::WINDOW_PROOF_FFI, cz::ProofKind::WindowPostPartition, cz::Priority::High)
    } else {
        (node::WINNING_PROOF, node::WINNING_PROOF_FFI, cz::ProofKind::WinningPost, cz::Priority::Critical)
    };
    let request = cz::SubmitProofRequest {
        request_id: request_id.to_string(),
        proof_kind: kind as i32,
        sector_size: 2048,
        registered_proof: ffi,
        priority: priority as i32,
        vanilla_proofs: node::post_vanilla(sector, proof, &randomness),
        miner_id: sector.miner_id,
        randomness: randomness.to_vec(),
        partition_index: 0,
        ..Default::default()
    };
    (request, randomness)
}

async fn prove(client: &mut Client, request: cz::SubmitProofRequest) -> cz::AwaitProofResponse {
    let call = client.prove(cz::ProveRequest { submit: Some(request) });
    let response = tokio::time::timeout(PROOF_BOUND, call).await.expect("Prove hung").expect("Prove");
    response.into_inner().result.expect("Prove returned no result")
}

async fn await_job(client: &mut Client, job_id: &str) -> cz::AwaitProofResponse {
    let call = client.await_proof(cz::AwaitProofRequest { job_id: job_id.to_string(), timeout_ms: 0 });
    tokio::time::timeout(PROOF_BOUND, call).await.expect("AwaitProof hung").expect("AwaitProof").into_inner()
}

fn completed(result: &cz::AwaitProofResponse, what: &str) {
    assert_eq!(
        result.status,
        cz::await_proof_response::Status::Completed as i32,
        "{what} did not complete: {}",
        result.error_message
    );
    assert!(result.total_ms >= result.queue_wait_ms && result.gpu_compute_ms > 0, "{what}: timings {result:?}");
}

fn flipped(proof: &[u8]) -> Vec<u8> {
    let mut bytes = proof.to_vec();
    bytes[proof.len() / 2] ^= 1;
    bytes
}

/// A parameter directory holding every file of the shared one but the Winning PoSt's
/// `.params`, as links: a daemon on it fails Winning PoSt until the file is linked in. Returns
/// the directory and the missing file's name.
fn params_without_winning(dir: &Path) -> (PathBuf, String) {
    let shared = filecoin::params_dir();
    let winning = node::WINNING_PROOF.cache_params_path().expect("the Winning PoSt parameter path");
    let missing = winning.file_name().unwrap().to_string_lossy().into_owned();
    let linked = dir.join("params");
    std::fs::create_dir_all(&linked).unwrap();
    for entry in std::fs::read_dir(&shared).unwrap().flatten() {
        if entry.file_name().to_string_lossy() != missing {
            std::os::unix::fs::symlink(entry.path(), linked.join(entry.file_name())).unwrap();
        }
    }
    assert!(shared.join(&missing).exists(), "the shared directory lacks {missing}");
    (linked, missing)
}

fn invalid(result: Result<tonic::Response<cz::SubmitProofResponse>, tonic::Status>, expect: &[&str], what: &str) {
    let status = result.expect_err(what);
    assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
    for word in expect {
        assert!(status.message().contains(word), "{what}: {:?} does not name {word:?}", status.message());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curio_proves_porep_and_snapdeals_over_a_unix_socket() {
    let sector = tokio::task::block_in_place(|| {
        node::ensure_all_params();
        node::update();
        node::sector()
    });
    let dir = tempfile::tempdir().unwrap();
    let (params, missing) = params_without_winning(dir.path());
    let daemon = tokio::task::block_in_place(|| {
        Daemon::start(Listen::Unix(dir.path().join("cuzk.sock")), &params, dir.path().join("unix.log"))
    });
    let mut client = daemon.client().await;

    // PreloadSRS before any proof loads the key by its circuit id.
    let preloaded = client.preload_srs(cz::PreloadSrsRequest { circuit_id: "snap-2k".into() }).await.unwrap();
    assert!(!preloaded.into_inner().already_loaded);
    let status = client.get_status(cz::GetStatusRequest {}).await.unwrap().into_inner();
    let snap = status.loaded_srs.iter().find(|s| s.circuit_id == "snap-2k").expect("snap-2k after PreloadSRS");
    assert!(snap.size_bytes > 0, "{status:?}");
    let again = client.preload_srs(cz::PreloadSrsRequest { circuit_id: "snap-2k".into() }).await.unwrap();
    assert!(again.into_inner().already_loaded, "a second PreloadSRS found the key not loaded");
    let unknown = client.preload_srs(cz::PreloadSrsRequest { circuit_id: "porep-4k".into() }).await.unwrap_err();
    assert_eq!(unknown.code(), Code::InvalidArgument, "{unknown:?}");

    // A PoRep submitted and cancelled; its request id submitted again is a new job.
    let porep_id = format!("porep-{}-{}", sector.miner_id, sector.sector_number);
    let first = client.submit_proof(porep_request(&porep_id)).await.unwrap().into_inner();
    client.cancel_proof(cz::CancelProofRequest { job_id: first.job_id.clone() }).await.unwrap();
    let cancelled = await_job(&mut client, &first.job_id).await;
    assert_eq!(cancelled.status, cz::await_proof_response::Status::Cancelled as i32, "{cancelled:?}");
    let retried = client.submit_proof(porep_request(&porep_id)).await.unwrap().into_inner();
    assert_ne!(retried.job_id, first.job_id, "a retried request id handed back the cancelled job");
    // An AwaitProof that runs out says so in its status, as the contract has it.
    let early = client.await_proof(cz::AwaitProofRequest { job_id: retried.job_id.clone(), timeout_ms: 1 }).await;
    assert_eq!(early.unwrap().into_inner().status, cz::await_proof_response::Status::Timeout as i32);

    // Bad requests while the PoRep runs: each named, none queued, the PoRep goes on.
    let mut bad = porep_request("bad-envelope");
    bad.vanilla_proof = br#"{"SectorNum":1,"Phase1Out":"not base64!","SectorSize":2048}"#.to_vec();
    invalid(client.submit_proof(bad).await, &["base64"], "a malformed envelope");
    let mut bad = porep_request("bad-json");
    bad.vanilla_proof.truncate(bad.vanilla_proof.len() / 2);
    invalid(client.submit_proof(bad).await, &["JSON"], "a truncated envelope");
    let mut bad = porep_request("wrong-size");
    bad.registered_proof = 8;
    invalid(
        client.submit_proof(bad).await,
        &["StackedDrg32GiBV1_1", "StackedDrg2KiBV1_1"],
        "a 32 GiB registered proof",
    );
    // A synthetic proof type for an interactive sector's C1 output: the types disagree.
    let mut bad = porep_request("synthetic-for-interactive");
    bad.registered_proof = node::SYNTHETIC_SEAL_PROOF_FFI;
    invalid(
        client.submit_proof(bad).await,
        &["StackedDrg2KiBV1_1_Feat_SyntheticPoRep", "StackedDrg2KiBV1_1"],
        "a synthetic proof type for an interactive C1 output",
    );
    let mut bad = porep_request("non-interactive");
    bad.registered_proof = node::NON_INTERACTIVE_SEAL_PROOF_FFI;
    invalid(
        client.submit_proof(bad).await,
        &["StackedDrg2KiBV1_2_Feat_NonInteractivePoRep", "non-interactive"],
        "non-interactive PoRep",
    );
    let mut bad = porep_request("unknown");
    bad.registered_proof = 99;
    invalid(client.submit_proof(bad).await, &["99"], "an unknown registered proof");
    let mut bad = post_request("window-as-winning", false).0;
    bad.registered_proof = node::WINDOW_PROOF_FFI;
    invalid(client.submit_proof(bad).await, &["StackedDrgWindow2KiBV1_2", "WINNING_POST"], "a Window proof type");
    let mut bad = post_request("short-randomness", true).0;
    bad.randomness.pop();
    invalid(client.submit_proof(bad).await, &["randomness", "31"], "31 bytes of randomness");
    let mut bad = snap_request("garbled-snap");
    bad.vanilla_proofs[0].truncate(40);
    invalid(client.submit_proof(bad).await, &["PartitionProof"], "a truncated partition proof");
    let mut bad = snap_request("no-kind");
    bad.proof_kind = 0;
    invalid(client.submit_proof(bad).await, &["proof_kind"], "an unset kind");
    let status = client.get_status(cz::GetStatusRequest {}).await.unwrap().into_inner();
    let queued: u32 = status.queues.iter().map(|q| q.pending + q.in_progress).sum();
    assert_eq!(queued, 1, "bad requests were queued: {status:?}");

    let porep = await_job(&mut client, &retried.job_id).await;
    completed(&porep, "PoRep");
    assert!(node::verify_seal(sector, &porep.proof, sector.sector_number), "filecoin-proofs-api rejects the PoRep");
    assert!(!node::verify_seal(sector, &porep.proof, sector.sector_number + 1), "verified for another sector");
    assert!(!node::verify_seal(sector, &flipped(&porep.proof), sector.sector_number), "a flipped bit verified");

    let update = node::update();
    let snap = prove(&mut client, snap_request(&format!("snap-{}-{}", sector.miner_id, sector.sector_number))).await;
    completed(&snap, "SnapDeals");
    assert!(node::verify_update(update, &snap.proof, update.comm_r_new), "filecoin-proofs-api rejects the update");
    assert!(!node::verify_update(update, &snap.proof, update.comm_r_old), "verified for the old replica");
    assert!(!node::verify_update(update, &flipped(&snap.proof), update.comm_r_new), "a flipped bit verified");

    // A Winning PoSt fails for its missing parameters; linked in, the same request id proves.
    let (winning, randomness) = tokio::task::block_in_place(|| post_request("winpost-retry", false));
    let failed = prove(&mut client, winning.clone()).await;
    assert_eq!(failed.status, cz::await_proof_response::Status::Failed as i32, "{failed:?}");
    std::os::unix::fs::symlink(filecoin::params_dir().join(&missing), params.join(&missing)).unwrap();
    let proven = prove(&mut client, winning.clone()).await;
    assert_ne!(proven.job_id, failed.job_id, "a retried request id handed back the failed job");
    completed(&proven, "the retried Winning PoSt");
    let prover_id = sector.prover_id;
    assert!(node::verify_post(sector, node::WINNING_PROOF, &randomness, &proven.proof, prover_id));
    // A succeeded job is the request's answer from then on: no second proof.
    let same = client.submit_proof(winning).await.unwrap().into_inner();
    assert_eq!(same.job_id, proven.job_id, "a retry of a proven request proved again");

    // EvictSRS takes the key off the devices; it stays in host memory.
    let evicted = client.evict_srs(cz::EvictSrsRequest { circuit_id: "snap-2k".into() }).await.unwrap().into_inner();
    assert!(evicted.was_loaded, "{evicted:?}");
    let status = client.get_status(cz::GetStatusRequest {}).await.unwrap().into_inner();
    let snap = status.loaded_srs.iter().find(|s| s.circuit_id == "snap-2k").unwrap();
    assert_ne!(snap.tier, cz::srs_status::Tier::Hot as i32, "{status:?}");
    let again = client.evict_srs(cz::EvictSrsRequest { circuit_id: "snap-2k".into() }).await.unwrap().into_inner();
    assert!(!again.was_loaded && again.freed_bytes == 0, "{again:?}");
    assert!(status.total_proofs_completed >= 3 && status.total_proofs_failed >= 1, "{status:?}");
    let metrics = client.get_metrics(cz::GetMetricsRequest {}).await.unwrap().into_inner();
    assert!(metrics.prometheus_text.contains("snarkpipe_proofs_total"), "{}", metrics.prometheus_text);
    drop(client);
    assert!(!daemon.log().contains("panicked"), "{}", daemon.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curio_proves_window_and_winning_post_over_loopback() {
    let sector = tokio::task::block_in_place(|| {
        node::ensure_all_params();
        node::sector()
    });
    let dir = tempfile::tempdir().unwrap();
    let daemon = tokio::task::block_in_place(|| {
        Daemon::start(Listen::Loopback, &filecoin::params_dir(), dir.path().join("tcp.log"))
    });
    assert!(daemon.address.starts_with("127.0.0.1:"), "{}", daemon.address);
    let mut client = daemon.client().await;

    let (window, randomness) = tokio::task::block_in_place(|| post_request("wdpost-1000-0-1", true));
    let result = prove(&mut client, window).await;
    completed(&result, "Window PoSt");
    assert!(node::verify_post(sector, node::WINDOW_PROOF, &randomness, &result.proof, sector.prover_id));
    // The prover id selects no challenge of a one-sector PoSt: the twin is other randomness.
    assert!(!node::verify_post(sector, node::WINDOW_PROOF, &other(&randomness), &result.proof, sector.prover_id));
    assert!(!node::verify_post(sector, node::WINDOW_PROOF, &randomness, &flipped(&result.proof), sector.prover_id));

    let (winning, randomness) = tokio::task::block_in_place(|| post_request("winpost-1000", false));
    let submitted = client.submit_proof(winning).await.unwrap().into_inner();
    let result = await_job(&mut client, &submitted.job_id).await;
    completed(&result, "Winning PoSt");
    assert!(node::verify_post(sector, node::WINNING_PROOF, &randomness, &result.proof, sector.prover_id));
    assert!(!node::verify_post(sector, node::WINNING_PROOF, &other(&randomness), &result.proof, sector.prover_id));
    assert!(!node::verify_post(sector, node::WINNING_PROOF, &randomness, &flipped(&result.proof), sector.prover_id));
    let status = client.get_status(cz::GetStatusRequest {}).await.unwrap().into_inner();
    assert_eq!(status.total_proofs_completed, 2, "{status:?}");
}

/// Other randomness (still a canonical field element), for the twins.
fn other(randomness: &[u8; 32]) -> [u8; 32] {
    let mut other = *randomness;
    other[0] ^= 1;
    other
}

/// The method paths, called by their literal names on a daemon: a renamed package, service or
/// method answers UNIMPLEMENTED here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_contracts_method_paths_answer_by_their_names() {
    use tonic::codec::ProstCodec;
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("no-params");
    std::fs::create_dir_all(&empty).unwrap();
    let daemon = tokio::task::block_in_place(|| {
        Daemon::start(Listen::Unix(dir.path().join("paths.sock")), &empty, dir.path().join("paths.log"))
    });
    let channel = daemon.channel().await;
    let mut grpc = tonic::client::Grpc::new(channel);
    async fn call<Req: Message + 'static, Resp: Message + Default + 'static>(
        grpc: &mut tonic::client::Grpc<Channel>,
        path: &'static str,
        request: Req,
    ) -> Result<Resp, tonic::Status> {
        grpc.ready().await.unwrap();
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
        grpc.unary(tonic::Request::new(request), path, ProstCodec::<Req, Resp>::default()).await.map(|r| r.into_inner())
    }
    let g = &mut grpc;
    let status: cz::GetStatusResponse =
        call(g, "/cuzk.v1.ProvingEngine/GetStatus", cz::GetStatusRequest {}).await.unwrap();
    assert_eq!(status.queues.len(), 4, "{status:?}");
    let metrics: cz::GetMetricsResponse =
        call(g, "/cuzk.v1.ProvingEngine/GetMetrics", cz::GetMetricsRequest {}).await.unwrap();
    assert!(!metrics.prometheus_text.is_empty());
    // The others answer with their own checks, which shows they are routed.
    let not_unimplemented = |r: Result<(), tonic::Status>, path: &str| {
        if let Err(status) = r {
            assert_ne!(status.code(), Code::Unimplemented, "{path}: {status:?}");
        }
    };
    let r: Result<cz::SubmitProofResponse, _> =
        call(g, "/cuzk.v1.ProvingEngine/SubmitProof", cz::SubmitProofRequest::default()).await;
    assert_eq!(r.unwrap_err().code(), Code::InvalidArgument);
    let r: Result<cz::ProveResponse, _> = call(g, "/cuzk.v1.ProvingEngine/Prove", cz::ProveRequest::default()).await;
    assert_eq!(r.unwrap_err().code(), Code::InvalidArgument);
    let r: Result<cz::AwaitProofResponse, _> =
        call(g, "/cuzk.v1.ProvingEngine/AwaitProof", cz::AwaitProofRequest::default()).await;
    assert_eq!(r.unwrap_err().code(), Code::NotFound);
    let r: Result<cz::CancelProofResponse, _> =
        call(g, "/cuzk.v1.ProvingEngine/CancelProof", cz::CancelProofRequest::default()).await;
    assert_eq!(r.unwrap_err().code(), Code::NotFound);
    let r: Result<cz::PreloadSrsResponse, _> =
        call(g, "/cuzk.v1.ProvingEngine/PreloadSRS", cz::PreloadSrsRequest { circuit_id: "x".into() }).await;
    assert_eq!(r.unwrap_err().code(), Code::InvalidArgument);
    let r: Result<cz::EvictSrsResponse, _> =
        call(g, "/cuzk.v1.ProvingEngine/EvictSRS", cz::EvictSrsRequest { circuit_id: "wpost-32g".into() }).await;
    not_unimplemented(r.map(drop), "EvictSRS");
    // And a path that is not the contract's is not answered: the pins above can fail.
    let r: Result<cz::GetStatusResponse, _> =
        call(g, "/cuzk.v2.ProvingEngine/GetStatus", cz::GetStatusRequest {}).await;
    assert_eq!(r.unwrap_err().code(), Code::Unimplemented);
}

/// Field numbers, wire types and enum values, against protobuf bytes written by hand from the
/// published contract.
#[test]
fn the_contracts_field_numbers_and_types_are_the_published_ones() {
    let request = cz::SubmitProofRequest {
        request_id: "r".into(),
        proof_kind: cz::ProofKind::WinningPost as i32,
        sector_size: 2048,
        registered_proof: 3,
        priority: cz::Priority::Critical as i32,
        vanilla_proof: vec![0xaa],
        vanilla_proofs: vec![vec![0xbb], vec![]],
        sector_number: 5,
        miner_id: 6,
        randomness: vec![0xcc],
        partition_index: 7,
        comm_r_old: vec![1],
        comm_r_new: vec![2],
        comm_d_new: vec![3],
    };
    #[rustfmt::skip]
    let expected: Vec<u8> = vec![
        0x0a, 1, b'r',            // 1 request_id: string
        0x10, 4,                  // 2 proof_kind: WINNING_POST = 4
        0x18, 0x80, 0x10,         // 3 sector_size: varint 2048
        0x20, 3,                  // 4 registered_proof: varint
        0x28, 4,                  // 5 priority: CRITICAL = 4
        0x52, 1, 0xaa,            // 10 vanilla_proof: bytes
        0x5a, 1, 0xbb, 0x5a, 0,   // 11 vanilla_proofs: repeated bytes
        0xa0, 0x01, 5,            // 20 sector_number: varint
        0xa8, 0x01, 6,            // 21 miner_id: varint
        0xb2, 0x01, 1, 0xcc,      // 22 randomness: bytes
        0xb8, 0x01, 7,            // 23 partition_index: varint
        0xf2, 0x01, 1, 1,         // 30 comm_r_old: bytes
        0xfa, 0x01, 1, 2,         // 31 comm_r_new: bytes
        0x82, 0x02, 1, 3,         // 32 comm_d_new: bytes
    ];
    assert_eq!(request.encode_to_vec(), expected);

    #[rustfmt::skip]
    let response: Vec<u8> = vec![
        0x0a, 1, b'j',            // 1 job_id
        0x10, 3,                  // 2 status: CANCELLED = 3
        0x1a, 1, 0xdd,            // 3 proof
        0x22, 1, b'e',            // 4 error_message
        0x50, 10, 0x58, 11, 0x60, 12, 0x68, 13, 0x70, 14, // 10..14 timings in ms
    ];
    let decoded = cz::AwaitProofResponse::decode(response.as_slice()).unwrap();
    assert_eq!(decoded.job_id, "j");
    assert_eq!(decoded.status, cz::await_proof_response::Status::Cancelled as i32);
    assert_eq!((decoded.proof.as_slice(), decoded.error_message.as_str()), (&[0xdd][..], "e"));
    let timings =
        [decoded.queue_wait_ms, decoded.srs_load_ms, decoded.synthesis_ms, decoded.gpu_compute_ms, decoded.total_ms];
    assert_eq!(timings, [10, 11, 12, 13, 14]);
    assert_eq!(cz::await_proof_response::Status::Timeout as i32, 4);
    assert_eq!(
        [cz::srs_status::Tier::Hot as i32, cz::srs_status::Tier::Warm as i32, cz::srs_status::Tier::Cold as i32],
        [0, 1, 2]
    );
    assert_eq!(
        [cz::ProofKind::PorepSealCommit, cz::ProofKind::SnapDealsUpdate, cz::ProofKind::WindowPostPartition]
            .map(|k| k as i32),
        [1, 2, 3]
    );
    assert_eq!([cz::Priority::Low, cz::Priority::Normal, cz::Priority::High].map(|p| p as i32), [1, 2, 3]);

    let status = cz::GetStatusResponse {
        gpus: vec![cz::GpuStatus { ordinal: 1, current_job_id: "x".into(), ..Default::default() }],
        loaded_srs: vec![cz::SrsStatus { circuit_id: "c".into(), tier: 2, size_bytes: 9, ref_count: 1 }],
        queues: vec![cz::QueueStatus { proof_kind: "k".into(), pending: 1, in_progress: 2 }],
        uptime_seconds: 6,
        pinned_memory_limit_bytes: 8,
        ..Default::default()
    };
    #[rustfmt::skip]
    let expected: Vec<u8> = vec![
        0x0a, 5, 0x08, 1, 0x2a, 1, b'x',                   // 1 gpus { 1 ordinal, 5 current_job_id }
        0x12, 9, 0x0a, 1, b'c', 0x10, 2, 0x18, 9, 0x20, 1, // 2 loaded_srs { 1 circuit_id, 2 tier, 3 size_bytes, 4 ref_count }
        0x1a, 7, 0x0a, 1, b'k', 0x10, 1, 0x18, 2,          // 3 queues
        0x30, 6,                                           // 6 uptime_seconds
        0x40, 8,                                           // 8 pinned_memory_limit_bytes
    ];
    assert_eq!(status.encode_to_vec(), expected);
    let cancel = cz::CancelProofResponse { was_running: true };
    assert_eq!(cancel.encode_to_vec(), [0x08, 1]);
    let preload = cz::PreloadSrsResponse { already_loaded: true, load_time_ms: 3 };
    assert_eq!(preload.encode_to_vec(), [0x08, 1, 0x10, 3]);
    let evict = cz::EvictSrsResponse { was_loaded: true, freed_bytes: 3 };
    assert_eq!(evict.encode_to_vec(), [0x08, 1, 0x10, 3]);
    let submitted = cz::SubmitProofResponse { job_id: "j".into(), queue_position: 2, assigned_gpu: "0".into() };
    assert_eq!(submitted.encode_to_vec(), [0x0a, 1, b'j', 0x10, 2, 0x1a, 1, b'0']);
    let metrics = cz::GetMetricsResponse { prometheus_text: "m".into() };
    assert_eq!(metrics.encode_to_vec(), [0x0a, 1, b'm']);
}

/// How a raw HTTP/2 call ended.
#[derive(Debug, PartialEq)]
enum RawCall {
    /// The stream was reset with this HTTP/2 error code (1: PROTOCOL_ERROR).
    Reset(u32),
    /// A gRPC answer: its `grpc-status` and its message.
    Answered { grpc_status: String, message: Vec<u8> },
}

/// One unary call written frame by frame on `stream`, as gRPC's C core writes it on a Unix
/// socket: the `:authority` is whatever it is given (the socket's path, percent-encoded).
async fn raw_call<S>(stream: S, path: &str, authority: &[u8]) -> RawCall
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
        out
    }
    let (mut read, mut write) = tokio::io::split(stream);
    let headers: [(&[u8], &[u8]); 6] = [
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", path.as_bytes()),
        (b":authority", authority),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
    ];
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    out.extend(frame(0x4, 0, 0, &[]));
    out.extend(frame(0x1, 0x4, 1, &loona_hpack::Encoder::new().encode(headers)));
    out.extend(frame(0x0, 0x1, 1, &[0, 0, 0, 0, 0]));
    write.write_all(&out).await.unwrap();
    let mut decoder = loona_hpack::Decoder::new();
    let mut message = Vec::new();
    let mut grpc_status = None;
    let ended = async {
        loop {
            let mut head = [0u8; 9];
            if read.read_exact(&mut head).await.is_err() {
                panic!("the daemon closed the connection without answering");
            }
            let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
            let mut payload = vec![0u8; len];
            read.read_exact(&mut payload).await.unwrap();
            let (kind, flags) = (head[3], head[4]);
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            match kind {
                0x4 if flags & 0x1 == 0 => write.write_all(&frame(0x4, 0x1, 0, &[])).await.unwrap(),
                0x3 if stream == 1 => return RawCall::Reset(u32::from_be_bytes(payload[..4].try_into().unwrap())),
                0x7 => panic!("GOAWAY: {payload:?}"),
                0x0 if stream == 1 => message.extend_from_slice(&payload),
                0x1 if stream == 1 => {
                    for (name, value) in decoder.decode(&payload).unwrap() {
                        if name == b"grpc-status" {
                            grpc_status = Some(String::from_utf8(value).unwrap());
                        }
                    }
                    if flags & 0x1 != 0 {
                        let message = message.get(5..).unwrap_or_default().to_vec();
                        return RawCall::Answered { grpc_status: grpc_status.take().unwrap_or_default(), message };
                    }
                }
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), ended).await.expect("no answer within a minute")
}

/// Clients on gRPC's C core (Python's grpcio, C++, Ruby) and grpc-java send the socket's path
/// as `:authority`, which tonic's HTTP/2 stack resets as malformed; the daemon reads their
/// calls as for `localhost`. The twin: the same client against a tonic server on a socket
/// without the daemon's adapter is reset, so this client does reproduce those clients.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_that_send_the_socket_path_as_authority_are_answered() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("no-params");
    std::fs::create_dir_all(&empty).unwrap();
    let socket = dir.path().join("c-core.sock");
    let daemon = tokio::task::block_in_place(|| {
        Daemon::start(Listen::Unix(socket.clone()), &empty, dir.path().join("c-core.log"))
    });
    let encoded = socket.display().to_string().replace('/', "%2F");
    for authority in [encoded.as_bytes(), socket.display().to_string().as_bytes(), b"localhost"] {
        let stream = tokio::net::UnixStream::connect(&socket).await.unwrap();
        let answer = raw_call(stream, "/cuzk.v1.ProvingEngine/GetStatus", authority).await;
        let RawCall::Answered { grpc_status, message } = answer else {
            panic!("{}: {answer:?}; {}", String::from_utf8_lossy(authority), daemon.log())
        };
        assert_eq!(grpc_status, "0", "{}", String::from_utf8_lossy(authority));
        let status = cz::GetStatusResponse::decode(message.as_slice()).unwrap();
        assert_eq!(status.queues.len(), 4, "{status:?}");
    }

    // The twin: plain tonic on a socket, no adapter.
    let plain = dir.path().join("plain.sock");
    let listener = tokio::net::UnixListener::bind(&plain).unwrap();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_routes(tonic::service::Routes::default())
            .serve_with_incoming(tokio_stream::wrappers::UnixListenerStream::new(listener)),
    );
    let stream = tokio::net::UnixStream::connect(&plain).await.unwrap();
    assert_eq!(raw_call(stream, "/cuzk.v1.ProvingEngine/GetStatus", encoded.as_bytes()).await, RawCall::Reset(1));
    let stream = tokio::net::UnixStream::connect(&plain).await.unwrap();
    let unrouted = raw_call(stream, "/cuzk.v1.ProvingEngine/GetStatus", b"localhost").await;
    assert!(matches!(unrouted, RawCall::Answered { ref grpc_status, .. } if grpc_status == "12"), "{unrouted:?}");
    server.abort();
}
