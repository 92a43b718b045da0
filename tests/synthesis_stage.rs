//! The synthesis stage: partitions submitted as circuits are synthesized in the pipeline,
//! under the host-memory budget, while the partitions ahead of them prove. Their proofs are
//! those of the same witnesses submitted directly; a circuit that fails or panics fails its
//! own partition, and nothing is held afterwards. On the CPU backend.

use std::sync::Arc;
use std::time::Duration;

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::WitnessShape;
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{CircuitRequest, KeyFor, Priority, ProofRequest, Prover, ProverConfig};
use snarkpipe::synthetic::{SyntheticCircuit, SyntheticSpec};
use snarkpipe::{Error, Scalar, Stage};

mod common;
use common::{assert_nothing_held, bytes, fresh_rng, fresh_seed, partitions, wait_each_within, After};

fn cpu_prover(in_flight: usize, synthesis_host_bytes: Option<u64>) -> Prover {
    let mut config = ProverConfig {
        backend: BackendKind::Cpu,
        workers_per_device: 2,
        in_flight,
        memory_reserve_bytes: 0,
        retries: 2,
        ..ProverConfig::default()
    };
    if let Some(bytes) = synthesis_host_bytes {
        config.synthesis_host_bytes = bytes;
    }
    Prover::new(config).unwrap()
}

/// A synthetic circuit, or one that breaks in synthesis, or one that takes its time.
enum TestCircuit {
    Good(SyntheticCircuit),
    Panics,
    MissesAValue,
    Slow(SyntheticCircuit, Duration),
}

impl Circuit<Scalar> for TestCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        match self {
            TestCircuit::Good(circuit) => circuit.synthesize(cs),
            TestCircuit::Panics => panic!("this circuit breaks"),
            TestCircuit::MissesAValue => {
                cs.alloc(|| "x", || Err(SynthesisError::AssignmentMissing))?;
                Ok(())
            }
            TestCircuit::Slow(circuit, pause) => {
                std::thread::sleep(pause);
                circuit.synthesize(cs)
            }
        }
    }
}

fn setup(log_n: u32) -> (SyntheticSpec, Arc<ProvingKey>) {
    let spec = common::spec(log_n, 2, fresh_seed());
    let key = spec.proving_key().unwrap();
    (spec, key)
}

/// Circuits submitted as circuits prove byte for byte as their witnesses do, with the same r
/// and s; every partition has its synthesis span with the host bytes it was granted; the
/// negative twin: a proof does not verify with another partition's inputs.
#[test]
fn circuits_prove_as_their_witnesses_do() {
    let (spec, key) = setup(8);
    let witnesses = partitions(&spec, 6);
    let prover = cpu_prover(3, None);
    let circuits: Vec<_> = (0..6).map(|i| spec.circuit(i)).collect();
    let request = CircuitRequest::new(key.clone(), circuits, &mut fresh_rng());
    let (r, s) = (request.r.clone(), request.s.clone());
    let outcomes = wait_each_within(&prover.submit_circuits(request).unwrap(), Duration::from_secs(120));
    let direct = ProofRequest {
        key: key.clone(),
        partitions: witnesses.clone(),
        r,
        s,
        priority: Priority::Normal,
        devices: None,
    };
    let expected = prover.prove(direct).unwrap();
    let pvk = key.prepared_vk();
    for (i, (outcome, expected)) in outcomes.iter().zip(&expected).enumerate() {
        let proof = outcome.as_ref().unwrap_or_else(|err| panic!("partition {i}: {err}"));
        assert_eq!(bytes(proof), bytes(expected), "partition {i}: the synthesized circuit proved another proof");
        assert!(snarkpipe::groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap());
        let other = witnesses[(i + 1) % witnesses.len()].public_inputs();
        assert!(!snarkpipe::groth16::verify(&pvk, proof, other).unwrap(), "partition {i} verifies with other inputs");
    }
    let synthesized = prover
        .timeline()
        .snapshot()
        .spans
        .iter()
        .filter(|span| {
            span.stage == Stage::Synthesize && span.args.get("host_bytes").and_then(|b| b.as_u64()) > Some(0)
        })
        .count();
    assert_eq!(synthesized, 6, "one synthesis with its host grant per circuit, none for the witnesses");
    assert_nothing_held(&prover, After::Shutdown);
}

/// A circuit that panics and one that misses a value fail their own partitions with typed
/// errors, once (not retried: the same circuit fails again); the others prove.
#[test]
fn a_failing_circuit_fails_only_its_own_partition() {
    let (spec, key) = setup(6);
    let prover = cpu_prover(3, None);
    let circuits: Vec<_> = (0..6)
        .map(|i| match i {
            2 => TestCircuit::Panics,
            4 => TestCircuit::MissesAValue,
            _ => TestCircuit::Good(spec.circuit(i)),
        })
        .collect();
    let handle = prover.submit_circuits(CircuitRequest::new(key.clone(), circuits, &mut fresh_rng())).unwrap();
    let outcomes = wait_each_within(&handle, Duration::from_secs(120));
    for (i, outcome) in outcomes.iter().enumerate() {
        match (i, outcome) {
            (2, Err(err)) => assert!(
                matches!(err.root_cause(), Error::Synthesis(m) if m.contains("this circuit breaks")),
                "partition 2: {err}"
            ),
            (4, Err(err)) => assert!(matches!(err.root_cause(), Error::MissingAssignment), "partition 4: {err}"),
            (2 | 4, Ok(_)) => panic!("partition {i}'s broken circuit proved"),
            (_, Err(err)) => panic!("partition {i} failed with the others: {err}"),
            (_, Ok(_)) => {}
        }
    }
    assert_eq!(handle.attempts()[2], 0, "a circuit that panicked was synthesized again");
    assert_eq!(handle.attempts()[4], 0, "a circuit that failed was synthesized again");
    assert_nothing_held(&prover, After::Shutdown);
}

/// A witness larger than the host budget can never be synthesized: every partition fails at
/// once with a typed error naming the setting. Its twin with room is the test above.
#[test]
fn a_witness_larger_than_the_host_budget_fails_at_once() {
    let (spec, key) = setup(6);
    let prover = cpu_prover(2, Some(1024));
    let circuits: Vec<_> = (0..2).map(|i| spec.circuit(i)).collect();
    let outcomes = wait_each_within(
        &prover.submit_circuits(CircuitRequest::new(key, circuits, &mut fresh_rng())).unwrap(),
        Duration::from_secs(60),
    );
    for outcome in outcomes {
        let err = outcome.expect_err("a witness over the host budget was synthesized");
        assert!(matches!(err.root_cause(), Error::WitnessExceedsHostBudget { capacity_bytes: 1024, .. }), "{err}");
        assert!(err.to_string().contains("synthesis_host_bytes"), "{err}");
    }
    assert_nothing_held(&prover, After::Shutdown);
}

/// Synthesis overlaps proving: while a partition's device stages run, another partition is
/// being synthesized. Each circuit takes at least 150 ms to synthesize, so a pipeline that
/// synthesized everything before proving, or one partition after the other, shows no overlap.
#[test]
fn synthesis_overlaps_proving() {
    let (spec, key) = setup(10);
    let prover = cpu_prover(3, None);
    let pause = Duration::from_millis(150);
    let circuits: Vec<_> = (0..8).map(|i| TestCircuit::Slow(spec.circuit(i), pause)).collect();
    let outcomes = wait_each_within(
        &prover.submit_circuits(CircuitRequest::new(key, circuits, &mut fresh_rng())).unwrap(),
        Duration::from_secs(120),
    );
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    let spans = prover.timeline().snapshot().spans;
    let device = [Stage::Htod, Stage::Ntt, Stage::Msm];
    let overlapping = spans.iter().filter(|s| s.stage == Stage::Synthesize).any(|synthesis| {
        spans.iter().any(|work| {
            device.contains(&work.stage)
                && work.partition != synthesis.partition
                && work.start_s < synthesis.end_s
                && synthesis.start_s < work.end_s
        })
    });
    assert!(overlapping, "no partition was synthesized while another proved");
    assert_nothing_held(&prover, After::Shutdown);
}

/// Circuits that borrow (as bellperson's and filecoin-proofs' do) are synthesized by the
/// caller's threads when the stage asks, the first one first to find the key from its shape;
/// the proofs verify. A borrowed circuit that panics makes the call fail with its error, and
/// the call returns (no stage waits on the caller's pool after it is gone).
#[test]
fn borrowed_circuits_are_synthesized_by_the_callers_threads() {
    let (spec, key) = setup(8);
    let prover = cpu_prover(3, None);
    let witnesses = partitions(&spec, 5);
    let local = spec; // borrowed by the circuits below
    struct Borrowing<'a> {
        spec: &'a SyntheticSpec,
        index: usize,
        panics: bool,
    }
    impl Circuit<Scalar> for Borrowing<'_> {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            assert!(!self.panics, "borrowed circuit {} breaks", self.index);
            self.spec.circuit(self.index).synthesize(cs)
        }
    }
    let circuits = |broken: Option<usize>| -> Vec<Borrowing<'_>> {
        (0..5).map(|index| Borrowing { spec: &local, index, panics: Some(index) == broken }).collect()
    };
    let randomness = || -> (Vec<Scalar>, Vec<Scalar>) {
        use ff::Field;
        let mut rng = fresh_rng();
        ((0..5).map(|_| Scalar::random(&mut rng)).collect(), (0..5).map(|_| Scalar::random(&mut rng)).collect())
    };
    let found = key.clone();
    let find = KeyFor::Shape(Box::new(move |shape: &WitnessShape| {
        found.check_shape(shape)?;
        Ok(found)
    }));
    let (r, s) = randomness();
    let batch = prover.prove_circuits(find, circuits(None), r, s, Priority::High, 2).unwrap();
    let pvk = key.prepared_vk();
    for (i, proof) in batch.proofs.iter().enumerate() {
        assert!(snarkpipe::groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap(), "partition {i}");
    }
    assert!(batch.synthesis_time > Duration::ZERO);
    let (r, s) = randomness();
    match prover.prove_circuits(KeyFor::Known(key.clone()), circuits(Some(3)), r, s, Priority::Normal, 2) {
        Err(err) => assert!(matches!(err.root_cause(), Error::Synthesis(m) if m.contains("circuit 3 breaks")), "{err}"),
        Ok(_) => panic!("a batch with a broken circuit proved"),
    }
    assert_nothing_held(&prover, After::Shutdown);
}
