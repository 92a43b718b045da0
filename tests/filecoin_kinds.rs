//! The four Filecoin proof kinds on real 2 KiB inputs made with filecoin-proofs (a PoRep of one
//! partition, SnapDeals, Window and Winning PoSt), proven through `snarkpipe::filecoin` and
//! `snarkpipe prove`, checked with filecoin-proofs' verifiers and against bellperson; and the
//! inputs a node can get wrong, each refused with a typed error while the prover goes on.
#![cfg(feature = "filecoin")]

mod filecoin;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use filecoin::{check_cli, check_kind, cli_fails, params_dir, prover};
use filecoin_proofs::PoStType;
use snarkpipe::filecoin::{FilecoinProver, ProofKind, VanillaRequest};
use snarkpipe::Error;

fn job(kind: ProofKind) -> PathBuf {
    filecoin::job(kind, 1)
}

#[test]
fn porep_of_one_partition() {
    check_kind(&job(ProofKind::Porep));
}

#[test]
fn snap_deals_update() {
    check_kind(&job(ProofKind::Snap));
}

#[test]
fn window_post() {
    check_kind(&job(ProofKind::WindowPost));
}

#[test]
fn winning_post() {
    check_kind(&job(ProofKind::WinningPost));
}

/// The PoRep goes through `snarkpipe prove` in `filecoin_porep2.rs`: proving its 2.7 million
/// constraints once more here would cost minutes of CI for no path not already covered.
#[test]
fn snarkpipe_prove_proves_the_other_kinds() {
    for kind in [ProofKind::Snap, ProofKind::WindowPost, ProofKind::WinningPost] {
        check_cli(&job(kind), kind);
    }
}

/// The second proof of the same kind finds its key in the cache and does not read the
/// parameters again. Judged per key, not by the cache's global counters: the other tests of
/// this file prove beside it on the same prover and load their own keys meanwhile.
#[test]
fn a_second_proof_reuses_the_resident_key() {
    let job = VanillaRequest::read(&job(ProofKind::WindowPost)).unwrap();
    let engine = FilecoinProver::with_params_dir(prover(), &params_dir()).unwrap();
    let per_key = |status: &snarkpipe::params::cache::KeyCacheStatus| {
        status.entries.iter().map(|e| (format!("{:?}", e.identity), (e.hits, e.loads))).collect::<BTreeMap<_, _>>()
    };
    engine.prove_job(&job).unwrap();
    let after_first = per_key(&prover().key_cache_status());
    engine.prove_job(&job).unwrap();
    let after_second = per_key(&prover().key_cache_status());
    let reused: Vec<_> = after_second
        .iter()
        .filter(|(identity, (hits, _))| after_first.get(*identity).is_some_and(|(before, _)| hits > before))
        .collect();
    assert!(!reused.is_empty(), "the second proof did not hit the key cache: {after_second:?}");
    for (identity, (_, loads)) in reused {
        assert_eq!(after_first[identity].1, *loads, "the second proof read the parameters of {identity} again");
    }
}

/// One partition of a Window PoSt, as a node proves a deadline partition by partition:
/// partition 0's proof, merged as filecoin-proofs merges partition proofs, is accepted by
/// `verify_window_post` (and rejected for other randomness), and is bellperson's proof for the
/// same r and s. The same vanilla proofs claimed as partition 1 are refused: their challenges
/// are partition 0's.
#[test]
fn window_post_one_partition_at_a_time() {
    let VanillaRequest::WindowPost(mut partition) = VanillaRequest::read(&job(ProofKind::WindowPost)).unwrap() else {
        panic!("the Window PoSt fixture holds another kind")
    };
    partition.partition_index = Some(0);
    let request = VanillaRequest::WindowPost(partition);
    let engine = || FilecoinProver::with_params_dir(prover(), &params_dir()).unwrap();
    let (r, s) = filecoin::blinding(1);
    let ours = engine().fixed_blinding(r.clone(), s.clone()).prove_job(&request).unwrap();
    let merged = filecoin_proofs::merge_window_post_partition_proofs(vec![filecoin_proofs::PartitionSnarkProof(
        ours.bytes.clone(),
    )])
    .unwrap();
    assert!(filecoin::verify_with_filecoin_proofs(&request, &merged, false), "filecoin-proofs rejects the partition");
    assert!(!filecoin::verify_with_filecoin_proofs(&request, &merged, true), "accepted for other randomness");
    let theirs = engine().bellperson_reference().fixed_blinding(r, s).prove_job(&request).unwrap();
    assert_eq!(ours.bytes, theirs.bytes, "not bellperson's proof for the same r and s");

    let VanillaRequest::WindowPost(mut claimed) = request else { unreachable!() };
    claimed.partition_index = Some(1);
    let err = engine().prove_job(&VanillaRequest::WindowPost(claimed)).unwrap_err();
    assert!(matches!(err, Error::Filecoin(_)) && err.to_string().contains("partition 1"), "{err}");
}

/// A key loaded by name, without a proof (`snarkpipe serve --preload`), is the key the next
/// proof of its kind uses, and its constraint matrices, recorded from filecoin-proofs' blank
/// circuit, are right: a proof whose a, b and c come from them verifies. A fresh prover that
/// keeps no matrices on disk, so that the blank circuit's are the ones used.
#[test]
fn a_key_loaded_by_name_is_the_one_proofs_use() {
    use snarkpipe::backend::BackendKind;
    use snarkpipe::prover::{Prover, ProverConfig};
    let fresh = Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        constraint_matrices_beside_params: false,
        ..ProverConfig::default()
    })
    .unwrap();
    let engine = FilecoinProver::with_params_dir(&fresh, &params_dir()).unwrap();
    let loaded = engine.load_key(ProofKind::WinningPost, 2048).unwrap();
    assert!(loaded.recording.matrices().is_some(), "no matrices from the blank circuit");
    let request = VanillaRequest::read(&job(ProofKind::WinningPost)).unwrap();
    let proven = engine.prove_job(&request).unwrap();
    assert!(std::sync::Arc::ptr_eq(&loaded, proven.key.as_ref().unwrap()), "the proof loaded another key");
    assert_eq!(proven.timings.key_load, 0.0);
    assert!(filecoin::verify_with_filecoin_proofs(&request, &proven.bytes, false));
    assert_eq!(fresh.key_cache_status().entries.len(), 1, "{:?}", fresh.key_cache_status());
    // Negative twins: another kind's key is another key; a size without parameters is refused
    // naming the file it looked for.
    let window = engine.load_key(ProofKind::WindowPost, 2048).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&loaded, &window));
    let err = engine.load_key(ProofKind::WinningPost, 32 << 30).unwrap_err();
    assert!(matches!(err, Error::MissingParams { .. }) && err.to_string().contains(".params"), "{err}");
}

/// A new process whose parameters have their constraint matrices kept beside them (written
/// by an earlier process) finds its key from them: its first proof synthesizes no partition
/// ahead of the others, and verifies. The negative twin, a prover that keeps no matrices beside
/// parameters, synthesizes the first partition first to learn the shape.
#[test]
fn a_new_process_takes_the_shape_from_the_kept_matrices() {
    use snarkpipe::backend::BackendKind;
    use snarkpipe::prover::{matrices_path, Prover, ProverConfig};
    let fresh = |beside: bool| {
        Prover::new(ProverConfig {
            backend: BackendKind::Cpu,
            constraint_matrices_beside_params: beside,
            ..ProverConfig::default()
        })
        .unwrap()
    };
    let request = VanillaRequest::read(&job(ProofKind::WinningPost)).unwrap();
    // An earlier process: its key's matrices, written beside the parameters now (a recording's
    // own write happens in the background).
    let earlier = fresh(false);
    let key = FilecoinProver::with_params_dir(&earlier, &params_dir())
        .unwrap()
        .load_key(ProofKind::WinningPost, 2048)
        .unwrap();
    let params = earlier.key_cache_status().entries[0].identity.file.clone().unwrap().path;
    let digest = *snarkpipe::params::cache::VkDigest::of(&key.vk).bytes();
    key.recording.matrices().unwrap().write_file(&matrices_path(&params), digest).unwrap();

    let later = fresh(true);
    let proven = FilecoinProver::with_params_dir(&later, &params_dir()).unwrap().prove_job(&request).unwrap();
    assert!(filecoin::verify_with_filecoin_proofs(&request, &proven.bytes, false));
    assert_eq!(proven.timings.first_synthesis, 0.0, "{:?}", proven.timings);
    assert!(proven.timings.key_load > 0.0, "{:?}", proven.timings);

    let without = fresh(false);
    let proven = FilecoinProver::with_params_dir(&without, &params_dir()).unwrap().prove_job(&request).unwrap();
    assert!(filecoin::verify_with_filecoin_proofs(&request, &proven.bytes, false));
    assert!(proven.timings.first_synthesis > 0.0, "{:?}", proven.timings);
}

/// A copy of `job` with its JSON edited by `edit`, in a temporary directory.
fn edited(job: &Path, dir: &Path, name: &str, edit: impl FnOnce(String) -> String) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, edit(std::fs::read_to_string(job).unwrap())).unwrap();
    path
}

fn set_field(text: String, field: &str, value: &str) -> String {
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json[field] = serde_json::from_str(value).unwrap();
    json.to_string()
}

#[test]
fn bad_vanilla_files_get_typed_errors_and_the_prover_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let window = job(ProofKind::WindowPost);
    let engine = FilecoinProver::with_params_dir(prover(), &params_dir()).unwrap();
    let prove = |path: &Path| VanillaRequest::read(path).and_then(|job| engine.prove_job(&job));

    // Truncated, garbled, of an unknown API version: refused when read, naming the file.
    let truncated = edited(&window, dir.path(), "truncated.json", |t| t[..t.len() / 2].to_string());
    let garbled = edited(&window, dir.path(), "garbled.json", |t| t.replacen(':', "#", 3));
    let unknown_version = edited(&window, dir.path(), "v9.json", |t| set_field(t, "api_version", "\"9.9.9\""));
    for (path, expected) in [(&truncated, "ends early"), (&garbled, "not valid JSON"), (&unknown_version, "9.9.9")] {
        match prove(path) {
            Err(err @ Error::Vanilla { .. }) => {
                assert!(err.to_string().contains(expected), "{err}");
                assert!(err.to_string().contains(&path.display().to_string()), "{err} does not name the file");
            }
            other => panic!("{}: {other:?}", path.display()),
        }
    }
    // Another kind: refused by the CLI's --kind.
    let stderr = cli_fails(&window, ProofKind::WinningPost, &params_dir());
    assert!(stderr.contains("window-post job, not winning-post"), "{stderr}");

    // Another sector size: no parameters of that size, named.
    let bigger = edited(&window, dir.path(), "8mib.json", |t| set_field(t, "sector_size", "8388608"));
    match prove(&bigger) {
        Err(Error::MissingParams { what, expected, .. }) => {
            assert!(what.contains("8 MiB"), "{what}");
            assert!(
                expected.starts_with("v28-proof-of-spacetime-fallback") && expected.ends_with(".params"),
                "{expected}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Another API version than its vanilla proofs were made for: the vanilla proofs do not
    // check out, and nothing is returned.
    let winning = job(ProofKind::WinningPost);
    let other_version = edited(&winning, dir.path(), "v12.json", |t| set_field(t, "api_version", "\"1.2.0\""));
    match prove(&other_version) {
        Err(Error::Filecoin(_) | Error::ProofRejected { .. }) => {}
        other => panic!("a Winning PoSt made at 1.1.0 and proven as 1.2.0: {other:?}"),
    }

    // The prover that refused all of these still proves.
    let good = VanillaRequest::read(&window).unwrap();
    let proven = engine.prove_job(&good).unwrap();
    assert!(filecoin::verify_with_filecoin_proofs(&good, &proven.bytes, false));
}

/// The Window PoSt's parameter files in the shared directory: (.params, .vk).
fn window_files() -> (PathBuf, PathBuf) {
    let config = snarkpipe::filecoin::fixtures::post_config_2kib(PoStType::Window).unwrap();
    let id = config.get_cache_identifier::<filecoin_proofs::SectorShape2KiB>().unwrap();
    let name = |f: fn(&str) -> String| params_dir().join(f(&id));
    use storage_proofs_core::parameter_cache::{parameter_id, verifying_key_id};
    (name(parameter_id), name(verifying_key_id))
}

#[test]
fn bad_parameter_directories_get_typed_errors_naming_the_file() {
    let window = job(ProofKind::WindowPost);
    let (params, vk) = window_files();
    let file_name = |p: &Path| p.file_name().unwrap().to_string_lossy().into_owned();

    // Missing: the expected name is in the message.
    let empty = tempfile::tempdir().unwrap();
    let stderr = cli_fails(&window, ProofKind::WindowPost, empty.path());
    assert!(stderr.contains(&file_name(&params)) && stderr.contains("cannot open it"), "{stderr}");

    // Truncated: the reader names the file.
    let truncated = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(&params).unwrap();
    std::fs::write(truncated.path().join(file_name(&params)), &bytes[..bytes.len() / 3]).unwrap();
    std::fs::copy(&vk, truncated.path().join(file_name(&vk))).unwrap();
    let stderr = cli_fails(&window, ProofKind::WindowPost, truncated.path());
    assert!(stderr.contains(&file_name(&params)), "{stderr}");

    // A .vk of another circuit beside the .params (the Winning PoSt's: made here if no test
    // has made it yet).
    job(ProofKind::WinningPost);
    let mismatched = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&params, mismatched.path().join(file_name(&params))).unwrap();
    let winning_config = snarkpipe::filecoin::fixtures::post_config_2kib(PoStType::Winning).unwrap();
    let winning_id = winning_config.get_cache_identifier::<filecoin_proofs::SectorShape2KiB>().unwrap();
    let winning_vk = params_dir().join(storage_proofs_core::parameter_cache::verifying_key_id(&winning_id));
    std::fs::copy(&winning_vk, mismatched.path().join(file_name(&vk))).unwrap();
    let stderr = cli_fails(&window, ProofKind::WindowPost, mismatched.path());
    assert!(stderr.contains("not the verifying key"), "{stderr}");

    // Parameters of another sector size under this size's name: their .meta says so.
    let resized = tempfile::tempdir().unwrap();
    let big =
        snarkpipe::filecoin::post_config(PoStType::Window, 8 << 20, snarkpipe::filecoin::fixtures::POST_API_VERSION)
            .unwrap();
    let big_id = big.get_cache_identifier::<filecoin_proofs::SectorShape8MiB>().unwrap();
    use storage_proofs_core::parameter_cache::{metadata_id, parameter_id, verifying_key_id};
    std::os::unix::fs::symlink(&params, resized.path().join(parameter_id(&big_id))).unwrap();
    std::fs::copy(&vk, resized.path().join(verifying_key_id(&big_id))).unwrap();
    std::fs::write(resized.path().join(metadata_id(&big_id)), r#"{"sector_size":2048}"#).unwrap();
    let bigger = edited(&window, resized.path(), "8mib.json", |t| set_field(t, "sector_size", "8388608"));
    let stderr = cli_fails(&bigger, ProofKind::WindowPost, resized.path());
    assert!(stderr.contains("for 2 KiB sectors, not 8 MiB"), "{stderr}");

    // The good directory still works.
    check_cli(&window, ProofKind::WindowPost);
}
