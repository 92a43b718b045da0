//! Partitions submitted as circuits, synthesized witness-only from their key's recorded
//! constraint matrices, and evaluated on the device: the key's matrices become resident beside
//! it once, each later partition stages its assignment only, and its proof is byte for byte
//! the proof of its whole witness. A circuit whose structure follows its witness is caught as
//! its own failure, not the device's. On the CPU backend, whose evaluation is the reference
//! the CUDA kernel is tested against (tests/sparse_eval.rs).

use std::time::Duration;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::ConstraintEvaluation;
use snarkpipe::groth16;
use snarkpipe::params::ProvingKey;
use snarkpipe::plan::{key_chunk_bytes, partition_plan_bytes, resident_matrices_bytes};
use snarkpipe::prover::{CircuitRequest, Priority, ProofRequest, Prover, ProverConfig};
use snarkpipe::timeline::Span;
use snarkpipe::{Error, Scalar, Stage};

mod common;
use common::{assert_nothing_held, bytes, fresh_rng, fresh_seed, partitions, wait_each_within, After};

/// One partition in flight: partition 0 records the key's matrices before any other
/// synthesizes, so every later one is synthesized from them.
fn prover(evaluation: ConstraintEvaluation, verify_proofs: bool, device_bytes: Option<u64>) -> Prover {
    let mut config = ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: 2,
        in_flight: 1,
        memory_reserve_bytes: 0,
        retries: 2,
        constraint_evaluation: evaluation,
        verify_proofs,
        ..ProverConfig::default()
    };
    if let Some(bytes) = device_bytes {
        config.cpu_device_bytes = bytes;
    }
    Prover::new(config).unwrap()
}

/// The device spans of constraint evaluations.
fn evaluations(prover: &Prover) -> Vec<Span> {
    let spans = prover.timeline().snapshot().spans;
    spans
        .into_iter()
        .filter(|s| s.track.is_device() && s.args.get("what").and_then(|w| w.as_str()) == Some("constraint evaluation"))
        .collect()
}

/// Host-to-device bytes each partition staged (the key's and the matrices' uploads aside).
fn staged_bytes(prover: &Prover, partition: usize) -> u64 {
    prover
        .timeline()
        .snapshot()
        .spans
        .iter()
        .filter(|s| s.track.is_device() && s.stage == Stage::Htod && s.partition == partition)
        .filter(|s| !s.args.contains_key("what"))
        .filter_map(|s| s.args.get("bytes").and_then(|b| b.as_u64()))
        .sum()
}

/// With the device evaluating, partitions 1.. are evaluated there from matrices resident
/// beside the key, stage fewer bytes than partition 0 (which recorded, so the host evaluated
/// it), and prove byte for byte as their whole witnesses do. The twin with the host evaluating
/// makes the same proofs, with no matrices on the device and no evaluation there.
#[test]
fn partitions_after_the_recording_are_evaluated_on_the_device() {
    let spec = common::spec(8, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 5);
    let mut proofs = Vec::new();
    for evaluation in [ConstraintEvaluation::Device, ConstraintEvaluation::Host] {
        // The same key for both: in the host's run its matrices are recorded already.
        let prover = prover(evaluation, true, None);
        let circuits: Vec<_> = (0..5).map(|i| spec.circuit(i)).collect();
        let request = CircuitRequest::new(key.clone(), circuits, &mut ChaCha20Rng::seed_from_u64(7));
        let (r, s) = (request.r.clone(), request.s.clone());
        let outcomes = wait_each_within(&prover.submit_circuits(request).unwrap(), Duration::from_secs(120));
        let pvk = key.prepared_vk();
        for (i, outcome) in outcomes.iter().enumerate() {
            let proof = outcome.as_ref().unwrap_or_else(|e| panic!("{evaluation:?}: partition {i}: {e}"));
            let reference = groth16::prove(&key, &witnesses[i], r[i], s[i]).unwrap();
            assert_eq!(bytes(proof), bytes(&reference), "{evaluation:?}: partition {i} differs from its witness's");
            assert!(groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap());
        }
        let matrices = key.recording.matrices().expect("partition 0 recorded the key's matrices");
        let resident: u64 = prover.residency().iter().map(|(_, b)| b).sum();
        let evaluated: Vec<usize> = evaluations(&prover).iter().map(|s| s.partition).collect();
        match evaluation {
            ConstraintEvaluation::Device => {
                assert_eq!(resident, key.device_bytes() + resident_matrices_bytes(&matrices), "matrices not resident");
                assert_eq!(evaluated.len(), 4, "evaluations on the device: {evaluated:?}");
                assert!(!evaluated.contains(&0), "the recording partition was evaluated on the device");
                let (first, later) = (staged_bytes(&prover, 0), staged_bytes(&prover, evaluated[0]));
                assert!(later * 2 < first, "a device-evaluated partition staged {later} bytes, the first {first}");
            }
            ConstraintEvaluation::Host => {
                assert_eq!(resident, key.device_bytes(), "matrices on the device with the host evaluating");
                assert!(evaluated.is_empty(), "device evaluations with the host evaluating: {evaluated:?}");
            }
        }
        proofs.push(outcomes.into_iter().map(|o| bytes(&o.unwrap())).collect::<Vec<_>>());
        assert_nothing_held(&prover, After::Shutdown);
    }
    assert_eq!(proofs[0], proofs[1], "the device's and the host's evaluations made different proofs");
}

/// Without verification nothing would catch a witness that does not satisfy the matrices, so
/// the host evaluates (and checks) even when the device is asked to.
#[test]
fn without_verification_the_host_evaluates() {
    let spec = common::spec(7, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let prover = prover(ConstraintEvaluation::Device, false, None);
    let circuits: Vec<_> = (0..3).map(|i| spec.circuit(i)).collect();
    let outcomes = wait_each_within(
        &prover.submit_circuits(CircuitRequest::new(key.clone(), circuits, &mut fresh_rng())).unwrap(),
        Duration::from_secs(120),
    );
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert!(evaluations(&prover).is_empty(), "the device evaluated without verification");
    assert_nothing_held(&prover, After::Shutdown);
}

/// A key that must stream through chunk buffers (whole or in part) leaves no room for
/// matrices: its partitions' assignments are evaluated on the host, and prove.
#[test]
fn a_streamed_key_has_its_assignments_evaluated_on_the_host() {
    let spec = common::spec(8, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 4);
    let plan = {
        let device = snarkpipe::backend::cpu::CpuDevice::new(0, 0);
        partition_plan_bytes(&device, &witnesses[0].shape(), witnesses[0].domain().unwrap().log_n())
    };
    assert!(plan + key_chunk_bytes(100) < plan + key.device_bytes(), "the key would fit: the test proves nothing");
    let prover = prover(ConstraintEvaluation::Device, true, Some(plan + key_chunk_bytes(100)));
    let circuits: Vec<_> = (0..4).map(|i| spec.circuit(i)).collect();
    let request = CircuitRequest::new(key.clone(), circuits, &mut fresh_rng());
    let outcomes = wait_each_within(&prover.submit_circuits(request).unwrap(), Duration::from_secs(120));
    let pvk = key.prepared_vk();
    for (i, outcome) in outcomes.iter().enumerate() {
        let proof = outcome.as_ref().unwrap_or_else(|e| panic!("partition {i}: {e}"));
        assert!(groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap(), "partition {i}");
    }
    // The key may stay partly resident; what matters is that some of it streamed.
    let held = &prover.device_status()[0].keys;
    assert!(held.iter().all(|k| !k.streamed.is_empty()), "the key was wholly resident, so nothing streamed: {held:?}");
    assert!(key.recording.matrices().is_some());
    assert!(evaluations(&prover).is_empty(), "a streamed key's partition was evaluated on the device");
    assert_nothing_held(&prover, After::Shutdown);
}

/// y = x·x when x is odd and y = x + x when it is even: the same numbers of variables and
/// constraints, wired differently by the witness.
struct Branching(u64);

impl Circuit<Scalar> for Branching {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x = Scalar::from(self.0);
        let odd = self.0 % 2 == 1;
        let xv = cs.alloc(|| "x", || Ok(x))?;
        let yv = cs.alloc_input(|| "y", || Ok(if odd { x * x } else { x + x }))?;
        if odd {
            cs.enforce(|| "x * x = y", |lc| lc + xv, |lc| lc + xv, |lc| lc + yv);
        } else {
            cs.enforce(|| "(x + x) * 1 = y", |lc| lc + xv + xv, |lc| lc + CS::one(), |lc| lc + yv);
        }
        // Padding, so that the domain is not the smallest.
        for i in 0..5u64 {
            let p = cs.alloc(|| "p", || Ok(Scalar::from(i)))?;
            cs.enforce(|| "p * 1 = p", |lc| lc + p, |lc| lc + CS::one(), |lc| lc + p);
        }
        Ok(())
    }
}

/// The negative twin: a circuit whose structure follows its witness. Partition 0 records the
/// odd shape; partition 1 (even) does not satisfy those matrices. Evaluated on the device, its
/// proof fails verification, and the partition fails with `MatricesMismatch` as its own error:
/// not retried, not counted against the device. Evaluated on the host, the same error comes
/// from the synthesis's check. Either way partition 2 (odd again) is synthesized in full and
/// proves.
#[test]
fn a_structure_that_follows_the_witness_fails_its_own_partition_not_the_device() {
    let mut rng = fresh_rng();
    for evaluation in [ConstraintEvaluation::Device, ConstraintEvaluation::Host] {
        let params =
            bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(Branching(3), &mut rng).unwrap();
        let key = ProvingKey::from_parameters(&params);
        let prover = prover(evaluation, true, None);
        let circuits = vec![Branching(3), Branching(4), Branching(5)];
        let handle = prover.submit_circuits(CircuitRequest::new(key.clone(), circuits, &mut rng)).unwrap();
        let outcomes = wait_each_within(&handle, Duration::from_secs(60));
        assert!(outcomes[0].is_ok(), "{evaluation:?}: partition 0: {:?}", outcomes[0]);
        let err = outcomes[1].as_ref().err().unwrap_or_else(|| panic!("{evaluation:?}: partition 1 proved"));
        assert!(
            matches!(err.root_cause(), Error::MatricesMismatch { what: "satisfaction", .. }),
            "{evaluation:?}: partition 1: {err}"
        );
        assert_eq!(handle.attempts()[1], 0, "{evaluation:?}: the circuit's own failure was retried");
        assert!(
            outcomes[2].is_ok(),
            "{evaluation:?}: partition 2 after the recording became unusable: {:?}",
            outcomes[2]
        );
        if evaluation == ConstraintEvaluation::Device {
            assert_eq!(evaluations(&prover).len(), 1, "partition 1 was not evaluated on the device");
        }
        assert_nothing_held(&prover, After::Shutdown);
    }
}

/// Proofs through the stage, device-evaluated, equal the direct submission of the same
/// witnesses with the same r and s (a second spec and more partitions than in flight).
#[test]
fn device_evaluated_proofs_equal_direct_submissions() {
    let spec = common::spec(9, 3, fresh_seed());
    let key = spec.proving_key().unwrap();
    let witnesses = partitions(&spec, 6);
    let prover = Prover::new(ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: 2,
        in_flight: 3,
        memory_reserve_bytes: 0,
        ..ProverConfig::default()
    })
    .unwrap();
    let request = CircuitRequest::new(key.clone(), (0..6).map(|i| spec.circuit(i)).collect(), &mut fresh_rng());
    let (r, s) = (request.r.clone(), request.s.clone());
    let through_stage = wait_each_within(&prover.submit_circuits(request).unwrap(), Duration::from_secs(120));
    let direct =
        ProofRequest { key: key.clone(), partitions: witnesses, r, s, priority: Priority::Normal, devices: None };
    let direct = wait_each_within(&prover.submit(direct).unwrap(), Duration::from_secs(120));
    for (i, (a, b)) in through_stage.iter().zip(&direct).enumerate() {
        let (a, b) = (a.as_ref().unwrap(), b.as_ref().unwrap());
        assert_eq!(bytes(a), bytes(b), "partition {i}");
    }
    assert!(!evaluations(&prover).is_empty(), "no partition was evaluated on the device");
    assert_nothing_held(&prover, After::Shutdown);
}
