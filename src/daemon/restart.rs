//! The daemon's restart after a GPU breaks. On CUDA a sticky error (an illegal address, a
//! trapping kernel) stays with the process until it exits: no context of that process works
//! on the GPU again (`docs/library.md`, "A GPU that breaks"). So when the prover says a device
//! needs a restart, the daemon stops handing out jobs, lets the running ones finish on the
//! GPUs that still work, puts the jobs the broken GPU failed back in the queue, writes the
//! queue to a directory of its own and replaces itself (`exec`: same PID, same arguments, so
//! a supervisor such as systemd sees one process throughout). The new process queues those
//! jobs again under their old ids, so a client that awaited one awaits it again after it
//! reconnects, and it proves them with the GPU back in service.
//!
//! Invariants:
//! - no accepted job is lost by a restart: it ends in this process, or it is carried;
//! - restarts are bounded: a daemon that restarted [`MAX_QUICK_RESTARTS`] times in a row,
//!   each within [`QUICK`] of its start, stops restarting and serves on with the GPU out of
//!   service (a GPU that breaks again at once is broken for good, not by chance);
//! - the carry directory is read once and removed by the process that reads it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::jobs::{CarriedJob, CarriedProof};
use crate::filecoin::{ProofKind, ProofTimings, VanillaRequest};
use crate::prover::{FaultInjection, FaultSite, Priority};
use crate::{Error, Result};

/// The carry directory, for the process that replaces this one.
pub const CARRY_VARIABLE: &str = "SNARKPIPE_RESTART_CARRY";
/// Restarts so far, and how many of them came in a row each soon after its start.
pub const RESTARTS_VARIABLE: &str = "SNARKPIPE_RESTARTS";
/// A fault drill: `SNARKPIPE_DRILL_BREAK_GPU=1` breaks the first device at its first kernel, as
/// a trap does (a real trap on CUDA), so that an operator (or a test) sees the restart work
/// end to end. The restarted process does not inherit it.
pub const DRILL_VARIABLE: &str = "SNARKPIPE_DRILL_BREAK_GPU";

/// A restart this soon after the process started counts as quick.
pub const QUICK: Duration = Duration::from_secs(600);
/// Quick restarts in a row after which the daemon stops restarting.
pub const MAX_QUICK_RESTARTS: u32 = 3;

const FORMAT_VERSION: u32 = 1;
const MANIFEST: &str = "manifest.json";

/// How many times this daemon replaced itself, as the environment carries it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restarts {
    pub total: u32,
    /// Restarts in a row that each came within [`QUICK`] of their process's start.
    pub quick_in_a_row: u32,
}

impl Restarts {
    /// What the environment says (none when unset or unreadable).
    pub fn from_env() -> Restarts {
        Restarts::from_env_text(&std::env::var(RESTARTS_VARIABLE).unwrap_or_default())
    }

    fn from_env_text(text: &str) -> Restarts {
        let mut parts = text.split(',').map(|p| p.trim().parse::<u32>().ok());
        match (parts.next().flatten(), parts.next().flatten()) {
            (Some(total), Some(quick_in_a_row)) => Restarts { total, quick_in_a_row },
            _ => Restarts::default(),
        }
    }

    /// The count after one more restart, `uptime` after this process started.
    pub fn after_one_more(self, uptime: Duration) -> Restarts {
        let quick_in_a_row = if uptime < QUICK { self.quick_in_a_row + 1 } else { 0 };
        Restarts { total: self.total + 1, quick_in_a_row }
    }

    /// Whether one more restart is allowed, `uptime` after this process started.
    pub fn may_restart(self, uptime: Duration) -> bool {
        self.after_one_more(uptime).quick_in_a_row <= MAX_QUICK_RESTARTS
    }

    fn encode(self) -> String {
        format!("{},{}", self.total, self.quick_in_a_row)
    }
}

/// Whether this process may restart itself now: `--restart-when-broken`, and the bound on
/// quick restarts in a row. The workers (which requeue a job the GPU failed only when a
/// restart will follow) and the watcher (which starts it) ask the same policy.
#[derive(Debug, Clone, Copy)]
pub struct RestartPolicy {
    pub enabled: bool,
    pub restarts: Restarts,
    pub process_started: Instant,
}

impl RestartPolicy {
    pub fn allows_now(&self) -> bool {
        self.enabled && self.restarts.may_restart(self.process_started.elapsed())
    }
}

/// The fault injection of the drill, when the environment asks for it.
pub fn drill_from_env() -> Option<FaultInjection> {
    let asked = std::env::var(DRILL_VARIABLE).is_ok_and(|v| v == "1");
    asked.then(|| FaultInjection {
        armed: vec![(FaultSite::Sticky, 1)],
        devices: None,
        sticky_needs_restart: true,
        ..FaultInjection::default()
    })
}

#[derive(Serialize, Deserialize)]
struct Manifest {
    version: u32,
    jobs: Vec<CarriedEntry>,
    /// Proofs finished and kept for their clients (absent from a carry of before they were).
    #[serde(default)]
    finished: Vec<FinishedEntry>,
}

#[derive(Serialize, Deserialize)]
struct FinishedEntry {
    id: String,
    key: String,
    digest: String,
    kind: ProofKind,
    sector_size: u64,
    /// Hex of filecoin-proofs' encoding.
    proof: String,
    partitions: usize,
    /// key_load, synthesis, first_synthesis, queue, gpu, verify, total (seconds).
    timings: [f64; 7],
    submitted_at_ms: u64,
    started_at_ms: u64,
    finished_at_ms: u64,
}

#[derive(Serialize, Deserialize)]
struct CarriedEntry {
    id: String,
    key: String,
    /// Hex, as the verifying-key digests are written elsewhere.
    digest: String,
    priority: Priority,
    submitted_at_ms: u64,
    /// The vanilla request's file in the directory, as `snarkpipe prove --vanilla` reads it.
    file: String,
}

/// Writes `jobs` to a new directory (owner-only) under `parent`; returns it.
pub fn write_carry(parent: &Path, jobs: Vec<CarriedJob>) -> Result<PathBuf> {
    write_carry_with_proofs(parent, jobs, Vec::new())
}

/// [`write_carry`], with the finished proofs kept for clients that have not collected them.
pub fn write_carry_with_proofs(parent: &Path, jobs: Vec<CarriedJob>, proofs: Vec<CarriedProof>) -> Result<PathBuf> {
    let dir = parent.join(format!("snarkpipe-restart-{}-{:08x}", std::process::id(), rand::random::<u32>()));
    let io = |what: &str, e| Error::io(format!("{what} {}", dir.display()), e);
    std::fs::create_dir_all(&dir).map_err(|e| io("creating the restart's carry directory", e))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io("restricting the carry directory", e))?;
    }
    let mut entries = Vec::with_capacity(jobs.len());
    for (i, job) in jobs.into_iter().enumerate() {
        let file = format!("job-{i}.json");
        job.request.write(&dir.join(&file))?;
        entries.push(CarriedEntry {
            id: job.id,
            key: job.key,
            digest: hex::encode(job.digest),
            priority: job.priority,
            submitted_at_ms: job.submitted_at_ms,
            file,
        });
    }
    let finished = proofs
        .into_iter()
        .map(|p| {
            let t = p.timings;
            FinishedEntry {
                id: p.id,
                key: p.key,
                digest: hex::encode(p.digest),
                kind: p.kind,
                sector_size: p.sector_size,
                proof: hex::encode(&p.proof),
                partitions: p.partitions,
                timings: [t.key_load, t.synthesis, t.first_synthesis, t.queue, t.gpu, t.verify, t.total],
                submitted_at_ms: p.submitted_at_ms,
                started_at_ms: p.started_at_ms,
                finished_at_ms: p.finished_at_ms,
            }
        })
        .collect();
    let manifest = Manifest { version: FORMAT_VERSION, jobs: entries, finished };
    let text = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Internal(format!("encoding the carry: {e}")))?;
    std::fs::write(dir.join(MANIFEST), text).map_err(|e| io("writing the manifest in", e))?;
    Ok(dir)
}

/// Reads the jobs a restarted daemon carries from `dir`, then removes `dir`. A directory that
/// cannot be read is an error naming it (its jobs are not silently dropped: the files stay).
pub fn read_carry(dir: &Path) -> Result<Vec<CarriedJob>> {
    read_carry_with_proofs(dir).map(|(jobs, _)| jobs)
}

/// [`read_carry`], with the finished proofs it carries.
pub fn read_carry_with_proofs(dir: &Path) -> Result<(Vec<CarriedJob>, Vec<CarriedProof>)> {
    let bad = |why: String| Error::Config(format!("the restart's carry directory {}: {why}", dir.display()));
    let text = std::fs::read(dir.join(MANIFEST)).map_err(|e| bad(format!("reading {MANIFEST}: {e}")))?;
    let manifest: Manifest = serde_json::from_slice(&text).map_err(|e| bad(format!("{MANIFEST}: {e}")))?;
    if manifest.version != FORMAT_VERSION {
        return Err(bad(format!("format {} where this build reads {FORMAT_VERSION}", manifest.version)));
    }
    let mut jobs = Vec::with_capacity(manifest.jobs.len());
    for entry in manifest.jobs {
        let digest: [u8; 32] = hex::decode(&entry.digest)
            .ok()
            .and_then(|d| d.try_into().ok())
            .ok_or_else(|| bad(format!("job {}: digest {:?} is not 32 bytes of hex", entry.id, entry.digest)))?;
        let request = std::sync::Arc::new(VanillaRequest::read(&dir.join(&entry.file))?);
        jobs.push(CarriedJob {
            id: entry.id,
            key: entry.key,
            digest,
            priority: entry.priority,
            submitted_at_ms: entry.submitted_at_ms,
            request,
        });
    }
    let mut proofs = Vec::with_capacity(manifest.finished.len());
    for entry in manifest.finished {
        let digest: [u8; 32] = hex::decode(&entry.digest)
            .ok()
            .and_then(|d| d.try_into().ok())
            .ok_or_else(|| bad(format!("proof {}: digest {:?} is not 32 bytes of hex", entry.id, entry.digest)))?;
        let proof =
            hex::decode(&entry.proof).map_err(|e| bad(format!("proof {}: the proof is not hex: {e}", entry.id)))?;
        let [key_load, synthesis, first_synthesis, queue, gpu, verify, total] = entry.timings;
        proofs.push(CarriedProof {
            id: entry.id,
            key: entry.key,
            digest,
            kind: entry.kind,
            sector_size: entry.sector_size,
            proof,
            partitions: entry.partitions,
            timings: ProofTimings { key_load, synthesis, first_synthesis, queue, gpu, verify, total },
            submitted_at_ms: entry.submitted_at_ms,
            started_at_ms: entry.started_at_ms,
            finished_at_ms: entry.finished_at_ms,
        });
    }
    std::fs::remove_dir_all(dir).map_err(|e| Error::io(format!("removing {}", dir.display()), e))?;
    Ok((jobs, proofs))
}

/// Replaces this process with a fresh run of the same binary and arguments, which reads the
/// jobs from `carry`. Returns only if the exec failed.
pub fn exec_again(carry: &Path, restarts: Restarts) -> Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => return Error::io("finding this daemon's executable to restart it", e),
    };
    let err = std::process::Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(CARRY_VARIABLE, carry)
        .env(RESTARTS_VARIABLE, restarts.encode())
        .env_remove(DRILL_VARIABLE)
        .exec();
    Error::io(format!("restarting the daemon ({})", exe.display()), err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(kind: &str, randomness: u8) -> VanillaRequest {
        let text = format!(
            r#"{{"kind":"{kind}","sector_size":2048,"api_version":"1.2.0","randomness":{r},"prover_id":{z},"vanilla_proofs":[]}}"#,
            r = serde_json::to_string(&[randomness; 32]).unwrap(),
            z = serde_json::to_string(&[0u8; 32]).unwrap()
        );
        VanillaRequest::parse(&text).unwrap()
    }

    #[test]
    fn carried_jobs_come_back_as_they_went_and_the_directory_goes() {
        let parent = tempfile::tempdir().unwrap();
        let jobs = vec![
            CarriedJob {
                id: "aaaa-3".into(),
                key: "k3".into(),
                digest: [7; 32],
                priority: Priority::Critical,
                submitted_at_ms: 123,
                request: request("winning-post", 1).into(),
            },
            CarriedJob {
                id: "aaaa-1".into(),
                key: "k1".into(),
                digest: [9; 32],
                priority: Priority::Low,
                submitted_at_ms: 45,
                request: request("window-post", 2).into(),
            },
        ];
        let dir = write_carry(parent.path(), jobs).unwrap();
        let back = read_carry(&dir).unwrap();
        assert!(!dir.exists(), "the carry directory outlived its reading");
        let seen: Vec<_> =
            back.iter().map(|j| (j.id.as_str(), j.key.as_str(), j.digest, j.priority, j.submitted_at_ms)).collect();
        assert_eq!(
            seen,
            [("aaaa-3", "k3", [7; 32], Priority::Critical, 123), ("aaaa-1", "k1", [9; 32], Priority::Low, 45)]
        );
        assert_eq!(back[0].request.kind(), request("winning-post", 1).kind());
        assert_ne!(back[0].request.kind(), back[1].request.kind());
    }

    #[test]
    fn finished_proofs_come_back_as_they_went() {
        let parent = tempfile::tempdir().unwrap();
        let proof = CarriedProof {
            id: "aaaa-7".into(),
            key: "k7".into(),
            digest: [5; 32],
            kind: ProofKind::WinningPost,
            sector_size: 2048,
            proof: (0..192u8).collect(),
            partitions: 1,
            timings: ProofTimings { key_load: 0.5, gpu: 0.25, total: 1.0, ..ProofTimings::default() },
            submitted_at_ms: 10,
            started_at_ms: 11,
            finished_at_ms: 12,
        };
        let dir = write_carry_with_proofs(parent.path(), Vec::new(), vec![proof.clone()]).unwrap();
        let (jobs, proofs) = read_carry_with_proofs(&dir).unwrap();
        assert!(jobs.is_empty());
        assert_eq!(proofs, [proof]);
        // The twin: a carry of before proofs were carried reads with none.
        let dir = write_carry(parent.path(), Vec::new()).unwrap();
        let manifest = dir.join(MANIFEST);
        std::fs::write(&manifest, r#"{"version":1,"jobs":[]}"#).unwrap();
        assert!(read_carry_with_proofs(&dir).unwrap().1.is_empty());
    }

    #[test]
    fn a_damaged_carry_is_an_error_that_keeps_its_files() {
        let parent = tempfile::tempdir().unwrap();
        let dir = write_carry(
            parent.path(),
            vec![CarriedJob {
                id: "x-0".into(),
                key: "k".into(),
                digest: [1; 32],
                priority: Priority::Normal,
                submitted_at_ms: 1,
                request: request("window-post", 3).into(),
            }],
        )
        .unwrap();
        let manifest = dir.join(MANIFEST);
        let text = std::fs::read_to_string(&manifest).unwrap().replace(&hex::encode([1u8; 32]), "00ff");
        std::fs::write(&manifest, text).unwrap();
        let err = read_carry(&dir).err().expect("a short digest was accepted");
        assert!(err.to_string().contains("not 32 bytes"), "{err}");
        assert!(dir.join("job-0.json").exists(), "a carry that failed to read lost its job");
        std::fs::write(&manifest, r#"{"version":99,"jobs":[]}"#).unwrap();
        assert!(read_carry(&dir).err().expect("a future format was read").to_string().contains("format 99"));
    }

    #[test]
    fn quick_restarts_in_a_row_are_bounded_and_a_long_run_resets_them() {
        let quick = Duration::from_secs(5);
        let long = QUICK + Duration::from_secs(1);
        let mut restarts = Restarts::default();
        for _ in 0..MAX_QUICK_RESTARTS {
            assert!(restarts.may_restart(quick));
            restarts = restarts.after_one_more(quick);
        }
        assert_eq!(restarts, Restarts { total: MAX_QUICK_RESTARTS, quick_in_a_row: MAX_QUICK_RESTARTS });
        assert!(!restarts.may_restart(quick), "a GPU that breaks at once every time restarted for ever");
        assert!(restarts.may_restart(long));
        assert_eq!(restarts.after_one_more(long).quick_in_a_row, 0);
        assert_eq!(Restarts::from_env_text(&restarts.encode()), restarts);
        assert_eq!(Restarts::from_env_text("garbage"), Restarts::default());
    }
}
