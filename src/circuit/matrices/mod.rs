//! A circuit shape's constraint matrices, recorded once, and the witness they give with
//! witness-only synthesis.
//!
//! [`Witness::synthesize`] builds a bellperson `LinearCombination` for every term of every
//! constraint on every proof, though the constraints are the same for every proof of a circuit
//! shape. [`ConstraintMatrices::record`] runs one instance of the circuit through a recording
//! constraint system and keeps A, B and C as sparse matrices; afterwards a proof needs only the
//! variable assignment, which bellperson's `WitnessCS` computes without building a single
//! linear combination ([`witness_assignment`]), and one sparse matrix-vector product per matrix
//! ([`ConstraintMatrices::evaluate`]). [`Witness::synthesize_with`] does both; with
//! [`EvaluationCheck::On`] it also runs the full synthesis and fails at the first constraint or
//! variable where the two disagree.
//!
//! The matrices have one row per constraint, exactly the rows [`Witness::synthesize`] evaluates:
//! the circuit's constraints in the order it enforces them, then bellperson's `input * 0 = 0`
//! per input (A holds that input with coefficient 1, B and C are empty). They share one column
//! space, the witness vector `w = inputs ‖ aux`: input `i` (ONE is input 0) is column `i`, aux
//! variable `i` is column `num_inputs + i`.
//!
//! They can be kept on disk ([`ConstraintMatrices::write_to`], [`ConstraintMatrices::read_from`]),
//! tied to the proving key they were recorded for by the key's digest.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use ff::{Field, PrimeField};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

use super::{Density, SatisfactionCheck, Witness, WitnessShape};
use crate::{Error, Result, Scalar};

mod file;
mod record;
mod witness_only;

pub use file::FORMAT_VERSION;
use record::Recorder;
pub(super) use witness_only::*;
pub use witness_only::{witness_assignment, witness_assignment_sized};

/// Whether [`Witness::synthesize_with`] checks the witness from the matrices against the full
/// synthesis.
///
/// Off by default: the check runs the circuit's full synthesis as well, which is the cost the
/// matrices exist to save. Tests, and the first proofs with freshly recorded matrices, turn it
/// on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EvaluationCheck {
    /// Trust the matrices and the witness-only synthesis.
    #[default]
    Off,
    /// Also run [`Witness::synthesize`] and fail with [`crate::Error::MatricesMismatch`] at the
    /// first variable, constraint evaluation or density bit that differs.
    On,
}

/// One of A, B and C in compressed sparse row form, with coefficients as indices into the
/// [`ConstraintMatrices::coefficient_table`] all three share.
///
/// Invariants (established by [`ConstraintMatrices::record`], checked by
/// [`ConstraintMatrices::read_from`]; the fields are private so nothing else can break them):
/// - `row_starts` has one entry per row plus one, starts at 0, never decreases and ends at the
///   number of terms; row `r`'s terms are `row_starts[r]..row_starts[r + 1]`.
/// - `columns` and `coefficients` have one entry per term; every column is below
///   `num_inputs + num_aux`, every coefficient index below the table's length.
/// - Within a row the terms are in the order bellperson's `LinearCombination` iterates them:
///   inputs by index, then aux variables by index. A linear combination merges repeated
///   variables into one term (summing their coefficients) as it is built, so a row holds each
///   variable at most once and its columns increase; evaluation does not rely on this (it sums
///   every term, as bellperson does).
/// - Terms whose coefficient is zero (a zero written into the circuit, or repeated variables
///   that cancel) are dropped, as bellperson's evaluation skips them; so no table entry is zero.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SparseMatrix {
    row_starts: Vec<u64>,
    columns: Vec<u32>,
    coefficients: Vec<u32>,
}

impl SparseMatrix {
    /// The number of rows: constraints, including the input constraints.
    pub fn num_rows(&self) -> usize {
        self.row_starts.len().saturating_sub(1)
    }

    /// The number of terms (nonzero entries).
    pub fn num_terms(&self) -> usize {
        self.columns.len()
    }

    /// Row `r`'s terms start at `row_starts()[r]` and end at `row_starts()[r + 1]`.
    pub fn row_starts(&self) -> &[u64] {
        &self.row_starts
    }

    /// Each term's column in the witness vector `inputs ‖ aux`.
    pub fn columns(&self) -> &[u32] {
        &self.columns
    }

    /// Each term's coefficient, as an index into [`ConstraintMatrices::coefficient_table`].
    pub fn coefficients(&self) -> &[u32] {
        &self.coefficients
    }

    /// Row `r`'s terms as `(column, coefficient index)`; empty beyond the last row.
    pub fn row(&self, r: usize) -> impl Iterator<Item = (u32, u32)> + '_ {
        let range = match (self.row_starts.get(r), self.row_starts.get(r + 1)) {
            (Some(&start), Some(&end)) => start as usize..end as usize,
            _ => 0..0,
        };
        self.columns[range.clone()].iter().copied().zip(self.coefficients[range].iter().copied())
    }

    /// Host bytes held.
    fn bytes(&self) -> u64 {
        (self.row_starts.capacity() * 8 + self.columns.capacity() * 4 + self.coefficients.capacity() * 4) as u64
    }

    /// `M · w` for `w = inputs ‖ aux`, rows in parallel.
    ///
    /// Indexing cannot go out of bounds: the type's invariants bound every row range, column
    /// and coefficient index, and [`ConstraintMatrices::evaluate`] checked the assignment's
    /// lengths against the column space.
    fn multiply(&self, table: &[Scalar], inputs: &[Scalar], aux: &[Scalar]) -> Vec<Scalar> {
        /// Rows per rayon task: enough to amortise the task, few enough to balance.
        const MIN_ROWS_PER_TASK: usize = 1 << 10;
        let num_inputs = inputs.len();
        (0..self.num_rows())
            .into_par_iter()
            .with_min_len(MIN_ROWS_PER_TASK)
            .map(|r| {
                let (start, end) = (self.row_starts[r] as usize, self.row_starts[r + 1] as usize);
                let mut sum = Scalar::ZERO;
                for (&column, &k) in self.columns[start..end].iter().zip(&self.coefficients[start..end]) {
                    let column = column as usize;
                    let value = if column < num_inputs { inputs[column] } else { aux[column - num_inputs] };
                    // Table entry 0 is ONE: skip the multiplication, as bellperson does.
                    sum += if k == 0 { value } else { value * table[k as usize] };
                }
                sum
            })
            .collect()
    }
}

/// A circuit shape's constraints as three sparse matrices over one coefficient table, with the
/// densities and counts the proving key's queries follow. See the module documentation for the
/// row order and the column space, and [`SparseMatrix`] for the invariants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConstraintMatrices {
    num_inputs: usize,
    num_aux: usize,
    a: SparseMatrix,
    b: SparseMatrix,
    c: SparseMatrix,
    /// Every distinct coefficient of A, B and C once; entry 0 is ONE, no entry is zero.
    coefficient_table: Vec<Scalar>,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
}

/// The largest number of variables of either kind: recording tags aux columns with the top bit
/// of a `u32` until the number of inputs is known.
const MAX_VARIABLES_OF_A_KIND: usize = 1 << 31;
/// The tag of an aux variable's column while recording.
const AUX_TAG: u32 = 1 << 31;

impl ConstraintMatrices {
    /// Records the constraints of `circuit`: one run of its `synthesize` through a constraint
    /// system that keeps every linear combination as a sparse row. ONE is allocated as input 0
    /// first and the input constraints are appended last, as [`Witness::synthesize`] does.
    ///
    /// No value closure is called, so a circuit without a witness (as for key generation)
    /// records the same matrices as one with.
    ///
    /// Errors: [`crate::Error::Synthesis`] if a constraint uses a variable not yet allocated
    /// (or the circuit has 2^31 variables of a kind), whatever the circuit's own synthesis
    /// returns, and [`crate::Error::EmptyCircuit`] as [`Witness::synthesize`] would.
    pub fn record<C: Circuit<Scalar>>(circuit: C) -> Result<ConstraintMatrices> {
        let mut recorder = Recorder::new();
        recorder.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut recorder)?;
        recorder.finish()
    }

    /// Records the constraints of `circuit` and synthesizes its witness in the same run: the
    /// first partition of a shape pays for the recording once, and needs its circuit once
    /// (a circuit is consumed by synthesis, and not every circuit can be cloned). Equal to
    /// [`ConstraintMatrices::record`] and [`Witness::synthesize`] with the check off.
    ///
    /// Errors: those of both.
    pub fn record_with_witness<C: Circuit<Scalar>>(circuit: C) -> Result<(ConstraintMatrices, Witness)> {
        let mut recorder = Recorder::new();
        recorder.values = Some((Vec::new(), Vec::new()));
        recorder.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut recorder)?;
        let (inputs, aux) = recorder.values.take().unwrap_or_default();
        let matrices = recorder.finish()?;
        let witness = Witness::from_matrices(&matrices, inputs, aux)?;
        Ok((matrices, witness))
    }

    /// Constraints, including the one per input.
    pub fn num_constraints(&self) -> usize {
        self.a.num_rows()
    }

    /// Public inputs, including ONE.
    pub fn num_inputs(&self) -> usize {
        self.num_inputs
    }

    /// Private (auxiliary) variables.
    pub fn num_aux(&self) -> usize {
        self.num_aux
    }

    /// The A matrix.
    pub fn a(&self) -> &SparseMatrix {
        &self.a
    }

    /// The B matrix.
    pub fn b(&self) -> &SparseMatrix {
        &self.b
    }

    /// The C matrix.
    pub fn c(&self) -> &SparseMatrix {
        &self.c
    }

    /// The coefficients the matrices' terms index: each distinct coefficient once, ONE first,
    /// no zero.
    pub fn coefficient_table(&self) -> &[Scalar] {
        &self.coefficient_table
    }

    /// Which aux variables occur in A with a nonzero coefficient.
    pub fn a_aux_density(&self) -> &Density {
        &self.a_aux_density
    }

    /// Which inputs occur in B with a nonzero coefficient.
    pub fn b_input_density(&self) -> &Density {
        &self.b_input_density
    }

    /// Which aux variables occur in B with a nonzero coefficient.
    pub fn b_aux_density(&self) -> &Density {
        &self.b_aux_density
    }

    /// The sizes every witness of this shape has, and so the proving key's.
    pub fn shape(&self) -> WitnessShape {
        WitnessShape {
            num_constraints: self.num_constraints(),
            num_inputs: self.num_inputs,
            num_aux: self.num_aux,
            a_aux_total: self.a_aux_density.total(),
            b_input_total: self.b_input_density.total(),
            b_aux_total: self.b_aux_density.total(),
        }
    }

    /// Host bytes the matrices, the table and the densities take.
    pub fn bytes(&self) -> u64 {
        let densities = self.a_aux_density.len() + self.b_input_density.len() + self.b_aux_density.len();
        self.a.bytes()
            + self.b.bytes()
            + self.c.bytes()
            + (self.coefficient_table.capacity() * std::mem::size_of::<Scalar>()) as u64
            + densities as u64
    }

    /// `(A·w, B·w, C·w)` for the witness `w = inputs ‖ aux`: each constraint's a, b and c, as
    /// [`Witness::synthesize`] evaluates them. Rows are evaluated in parallel.
    ///
    /// The CPU reference for evaluating the matrices on a device.
    ///
    /// Errors: [`crate::Error::MalformedWitness`], naming both lengths, if `inputs` or `aux`
    /// does not have the length the matrices were recorded with.
    pub fn evaluate(&self, inputs: &[Scalar], aux: &[Scalar]) -> Result<(Vec<Scalar>, Vec<Scalar>, Vec<Scalar>)> {
        for (what, got, recorded) in [("inputs", inputs.len(), self.num_inputs), ("aux", aux.len(), self.num_aux)] {
            if got != recorded {
                return Err(Error::MalformedWitness(format!(
                    "an assignment of {got} {what} for constraint matrices recorded with {recorded} {what}: \
                     the witness is of another circuit shape"
                )));
            }
        }
        let table = &self.coefficient_table;
        let (a, (b, c)) = rayon::join(
            || self.a.multiply(table, inputs, aux),
            || rayon::join(|| self.b.multiply(table, inputs, aux), || self.c.multiply(table, inputs, aux)),
        );
        Ok((a, b, c))
    }

    /// Builds the matrices from recorded parts, deriving the densities; the parts must meet
    /// the invariants (the recorder's output does, a file's is checked first).
    fn from_parts(
        num_inputs: usize,
        num_aux: usize,
        [a, b, c]: [SparseMatrix; 3],
        coefficient_table: Vec<Scalar>,
    ) -> ConstraintMatrices {
        // The densities follow from the matrices: zero coefficients were dropped, so a column
        // that occurs is a variable that bellperson's evaluation marks. The input constraints
        // put inputs in A only, which no density tracks (every input is in the A query).
        let mut a_aux = vec![false; num_aux];
        let mut b_input = vec![false; num_inputs];
        let mut b_aux = vec![false; num_aux];
        for &column in &a.columns {
            if let Some(i) = (column as usize).checked_sub(num_inputs) {
                a_aux[i] = true;
            }
        }
        for &column in &b.columns {
            match (column as usize).checked_sub(num_inputs) {
                Some(i) => b_aux[i] = true,
                None => b_input[column as usize] = true,
            }
        }
        ConstraintMatrices {
            num_inputs,
            num_aux,
            a,
            b,
            c,
            coefficient_table,
            a_aux_density: Density::from_bits(a_aux),
            b_input_density: Density::from_bits(b_input),
            b_aux_density: Density::from_bits(b_aux),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::synthesize::tests::InputsOnly;
    use std::io::Cursor;

    /// Two constraints over ONE, x, y (aux) and z (an input allocated after them), written with
    /// a coefficient 2, a repeated variable, a zero coefficient and a cancelling pair:
    ///
    /// ```text
    /// (2·ONE + x) · ONE = x + x
    /// x · (y + 0·z) = z - x + x      (or y + z with `z_in_b`)
    /// ```
    #[derive(Clone)]
    struct Written {
        x: u64,
        y: u64,
        z_in_b: bool,
    }

    impl Circuit<Scalar> for Written {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(self.x)))?;
            let y = cs.alloc(|| "y", || Ok(Scalar::from(self.y)))?;
            let z = cs.alloc_input(|| "z", || Ok(Scalar::from(self.x * self.y)))?;
            let two = Scalar::from(2u64);
            cs.enforce(|| "first", |lc| lc + (two, CS::one()) + x, |lc| lc + CS::one(), |lc| lc + x + x);
            let z_in_b = if self.z_in_b { Scalar::ONE } else { Scalar::ZERO };
            cs.enforce(|| "second", |lc| lc + x, |lc| lc + y + (z_in_b, z), |lc| lc + z - x + x);
            Ok(())
        }
    }

    fn layout(m: &SparseMatrix) -> (Vec<u64>, Vec<u32>, Vec<u32>) {
        (m.row_starts().to_vec(), m.columns().to_vec(), m.coefficients().to_vec())
    }

    #[test]
    fn records_the_rows_synthesis_evaluates() {
        let circuit = Written { x: 3, y: 5, z_in_b: false };
        let matrices = ConstraintMatrices::record(circuit.clone()).unwrap();
        // Columns: ONE 0, z 1, x 2, y 3. Table: ONE, 2. The last two rows are the inputs'.
        assert_eq!(matrices.coefficient_table(), &[Scalar::ONE, Scalar::from(2u64)]);
        assert_eq!(layout(matrices.a()), (vec![0, 2, 3, 4, 5], vec![0, 2, 2, 0, 1], vec![1, 0, 0, 0, 0]));
        // 0·z is dropped from B's second row, the cancelled x from C's.
        assert_eq!(layout(matrices.b()), (vec![0, 1, 2, 2, 2], vec![0, 3], vec![0, 0]));
        assert_eq!(layout(matrices.c()), (vec![0, 1, 2, 2, 2], vec![2, 1], vec![1, 0]));
        assert_eq!(matrices.a_aux_density(), &Density::from_bits(vec![true, false]));
        assert_eq!(matrices.b_input_density(), &Density::from_bits(vec![true, false]));
        assert_eq!(matrices.b_aux_density(), &Density::from_bits(vec![false, true]));

        let reference = Witness::synthesize(circuit.clone(), SatisfactionCheck::Off).unwrap();
        assert_eq!(matrices.shape(), reference.shape());
        let witness = Witness::synthesize_with(circuit, &matrices, EvaluationCheck::On).unwrap();
        assert_eq!((&witness.a, &witness.b, &witness.c), (&reference.a, &reference.b, &reference.c));
        assert_eq!(witness.aux_assignment, reference.aux_assignment);

        // The negative twin: with a nonzero coefficient z is a term of B, and B uses it.
        let twin = ConstraintMatrices::record(Written { x: 3, y: 5, z_in_b: true }).unwrap();
        assert_eq!(layout(twin.b()), (vec![0, 1, 3, 3, 3], vec![0, 1, 3], vec![0, 0, 0]));
        assert_eq!(twin.b_input_density(), &Density::from_bits(vec![true, true]));
        assert_ne!(twin, matrices);
    }

    #[test]
    fn an_assignment_of_the_wrong_length_names_both_lengths() {
        let circuit = Written { x: 3, y: 5, z_in_b: false };
        let matrices = ConstraintMatrices::record(circuit.clone()).unwrap();
        let (inputs, mut aux) = witness_assignment(circuit).unwrap();
        assert!(matrices.evaluate(&inputs, &aux).is_ok());
        aux.push(Scalar::ONE);
        match matrices.evaluate(&inputs, &aux) {
            Err(Error::MalformedWitness(message)) => {
                assert!(message.contains("3 aux") && message.contains("2 aux"), "{message}")
            }
            other => panic!("expected MalformedWitness, got {other:?}"),
        }
        let short = matrices.evaluate(&inputs[..1], &aux[..2]);
        assert!(matches!(short, Err(Error::MalformedWitness(ref m)) if m.contains("1 inputs")), "{short:?}");
    }

    /// Enforces `ok` (an allocated variable) in constraint 0, then a variable never allocated
    /// in the B of constraint 1 unless `allocated`.
    struct Ghost {
        allocated: bool,
    }

    impl Circuit<Scalar> for Ghost {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let ok = cs.alloc(|| "ok", || Ok(Scalar::ONE))?;
            cs.enforce(|| "fine", |lc| lc + ok, |lc| lc + ok, |lc| lc + ok);
            let ghost = if self.allocated { ok } else { Variable::new_unchecked(Index::Aux(7)) };
            cs.enforce(|| "ghost", |lc| lc + ok, |lc| lc + ghost, |lc| lc);
            Ok(())
        }
    }

    #[test]
    fn an_unallocated_variable_is_an_error_naming_its_constraint() {
        match ConstraintMatrices::record(Ghost { allocated: false }) {
            Err(Error::Synthesis(message)) => assert!(message.contains("constraint 1 uses Aux(7)"), "{message}"),
            other => panic!("expected a synthesis error, got {other:?}"),
        }
        assert_eq!(ConstraintMatrices::record(Ghost { allocated: true }).unwrap().num_constraints(), 3);
    }

    #[test]
    fn the_empty_circuit_is_refused_as_synthesis_refuses_it() {
        assert!(matches!(ConstraintMatrices::record(InputsOnly { inputs: 0 }), Err(Error::EmptyCircuit)));
        let matrices = ConstraintMatrices::record(InputsOnly { inputs: 2 }).unwrap();
        assert_eq!(layout(matrices.a()), (vec![0, 1, 2, 3], vec![0, 1, 2], vec![0, 0, 0]));
        assert_eq!(
            matrices.shape(),
            Witness::synthesize(InputsOnly { inputs: 2 }, SatisfactionCheck::Off).unwrap().shape()
        );
    }

    /// `x · x = y`; with `x` equal to `branch_at` the constraint reads `x · ONE = y` instead:
    /// its structure depends on the witness.
    #[derive(Clone)]
    struct Branching {
        x: u64,
        branch_at: u64,
    }

    impl Circuit<Scalar> for Branching {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let x = cs.alloc(|| "x", || Ok(Scalar::from(self.x)))?;
            let y = cs.alloc(|| "y", || Ok(Scalar::from(self.x * self.x)))?;
            cs.enforce(|| "x is x", |lc| lc + x, |lc| lc + CS::one(), |lc| lc + x);
            let b = if self.x == self.branch_at { CS::one() } else { x };
            cs.enforce(|| "square", |lc| lc + x, |lc| lc + b, |lc| lc + y);
            Ok(())
        }
    }

    #[test]
    fn the_check_names_the_constraint_whose_structure_follows_the_witness() {
        let matrices = ConstraintMatrices::record(Branching { x: 4, branch_at: 0 }).unwrap();
        let same = Branching { x: 9, branch_at: 0 };
        let witness = Witness::synthesize_with(same.clone(), &matrices, EvaluationCheck::On).unwrap();
        assert_eq!(witness.b, Witness::synthesize(same, SatisfactionCheck::Off).unwrap().b);
        // The negative twin: x = 0 takes the other branch.
        match Witness::synthesize_with(Branching { x: 0, branch_at: 0 }, &matrices, EvaluationCheck::On) {
            Err(Error::MatricesMismatch { what, index, .. }) => assert_eq!((what, index), ("b", 1)),
            other => panic!("expected MatricesMismatch, got {other:?}"),
        }
        // Unchecked, the wrong witness goes through: that is what the check is for.
        assert!(Witness::synthesize_with(Branching { x: 0, branch_at: 0 }, &matrices, EvaluationCheck::Off).is_ok());
    }

    #[test]
    fn a_file_reads_back_and_a_foreign_or_damaged_one_is_refused() {
        let matrices = ConstraintMatrices::record(Written { x: 3, y: 5, z_in_b: true }).unwrap();
        let key = [7u8; 32];
        let mut bytes = Vec::new();
        matrices.write_to(&mut bytes, key).unwrap();
        assert_eq!(ConstraintMatrices::read_from(&mut Cursor::new(&bytes), key).unwrap(), matrices);

        let refused = |bytes: &[u8], key: [u8; 32]| match ConstraintMatrices::read_from(&mut Cursor::new(bytes), key) {
            Err(Error::Io { message, .. }) => message,
            other => panic!("expected a refusal, got {other:?}"),
        };
        assert!(refused(&bytes, [8u8; 32]).contains("another proving key"));
        assert!(refused(&bytes[..bytes.len() - 1], key).contains("truncated"));
        let mut flipped = bytes.clone();
        *flipped.iter_mut().rev().nth(40).unwrap() ^= 1;
        assert!(refused(&flipped, key).contains("checksum"));
        let mut version = bytes.clone();
        version[8] = 2;
        assert!(refused(&version, key).contains("format version 2"));
        assert!(refused(b"PAR\x00\x01", key).contains("not a constraint-matrices file"));
    }
}
