//! Keys on devices that cannot hold them beside a partition (CPU model): nothing waits for
//! memory that cannot come, keys stay partly resident where they do not fit, and the
//! device-memory cap plans as a smaller card would.
//!
//! Each hang below is caught by a deadline on the proof's channel: a test that would wait for
//! ever fails instead, naming what hung.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::cpu::CpuDevice;
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::Witness;
use snarkpipe::groth16;
use snarkpipe::params::ProvingKey;
use snarkpipe::plan::{key_chunk_bytes, partition_plan_bytes, MIN_KEY_CHUNK_POINTS};
use snarkpipe::prover::{ProofRequest, Prover, ProverConfig};
use snarkpipe::Error;

mod common;
use common::{assert_nothing_held, bytes, fresh_seed, partitions, spec, wait_until, After};

/// What a test gives a call that must end: far above the milliseconds these 2^8 partitions
/// take on the CPU model, far below for ever.
const DEADLINE: Duration = Duration::from_secs(120);

/// Runs `work` on its own thread and returns what it returns, or fails the test naming `what`
/// if it has not returned by the deadline (the thread is left behind: it is hung).
fn within<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (done, result) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(work());
    });
    match result.recv_timeout(DEADLINE) {
        Ok(value) => value,
        Err(_) => panic!("{what} did not finish within {DEADLINE:?}: it hangs"),
    }
}

/// A CPU prover whose one modelled device's budget is capped at `cap` bytes (the model itself
/// holds 16 GiB, as a larger card would).
fn capped_prover(cap: u64) -> Arc<Prover> {
    Arc::new(
        Prover::new(ProverConfig {
            backend: BackendKind::Cpu,
            device_memory_bytes: Some(cap),
            workers_per_device: 2,
            in_flight: 3,
            memory_reserve_bytes: 0,
            retries: 0,
            ..ProverConfig::default()
        })
        .unwrap(),
    )
}

/// A 2^8 key, `n` of its partitions, and the device bytes one partition plans for.
fn key_partitions_and_plan(n: usize, seed: u64) -> (Arc<ProvingKey>, Vec<Arc<Witness>>, u64) {
    let spec = spec(8, 4, seed);
    let witnesses = partitions(&spec, n);
    let plan = partition_plan_bytes(&CpuDevice::new(0, 0), &witnesses[0].shape(), 8);
    (spec.proving_key().unwrap(), witnesses, plan)
}

/// Proves `witnesses` with `key` on `prover` under the deadline; checks each proof.
fn prove_within(what: &str, prover: &Arc<Prover>, key: &Arc<ProvingKey>, witnesses: &[Arc<Witness>], seed: u64) {
    let (prover, key, witnesses) = (prover.clone(), key.clone(), witnesses.to_vec());
    let proofs = within(what, move || {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        prover.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).map(|p| (p, key, witnesses))
    });
    let (proofs, key, witnesses) = proofs.unwrap_or_else(|err| panic!("{what}: {err}"));
    for (proof, witness) in proofs.iter().zip(&witnesses) {
        assert!(groth16::verify(&key.prepared_vk(), proof, witness.public_inputs()).unwrap(), "{what}");
    }
}

/// The hang of a 2^27 partition on an 80 GB card, at a small size: a device barely larger
/// than the key. Before the fix the preload made the whole key resident and the partition
/// waited for ever for memory only its own key held.
#[test]
fn a_preloaded_key_that_fills_the_device_leaves_room_for_its_partitions() {
    let seed = fresh_seed();
    let (key, witnesses, plan) = key_partitions_and_plan(3, seed);
    let cap = key.device_bytes() + plan / 2;
    let prover = capped_prover(cap);
    let preloading = prover.clone();
    let preloaded = key.clone();
    within("the preload", move || preloading.preload(&preloaded, None)).unwrap();
    let status = &prover.device_status()[0];
    assert_eq!(status.keys.len(), 1, "{status:?}");
    let held = &status.keys[0];
    assert!(!held.streamed.is_empty(), "the whole key was made resident on a device it fills: {held:?}");
    assert!(held.resident_bytes + plan <= cap, "no room left for a partition: {held:?}, cap {cap}");
    prove_within("proving after the preload", &prover, &key, &witnesses, seed);
    assert_nothing_held(&prover, After::Shutdown);
}

/// The bench's path (its warm-up preloads the key and pins staging) on the same device.
#[test]
fn a_warm_up_on_a_device_barely_larger_than_the_key_then_proves() {
    let seed = fresh_seed();
    let (key, witnesses, plan) = key_partitions_and_plan(4, seed);
    let prover = capped_prover(key.device_bytes() + plan / 3);
    let (warming, warmed) = (prover.clone(), key.clone());
    within("the warm-up", move || warming.warm_up(&warmed, None)).unwrap();
    prove_within("proving after the warm-up", &prover, &key, &witnesses, seed);
    assert_nothing_held(&prover, After::Shutdown);
}

/// A preload of one key while another key's partitions stream, on a device that holds one
/// key and a partition. Before the fix the preload took the head of the budget's queue and
/// waited for the other key's memory without evicting it again, and the stream's next
/// partition waited behind the preload: both for ever.
#[test]
fn a_preload_racing_a_stream_of_another_key_ends_and_both_prove() {
    let seed = fresh_seed();
    let (streamed, witnesses, plan) = key_partitions_and_plan(12, seed);
    let (other, other_witnesses, _) = key_partitions_and_plan(2, seed ^ 1);
    // Room for either key with two partitions, never for both keys.
    let cap = streamed.device_bytes() + 2 * plan;
    assert!(
        streamed.device_bytes() + other.device_bytes() > cap,
        "both keys ({} bytes each) fit in {cap} with partitions of {plan}: the race shows nothing",
        streamed.device_bytes()
    );
    let prover = capped_prover(cap);
    let (streaming, stream_key, stream_witnesses) = (prover.clone(), streamed.clone(), witnesses.clone());
    let stream = std::thread::spawn(move || {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        streaming.prove(ProofRequest::new(stream_key, stream_witnesses, &mut rng))
    });
    // The preload comes once the stream holds its key (were the stream already over, the
    // preload would find the key idle and evict it; it must end either way).
    wait_until(DEADLINE, "the stream's key made resident", || prover.is_resident(&streamed, 0) || stream.is_finished());
    let (preloading, preloaded) = (prover.clone(), other.clone());
    within("the preload beside another key's stream", move || preloading.preload(&preloaded, None)).unwrap();
    let proofs = within("the stream beside a preload", move || stream.join().unwrap()).unwrap();
    for (proof, witness) in proofs.iter().zip(&witnesses) {
        assert!(groth16::verify(&streamed.prepared_vk(), proof, witness.public_inputs()).unwrap());
    }
    prove_within("proving with the preloaded key", &prover, &other, &other_witnesses, seed);
    assert_nothing_held(&prover, After::Shutdown);
}

/// Partial residency: at every cap from "room for a partition and the smallest chunks" to
/// "the whole key beside two partitions", the proofs are byte for byte those of a roomy
/// device with the same randomness, the budget never grants beyond the cap, and the resident
/// vectors never exceed it. Some caps must keep the key partly resident, or the test shows
/// nothing.
#[test]
fn partial_residency_at_every_cap_proves_the_same_and_never_exceeds_the_cap() {
    let seed = fresh_seed();
    let (key, witnesses, plan) = key_partitions_and_plan(3, seed);
    let reference = {
        let roomy = capped_prover(16 << 30);
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let proofs = roomy.prove(ProofRequest::new(key.clone(), witnesses.clone(), &mut rng)).unwrap();
        assert!(roomy.device_status()[0].keys[0].streamed.is_empty(), "the roomy device streams");
        assert_nothing_held(&roomy, After::Shutdown);
        proofs
    };
    let smallest = plan + key_chunk_bytes(MIN_KEY_CHUNK_POINTS);
    let everything = key.device_bytes() + 2 * plan;
    let steps = 12u64;
    let mut partly_resident = 0;
    for step in 0..=steps {
        let cap = smallest + (everything - smallest) * step / steps;
        let prover = capped_prover(cap);
        let (proving, proving_key, proving_witnesses) = (prover.clone(), key.clone(), witnesses.clone());
        let proofs = within(&format!("proving under a cap of {cap} bytes"), move || {
            let mut rng = ChaCha20Rng::seed_from_u64(seed);
            proving.prove(ProofRequest::new(proving_key, proving_witnesses, &mut rng))
        })
        .unwrap_or_else(|err| panic!("cap {cap}: {err}"));
        for (i, (proof, expected)) in proofs.iter().zip(&reference).enumerate() {
            assert_eq!(bytes(proof), bytes(expected), "cap {cap}: partition {i} differs from the roomy device's");
        }
        let status = &prover.device_status()[0];
        assert!(status.memory_budget_bytes <= cap, "cap {cap}: budget of {}", status.memory_budget_bytes);
        for held in &status.keys {
            assert!(held.resident_bytes + plan <= cap, "cap {cap}: {held:?} leaves no room for a partition");
            if !held.resident.is_empty() && !held.streamed.is_empty() {
                partly_resident += 1;
            }
        }
        let report = &prover.budget_reports().unwrap()[0];
        assert!(report.peak_bytes <= cap, "cap {cap}: the budget granted {} bytes", report.peak_bytes);
        assert_nothing_held(&prover, After::Shutdown);
    }
    assert!(partly_resident >= 3, "only {partly_resident} caps kept the key partly resident");
}

/// A cap below what any plan needs (a partition and the smallest chunks) is refused at once
/// with the bytes it lacks; the twin at exactly that cap proves, streaming the whole key.
#[test]
fn a_cap_below_every_plan_is_refused_at_once_with_the_bytes_it_lacks() {
    let seed = fresh_seed();
    let (key, witnesses, plan) = key_partitions_and_plan(2, seed);
    let needed = plan + key_chunk_bytes(MIN_KEY_CHUNK_POINTS);
    let prover = capped_prover(needed - 1);
    let (proving, proving_key, proving_witnesses) = (prover.clone(), key.clone(), witnesses.clone());
    let err = within("a refusal", move || {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        proving.prove(ProofRequest::new(proving_key, proving_witnesses, &mut rng))
    })
    .unwrap_err();
    match err.root_cause() {
        root @ Error::PlanExceedsDevice { needed_bytes, capacity_bytes, .. } => {
            assert_eq!((*needed_bytes, *capacity_bytes), (needed, needed - 1));
            assert!(root.to_string().contains("(1 bytes short"), "{root}");
        }
        other => panic!("expected PlanExceedsDevice, got {other}"),
    }
    let (preloading, preloaded) = (prover.clone(), key.clone());
    let refused = within("a preload that cannot fit", move || preloading.preload(&preloaded, None));
    assert!(matches!(refused, Err(Error::PlanExceedsDevice { .. })), "{refused:?}");
    prove_within("proving at exactly the smallest plan", &capped_prover(needed), &key, &witnesses, seed);
    assert_nothing_held(&prover, After::Shutdown);
}
