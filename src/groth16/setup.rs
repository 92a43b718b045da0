//! A fast Groth16 trusted setup with caller-chosen toxic waste, for test and benchmark keys.
//!
//! It produces exactly the `Parameters` that `bellperson::groth16::generate_parameters`
//! produces for the curve generators and the same secrets (the tests compare them), but
//! multiplies the fixed bases through precomputed byte-window tables: 32 mixed additions per
//! point instead of a full scalar multiplication.

use std::sync::Arc;

use bellperson::groth16::{Parameters, VerifyingKey};
use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::{Bls12, G1Projective, G2Projective};
use ff::{Field, PrimeField};
use group::{
    prime::{PrimeCurve, PrimeCurveAffine},
    Curve, Group,
};
use rayon::prelude::*;

use crate::math::{intt, ntt::distribute_powers, Domain};
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

/// Points per rayon task when multiplying the fixed bases.
const POINTS_PER_TASK: usize = 1 << 10;

/// Where the setup multiplies its fixed bases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupEngine {
    /// Every core of the host, through blstrs.
    Cpu,
    /// GPU 0, through kernels/setup/fixed_base.cu: seconds instead of minutes at 2^24 and up.
    Gpu,
}

impl SetupEngine {
    /// The GPU when a CUDA driver reports one, else the CPU.
    pub fn auto() -> SetupEngine {
        if crate::backend::cuda::cuda_available() {
            SetupEngine::Gpu
        } else {
            SetupEngine::Cpu
        }
    }
}

/// Runs the setup for `circuit` over the standard generators of G1 and G2, on the CPU.
pub fn setup<C: Circuit<Scalar>>(circuit: C, waste: &ToxicWaste) -> Result<Parameters<Bls12>> {
    setup_on(circuit, waste, SetupEngine::Cpu)
}

/// [`setup`], multiplying the fixed bases on `engine`. Both engines give identical parameters.
pub fn setup_on<C: Circuit<Scalar>>(circuit: C, waste: &ToxicWaste, engine: SetupEngine) -> Result<Parameters<Bls12>> {
    let mut assembly = KeyAssembly::default();
    assembly.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut assembly)?;
    for i in 0..assembly.num_inputs {
        assembly.enforce(|| "input", |lc| lc + Variable(Index::Input(i)), |lc| lc, |lc| lc);
    }

    let domain = Domain::for_len(assembly.num_constraints)?;
    let invert = |x: Scalar| Option::<Scalar>::from(x.invert()).ok_or(Error::UnexpectedIdentity);
    let (gamma_inv, delta_inv) = (invert(waste.gamma)?, invert(waste.delta)?);

    // tau^i for i < n, then (by an inverse NTT) the Lagrange basis at tau.
    let mut powers = vec![Scalar::ONE; domain.size()];
    distribute_powers(&mut powers, waste.tau);
    let z_over_delta = domain.vanishing_at(waste.tau) * delta_inv;
    let h_scalars: Vec<Scalar> = powers[..domain.size() - 1].par_iter().map(|p| *p * z_over_delta).collect();
    let mut lagrange = powers;
    intt(&mut lagrange, domain);

    let evaluate = |terms: &[Term], count: usize| {
        let mut at = vec![Scalar::ZERO; count];
        for term in terms {
            at[term.variable] += term.coeff * lagrange[term.constraint];
        }
        at
    };
    let (ni, na) = (assembly.num_inputs, assembly.num_aux);
    let (at_inputs, bt_inputs, ct_inputs) =
        (evaluate(&assembly.a_inputs, ni), evaluate(&assembly.b_inputs, ni), evaluate(&assembly.c_inputs, ni));
    let (at_aux, bt_aux, ct_aux) =
        (evaluate(&assembly.a_aux, na), evaluate(&assembly.b_aux, na), evaluate(&assembly.c_aux, na));

    // (beta·A + alpha·B + C) / gamma for inputs (ic), / delta for aux (l).
    let combine = |at: &[Scalar], bt: &[Scalar], ct: &[Scalar], inv: Scalar| -> Vec<Scalar> {
        (0..at.len()).into_par_iter().map(|i| (waste.beta * at[i] + waste.alpha * bt[i] + ct[i]) * inv).collect()
    };
    let ic_scalars = combine(&at_inputs, &bt_inputs, &ct_inputs, gamma_inv);
    let l_scalars = combine(&at_aux, &bt_aux, &ct_aux, delta_inv);
    // bellperson drops the A and B points at infinity, i.e. those of zero scalars.
    let nonzero = |inputs: &[Scalar], aux: &[Scalar]| -> Vec<Scalar> {
        inputs.iter().chain(aux).filter(|x| !bool::from(x.is_zero())).copied().collect()
    };
    let a_scalars = nonzero(&at_inputs, &at_aux);
    let b_scalars = nonzero(&bt_inputs, &bt_aux);

    let g1 = FixedBase::new(G1Projective::generator());
    let g2 = FixedBase::new(G2Projective::generator());
    let g1_mul = |scalars: &[Scalar]| match engine {
        SetupEngine::Cpu => Ok(g1.mul_all(scalars)),
        SetupEngine::Gpu => crate::backend::cuda::fixed_base_g1(&g1.table(), scalars),
    };
    let g2_mul = |scalars: &[Scalar]| match engine {
        SetupEngine::Cpu => Ok(g2.mul_all(scalars)),
        SetupEngine::Gpu => crate::backend::cuda::fixed_base_g2(&g2.table(), scalars),
    };
    let l = g1_mul(&l_scalars)?;
    if l.iter().any(|p| bool::from(p.is_identity())) {
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
        ic: g1.mul_all(&ic_scalars),
    };
    Ok(Parameters {
        vk,
        h: Arc::new(g1_mul(&h_scalars)?),
        l: Arc::new(l),
        a: Arc::new(g1_mul(&a_scalars)?),
        b_g1: Arc::new(g1_mul(&b_scalars)?),
        b_g2: Arc::new(g2_mul(&b_scalars)?),
    })
}

/// `k · 2^(8w) · base` for every byte value `k` in 1..=255 and window `w` in 0..32, so that a
/// scalar's multiple is the sum of one table entry per nonzero byte.
struct FixedBase<G: PrimeCurve> {
    windows: Vec<Vec<G::Affine>>,
}

impl<G: PrimeCurve> FixedBase<G>
where
    G::Affine: Send + Sync,
{
    fn new(base: G) -> Self {
        let bytes = Scalar::ZERO.to_repr().as_ref().len();
        let mut window_base = base;
        let windows = (0..bytes)
            .map(|_| {
                let mut multiples = Vec::with_capacity(255);
                let mut multiple = window_base;
                for _ in 0..255 {
                    multiples.push(multiple);
                    multiple += window_base;
                }
                window_base = multiple; // 256 · window_base
                let mut affine = vec![<G::Affine as PrimeCurveAffine>::identity(); multiples.len()];
                G::batch_normalize(&multiples, &mut affine);
                affine
            })
            .collect();
        FixedBase { windows }
    }

    /// The multiples in one flat table: entry `w·255 + b − 1` is `b·2^(8w)·base` (the layout
    /// the GPU kernel reads).
    fn table(&self) -> Vec<G::Affine> {
        self.windows.concat()
    }

    fn mul(&self, scalar: &Scalar) -> G {
        let repr = scalar.to_repr();
        let mut sum = G::identity();
        // Little-endian bytes: byte w weighs 2^(8w).
        for (window, &byte) in self.windows.iter().zip(repr.as_ref()) {
            if byte != 0 {
                sum += window[byte as usize - 1];
            }
        }
        sum
    }

    fn mul_all(&self, scalars: &[Scalar]) -> Vec<G::Affine> {
        let mut out = vec![<G::Affine as PrimeCurveAffine>::identity(); scalars.len()];
        out.par_chunks_mut(POINTS_PER_TASK).zip(scalars.par_chunks(POINTS_PER_TASK)).for_each(|(out, scalars)| {
            let projective: Vec<G> = scalars.iter().map(|s| self.mul(s)).collect();
            G::batch_normalize(&projective, out);
        });
        out
    }
}

/// One nonzero entry of a QAP matrix: `coeff` of `variable` in constraint `constraint`.
struct Term {
    variable: usize,
    constraint: usize,
    coeff: Scalar,
}

/// Records the circuit's structure (which variable occurs where, with which coefficient).
#[derive(Default)]
struct KeyAssembly {
    num_inputs: usize,
    num_aux: usize,
    num_constraints: usize,
    a_inputs: Vec<Term>,
    b_inputs: Vec<Term>,
    c_inputs: Vec<Term>,
    a_aux: Vec<Term>,
    b_aux: Vec<Term>,
    c_aux: Vec<Term>,
}

impl KeyAssembly {
    fn record(&mut self, lc: &LinearCombination<Scalar>, matrix: usize) {
        let constraint = self.num_constraints;
        let (inputs, aux) = match matrix {
            0 => (&mut self.a_inputs, &mut self.a_aux),
            1 => (&mut self.b_inputs, &mut self.b_aux),
            _ => (&mut self.c_inputs, &mut self.c_aux),
        };
        for (variable, coeff) in lc.iter() {
            let (terms, variable, bound) = match variable.get_unchecked() {
                Index::Input(i) => (&mut *inputs, i, self.num_inputs),
                Index::Aux(i) => (&mut *aux, i, self.num_aux),
            };
            // A variable that was never allocated would index out of bounds later; it
            // contributes nothing a prover could use, so it is left out.
            if variable < bound {
                terms.push(Term { variable, constraint, coeff: *coeff });
            }
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
        self.record(&a(LinearCombination::zero()), 0);
        self.record(&b(LinearCombination::zero()), 1);
        self.record(&c(LinearCombination::zero()), 2);
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
    use crate::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random_waste(rng: &mut ChaCha8Rng) -> ToxicWaste {
        ToxicWaste {
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
            tau: Scalar::random(&mut *rng),
        }
    }

    fn bellperson_setup(spec: &SyntheticSpec, w: &ToxicWaste) -> Parameters<Bls12> {
        bellperson::groth16::generate_parameters::<Bls12, _>(
            spec.circuit(0),
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

    #[test]
    fn equals_bellperson_generate_parameters() {
        let seed: u64 = rand::thread_rng().gen();
        eprintln!("equals_bellperson_generate_parameters: seed {seed}");
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for (log_n, num_inputs) in [(2, 1), (5, 0), (6, 8), (7, 3)] {
            let spec = SyntheticSpec { log_n, num_inputs, profile: WitnessProfile::Random, keys: KeyKind::Setup, seed };
            let waste = random_waste(&mut rng);
            let ours = setup(spec.circuit(0), &waste).unwrap();
            assert!(ours == bellperson_setup(&spec, &waste), "log_n {log_n}, {num_inputs} inputs");
            // Negative twin: another tau gives other parameters.
            let other = ToxicWaste { tau: waste.tau + Scalar::ONE, ..waste };
            assert!(setup(spec.circuit(0), &other).unwrap() != bellperson_setup(&spec, &waste));
        }
    }

    #[test]
    fn fixed_base_matches_scalar_multiplication() {
        let mut rng = ChaCha8Rng::seed_from_u64(rand::thread_rng().gen());
        let table = FixedBase::new(G1Projective::generator());
        for scalar in [Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::random(&mut rng), Scalar::random(&mut rng)] {
            assert_eq!(table.mul(&scalar), G1Projective::generator() * scalar);
        }
        assert_ne!(table.mul(&Scalar::ONE), G1Projective::generator() * Scalar::from(2u64));
    }
}
