//! Sparse sectors (`snarkpipe::filecoin::sparse`): C1 outputs made without sealing must pass
//! storage-proofs' vanilla verifier, satisfy the real circuit and prove to bytes that
//! filecoin-proofs' `verify_seal` accepts; one flipped label, commitment or sibling must be
//! refused. 2 KiB in full; 32 GiB by the vanilla verifier (its circuit is a device-script
//! step: scripts/gpu-sparse-porep.sh).
//!
//! The 2 KiB proof uses the 1-partition PoRep parameters of the shared fixture directory
//! (tests/filecoin/mod.rs), generated there when missing; this binary proves no other
//! partition count, since filecoin-proofs caches keys per process by sector size alone.

mod filecoin;

use filecoin_proofs::{
    SealCommitPhase1Output, SectorShape2KiB, SectorShape32GiB, SectorShape64GiB, SECTOR_SIZE_32_GIB, SECTOR_SIZE_64_GIB,
};
use snarkpipe::filecoin::fixtures;
use snarkpipe::filecoin::sparse::{
    check_partition_satisfied, registered_porep_id, sparse_porep_config, sparse_sector, verify_vanilla, SparseSector,
};
use snarkpipe::filecoin::FilecoinProver;
use snarkpipe::Error;
use storage_proofs_core::api_version::ApiVersion;

/// The shared fixture parameter directory, made filecoin-proofs' parameter cache before any
/// test of the binary calls filecoin-proofs (it reads its settings once per process).
fn params_dir() -> std::path::PathBuf {
    static INIT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    INIT.get_or_init(|| {
        let params = filecoin::params_dir();
        std::fs::create_dir_all(&params).unwrap();
        fixtures::use_cache_dir(&params).unwrap();
        params
    })
    .clone()
}

fn sector_2kib() -> SparseSector<SectorShape2KiB> {
    params_dir();
    sparse_sector(&fixtures::porep_config_2kib(1).unwrap(), rand::random()).unwrap()
}

/// The C1 output with one value changed where `path` (JSON keys and indices into the first
/// partition's first challenge proof) leads: its lowest bit flipped, which keeps a field
/// element canonical.
fn flipped<T: serde::Serialize + serde::de::DeserializeOwned>(c1: &T, path: &[&str]) -> T {
    flipped_in(c1, 0, path)
}

/// [`flipped`] in partition `k`'s first challenge proof.
fn flipped_in<T: serde::Serialize + serde::de::DeserializeOwned>(c1: &T, k: usize, path: &[&str]) -> T {
    let mut value = serde_json::to_value(c1).unwrap();
    let mut at = &mut value["vanilla_proofs"][k][0];
    for key in path {
        at = match key.parse::<usize>() {
            Ok(i) => &mut at[i],
            Err(_) => &mut at[*key],
        };
    }
    let byte = at[0].as_u64().unwrap_or_else(|| panic!("{path:?} is not a digest: {at}"));
    at[0] = (byte ^ 1).into();
    serde_json::from_value(value).unwrap()
}

/// A copy of a C1 output: its derived `Clone` asks the tree type (a disk-backed tree) to be
/// `Clone` too, so a serde round trip copies it.
fn copy<T: serde::Serialize + serde::de::DeserializeOwned>(c1: &T) -> T {
    serde_json::from_value(serde_json::to_value(c1).unwrap()).unwrap()
}

fn rejected<Tree: 'static + storage_proofs_core::merkle::MerkleTreeTrait>(
    sector: &SparseSector<Tree>,
    c1: &SealCommitPhase1Output<Tree>,
) -> String {
    match verify_vanilla(&sector.porep_config, &sector.prover_id, sector.sector_id, c1) {
        Ok(()) => panic!("a tampered C1 output passes the vanilla checks"),
        Err(e) => e.to_string(),
    }
}

/// Where the first proof's tree-R-last path keeps its first sibling (a 2 KiB tree is one
/// base tree: the `Single` proof).
const TREE_R_SIBLING: [&str; 8] = ["comm_r_last_proof", "data", "Single", "path", "path", "0", "hashes", "0"];

#[test]
fn a_sparse_2kib_sector_passes_the_vanilla_verifier_and_tampered_twins_do_not() {
    let sector = sector_2kib();
    let c1 = &sector.phase1_output;
    verify_vanilla(&sector.porep_config, &sector.prover_id, sector.sector_id, c1).expect("the sparse sector verifies");
    assert_eq!(c1.vanilla_proofs.len(), 1);
    assert_eq!(c1.comm_d, filecoin_proofs::compute_comm_d(sector.porep_config.sector_size, &[]).unwrap());

    // storage-proofs' own verifier refuses each of these.
    for path in [
        &["replica_column_proofs", "c_x", "column", "rows", "1"][..],
        &["replica_column_proofs", "drg_parents", "0", "column", "rows", "0"],
        &["labeling_proofs", "1", "parents", "5"],
        &[
            "replica_column_proofs",
            "exp_parents",
            "1",
            "inclusion_proof",
            "data",
            "Single",
            "path",
            "path",
            "1",
            "hashes",
            "0",
        ],
    ] {
        let err = rejected(&sector, &flipped(c1, path));
        assert!(err.contains("vanilla verifier rejects"), "{path:?}: {err}");
    }
    let mut wrong_comm_r = copy(c1);
    wrong_comm_r.comm_r[0] ^= 1;
    assert!(rejected(&sector, &wrong_comm_r).contains("vanilla verifier rejects"));

    // A sibling on the tree-D or tree-R-last path passes storage-proofs' verifier, which checks
    // those paths by index only; the path hash catches it.
    let err = rejected(&sector, &flipped(c1, &TREE_R_SIBLING));
    assert!(err.contains("tree-R-last path"), "{err}");
    let err = rejected(&sector, &flipped(c1, &["comm_d_proofs", "data", "Single", "path", "path", "2", "hashes", "0"]));
    assert!(err.contains("tree-D path"), "{err}");
    // Another sector id gives another replica id.
    let err = verify_vanilla(&sector.porep_config, &sector.prover_id, (u64::from(sector.sector_id) + 1).into(), c1)
        .unwrap_err()
        .to_string();
    assert!(err.contains("replica id"), "{err}");
}

#[test]
fn a_sparse_2kib_sector_satisfies_the_circuit_and_a_flipped_sibling_does_not() {
    let sector = sector_2kib();
    let c1 = &sector.phase1_output;
    let constraints = check_partition_satisfied(&sector.porep_config, &sector.prover_id, sector.sector_id, c1, 0)
        .expect("the circuit is satisfied");
    assert!(constraints > 1_000_000, "{constraints} constraints");
    let tampered = flipped(c1, &TREE_R_SIBLING);
    match check_partition_satisfied(&sector.porep_config, &sector.prover_id, sector.sector_id, &tampered, 0) {
        Err(Error::Unsatisfied { .. }) => {}
        other => panic!("a flipped tree-R-last sibling satisfies the circuit: {other:?}"),
    }
}

#[test]
fn a_proof_of_a_sparse_2kib_sector_verifies_with_verify_seal() {
    let config = fixtures::porep_config_2kib(1).unwrap();
    let params = params_dir();
    fixtures::ensure_porep_params(&config).unwrap();
    let sector = sector_2kib();
    let c1 = copy(&sector.phase1_output);
    let engine = FilecoinProver::with_params_dir(filecoin::prover(), &params).unwrap();
    // seal_commit_phase2 returns only what filecoin-proofs' verify_seal accepted.
    let proven = engine
        .seal_commit_phase2::<SectorShape2KiB>(&config, c1, sector.prover_id, sector.sector_id)
        .expect("the sparse sector proves and verifies");
    let c1 = &sector.phase1_output;
    let verify = |comm_r: [u8; 32], sector_id: u64| {
        filecoin_proofs::verify_seal::<SectorShape2KiB>(
            &config,
            comm_r,
            c1.comm_d,
            sector.prover_id,
            sector_id.into(),
            c1.ticket,
            c1.seed,
            &proven.bytes,
        )
        .unwrap_or(false)
    };
    let sector_id = u64::from(sector.sector_id);
    assert!(verify(c1.comm_r, sector_id), "verify_seal rejects the sparse sector's proof");
    let mut other_comm_r = c1.comm_r;
    other_comm_r[0] ^= 1;
    assert!(!verify(other_comm_r, sector_id), "verify_seal accepts the proof for another comm_r");
    assert!(!verify(c1.comm_r, sector_id + 1), "verify_seal accepts the proof for another sector");
}

#[test]
fn a_sparse_32gib_sector_passes_the_vanilla_verifier_and_a_flipped_label_does_not() {
    params_dir();
    let config = sparse_porep_config(
        SECTOR_SIZE_32_GIB,
        registered_porep_id(SECTOR_SIZE_32_GIB).unwrap(),
        ApiVersion::V1_2_0,
        None,
    )
    .unwrap();
    let sector: SparseSector<SectorShape32GiB> = sparse_sector(&config, rand::random()).unwrap();
    let c1 = &sector.phase1_output;
    assert_eq!(c1.vanilla_proofs.len(), 10);
    verify_vanilla(&config, &sector.prover_id, sector.sector_id, c1).expect("the 32 GiB sparse sector verifies");
    let err = rejected(&sector, &flipped(c1, &["replica_column_proofs", "c_x", "column", "rows", "10"]));
    assert!(err.contains("vanilla verifier rejects"), "{err}");
    // A tree-R-last sibling in the sub-tree level (32 GiB trees have 8 sub-trees).
    let err =
        rejected(&sector, &flipped(c1, &["comm_r_last_proof", "data", "Sub", "sub_proof", "path", "0", "hashes", "6"]));
    assert!(err.contains("tree-R-last path"), "{err}");
}

#[test]
fn a_sparse_64gib_sector_passes_the_vanilla_verifier_and_a_flipped_label_does_not() {
    params_dir();
    let config = sparse_porep_config(
        SECTOR_SIZE_64_GIB,
        registered_porep_id(SECTOR_SIZE_64_GIB).unwrap(),
        ApiVersion::V1_2_0,
        None,
    )
    .unwrap();
    let sector: SparseSector<SectorShape64GiB> = sparse_sector(&config, rand::random()).unwrap();
    let c1 = &sector.phase1_output;
    verify_vanilla(&config, &sector.prover_id, sector.sector_id, c1).expect("the 64 GiB sparse sector verifies");
    let err = rejected(&sector, &flipped(c1, &["replica_column_proofs", "c_x", "column", "rows", "4"]));
    assert!(err.contains("vanilla verifier rejects"), "{err}");
    // The top level of a 64 GiB tree (two halves of 8 sub-trees each).
    let err =
        rejected(&sector, &flipped(c1, &["comm_r_last_proof", "data", "Top", "top_proof", "path", "0", "hashes", "0"]));
    assert!(err.contains("tree-R-last path"), "{err}");
}

/// The circuit of one 32 GiB partition (about 130 M constraints) from a sparse sector, every
/// constraint checked, and its twin with a flipped tree-R-last sibling (refused at the first
/// challenge's opening, early in the circuit).
#[test]
#[ignore = "synthesizes a 32 GiB PoRep partition: minutes and about 20 GiB of host memory; \
            scripts/gpu-sparse-porep.sh runs it on the device machine (or: cargo test --release \
            --test filecoin_sparse_sector -- --ignored a_sparse_32gib_partition)"]
fn a_sparse_32gib_partition_satisfies_the_circuit() {
    params_dir();
    let config = sparse_porep_config(
        SECTOR_SIZE_32_GIB,
        registered_porep_id(SECTOR_SIZE_32_GIB).unwrap(),
        ApiVersion::V1_2_0,
        None,
    )
    .unwrap();
    let sector: SparseSector<SectorShape32GiB> = sparse_sector(&config, rand::random()).unwrap();
    let c1 = &sector.phase1_output;
    let k = rand::random::<usize>() % c1.vanilla_proofs.len();
    let started = std::time::Instant::now();
    let constraints = check_partition_satisfied(&config, &sector.prover_id, sector.sector_id, c1, k)
        .expect("the 32 GiB circuit is satisfied");
    eprintln!("32 GiB partition {k}: {constraints} constraints satisfied in {:.1} s", started.elapsed().as_secs_f64());
    assert!(constraints > 100_000_000, "{constraints} constraints");
    let tampered = flipped_in(c1, k, &["comm_r_last_proof", "data", "Sub", "base_proof", "path", "0", "hashes", "0"]);
    match check_partition_satisfied(&config, &sector.prover_id, sector.sector_id, &tampered, k) {
        Err(Error::Unsatisfied { .. }) => {}
        other => panic!("a flipped tree-R-last sibling satisfies the 32 GiB circuit: {other:?}"),
    }
}

#[test]
fn synthetic_porep_is_refused() {
    params_dir();
    let porep_id = registered_porep_id(SECTOR_SIZE_32_GIB).unwrap();
    let mut config = sparse_porep_config(SECTOR_SIZE_32_GIB, porep_id, ApiVersion::V1_2_0, None).unwrap();
    config.api_features.push(storage_proofs_core::api_version::ApiFeature::SyntheticPoRep);
    let err = sparse_sector::<SectorShape32GiB>(&config, 1).err().expect("synthetic PoRep is refused").to_string();
    assert!(err.contains("interactive PoRep"), "{err}");
}

/// `snarkpipe sparse-sector` writes a job `snarkpipe prove` reads, and refuses a size
/// filecoin-proofs does not publish.
#[test]
fn the_cli_writes_a_job_file() {
    let out = tempfile::tempdir().unwrap();
    let run = |size: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
            .args(["sparse-sector", "--sector-size", size, "--out"])
            .arg(out.path())
            .output()
            .unwrap()
    };
    let made = run("2KiB");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let summary: serde_json::Value = serde_json::from_slice(&made.stdout).unwrap();
    let job =
        snarkpipe::filecoin::VanillaRequest::read(std::path::Path::new(summary["job"].as_str().unwrap())).unwrap();
    assert_eq!(job.sector_size(), 2048);
    let c1: SealCommitPhase1Output<SectorShape2KiB> =
        serde_json::from_slice(&std::fs::read(summary["c1_output"].as_str().unwrap()).unwrap()).unwrap();
    assert_eq!(hex::encode(c1.comm_r), summary["comm_r"].as_str().unwrap());
    let refused = run("4k");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("32 GiB") && !stderr.contains("panicked"), "{stderr}");
}

/// §2 of issue 37 at 2 KiB: a test setup of the real PoRep circuit with known toxic waste,
/// its `.vk` written by name into a test-key directory, judges a proof of a sparse sector made
/// with the key in memory through filecoin-proofs' `verify_seal` (rejected for another comm_r);
/// a directory not named for test keys is refused.
#[test]
#[ignore = "a Groth16 setup of the 2 KiB PoRep circuit and a bellperson proof (minutes on 2 cores); run alone, \
            since verify_seal must read this key's .vk and caches keys per process: \
            scripts/gpu-sparse-porep.sh (step test-key), or cargo test --test filecoin_sparse_sector -- \
            --ignored --exact a_test_key_of_the_real_circuit_judges_a_sparse_sector"]
fn a_test_key_of_the_real_circuit_judges_a_sparse_sector() {
    use ff::Field;
    use snarkpipe::filecoin::sparse::partition_circuit;
    use snarkpipe::filecoin::sparse::test_key::{porep_test_key, TEST_KEY_DIR_MARK};
    use snarkpipe::groth16::setup::ToxicWaste;
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join(format!("porep-2kib-{TEST_KEY_DIR_MARK}"));
    // verify_seal reads the .vk from filecoin-proofs' parameter cache, fixed at its first use.
    fixtures::use_cache_dir(&dir).unwrap();
    let config = fixtures::porep_config_2kib(1).unwrap();
    let mut rng = rand::thread_rng();
    let mut secret = || snarkpipe::Scalar::random(&mut rng);
    let waste = ToxicWaste { alpha: secret(), beta: secret(), gamma: secret(), delta: secret(), tau: secret() };
    let err =
        porep_test_key::<SectorShape2KiB>(&config, &waste, None, scratch.path()).err().expect("unmarked").to_string();
    assert!(err.contains(TEST_KEY_DIR_MARK), "{err}");
    let started = std::time::Instant::now();
    let key = porep_test_key::<SectorShape2KiB>(&config, &waste, None, &dir).unwrap();
    eprintln!("2 KiB PoRep test setup in {:.1} s", started.elapsed().as_secs_f64());
    assert!(key.files.vk.exists() && key.files.meta.exists() && !key.files.params.exists());

    let sector: SparseSector<SectorShape2KiB> = sparse_sector(&config, rand::random()).unwrap();
    let c1 = &sector.phase1_output;
    let circuits = (0..c1.vanilla_proofs.len())
        .map(|k| partition_circuit(&config, &sector.prover_id, sector.sector_id, c1, k).unwrap())
        .collect();
    let proofs =
        bellperson::groth16::create_random_proof_batch(circuits, &key.params, &mut rand::thread_rng()).unwrap();
    let bytes = snarkpipe::filecoin::engine::proofs_to_bytes(&proofs);
    let verify = |comm_r: [u8; 32]| {
        filecoin_proofs::verify_seal::<SectorShape2KiB>(
            &config,
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
    assert!(verify(c1.comm_r), "verify_seal rejects a proof made with the test key");
    let mut other = c1.comm_r;
    other[0] ^= 1;
    assert!(!verify(other), "verify_seal accepts the test key's proof for another comm_r");
}
