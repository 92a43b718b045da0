//! A PoRep key held in memory in place of its `.params` file (issue 37 §2: a 32 GiB test key
//! does not fit the device machine's disk, so the prover proves with it from memory and only
//! its `.vk` and `.meta` are written, for filecoin-proofs' `verify_seal` to read by name).
//!
//! This binary's filecoin-proofs parameter cache is a test-key directory holding only the
//! 2 KiB PoRep key's `.vk` and `.meta`, copied from the shared fixture directory
//! (tests/filecoin/mod.rs); the key itself is read from the shared `.params` into memory and
//! held. The cache is fixed per process, so these tests live in a binary of their own.

mod filecoin;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};

use filecoin_proofs::SectorShape2KiB;
use snarkpipe::filecoin::fixtures;
use snarkpipe::filecoin::params::ParamFiles;
use snarkpipe::filecoin::sparse::test_key::{porep_param_files, TEST_KEY_DIR_MARK};
use snarkpipe::filecoin::sparse::{sparse_sector, SparseSector};
use snarkpipe::filecoin::FilecoinProver;
use snarkpipe::params::ProvingKey;
use snarkpipe::Error;

struct Dirs {
    /// The test-key directory: filecoin-proofs' parameter cache for this process.
    marked: PathBuf,
    /// The 1-partition 2 KiB PoRep key's files in the shared fixture directory, and where
    /// the same files are named in `marked` (only the `.vk` and `.meta` are there).
    shared: ParamFiles,
    held: ParamFiles,
}

fn dirs() -> &'static Dirs {
    static DIRS: OnceLock<Dirs> = OnceLock::new();
    DIRS.get_or_init(|| {
        let root = filecoin::fixture_root();
        std::fs::create_dir_all(&root).unwrap();
        let marked = root.join(format!("held-{TEST_KEY_DIR_MARK}"));
        std::fs::create_dir_all(&marked).unwrap();
        // Before anything reads filecoin-proofs' settings.
        fixtures::use_cache_dir(&marked).unwrap();
        let config = fixtures::porep_config_2kib(1).unwrap();
        let shared = porep_param_files::<SectorShape2KiB>(&config, &filecoin::params_dir()).unwrap();
        let held = porep_param_files::<SectorShape2KiB>(&config, &marked).unwrap();
        if !shared.params.exists() {
            // Generated into the shared directory by a process whose cache it is (minutes,
            // once per checkout; later binaries reuse it).
            let made = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
                .args(["fixtures", "--kinds", "porep", "--porep-partitions", "1", "--params-dir"])
                .arg(filecoin::params_dir())
                .arg("--out")
                .arg(root.join("held-key-fixtures"))
                .output()
                .unwrap();
            assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
        }
        std::fs::copy(&shared.vk, &held.vk).unwrap();
        // The fixtures do not always write a `.meta`; without one the name alone says the size.
        if shared.meta.exists() {
            std::fs::copy(&shared.meta, &held.meta).unwrap();
        }
        Dirs { marked, shared, held }
    })
}

/// The shared 2 KiB PoRep key, read into memory from its `.params`.
fn key_in_memory() -> ProvingKey {
    static KEY: OnceLock<Arc<ProvingKey>> = OnceLock::new();
    let key = KEY.get_or_init(|| {
        let file = std::fs::File::open(&dirs().shared.params).unwrap();
        let params =
            bellperson::groth16::Parameters::<blstrs::Bls12>::read(std::io::BufReader::new(file), false).unwrap();
        ProvingKey::from_parameters(&params)
    });
    // A fresh copy per test (the vectors are shared): each test's key starts with no
    // recorded matrices of its own.
    ProvingKey { recording: Default::default(), ..(**key).clone() }
}

fn sector() -> SparseSector<SectorShape2KiB> {
    dirs();
    sparse_sector(&fixtures::porep_config_2kib(1).unwrap(), rand::random()).unwrap()
}

fn prove(engine: &FilecoinProver, sector: &SparseSector<SectorShape2KiB>) -> snarkpipe::Result<Vec<u8>> {
    let c1 = serde_json::from_slice(&serde_json::to_vec(&sector.phase1_output).unwrap()).unwrap();
    engine
        .seal_commit_phase2::<SectorShape2KiB>(&sector.porep_config, c1, sector.prover_id, sector.sector_id)
        .map(|proven| proven.bytes)
}

fn engine_with(key: ProvingKey) -> FilecoinProver<'static> {
    let d = dirs();
    FilecoinProver::with_params_dir(filecoin::prover(), &d.marked)
        .unwrap()
        .with_held_key(d.held.params.clone(), Arc::new(key))
}

#[test]
fn a_key_held_in_memory_proves_without_its_params_file_and_verify_seal_judges_it() {
    let d = dirs();
    assert!(!d.held.params.exists() && d.held.vk.exists(), "the test-key directory holds the .vk only");
    let sector = sector();
    // seal_commit_phase2 returns only what verify_seal accepted, reading the .vk by name
    // from the test-key directory.
    let bytes = prove(&engine_with(key_in_memory()), &sector).expect("the held key proves and verify_seal accepts");
    let c1 = &sector.phase1_output;
    let verify = |comm_r: [u8; 32]| {
        filecoin_proofs::verify_seal::<SectorShape2KiB>(
            &sector.porep_config,
            comm_r,
            c1.comm_d,
            sector.prover_id,
            sector.sector_id,
            c1.ticket,
            c1.seed,
            &bytes,
        )
        .unwrap_or(false)
    };
    assert!(verify(c1.comm_r));
    let mut other = c1.comm_r;
    other[0] ^= 1;
    assert!(!verify(other), "verify_seal accepts the proof for another comm_r");
    assert!(!d.held.params.exists(), "proving wrote a .params");
}

#[test]
fn without_a_held_key_the_missing_params_file_is_named() {
    let d = dirs();
    let engine = FilecoinProver::with_params_dir(filecoin::prover(), &d.marked).unwrap();
    match prove(&engine, &sector()) {
        Err(err @ Error::MissingParams { .. }) => {
            let name = d.held.params.file_name().unwrap().to_string_lossy().into_owned();
            assert!(err.to_string().contains(&name), "{err}");
        }
        other => panic!("proved without a key: {:?}", other.map(|b| b.len())),
    }
}

#[test]
fn a_held_key_of_another_setup_or_shape_is_refused() {
    let sector = sector();
    // Another setup: its verifying key is not the .vk beside the name it is held under.
    let mut other_setup = key_in_memory();
    other_setup.vk.delta_g1 = other_setup.vk.alpha_g1;
    let err = prove(&engine_with(other_setup), &sector).expect_err("a key of another setup proved");
    assert!(matches!(err, Error::MissingParams { .. }) && err.to_string().contains("verifying key"), "{err}");
    // Another shape: one aux point short.
    let mut short = key_in_memory();
    short.l = Arc::new(short.l[..short.l.len() - 1].to_vec());
    let err = prove(&engine_with(short), &sector).expect_err("a key of another shape proved");
    assert!(matches!(err, Error::ParamsMismatch { what, .. } if what.starts_with('l')), "{err}");
}

/// A sparse 2 KiB sector's job file made by `snarkpipe sparse-sector` in `dir`.
fn sparse_job(dir: &Path) -> String {
    let made = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["sparse-sector", "--sector-size", "2KiB", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    serde_json::from_slice::<serde_json::Value>(&made.stdout).unwrap()["job"].as_str().unwrap().to_string()
}

fn cli(args: &[&str], params_dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["prove", "--backend", "cpu", "--test-setup", "--vanilla", "/nonexistent/job.json", "--params-dir"])
        .arg(params_dir)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn the_cli_test_setup_refuses_a_node_directory_and_other_kinds_before_reading_anything() {
    let scratch = tempfile::tempdir().unwrap();
    let node_dir = scratch.path().join("filecoin-proof-parameters");
    let refused = cli(&["--kind", "porep"], &node_dir);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains(TEST_KEY_DIR_MARK) && !stderr.contains("panicked"),
        "{stderr}"
    );
    assert!(!node_dir.exists(), "a node's directory was made for a test key");
    // Its twin: a marked directory passes the check and is made; the missing job is next.
    let marked = scratch.path().join(format!("cli-{TEST_KEY_DIR_MARK}"));
    let next = cli(&["--kind", "porep"], &marked);
    let stderr = String::from_utf8_lossy(&next.stderr);
    assert!(!next.status.success() && stderr.contains("/nonexistent/job.json"), "{stderr}");
    assert!(marked.is_dir());
    let post = cli(&["--kind", "winning-post"], &marked);
    let stderr = String::from_utf8_lossy(&post.stderr);
    assert!(!post.status.success() && stderr.contains("PoRep keys only"), "{stderr}");
}

/// The whole `--test-setup` path: a sparse 2 KiB sector, a test setup of its circuit, the
/// proof judged by verify_seal. On a GPU the setup takes seconds (scripts/gpu-sparse-porep.sh
/// runs this path at 2 KiB and at 32 GiB); on 2 cores its fixed-base multiplications take
/// minutes, so CI runs the cheaper tests above instead.
#[test]
#[ignore = "a Groth16 setup of the 2 KiB PoRep circuit on the CPU (minutes on 2 cores); \
            cargo test --release --test filecoin_held_key -- --ignored"]
fn the_cli_proves_a_sparse_sector_with_a_test_setup() {
    let scratch = tempfile::tempdir().unwrap();
    let job = sparse_job(scratch.path());
    let marked = scratch.path().join(format!("keys-{TEST_KEY_DIR_MARK}"));
    let proved = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["prove", "--kind", "porep", "--test-setup", "--json", "--vanilla", &job])
        .arg("--params-dir")
        .arg(&marked)
        .output()
        .unwrap();
    assert!(proved.status.success(), "{}", String::from_utf8_lossy(&proved.stderr));
    let report: serde_json::Value = serde_json::from_slice(&proved.stdout).unwrap();
    assert_eq!(report["verified"], true);
    assert!(report["test_setup"]["setup_seconds"].as_f64().unwrap() > 0.0);
    let written: Vec<String> =
        std::fs::read_dir(&marked).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(
        written.iter().any(|n| n.ends_with(".vk")) && !written.iter().any(|n| n.ends_with(".params")),
        "{written:?}"
    );
}

/// Issue 38: a node that starts a process per proof. The first `snarkpipe prove` of a key
/// records its constraint matrices with its first partition and keeps them beside the
/// `.params`; the second finds them and synthesizes no partition before proving. Before the
/// fix the first partition, synthesized to find the key by its shape, recorded nothing, and
/// a one-partition proof never recorded the matrices at all: every process paid a full
/// synthesis (`first_synthesis` equal to `synthesis`; shown with two PoRep runs). The test
/// proves a Winning PoSt, whose circuit is small: the path is the same for every kind.
#[test]
fn a_second_process_finds_the_matrices_the_first_kept_and_synthesizes_no_partition_first() {
    let scratch = tempfile::tempdir_in(filecoin::fixture_root()).unwrap();
    // A freshly sealed sector's Winning PoSt job, its parameters from the shared directory
    // (generated there when missing).
    let made = Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["fixtures", "--kinds", "winning-post", "--params-dir"])
        .arg(filecoin::params_dir())
        .arg("--out")
        .arg(scratch.path().join("jobs"))
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let made: serde_json::Value = serde_json::from_slice(&made.stdout).unwrap();
    let job = made[0]["path"].as_str().unwrap().to_string();
    // A parameter directory of its own with no kept matrices: links to the shared files.
    let params = scratch.path().join("params");
    std::fs::create_dir_all(&params).unwrap();
    for entry in std::fs::read_dir(filecoin::params_dir()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_file() && (name.ends_with(".params") || name.ends_with(".vk") || name.ends_with(".meta")) {
            std::os::unix::fs::symlink(&path, params.join(&name)).unwrap();
        }
    }
    let prove = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
            .args(["prove", "--kind", "winning-post", "--backend", "cpu", "--json", "--vanilla", &job, "--params-dir"])
            .arg(&params)
            .args(extra)
            .output()
            .unwrap()
    };
    let first_synthesis = |proved: std::process::Output| {
        assert!(proved.status.success(), "{}", String::from_utf8_lossy(&proved.stderr));
        let report: serde_json::Value = serde_json::from_slice(&proved.stdout).unwrap();
        report["seconds"]["first_synthesis"].as_f64().unwrap()
    };
    assert!(first_synthesis(prove(&[])) > 0.0, "the first process found a key without synthesizing a partition");
    let names: Vec<String> =
        std::fs::read_dir(&params).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(names.iter().any(|n| n.ends_with(".params.snarkpipe-matrices")), "no matrices kept: {names:?}");
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "a matrices write was cut short: {names:?}");
    assert_eq!(first_synthesis(prove(&[])), 0.0, "the second process synthesized a partition before proving");
    // --synthesis-memory bounds the witnesses in flight: one that cannot fit is refused.
    let refused = prove(&["--synthesis-memory", "4KiB"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("4096") && !stderr.contains("panicked"), "{stderr}");
}
