//! A proptest suite over request validation (issue 5): random partition counts, r/s lengths,
//! truncated witness vectors and key/witness pairings drawn from three small synthetic
//! circuits. `Prover::submit` never panics; it returns a typed error exactly when the request
//! is malformed; and when it accepts, every proof equals the reference's and verifies.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use blstrs::Scalar;
use ff::Field;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use snarkpipe::backend::BackendKind;
use snarkpipe::circuit::Witness;
use snarkpipe::groth16;
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{Priority, ProofRequest, Prover, ProverConfig};
use snarkpipe::synthetic::SyntheticSpec;
use snarkpipe::Error;

mod common;
use common::{assert_nothing_held, bytes, fresh_seed, spec, wait_each_within, After};

/// (log_n, public inputs) of the three circuits: two share a domain, two share their inputs.
const CIRCUITS: [(u32, usize); 3] = [(5, 2), (6, 4), (6, 2)];
const WITNESSES_PER_CIRCUIT: usize = 3;

struct Fixture {
    keys: Vec<Arc<ProvingKey>>,
    witnesses: Vec<Vec<Arc<Witness>>>,
}

/// One prover for every case of a property (each property has its own, so that the leak
/// checks of one never see the other's work in flight).
fn prover(slot: &'static OnceLock<Prover>) -> &'static Prover {
    slot.get_or_init(|| {
        Prover::new(ProverConfig {
            backend: BackendKind::Cpu,
            workers_per_device: 2,
            in_flight: 4,
            memory_reserve_bytes: 0,
            ..ProverConfig::default()
        })
        .unwrap()
    })
}

/// Keys and witnesses made once, with a fresh, printed seed.
fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let seed = fresh_seed();
        let specs: Vec<SyntheticSpec> = CIRCUITS
            .iter()
            .enumerate()
            .map(|(i, &(log_n, num_inputs))| spec(log_n, num_inputs, seed.wrapping_add(i as u64)))
            .collect();
        Fixture {
            keys: specs.iter().map(|s| s.proving_key().unwrap()).collect(),
            witnesses: specs
                .iter()
                .map(|s| (0..WITNESSES_PER_CIRCUIT).map(|i| Arc::new(s.witness(i).unwrap())).collect())
                .collect(),
        }
    })
}

/// How a partition's witness is damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Damage {
    None,
    /// Drop this many aux values.
    AuxShort(usize),
    /// Drop this many public inputs (ONE is never dropped).
    InputsShort(usize),
    /// Cut a, b and c to below half the domain: the domain shrinks.
    AbcHalved,
    /// Drop this many values from a alone: a, b and c no longer agree.
    OnlyAShort(usize),
    /// Drop this many values from c alone.
    OnlyCShort(usize),
}

impl Damage {
    fn apply(self, witness: &Witness) -> Witness {
        let mut w = witness.clone();
        let cut = |v: &mut Vec<Scalar>, k: usize| v.truncate(v.len().saturating_sub(k));
        match self {
            Damage::None => {}
            Damage::AuxShort(k) => cut(&mut w.aux_assignment, k),
            Damage::InputsShort(k) => {
                let keep_one = k.min(w.input_assignment.len() - 1);
                cut(&mut w.input_assignment, keep_one)
            }
            Damage::AbcHalved => {
                let half = w.a.len().next_power_of_two() / 2;
                w.a.truncate(half);
                w.b.truncate(half);
                w.c.truncate(half);
            }
            Damage::OnlyAShort(k) => cut(&mut w.a, k),
            Damage::OnlyCShort(k) => cut(&mut w.c, k),
        }
        w
    }
}

/// One partition: which circuit's witness, which of its witnesses, and the damage done.
#[derive(Debug, Clone, Copy)]
struct PartitionCase {
    circuit: usize,
    witness: usize,
    damage: Damage,
}

#[derive(Debug, Clone)]
struct RequestCase {
    key: usize,
    partitions: Vec<PartitionCase>,
    /// Added to the partition count for the lengths of r and s (clamped at 0).
    r_delta: i32,
    s_delta: i32,
    seed: u64,
}

/// Damage that changes the witness's shape (sizes the key is checked against).
fn shape_damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        9 => Just(Damage::None),
        1 => (1usize..4).prop_map(Damage::AuxShort),
        1 => (1usize..3).prop_map(Damage::InputsShort),
        1 => Just(Damage::AbcHalved),
    ]
}

/// Damage that leaves a, b and c of different lengths.
fn ragged_damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        6 => Just(Damage::None),
        1 => (1usize..4).prop_map(Damage::OnlyAShort),
        1 => (1usize..4).prop_map(Damage::OnlyCShort),
    ]
}

fn request_case(damage: impl Strategy<Value = Damage>) -> impl Strategy<Value = RequestCase> {
    // Mostly the key's own circuit, so that well-formed requests are common.
    let partition = (0..CIRCUITS.len(), 0..WITNESSES_PER_CIRCUIT, damage, proptest::bool::weighted(0.85));
    let delta = prop_oneof![10 => Just(0i32), 1 => Just(-1i32), 1 => Just(1i32)];
    // 0 to 3 partitions, 0 less often: it has only one outcome.
    let partitions = (proptest::collection::vec(partition, 1..4), proptest::bool::weighted(0.12));
    (0..CIRCUITS.len(), partitions, delta.clone(), delta, any::<u64>()).prop_map(
        |(key, (partitions, empty), r_delta, s_delta, seed)| RequestCase {
            key,
            partitions: partitions
                .into_iter()
                .filter(|_| !empty)
                .map(|(circuit, witness, damage, own)| PartitionCase {
                    circuit: if own { key } else { circuit },
                    witness,
                    damage,
                })
                .collect(),
            r_delta,
            s_delta,
            seed,
        },
    )
}

/// Submits the case's request and checks the property; `Err` describes a violation.
fn check(prover: &Prover, case: &RequestCase) -> Result<(), TestCaseError> {
    let f = fixture();
    let n = case.partitions.len();
    let witnesses: Vec<Arc<Witness>> =
        case.partitions.iter().map(|p| Arc::new(p.damage.apply(&f.witnesses[p.circuit][p.witness]))).collect();
    let mut rng = ChaCha20Rng::seed_from_u64(case.seed);
    let len = |delta: i32| (n as i32 + delta).max(0) as usize;
    let r: Vec<Scalar> = (0..len(case.r_delta)).map(|_| Scalar::random(&mut rng)).collect();
    let s: Vec<Scalar> = (0..len(case.s_delta)).map(|_| Scalar::random(&mut rng)).collect();
    let key = &f.keys[case.key];
    let request = ProofRequest {
        key: key.clone(),
        partitions: witnesses.clone(),
        r: r.clone(),
        s: s.clone(),
        priority: Priority::Normal,
        devices: None,
    };
    let bad_witness = case.partitions.iter().any(|p| p.damage != Damage::None || p.circuit != case.key);
    match prover.submit(request) {
        Err(err) => {
            if n == 0 {
                prop_assert!(matches!(err, Error::EmptyRequest), "zero partitions: {err:?}");
            } else if r.len() != n || s.len() != n {
                prop_assert!(
                    matches!(err, Error::RandomnessLength { circuits, r: rl, s: sl } if circuits == n && rl == r.len() && sl == s.len()),
                    "r/s lengths {}/{} for {n}: {err:?}",
                    r.len(),
                    s.len()
                );
            } else {
                prop_assert!(bad_witness, "a well-formed request was refused: {err:?}");
                prop_assert!(
                    matches!(
                        err,
                        Error::ParamsMismatch { .. }
                            | Error::MalformedWitness(_)
                            | Error::EmptyCircuit
                            | Error::Synthesis(_)
                    ),
                    "an unexpected error type for a bad witness: {err:?}"
                );
            }
        }
        Ok(handle) => {
            // Wait first, so that a wrongly accepted request leaves nothing in flight.
            let outcomes = wait_each_within(&handle, Duration::from_secs(120));
            prop_assert!(
                n > 0 && r.len() == n && s.len() == n && !bad_witness,
                "a malformed request was accepted; its partitions ended as {:?}",
                outcomes.iter().map(|o| o.as_ref().map(|_| "a proof").map_err(|e| e.to_string())).collect::<Vec<_>>()
            );
            let pvk = key.prepared_vk();
            for (i, outcome) in outcomes.iter().enumerate() {
                let proof = outcome.as_ref().map_err(|e| TestCaseError::fail(format!("partition {i}: {e}")))?;
                let reference = groth16::prove(key, &witnesses[i], r[i], s[i]).unwrap();
                prop_assert_eq!(bytes(proof), bytes(&reference), "partition {} differs from the reference", i);
                prop_assert!(groth16::verify(&pvk, proof, witnesses[i].public_inputs()).unwrap());
                let mut wrong = witnesses[i].public_inputs().to_vec();
                wrong[0] += Scalar::ONE;
                prop_assert!(!groth16::verify(&pvk, proof, &wrong).unwrap(), "verifies for the wrong inputs");
            }
        }
    }
    // Nothing is left behind by any case.
    assert_nothing_held(prover, After::Requests);
    Ok(())
}

fn config() -> ProptestConfig {
    // No regression files: the cases are cheap to find again, and the tree stays clean.
    ProptestConfig { cases: 32, max_shrink_iters: 64, failure_persistence: None, ..ProptestConfig::default() }
}

proptest! {
    #![proptest_config(config())]

    /// Partition counts, r/s lengths, key/witness pairings and damage to the witness's shape.
    #[test]
    fn submit_refuses_exactly_the_malformed_requests(case in request_case(shape_damage())) {
        static PROVER: OnceLock<Prover> = OnceLock::new();
        check(prover(&PROVER), &case)?;
    }

    /// a, b and c of different lengths: malformed, whatever the key's shape says.
    #[test]
    fn submit_refuses_ragged_witnesses(case in request_case(ragged_damage())) {
        static PROVER: OnceLock<Prover> = OnceLock::new();
        check(prover(&PROVER), &case)?;
    }
}

#[test]
fn the_generator_makes_good_requests_and_each_kind_of_bad_one() {
    // The properties are only as strong as their cases: both branches, and requests whose only
    // fault is in a witness (the case validation must catch), must come up often in a run of 32 cases.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    fn census(strategy: impl Strategy<Value = RequestCase>) -> (usize, usize, usize) {
        let mut runner = TestRunner::default();
        let (mut good, mut bad_witness_only, mut other_bad) = (0, 0, 0);
        for _ in 0..320 {
            let case = strategy.new_tree(&mut runner).unwrap().current();
            let envelope_ok = !case.partitions.is_empty() && case.r_delta == 0 && case.s_delta == 0;
            let witnesses_ok = case.partitions.iter().all(|p| p.damage == Damage::None && p.circuit == case.key);
            match (envelope_ok, witnesses_ok) {
                (true, true) => good += 1,
                (true, false) => bad_witness_only += 1,
                _ => other_bad += 1,
            }
        }
        (good, bad_witness_only, other_bad)
    }
    for (name, counts) in
        [("shape", census(request_case(shape_damage()))), ("ragged", census(request_case(ragged_damage())))]
    {
        eprintln!("{name}: {counts:?} (good, bad witness only, other bad) of 320");
        // At least a fifth, a fifth and a tenth: some of each kind in almost every run of 32.
        let (good, bad_witness_only, other_bad) = counts;
        assert!(good >= 64 && bad_witness_only >= 64 && other_bad >= 32, "{name}: too few of a kind: {counts:?}");
    }
}
