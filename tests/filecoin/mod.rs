//! What the Filecoin test binaries share: real 2 KiB inputs made once per run with
//! filecoin-proofs itself, and the checks every kind goes through.
//!
//! Parameters are generated into `CARGO_TARGET_TMPDIR/filecoin-2kib/params`, which later test
//! binaries of the same run (and later runs on the same checkout) reuse: generating them
//! dominates the cost. filecoin-proofs caches verifying keys per process by sector size alone,
//! so a PoRep of 2 partitions runs in a binary of its own, apart from the 1-partition one.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};

use snarkpipe::backend::BackendKind;
use snarkpipe::filecoin::fixtures;
use snarkpipe::filecoin::{FilecoinProver, ProofKind, VanillaRequest};
use snarkpipe::prover::{Prover, ProverConfig};
use snarkpipe::Scalar;

/// The run's shared fixture directory.
pub fn fixture_root() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("filecoin-2kib")
}

pub fn params_dir() -> PathBuf {
    fixture_root().join("params")
}

/// The job file of `kind` (a PoRep of `partitions` partitions), made once per process with
/// its own sealed sector (seconds), its parameters generated only when the shared directory
/// lacks them (minutes).
pub fn job(kind: ProofKind, partitions: u8) -> PathBuf {
    static JOBS: OnceLock<Mutex<HashMap<(ProofKind, u8), Arc<OnceLock<PathBuf>>>>> = OnceLock::new();
    static CACHE_DIR: OnceLock<()> = OnceLock::new();
    CACHE_DIR.get_or_init(|| {
        std::fs::create_dir_all(params_dir()).unwrap();
        fixtures::use_cache_dir(&params_dir()).unwrap();
    });
    let slot = JOBS.get_or_init(Default::default).lock().unwrap().entry((kind, partitions)).or_default().clone();
    slot.get_or_init(|| {
        let started = std::time::Instant::now();
        let out = fixture_root().join(format!("{kind}-{partitions}"));
        let made = fixtures::write_fixture_jobs(&out.join("sectors"), &out, &[kind], &[partitions], rand::random())
            .expect("filecoin-proofs makes the fixtures");
        eprintln!("fixture {kind} ({partitions}) in {:.1} s: {made:?}", started.elapsed().as_secs_f64());
        made.into_iter().next().expect("one job").path
    })
    .clone()
}

/// One CPU-backend prover per binary, shared by its tests as a node shares one.
pub fn prover() -> &'static Prover {
    static PROVER: OnceLock<Prover> = OnceLock::new();
    PROVER.get_or_init(|| Prover::new(ProverConfig { backend: BackendKind::Cpu, ..ProverConfig::default() }).unwrap())
}

/// Fresh blinding factors, one pair per partition.
pub fn blinding(partitions: usize) -> (Vec<Scalar>, Vec<Scalar>) {
    use ff::Field;
    let mut rng = rand::thread_rng();
    let r = (0..partitions).map(|_| Scalar::random(&mut rng)).collect();
    let s = (0..partitions).map(|_| Scalar::random(&mut rng)).collect();
    (r, s)
}

/// filecoin-proofs' own verifier for a job's proof, with the job's public inputs, or with
/// those of another sector (`other_sector`): another sector id (PoRep), other randomness
/// (PoSt), or the old replica's commitment in the new one's place (SnapDeals).
pub fn verify_with_filecoin_proofs(job: &VanillaRequest, proof: &[u8], other_sector: bool) -> bool {
    use filecoin_proofs::{PoStType, PublicReplicaInfo, SealCommitPhase1Output, SectorShape2KiB as Tree};
    use storage_proofs_core::sector::SectorId;
    let outcome = match job {
        VanillaRequest::Porep(p) => {
            let c1: SealCommitPhase1Output<Tree> = serde_json::from_str(p.phase1_output.get()).unwrap();
            let config =
                snarkpipe::filecoin::porep_config(p.sector_size, p.porep_id, job.api_version().unwrap(), p.partitions)
                    .unwrap();
            let sector_id = if other_sector { p.sector_id + 1 } else { p.sector_id };
            filecoin_proofs::verify_seal::<Tree>(
                &config,
                c1.comm_r,
                c1.comm_d,
                p.prover_id,
                SectorId::from(sector_id),
                c1.ticket,
                c1.seed,
                proof,
            )
        }
        VanillaRequest::Snap(u) => {
            let config =
                snarkpipe::filecoin::porep_config(u.sector_size, [0; 32], job.api_version().unwrap(), None).unwrap();
            let comm_r_new = if other_sector { u.comm_r_old } else { u.comm_r_new };
            filecoin_proofs::verify_empty_sector_update_proof::<Tree>(
                &config,
                proof,
                u.comm_r_old,
                comm_r_new,
                u.comm_d_new,
            )
        }
        VanillaRequest::WindowPost(p) | VanillaRequest::WinningPost(p) => {
            let typ = if job.kind() == ProofKind::WindowPost { PoStType::Window } else { PoStType::Winning };
            let config =
                snarkpipe::filecoin::post_config(typ.clone(), p.sector_size, job.api_version().unwrap()).unwrap();
            let sectors: Vec<filecoin_proofs::FallbackPoStSectorProof<Tree>> =
                serde_json::from_str(p.vanilla_proofs.get()).unwrap();
            let replicas: Vec<_> = sectors
                .iter()
                .map(|s| {
                    let mut comm_r = [0u8; 32];
                    comm_r.copy_from_slice(AsRef::<[u8]>::as_ref(&s.comm_r));
                    (s.sector_id, PublicReplicaInfo::new(comm_r).unwrap())
                })
                .collect();
            let mut randomness = p.randomness;
            if other_sector {
                randomness[0] ^= 1;
            }
            match typ {
                PoStType::Window => filecoin_proofs::verify_window_post::<Tree>(
                    &config,
                    &randomness,
                    &replicas.into_iter().collect(),
                    p.prover_id,
                    proof,
                ),
                PoStType::Winning => {
                    filecoin_proofs::verify_winning_post::<Tree>(&config, &randomness, &replicas, p.prover_id, proof)
                }
            }
        }
    };
    // A proof that does not parse is as rejected as one that does not verify.
    outcome.unwrap_or(false)
}

/// Everything one kind's job must pass: snarkpipe's proof verifies with filecoin-proofs'
/// verifier; with the same r and s it is bellperson's proof byte for byte; it is rejected for
/// another sector's public inputs and with any one bit flipped.
pub fn check_kind(job_path: &Path) {
    let job = VanillaRequest::read(job_path).unwrap();
    let engine = || FilecoinProver::with_params_dir(prover(), &params_dir()).unwrap();
    let partitions = match &job {
        VanillaRequest::Porep(p) => usize::from(p.partitions.unwrap_or(1)),
        _ => 1,
    };
    // Proving is what costs here (minutes for a PoRep on two cores): one proof each way.
    let (r, s) = blinding(partitions);
    let ours = engine().fixed_blinding(r.clone(), s.clone()).prove_job(&job).expect("snarkpipe proves the job");
    assert_eq!(ours.partitions, partitions);
    assert!(verify_with_filecoin_proofs(&job, &ours.bytes, false), "filecoin-proofs rejects snarkpipe's proof");
    assert!(
        !verify_with_filecoin_proofs(&job, &ours.bytes, true),
        "filecoin-proofs accepts the proof for another sector's public inputs"
    );
    for bit in [0, ours.bytes.len() * 8 / 2 + 3, ours.bytes.len() * 8 - 1] {
        let mut flipped = ours.bytes.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        assert!(!verify_with_filecoin_proofs(&job, &flipped, false), "a proof with bit {bit} flipped verifies");
    }
    let theirs = engine().bellperson_reference().fixed_blinding(r, s).prove_job(&job).unwrap();
    assert_eq!(ours.bytes, theirs.bytes, "snarkpipe's proof is not bellperson's for the same r and s");
}

/// `snarkpipe prove` on a job: it must exit 0, write proof bytes filecoin-proofs accepts and
/// report the timings. Runs in a process of its own, as a node would call it.
pub fn check_cli(job_path: &Path, kind: ProofKind) {
    let out = job_path.with_extension("cli.proof");
    let output = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["prove", "--kind", kind.name(), "--backend", "cpu", "--json", "--vanilla"])
        .arg(job_path)
        .arg("--params-dir")
        .arg(params_dir())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "snarkpipe prove failed: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    for timing in ["queue", "key_load", "synthesis", "gpu", "verify", "total"] {
        assert!(report["seconds"][timing].is_f64(), "no {timing} time in {report}");
    }
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(report["proof_bytes"], bytes.len());
    let job = VanillaRequest::read(job_path).unwrap();
    assert!(verify_with_filecoin_proofs(&job, &bytes, false), "filecoin-proofs rejects the CLI's proof");
}

/// Runs `snarkpipe prove` expecting failure; returns its stderr.
pub fn cli_fails(job_path: &Path, kind: ProofKind, params: &Path) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["prove", "--kind", kind.name(), "--backend", "cpu", "--vanilla"])
        .arg(job_path)
        .arg("--params-dir")
        .arg(params)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "snarkpipe prove succeeded on a bad input: {stderr}");
    assert!(!stderr.contains("panicked"), "snarkpipe prove panicked: {stderr}");
    stderr
}
