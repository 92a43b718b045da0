//! Witness-only synthesis: the values of a circuit's variables without its constraints, and
//! the checks that compare what the matrices give with what full synthesis gives.

use super::*;

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
pub(in crate::circuit) fn witness_from_matrices(
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
pub(in crate::circuit) fn synthesize_with_matrices<C: Circuit<Scalar> + Clone>(
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
