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

/// Witness-only synthesis: runs `circuit` through a constraint system that records every
/// variable's value but no constraint (bellperson's `WitnessCS` semantics: ONE is input 0).
/// Returns the inputs (ONE first) and the aux values.
///
/// It declares itself a witness generator, as `WitnessCS` does, so gadgets may take faster
/// paths that allocate without enforcing; [`EvaluationCheck::On`] is what shows that they
/// allocate the same variables in the same order as the recording. It is not extensible, as
/// the recording is not: see [`WitnessOnly`] why.
pub fn witness_assignment<C: Circuit<Scalar>>(circuit: C) -> Result<(Vec<Scalar>, Vec<Scalar>)> {
    witness_assignment_sized(circuit, 0, 0)
}

/// [`witness_assignment`] into vectors made for `num_inputs` and `num_aux` values (a key's
/// recorded counts): a 2^24 witness is hundreds of MB, and growing it by doubling copies it
/// several times over into fresh pages. Counts that turn out wrong cost time, never values.
pub fn witness_assignment_sized<C: Circuit<Scalar>>(
    circuit: C,
    num_inputs: usize,
    num_aux: usize,
) -> Result<(Vec<Scalar>, Vec<Scalar>)> {
    let mut inputs = Vec::with_capacity(num_inputs.max(1));
    inputs.push(Scalar::ONE);
    let mut cs = WitnessOnly { inputs, aux: Vec::with_capacity(num_aux) };
    circuit.synthesize(&mut cs)?;
    Ok((cs.inputs, cs.aux))
}

/// The values of a circuit's variables and nothing else, as bellperson's `WitnessCS` keeps
/// them, but owned, so that they are moved out rather than cloned, and sized up front.
///
/// Not extensible, on purpose: a circuit may synthesize another way when its constraint
/// system is extensible. filecoin-proofs' Window and Winning PoSt circuits then synthesize
/// groups of sectors in parallel sub-systems, each made with `new()` and given its own "temp
/// ONE", and join them with `extend`; every sub-system adds one input more than the recording
/// saw, and the witness no longer fits the matrices. The recording is not extensible, so with
/// this the witness takes the same path.
struct WitnessOnly {
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
}

impl ConstraintSystem<Scalar> for WitnessOnly {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _annotation: A, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(value()?);
        Ok(Variable(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _annotation: A, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(value()?);
        Ok(Variable(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _annotation: A, _a: LA, _b: LB, _c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        // No linear combination is built: the matrices hold the constraints.
    }

    fn push_namespace<NR, N>(&mut self, _name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    fn is_witness_generator(&self) -> bool {
        true
    }

    fn extend_inputs(&mut self, new_inputs: &[Scalar]) {
        self.inputs.extend_from_slice(new_inputs);
    }

    fn extend_aux(&mut self, new_aux: &[Scalar]) {
        self.aux.extend_from_slice(new_aux);
    }

    fn allocate_empty(&mut self, aux_n: usize, inputs_n: usize) -> (&mut [Scalar], &mut [Scalar]) {
        let (aux_start, inputs_start) = (self.aux.len(), self.inputs.len());
        self.aux.resize(aux_start + aux_n, Scalar::ZERO);
        self.inputs.resize(inputs_start + inputs_n, Scalar::ZERO);
        (&mut self.aux[aux_start..], &mut self.inputs[inputs_start..])
    }

    fn inputs_slice(&self) -> &[Scalar] {
        &self.inputs
    }

    fn aux_slice(&self) -> &[Scalar] {
        &self.aux
    }
}

/// See [`Witness::from_matrices`].
pub(super) fn witness_from_matrices(
    matrices: &ConstraintMatrices,
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
) -> Result<Witness> {
    let (a, b, c) = matrices.evaluate(&inputs, &aux)?;
    let witness = Witness {
        a,
        b,
        c,
        input_assignment: inputs,
        aux_assignment: aux,
        a_aux_density: matrices.a_aux_density.clone(),
        b_input_density: matrices.b_input_density.clone(),
        b_aux_density: matrices.b_aux_density.clone(),
    };
    // The rule every witness meets; the recording met it, so only a hand-made one can fail.
    witness.domain()?;
    Ok(witness)
}

/// See [`Witness::synthesize_with`].
pub(super) fn synthesize_with_matrices<C: Circuit<Scalar> + Clone>(
    circuit: C,
    matrices: &ConstraintMatrices,
    check: EvaluationCheck,
) -> Result<Witness> {
    let reference = (check == EvaluationCheck::On).then(|| circuit.clone());
    let (inputs, aux) = witness_assignment_sized(circuit, matrices.num_inputs(), matrices.num_aux())?;
    let Some(reference) = reference else {
        return witness_from_matrices(matrices, inputs, aux);
    };
    let full = Witness::synthesize(reference, SatisfactionCheck::Off)?;
    // The variables first: a witness path that allocates differently explains everything after.
    first_difference("input", &inputs, &full.input_assignment)?;
    first_difference("aux", &aux, &full.aux_assignment)?;
    let recorded = matrices.shape();
    for (what, recorded, synthesized) in [
        ("num_constraints", recorded.num_constraints, full.a.len()),
        ("num_inputs", recorded.num_inputs, full.input_assignment.len()),
        ("num_aux", recorded.num_aux, full.aux_assignment.len()),
    ] {
        if recorded != synthesized {
            return Err(Error::MatricesMismatch {
                what,
                index: synthesized,
                detail: format!(
                    "the matrices were recorded with {what} = {recorded}, full synthesis has {synthesized}"
                ),
            });
        }
    }
    let witness = witness_from_matrices(matrices, inputs, aux)?;
    first_constraint_difference(&witness, &full)?;
    first_difference("a_aux_density", witness.a_aux_density.bits(), full.a_aux_density.bits())?;
    first_difference("b_input_density", witness.b_input_density.bits(), full.b_input_density.bits())?;
    first_difference("b_aux_density", witness.b_aux_density.bits(), full.b_aux_density.bits())?;
    Ok(witness)
}

/// The first index where `ours` (witness-only synthesis or the matrices) and `full` (full
/// synthesis) differ, a length difference included, as [`Error::MatricesMismatch`].
fn first_difference<T: PartialEq + Sync>(what: &'static str, ours: &[T], full: &[T]) -> Result<()> {
    let len = ours.len().min(full.len());
    let differs = (0..len).into_par_iter().find_first(|&i| ours[i] != full[i]);
    let index = match differs {
        Some(i) => i,
        None if ours.len() != full.len() => len,
        None => return Ok(()),
    };
    let detail = if index < len {
        format!("{what} {index} differs between witness-only and full synthesis")
    } else {
        format!(
            "witness-only synthesis has {} {what} values and full synthesis {}, equal up to {what} {index}",
            ours.len(),
            full.len()
        )
    };
    Err(Error::MatricesMismatch { what, index, detail })
}

/// The first constraint whose a, b or c from the matrices differs from full synthesis's.
/// The lengths are equal: both are the recorded number of constraints.
fn first_constraint_difference(ours: &Witness, full: &Witness) -> Result<()> {
    let sides = [("a", &ours.a, &full.a), ("b", &ours.b, &full.b), ("c", &ours.c, &full.c)];
    let differs = (0..ours.a.len())
        .into_par_iter()
        .find_first(|&i| sides.iter().any(|(_, ours, full)| ours.get(i) != full.get(i)));
    let Some(index) = differs else { return Ok(()) };
    let (what, _, _) = sides.iter().find(|(_, ours, full)| ours.get(index) != full.get(index)).unwrap_or(&sides[0]);
    Err(Error::MatricesMismatch {
        what,
        index,
        detail: format!("constraint {index}'s {what} from the matrices differs from full synthesis's"),
    })
}

/// One matrix while recording: columns of aux variables carry [`AUX_TAG`] until the number of
/// inputs is known.
#[derive(Default)]
struct RowsBuilder {
    row_starts: Vec<u64>,
    tagged_columns: Vec<u32>,
    coefficients: Vec<u32>,
}

impl RowsBuilder {
    fn new() -> Self {
        RowsBuilder { row_starts: vec![0], ..Default::default() }
    }

    fn end_row(&mut self) {
        self.row_starts.push(self.tagged_columns.len() as u64);
    }

    /// The finished matrix: aux columns moved behind the inputs.
    fn finish(self, num_inputs: u32) -> SparseMatrix {
        let mut columns = self.tagged_columns;
        columns.par_iter_mut().for_each(|column| {
            if *column & AUX_TAG != 0 {
                *column = num_inputs + (*column & !AUX_TAG);
            }
        });
        SparseMatrix { row_starts: self.row_starts, columns, coefficients: self.coefficients }
    }
}

/// The `ConstraintSystem` that records the matrices.
struct Recorder {
    num_inputs: usize,
    num_aux: usize,
    a: RowsBuilder,
    b: RowsBuilder,
    c: RowsBuilder,
    table: Vec<Scalar>,
    /// A coefficient's canonical bytes → its index in `table`.
    table_index: HashMap<[u8; 32], u32>,
    /// An error that `enforce` cannot return (it has no `Result`), reported after synthesis.
    deferred: Option<Error>,
    /// The variables' values (inputs, aux), when the recording also synthesizes the witness.
    values: Option<(Vec<Scalar>, Vec<Scalar>)>,
}

impl Recorder {
    fn new() -> Self {
        Recorder {
            values: None,
            num_inputs: 0,
            num_aux: 0,
            a: RowsBuilder::new(),
            b: RowsBuilder::new(),
            c: RowsBuilder::new(),
            // ONE is entry 0, so evaluation knows it without comparing scalars.
            table: vec![Scalar::ONE],
            table_index: HashMap::from([(Scalar::ONE.to_repr(), 0)]),
            deferred: None,
        }
    }

    fn defer(&mut self, error: impl FnOnce() -> Error) {
        self.deferred.get_or_insert_with(error);
    }

    /// `coeff`'s index in the table, adding it if it is new.
    fn intern(&mut self, coeff: &Scalar) -> u32 {
        if *coeff == Scalar::ONE {
            return 0;
        }
        let next = self.table.len();
        let Ok(next) = u32::try_from(next) else {
            self.defer(|| Error::Synthesis("the circuit has more than 2^32 distinct coefficients".into()));
            return 0;
        };
        let table = &mut self.table;
        *self.table_index.entry(coeff.to_repr()).or_insert_with(|| {
            table.push(*coeff);
            next
        })
    }

    /// Appends `lc` as the next row of the matrix `which` (0, 1, 2 for A, B, C).
    fn record_row(&mut self, which: usize, lc: &LinearCombination<Scalar>) {
        // C ends its row last, so its row count is this constraint's index for all three.
        let constraint = self.c.row_starts.len() - 1;
        let inputs = lc.iter_inputs().map(|(i, coeff)| (Index::Input(*i), coeff));
        let aux = lc.iter_aux().map(|(i, coeff)| (Index::Aux(*i), coeff));
        for (index, coeff) in inputs.chain(aux) {
            // bellperson skips zero coefficients, for the value and for the density alike.
            if coeff.is_zero_vartime() {
                continue;
            }
            let (allocated, tag, i) = match index {
                Index::Input(i) => (self.num_inputs, 0, i),
                Index::Aux(i) => (self.num_aux, AUX_TAG, i),
            };
            if i >= allocated {
                self.defer(|| {
                    Error::Synthesis(format!("constraint {constraint} uses {index:?}, which was never allocated"))
                });
                continue;
            }
            if i >= MAX_VARIABLES_OF_A_KIND {
                // Allocated beyond what a column can tag: `alloc` deferred that error already.
                continue;
            }
            // `i < MAX_VARIABLES_OF_A_KIND`, so the tag bit is free.
            let k = self.intern(coeff);
            let rows = match which {
                0 => &mut self.a,
                1 => &mut self.b,
                _ => &mut self.c,
            };
            rows.tagged_columns.push(tag | i as u32);
            rows.coefficients.push(k);
        }
        match which {
            0 => self.a.end_row(),
            1 => self.b.end_row(),
            _ => self.c.end_row(),
        }
    }

    /// Appends the input constraints and builds the matrices.
    fn finish(mut self) -> Result<ConstraintMatrices> {
        if let Some(error) = self.deferred.take() {
            return Err(error);
        }
        // bellperson's `input * 0 = 0` per input (see `synthesize.rs`): A holds the input with
        // coefficient ONE (table entry 0), B and C are empty.
        for i in 0..self.num_inputs {
            self.a.tagged_columns.push(i as u32);
            self.a.coefficients.push(0);
            self.a.end_row();
            self.b.end_row();
            self.c.end_row();
        }
        let num_constraints = self.a.row_starts.len() - 1;
        if num_constraints < Witness::MIN_CONSTRAINTS {
            return Err(Error::EmptyCircuit);
        }
        if self.num_inputs + self.num_aux > u32::MAX as usize {
            return Err(Error::Synthesis(format!(
                "{} inputs and {} aux variables do not fit the matrices' 32-bit columns",
                self.num_inputs, self.num_aux
            )));
        }
        let num_inputs = self.num_inputs as u32;
        let matrices = [self.a.finish(num_inputs), self.b.finish(num_inputs), self.c.finish(num_inputs)];
        Ok(ConstraintMatrices::from_parts(self.num_inputs, self.num_aux, matrices, self.table))
    }

    /// Counts one more variable of a kind; beyond what a column can tag, synthesis fails.
    fn next_variable(&mut self, aux: bool) -> Variable {
        let count = if aux { &mut self.num_aux } else { &mut self.num_inputs };
        let index = *count;
        *count += 1;
        if index >= MAX_VARIABLES_OF_A_KIND {
            let kind = if aux { "aux" } else { "input" };
            self.defer(|| Error::Synthesis(format!("the constraint matrices hold at most 2^31 {kind} variables")));
        }
        Variable::new_unchecked(if aux { Index::Aux(index) } else { Index::Input(index) })
    }
}

impl ConstraintSystem<Scalar> for Recorder {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _annotation: A, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        // The value is not needed, as in bellperson's key generation, unless the recording
        // also yields the witness.
        if let Some((_, aux)) = &mut self.values {
            aux.push(value()?);
        }
        Ok(self.next_variable(true))
    }

    fn alloc_input<F, A, AR>(&mut self, _annotation: A, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        if let Some((inputs, _)) = &mut self.values {
            inputs.push(value()?);
        }
        Ok(self.next_variable(false))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _annotation: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.record_row(0, &a(LinearCombination::zero()));
        self.record_row(1, &b(LinearCombination::zero()));
        self.record_row(2, &c(LinearCombination::zero()));
    }

    fn push_namespace<NR, N>(&mut self, _name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

// The on-disk format, all integers little-endian:
//
//   magic            8 bytes   MAGIC
//   version          u32       FORMAT_VERSION
//   key digest       32 bytes  the proving key's digest the matrices were recorded for
//   num_inputs       u64
//   num_aux          u64
//   num_constraints  u64
//   table length     u64
//   terms of A, B, C 3 × u64
//   table            table length × 32 bytes, each a scalar's canonical representation
//   A, B, C          each: row_starts (num_constraints + 1) × u64, columns × u32,
//                    coefficient indices × u32
//   checksum         32 bytes  SHA-256 of everything before it
//
// The reader checks the header, then that the file holds exactly what the counts say, before
// it allocates; then the checksum, then the invariants of `SparseMatrix`.

/// The first bytes of a constraint-matrices file.
const MAGIC: [u8; 8] = *b"SNKPMTRX";
/// The format [`ConstraintMatrices::write_to`] writes and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;
/// Bytes before the body: magic, version, key digest and the seven counts.
const HEADER_BYTES: u64 = 8 + 4 + 32 + 7 * 8;
/// Bytes a write or a read moves at a time.
const IO_CHUNK_BYTES: usize = 1 << 20;

/// A writer that hashes what passes through it.
struct HashingWriter<'a, W: Write> {
    inner: &'a mut W,
    hasher: Sha256,
    buffer: Vec<u8>,
}

impl<W: Write> HashingWriter<'_, W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() >= IO_CHUNK_BYTES {
            self.flush_buffer()?;
        }
        Ok(())
    }

    fn flush_buffer(&mut self) -> std::io::Result<()> {
        self.hasher.update(&self.buffer);
        self.inner.write_all(&self.buffer)?;
        self.buffer.clear();
        Ok(())
    }
}

/// A reader of the body: hashes what it reads, and reports a short read as truncation.
struct HashingReader<'a, R: Read> {
    inner: &'a mut R,
    hasher: Sha256,
    source: &'a str,
}

impl<R: Read> HashingReader<'_, R> {
    fn take(&mut self, bytes: &mut [u8]) -> Result<()> {
        self.inner.read_exact(bytes).map_err(|err| read_error(self.source, err))?;
        self.hasher.update(&*bytes);
        Ok(())
    }

    /// `count` little-endian values of `N` bytes, in chunks; `count` was checked against the
    /// file's length, so the allocation is what the file holds.
    fn values<const N: usize, T>(&mut self, count: usize, decode: impl Fn([u8; N]) -> T) -> Result<Vec<T>> {
        let mut values = Vec::with_capacity(count);
        let mut chunk = vec![0u8; IO_CHUNK_BYTES / N * N];
        while values.len() < count {
            let n = (count - values.len()).min(chunk.len() / N);
            let bytes = &mut chunk[..n * N];
            self.take(bytes)?;
            values.extend(bytes.chunks_exact(N).map(|b| decode(b.try_into().unwrap_or([0; N]))));
        }
        Ok(values)
    }
}

/// An error about a matrices file, with what the user can do about it.
fn file_error(source: &str, reason: impl std::fmt::Display) -> Error {
    Error::Io {
        context: source.to_string(),
        message: format!("{reason}; delete the file to record the matrices again"),
    }
}

fn read_error(source: &str, err: std::io::Error) -> Error {
    if err.kind() == std::io::ErrorKind::UnexpectedEof {
        file_error(source, "the file is truncated")
    } else {
        Error::io(source, err)
    }
}

impl ConstraintMatrices {
    /// Writes the matrices in the versioned format, tied to `key_digest` (the digest of the
    /// proving key they were recorded for), with a SHA-256 checksum over everything written.
    pub fn write_to(&self, writer: &mut impl Write, key_digest: [u8; 32]) -> Result<()> {
        let mut out =
            HashingWriter { inner: writer, hasher: Sha256::new(), buffer: Vec::with_capacity(IO_CHUNK_BYTES) };
        self.write_hashed(&mut out, key_digest).map_err(|err| Error::io("writing constraint matrices", err))
    }

    fn write_hashed<W: Write>(&self, out: &mut HashingWriter<W>, key_digest: [u8; 32]) -> std::io::Result<()> {
        out.put(&MAGIC)?;
        out.put(&FORMAT_VERSION.to_le_bytes())?;
        out.put(&key_digest)?;
        let matrices = [&self.a, &self.b, &self.c];
        let counts = [self.num_inputs, self.num_aux, self.num_constraints(), self.coefficient_table.len()]
            .into_iter()
            .chain(matrices.iter().map(|m| m.num_terms()));
        for count in counts {
            out.put(&(count as u64).to_le_bytes())?;
        }
        for coeff in &self.coefficient_table {
            out.put(&coeff.to_repr())?;
        }
        for m in matrices {
            for start in &m.row_starts {
                out.put(&start.to_le_bytes())?;
            }
            for column in &m.columns {
                out.put(&column.to_le_bytes())?;
            }
            for k in &m.coefficients {
                out.put(&k.to_le_bytes())?;
            }
        }
        out.flush_buffer()?;
        let checksum: [u8; 32] = std::mem::take(&mut out.hasher).finalize().into();
        out.inner.write_all(&checksum)?;
        out.inner.flush()
    }

    /// Writes the matrices to `path` (see [`ConstraintMatrices::write_to`]) through a
    /// temporary file beside it, renamed into place: a reader never sees half a file.
    pub fn write_file(&self, path: &Path, key_digest: [u8; 32]) -> Result<()> {
        let context = format!("writing constraint matrices {}", path.display());
        let mut temporary = path.as_os_str().to_owned();
        temporary.push(format!(".{}.tmp", std::process::id()));
        let temporary = std::path::PathBuf::from(temporary);
        let result = (|| {
            let file = std::fs::File::create(&temporary).map_err(|err| Error::io(&context, err))?;
            let mut writer = std::io::BufWriter::new(file);
            self.write_to(&mut writer, key_digest)?;
            let file = writer.into_inner().map_err(|err| Error::io(&context, err.into_error()))?;
            file.sync_all().map_err(|err| Error::io(&context, err))?;
            std::fs::rename(&temporary, path).map_err(|err| Error::io(&context, err))
        })();
        if result.is_err() {
            // Best effort: the write already failed, and the temporary is not the user's file.
            let _ = std::fs::remove_file(&temporary);
        }
        result
    }

    /// Reads matrices that [`ConstraintMatrices::write_to`] wrote for the proving key whose
    /// digest is `expected_key_digest`.
    ///
    /// The counts are checked against the bytes the reader holds before anything is
    /// allocated, and everything is checked before the matrices are returned. Errors, each a
    /// [`crate::Error::Io`] that says what is wrong and to delete the file to record again: not
    /// a matrices file (wrong magic), another format version, recorded for another proving key,
    /// counts that do not fit (a truncated file or trailing bytes), a checksum that does not
    /// match, or contents that break the matrices' invariants.
    pub fn read_from<R: Read + Seek>(reader: &mut R, expected_key_digest: [u8; 32]) -> Result<ConstraintMatrices> {
        read_matrices(reader, expected_key_digest, "constraint matrices")
    }

    /// Reads matrices from `path`; see [`ConstraintMatrices::read_from`]. The errors name the
    /// file.
    pub fn read_file(path: &Path, expected_key_digest: [u8; 32]) -> Result<ConstraintMatrices> {
        let source = format!("constraint matrices {}", path.display());
        let file = std::fs::File::open(path).map_err(|err| Error::io(&source, err))?;
        read_matrices(&mut std::io::BufReader::new(file), expected_key_digest, &source)
    }
}

fn read_matrices<R: Read + Seek>(
    reader: &mut R,
    expected_key_digest: [u8; 32],
    source: &str,
) -> Result<ConstraintMatrices> {
    let start = reader.stream_position().map_err(|err| Error::io(source, err))?;
    let end = reader.seek(SeekFrom::End(0)).map_err(|err| Error::io(source, err))?;
    reader.seek(SeekFrom::Start(start)).map_err(|err| Error::io(source, err))?;
    let available = end.saturating_sub(start);

    let mut input = HashingReader { inner: reader, hasher: Sha256::new(), source };
    let mut magic = [0u8; 8];
    input.take(&mut magic).map_err(|_| file_error(source, "not a constraint-matrices file (too short)"))?;
    if magic != MAGIC {
        return Err(file_error(source, "not a constraint-matrices file (its first bytes are not the format's)"));
    }
    let mut word = [0u8; 4];
    input.take(&mut word)?;
    let version = u32::from_le_bytes(word);
    if version != FORMAT_VERSION {
        return Err(file_error(
            source,
            format!("format version {version}, but this snarkpipe reads version {FORMAT_VERSION}"),
        ));
    }
    let mut digest = [0u8; 32];
    input.take(&mut digest)?;
    if digest != expected_key_digest {
        return Err(file_error(
            source,
            format!(
                "recorded for another proving key (key digest {}, this key's is {})",
                hex::encode(digest),
                hex::encode(expected_key_digest)
            ),
        ));
    }
    let mut counts = [0u64; 7];
    for count in &mut counts {
        let mut bytes = [0u8; 8];
        input.take(&mut bytes)?;
        *count = u64::from_le_bytes(bytes);
    }
    let [num_inputs, num_aux, num_constraints, table_len, terms @ ..] = counts;

    // What the counts say the rest of the file holds, in u128 so no count can overflow it.
    let terms_total: u128 = terms.iter().map(|&t| t as u128).sum();
    let needed: u128 =
        table_len as u128 * 32 + 3 * (num_constraints as u128 + 1) * 8 + terms_total * 8 + 32 + HEADER_BYTES as u128;
    if needed != available as u128 {
        let what = if needed > available as u128 { "truncated" } else { "longer than its counts say" };
        return Err(file_error(
            source,
            format!("the file is {what}: its counts need {needed} bytes, it holds {available}"),
        ));
    }
    // Every count now fits in the file, so in a usize; the rest of the invariants are checked
    // once the checksum has shown the contents are what was written.
    let (num_inputs, num_aux, num_constraints, table_len) =
        (num_inputs as usize, num_aux as usize, num_constraints as usize, table_len as usize);
    let table_bytes: Vec<[u8; 32]> = input.values(table_len, |bytes: [u8; 32]| bytes)?;
    let mut parts = Vec::with_capacity(3);
    for &terms in &terms {
        let row_starts = input.values(num_constraints + 1, u64::from_le_bytes)?;
        let columns = input.values(terms as usize, u32::from_le_bytes)?;
        let coefficients = input.values(terms as usize, u32::from_le_bytes)?;
        parts.push(SparseMatrix { row_starts, columns, coefficients });
    }
    let computed: [u8; 32] = std::mem::take(&mut input.hasher).finalize().into();
    let mut stored = [0u8; 32];
    input.take(&mut stored)?;
    if computed != stored {
        return Err(file_error(source, "the checksum does not match: the file is corrupt"));
    }

    let invalid = |reason: String| file_error(source, format!("the file is malformed: {reason}"));
    let mut table = Vec::with_capacity(table_len);
    for (k, bytes) in table_bytes.into_iter().enumerate() {
        let coeff = Option::<Scalar>::from(Scalar::from_repr(bytes))
            .ok_or_else(|| invalid(format!("coefficient {k} is not a canonical scalar")))?;
        if coeff.is_zero_vartime() {
            return Err(invalid(format!("coefficient {k} is zero")));
        }
        table.push(coeff);
    }
    if table.first() != Some(&Scalar::ONE) {
        return Err(invalid("the coefficient table does not start with ONE".into()));
    }
    let num_variables = num_inputs as u64 + num_aux as u64;
    if num_inputs == 0 || num_variables > u32::MAX as u64 + 1 || num_constraints < Witness::MIN_CONSTRAINTS {
        return Err(invalid(format!(
            "{num_inputs} inputs, {num_aux} aux variables and {num_constraints} constraints are not a circuit's"
        )));
    }
    for (name, m) in ["A", "B", "C"].into_iter().zip(&parts) {
        let terms = m.columns.len() as u64;
        if m.row_starts.first() != Some(&0) || m.row_starts.last() != Some(&terms) {
            return Err(invalid(format!("{name}'s row starts do not run from 0 to its {terms} terms")));
        }
        if let Some(r) = m.row_starts.windows(2).position(|w| w[0] > w[1]) {
            return Err(invalid(format!("{name}'s row {r} ends before it starts")));
        }
        if let Some(t) = m.columns.iter().position(|&column| column as u64 >= num_variables) {
            return Err(invalid(format!("{name}'s term {t} has a column beyond the {num_variables} variables")));
        }
        if let Some(t) = m.coefficients.iter().position(|&k| k as usize >= table.len()) {
            return Err(invalid(format!("{name}'s term {t} has a coefficient beyond the table")));
        }
    }
    let [a, b, c]: [SparseMatrix; 3] =
        parts.try_into().map_err(|_| Error::Internal("three matrices were read, not three".into()))?;
    Ok(ConstraintMatrices::from_parts(num_inputs, num_aux, [a, b, c], table))
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
