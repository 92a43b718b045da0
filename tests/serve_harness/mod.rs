//! What the tests of `snarkpipe serve` share: the real binary started on the CPU backend on a
//! Unix socket (killed when dropped), the generated tonic client, the 2 KiB fixtures and the
//! check of a proof with filecoin-proofs' verifier and its negative twins. A test binary that
//! uses it declares `mod filecoin;` beside it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use hyper_util::rt::TokioIo;
use snarkpipe::daemon::pb::{self, proving_service_client::ProvingServiceClient};
use snarkpipe::filecoin::{ProofKind, VanillaRequest};
use tonic::transport::{Channel, Endpoint, Uri};

pub type Client = ProvingServiceClient<Channel>;

/// A proof's await bound: far above a 2 KiB proof on two cores, so only a hang trips it.
pub const AWAIT_MS: u64 = 20 * 60 * 1000;
/// The vanilla limit the test daemons run with (2 KiB jobs are far smaller).
pub const MAX_VANILLA: usize = 32 << 20;

/// A `snarkpipe serve` process; killed when dropped, so a failing test leaves none behind.
pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
    /// What it printed on stdout after its ready line.
    pub stdout: Arc<Mutex<Vec<String>>>,
    stdout_done: Option<std::thread::JoinHandle<()>>,
    pub log: PathBuf,
    /// The ready line it printed first.
    pub ready: String,
}

impl Daemon {
    /// Starts a daemon on `socket` and returns once it has announced that it serves.
    pub fn start(socket: &Path, extra: &[&str]) -> Daemon {
        Daemon::start_with(socket, extra, &[])
    }

    /// [`Daemon::start`] with environment variables.
    pub fn start_with(socket: &Path, extra: &[&str], env: &[(&str, &str)]) -> Daemon {
        let log = socket.with_extension("log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
            .envs(env.iter().copied())
            .arg("serve")
            .arg("--listen")
            .arg(format!("unix:{}", socket.display()))
            .arg("--params-dir")
            .arg(crate::filecoin::params_dir())
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
        let ready = match lines.next() {
            Some(Ok(line)) if line.contains("listening on unix:") => {
                eprintln!("{line}");
                line
            }
            other => {
                let _ = child.kill();
                panic!("the daemon did not start ({other:?}): {}", std::fs::read_to_string(&log).unwrap_or_default())
            }
        };
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let sink = stdout.clone();
        let stdout_done =
            std::thread::spawn(move || lines.map_while(|l| l.ok()).for_each(|l| sink.lock().unwrap().push(l)));
        Daemon { child, socket: socket.to_path_buf(), stdout, stdout_done: Some(stdout_done), log, ready }
    }

    /// The address of its `--metrics-listen` door, as its ready line names it.
    pub fn metrics_address(&self) -> Option<std::net::SocketAddr> {
        let url = self.ready.split("metrics on http://").nth(1)?;
        url.split('/').next()?.parse().ok()
    }

    pub async fn client(&self) -> Client {
        connect(self.socket.clone()).await
    }

    pub fn signal(&self, name: &str) {
        let status = Command::new("kill").arg(format!("-{name}")).arg(self.child.id().to_string()).status().unwrap();
        assert!(status.success(), "kill -{name} failed");
    }

    /// Waits for the process to exit; its exit status and what it printed after the ready line.
    pub fn wait(mut self) -> (std::process::ExitStatus, Vec<String>) {
        let status = self.child.wait().unwrap();
        self.stdout_done.take().unwrap().join().unwrap();
        let lines = self.stdout.lock().unwrap().clone();
        (status, lines)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the process has announced that it serves once more (after it replaced
    /// itself); panics with its log after `within`.
    pub fn wait_for_another_ready_line(&self, within: std::time::Duration) {
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
pub async fn channel(socket: PathBuf) -> Channel {
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

pub async fn connect(socket: PathBuf) -> Client {
    ProvingServiceClient::new(channel(socket).await)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20)
}

/// A job's vanilla bytes, its parsed form, and the request that submits it under `key`.
pub struct Fixture {
    pub kind: ProofKind,
    pub bytes: Vec<u8>,
    pub job: VanillaRequest,
}

impl Fixture {
    pub fn of(kind: ProofKind) -> Fixture {
        let path = crate::filecoin::job(kind, 1);
        Fixture { kind, bytes: std::fs::read(&path).unwrap(), job: VanillaRequest::read(&path).unwrap() }
    }

    /// Partition 0 of the Window PoSt fixture's deadline, as a job of its own
    /// (`partition_index`): a node proving its deadline partition by partition sends these.
    pub fn window_partition() -> Fixture {
        let whole = Fixture::of(ProofKind::WindowPost);
        let mut json: serde_json::Value = serde_json::from_slice(&whole.bytes).unwrap();
        json["partition_index"] = 0.into();
        let bytes = serde_json::to_vec(&json).unwrap();
        let job = VanillaRequest::parse(std::str::from_utf8(&bytes).unwrap()).unwrap();
        Fixture { kind: ProofKind::WindowPost, bytes, job }
    }

    pub fn submit(&self, key: &str) -> pb::SubmitProofRequest {
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
    pub fn check_proof(&self, result: &pb::ProofResult) {
        assert_eq!(result.state, pb::JobState::Succeeded as i32, "{} did not prove: {}", self.kind, result.error);
        assert!(
            crate::filecoin::verify_with_filecoin_proofs(&self.job, &result.proof, false),
            "{}: rejected",
            self.kind
        );
        let mut flipped = result.proof.clone();
        flipped[result.proof.len() / 2] ^= 1;
        assert!(
            !crate::filecoin::verify_with_filecoin_proofs(&self.job, &flipped, false),
            "{}: a flipped bit verified",
            self.kind
        );
        assert!(
            !crate::filecoin::verify_with_filecoin_proofs(&self.job, &result.proof, true),
            "{}: verified for another sector's inputs",
            self.kind
        );
        let t = result.timings.unwrap();
        assert!(t.total > 0.0 && t.gpu > 0.0 && t.total >= t.queue_wait, "{}: timings {t:?}", self.kind);
    }
}

pub fn pb_kind(kind: ProofKind) -> pb::ProofKind {
    match kind {
        ProofKind::Porep => pb::ProofKind::PorepC2,
        ProofKind::Snap => pb::ProofKind::SnapDeals,
        ProofKind::WindowPost => pb::ProofKind::WindowPost,
        ProofKind::WinningPost => pb::ProofKind::WinningPost,
    }
}

pub async fn submit(client: &mut Client, request: pb::SubmitProofRequest) -> pb::SubmitProofResponse {
    client.submit_proof(request).await.expect("submit").into_inner()
}

pub async fn await_proof(client: &mut Client, job_id: &str) -> pb::ProofResult {
    let request = pb::AwaitProofRequest { job_id: job_id.into(), timeout_ms: AWAIT_MS, until_started: false };
    client.await_proof(request).await.unwrap_or_else(|s| panic!("awaiting {job_id}: {s}")).into_inner()
}

pub async fn status(client: &mut Client) -> pb::StatusResponse {
    client.get_status(pb::GetStatusRequest {}).await.unwrap().into_inner()
}

/// Asserts that the daemon holds nothing beyond its resident keys and runs nothing.
pub fn assert_idle_and_clean(status: &pb::StatusResponse) {
    let held = status.held.unwrap();
    assert_eq!(held, pb::Held::default(), "the daemon holds memory no job explains: {status:?}");
    let queues = status.queues.unwrap();
    assert_eq!((queues.queued, queues.running), (0, 0), "{status:?}");
}

pub fn socket_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("snarkpipe.sock")
}
