//! The constraint system that turns a circuit into a [`Witness`].
//!
//! It records what bellperson's `ProvingAssignment` records (evaluations of A, B, C per
//! constraint; A-aux, B-input and B-aux densities from nonzero coefficients), plus two things
//! bellperson does not do: an optional satisfaction check that names the first violated
//! constraint, and an error instead of a panic when a constraint uses an unallocated variable.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use ff::Field;

use super::{Density, SatisfactionCheck, Witness};
use crate::{Error, Result, Scalar};

/// Runs `circuit` and returns its witness; see [`Witness::synthesize`].
pub(super) fn synthesize_witness<C: bellperson::Circuit<Scalar>>(
    circuit: C,
    check: SatisfactionCheck,
) -> Result<Witness> {
    let mut assembly = WitnessAssembly::new(check);
    assembly.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut assembly)?;
    assembly.finish()
}

/// A `ConstraintSystem` that evaluates every constraint at the witness as it is enforced.
struct WitnessAssembly {
    check: SatisfactionCheck,
    /// The namespace path, kept only while checking (names cost a closure call and a String).
    namespace: Vec<String>,
    witness: Witness,
    /// The first constraint the witness violates, with its full name.
    first_unsatisfied: Option<(usize, String)>,
    /// An error that `enforce` cannot return (it has no `Result`), reported after synthesis.
    deferred: Option<Error>,
}

impl WitnessAssembly {
    fn new(check: SatisfactionCheck) -> Self {
        WitnessAssembly {
            check,
            namespace: Vec::new(),
            witness: Witness {
                a: Vec::new(),
                b: Vec::new(),
                c: Vec::new(),
                input_assignment: Vec::new(),
                aux_assignment: Vec::new(),
                a_aux_density: Density::default(),
                b_input_density: Density::default(),
                b_aux_density: Density::default(),
            },
            first_unsatisfied: None,
            deferred: None,
        }
    }

    /// Appends the input constraints and reports what synthesis found.
    fn finish(mut self) -> Result<Witness> {
        if let Some(error) = self.deferred.take() {
            return Err(error);
        }
        if let Some((index, name)) = self.first_unsatisfied.take() {
            return Err(Error::Unsatisfied { index, name: Some(name) });
        }
        // bellperson's `input * 0 = 0` per input: it makes every input occur in A (so the A
        // query has a point per input) and keeps the input polynomials linearly independent.
        // B and C are zero, so B densities are untouched and the constraint always holds.
        let witness = &mut self.witness;
        witness.a.extend_from_slice(&witness.input_assignment);
        witness.b.resize(witness.a.len(), Scalar::ZERO);
        witness.c.resize(witness.a.len(), Scalar::ZERO);
        // The input constraints count, as in bellperson: a circuit of public inputs alone has
        // constraints and proves. Only the circuit with ONE's constraint alone is refused, by
        // the rule every witness meets at submit.
        self.witness.domain()?;
        Ok(self.witness)
    }

    /// Evaluates `lc` at the witness, marking the variables it uses in the given densities.
    fn evaluate(
        &mut self,
        lc: &LinearCombination<Scalar>,
        mut input_density: Option<&mut Density>,
        mut aux_density: Option<&mut Density>,
    ) -> Scalar {
        let mut sum = Scalar::ZERO;
        let inputs = lc.iter_inputs().map(|(i, coeff)| (Index::Input(*i), coeff));
        let aux = lc.iter_aux().map(|(i, coeff)| (Index::Aux(*i), coeff));
        for (index, coeff) in inputs.chain(aux) {
            // bellperson skips zero coefficients, for the value and for the density alike.
            if coeff.is_zero_vartime() {
                continue;
            }
            let (value, density, i) = match index {
                Index::Input(i) => (self.witness.input_assignment.get(i), input_density.as_deref_mut(), i),
                Index::Aux(i) => (self.witness.aux_assignment.get(i), aux_density.as_deref_mut(), i),
            };
            let Some(value) = value else {
                let constraint = self.witness.a.len();
                self.deferred.get_or_insert_with(|| {
                    Error::Synthesis(format!("constraint {constraint} uses {index:?}, which was never allocated"))
                });
                continue;
            };
            sum += if *coeff == Scalar::ONE { *value } else { *value * coeff };
            if let Some(density) = density {
                density.mark_used(i);
            }
        }
        sum
    }
}

impl ConstraintSystem<Scalar> for WitnessAssembly {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _annotation: A, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.witness.aux_assignment.push(value()?);
        self.witness.a_aux_density.push_unused();
        self.witness.b_aux_density.push_unused();
        Ok(Variable(Index::Aux(self.witness.aux_assignment.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _annotation: A, value: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.witness.input_assignment.push(value()?);
        self.witness.b_input_density.push_unused();
        Ok(Variable(Index::Input(self.witness.input_assignment.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, annotation: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let (la, lb, lc) = (a(LinearCombination::zero()), b(LinearCombination::zero()), c(LinearCombination::zero()));
        // The densities are moved out for the duration so `evaluate` can borrow `self`.
        let mut a_aux = std::mem::take(&mut self.witness.a_aux_density);
        let mut b_input = std::mem::take(&mut self.witness.b_input_density);
        let mut b_aux = std::mem::take(&mut self.witness.b_aux_density);
        // Inputs need no A density: each has its own input constraint, so all occur in A.
        let a_value = self.evaluate(&la, None, Some(&mut a_aux));
        let b_value = self.evaluate(&lb, Some(&mut b_input), Some(&mut b_aux));
        // There is no C query, so C needs no density.
        let c_value = self.evaluate(&lc, None, None);
        self.witness.a_aux_density = a_aux;
        self.witness.b_input_density = b_input;
        self.witness.b_aux_density = b_aux;

        if self.check == SatisfactionCheck::On && self.first_unsatisfied.is_none() && a_value * b_value != c_value {
            let mut path = self.namespace.clone();
            path.push(annotation().into());
            self.first_unsatisfied = Some((self.witness.a.len(), path.join("/")));
        }
        self.witness.a.push(a_value);
        self.witness.b.push(b_value);
        self.witness.c.push(c_value);
    }

    fn push_namespace<NR, N>(&mut self, name: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
        if self.check == SatisfactionCheck::On {
            self.namespace.push(name().into());
        }
    }

    fn pop_namespace(&mut self) {
        if self.check == SatisfactionCheck::On {
            self.namespace.pop();
        }
    }

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use bellperson::Circuit;

    /// x * y = z with x, y aux and z an input; `wrong` breaks the second constraint.
    struct Product {
        x: Option<Scalar>,
        y: Option<Scalar>,
        wrong: bool,
    }

    impl Circuit<Scalar> for Product {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let product = self.x.zip(self.y).map(|(x, y)| x * y);
            let x = cs.alloc(|| "x", || self.x.ok_or(SynthesisError::AssignmentMissing))?;
            let y = cs.alloc(|| "y", || self.y.ok_or(SynthesisError::AssignmentMissing))?;
            let z = cs.alloc_input(|| "z", || product.ok_or(SynthesisError::AssignmentMissing))?;
            cs.enforce(|| "x is x", |lc| lc + x, |lc| lc + CS::one(), |lc| lc + x);
            let mut ns = cs.namespace(|| "gadget");
            let extra = if self.wrong { Scalar::ONE } else { Scalar::ZERO };
            ns.enforce(|| "x * y = z", |lc| lc + x, |lc| lc + y, |lc| lc + z + (extra, CS::one()));
            Ok(())
        }
    }

    #[test]
    fn records_evaluations_and_densities() {
        let (x, y) = (Scalar::from(3u64), Scalar::from(5u64));
        let witness =
            Witness::synthesize(Product { x: Some(x), y: Some(y), wrong: false }, SatisfactionCheck::On).unwrap();
        let z = Scalar::from(15u64);
        assert_eq!(witness.input_assignment, vec![Scalar::ONE, z]);
        assert_eq!(witness.aux_assignment, vec![x, y]);
        // Two circuit constraints, then one per input (ONE and z).
        assert_eq!(witness.a, vec![x, x, Scalar::ONE, z]);
        assert_eq!(witness.b, vec![Scalar::ONE, y, Scalar::ZERO, Scalar::ZERO]);
        assert_eq!(witness.c, vec![x, z, Scalar::ZERO, Scalar::ZERO]);
        assert_eq!(witness.a_aux_density, Density::from_bits(vec![true, false]));
        assert_eq!(witness.b_input_density, Density::from_bits(vec![true, false]));
        assert_eq!(witness.b_aux_density, Density::from_bits(vec![false, true]));
        assert_eq!(witness.public_inputs(), &[z]);
        assert_eq!(witness.a_query_scalars(), vec![Scalar::ONE, z, x]);
        assert_eq!(witness.b_query_scalars(), vec![Scalar::ONE, y]);
    }

    #[test]
    fn unsatisfied_constraint_is_named() {
        let circuit = Product { x: Some(Scalar::from(3u64)), y: Some(Scalar::from(5u64)), wrong: true };
        match Witness::synthesize(circuit, SatisfactionCheck::On) {
            Err(Error::Unsatisfied { index, name }) => {
                assert_eq!(index, 1);
                assert_eq!(name.as_deref(), Some("gadget/x * y = z"));
            }
            other => panic!("expected Unsatisfied, got {other:?}"),
        }
    }

    #[test]
    fn unsatisfied_constraint_passes_with_the_check_off() {
        let circuit = Product { x: Some(Scalar::from(3u64)), y: Some(Scalar::from(5u64)), wrong: true };
        assert!(Witness::synthesize(circuit, SatisfactionCheck::Off).is_ok());
    }

    #[test]
    fn missing_value_is_reported() {
        let circuit = Product { x: None, y: Some(Scalar::ONE), wrong: false };
        assert!(matches!(Witness::synthesize(circuit, SatisfactionCheck::Off), Err(Error::MissingAssignment)));
    }

    /// Allocates `inputs` public inputs and enforces nothing (the matrices' tests use it too).
    pub(in crate::circuit) struct InputsOnly {
        pub(in crate::circuit) inputs: usize,
    }

    impl Circuit<Scalar> for InputsOnly {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            for i in 0..self.inputs {
                cs.alloc_input(|| format!("input {i}"), || Ok(Scalar::from(i as u64 + 2)))?;
            }
            Ok(())
        }
    }

    #[test]
    fn inputs_without_constraints_have_their_input_constraints() {
        let witness = Witness::synthesize(InputsOnly { inputs: 1 }, SatisfactionCheck::On).unwrap();
        let two = Scalar::from(2u64);
        assert_eq!(witness.a, vec![Scalar::ONE, two]);
        assert_eq!((&witness.b, &witness.c), (&vec![Scalar::ZERO; 2], &vec![Scalar::ZERO; 2]));
        assert_eq!(witness.domain().unwrap().log_n(), 1);
        // The negative twin: without an input, ONE's constraint is the only one.
        let empty = Witness::synthesize(InputsOnly { inputs: 0 }, SatisfactionCheck::Off);
        assert!(matches!(empty, Err(Error::EmptyCircuit)), "{empty:?}");
    }

    struct UsesUnallocated;
    impl Circuit<Scalar> for UsesUnallocated {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let ghost = Variable::new_unchecked(Index::Aux(5));
            cs.enforce(|| "ghost", |lc| lc + ghost, |lc| lc, |lc| lc);
            Ok(())
        }
    }

    #[test]
    fn unallocated_variable_is_an_error_not_a_panic() {
        assert!(matches!(Witness::synthesize(UsesUnallocated, SatisfactionCheck::Off), Err(Error::Synthesis(_))));
    }
}
