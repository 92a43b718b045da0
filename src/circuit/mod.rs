//! A circuit's witness as the prover needs it: the constraint evaluations a, b, c, the
//! variable assignments, and which variables the A and B queries use (densities).
//!
//! [`Witness::synthesize`] runs a bellperson circuit through the project's own constraint
//! system (see [`synthesize`]), which records exactly what bellperson's `ProvingAssignment`
//! records, so the parameters' query vectors line up with the scalars here.
//!
//! The constraints are the same for every proof of a circuit shape: [`matrices`] records them
//! once as sparse matrices ([`ConstraintMatrices`]), and [`Witness::synthesize_with`] then
//! needs only the variables' values, from witness-only synthesis, and one sparse product per
//! matrix.

pub mod assignment;
pub mod deferred;
pub mod matrices;
pub mod packed;
pub mod recording;
pub mod synthesize;

pub use assignment::Assignment;
pub use deferred::{DeferredCircuit, SynthesisPool};
pub use matrices::{witness_assignment, witness_assignment_sized, ConstraintMatrices, EvaluationCheck, SparseMatrix};
pub use packed::PackedDensity;
pub use recording::{MatricesFile, ShapeRecording};

use rayon::prelude::*;
use serde::Serialize;

use crate::math::Domain;
use crate::{Error, Result, Scalar};

/// Where the a, b and c of a partition synthesized from its key's recorded constraint matrices
/// are evaluated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ConstraintEvaluation {
    /// On the device, from matrices resident beside the key: the host stages the assignment
    /// only. A witness that does not satisfy the matrices (a circuit whose structure follows its
    /// witness) is caught when its proof fails verification, so this needs the prover's
    /// verification on; without it the host evaluates.
    #[default]
    Device,
    /// On the host's cores, each witness checked to satisfy the matrices.
    Host,
}

/// What synthesizing a partition yields: a whole witness, or an assignment whose a, b and c
/// the device evaluates.
#[derive(Debug)]
pub enum Synthesized {
    Witness(Witness),
    Assignment(Assignment),
}

/// One bit per variable: whether the variable occurs (with a nonzero coefficient) in a query.
///
/// The parameters hold a point only for the variables whose bit is set, so the density decides
/// which scalars pair with which points.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Density {
    bits: Vec<bool>,
    total: usize,
}

impl Density {
    /// The number of variables tracked.
    pub fn len(&self) -> usize {
        self.bits.len()
    }

    /// Whether no variable is tracked.
    pub fn is_empty(&self) -> bool {
        self.bits.is_empty()
    }

    /// Whether variable `i` is used; `false` beyond the end.
    pub fn get(&self, i: usize) -> bool {
        self.bits.get(i).copied().unwrap_or(false)
    }

    /// The number of variables used: the number of points the query holds for them.
    pub fn total(&self) -> usize {
        self.total
    }

    /// A density from explicit bits.
    pub fn from_bits(bits: Vec<bool>) -> Self {
        let total = bits.iter().filter(|&&bit| bit).count();
        Density { bits, total }
    }

    /// The bits, one per variable.
    pub fn bits(&self) -> &[bool] {
        &self.bits
    }

    /// Tracks one more variable, not yet used.
    pub(crate) fn push_unused(&mut self) {
        self.bits.push(false);
    }

    /// Marks variable `i` as used; a no-op if it already is or if it is not tracked.
    pub(crate) fn mark_used(&mut self, i: usize) {
        if let Some(bit) = self.bits.get_mut(i) {
            if !*bit {
                *bit = true;
                self.total += 1;
            }
        }
    }

    /// Appends [`Density::select`]'s values to `out`, in parallel and in place: each chunk's
    /// used variables are counted first, so every chunk writes straight to its own slice of
    /// `out`. Staging into pinned memory this way writes each value once, where collecting a
    /// filtered parallel iterator goes through temporary vectors and copies again.
    pub fn select_into(&self, values: &[Scalar], out: &mut Vec<Scalar>) {
        const CHUNK: usize = 1 << 15;
        let len = self.bits.len().min(values.len());
        let (bits, values) = (&self.bits[..len], &values[..len]);
        let counts: Vec<usize> = bits.par_chunks(CHUNK).map(|c| c.iter().filter(|&&b| b).count()).collect();
        let start = out.len();
        out.par_extend(rayon::iter::repeat_n(<Scalar as ff::Field>::ZERO, counts.iter().sum()));
        let mut rest = &mut out[start..];
        let mut slices = Vec::with_capacity(counts.len());
        for &count in &counts {
            let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(count);
            slices.push(chunk);
            rest = tail;
        }
        slices.into_par_iter().zip(bits.par_chunks(CHUNK).zip(values.par_chunks(CHUNK))).for_each(
            |(slice, (bits, values))| {
                let picked = bits.iter().zip(values).filter(|(&bit, _)| bit).map(|(_, value)| *value);
                for (dst, value) in slice.iter_mut().zip(picked) {
                    *dst = value;
                }
            },
        );
    }

    /// `values[i]` for every used variable `i`, in order.
    pub fn select<'a>(&'a self, values: &'a [Scalar]) -> impl Iterator<Item = Scalar> + 'a {
        self.bits.iter().zip(values).filter(|(&bit, _)| bit).map(|(_, value)| *value)
    }
}

/// The sizes a witness has, and so the sizes the parameters must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct WitnessShape {
    /// Constraints, including bellperson's one `input * 0 = 0` constraint per input.
    pub num_constraints: usize,
    /// Public inputs, including the constant ONE.
    pub num_inputs: usize,
    /// Private (auxiliary) variables.
    pub num_aux: usize,
    /// Aux variables that occur in A.
    pub a_aux_total: usize,
    /// Inputs that occur in B.
    pub b_input_total: usize,
    /// Aux variables that occur in B.
    pub b_aux_total: usize,
}

impl WitnessShape {
    /// Terms of the a query's MSM: every input, and the aux variables that occur in A.
    pub fn a_query_len(&self) -> usize {
        self.num_inputs + self.a_aux_total
    }

    /// Terms of the b query's MSMs (G1 and G2): the inputs and aux variables that occur in B.
    pub fn b_query_len(&self) -> usize {
        self.b_input_total + self.b_aux_total
    }
}

/// Whether synthesis checks every constraint against the witness.
///
/// Off by default, like bellperson: checking costs a comparison per constraint and the name of
/// every namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SatisfactionCheck {
    /// Trust the circuit (bellperson's behaviour).
    #[default]
    Off,
    /// Fail with [`crate::Error::Unsatisfied`] at the first constraint the witness violates.
    On,
}

/// A synthesized witness: everything the prover needs from one circuit.
#[derive(Clone, Debug)]
pub struct Witness {
    /// The A linear combination of every constraint, evaluated at the witness.
    pub a: Vec<Scalar>,
    /// The B evaluations.
    pub b: Vec<Scalar>,
    /// The C evaluations.
    pub c: Vec<Scalar>,
    /// The inputs' values, ONE first.
    pub input_assignment: Vec<Scalar>,
    /// The aux variables' values.
    pub aux_assignment: Vec<Scalar>,
    /// Which aux variables occur in A (every input does, through its input constraint).
    pub a_aux_density: Density,
    /// Which inputs occur in B.
    pub b_input_density: Density,
    /// Which aux variables occur in B.
    pub b_aux_density: Density,
}

impl Witness {
    /// Synthesizes `circuit` the way bellperson's prover does: allocate ONE as input 0, run the
    /// circuit, then append one `input * 0 = 0` constraint per input.
    ///
    /// Errors: [`crate::Error::MissingAssignment`] if a value is missing,
    /// [`crate::Error::EmptyCircuit`] if the circuit enforces no constraint and allocates no
    /// public input (a circuit of inputs alone has their constraints, and proves), and with
    /// `check` on, [`crate::Error::Unsatisfied`] naming the first violated constraint.
    pub fn synthesize<C: bellperson::Circuit<Scalar>>(circuit: C, check: SatisfactionCheck) -> Result<Witness> {
        synthesize::synthesize_witness(circuit, check)
    }

    /// The witness of the variable values `inputs` (ONE first) and `aux` for the circuit shape
    /// `matrices` was recorded from: a, b and c from [`ConstraintMatrices::evaluate`], the
    /// densities the matrices'.
    ///
    /// Errors: [`crate::Error::MalformedWitness`] if an assignment's length is not the
    /// matrices'.
    pub fn from_matrices(matrices: &ConstraintMatrices, inputs: Vec<Scalar>, aux: Vec<Scalar>) -> Result<Witness> {
        matrices::witness_from_matrices(matrices, inputs, aux)
    }

    /// Synthesizes `circuit` with constraint matrices recorded from its shape: witness-only
    /// synthesis for the values ([`matrices::witness_assignment`]), then
    /// [`Witness::from_matrices`]. Equal to [`Witness::synthesize`] with the satisfaction check
    /// off, for a circuit whose constraints do not depend on its witness.
    ///
    /// With `check` on, the circuit (a clone of it) is also synthesized in full and compared:
    /// [`crate::Error::MatricesMismatch`] names the first variable, constraint evaluation or
    /// density bit that differs. Other errors: those of synthesis and of
    /// [`Witness::from_matrices`].
    pub fn synthesize_with<C: bellperson::Circuit<Scalar> + Clone>(
        circuit: C,
        matrices: &ConstraintMatrices,
        check: EvaluationCheck,
    ) -> Result<Witness> {
        matrices::synthesize_with_matrices(circuit, matrices, check)
    }

    /// The witness's sizes.
    pub fn shape(&self) -> WitnessShape {
        WitnessShape {
            num_constraints: self.a.len(),
            num_inputs: self.input_assignment.len(),
            num_aux: self.aux_assignment.len(),
            a_aux_total: self.a_aux_density.total(),
            b_input_total: self.b_input_density.total(),
            b_aux_total: self.b_aux_density.total(),
        }
    }

    /// The evaluation domain the constraints live on; the rule a witness must meet to be
    /// proved, checked at synthesis and again at submit (a witness's fields are public, so it
    /// may be built by hand).
    ///
    /// Every input, ONE included, has its own `input * 0 = 0` constraint, so a witness with
    /// fewer constraints than inputs is malformed ([`crate::Error::MalformedWitness`]). A
    /// witness needs [`Witness::MIN_CONSTRAINTS`], or it is the empty circuit's
    /// ([`crate::Error::EmptyCircuit`]).
    pub fn domain(&self) -> Result<Domain> {
        let (constraints, inputs) = (self.a.len(), self.input_assignment.len());
        if constraints < inputs {
            return Err(Error::MalformedWitness(format!(
                "{constraints} constraint evaluations for {inputs} inputs, but every input (ONE \
                 included) has its own `input * 0 = 0` constraint; make witnesses with Witness::synthesize"
            )));
        }
        if constraints < Self::MIN_CONSTRAINTS {
            return Err(Error::EmptyCircuit);
        }
        Domain::for_len(constraints)
    }

    /// The fewest constraints a provable witness has: ONE's input constraint and one more (an
    /// input's or the circuit's own). With ONE's alone the domain would have one point: the
    /// proof would attest nothing, and the device NTTs are defined from two points on.
    pub const MIN_CONSTRAINTS: usize = 2;

    /// Scalars for the A query, in the order of the parameters' `a` vector: every input, then
    /// the aux variables that occur in A.
    pub fn a_query_scalars(&self) -> Vec<Scalar> {
        let mut scalars = Vec::with_capacity(self.a_query_len());
        self.a_query_into(&mut scalars);
        scalars
    }

    /// How many scalars [`Witness::a_query_scalars`] returns.
    pub fn a_query_len(&self) -> usize {
        self.input_assignment.len() + self.a_aux_density.total()
    }

    /// Appends the A-query scalars to `out` (in parallel; e.g. straight into pinned memory).
    pub fn a_query_into(&self, out: &mut Vec<Scalar>) {
        out.extend_from_slice(&self.input_assignment);
        self.a_aux_density.select_into(&self.aux_assignment, out);
    }

    /// Scalars for the B queries (`b_g1` and `b_g2`): the inputs that occur in B, then the aux
    /// variables that occur in B.
    pub fn b_query_scalars(&self) -> Vec<Scalar> {
        let mut scalars = Vec::with_capacity(self.b_query_len());
        self.b_query_into(&mut scalars);
        scalars
    }

    /// How many scalars [`Witness::b_query_scalars`] returns.
    pub fn b_query_len(&self) -> usize {
        self.b_input_density.total() + self.b_aux_density.total()
    }

    /// Appends the B-query scalars to `out` (in parallel).
    pub fn b_query_into(&self, out: &mut Vec<Scalar>) {
        out.extend(self.b_input_density.select(&self.input_assignment));
        self.b_aux_density.select_into(&self.aux_assignment, out);
    }

    /// The public inputs without ONE: what a verifier takes.
    pub fn public_inputs(&self) -> &[Scalar] {
        self.input_assignment.get(1..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;

    #[test]
    fn density_counts_and_selects() {
        let density = Density::from_bits(vec![true, false, true, false]);
        assert_eq!((density.len(), density.total()), (4, 2));
        assert!(density.get(0) && !density.get(1) && !density.get(99));
        let values: Vec<Scalar> = (1..=4u64).map(Scalar::from).collect();
        let picked: Vec<Scalar> = density.select(&values).collect();
        assert_eq!(picked, vec![Scalar::from(1u64), Scalar::from(3u64)]);
    }

    #[test]
    fn select_into_equals_select_across_chunk_boundaries() {
        use rand::{Rng, SeedableRng};
        let seed: u64 = rand::random();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        // Empty, all used, none used, and random patterns around the chunk size (2^15).
        for (len, share) in [(0, 0.5), (1, 1.0), (5, 0.0), ((1 << 15) - 1, 0.5), (1 << 15, 1.0), (100_003, 0.3)] {
            let density = Density::from_bits((0..len).map(|_| rng.gen_bool(share)).collect());
            let values: Vec<Scalar> = (0..len as u64).map(Scalar::from).collect();
            let mut out = vec![Scalar::from(7u64)]; // appends after what is there
            density.select_into(&values, &mut out);
            let expected: Vec<Scalar> = std::iter::once(Scalar::from(7u64)).chain(density.select(&values)).collect();
            assert_eq!(out, expected, "len {len}, share {share}, seed {seed}");
            assert_eq!(out.len(), 1 + density.total());
        }
        // The negative twin: another density selects other values.
        let density = Density::from_bits(vec![true, false, true]);
        let mut out = Vec::new();
        density.select_into(&[Scalar::from(1u64), Scalar::from(2u64), Scalar::from(3u64)], &mut out);
        assert_ne!(out, vec![Scalar::from(1u64), Scalar::from(2u64)]);
    }

    /// A witness of `constraints` evaluations and `inputs` inputs, no aux.
    fn hand_built(constraints: usize, inputs: usize) -> Witness {
        Witness {
            a: vec![Scalar::ONE; constraints],
            b: vec![Scalar::ZERO; constraints],
            c: vec![Scalar::ZERO; constraints],
            input_assignment: vec![Scalar::ONE; inputs],
            aux_assignment: Vec::new(),
            a_aux_density: Density::default(),
            b_input_density: Density::from_bits(vec![false; inputs]),
            b_aux_density: Density::default(),
        }
    }

    #[test]
    fn a_provable_witness_has_two_constraints_and_one_per_input() {
        assert_eq!(hand_built(2, 1).domain().unwrap().log_n(), 1);
        assert_eq!(hand_built(3, 3).domain().unwrap().log_n(), 2);
        // The negative twins: ONE's constraint alone, none, fewer than the inputs.
        assert!(matches!(hand_built(1, 1).domain(), Err(crate::Error::EmptyCircuit)));
        for (constraints, inputs) in [(0, 1), (2, 3)] {
            let err = hand_built(constraints, inputs).domain().unwrap_err();
            assert!(matches!(err, crate::Error::MalformedWitness(_)), "{constraints} for {inputs} inputs: {err:?}");
        }
    }

    #[test]
    fn marking_twice_counts_once() {
        let mut density = Density::default();
        density.push_unused();
        density.push_unused();
        density.mark_used(1);
        density.mark_used(1);
        density.mark_used(7); // not tracked: ignored
        assert_eq!(density, Density::from_bits(vec![false, true]));
        // Negative twin: a different bit pattern is a different density.
        assert_ne!(density, Density::from_bits(vec![true, false]));
    }
}
