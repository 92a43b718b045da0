//! Constraint matrices recorded once per circuit shape (`snarkpipe::circuit::matrices`) against
//! full synthesis (`Witness::synthesize`, the reference): on synthetic circuits of several
//! sizes and on random circuits, each with a negative twin; and their file format, which must
//! refuse a foreign, truncated or damaged file with a typed error.

use std::io::Cursor;

use bellperson::{Circuit, ConstraintSystem, SynthesisError, Variable};
use ff::Field;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use snarkpipe::circuit::{
    witness_assignment, witness_assignment_sized, ConstraintMatrices, EvaluationCheck, SatisfactionCheck, Witness,
};
use snarkpipe::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};
use snarkpipe::{Error, Scalar};

mod common;
use common::{fresh_rng, fresh_seed};

/// Fails unless `ours` equals `reference` in every field, naming the first field that differs.
fn assert_same_witness(ours: &Witness, reference: &Witness, context: &str) {
    assert_eq!(ours.shape(), reference.shape(), "{context}: shape");
    assert_eq!(ours.input_assignment, reference.input_assignment, "{context}: inputs");
    assert_eq!(ours.aux_assignment, reference.aux_assignment, "{context}: aux");
    for (name, ours, reference) in
        [("a", &ours.a, &reference.a), ("b", &ours.b, &reference.b), ("c", &ours.c, &reference.c)]
    {
        let first = ours.iter().zip(reference).position(|(x, y)| x != y);
        assert_eq!(first, None, "{context}: the first constraint whose {name} differs");
    }
    assert_eq!(ours.a_aux_density, reference.a_aux_density, "{context}: A aux density");
    assert_eq!(ours.b_input_density, reference.b_input_density, "{context}: B input density");
    assert_eq!(ours.b_aux_density, reference.b_aux_density, "{context}: B aux density");
}

fn synthetic(log_n: u32, num_inputs: usize, seed: u64) -> SyntheticSpec {
    SyntheticSpec { log_n, num_inputs, profile: WitnessProfile::Random, keys: KeyKind::Random, seed }
}

#[test]
fn synthetic_circuits_match_full_synthesis() {
    let mut rng = fresh_rng();
    for (log_n, num_inputs) in [(2, 0), (3, 2), (6, 8), (10, 8), (12, 3)] {
        let spec = synthetic(log_n, num_inputs, rng.gen());
        // Recorded from one partition, used for others: the structure is the shape's.
        let matrices = ConstraintMatrices::record(spec.circuit(0)).unwrap();
        assert_eq!(matrices.num_constraints(), 1 << log_n);
        for index in [1, 2] {
            let context = format!("2^{log_n} with {num_inputs} inputs, partition {index}");
            let reference = Witness::synthesize(spec.circuit(index), SatisfactionCheck::On).unwrap();
            assert_eq!(matrices.shape(), reference.shape(), "{context}");
            for check in [EvaluationCheck::On, EvaluationCheck::Off] {
                let ours = Witness::synthesize_with(spec.circuit(index), &matrices, check).unwrap();
                assert_same_witness(&ours, &reference, &format!("{context}, check {check:?}"));
            }
            let (inputs, aux) = witness_assignment(spec.circuit(index)).unwrap();
            let ours = Witness::from_matrices(&matrices, inputs, aux).unwrap();
            assert_same_witness(&ours, &reference, &format!("{context}, from_matrices"));
        }
    }
}

#[test]
fn matrices_of_another_synthetic_shape_are_refused() {
    let seed = fresh_seed();
    let matrices = ConstraintMatrices::record(synthetic(8, 4, seed).circuit(0)).unwrap();
    // Two more inputs in the same domain: one pair fewer, two inputs more.
    let more_inputs = synthetic(8, 6, seed).circuit(0);
    match Witness::synthesize_with(more_inputs.clone(), &matrices, EvaluationCheck::On) {
        Err(Error::MatricesMismatch { what, index, .. }) => assert_eq!((what, index), ("num_inputs", 7)),
        other => panic!("expected MatricesMismatch, got {other:?}"),
    }
    // Unchecked, the lengths still catch it.
    let unchecked = Witness::synthesize_with(more_inputs, &matrices, EvaluationCheck::Off);
    assert!(matches!(unchecked, Err(Error::MalformedWitness(_))), "{unchecked:?}");
    // A larger domain.
    match Witness::synthesize_with(synthetic(9, 4, seed).circuit(0), &matrices, EvaluationCheck::On) {
        Err(Error::MatricesMismatch { what, index, .. }) => assert_eq!((what, index), ("num_constraints", 512)),
        other => panic!("expected MatricesMismatch, got {other:?}"),
    }
}

#[test]
fn an_assignment_of_the_wrong_length_is_refused() {
    let spec = synthetic(6, 2, fresh_seed());
    let matrices = ConstraintMatrices::record(spec.circuit(0)).unwrap();
    let (inputs, aux) = witness_assignment(spec.circuit(0)).unwrap();
    assert!(matrices.evaluate(&inputs, &aux).is_ok());
    let recorded = aux.len();
    for bad in [recorded - 1, recorded + 1, 0] {
        let mut wrong = aux.clone();
        wrong.resize(bad, Scalar::ONE);
        match matrices.evaluate(&inputs, &wrong) {
            Err(Error::MalformedWitness(message)) => {
                assert!(
                    message.contains(&format!("{bad} aux")) && message.contains(&format!("{recorded} aux")),
                    "{message}"
                )
            }
            other => panic!("{bad} aux values for {recorded}: expected MalformedWitness, got {other:?}"),
        }
    }
    let extra_input = [inputs.clone(), vec![Scalar::ONE]].concat();
    assert!(matches!(Witness::from_matrices(&matrices, extra_input, aux), Err(Error::MalformedWitness(_))));
}

/// A coefficient as a random circuit writes it: zero, the common small ones, or any.
#[derive(Clone, Debug)]
enum Coeff {
    Zero,
    One,
    MinusOne,
    PowerOfTwo(u32),
    Any(u64),
}

impl Coeff {
    fn scalar(&self) -> Scalar {
        match *self {
            Coeff::Zero => Scalar::ZERO,
            Coeff::One => Scalar::ONE,
            Coeff::MinusOne => -Scalar::ONE,
            Coeff::PowerOfTwo(k) => Scalar::from(2u64).pow_vartime([k as u64]),
            // Cubed, so that it fills the field rather than 64 bits.
            Coeff::Any(v) => Scalar::from(v).cube(),
        }
    }
}

/// A term: an input (`aux` false; index 0 is ONE) or aux variable, chosen among those allocated
/// so far by `pick` modulo their number, so that repeats are common.
#[derive(Clone, Debug)]
struct Term {
    aux: bool,
    pick: usize,
    coeff: Coeff,
}

#[derive(Clone, Debug)]
enum Op {
    Input(u64),
    Aux(u64),
    Enforce([Vec<Term>; 3]),
}

/// A random circuit: allocations interleaved with constraints (inputs allocated after aux
/// variables included), each value `v` of the ops turned into `(v + salt)³ + 1`-like nonzero
/// scalars, so that another salt is another witness of the same structure. It need not be
/// satisfied: the evaluations are compared, not checked.
#[derive(Clone, Debug)]
struct RandomCircuit {
    ops: Vec<Op>,
    salt: u64,
}

impl RandomCircuit {
    fn value(&self, v: u64) -> Scalar {
        // Never zero: (odd)³ is a nonzero field element.
        Scalar::from(v.wrapping_add(self.salt) | 1).cube()
    }

    /// The number of constraints the circuit enforces before op `at`.
    fn constraints_before(&self, at: usize) -> usize {
        self.ops[..at].iter().filter(|op| matches!(op, Op::Enforce(_))).count()
    }
}

impl Circuit<Scalar> for RandomCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let mut inputs = vec![CS::one()];
        let mut aux: Vec<Variable> = Vec::new();
        for op in &self.ops {
            match op {
                Op::Input(v) => inputs.push(cs.alloc_input(|| "input", || Ok(self.value(*v)))?),
                Op::Aux(v) => aux.push(cs.alloc(|| "aux", || Ok(self.value(*v)))?),
                Op::Enforce(lcs) => {
                    let lc = |terms: &[Term], mut lc: bellperson::LinearCombination<Scalar>| {
                        for term in terms {
                            let pool = if term.aux && !aux.is_empty() { &aux } else { &inputs };
                            lc = lc + (term.coeff.scalar(), pool[term.pick % pool.len()]);
                        }
                        lc
                    };
                    cs.enforce(|| "random", |z| lc(&lcs[0], z), |z| lc(&lcs[1], z), |z| lc(&lcs[2], z));
                }
            }
        }
        Ok(())
    }
}

fn coeff() -> impl Strategy<Value = Coeff> {
    prop_oneof![
        2 => Just(Coeff::Zero),
        4 => Just(Coeff::One),
        2 => Just(Coeff::MinusOne),
        2 => (0u32..70).prop_map(Coeff::PowerOfTwo),
        1 => any::<u64>().prop_map(Coeff::Any),
    ]
}

fn term() -> impl Strategy<Value = Term> {
    (any::<bool>(), 0usize..1 << 20, coeff()).prop_map(|(aux, pick, coeff)| Term { aux, pick, coeff })
}

fn op() -> impl Strategy<Value = Op> {
    let lc = || prop::collection::vec(term(), 0..5);
    prop_oneof![
        1 => any::<u64>().prop_map(Op::Input),
        3 => any::<u64>().prop_map(Op::Aux),
        4 => [lc(), lc(), lc()].prop_map(Op::Enforce),
    ]
}

/// A random circuit with at least one constraint, so that it is never the empty circuit.
fn random_circuit() -> impl Strategy<Value = RandomCircuit> {
    (prop::collection::vec(op(), 0..48), [term(), term()], any::<u64>()).prop_map(|(mut ops, [a, b], salt)| {
        ops.push(Op::Aux(salt));
        ops.push(Op::Enforce([vec![a], vec![b], vec![]]));
        RandomCircuit { ops, salt }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// Matrices recorded from one witness give, for another witness of the same structure,
    /// what full synthesis gives; the twin with one more term in one linear combination is
    /// caught at that constraint and that side.
    #[test]
    fn random_circuits_match_full_synthesis(
        circuit in random_circuit(),
        other_salt in any::<u64>(),
        mutate in (any::<prop::sample::Index>(), 0usize..3),
    ) {
        let matrices = ConstraintMatrices::record(circuit.clone()).unwrap();
        let proved = RandomCircuit { salt: other_salt, ..circuit.clone() };
        let reference = Witness::synthesize(proved.clone(), SatisfactionCheck::Off).unwrap();
        prop_assert_eq!(matrices.shape(), reference.shape());
        let ours = Witness::synthesize_with(proved.clone(), &matrices, EvaluationCheck::On).unwrap();
        assert_same_witness(&ours, &reference, "random circuit");

        // The negative twin: ONE once more in one side of one constraint changes that side's
        // value by exactly one, and nothing else.
        let enforced: Vec<usize> =
            proved.ops.iter().enumerate().filter(|(_, op)| matches!(op, Op::Enforce(_))).map(|(i, _)| i).collect();
        let (which, side) = mutate;
        let at = enforced[which.index(enforced.len())];
        let mut twin = proved.clone();
        if let Op::Enforce(lcs) = &mut twin.ops[at] {
            lcs[side].push(Term { aux: false, pick: 0, coeff: Coeff::One });
        }
        match Witness::synthesize_with(twin, &matrices, EvaluationCheck::On) {
            Err(Error::MatricesMismatch { what, index, .. }) => {
                prop_assert_eq!((what, index), (["a", "b", "c"][side], proved.constraints_before(at)));
            }
            other => prop_assert!(false, "expected MatricesMismatch, got {:?}", other),
        }
    }

    /// Any bytes: a typed refusal or, only for the file as written, the matrices; never a
    /// panic.
    #[test]
    fn arbitrary_bytes_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let read = ConstraintMatrices::read_from(&mut Cursor::new(&bytes), [0; 32]);
        prop_assert!(matches!(read, Err(Error::Io { .. })), "{:?}", read);
    }
}

/// A small circuit's matrices and their file, for the file tests.
fn small_file(rng: &mut ChaCha20Rng, key: [u8; 32]) -> (ConstraintMatrices, Vec<u8>) {
    let spec = synthetic(5, 3, rng.gen());
    let matrices = ConstraintMatrices::record(spec.circuit(0)).unwrap();
    let mut bytes = Vec::new();
    matrices.write_to(&mut bytes, key).unwrap();
    (matrices, bytes)
}

#[test]
fn a_written_file_reads_back_and_proves_the_same() {
    let mut rng = fresh_rng();
    let spec = synthetic(12, 8, rng.gen());
    let matrices = ConstraintMatrices::record(spec.circuit(0)).unwrap();
    let key: [u8; 32] = rng.gen();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shape.matrices");
    matrices.write_file(&path, key).unwrap();
    let read = ConstraintMatrices::read_file(&path, key).unwrap();
    assert_eq!(read, matrices);
    // The read vectors are allocated to their exact lengths.
    let matrix_bytes = |m: &snarkpipe::circuit::SparseMatrix| (m.row_starts().len() * 8 + m.num_terms() * 8) as u64;
    let expected_bytes = [read.a(), read.b(), read.c()].into_iter().map(matrix_bytes).sum::<u64>()
        + 32 * read.coefficient_table().len() as u64
        + (2 * read.num_aux() + read.num_inputs()) as u64;
    assert_eq!(read.bytes(), expected_bytes);
    let reference = Witness::synthesize(spec.circuit(3), SatisfactionCheck::Off).unwrap();
    let ours = Witness::synthesize_with(spec.circuit(3), &read, EvaluationCheck::Off).unwrap();
    assert_same_witness(&ours, &reference, "read back");

    // The negative twin: the same file for another key is refused, naming the file.
    let mut other = key;
    other[rng.gen_range(0..32)] ^= 1 << rng.gen_range(0..8);
    let refused = ConstraintMatrices::read_file(&path, other).unwrap_err().to_string();
    assert!(refused.contains("another proving key"), "{refused}");
    assert!(refused.contains(&path.display().to_string()) && refused.contains("delete the file"), "{refused}");
    // Nothing is left beside it by the write.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn every_truncation_and_every_flipped_byte_is_refused() {
    let mut rng = fresh_rng();
    let key: [u8; 32] = rng.gen();
    let (matrices, bytes) = small_file(&mut rng, key);
    assert_eq!(ConstraintMatrices::read_from(&mut Cursor::new(&bytes), key).unwrap(), matrices);
    for len in 0..bytes.len() {
        let read = ConstraintMatrices::read_from(&mut Cursor::new(&bytes[..len]), key);
        assert!(matches!(read, Err(Error::Io { .. })), "truncated to {len} of {} bytes: {read:?}", bytes.len());
    }
    for at in 0..bytes.len() {
        let mut flipped = bytes.clone();
        flipped[at] ^= 1 << rng.gen_range(0..8);
        let read = ConstraintMatrices::read_from(&mut Cursor::new(&flipped), key);
        assert!(matches!(read, Err(Error::Io { .. })), "byte {at} flipped: {read:?}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    let read = ConstraintMatrices::read_from(&mut Cursor::new(&longer), key).unwrap_err().to_string();
    assert!(read.contains("longer than its counts say"), "{read}");
}

#[test]
fn each_refusal_says_what_is_wrong() {
    let mut rng = fresh_rng();
    let key: [u8; 32] = rng.gen();
    let (_, bytes) = small_file(&mut rng, key);
    let message = |bytes: &[u8]| match ConstraintMatrices::read_from(&mut Cursor::new(bytes), key) {
        Err(Error::Io { message, .. }) => message,
        other => panic!("expected a refusal, got {other:?}"),
    };
    // A file of another kind, another version, a checksum over other contents.
    let mut magic = bytes.clone();
    magic[..4].copy_from_slice(b"ELF\x7f");
    assert!(message(&magic).contains("not a constraint-matrices file"));
    let mut version = bytes.clone();
    version[8..12].copy_from_slice(&7u32.to_le_bytes());
    assert!(message(&version).contains("format version 7"));
    let body = rng.gen_range(8 + 4 + 32 + 56..bytes.len() - 32);
    let mut corrupt = bytes.clone();
    corrupt[body] ^= 0x80;
    assert!(message(&corrupt).contains("checksum"), "byte {body}");
    // Counts far beyond the file: the sizes (constraints, table, terms) are refused before
    // anything is allocated for them; the variable counts, which size nothing in the file,
    // by the checksum over the header.
    for count in 0..7 {
        let mut huge = bytes.clone();
        let at = 8 + 4 + 32 + 8 * count;
        huge[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        let expected = if count < 2 { "checksum" } else { "truncated" };
        assert!(message(&huge).contains(expected), "count {count}: {}", message(&huge));
    }
    // Every message says how to recover.
    assert!(message(&bytes[..100]).contains("delete the file to record the matrices again"));
}

#[test]
fn a_circuit_whose_structure_follows_its_witness_fails_the_check_at_that_constraint() {
    let mut rng = fresh_rng();
    let spec = synthetic(8, 2, rng.gen());
    let matrices = ConstraintMatrices::record(Branching { spec, branch_at: usize::MAX, index: 0 }).unwrap();
    let branch_at = rng.gen_range(0..100);
    // Recorded without the branch, proved with another witness and still without it: equal.
    let straight = Branching { spec, branch_at: usize::MAX, index: 1 };
    let ours = Witness::synthesize_with(straight.clone(), &matrices, EvaluationCheck::On).unwrap();
    assert_same_witness(&ours, &Witness::synthesize(straight, SatisfactionCheck::Off).unwrap(), "no branch");
    // The negative twin: this witness takes the branch at one constraint.
    let branching = Branching { spec, branch_at, index: 1 };
    match Witness::synthesize_with(branching, &matrices, EvaluationCheck::On) {
        Err(err @ Error::MatricesMismatch { .. }) => {
            let Error::MatricesMismatch { what, index, .. } = &err else { unreachable!() };
            // The branch is after the synthetic circuit's constraints, and swaps C's variable.
            let first_copy = matrices.num_constraints() - matrices.num_inputs() - 100;
            assert_eq!((*what, *index), ("c", first_copy + branch_at), "{err}");
            assert!(err.to_string().contains("depends on its witness"), "{err}");
        }
        other => panic!("expected MatricesMismatch, got {other:?}"),
    }
}

/// A synthetic circuit followed by 100 constraints `x · ONE = x` over one more aux variable;
/// the one numbered `branch_at` reads `x · ONE = ONE` instead, a structure chosen by the
/// witness (standing for a circuit that branches on a value it should only constrain).
#[derive(Clone)]
struct Branching {
    spec: SyntheticSpec,
    branch_at: usize,
    index: usize,
}

impl Circuit<Scalar> for Branching {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        self.spec.circuit(self.index).synthesize(cs)?;
        let x = cs.alloc(|| "x", || Ok(Scalar::from(self.index as u64 + 2)))?;
        for i in 0..100 {
            let c = if i == self.branch_at { CS::one() } else { x };
            cs.enforce(|| format!("copy {i}"), |lc| lc + x, |lc| lc + CS::one(), |lc| lc + c);
        }
        Ok(())
    }
}

#[test]
fn recording_needs_no_witness() {
    // A circuit whose every value is missing records the matrices a full one does, as
    // bellperson's key generation needs no values; synthesis of it fails for lack of them.
    let seed = fresh_seed();
    let circuit =
        RandomCircuit { ops: vec![Op::Aux(seed), Op::Input(seed), Op::Enforce([vec![], vec![], vec![]])], salt: seed };
    let with_values = ConstraintMatrices::record(circuit.clone()).unwrap();
    let without = ConstraintMatrices::record(Valueless(circuit.clone())).unwrap();
    assert_eq!(with_values, without);
    assert!(matches!(Witness::synthesize(Valueless(circuit), SatisfactionCheck::Off), Err(Error::MissingAssignment)));
}

/// A random circuit whose every value closure fails, as a key-generation circuit's would.
struct Valueless(RandomCircuit);

impl Circuit<Scalar> for Valueless {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        for op in &self.0.ops {
            match op {
                Op::Input(_) => {
                    cs.alloc_input(|| "input", || Err(SynthesisError::AssignmentMissing))?;
                }
                Op::Aux(_) => {
                    cs.alloc(|| "aux", || Err(SynthesisError::AssignmentMissing))?;
                }
                Op::Enforce(_) => cs.enforce(|| "empty", |lc| lc, |lc| lc, |lc| lc),
            }
        }
        Ok(())
    }
}

#[test]
fn random_seeded_circuits_at_larger_sizes_match() {
    // Larger random circuits than proptest draws, from a printed seed.
    let seed = fresh_seed();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let runner_seed: [u8; 32] = rng.gen();
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(
        ProptestConfig::default(),
        proptest::test_runner::TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &runner_seed),
    );
    let strategy = (prop::collection::vec(op(), 2000..4000), any::<u64>()).prop_map(|(mut ops, salt)| {
        ops.push(Op::Aux(salt));
        ops.push(Op::Enforce([vec![Term { aux: true, pick: 0, coeff: Coeff::One }], vec![], vec![]]));
        RandomCircuit { ops, salt }
    });
    for round in 0..3 {
        let circuit = strategy.new_tree(&mut runner).unwrap().current();
        let matrices = ConstraintMatrices::record(circuit.clone()).unwrap();
        let proved = RandomCircuit { salt: rng.gen(), ..circuit };
        let reference = Witness::synthesize(proved.clone(), SatisfactionCheck::Off).unwrap();
        let ours = Witness::synthesize_with(proved, &matrices, EvaluationCheck::On).unwrap();
        assert_same_witness(&ours, &reference, &format!("seed {seed}, round {round}"));
    }
}

/// The witness-only constraint system gives bellperson's `WitnessCS` values, whatever the
/// capacity it was sized for (none, exact, too small, too large); another partition's circuit
/// gives another assignment (the comparison can fail).
#[test]
fn witness_only_synthesis_gives_witness_cs_values_at_any_capacity() {
    use bellperson::util_cs::witness_cs::WitnessCS;
    let mut rng = fresh_rng();
    let spec = SyntheticSpec {
        log_n: 7,
        num_inputs: 3,
        profile: WitnessProfile::Random,
        keys: KeyKind::Random,
        seed: fresh_seed(),
    };
    let index = rng.gen_range(0..1000);
    let mut reference = WitnessCS::<Scalar>::new();
    spec.circuit(index).synthesize(&mut reference).unwrap();
    let (inputs, aux) = (reference.scalar_inputs(), reference.scalar_aux());
    for (num_inputs, num_aux) in [(0, 0), (inputs.len(), aux.len()), (1, aux.len() / 3), (100, aux.len() * 2)] {
        let sized = witness_assignment_sized(spec.circuit(index), num_inputs, num_aux).unwrap();
        assert_eq!(sized, (inputs.clone(), aux.clone()), "partition {index}, sized for {num_inputs} and {num_aux}");
    }
    let other = witness_assignment(spec.circuit(index + 1)).unwrap();
    assert_ne!(other.1, aux, "partition {}'s circuit gave partition {index}'s aux", index + 1);
}
