//! `snarkpipe serve` as a node sees it: the real binary on the CPU backend, on a Unix socket in
//! a temporary directory, driven by the tonic client generated from proto/snarkpipe.proto.
//! Every proof it returns is checked with filecoin-proofs' own verifier, with a tampered twin
//! that must fail.
//!
//! One daemon serves the scenarios that leave it running (`one_daemon_serves_every_scenario`,
//! in sequence, since each judges the daemon's counters and queue); the tests that stop a
//! daemon (SIGTERM, kill -9) start their own.
#![cfg(feature = "filecoin")]

mod filecoin;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::{Buf, BufMut};
use hyper_util::rt::TokioIo;
use snarkpipe::daemon::pb::{self, proving_service_client::ProvingServiceClient};
use snarkpipe::filecoin::{ProofKind, VanillaRequest};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::transport::{Channel, Endpoint, Uri};
use tonic::{Code, Status};

type Client = ProvingServiceClient<Channel>;

/// A proof's await bound: far above a 2 KiB proof on two cores, so only a hang trips it.
const AWAIT_MS: u64 = 20 * 60 * 1000;
/// The vanilla limit the test daemons run with (2 KiB jobs are far smaller).
const MAX_VANILLA: usize = 32 << 20;

/// A `snarkpipe serve` process; killed when dropped, so a failing test leaves none behind.
struct Daemon {
    child: Child,
    socket: PathBuf,
    /// What it printed on stdout after its ready line.
    stdout: Arc<Mutex<Vec<String>>>,
    stdout_done: Option<std::thread::JoinHandle<()>>,
    log: PathBuf,
}

impl Daemon {
    /// Starts a daemon on `socket` and returns once it has announced that it serves.
    fn start(socket: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_with(socket, extra, &[])
    }

    /// [`Daemon::start`] with environment variables.
    fn start_with(socket: &Path, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        let log = socket.with_extension("log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
            .envs(env.iter().copied())
            .arg("serve")
            .arg("--listen")
            .arg(format!("unix:{}", socket.display()))
            .arg("--params-dir")
            .arg(filecoin::params_dir())
            .args(["--backend", "cpu", "--max-vanilla-bytes", &MAX_VANILLA.to_string()])
            // The watchdog's default suits a GPU; a PoRep's MSMs on two shared cores take longer.
            .args(["--stage-timeout-secs", "3600"])
            .args(extra)
            .env("SNARKPIPE_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("starting snarkpipe serve");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // The ready line is printed once the socket is bound: no guessing how long start takes.
        match lines.next() {
            Some(Ok(line)) if line.contains("listening on unix:") => eprintln!("{line}"),
            other => {
                let _ = child.kill();
                panic!("the daemon did not start ({other:?}): {}", std::fs::read_to_string(&log).unwrap_or_default())
            }
        }
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let sink = stdout.clone();
        let stdout_done =
            std::thread::spawn(move || lines.map_while(|l| l.ok()).for_each(|l| sink.lock().unwrap().push(l)));
        Daemon { child, socket: socket.to_path_buf(), stdout, stdout_done: Some(stdout_done), log }
    }

    async fn client(&self) -> Client {
        connect(self.socket.clone()).await
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill").arg(format!("-{name}")).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit; its exit status and what it printed after the ready line.
    fn wait(mut self) -> (std::process::ExitStatus, Vec<String>) {
        let status = self.child.wait().unwrap();
        self.stdout_done.take().unwrap().join().unwrap();
        let lines = self.stdout.lock().unwrap().clone();
        (status, lines)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the process has announced that it serves once more (after it replaced
    /// itself); panics with its log after `within`.
    fn wait_for_another_ready_line(&self, within: std::time::Duration) {
        let started = Instant::now();
        while !self.stdout.lock().unwrap().iter().any(|l| l.contains("listening on unix:")) {
            assert!(started.elapsed() < within, "the daemon did not come back within {within:?}: {}", self.log());
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A channel to the daemon on `socket`.
async fn channel(socket: PathBuf) -> Channel {
    // The URI is a placeholder: the connector below dials the socket whatever it says.
    Endpoint::try_from("http://[::1]:50051")
        .unwrap()
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(tokio::net::UnixStream::connect(socket).await?)) }
        }))
        .await
        .expect("connecting to the daemon's socket")
}

async fn connect(socket: PathBuf) -> Client {
    ProvingServiceClient::new(channel(socket).await)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

/// A job's vanilla bytes, its parsed form, and the request that submits it under `key`.
struct Fixture {
    kind: ProofKind,
    bytes: Vec<u8>,
    job: VanillaRequest,
}

impl Fixture {
    fn of(kind: ProofKind) -> Fixture {
        let path = filecoin::job(kind, 1);
        Fixture { kind, bytes: std::fs::read(&path).unwrap(), job: VanillaRequest::read(&path).unwrap() }
    }

    /// Partition 0 of the Window PoSt fixture's deadline, as a job of its own
    /// (`partition_index`): a node proving its deadline partition by partition sends these.
    fn window_partition() -> Fixture {
        let whole = Fixture::of(ProofKind::WindowPost);
        let mut json: serde_json::Value = serde_json::from_slice(&whole.bytes).unwrap();
        json["partition_index"] = 0.into();
        let bytes = serde_json::to_vec(&json).unwrap();
        let job = VanillaRequest::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
        Fixture { kind: ProofKind::WindowPost, bytes, job }
    }

    fn submit(&self, key: &str) -> pb::SubmitProofRequest {
        pb::SubmitProofRequest {
            idempotency_key: key.to_string(),
            kind: pb_kind(self.kind) as i32,
            sector_size: self.job.sector_size(),
            vanilla: self.bytes.clone(),
            priority: pb::Priority::Unspecified as i32,
        }
    }

    /// The proof verifies with filecoin-proofs, and its negative twins do not: the same proof
    /// with one bit flipped, and for another sector's public inputs.
    fn check_proof(&self, result: &pb::ProofResult) {
        assert_eq!(result.state, pb::JobState::Succeeded as i32, "{} did not prove: {}", self.kind, result.error);
        assert!(filecoin::verify_with_filecoin_proofs(&self.job, &result.proof, false), "{}: rejected", self.kind);
        let mut flipped = result.proof.clone();
        flipped[result.proof.len() / 2] ^= 1;
        assert!(
            !filecoin::verify_with_filecoin_proofs(&self.job, &flipped, false),
            "{}: a flipped bit verified",
            self.kind
        );
        assert!(
            !filecoin::verify_with_filecoin_proofs(&self.job, &result.proof, true),
            "{}: verified for another sector's inputs",
            self.kind
        );
        let t = result.timings.unwrap();
        assert!(t.total > 0.0 && t.gpu > 0.0 && t.total >= t.queue_wait, "{}: timings {t:?}", self.kind);
    }
}

fn pb_kind(kind: ProofKind) -> pb::ProofKind {
    match kind {
        ProofKind::Porep => pb::ProofKind::PorepC2,
        ProofKind::Snap => pb::ProofKind::SnapDeals,
        ProofKind::WindowPost => pb::ProofKind::WindowPost,
        ProofKind::WinningPost => pb::ProofKind::WinningPost,
    }
}

async fn submit(client: &mut Client, request: pb::SubmitProofRequest) -> pb::SubmitProofResponse {
    client.submit_proof(request).await.expect("submit").into_inner()
}

async fn await_proof(client: &mut Client, job_id: &str) -> pb::ProofResult {
    let request = pb::AwaitProofRequest { job_id: job_id.into(), timeout_ms: AWAIT_MS, until_started: false };
    client.await_proof(request).await.unwrap_or_else(|s| panic!("awaiting {job_id}: {s}")).into_inner()
}

async fn status(client: &mut Client) -> pb::StatusResponse {
    client.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner()
}

/// Asserts that the daemon holds nothing beyond its resident keys and runs nothing.
fn assert_idle_and_clean(status: &pb::StatusResponse) {
    let held = status.held.unwrap();
    assert_eq!(held, pb::Held::default(), "the daemon holds memory no job explains: {status:?}");
    let queues = status.queues.unwrap();
    assert_eq!((queues.queued, queues.running), (0, 0), "{status:?}");
}

fn socket_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("snarkpipe.sock")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_serves_every_scenario() {
    let fixtures: Vec<Fixture> = tokio::task::block_in_place(|| ProofKind::ALL.map(Fixture::of).into_iter().collect());
    let fixture = |kind: ProofKind| fixtures.iter().find(|f| f.kind == kind).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // One job at a time: the PoReps of the priority scenario queue in the daemon, and only
    // the first is proven (a 2 KiB PoRep is minutes on two cores).
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &["--concurrent-jobs", "1"]));
    let mut client = daemon.client().await;

    let started = Instant::now();
    srs_by_name_before_any_proof(&mut client).await;
    bad_input_gets_typed_statuses(&mut client, &daemon, fixture(ProofKind::WindowPost)).await;
    eprintln!("bad input: {:.1} s", started.elapsed().as_secs_f64());
    for kind in [ProofKind::WindowPost, ProofKind::WinningPost, ProofKind::Snap] {
        let started = Instant::now();
        prove_and_verify(&mut client, fixture(kind)).await;
        eprintln!("{kind}: {:.1} s", started.elapsed().as_secs_f64());
    }
    srs_preload_and_evict(&mut client).await;
    // One partition of the deadline: its bytes are what the node merges with the other
    // partitions'; a deadline of one partition verifies as the whole.
    let partition = tokio::task::block_in_place(Fixture::window_partition);
    let request =
        pb::ProveRequest { submit: Some(partition.submit("prove-window-post-partition-0")), timeout_ms: AWAIT_MS };
    partition.check_proof(&client.prove(request).await.expect("Prove").into_inner());
    same_key_twice_is_one_job(&mut client, fixture(ProofKind::WindowPost), fixture(ProofKind::WinningPost)).await;
    let started = Instant::now();
    cancel_mid_flight(&mut client, fixture(ProofKind::Porep), fixture(ProofKind::WindowPost)).await;
    eprintln!("cancel: {:.1} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    critical_winning_post_overtakes_porep_batch(
        &mut client,
        fixture(ProofKind::Porep),
        fixture(ProofKind::WinningPost),
    )
    .await;
    eprintln!("priority and PoRep: {:.1} s", started.elapsed().as_secs_f64());
    let started = Instant::now();
    concurrent_clients(&daemon, fixture(ProofKind::WindowPost), 200).await;
    eprintln!("load: {:.1} s", started.elapsed().as_secs_f64());
    metrics_agree_with_status(&mut client).await;
    assert_idle_and_clean(&status(&mut client).await);

    // A clean stop: SIGTERM with nothing running exits 0 and cancels nothing.
    daemon.signal("TERM");
    let log = daemon.log();
    let (exit, stdout) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success(), "exit {exit:?}: {log}");
    assert!(stdout.iter().any(|l| l.contains("cancelled []")), "{stdout:?}");
}

async fn prove_and_verify(client: &mut Client, fixture: &Fixture) {
    let request =
        pb::ProveRequest { submit: Some(fixture.submit(&format!("prove-{}", fixture.kind))), timeout_ms: AWAIT_MS };
    let result = client.prove(request).await.expect("Prove").into_inner();
    assert_eq!(result.kind, pb_kind(fixture.kind) as i32);
    fixture.check_proof(&result);
}

/// Before any proof, PreloadSRS loads a kind's key by name from the parameter directory and
/// makes it hot; a size whose parameters the directory lacks is refused, naming the file.
async fn srs_by_name_before_any_proof(client: &mut Client) {
    let absent = pb::SrsRequest { kind: pb::ProofKind::WindowPost as i32, sector_size: 32 << 30 };
    let refused = client.preload_srs(absent).await.unwrap_err();
    assert_eq!(refused.code(), Code::FailedPrecondition, "{refused:?}");
    assert!(refused.message().contains(".params") && refused.message().contains("32 GiB"), "{refused:?}");
    let request = pb::SrsRequest { kind: pb::ProofKind::WindowPost as i32, sector_size: 2048 };
    let preloaded = client.preload_srs(request).await.unwrap().into_inner();
    assert_eq!((preloaded.tier.as_str(), preloaded.devices.as_slice()), ("hot", &[0u32][..]), "{preloaded:?}");
    let ready = status(client).await;
    assert_eq!((ready.proofs_completed, ready.keys.len()), (0, 1), "{ready:?}");
}

/// After a Window PoSt proved with the key preloaded by name, its key can be evicted from the
/// device and preloaded again; and the proof used the preloaded key: each kind's parameters
/// were read once, into one key.
async fn srs_preload_and_evict(client: &mut Client) {
    let request = || pb::SrsRequest { kind: pb::ProofKind::WindowPost as i32, sector_size: 2048 };
    let evicted = client.evict_srs(request()).await.unwrap().into_inner();
    assert_eq!((evicted.tier.as_str(), evicted.devices.len()), ("warm", 0), "{evicted:?}");
    let preloaded = client.preload_srs(request()).await.unwrap().into_inner();
    assert_eq!((preloaded.tier.as_str(), preloaded.devices.as_slice()), ("hot", &[0u32][..]), "{preloaded:?}");
    let keys = status(client).await.keys;
    assert!(keys.iter().any(|k| k.tier == "hot"), "{keys:?}");
    // Window PoSt, Winning PoSt and SnapDeals proved so far: three keys, each loaded once.
    assert_eq!(keys.len(), 3, "{keys:?}");
    assert!(keys.iter().all(|k| k.loads == 1), "{keys:?}");
}

async fn same_key_twice_is_one_job(client: &mut Client, window: &Fixture, winning: &Fixture) {
    let before = status(client).await;
    let first = submit(client, window.submit("twice")).await;
    let second = submit(client, window.submit("twice")).await;
    assert_eq!(first.job_id, second.job_id);
    assert!(!first.existing && second.existing, "{first:?} {second:?}");
    // The same key for another request is refused, not answered with the first one's proof.
    let reused = client.submit_proof(winning.submit("twice")).await.unwrap_err();
    assert_eq!(reused.code(), Code::AlreadyExists, "{reused:?}");
    assert!(reused.message().contains(&first.job_id), "{reused:?}");
    window.check_proof(&await_proof(client, &first.job_id).await);
    // A resubmit after the end still finds the job, with its proof.
    let again = submit(client, window.submit("twice")).await;
    assert_eq!((again.job_id.as_str(), again.state), (first.job_id.as_str(), pb::JobState::Succeeded as i32));
    let after = status(client).await;
    assert_eq!(after.proofs_completed, before.proofs_completed + 1, "one job, one proof");
}

/// A PoRep cancelled once it runs ends cancelled, releases what it held, and the next job
/// proves.
async fn cancel_mid_flight(client: &mut Client, porep: &Fixture, window: &Fixture) {
    let job = submit(client, porep.submit("cancel-me")).await.job_id;
    let request = pb::AwaitProofRequest { job_id: job.clone(), timeout_ms: AWAIT_MS, until_started: true };
    let running = client.await_proof(request).await.unwrap().into_inner();
    assert_eq!(running.state, pb::JobState::Running as i32, "{running:?}");
    // Once its partition is on the (one) device, the status names the job on that GPU.
    let deadline = Instant::now() + std::time::Duration::from_millis(AWAIT_MS);
    loop {
        let gpus = status(client).await.gpus;
        assert_eq!(gpus.len(), 1, "{gpus:?}");
        if gpus[0].current_jobs == [job.clone()] {
            break;
        }
        assert!(gpus[0].current_jobs.is_empty(), "another job on the GPU: {gpus:?}");
        assert!(Instant::now() < deadline, "the running PoRep never showed on the GPU: {gpus:?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let cancelled = client.cancel_proof(pb::CancelProofRequest { job_id: job.clone() }).await.unwrap().into_inner();
    let stopping = [pb::JobState::Cancelled as i32, pb::JobState::Running as i32];
    assert!(stopping.contains(&cancelled.state), "{cancelled:?}");
    let result = await_proof(client, &job).await;
    assert_eq!(result.state, pb::JobState::Cancelled as i32);
    assert!(result.error.contains("CancelProof") && result.proof.is_empty(), "{result:?}");
    assert_idle_and_clean(&status(client).await);
    prove_and_verify(client, window).await;
}

/// Three PoReps, then a Winning PoSt (critical by its kind): the PoSt starts before every
/// PoRep still queued when it came, and the first PoRep proves and verifies.
async fn critical_winning_post_overtakes_porep_batch(client: &mut Client, porep: &Fixture, winning: &Fixture) {
    let mut batch = Vec::new();
    for i in 0..3 {
        batch.push(submit(client, porep.submit(&format!("batch-{i}"))).await.job_id);
    }
    let post_id = submit(client, winning.submit("overtaker")).await.job_id;
    let post = await_proof(client, &post_id).await;
    winning.check_proof(&post);
    // The PoSt's proof is in: the rest of the batch is not needed past its first job.
    for id in &batch[1..] {
        client.cancel_proof(pb::CancelProofRequest { job_id: id.clone() }).await.unwrap();
    }
    let mut overtaken = 0;
    for id in &batch {
        let result = await_proof(client, id).await;
        let queued_at_post = result.started_at_ms == 0 || result.started_at_ms >= post.submitted_at_ms;
        if queued_at_post {
            overtaken += 1;
            assert!(
                result.started_at_ms == 0 || result.started_at_ms >= post.started_at_ms,
                "{id} was queued when the PoSt came and started before it: {result:?} {post:?}"
            );
        }
        if id == &batch[0] {
            porep.check_proof(&result);
        }
    }
    assert!(overtaken >= 1, "with one worker, a later PoRep must have been queued when the PoSt came");
}

async fn bad_input_gets_typed_statuses(client: &mut Client, daemon: &Daemon, window: &Fixture) {
    let refused = |request: pb::SubmitProofRequest| {
        let mut client = client.clone();
        async move { client.submit_proof(request).await.expect_err("a bad request was accepted") }
    };
    let check = |status: Status, code: Code, words: &str| {
        assert_eq!(status.code(), code, "{status:?}");
        assert!(status.message().contains(words), "{:?} does not say {words:?}", status.message());
    };
    check(
        refused(pb::SubmitProofRequest { kind: 99, ..window.submit("bad") }).await,
        Code::InvalidArgument,
        "unknown proof kind 99",
    );
    check(refused(pb::SubmitProofRequest { kind: 0, ..window.submit("bad") }).await, Code::InvalidArgument, "not set");
    check(refused(window.submit("")).await, Code::InvalidArgument, "idempotency_key");
    check(
        refused(pb::SubmitProofRequest { vanilla: b"{\"kind\": \"window-post\", ".to_vec(), ..window.submit("bad") })
            .await,
        Code::InvalidArgument,
        "malformed",
    );
    check(
        refused(pb::SubmitProofRequest { vanilla: vec![b' '; MAX_VANILLA + 1], ..window.submit("bad") }).await,
        Code::ResourceExhausted,
        "--max-vanilla-bytes",
    );
    check(
        refused(pb::SubmitProofRequest { sector_size: 8 << 20, ..window.submit("bad") }).await,
        Code::InvalidArgument,
        "2 KiB sector",
    );
    check(
        refused(pb::SubmitProofRequest { sector_size: 4096, ..window.submit("bad") }).await,
        Code::InvalidArgument,
        "4 KiB",
    );
    check(
        refused(pb::SubmitProofRequest { kind: pb::ProofKind::WinningPost as i32, ..window.submit("bad") }).await,
        Code::InvalidArgument,
        "is a window-post",
    );
    let unknown = client
        .await_proof(pb::AwaitProofRequest { job_id: "nope".into(), timeout_ms: 1, until_started: false })
        .await
        .unwrap_err();
    check(unknown, Code::NotFound, "no job");
    // Bytes that are not a SubmitProofRequest at all (field 1 with wire type 7).
    let malformed = raw_call(daemon, "/snarkpipe.v1.ProvingService/SubmitProof", vec![0x0f, 0x01]).await.unwrap_err();
    assert!(matches!(malformed.code(), Code::Internal | Code::InvalidArgument), "{malformed:?}");
    assert!(malformed.message().contains("decode"), "{malformed:?}");
    // None of it reached the queue, and the daemon goes on.
    let after = status(client).await;
    assert_eq!((after.proofs_failed, after.queues.unwrap().queued), (0, 0), "{after:?}");
}

/// Sends `body` as the raw message of a unary call.
async fn raw_call(daemon: &Daemon, path: &'static str, body: Vec<u8>) -> Result<Vec<u8>, Status> {
    #[derive(Clone, Copy, Default)]
    struct Raw;
    impl Codec for Raw {
        type Encode = Vec<u8>;
        type Decode = Vec<u8>;
        type Encoder = Raw;
        type Decoder = Raw;
        fn encoder(&mut self) -> Raw {
            Raw
        }
        fn decoder(&mut self) -> Raw {
            Raw
        }
    }
    impl Encoder for Raw {
        type Item = Vec<u8>;
        type Error = Status;
        fn encode(&mut self, item: Vec<u8>, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
            dst.put_slice(&item);
            Ok(())
        }
    }
    impl Decoder for Raw {
        type Item = Vec<u8>;
        type Error = Status;
        fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, Status> {
            Ok(Some(src.copy_to_bytes(src.remaining()).to_vec()))
        }
    }
    let channel = channel(daemon.socket.clone()).await;
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.map_err(|e| Status::unavailable(e.to_string()))?;
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(path);
    grpc.unary(tonic::Request::new(body), path, Raw).await.map(|r| r.into_inner())
}

/// `clients` concurrent clients, each on its own connection, each proving one Window PoSt:
/// every one gets its own verified proof, and the p99 of their waits is printed.
async fn concurrent_clients(daemon: &Daemon, window: &Fixture, clients: usize) {
    let before = status(&mut daemon.client().await).await;
    let tasks: Vec<_> = (0..clients)
        .map(|i| {
            let request = pb::ProveRequest { submit: Some(window.submit(&format!("load-{i}"))), timeout_ms: AWAIT_MS };
            let socket = daemon.socket.clone();
            async move {
                let mut client = connect(socket).await;
                let started = Instant::now();
                let result = client.prove(request).await;
                (started.elapsed(), result)
            }
        })
        .map(tokio::spawn)
        .collect();
    let mut waits = Vec::new();
    let mut ids = std::collections::BTreeSet::new();
    for task in tasks {
        let (waited, result) = task.await.unwrap();
        let result = result.expect("a load request failed").into_inner();
        window.check_proof(&result);
        ids.insert(result.job_id);
        waits.push(waited);
    }
    assert_eq!(ids.len(), clients, "every client got a job of its own");
    let after = status(&mut daemon.client().await).await;
    assert_eq!(after.proofs_completed - before.proofs_completed, clients as u64, "no request lost or doubled");
    waits.sort();
    let at = |q: f64| waits[((waits.len() as f64 * q).ceil() as usize).clamp(1, waits.len()) - 1].as_secs_f64();
    println!(
        "load: {clients} concurrent clients, Window PoSt 2 KiB each: await latency p50 {:.2} s, p99 {:.2} s, max {:.2} s",
        at(0.5),
        at(0.99),
        at(1.0)
    );
}

async fn metrics_agree_with_status(client: &mut Client) {
    let text = client.get_metrics(pb::GetMetricsRequest {}).await.unwrap().into_inner().text;
    let status = status(client).await;
    let line = format!("snarkpipe_proofs_total{{outcome=\"succeeded\"}} {}", status.proofs_completed);
    assert!(text.lines().any(|l| l == line), "{line:?} not in:\n{text}");
    assert!(text.contains("# TYPE snarkpipe_jobs_queued gauge"), "{text}");
}

/// SIGTERM while jobs run and wait: the daemon takes no more, finishes the running job within
/// its grace, cancels the queued ones, tells each client which, and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_or_cancels_every_job_and_exits_0() {
    let window = tokio::task::block_in_place(|| Fixture::of(ProofKind::WindowPost));
    let dir = tempfile::tempdir().unwrap();
    let args = ["--concurrent-jobs", "1", "--shutdown-grace-secs", "600"];
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &args));
    let mut client = daemon.client().await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(submit(&mut client, window.submit(&format!("term-{i}"))).await.job_id);
    }
    let request = pb::AwaitProofRequest { job_id: ids[0].clone(), timeout_ms: AWAIT_MS, until_started: true };
    client.await_proof(request).await.unwrap();
    let waits: Vec<_> = ids
        .iter()
        .map(|id| {
            let (mut client, id) = (client.clone(), id.clone());
            tokio::spawn(async move { await_proof(&mut client, &id).await })
        })
        .collect();
    // On one connection the awaits' streams open before this call's: once it is answered,
    // the daemon has every await in hand and shutdown lets them finish.
    status(&mut client).await;
    daemon.signal("TERM");
    let mut cancelled = Vec::new();
    for wait in waits {
        let result = wait.await.unwrap();
        match pb::JobState::try_from(result.state).unwrap() {
            pb::JobState::Succeeded => window.check_proof(&result),
            pb::JobState::Cancelled => {
                assert!(result.error.contains("shut down"), "{result:?}");
                cancelled.push(result.job_id);
            }
            other => panic!("{} ended {other:?}: {}", result.job_id, result.error),
        }
    }
    let log = daemon.log();
    let (exit, stdout) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success(), "exit {exit:?}: {log}");
    assert!(!cancelled.is_empty() && cancelled.len() < ids.len(), "{cancelled:?}");
    // The report names what the shutdown cancelled, exactly what the clients were told.
    let report = stdout.iter().find(|l| l.contains("shut down")).expect("the shutdown report");
    assert!(report.contains(&format!("cancelled {cancelled:?}")), "{report} vs {cancelled:?}");
}

/// kill -9 while a job runs: the awaiting client gets an error, not silence; a daemon
/// restarted on the same socket starts clean, and says the old job is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_then_restart_comes_back_clean() {
    let window = tokio::task::block_in_place(|| Fixture::of(ProofKind::WindowPost));
    let dir = tempfile::tempdir().unwrap();
    let socket = socket_in(&dir);
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket, &["--concurrent-jobs", "1"]));
    let mut client = daemon.client().await;
    let lost = submit(&mut client, window.submit("lost")).await.job_id;
    let request = pb::AwaitProofRequest { job_id: lost.clone(), timeout_ms: AWAIT_MS, until_started: true };
    client.await_proof(request).await.unwrap();
    let waiting = {
        let (mut client, lost) = (client.clone(), lost.clone());
        tokio::spawn(async move {
            client.await_proof(pb::AwaitProofRequest { job_id: lost, timeout_ms: AWAIT_MS, until_started: false }).await
        })
    };
    status(&mut client).await;
    daemon.signal("KILL");
    let (exit, _) = tokio::task::block_in_place(|| daemon.wait());
    assert!(!exit.success());
    let broken = waiting.await.unwrap().expect_err("an await outlived its daemon");
    assert!(matches!(broken.code(), Code::Unavailable | Code::Unknown | Code::Cancelled), "{broken:?}");

    // The killed daemon's socket file is still there; the new one clears it and binds.
    assert!(socket.exists());
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket, &["--concurrent-jobs", "1"]));
    let mut client = daemon.client().await;
    let fresh = status(&mut client).await;
    assert_idle_and_clean(&fresh);
    assert_eq!((fresh.proofs_completed, fresh.proofs_failed, fresh.keys.len()), (0, 0, 0), "{fresh:?}");
    let gone = client
        .await_proof(pb::AwaitProofRequest { job_id: lost.clone(), timeout_ms: 1, until_started: false })
        .await
        .unwrap_err();
    assert_eq!(gone.code(), Code::NotFound, "{gone:?}");
    assert!(gone.message().contains("earlier run"), "{gone:?}");
    let again = submit(&mut client, window.submit("lost")).await.job_id;
    let result = await_proof(&mut client, &again).await;
    window.check_proof(&result);
    assert_idle_and_clean(&status(&mut client).await);
}

/// A GPU that breaks for the rest of the process (the fault drill: the first kernel breaks it,
/// and on the CPU model the break outlives recovery, as a sticky CUDA error does). With
/// `--restart-when-broken false` (the negative twin) the job fails with the broken device named
/// and the GPU stays out of service. By default the daemon replaces itself, same PID, and both
/// jobs (the one the GPU failed and the one queued behind it) are proven by the new process
/// under their old ids: a client that reconnects and awaits them gets proofs that
/// filecoin-proofs verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_gpu_restarts_the_daemon_and_no_job_is_lost() {
    let (winning, window) =
        tokio::task::block_in_place(|| (Fixture::of(ProofKind::WinningPost), Fixture::of(ProofKind::WindowPost)));
    let drill = [("SNARKPIPE_DRILL_BREAK_GPU", "1")];
    let one_job = ["--concurrent-jobs", "1"];
    let dir = tempfile::tempdir().unwrap();

    // The twin: no restart, so the job the GPU failed fails, and says why.
    let socket = dir.path().join("twin.sock");
    let twin = tokio::task::block_in_place(|| {
        Daemon::start_with(&socket, &[&one_job[..], &["--restart-when-broken", "false"]].concat(), &drill)
    });
    let mut client = twin.client().await;
    let failed = submit(&mut client, winning.submit("twin")).await.job_id;
    let result = await_proof(&mut client, &failed).await;
    assert_eq!(result.state, pb::JobState::Failed as i32, "{result:?}");
    assert!(result.error.contains("broke") || result.error.contains("out of service"), "{}", result.error);
    let after = status(&mut client).await;
    assert_eq!(after.restarts, 0);
    assert!(after.gpus.iter().any(|g| g.health.starts_with("OutOfService")), "{:?}", after.gpus);
    drop(twin);

    // The restart.
    let socket = socket_in(&dir);
    let daemon = tokio::task::block_in_place(|| Daemon::start_with(&socket, &one_job, &drill));
    let pid = daemon.child.id();
    let mut client = daemon.client().await;
    let before = status(&mut client).await;
    let first = submit(&mut client, winning.submit("first")).await.job_id;
    let second = submit(&mut client, window.submit("second")).await.job_id;
    let awaited = {
        let (mut client, first) = (client.clone(), first.clone());
        tokio::spawn(async move {
            client
                .await_proof(pb::AwaitProofRequest { job_id: first, timeout_ms: AWAIT_MS, until_started: false })
                .await
        })
    };
    // The old process's await ends with the process (it never answers with a failure).
    match awaited.await.unwrap() {
        Err(broken) => {
            assert!(matches!(broken.code(), Code::Unavailable | Code::Unknown | Code::Cancelled), "{broken:?}")
        }
        Ok(answer) => panic!("the old process answered {:?}", answer.into_inner()),
    }
    tokio::task::block_in_place(|| daemon.wait_for_another_ready_line(std::time::Duration::from_secs(300)));
    assert_eq!(daemon.child.id(), pid);
    let mut client = daemon.client().await;
    let after = status(&mut client).await;
    assert_eq!(after.restarts, 1, "{after:?}");
    assert_ne!(after.instance, before.instance, "the same process answered");
    let (first_result, second_result) =
        (await_proof(&mut client, &first).await, await_proof(&mut client, &second).await);
    winning.check_proof(&first_result);
    window.check_proof(&second_result);
    // The idempotency keys came along: resubmitting names the same jobs.
    let again = submit(&mut client, winning.submit("first")).await;
    assert!(again.existing && again.job_id == first, "{again:?}");
    assert!(after.gpus.iter().all(|g| !g.health.starts_with("OutOfService")), "{:?}", after.gpus);
    assert_idle_and_clean(&status(&mut client).await);
    let log = daemon.log();
    assert!(log.contains("restarting the daemon") && log.contains("carried over the restart"), "{log}");
}

/// The service has no authentication: a non-loopback TCP address is refused without the flag.
#[test]
fn a_remote_listen_address_needs_allow_remote() {
    let out = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["serve", "--listen", "0.0.0.0:0", "--backend", "cpu", "--params-dir"])
        .arg(std::env::temp_dir())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-remote") && stderr.contains("no authentication"), "{stderr}");
}

/// Keys named with `--preload` are loaded and hot before the daemon serves, with no proof; the
/// first proof of the kind uses the preloaded key (no load, no second key). A name that is not
/// one, or one whose parameters the directory lacks, stops the start and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_named_with_preload_is_hot_before_serving() {
    let fixture = tokio::task::block_in_place(|| Fixture::of(ProofKind::WinningPost));
    let dir = tempfile::tempdir().unwrap();
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &["--preload", "winning-post-2k"]));
    let mut client = daemon.client().await;
    let ready = status(&mut client).await;
    assert_eq!(ready.proofs_completed, 0, "{ready:?}");
    assert_eq!(ready.keys.iter().map(|k| (k.tier.as_str(), k.loads)).collect::<Vec<_>>(), [("hot", 1)], "{ready:?}");
    let request = pb::ProveRequest { submit: Some(fixture.submit("after-preload")), timeout_ms: AWAIT_MS };
    let result = client.prove(request).await.unwrap().into_inner();
    fixture.check_proof(&result);
    assert_eq!(result.timings.unwrap().key_load, 0.0, "the first proof loaded a key: {result:?}");
    let after = status(&mut client).await;
    assert_eq!(after.keys.iter().map(|k| (k.loads, k.hits > 0)).collect::<Vec<_>>(), [(1, true)], "{after:?}");
    daemon.signal("TERM");
    let (exit, _) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success());

    let refusals = [("porep-32", "KIND-SIZE"), ("porep-3k", "3 KiB"), ("winning-post-32g", "winning-post 32 GiB")];
    for (name, says) in refusals {
        let out = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
            .args(["serve", "--backend", "cpu", "--listen"])
            .arg(format!("unix:{}", dir.path().join("other.sock").display()))
            .arg("--params-dir")
            .arg(filecoin::params_dir())
            .args(["--preload", name])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{name}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{name}: {stderr}");
        assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"), "{name}");
    }
}

/// A job file given to `--preload-job` is proven before the daemon serves: its key is hot for
/// the first call, and `PreloadSRS` knows the kind. One that does not prove stops the start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preload_job_makes_its_key_hot_before_serving() {
    let path = tokio::task::block_in_place(|| filecoin::job(ProofKind::WindowPost, 1));
    let dir = tempfile::tempdir().unwrap();
    let preload = format!("--preload-job={}", path.display());
    let daemon = tokio::task::block_in_place(|| Daemon::start(&socket_in(&dir), &[preload.as_str()]));
    let mut client = daemon.client().await;
    let ready = status(&mut client).await;
    assert_eq!(ready.proofs_completed, 1, "{ready:?}");
    assert!(ready.keys.iter().any(|k| k.tier == "hot"), "{ready:?}");
    let request = pb::SrsRequest { kind: pb::ProofKind::WindowPost as i32, sector_size: 2048 };
    assert_eq!(client.preload_srs(request).await.unwrap().into_inner().tier, "hot");
    daemon.signal("TERM");
    let (exit, _) = tokio::task::block_in_place(|| daemon.wait());
    assert!(exit.success());

    // A job file that is not one: the daemon says which and does not serve.
    let broken = dir.path().join("broken.json");
    std::fs::write(&broken, "{\"kind\": \"window-post\"").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["serve", "--backend", "cpu", "--listen"])
        .arg(format!("unix:{}", dir.path().join("other.sock").display()))
        .arg("--params-dir")
        .arg(filecoin::params_dir())
        .arg(format!("--preload-job={}", broken.display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("broken.json"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("listening"));
}
