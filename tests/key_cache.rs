//! The prover's key cache: one proving key per parameter set, found by identity (verifying-key
//! digest, circuit shape and, for files named by path, the file's stamp), resident and
//! page-locked across calls, bounded by its host bytes.

use std::sync::{Arc, Once};

use bellperson::groth16::{
    generate_random_parameters, prepare_verifying_key, verify_proof, MappedParameters, Parameters,
};
use bellperson::{Circuit, ConstraintSystem, SynthesisError, Variable};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::{SatisfactionCheck, Witness, WitnessShape};
use snarkpipe::compat;
use snarkpipe::params::cache::{KeyCacheEntryStatus, KeyTier, VkDigest};
use snarkpipe::params::file::PointCheck;
use snarkpipe::prover::{Prover, ProverConfig};

mod common;
use common::{assert_nothing_held, fresh_rng, After};

fn missing() -> SynthesisError {
    SynthesisError::AssignmentMissing
}

/// x_{j+1} = x_j·(x_j + input), `steps` times, with one public input.
#[derive(Clone)]
struct Chain {
    start: Option<Scalar>,
    input: Option<Scalar>,
    steps: usize,
}

impl Chain {
    fn random(rng: &mut ChaCha20Rng, steps: usize) -> Chain {
        Chain { start: Some(Scalar::random(&mut *rng)), input: Some(Scalar::random(&mut *rng)), steps }
    }
}

impl Circuit<Scalar> for Chain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let input = cs.alloc_input(|| "input", || self.input.ok_or_else(missing))?;
        let mut x_value = self.start;
        let mut x: Variable = cs.alloc(|| "x 0", || x_value.ok_or_else(missing))?;
        for j in 0..self.steps {
            let next_value = x_value.zip(self.input).map(|(x, i)| x * (x + i));
            let next = cs.alloc(|| format!("x {}", j + 1), || next_value.ok_or_else(missing))?;
            cs.enforce(|| format!("step {j}"), |lc| lc + x, |lc| lc + x + input, |lc| lc + next);
            (x, x_value) = (next, next_value);
        }
        Ok(())
    }
}

fn shape_of(circuit: &Chain) -> WitnessShape {
    Witness::synthesize(circuit.clone(), SatisfactionCheck::Off).unwrap().shape()
}

fn setup(circuit: &Chain, rng: &mut ChaCha20Rng) -> Parameters<Bls12> {
    generate_random_parameters::<Bls12, _, _>(circuit.clone(), rng).unwrap()
}

/// `params` written to a fresh temporary `.params` file.
fn write_params(params: &Parameters<Bls12>) -> tempfile::NamedTempFile {
    let file = tempfile::Builder::new().suffix(".params").tempfile().unwrap();
    params.write(std::io::BufWriter::new(file.as_file())).unwrap();
    file
}

fn cpu_prover(key_cache_host_bytes: u64) -> Prover {
    Prover::new(ProverConfig { backend: BackendKind::Cpu, key_cache_host_bytes, ..ProverConfig::default() }).unwrap()
}

/// The cache entries of one setup (the compat prover is shared by the tests of this file).
fn entries_of(prover: &Prover, vk: &bellperson::groth16::VerifyingKey<Bls12>) -> Vec<KeyCacheEntryStatus> {
    let digest = VkDigest::of(vk);
    prover.key_cache_status().entries.into_iter().filter(|e| e.identity.vk_digest == digest).collect()
}

fn compat_prover() -> &'static Prover {
    static CPU: Once = Once::new();
    CPU.call_once(|| std::env::set_var("SNARKPIPE_BACKEND", "cpu"));
    compat::default_prover().unwrap()
}

#[test]
fn two_compat_calls_with_the_same_mapped_parameters_share_one_resident_key() {
    let prover = compat_prover();
    let mut rng = fresh_rng();
    let circuit = Chain::random(&mut rng, 40);
    let params = setup(&circuit, &mut rng);
    let file = write_params(&params);
    let mapped: MappedParameters<Bls12> =
        Parameters::build_mapped_parameters(file.path().to_path_buf(), false).unwrap();
    let pvk = prepare_verifying_key(&params.vk);
    let public = [circuit.input.unwrap()];

    for call in 0..2 {
        let proof = compat::create_random_proof(circuit.clone(), &mapped, &mut rng).unwrap();
        assert!(verify_proof(&pvk, &proof, &public).unwrap(), "call {call}: the proof does not verify");
    }
    let entries = entries_of(prover, &params.vk);
    assert_eq!(entries.len(), 1, "one setup, one key: {entries:?}");
    let entry = &entries[0];
    // The second call was a hit: the file was not read again for it.
    assert_eq!((entry.hits, entry.loads), (1, 1), "{entry:?}");
    assert_eq!(entry.tier, KeyTier::Hot, "the key did not stay resident: {entry:?}");
    assert!(entry.page_locked && !entry.devices.is_empty());

    // Parameters of another setup of the same circuit (another verifying key) are another key.
    let other = setup(&circuit, &mut rng);
    let proof = compat::create_random_proof(circuit.clone(), &other, &mut rng).unwrap();
    assert!(verify_proof(&prepare_verifying_key(&other.vk), &proof, &public).unwrap());
    let others = entries_of(prover, &other.vk);
    assert_eq!(others.len(), 1);
    assert_eq!((others[0].hits, others[0].loads), (0, 1));
    assert_ne!(others[0].identity, entry.identity);
    assert_eq!(entries_of(prover, &params.vk)[0].hits, 1, "the other setup hit the first key");
}

#[test]
fn in_memory_and_mapped_parameters_of_one_setup_are_one_key() {
    let prover = cpu_prover(1 << 40);
    let mut rng = fresh_rng();
    let circuit = Chain::random(&mut rng, 30);
    let shape = shape_of(&circuit);
    let params = setup(&circuit, &mut rng);
    let file = write_params(&params);
    let mapped: MappedParameters<Bls12> =
        Parameters::build_mapped_parameters(file.path().to_path_buf(), false).unwrap();

    let in_memory = prover.key_for_source(&params, &shape).unwrap();
    let from_the_map = prover.key_for_source(&mapped, &shape).unwrap();
    assert!(Arc::ptr_eq(&in_memory, &from_the_map), "the same setup gave two keys");
    let status = prover.key_cache_status();
    assert_eq!((status.entries.len(), status.hits, status.misses), (1, 1, 1));
    // Not resident until used: warm, in page-locked host memory.
    assert_eq!(status.entries[0].tier, KeyTier::Warm);
    assert!(status.entries[0].page_locked);
    assert_eq!(status.host_bytes, in_memory.host_bytes());
    assert!(prover.pinned_ranges().len() >= 5, "the cached key's vectors are not page-locked");
    prover.preload(&in_memory, None).unwrap();
    assert_eq!(prover.key_cache_status().entries[0].tier, KeyTier::Hot);
}

#[test]
fn a_different_file_of_the_same_circuit_is_its_own_entry() {
    let prover = cpu_prover(1 << 40);
    let mut rng = fresh_rng();
    let circuit = Chain::random(&mut rng, 30);
    let shape = shape_of(&circuit);
    let first_params = setup(&circuit, &mut rng);
    let (first, second) = (write_params(&first_params), write_params(&setup(&circuit, &mut rng)));

    let key = prover.key_for_path(first.path(), PointCheck::Checked, &shape).unwrap();
    let again = prover.key_for_path(first.path(), PointCheck::Checked, &shape).unwrap();
    assert!(Arc::ptr_eq(&key, &again), "the same file gave two keys");
    assert_eq!(prover.key_cache_status().hits, 1);

    // The negative twin: another file of the same circuit, from another setup.
    let other = prover.key_for_path(second.path(), PointCheck::Checked, &shape).unwrap();
    assert!(!Arc::ptr_eq(&key, &other));
    // And a copy of the first file under another name: the same setup, another file.
    let copy = tempfile::Builder::new().suffix(".params").tempfile().unwrap();
    std::fs::copy(first.path(), copy.path()).unwrap();
    let copied = prover.key_for_path(copy.path(), PointCheck::Unchecked, &shape).unwrap();
    assert!(!Arc::ptr_eq(&key, &copied));
    let status = prover.key_cache_status();
    assert_eq!((status.entries.len(), status.hits, status.misses), (3, 1, 3), "{status:#?}");
    let files: Vec<_> = status.entries.iter().map(|e| e.identity.file.clone().expect("a stamp").path).collect();
    assert_eq!(files.len(), 3);
    assert!(files.iter().all(|p| p.is_absolute()));
    // The same parameters as a generic source have no stamp: they are one more entry, and a
    // second source of the same setup is that entry.
    let by_source = prover.key_for_source(&first_params, &shape).unwrap();
    let mapped: MappedParameters<Bls12> =
        Parameters::build_mapped_parameters(copy.path().to_path_buf(), false).unwrap();
    assert!(Arc::ptr_eq(&by_source, &prover.key_for_source(&mapped, &shape).unwrap()));
}

#[test]
fn a_file_rewritten_in_place_is_read_again() {
    let prover = cpu_prover(1 << 40);
    let mut rng = fresh_rng();
    let circuit = Chain::random(&mut rng, 30);
    let shape = shape_of(&circuit);
    let file = write_params(&setup(&circuit, &mut rng));
    let before = prover.key_for_path(file.path(), PointCheck::Unchecked, &shape).unwrap();
    // Another setup written over it (its length differs by nothing, its time moves on).
    std::thread::sleep(std::time::Duration::from_millis(20));
    let rewritten = setup(&circuit, &mut rng);
    rewritten.write(std::io::BufWriter::new(std::fs::File::create(file.path()).unwrap())).unwrap();
    let after = prover.key_for_path(file.path(), PointCheck::Unchecked, &shape).unwrap();
    assert!(!Arc::ptr_eq(&before, &after), "a rewritten file was served from the cache");
    assert_eq!(after.vk.delta_g1, rewritten.vk.delta_g1);
}

#[test]
fn the_host_limit_evicts_the_least_recently_used_key_from_host_and_devices() {
    let mut rng = fresh_rng();
    let circuit = Chain::random(&mut rng, 30);
    let shape = shape_of(&circuit);
    let (a, b) = (setup(&circuit, &mut rng), setup(&circuit, &mut rng));
    let probe = cpu_prover(1 << 40);
    let one_key = probe.key_for_source(&a, &shape).unwrap().host_bytes();
    drop(probe);

    // Room for one key only.
    let prover = cpu_prover(one_key);
    let key_a = prover.key_for_source(&a, &shape).unwrap();
    prover.preload(&key_a, None).unwrap();
    let key_b = prover.key_for_source(&b, &shape).unwrap();
    let status = prover.key_cache_status();
    assert!(status.host_bytes <= one_key);
    let tiers: Vec<KeyTier> = status.entries.iter().map(|e| e.tier).collect();
    assert_eq!(tiers, vec![KeyTier::Warm, KeyTier::Cold]);
    assert!(!prover.is_resident(&key_a, 0), "a key evicted from the host cache stayed on the device");
    // The twin: the key that stays is the one just used; A, asked for again, is built again.
    assert!(Arc::ptr_eq(&key_b, &prover.key_for_source(&b, &shape).unwrap()));
    let rebuilt = prover.key_for_source(&a, &shape).unwrap();
    assert!(!Arc::ptr_eq(&rebuilt, &key_a));
    let entry = &prover.key_cache_status().entries[0];
    assert_eq!((entry.tier, entry.loads), (KeyTier::Warm, 2));
    assert_eq!(prover.evict_cached_keys(), 1);
    assert!(prover.key_cache_status().entries.iter().all(|e| e.tier == KeyTier::Cold));
    assert_nothing_held(&prover, After::Shutdown);
}

#[test]
fn callers_asking_at_once_for_one_key_build_it_once() {
    let prover = cpu_prover(1 << 40);
    let mut rng = fresh_rng();
    let circuit = Chain::random(&mut rng, 200);
    let shape = shape_of(&circuit);
    let file = write_params(&setup(&circuit, &mut rng));
    let mapped: MappedParameters<Bls12> =
        Parameters::build_mapped_parameters(file.path().to_path_buf(), false).unwrap();
    let keys: Vec<_> = std::thread::scope(|scope| {
        let asking: Vec<_> = (0..4).map(|_| scope.spawn(|| prover.key_for_source(&mapped, &shape).unwrap())).collect();
        asking.into_iter().map(|a| a.join().unwrap()).collect()
    });
    assert!(keys.iter().all(|k| Arc::ptr_eq(k, &keys[0])), "callers at once got different keys");
    let status = prover.key_cache_status();
    // The file was read once; the callers that waited for that read were hits.
    assert_eq!((status.misses, status.hits, status.entries[0].loads), (1, 3, 1));
}

/// Proves `n` chain circuits of `steps` steps as circuits through the pipeline with `key`;
/// each proof verifies.
fn prove_chains(prover: &Prover, key: &Arc<snarkpipe::params::ProvingKey>, steps: usize, n: usize) {
    use snarkpipe::prover::CircuitRequest;
    let mut rng = fresh_rng();
    let circuits: Vec<Chain> = (0..n).map(|_| Chain::random(&mut rng, steps)).collect();
    let inputs: Vec<Scalar> = circuits.iter().map(|c| c.input.unwrap()).collect();
    let proofs = prover.submit_circuits(CircuitRequest::new(key.clone(), circuits, &mut rng)).unwrap().wait().unwrap();
    let pvk = prepare_verifying_key(&key.vk);
    for (proof, input) in proofs.iter().zip(&inputs) {
        assert!(verify_proof(&pvk, proof, &[*input]).unwrap());
    }
}

/// The matrices the first partitions of a `.params` file record are written beside it, and a
/// later prover (a restarted node) reads them instead of recording: its key holds them before
/// any partition, equal to the recorded ones, and proves with them. The negative twin: another
/// setup's file at the same path does not take the first setup's matrices (they are tied to
/// the verifying key's digest); it records afresh and replaces the file.
#[test]
fn recorded_matrices_are_kept_beside_the_params_and_read_by_a_later_prover() {
    let mut rng = fresh_rng();
    let steps = 40;
    let circuit = Chain::random(&mut rng, steps);
    let shape = shape_of(&circuit);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("chain.params");
    let write = |params: &Parameters<Bls12>| {
        params.write(std::io::BufWriter::new(std::fs::File::create(&path).unwrap())).unwrap();
    };
    write(&setup(&circuit, &mut rng));
    let beside = snarkpipe::prover::matrices_path(&path);
    assert_eq!(beside, dir.path().join("chain.params.snarkpipe-matrices"));

    let first = cpu_prover(1 << 40);
    let key = first.key_for_path(&path, PointCheck::Unchecked, &shape).unwrap();
    assert!(key.recording.matrices().is_none(), "matrices before any partition, with no file");
    prove_chains(&first, &key, steps, 3);
    let recorded = key.recording.matrices().expect("the first partition recorded the matrices");
    common::wait_until(std::time::Duration::from_secs(30), "the matrices file", || beside.exists());

    let later = cpu_prover(1 << 40);
    let reread = later.key_for_path(&path, PointCheck::Unchecked, &shape).unwrap();
    assert!(!Arc::ptr_eq(&key, &reread));
    let loaded = reread.recording.matrices().expect("the later prover did not read the file");
    assert_eq!(*loaded, *recorded, "the matrices read back differ from those recorded");
    prove_chains(&later, &reread, steps, 2);
    assert!(Arc::ptr_eq(&reread.recording.matrices().unwrap(), &loaded), "recorded again despite the file");

    // Another setup written over the file: the old matrices file is another key's.
    let stamp = std::fs::metadata(&beside).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(&setup(&circuit, &mut rng));
    let third = cpu_prover(1 << 40);
    let other = third.key_for_path(&path, PointCheck::Unchecked, &shape).unwrap();
    assert!(other.recording.matrices().is_none(), "another setup took the first setup's matrices");
    prove_chains(&third, &other, steps, 2);
    common::wait_until(std::time::Duration::from_secs(30), "the matrices file replaced", || {
        std::fs::metadata(&beside).and_then(|m| m.modified()).is_ok_and(|t| t > stamp)
    });
    let fourth = cpu_prover(1 << 40);
    let reread = fourth.key_for_path(&path, PointCheck::Unchecked, &shape).unwrap();
    assert!(reread.recording.matrices().is_some(), "the replaced file was not the new setup's");
    for prover in [&first, &later, &third, &fourth] {
        assert_nothing_held(prover, After::Requests);
    }
}

/// The key cache's bound covers a key's recorded constraint matrices as well as its vectors:
/// the entry's host bytes grow by the matrices' once the first partition records them (before,
/// about 13 GB of a 32 GiB PoRep's matrices lay outside every budget).
#[test]
fn recorded_matrices_count_in_the_key_caches_host_bytes() {
    let mut rng = fresh_rng();
    let steps = 40;
    let circuit = Chain::random(&mut rng, steps);
    let shape = shape_of(&circuit);
    let params = setup(&circuit, &mut rng);
    let file = write_params(&params);
    let prover = Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        key_cache_host_bytes: 1 << 40,
        constraint_matrices_beside_params: false,
        ..ProverConfig::default()
    })
    .unwrap();
    let key = prover.key_for_path(file.path(), PointCheck::Unchecked, &shape).unwrap();
    let before = entries_of(&prover, &params.vk);
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].bytes, key.host_bytes(), "before any partition the entry is the key's vectors");
    prove_chains(&prover, &key, steps, 2);
    let matrices = key.recording.matrices().expect("the first partition recorded the matrices");
    let after = entries_of(&prover, &params.vk);
    assert_eq!(after[0].bytes, key.host_bytes() + matrices.bytes(), "the matrices are outside the cache's bound");
    assert_eq!(prover.key_cache_status().host_bytes, key.host_bytes() + matrices.bytes());
    assert_nothing_held(&prover, After::Shutdown);
}
