//! Partitions submitted as circuits, synthesized witness-only from their key's recorded
//! constraint matrices, and evaluated on the device: the key's matrices become resident beside
//! it once, each later partition stages its assignment only, and its proof is byte for byte
//! the proof of its whole witness. A circuit whose structure follows its witness is caught as
//! its own failure, not the device's. On the CPU backend, whose evaluation is the reference
//! the CUDA kernel is tested against (tests/sparse_eval.rs).
//!
//! Every partition's a, b and c are checked on the device to satisfy a·b = c before its
//! quotient (issue 38): a witness with one value changed fails with `UnsatisfiedWitness` naming
//! the first failing constraint, as the input's fault (not retried, the device unmarked, the
//! key's witness-only path left on); the check behind the seam is compared with its reference
//! on the CPU model and, where there is one, on a GPU.

use std::time::Duration;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::cpu::first_unsatisfied;
use snarkpipe::backend::{
    judge_satisfaction, open_devices, BackendKind, CpuModel, Device, DeviceBuffer, DeviceSelection, FailureSlot,
    HostConstraints, WorkTag,
};
use snarkpipe::circuit::{witness_assignment, ConstraintEvaluation, ConstraintMatrices};
use snarkpipe::groth16;
use snarkpipe::params::ProvingKey;
use snarkpipe::plan::{key_chunk_bytes, partition_plan_bytes, resident_matrices_bytes, scalar_bytes};
use snarkpipe::prover::{CircuitRequest, Priority, ProofRequest, Prover, ProverConfig};
use snarkpipe::timeline::{Span, TimelineRecorder};
use snarkpipe::{Error, Scalar, Stage};

#[cfg(feature = "filecoin")]
mod filecoin;

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

/// How many satisfaction checks the device ran (one per partition that reached it).
fn checks(prover: &Prover) -> usize {
    let spans = prover.timeline().snapshot().spans;
    spans
        .iter()
        .filter(|s| s.track.is_device() && s.args.get("what").and_then(|w| w.as_str()) == Some("satisfaction check"))
        .count()
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
        assert_eq!(checks(&prover), 5, "{evaluation:?}: every satisfied witness is checked on the device, and passes");
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
/// odd shape; partition 1 (even) does not satisfy those matrices. Evaluated on the device, the
/// device's check of its a, b and c finds constraint 0 failing, and the partition fails with
/// `UnsatisfiedWitness` as its own error: not retried, not counted against the device; the
/// device cannot tell this from a wrong value, so the recording stays (and partition 2, odd
/// again, is evaluated from it). Evaluated on the host, the synthesis's check fails it with
/// `MatricesMismatch`, and partition 2 is synthesized in full. Either way partition 2 proves.
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
        match evaluation {
            ConstraintEvaluation::Device => {
                assert!(
                    matches!(err.root_cause(), Error::UnsatisfiedWitness { constraint: 0 }),
                    "{evaluation:?}: partition 1: {err}"
                );
                assert!(!key.recording.is_unusable(), "the device's check switched the recording off");
                assert_eq!(evaluations(&prover).len(), 2, "partitions 1 and 2 were not evaluated on the device");
            }
            ConstraintEvaluation::Host => {
                assert!(
                    matches!(err.root_cause(), Error::MatricesMismatch { what: "satisfaction", .. }),
                    "{evaluation:?}: partition 1: {err}"
                );
                assert!(key.recording.is_unusable());
            }
        }
        assert_eq!(handle.attempts()[1], 0, "{evaluation:?}: the circuit's own failure was retried");
        assert!(outcomes[2].is_ok(), "{evaluation:?}: partition 2: {:?}", outcomes[2]);
        assert!(!prover.device_status()[0].quarantined, "{evaluation:?}: the circuit's failure quarantined the device");
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
    assert_eq!(checks(&prover), 12, "a witness went unchecked");
    assert_nothing_held(&prover, After::Shutdown);
}

/// x_{i+1} = x_i·x_i + i for `steps` steps from a private x_0, and y = x_steps public. With
/// `wrong: Some(k)` (1 ≤ k ≤ steps) aux variable k (x_k) is one more than its rule and the
/// chain goes on from it: the wiring is the same whatever the values, as a Filecoin circuit's
/// is whatever its vanilla proof says, and constraint k − 1 is the only one that fails.
#[derive(Clone)]
struct Chain {
    x0: Scalar,
    steps: usize,
    wrong: Option<usize>,
}

impl Chain {
    fn good(x0: Scalar) -> Chain {
        Chain { x0, steps: CHAIN_STEPS, wrong: None }
    }
}

const CHAIN_STEPS: usize = 60;

impl Circuit<Scalar> for Chain {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut x = self.x0;
        let mut xv = cs.alloc(|| "x0", || Ok(x))?;
        for i in 0..self.steps {
            let step = Scalar::from(i as u64);
            let value = if self.wrong == Some(i + 1) { x * x + step + Scalar::ONE } else { x * x + step };
            let next = cs.alloc(|| "x", || Ok(value))?;
            cs.enforce(|| "x·x = next − i", |lc| lc + xv, |lc| lc + xv, |lc| lc + next - (step, CS::one()));
            (x, xv) = (value, next);
        }
        let y = cs.alloc_input(|| "y", || Ok(x))?;
        cs.enforce(|| "x·1 = y", |lc| lc + xv, |lc| lc + CS::one(), |lc| lc + y);
        Ok(())
    }
}

/// A key for [`Chain`]'s shape, from a setup (so that proofs verify).
fn chain_key(rng: &mut ChaCha20Rng) -> std::sync::Arc<ProvingKey> {
    let params =
        bellperson::groth16::generate_random_parameters::<blstrs::Bls12, _, _>(Chain::good(Scalar::ONE), rng).unwrap();
    ProvingKey::from_parameters(&params)
}

/// A satisfied [`Chain`] witness with aux value `k` then changed by one: constraints k − 1
/// (which defines x_k) and k (which squares it) fail, k − 1 first.
fn chain_witness_with_one_value_changed(x0: Scalar, k: usize) -> std::sync::Arc<snarkpipe::circuit::Witness> {
    let matrices = ConstraintMatrices::record(Chain::good(x0)).unwrap();
    let (inputs, mut aux) = witness_assignment(Chain::good(x0)).unwrap();
    aux[k] += Scalar::ONE;
    std::sync::Arc::new(snarkpipe::circuit::Witness::from_matrices(&matrices, inputs, aux).unwrap())
}

/// A witness that does not satisfy its constraints (one aux value changed, as a wrong vanilla
/// proof makes) fails its partition with a typed error naming the first failing constraint,
/// found on the device before the NTTs: not retried, no mark against the device (three in a
/// row would quarantine it if they counted), and a good request after it proves and verifies.
#[test]
fn a_witness_with_one_value_changed_fails_as_the_input_s_fault_not_the_device_s() {
    let mut rng = fresh_rng();
    let key = chain_key(&mut rng);
    let prover = prover(ConstraintEvaluation::Device, true, None);
    for round in 0..3 {
        let k = rng.gen_range(1..=CHAIN_STEPS);
        let bad = chain_witness_with_one_value_changed(Scalar::random(&mut rng), k);
        assert_eq!(first_unsatisfied(&bad.a, &bad.b, &bad.c), Some(k - 1), "the reference disagrees");
        let request = ProofRequest {
            key: key.clone(),
            partitions: vec![bad],
            r: vec![Scalar::random(&mut rng)],
            s: vec![Scalar::random(&mut rng)],
            priority: Priority::Normal,
            devices: None,
        };
        let handle = prover.submit(request).unwrap();
        let outcome = wait_each_within(&handle, Duration::from_secs(60)).remove(0);
        let err =
            outcome.err().unwrap_or_else(|| panic!("round {round}: a witness that fails constraint {} proved", k - 1));
        let status = &prover.device_status()[0];
        let seen =
            format!("round {round}: {err} (attempts {:?}, quarantined {})", handle.attempts(), status.quarantined);
        assert!(
            matches!(err.root_cause(), Error::UnsatisfiedWitness { constraint } if *constraint == k - 1),
            "{seen}: not the input's fault at constraint {}",
            k - 1
        );
        assert!(err.to_string().contains(&format!("constraint {}", k - 1)), "{seen}");
        assert_eq!(handle.attempts(), [0], "{seen}: the input's fault was retried");
        assert!(!status.quarantined, "{seen}: the input's fault was counted against the device");
    }
    let good = chain_key_witness(Scalar::random(&mut rng));
    let request = ProofRequest {
        key: key.clone(),
        partitions: vec![good.clone()],
        r: vec![Scalar::random(&mut rng)],
        s: vec![Scalar::random(&mut rng)],
        priority: Priority::Normal,
        devices: None,
    };
    let proof = prover.submit(request).unwrap().wait().unwrap().remove(0);
    assert!(groth16::verify(&key.prepared_vk(), &proof, good.public_inputs()).unwrap());
    assert_nothing_held(&prover, After::Shutdown);
}

fn chain_key_witness(x0: Scalar) -> std::sync::Arc<snarkpipe::circuit::Witness> {
    std::sync::Arc::new(
        snarkpipe::circuit::Witness::synthesize(Chain::good(x0), snarkpipe::circuit::SatisfactionCheck::On).unwrap(),
    )
}

/// The same for a circuit synthesized witness-only and evaluated on the device from its key's
/// recorded matrices (how a Filecoin partition proves once its key's matrices are known): a
/// circuit that allocates one wrong value fails with the constraint named, not retried, and
/// the key's witness-only path stays on (a wrong input says nothing about the recording), so
/// the next partitions are still evaluated on the device and prove.
#[test]
fn a_wrong_value_from_witness_only_synthesis_leaves_the_fast_path_on() {
    let mut rng = fresh_rng();
    let key = chain_key(&mut rng);
    let prover = prover(ConstraintEvaluation::Device, true, None);
    let k = rng.gen_range(1..=CHAIN_STEPS);
    let mut circuits: Vec<Chain> = (0..4).map(|_| Chain::good(Scalar::random(&mut rng))).collect();
    circuits[1].wrong = Some(k);
    let handle = prover.submit_circuits(CircuitRequest::new(key.clone(), circuits.clone(), &mut rng)).unwrap();
    let outcomes = wait_each_within(&handle, Duration::from_secs(60));
    let err = outcomes[1].as_ref().err().unwrap_or_else(|| panic!("a circuit with a wrong value at aux {k} proved"));
    let seen = format!(
        "{err} (attempts {:?}, recording unusable {}, device evaluations {})",
        handle.attempts(),
        key.recording.is_unusable(),
        evaluations(&prover).len()
    );
    assert!(
        matches!(err.root_cause(), Error::UnsatisfiedWitness { constraint } if *constraint == k - 1),
        "{seen}: not the input's fault at constraint {}",
        k - 1
    );
    assert_eq!(handle.attempts()[1], 0, "{seen}: the input's fault was retried");
    assert!(!key.recording.is_unusable(), "{seen}: a wrong value switched the key's witness-only path off");
    let pvk = key.prepared_vk();
    for i in [0, 2, 3] {
        let proof = outcomes[i].as_ref().unwrap_or_else(|e| panic!("partition {i}: {e}"));
        let inputs = chain_key_witness(circuits[i].x0).public_inputs().to_vec();
        assert!(groth16::verify(&pvk, proof, &inputs).unwrap(), "partition {i}");
    }
    let evaluated: Vec<usize> = evaluations(&prover).iter().map(|s| s.partition).collect();
    assert_eq!(evaluated.len(), 3, "partitions 1, 2 and 3 were not all evaluated on the device: {evaluated:?}");
    assert!(!prover.device_status()[0].quarantined);
    assert_eq!(checks(&prover), 4, "every partition's witness is checked on the device");
    assert_nothing_held(&prover, After::Shutdown);
}

/// `DeviceStream::check_satisfied` behind the seam, on the CPU model and (when there is one) on
/// GPU 0, against the reference `first_unsatisfied` on fresh random evaluations: none changed
/// passes; one value changed fails at its index, two at the first; the host's values that
/// contradict the device make it the device's fault; shared or short buffers are typed errors
/// before anything is queued.
#[test]
fn the_device_check_names_the_first_failing_constraint_as_the_reference_does() {
    check_satisfaction_behind_the_seam(cpu_model());
    if common::have_gpu() {
        let model = CpuModel { devices: 1, device_bytes: 0 };
        check_satisfaction_behind_the_seam(
            open_devices(BackendKind::Cuda, &DeviceSelection::Only(vec![0]), model).unwrap().1.remove(0),
        );
    }
}

fn cpu_model() -> std::sync::Arc<dyn Device> {
    let model = CpuModel { devices: 1, device_bytes: 1 << 30 };
    open_devices(BackendKind::Cpu, &DeviceSelection::All, model).unwrap().1.remove(0)
}

/// What the check on `device` says of evaluations `[a, b, c]` (`len` of them checked, in
/// buffers two longer), the host judging by `host`.
fn device_check(
    device: &dyn Device,
    [a, b, c]: &[Vec<Scalar>; 3],
    len: usize,
    host: std::sync::Arc<dyn HostConstraints>,
) -> snarkpipe::Result<()> {
    let stream = device.new_stream("check", TimelineRecorder::new()).unwrap();
    let failure = FailureSlot::new();
    let tag = WorkTag::new(0, Stage::Ntt, &failure);
    let buffers: Vec<DeviceBuffer> = [a, b, c]
        .into_iter()
        .map(|values| {
            let buffer = device.allocate(scalar_bytes(len + 2)).unwrap();
            stream.copy_scalars_to_device(std::sync::Arc::new(values.clone()), &buffer, &tag).unwrap();
            buffer
        })
        .collect();
    stream.check_satisfied(&buffers[0], &buffers[1], &buffers[2], len, host, &tag)?;
    stream.record_event()?.wait()?;
    failure.check()
}

fn check_satisfaction_behind_the_seam(device: std::sync::Arc<dyn Device>) {
    let name = device.info().name;
    let mut rng = fresh_rng();
    for len in [1usize, 2, 255, 257, 4099] {
        let (a, b): (Vec<Scalar>, Vec<Scalar>) =
            (0..len).map(|_| (Scalar::random(&mut rng), Scalar::random(&mut rng))).unzip();
        let c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
        let satisfied = [a, b, c];
        // The host judging by the same values the device was given.
        let by = |values: &[Vec<Scalar>; 3]| -> std::sync::Arc<dyn HostConstraints> {
            let v = values.clone();
            std::sync::Arc::new(move |i: usize| v[0][i] * v[1][i] == v[2][i])
        };
        assert_eq!(first_unsatisfied(&satisfied[0], &satisfied[1], &satisfied[2]), None);
        device_check(&*device, &satisfied, len, by(&satisfied)).unwrap_or_else(|e| panic!("{name}: {len}: {e}"));
        // One value changed, in a, b or c; then a second one after it: the first is named.
        let j = rng.gen_range(0..len);
        let mut changed = satisfied.clone();
        changed[rng.gen_range(0..3)][j] += Scalar::ONE;
        if j + 1 < len {
            let later = rng.gen_range(j + 1..len);
            changed[rng.gen_range(0..3)][later] += Scalar::ONE;
        }
        let reference = first_unsatisfied(&changed[0], &changed[1], &changed[2]);
        assert_eq!(reference, Some(j));
        let err = device_check(&*device, &changed, len, by(&changed)).unwrap_err();
        assert!(
            matches!(err.root_cause(), Error::UnsatisfiedWitness { constraint } if *constraint == j),
            "{name}: {len} with constraint {j} changed: {err}"
        );
        // The host's values satisfy what the device says fails: the device's fault, not the input's.
        let err = device_check(&*device, &changed, len, by(&satisfied)).unwrap_err();
        assert!(
            matches!(err.root_cause(), Error::Device { operation: "check the witness", .. }),
            "{name}: {len}: a contradicted device blamed the input: {err}"
        );
        // A value changed past the checked length is not looked at.
        let mut past = satisfied.clone();
        past[2].push(Scalar::ONE);
        past[0].push(Scalar::ONE);
        past[1].push(Scalar::ONE);
        device_check(&*device, &past, len, by(&past)).unwrap_or_else(|e| panic!("{name}: {len}: past the end: {e}"));
    }
    // Shared and short buffers are refused before anything is queued.
    let stream = device.new_stream("check", TimelineRecorder::new()).unwrap();
    let tag = WorkTag::new(0, Stage::Ntt, &FailureSlot::new());
    let host: std::sync::Arc<dyn HostConstraints> = std::sync::Arc::new(|_: usize| false);
    let (x, y) = (device.allocate(scalar_bytes(8)).unwrap(), device.allocate(scalar_bytes(8)).unwrap());
    let shared = stream.check_satisfied(&x, &x, &y, 8, host.clone(), &tag).unwrap_err();
    assert!(matches!(shared, Error::Device { operation: "check the witness", .. }), "{name}: {shared}");
    let z = device.allocate(scalar_bytes(8)).unwrap();
    let short = stream.check_satisfied(&x, &y, &z, 9, host, &tag).unwrap_err();
    assert!(matches!(short, Error::Device { operation: "check the witness", .. }), "{name}: {short}");
}

/// How a device's answer is judged, alone: nothing failing passes; a failing constraint the
/// host agrees with is the input's; one past what the device was asked to check is the
/// device's (as one the host's values satisfy is, in the seam test above).
#[test]
fn a_device_answer_past_the_constraints_checked_is_the_device_s_fault() {
    let fails_everywhere = |_: usize| false;
    assert!(judge_satisfaction(3, None, 10, &fails_everywhere).is_ok());
    let err = judge_satisfaction(3, Some(9), 10, &fails_everywhere).unwrap_err();
    assert!(matches!(err, Error::UnsatisfiedWitness { constraint: 9 }), "{err}");
    let err = judge_satisfaction(3, Some(10), 10, &fails_everywhere).unwrap_err();
    assert!(matches!(err, Error::Device { device: 3, operation: "check the witness", .. }), "{err}");
}

/// The same through the Filecoin engine, on a real 2 KiB Winning PoSt: a vanilla proof with
/// one byte of a challenged leaf changed makes a circuit whose witness fails one constraint
/// (the path from the changed leaf no longer reaches the committed root). It fails with
/// `UnsatisfiedWitness`, not retried and not counted against the device, the key's
/// witness-only path stays on, and the vanilla proof as it came proves on the same prover
/// after it, and filecoin-proofs verifies it.
#[cfg(feature = "filecoin")]
#[test]
fn a_vanilla_proof_with_one_value_changed_is_the_input_s_fault() {
    use snarkpipe::filecoin::{FilecoinProver, ProofKind, VanillaRequest};
    let path = filecoin::job(ProofKind::WinningPost, 1);
    let mut json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let proofs = &mut json["vanilla_proofs"][0]["vanilla_proof"]["sectors"][0]["inclusion_proofs"];
    let challenged = fresh_rng().gen_range(0..proofs.as_array().unwrap().len());
    let byte = &mut proofs[challenged]["data"]["Single"]["leaf"][0];
    *byte = (byte.as_u64().unwrap() ^ 1).into();
    let dir = tempfile::tempdir().unwrap();
    let changed = dir.path().join("winning-post-changed-leaf.json");
    std::fs::write(&changed, json.to_string()).unwrap();

    let prover = filecoin::prover();
    let engine = FilecoinProver::with_params_dir(prover, &filecoin::params_dir()).unwrap();
    let err = engine.prove_job(&VanillaRequest::read(&changed).unwrap()).unwrap_err();
    let status = &prover.device_status()[0];
    let seen = format!("leaf {challenged} changed: {err} (quarantined {})", status.quarantined);
    assert!(matches!(err.root_cause(), Error::UnsatisfiedWitness { .. }), "{seen}");
    assert!(!status.quarantined, "{seen}: the input's fault was counted against the device");
    let good = VanillaRequest::read(&path).unwrap();
    let proven = engine.prove_job(&good).unwrap();
    assert!(filecoin::verify_with_filecoin_proofs(&good, &proven.bytes, false));
    let key = proven.key.expect("the engine's own prover proved it");
    assert!(!key.recording.is_unusable(), "{seen}: a wrong vanilla proof switched the key's witness-only path off");
}
