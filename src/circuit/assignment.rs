//! A partition synthesized witness-only, whose a, b and c are left to the device: the
//! variables' values and the recorded constraint matrices that turn them into the constraint
//! evaluations ([`crate::backend::DeviceStream::evaluate_constraints`]). The host then stages
//! the assignment only, not three vectors the size of the domain.

use std::sync::Arc;

use rayon::prelude::*;

use super::{ConstraintMatrices, Density, Witness, WitnessShape};
use crate::math::Domain;
use crate::{Error, Result, Scalar};

/// The values of a circuit's variables, with the matrices of its shape.
///
/// Invariant: the assignment has exactly the matrices' numbers of inputs (ONE first) and aux
/// variables ([`Assignment::new`] checks), so the device's evaluation never reads past it.
#[derive(Clone, Debug)]
pub struct Assignment {
    input_assignment: Vec<Scalar>,
    aux_assignment: Vec<Scalar>,
    matrices: Arc<ConstraintMatrices>,
}

impl Assignment {
    /// Pairs an assignment with the matrices it is evaluated by.
    ///
    /// Errors: [`Error::MalformedWitness`] when its counts of inputs or aux variables are not
    /// the matrices' (the assignment is of another circuit shape), or when the matrices make no
    /// domain.
    pub fn new(matrices: Arc<ConstraintMatrices>, inputs: Vec<Scalar>, aux: Vec<Scalar>) -> Result<Assignment> {
        for (what, got, recorded) in
            [("inputs", inputs.len(), matrices.num_inputs()), ("aux", aux.len(), matrices.num_aux())]
        {
            if got != recorded {
                return Err(Error::MalformedWitness(format!(
                    "an assignment of {got} {what} for constraint matrices recorded with {recorded} {what}: \
                     the circuit allocated other variables than the one its key's matrices were recorded from"
                )));
            }
        }
        let assignment = Assignment { input_assignment: inputs, aux_assignment: aux, matrices };
        assignment.domain()?;
        Ok(assignment)
    }

    /// The inputs, ONE first.
    pub fn input_assignment(&self) -> &[Scalar] {
        &self.input_assignment
    }

    pub fn aux_assignment(&self) -> &[Scalar] {
        &self.aux_assignment
    }

    /// The public inputs (without ONE), which the proof is verified against.
    pub fn public_inputs(&self) -> &[Scalar] {
        self.input_assignment.get(1..).unwrap_or(&[])
    }

    pub fn matrices(&self) -> &Arc<ConstraintMatrices> {
        &self.matrices
    }

    pub fn a_aux_density(&self) -> &Density {
        self.matrices.a_aux_density()
    }

    pub fn b_input_density(&self) -> &Density {
        self.matrices.b_input_density()
    }

    pub fn b_aux_density(&self) -> &Density {
        self.matrices.b_aux_density()
    }

    /// The shape of the witness it evaluates to: the matrices'.
    pub fn shape(&self) -> WitnessShape {
        self.matrices.shape()
    }

    /// The domain of its constraints, by the rule [`Witness::domain`] applies.
    pub fn domain(&self) -> Result<Domain> {
        let (constraints, inputs) = (self.matrices.num_constraints(), self.matrices.num_inputs());
        if constraints < inputs {
            return Err(Error::MalformedWitness(format!(
                "constraint matrices of {constraints} constraints for {inputs} inputs, but every input has its own constraint"
            )));
        }
        if constraints < Witness::MIN_CONSTRAINTS {
            return Err(Error::EmptyCircuit);
        }
        Domain::for_len(constraints)
    }

    /// The whole witness, evaluated on the host: for a partition that cannot be evaluated on
    /// its device (a key streamed through chunks), and to tell a wrong device from a circuit
    /// whose structure follows its witness.
    pub fn evaluate(&self) -> Result<Witness> {
        Witness::from_matrices(&self.matrices, self.input_assignment.clone(), self.aux_assignment.clone())
    }

    /// [`Assignment::evaluate`], checked to satisfy the matrices (a·b = c at every constraint,
    /// in parallel). Errors: [`Error::MatricesMismatch`] naming the first constraint that does
    /// not hold: the circuit's constraints depend on its witness, so its key's matrices are no
    /// use (the caller marks its recording unusable).
    pub fn evaluate_checked(&self) -> Result<Witness> {
        let witness = self.evaluate()?;
        match first_unsatisfied(&witness) {
            None => Ok(witness),
            Some(index) => Err(Error::MatricesMismatch {
                what: "satisfaction",
                index,
                detail: "the witness from the recorded matrices violates this constraint".into(),
            }),
        }
    }

    /// Host bytes the assignment holds (the matrices are the key's, shared).
    pub fn host_bytes(&self) -> u64 {
        ((self.input_assignment.len() + self.aux_assignment.len()) * std::mem::size_of::<Scalar>()) as u64
    }
}

/// The first constraint of `witness` whose a·b is not c, if any.
fn first_unsatisfied(witness: &Witness) -> Option<usize> {
    (0..witness.a.len()).into_par_iter().find_first(|&i| witness.a[i] * witness.b[i] != witness.c[i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::circuit::{witness_assignment, SatisfactionCheck};
    use bellperson::{ConstraintSystem, SynthesisError};
    use ff::Field;

    /// x^3 + x + 5 = y, y public.
    struct Cubic(u64);

    impl bellperson::Circuit<Scalar> for Cubic {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> std::result::Result<(), SynthesisError> {
            let x = Scalar::from(self.0);
            let xv = cs.alloc(|| "x", || Ok(x))?;
            let x2 = cs.alloc(|| "x2", || Ok(x * x))?;
            let x3 = cs.alloc(|| "x3", || Ok(x * x * x))?;
            let y = cs.alloc_input(|| "y", || Ok(x * x * x + x + Scalar::from(5u64)))?;
            cs.enforce(|| "x2", |lc| lc + xv, |lc| lc + xv, |lc| lc + x2);
            cs.enforce(|| "x3", |lc| lc + x2, |lc| lc + xv, |lc| lc + x3);
            cs.enforce(|| "y", |lc| lc + x3 + xv + (Scalar::from(5u64), CS::one()), |lc| lc + CS::one(), |lc| lc + y);
            Ok(())
        }
    }

    #[test]
    fn evaluates_to_the_full_synthesis_and_refuses_another_shape() {
        let matrices = Arc::new(ConstraintMatrices::record(Cubic(0)).unwrap());
        for x in [1u64, 2, 77] {
            let (inputs, aux) = witness_assignment(Cubic(x)).unwrap();
            let assignment = Assignment::new(matrices.clone(), inputs, aux).unwrap();
            let full = Witness::synthesize(Cubic(x), SatisfactionCheck::On).unwrap();
            let evaluated = assignment.evaluate().unwrap();
            assert_eq!((evaluated.a, evaluated.b, evaluated.c), (full.a.clone(), full.b.clone(), full.c.clone()));
            assert_eq!(assignment.shape(), full.shape());
            assert_eq!(assignment.domain().unwrap().log_n(), full.domain().unwrap().log_n());
            assert_eq!(assignment.public_inputs(), full.public_inputs());
            assert!(assignment.evaluate_checked().is_ok());
        }
        // One aux value short, and one too many: another shape.
        let (inputs, mut aux) = witness_assignment(Cubic(3)).unwrap();
        aux.pop();
        assert!(matches!(
            Assignment::new(matrices.clone(), inputs.clone(), aux.clone()),
            Err(Error::MalformedWitness(_))
        ));
        aux.extend([Scalar::ONE, Scalar::ONE]);
        assert!(matches!(Assignment::new(matrices, inputs, aux), Err(Error::MalformedWitness(_))));
    }

    #[test]
    fn a_wrong_value_is_found_at_its_constraint() {
        let matrices = Arc::new(ConstraintMatrices::record(Cubic(0)).unwrap());
        let (inputs, mut aux) = witness_assignment(Cubic(4)).unwrap();
        aux[1] += Scalar::ONE; // x2 no longer x·x: constraint 0 fails first
        let assignment = Assignment::new(matrices, inputs, aux).unwrap();
        let err = assignment.evaluate_checked().unwrap_err();
        assert!(matches!(err, Error::MatricesMismatch { what: "satisfaction", index: 0, .. }), "{err}");
    }
}
