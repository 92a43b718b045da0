//! A fast Groth16 trusted setup with caller-chosen toxic waste, for test and benchmark keys.
//!
//! It produces exactly the `Parameters` that `bellperson::groth16::generate_parameters`
//! produces for the curve generators and the same secrets (the tests compare them), but
//! multiplies the fixed bases through precomputed byte-window tables: 32 mixed additions per
//! point instead of a full scalar multiplication.
//!
//! Past synthesis (the circuit's own callback, sequential) the host work runs on every core:
//! the Lagrange basis at tau comes from one batch inversion per chunk, and the circuit's terms
//! are recorded in blocks of consecutive variables, so that evaluating a block's A, B and C
//! polynomials is one task's alone.

use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::{Parameters, VerifyingKey};
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::{Bls12, G1Projective, G2Projective};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group};
use rayon::prelude::*;

use crate::backend::Device;
use crate::math::{filled, ntt::distribute_powers, Domain, FixedBase};
use crate::{Error, Result, Scalar};

/// The setup's secrets. Anyone who knows them can forge proofs: test keys only.
#[derive(Clone, Copy, Debug)]
pub struct ToxicWaste {
    pub alpha: Scalar,
    pub beta: Scalar,
    pub gamma: Scalar,
    pub delta: Scalar,
    pub tau: Scalar,
}

/// log2 of the variables per block of recorded terms: a block's evaluations (3 × 128 KiB)
/// stay in cache while its terms are added up.
const BLOCK_SHIFT: u32 = 12;
/// The terms one task adds up; a block's matrix with more (a variable in very many
/// constraints, such as ONE) is split across tasks.
const TERMS_PER_TASK: usize = 1 << 16;
/// Scalars per task when dropping the zero scalars of A and B.
const FILTER_CHUNK: usize = 1 << 14;

/// Runs the setup for `circuit` over the standard generators of G1 and G2, on the CPU.
pub fn setup<C: Circuit<Scalar>>(circuit: C, waste: &ToxicWaste) -> Result<Parameters<Bls12>> {
    setup_on(circuit, waste, None)
}

/// [`setup`], multiplying the fixed bases on `device` (the host's cores when `None`). Every
/// device gives the host's parameters exactly.
pub fn setup_on<C: Circuit<Scalar>>(
    circuit: C,
    waste: &ToxicWaste,
    device: Option<&dyn Device>,
) -> Result<Parameters<Bls12>> {
    let assembly = timed("synthesis", || KeyAssembly::synthesize(circuit, BLOCK_SHIFT))?;
    let domain = Domain::for_len(assembly.num_constraints)?;
    let scalars = KeyScalars::compute(&assembly, domain, waste)?;
    // The terms are no longer needed; free them before the points are made.
    drop(assembly);

    let (g1, g2) = timed("tables", || {
        rayon::join(|| FixedBase::new(G1Projective::generator()), || FixedBase::new(G2Projective::generator()))
    });
    let g1_mul = |name: &str, scalars: &[Scalar]| {
        timed(name, || match device {
            None => Ok(g1.mul_all(scalars)),
            Some(device) => device.fixed_base_g1(&g1, scalars),
        })
    };
    let g2_mul = |name: &str, scalars: &[Scalar]| {
        timed(name, || match device {
            None => Ok(g2.mul_all(scalars)),
            Some(device) => device.fixed_base_g2(&g2, scalars),
        })
    };
    let l = g1_mul("l points", &scalars.l)?;
    if timed("l identity check", || l.par_iter().any(|p| bool::from(p.is_identity()))) {
        return Err(SynthesisError::UnconstrainedVariable.into());
    }
    let one_g1 = |x: Scalar| (G1Projective::generator() * x).to_affine();
    let one_g2 = |x: Scalar| (G2Projective::generator() * x).to_affine();
    let vk = VerifyingKey {
        alpha_g1: one_g1(waste.alpha),
        beta_g1: one_g1(waste.beta),
        beta_g2: one_g2(waste.beta),
        gamma_g2: one_g2(waste.gamma),
        delta_g1: one_g1(waste.delta),
        delta_g2: one_g2(waste.delta),
        ic: g1.mul_all(&scalars.ic),
    };
    Ok(Parameters {
        vk,
        h: Arc::new(g1_mul("h points", &scalars.h)?),
        l: Arc::new(l),
        a: Arc::new(g1_mul("a points", &scalars.a)?),
        b_g1: Arc::new(g1_mul("b_g1 points", &scalars.b)?),
        b_g2: Arc::new(g2_mul("b_g2 points", &scalars.b)?),
    })
}

/// Runs `phase`, logging how long it took at debug level.
fn timed<T>(phase: &str, run: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = run();
    tracing::debug!(phase, elapsed_ms = start.elapsed().as_secs_f64() * 1e3, "setup phase done");
    out
}

/// The scalars by which the key's points multiply the generators.
struct KeyScalars {
    /// `tau^i · Z(tau) / delta` for `i < n − 1`.
    h: Vec<Scalar>,
    /// `(beta·A_j(tau) + alpha·B_j(tau) + C_j(tau)) / gamma` per input `j`.
    ic: Vec<Scalar>,
    /// The same over delta per aux variable.
    l: Vec<Scalar>,
    /// The nonzero `A_j(tau)`, inputs then aux: bellperson drops the points at infinity.
    a: Vec<Scalar>,
    /// The nonzero `B_j(tau)`, likewise.
    b: Vec<Scalar>,
}

impl KeyScalars {
    fn compute(assembly: &KeyAssembly, domain: Domain, waste: &ToxicWaste) -> Result<KeyScalars> {
        let invert = |x: Scalar| Option::<Scalar>::from(x.invert()).ok_or(Error::UnexpectedIdentity);
        let (gamma_inv, delta_inv) = (invert(waste.gamma)?, invert(waste.delta)?);

        let z_over_delta = domain.vanishing_at(waste.tau) * delta_inv;
        let h = timed("h scalars", || {
            let mut h = filled(domain.size() - 1, z_over_delta);
            distribute_powers(&mut h, waste.tau);
            h
        });
        let lagrange = timed("lagrange basis", || domain.lagrange_basis_at(waste.tau));
        let (inputs, aux) = timed("evaluate", || {
            rayon::join(
                || assembly.inputs.evaluate(&lagrange, waste, gamma_inv, TERMS_PER_TASK),
                || assembly.aux.evaluate(&lagrange, waste, delta_inv, TERMS_PER_TASK),
            )
        });
        drop(lagrange);
        let (a, b) = timed("nonzero", || rayon::join(|| nonzero(&inputs.at, &aux.at), || nonzero(&inputs.bt, &aux.bt)));
        Ok(KeyScalars { h, ic: inputs.combined, l: aux.combined, a, b })
    }
}

/// The nonzero scalars of `inputs` then `aux`, in order. Each chunk counts its own, then
/// fills its own slice of the result.
fn nonzero(inputs: &[Scalar], aux: &[Scalar]) -> Vec<Scalar> {
    // Scalars are canonical, so equality with zero is the (variable-time, fast) test.
    let is_nonzero = |x: &&Scalar| **x != Scalar::ZERO;
    let chunks: Vec<&[Scalar]> = inputs.chunks(FILTER_CHUNK).chain(aux.chunks(FILTER_CHUNK)).collect();
    let counts: Vec<usize> = chunks.par_iter().map(|chunk| chunk.iter().filter(is_nonzero).count()).collect();
    let mut out = filled(counts.iter().sum(), Scalar::ZERO);
    let mut rest = out.as_mut_slice();
    let mut slices = Vec::with_capacity(chunks.len());
    for &count in &counts {
        let (slice, tail) = std::mem::take(&mut rest).split_at_mut(count);
        slices.push(slice);
        rest = tail;
    }
    slices.into_par_iter().zip(chunks).for_each(|(slice, chunk)| {
        for (slot, x) in slice.iter_mut().zip(chunk.iter().filter(is_nonzero)) {
            *slot = *x;
        }
    });
    out
}

/// One of the QAP matrices.
#[derive(Clone, Copy, Debug)]
enum Matrix {
    A,
    B,
    C,
}

/// A term whose coefficient is one, the common case: only its place is stored, and adding it
/// up needs no multiplication.
#[derive(Clone, Copy)]
struct UnitTerm {
    constraint: u32,
    /// The variable's index within its block.
    offset: u32,
}

/// A term with any other coefficient.
#[derive(Clone, Copy)]
struct WeightedTerm {
    constraint: u32,
    offset: u32,
    coeff: Scalar,
}

/// One matrix's terms within one block of variables, in constraint order.
#[derive(Default)]
struct Terms {
    unit: Vec<UnitTerm>,
    weighted: Vec<WeightedTerm>,
}

impl Terms {
    fn push(&mut self, constraint: u32, offset: u32, coeff: &Scalar) {
        if *coeff == Scalar::ONE {
            self.unit.push(UnitTerm { constraint, offset });
        } else {
            self.weighted.push(WeightedTerm { constraint, offset, coeff: *coeff });
        }
    }

    fn len(&self) -> usize {
        self.unit.len() + self.weighted.len()
    }

    /// Adds `coeff · lagrange[constraint]` to `out[offset]` for every term: `out` is the
    /// block's polynomials at tau. Above `terms_per_task` terms, pieces of the terms are
    /// summed on every core and the partial sums added up.
    fn accumulate(&self, out: &mut [Scalar], lagrange: &[Scalar], terms_per_task: usize) {
        if self.len() <= terms_per_task {
            add_terms(out, &self.unit, &self.weighted, lagrange);
            return;
        }
        let unit_pieces = self.unit.par_chunks(terms_per_task).map(|unit| (unit, &[] as &[WeightedTerm]));
        let weighted_pieces = self.weighted.par_chunks(terms_per_task).map(|weighted| (&[] as &[UnitTerm], weighted));
        let sum = unit_pieces
            .chain(weighted_pieces)
            .fold(
                || vec![Scalar::ZERO; out.len()],
                |mut partial, (unit, weighted)| {
                    add_terms(&mut partial, unit, weighted, lagrange);
                    partial
                },
            )
            .reduce_with(|mut sum, partial| {
                sum.iter_mut().zip(&partial).for_each(|(s, p)| *s += p);
                sum
            });
        if let Some(sum) = sum {
            out.iter_mut().zip(&sum).for_each(|(o, s)| *o += s);
        }
    }
}

fn add_terms(out: &mut [Scalar], unit: &[UnitTerm], weighted: &[WeightedTerm], lagrange: &[Scalar]) {
    for term in unit {
        out[term.offset as usize] += lagrange[term.constraint as usize];
    }
    for term in weighted {
        out[term.offset as usize] += term.coeff * lagrange[term.constraint as usize];
    }
}

/// The A, B and C terms of one block of consecutive variables.
#[derive(Default)]
struct Block {
    a: Terms,
    b: Terms,
    c: Terms,
}

/// One kind of variable's (the inputs' or the aux's) terms, in blocks of `2^shift`
/// consecutive variables: no two blocks add to the same variable, so they evaluate in
/// parallel without sharing anything.
struct VariableBlocks {
    count: usize,
    shift: u32,
    blocks: Vec<Block>,
}

/// One kind of variable's QAP polynomials at tau.
#[cfg_attr(test, derive(PartialEq))]
struct Evaluations {
    /// `A_j(tau)` per variable `j`.
    at: Vec<Scalar>,
    /// `B_j(tau)`.
    bt: Vec<Scalar>,
    /// `(beta·A_j(tau) + alpha·B_j(tau) + C_j(tau)) · inv`.
    combined: Vec<Scalar>,
}

impl VariableBlocks {
    fn new(shift: u32) -> Self {
        assert!(shift < u32::BITS, "a block's offsets are u32");
        VariableBlocks { count: 0, shift, blocks: Vec::new() }
    }

    fn alloc(&mut self) -> usize {
        if self.count >> self.shift == self.blocks.len() {
            self.blocks.push(Block::default());
        }
        self.count += 1;
        self.count - 1
    }

    fn record(&mut self, variable: usize, constraint: u32, coeff: &Scalar, matrix: Matrix) {
        // A variable that was never allocated would index out of bounds later; it
        // contributes nothing a prover could use, so it is left out.
        if variable >= self.count {
            return;
        }
        let block = &mut self.blocks[variable >> self.shift];
        let terms = match matrix {
            Matrix::A => &mut block.a,
            Matrix::B => &mut block.b,
            Matrix::C => &mut block.c,
        };
        let offset = (variable & ((1 << self.shift) - 1)) as u32;
        terms.push(constraint, offset, coeff);
    }

    /// Every variable's polynomials at tau, given `lagrange[i] = L_i(tau)`, one block per task.
    fn evaluate(&self, lagrange: &[Scalar], waste: &ToxicWaste, inv: Scalar, terms_per_task: usize) -> Evaluations {
        let (mut at, mut bt, mut combined) =
            (filled(self.count, Scalar::ZERO), filled(self.count, Scalar::ZERO), filled(self.count, Scalar::ZERO));
        let width = 1 << self.shift;
        at.par_chunks_mut(width)
            .zip(bt.par_chunks_mut(width))
            .zip(combined.par_chunks_mut(width))
            .zip(self.blocks.par_iter())
            .for_each(|(((at, bt), ct), block)| {
                block.a.accumulate(at, lagrange, terms_per_task);
                block.b.accumulate(bt, lagrange, terms_per_task);
                block.c.accumulate(ct, lagrange, terms_per_task);
                // Most variables occur in A or in B, not in both: skip the products by zero.
                for ((a, b), c) in at.iter().zip(bt.iter()).zip(ct.iter_mut()) {
                    if *a != Scalar::ZERO {
                        *c += waste.beta * a;
                    }
                    if *b != Scalar::ZERO {
                        *c += waste.alpha * b;
                    }
                    *c *= inv;
                }
            });
        Evaluations { at, bt, combined }
    }
}

/// Records the circuit's structure (which variable occurs where, with which coefficient).
struct KeyAssembly {
    num_constraints: usize,
    inputs: VariableBlocks,
    aux: VariableBlocks,
}

impl KeyAssembly {
    /// Synthesizes `circuit` as bellperson does for a key: ONE is input 0, and every input
    /// gets an `input · 0 = 0` constraint after the circuit's own.
    fn synthesize<C: Circuit<Scalar>>(circuit: C, block_shift: u32) -> Result<KeyAssembly> {
        let mut assembly = KeyAssembly {
            num_constraints: 0,
            inputs: VariableBlocks::new(block_shift),
            aux: VariableBlocks::new(block_shift),
        };
        assembly.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
        circuit.synthesize(&mut assembly)?;
        for i in 0..assembly.inputs.count {
            assembly.enforce(|| "input", |lc| lc + Variable(Index::Input(i)), |lc| lc, |lc| lc);
        }
        Ok(assembly)
    }

    fn record(&mut self, lc: &LinearCombination<Scalar>, matrix: Matrix) {
        // A valid domain holds at most 2^32 constraints; a circuit with more is refused by
        // `Domain::for_len` once synthesized, whatever was recorded.
        let Ok(constraint) = u32::try_from(self.num_constraints) else {
            return;
        };
        for (&variable, coeff) in lc.iter_inputs() {
            self.inputs.record(variable, constraint, coeff, matrix);
        }
        for (&variable, coeff) in lc.iter_aux() {
            self.aux.record(variable, constraint, coeff, matrix);
        }
    }
}

impl ConstraintSystem<Scalar> for KeyAssembly {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        // Key generation needs no values, like bellperson's.
        Ok(Variable(Index::Aux(self.aux.alloc())))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        Ok(Variable(Index::Input(self.inputs.alloc())))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.record(&a(LinearCombination::zero()), Matrix::A);
        self.record(&b(LinearCombination::zero()), Matrix::B);
        self.record(&c(LinearCombination::zero()), Matrix::C);
        self.num_constraints += 1;
    }

    fn push_namespace<NR, N>(&mut self, _: N)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::fresh_rng;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// A random circuit with every kind of term: coefficients one, minus one, zero and random,
    /// repeated variables, ONE and aux 0 in most constraints (heavy blocks) and, with `stray`,
    /// variables that were never allocated. Every aux variable occurs in some C with a nonzero
    /// coefficient, so that no point of L is at infinity.
    #[derive(Clone, Copy)]
    struct RandomCircuit {
        seed: u64,
        num_inputs: usize,
        num_aux: usize,
        constraints: usize,
        stray: bool,
    }

    fn random_coeff(rng: &mut ChaCha8Rng) -> Scalar {
        match rng.gen_range(0..6) {
            0..=2 => Scalar::ONE,
            3 => -Scalar::ONE,
            4 => Scalar::ZERO,
            _ => Scalar::random(rng),
        }
    }

    impl Circuit<Scalar> for RandomCircuit {
        fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            let mut inputs = vec![CS::one()];
            for i in 0..self.num_inputs {
                inputs.push(cs.alloc_input(|| format!("input {i}"), || Ok(Scalar::ONE))?);
            }
            let mut aux = Vec::new();
            for i in 0..self.num_aux {
                aux.push(cs.alloc(|| format!("aux {i}"), || Ok(Scalar::ONE))?);
            }
            let side = |rng: &mut ChaCha8Rng| {
                let mut terms = Vec::new();
                if rng.gen_bool(0.7) {
                    terms.push((random_coeff(rng), inputs[0]));
                }
                if rng.gen_bool(0.5) {
                    terms.push((random_coeff(rng), aux[0]));
                }
                for _ in 0..rng.gen_range(0..4) {
                    let variable = if rng.gen_bool(0.3) {
                        inputs[rng.gen_range(0..inputs.len())]
                    } else {
                        aux[rng.gen_range(0..aux.len())]
                    };
                    terms.push((random_coeff(rng), variable));
                }
                if self.stray && rng.gen_bool(0.2) {
                    let index = match rng.gen_bool(0.5) {
                        true => Index::Input(inputs.len() + rng.gen_range(0..3)),
                        false => Index::Aux(aux.len() + rng.gen_range(0..3)),
                    };
                    terms.push((random_coeff(rng), Variable::new_unchecked(index)));
                }
                terms
            };
            for j in 0..self.constraints {
                let (a, b, mut c) = (side(&mut rng), side(&mut rng), side(&mut rng));
                c.push((Scalar::random(&mut rng), aux[j % aux.len()]));
                let add_all = |lc, terms: &[(Scalar, Variable)]| terms.iter().fold(lc, |lc, &term| lc + term);
                cs.enforce(
                    || format!("constraint {j}"),
                    |lc| add_all(lc, &a),
                    |lc| add_all(lc, &b),
                    |lc| add_all(lc, &c),
                );
            }
            Ok(())
        }
    }

    /// Every term as it comes, evaluated by the straightforward sequential scatter.
    #[derive(Clone, Default)]
    struct ReferenceAssembly {
        num_inputs: usize,
        num_aux: usize,
        num_constraints: usize,
        terms: Vec<(Matrix, Index, usize, Scalar)>,
    }

    impl ReferenceAssembly {
        fn synthesize(circuit: impl Circuit<Scalar>) -> Self {
            let mut assembly = ReferenceAssembly::default();
            assembly.alloc_input(|| "ONE", || Ok(Scalar::ONE)).unwrap();
            circuit.synthesize(&mut assembly).unwrap();
            for i in 0..assembly.num_inputs {
                assembly.enforce(|| "input", |lc| lc + Variable(Index::Input(i)), |lc| lc, |lc| lc);
            }
            assembly
        }

        /// The inputs' evaluations, then the aux's.
        fn evaluate(&self, lagrange: &[Scalar], waste: &ToxicWaste, inv: Scalar) -> [Evaluations; 2] {
            let zeros = |n| vec![Scalar::ZERO; n];
            let counts = [self.num_inputs, self.num_aux];
            let mut evaluations = counts.map(|n| Evaluations { at: zeros(n), bt: zeros(n), combined: zeros(n) });
            for &(matrix, index, constraint, coeff) in &self.terms {
                let (kind, variable) = match index {
                    Index::Input(i) => (0, i),
                    Index::Aux(i) => (1, i),
                };
                if variable >= counts[kind] {
                    continue;
                }
                let e = &mut evaluations[kind];
                let target = match matrix {
                    Matrix::A => &mut e.at,
                    Matrix::B => &mut e.bt,
                    Matrix::C => &mut e.combined,
                };
                target[variable] += coeff * lagrange[constraint];
            }
            for e in &mut evaluations {
                for j in 0..e.at.len() {
                    e.combined[j] = (waste.beta * e.at[j] + waste.alpha * e.bt[j] + e.combined[j]) * inv;
                }
            }
            evaluations
        }
    }

    impl ConstraintSystem<Scalar> for ReferenceAssembly {
        type Root = Self;

        fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            self.num_aux += 1;
            Ok(Variable(Index::Aux(self.num_aux - 1)))
        }

        fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
        where
            F: FnOnce() -> Result<Scalar, SynthesisError>,
            A: FnOnce() -> AR,
            AR: Into<String>,
        {
            self.num_inputs += 1;
            Ok(Variable(Index::Input(self.num_inputs - 1)))
        }

        fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
        where
            A: FnOnce() -> AR,
            AR: Into<String>,
            LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
            LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        {
            for (matrix, lc) in [
                (Matrix::A, a(LinearCombination::zero())),
                (Matrix::B, b(LinearCombination::zero())),
                (Matrix::C, c(LinearCombination::zero())),
            ] {
                for (variable, coeff) in lc.iter() {
                    self.terms.push((matrix, variable.get_unchecked(), self.num_constraints, *coeff));
                }
            }
            self.num_constraints += 1;
        }

        fn push_namespace<NR, N>(&mut self, _: N)
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

    #[test]
    fn block_evaluation_equals_sequential_reference() {
        let mut rng = fresh_rng("block_evaluation_equals_sequential_reference");
        // Blocks of one variable and single-term tasks, small blocks split often, one block
        // never split, and the real sizes.
        for (block_shift, terms_per_task) in [(0, 1), (2, 3), (3, 1 << 20), (BLOCK_SHIFT, TERMS_PER_TASK)] {
            let circuit = RandomCircuit { seed: rng.gen(), num_inputs: 5, num_aux: 37, constraints: 80, stray: true };
            let assembly = KeyAssembly::synthesize(circuit, block_shift).unwrap();
            let reference = ReferenceAssembly::synthesize(circuit);
            assert_eq!(assembly.num_constraints, reference.num_constraints);
            let lagrange: Vec<Scalar> = (0..assembly.num_constraints).map(|_| Scalar::random(&mut rng)).collect();
            let waste = random_waste(&mut rng);
            let inv = Scalar::random(&mut rng);
            let ours = [
                assembly.inputs.evaluate(&lagrange, &waste, inv, terms_per_task),
                assembly.aux.evaluate(&lagrange, &waste, inv, terms_per_task),
            ];
            let expected = reference.evaluate(&lagrange, &waste, inv);
            assert!(ours == expected, "block shift {block_shift}, {terms_per_task} terms per task");

            // Negative twin: one coefficient off by one changes the evaluations.
            let mut perturbed = reference.clone();
            let allocated = |index: &Index| match *index {
                Index::Input(i) => i < reference.num_inputs,
                Index::Aux(i) => i < reference.num_aux,
            };
            let k = perturbed.terms.iter().position(|term| allocated(&term.1)).unwrap();
            perturbed.terms[k].3 += Scalar::ONE;
            assert!(ours != perturbed.evaluate(&lagrange, &waste, inv), "block shift {block_shift}");
        }
    }

    #[test]
    fn random_circuit_equals_bellperson_generate_parameters() {
        let mut rng = fresh_rng("random_circuit_equals_bellperson_generate_parameters");
        let circuit = RandomCircuit { seed: rng.gen(), num_inputs: 3, num_aux: 50, constraints: 70, stray: false };
        let waste = random_waste(&mut rng);
        let expected = bellperson_setup(circuit, &waste);
        assert!(setup(circuit, &waste).unwrap() == expected);
        // Negative twin: another alpha gives other parameters.
        let other = ToxicWaste { alpha: waste.alpha + Scalar::ONE, ..waste };
        assert!(setup(circuit, &other).unwrap() != expected);
    }

    fn random_waste(rng: &mut ChaCha8Rng) -> ToxicWaste {
        ToxicWaste {
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
            tau: Scalar::random(&mut *rng),
        }
    }

    fn bellperson_setup(circuit: impl Circuit<Scalar>, w: &ToxicWaste) -> Parameters<Bls12> {
        bellperson::groth16::generate_parameters::<Bls12, _>(
            circuit,
            G1Projective::generator(),
            G2Projective::generator(),
            w.alpha,
            w.beta,
            w.gamma,
            w.delta,
            w.tau,
        )
        .unwrap()
    }
}
