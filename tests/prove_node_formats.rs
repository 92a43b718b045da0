//! `snarkpipe prove --kind porep` on what a node holds, as a node would call it (a process of
//! its own): filecoin-ffi's C1 output with `--miner-id` and `--sector-number`, and the
//! lotus-bench / Curio envelope around it with `--miner-id`, made by filecoin-proofs-api's own
//! sealing calls (tests/node_fixtures), for interactive PoRep (V1, V1_1) and synthetic PoRep.
//! The proof must be accepted by filecoin-proofs-api's `verify_seal`; twins of the wrong kind,
//! size, proof type or missing ids must be refused with a message naming what was found,
//! before anything is proven, and non-interactive PoRep is refused by name.
#![cfg(feature = "filecoin")]

mod filecoin;
mod node_fixtures;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use node_fixtures as node;
use snarkpipe::filecoin::node_formats::{self, NodeFormatError, PorepInput};

fn run_prove(kind: &str, input: &Path, extra: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_snarkpipe"))
        .args(["prove", "--kind", kind, "--backend", "cpu", "--json", "--vanilla"])
        .arg(input)
        .arg("--params-dir")
        .arg(filecoin::params_dir())
        .args(extra)
        .output()
        .unwrap()
}

/// Runs `snarkpipe prove` expecting a refusal; its stderr, which must name every one of `words`.
fn refused(kind: &str, input: &Path, extra: &[String], words: &[&str]) -> String {
    let output = run_prove(kind, input, extra);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{} was proven: {stderr}", input.display());
    assert!(!stderr.contains("panicked"), "{stderr}");
    for word in words {
        assert!(stderr.contains(word), "the refusal of {} does not name {word:?}: {stderr}", input.display());
    }
    stderr
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

fn ids(miner: u64, sector: Option<u64>) -> Vec<String> {
    let mut args = vec!["--miner-id".to_string(), miner.to_string()];
    if let Some(sector) = sector {
        args.extend(["--sector-number".to_string(), sector.to_string()]);
    }
    args
}

#[test]
fn prove_reads_filecoin_ffis_c1_output_and_the_envelope_around_it() {
    let sector = node::sector();
    let dir = tempfile::tempdir().unwrap();
    let c1 = write(dir.path(), "c1.json", &sector.c1_json);
    let envelope = write(dir.path(), "commit2-in.json", &node::envelope(sector));

    // The envelope and the bare C1 output are the same job: one proof covers both.
    let from_c1 = node_formats::porep_job_from_ffi_c1(&sector.c1_json, sector.miner_id, sector.sector_number).unwrap();
    let from_envelope = node_formats::porep_job_from_envelope(&node::envelope(sector), sector.miner_id).unwrap();
    assert_eq!(node_formats::job_json(&from_c1.job), node_formats::job_json(&from_envelope.job));
    assert_eq!((from_c1.proof, from_envelope.sector_number), (node::SEAL_PROOF, sector.sector_number));
    assert_eq!(node_formats::porep_input_format(&sector.c1_json).unwrap(), PorepInput::FfiC1);
    assert_eq!(node_formats::porep_input_format(&node::envelope(sector)).unwrap(), PorepInput::Envelope);

    let out = dir.path().join("envelope.proof");
    let mut args = ids(sector.miner_id, None);
    args.extend(["--out".to_string(), out.display().to_string()]);
    let output = run_prove("porep", &envelope, &args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let proof = std::fs::read(&out).unwrap();
    assert!(node::verify_seal(sector, &proof, sector.sector_number), "filecoin-proofs-api rejects the proof");
    assert!(!node::verify_seal(sector, &proof, sector.sector_number + 1), "verified for another sector");
    let mut flipped = proof.clone();
    flipped[100] ^= 0x10;
    assert!(!node::verify_seal(sector, &flipped, sector.sector_number), "a flipped bit verified");

    // The bare C1 output needs both ids, and a sector number other than the envelope's is refused.
    refused("porep", &c1, &[], &["--miner-id"]);
    refused("porep", &c1, &ids(sector.miner_id, None), &["--sector-number"]);
    let other_sector = ids(sector.miner_id, Some(sector.sector_number + 1));
    refused("porep", &envelope, &other_sector, &["--sector-number", "envelope"]);
}

/// The bare C1 output, of the other interactive seal proof (V1, API 1.0.0): its porep id and
/// API version come from the registered proof, and filecoin-proofs-api accepts the proof.
#[test]
fn prove_reads_a_bare_c1_output_of_the_first_seal_proof_version() {
    let sector = node::sector_of(filecoin_proofs_api::RegisteredSealProof::StackedDrg2KiBV1);
    let dir = tempfile::tempdir().unwrap();
    let c1 = write(dir.path(), "c1.json", &sector.c1_json);
    let out = dir.path().join("c1.proof");
    let mut args = ids(sector.miner_id, Some(sector.sector_number));
    args.extend(["--out".to_string(), out.display().to_string()]);
    let output = run_prove("porep", &c1, &args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let proof = std::fs::read(&out).unwrap();
    assert!(node::verify_seal(sector, &proof, sector.sector_number), "filecoin-proofs-api rejects the proof");
    assert!(!node::verify_seal(sector, &proof, sector.sector_number + 1), "verified for another sector");
    let mut flipped = proof.clone();
    flipped[7] ^= 0x01;
    assert!(!node::verify_seal(sector, &flipped, sector.sector_number), "a flipped bit verified");
}

#[test]
fn inputs_of_the_wrong_kind_size_or_proof_type_are_refused_naming_what_they_are() {
    let sector = node::sector();
    let dir = tempfile::tempdir().unwrap();
    let c1: serde_json::Value = serde_json::from_slice(&sector.c1_json).unwrap();
    let with = |change: &dyn Fn(&mut serde_json::Value)| {
        let mut value = c1.clone();
        change(&mut value);
        serde_json::to_vec(&value).unwrap()
    };
    let args = ids(sector.miner_id, Some(sector.sector_number));

    let envelope = write(dir.path(), "envelope.json", &node::envelope(sector));
    refused("window-post", &envelope, &[], &["lotus-bench's envelope", "window-post"]);
    let bare = write(dir.path(), "bare.json", &sector.c1_json);
    refused("snap", &bare, &[], &["filecoin-ffi", "snap"]);

    let big = write(dir.path(), "32g.json", &with(&|v| v["registered_proof"] = "StackedDrg32GiBV1_1".into()));
    refused("porep", &big, &args, &["StackedDrg32GiBV1_1", "32 GiB", "StackedDrg2KiBV1"]);
    let ni = write(
        dir.path(),
        "ni.json",
        &with(&|v| v["registered_proof"] = "StackedDrg2KiBV1_2_Feat_NonInteractivePoRep".into()),
    );
    refused("porep", &ni, &args, &["StackedDrg2KiBV1_2_Feat_NonInteractivePoRep", "non-interactive"]);
    assert!(matches!(
        node_formats::porep_job_from_ffi_c1(
            &with(&|v| v["registered_proof"] = "StackedDrg2KiBV1_2_Feat_NonInteractivePoRep".into()),
            1,
            1
        ),
        Err(NodeFormatError::UnsupportedSealProof { proof: node::NON_INTERACTIVE_SEAL_PROOF, .. })
    ));
    assert_eq!(
        node_formats::seal_proof_from_ffi(node::NON_INTERACTIVE_SEAL_PROOF_FFI).unwrap(),
        node::NON_INTERACTIVE_SEAL_PROOF
    );
    // snarkpipe's own job file with a non-interactive proof's porep id: refused by name too.
    let job = node_formats::porep_job_from_ffi_c1(&sector.c1_json, sector.miner_id, sector.sector_number).unwrap();
    let mut job: serde_json::Value = serde_json::from_str(&node_formats::job_json(&job.job)).unwrap();
    job["porep_id"] = serde_json::to_value(node::NON_INTERACTIVE_SEAL_PROOF.as_v1_config().porep_id).unwrap();
    job["api_version"] = "1.2.0".into();
    let ni_job = write(dir.path(), "ni-job.json", &serde_json::to_vec(&job).unwrap());
    refused("porep", &ni_job, &[], &["StackedDrg2KiBV1_2_Feat_NonInteractivePoRep", "non-interactive"]);
    let unknown = write(dir.path(), "unknown.json", &with(&|v| v["registered_proof"] = "StackedDrg4KiBV1".into()));
    refused("porep", &unknown, &args, &["StackedDrg4KiBV1"]);

    use base64::Engine as _;
    let phase1 = base64::engine::general_purpose::STANDARD.encode(&sector.c1_json);
    let wrong_size = serde_json::json!({ "SectorNum": 1, "Phase1Out": phase1, "SectorSize": 34359738368u64 });
    let wrong_size = write(dir.path(), "wrong-size.json", &serde_json::to_vec(&wrong_size).unwrap());
    refused("porep", &wrong_size, &ids(1, None), &["SectorSize 34359738368", "32 GiB", "2 KiB"]);
    let not_base64 = serde_json::json!({ "SectorNum": 1, "Phase1Out": "%%%", "SectorSize": 2048 });
    let not_base64 = write(dir.path(), "not-base64.json", &serde_json::to_vec(&not_base64).unwrap());
    refused("porep", &not_base64, &ids(1, None), &["base64"]);
    let other = write(dir.path(), "other.json", br#"{"SectorNumber": 1, "Proof": "x"}"#);
    refused("porep", &other, &ids(1, Some(1)), &["SectorNumber", "Proof"]);
}

/// Synthetic PoRep (filecoin-ffi's 10): the interactive circuit and parameters, its challenges
/// drawn by comm_r and the seed from the synthetic ones the sector proved before its seed.
/// Proven from Curio's envelope, the proof must pass filecoin-proofs-api's `verify_seal` for
/// the synthetic proof type, and fail filecoin-proofs' `verify_seal` for interactive PoRep of
/// the same porep id (the challenges it was proven against before the registered proof's
/// feature reached the PoRep configuration), for a flipped comm_r and another sector. One
/// proof: the interactive twin is judged by the verifiers, not proven.
#[test]
fn prove_reads_a_synthetic_porep_c1_output_and_proves_its_synthetic_challenges() {
    use filecoin_proofs::{SealCommitPhase1Output, SectorShape2KiB};
    use storage_proofs_core::sector::SectorId;
    assert_eq!(node_formats::seal_proof_from_ffi(node::SYNTHETIC_SEAL_PROOF_FFI).unwrap(), node::SYNTHETIC_SEAL_PROOF);
    let sector = node::sector_of(node::SYNTHETIC_SEAL_PROOF);
    let dir = tempfile::tempdir().unwrap();
    let envelope = write(dir.path(), "commit2-in.json", &node::envelope(sector));
    let porep = node_formats::porep_job_from_envelope(&node::envelope(sector), sector.miner_id).unwrap();
    assert_eq!(porep.proof, node::SYNTHETIC_SEAL_PROOF);
    let snarkpipe::filecoin::VanillaRequest::Porep(job) = &porep.job else { panic!("{:?}", porep.job) };
    let synthetic = snarkpipe::filecoin::porep_config(
        job.sector_size,
        job.porep_id,
        porep.job.api_version().unwrap(),
        job.partitions,
    )
    .unwrap();
    let feature = storage_proofs_core::api_version::ApiFeature::SyntheticPoRep;
    assert!(synthetic.feature_enabled(feature), "{synthetic:?}");

    let out = dir.path().join("synthetic.proof");
    let mut args = ids(sector.miner_id, None);
    args.extend(["--out".to_string(), out.display().to_string()]);
    let output = run_prove("porep", &envelope, &args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let proof = std::fs::read(&out).unwrap();
    assert!(node::verify_seal(sector, &proof, sector.sector_number), "filecoin-proofs-api rejects the proof");
    assert!(!node::verify_seal(sector, &proof, sector.sector_number + 1), "verified for another sector");

    // filecoin-proofs' own verifier: the synthetic configuration accepts, the interactive one
    // of the same porep id (other challenges) and another comm_r do not.
    let mut interactive = synthetic.clone();
    interactive.api_features.clear();
    let verify = |config: &filecoin_proofs::PoRepConfig, comm_r: [u8; 32]| {
        filecoin_proofs::verify_seal::<SectorShape2KiB>(
            config,
            comm_r,
            sector.comm_d,
            sector.prover_id,
            SectorId::from(sector.sector_number),
            sector.ticket,
            sector.seed,
            &proof,
        )
        .unwrap_or(false)
    };
    assert!(verify(&synthetic, sector.comm_r), "filecoin-proofs rejects the synthetic proof");
    assert!(!verify(&interactive, sector.comm_r), "the proof verifies against interactive challenges");
    let mut other_comm_r = sector.comm_r;
    other_comm_r[0] ^= 1;
    assert!(!verify(&synthetic, other_comm_r), "the proof verifies for another comm_r");

    // What the proof would have opened as interactive PoRep: storage-proofs' vanilla verifier
    // finds the C1 output's partition proofs answer the synthetic challenges, not the
    // interactive ones of the same sector and seed.
    let c1: SealCommitPhase1Output<SectorShape2KiB> = serde_json::from_str(job.phase1_output.get()).unwrap();
    let answers = |config: &filecoin_proofs::PoRepConfig| answers_challenges(config, &c1);
    assert!(answers(&synthetic), "the C1 output does not answer its synthetic challenges");
    assert!(!answers(&interactive), "the C1 output answers interactive challenges too: the twin proves nothing");
}

/// Whether storage-proofs' vanilla verifier finds `c1`'s partition proofs answer the
/// challenges `config` draws (interactive, or synthetic when it has the feature).
fn answers_challenges(
    config: &filecoin_proofs::PoRepConfig,
    c1: &filecoin_proofs::SealCommitPhase1Output<filecoin_proofs::SectorShape2KiB>,
) -> bool {
    use filecoin_proofs::{as_safe_commitment, DefaultPieceHasher, SectorShape2KiB};
    use storage_proofs_core::proof::ProofScheme;
    use storage_proofs_porep::stacked::{PublicInputs, StackedDrg, Tau};
    let setup = filecoin_proofs::parameters::setup_params(config).unwrap();
    let params = StackedDrg::<SectorShape2KiB, DefaultPieceHasher>::setup(&setup).unwrap();
    let inputs = PublicInputs {
        replica_id: c1.replica_id,
        tau: Some(Tau {
            comm_d: as_safe_commitment(&c1.comm_d, "comm_d").unwrap(),
            comm_r: as_safe_commitment(&c1.comm_r, "comm_r").unwrap(),
        }),
        k: None,
        seed: Some(c1.seed),
    };
    StackedDrg::verify_all_partitions(&params, &inputs, &c1.vanilla_proofs).unwrap_or(false)
}

/// snarkpipe's own fixtures (filecoin-proofs' calls, as `snarkpipe fixtures` and the other
/// Filecoin tests seal) make a synthetic sector when the configuration has the feature: its
/// synthetic proofs before commit phase 1, whose partition proofs then answer the synthetic
/// challenges and not the interactive ones. Sealing only: no proof, seconds.
#[test]
fn the_fixtures_seal_a_synthetic_sector_with_filecoin_proofs() {
    use snarkpipe::filecoin::fixtures;
    node::use_params_dir();
    let api = node::SYNTHETIC_SEAL_PROOF.as_v1_config();
    let synthetic =
        snarkpipe::filecoin::porep_config(u64::from(api.sector_size), api.porep_id, api.api_version, None).unwrap();
    let dir = tempfile::tempdir_in(filecoin::fixture_root()).unwrap();
    let sector = fixtures::seal_sector(dir.path(), &synthetic, rand::random()).unwrap();
    let mut interactive = synthetic.clone();
    interactive.api_features.clear();
    assert!(answers_challenges(&synthetic, &sector.phase1_output), "the synthetic sector's C1 output is wrong");
    assert!(!answers_challenges(&interactive, &sector.phase1_output), "it answers interactive challenges too");
}
