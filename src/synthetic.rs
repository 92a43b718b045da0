//! Synthetic circuits of an exact domain size, for benchmarks and tests.
//!
//! A [`SyntheticSpec`] describes a circuit whose constraints, plus one constraint per input
//! (ONE included, as bellperson counts), fill the domain `2^log_n` exactly. The layout repeats
//! a pair of constraints over three fresh aux variables `w_l, w_r, p`:
//!
//! ```text
//! product i:  w_l · (w_r + input_i) = p     (input_i only for i < num_inputs, input_0 = ONE)
//! sum i:      (p + w_l) · ONE = p + w_l
//! ```
//!
//! So `w_l` and `p` occur in A but never in B, `w_r` occurs only in B, and the last public
//! input never occurs in B: every density is non-trivial. Partition `index` gets its own
//! witness values (seeded by `seed` and `index`) on the same structure.

use std::sync::Arc;

use bellperson::groth16::VerifyingKey;
use bellperson::{Circuit, ConstraintSystem, SynthesisError, Variable};
use blstrs::{G1Projective, G2Projective};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::backend::{self, BackendKind, CpuModel, DeviceSelection};
use crate::circuit::{Density, Witness, WitnessShape};
use crate::groth16::setup::{setup_on, ToxicWaste};
use crate::math::{BatchAffine, Domain};
use crate::params::ProvingKey;
use crate::{Error, Result, Scalar};

/// The number of public inputs (without ONE) a spec has unless told otherwise.
pub const DEFAULT_NUM_INPUTS: usize = 8;

/// Pairs of constraints whose values one RNG stream draws; the unit of parallel work.
const PAIRS_PER_CHUNK: usize = 1 << 12;
/// Setup keys of at least 2^this domain multiply their fixed bases on a GPU when there is one.
const GPU_SETUP_MIN_LOG_N: u32 = 16;
/// Points per random-key chunk: one running sum and one batch normalisation each.
const POINTS_PER_CHUNK: usize = 1 << 12;

/// How the free aux values are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum WitnessProfile {
    /// Uniform scalars.
    Random,
    /// 90% of values are 0 or 1 and 10% uniform: the bit-heavy shape of Filecoin's circuits.
    Bits,
}

/// Where the proving key comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum KeyKind {
    /// A real trusted setup with toxic waste derived from the seed: proofs verify.
    Setup,
    /// Random points of the right shape, fast at any size: proofs do not verify.
    Random,
}

/// A synthetic circuit family: size, inputs, witness profile, key kind and seed.
#[derive(Clone, Copy, Debug)]
pub struct SyntheticSpec {
    /// The domain is exactly `2^log_n`.
    pub log_n: u32,
    /// Public inputs, excluding ONE.
    pub num_inputs: usize,
    /// How witness values are drawn.
    pub profile: WitnessProfile,
    /// How the proving key is made.
    pub keys: KeyKind,
    /// Seeds the witness values and the keys.
    pub seed: u64,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        SyntheticSpec {
            log_n: 10,
            num_inputs: DEFAULT_NUM_INPUTS,
            profile: WitnessProfile::Random,
            keys: KeyKind::Setup,
            seed: 0,
        }
    }
}

/// The circuit of one partition of a [`SyntheticSpec`].
#[derive(Clone, Debug)]
pub struct SyntheticCircuit {
    spec: SyntheticSpec,
    index: usize,
}

/// The circuit's dimensions, derived from the spec.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Constraints from the circuit itself (without the input constraints).
    constraints: usize,
    /// Product/sum pairs; the last one lacks its sum when `constraints` is odd.
    pairs: usize,
    num_inputs: usize,
}

impl Layout {
    fn has_sum(&self, pair: usize) -> bool {
        2 * pair + 1 < self.constraints
    }

    /// Whether product `pair` adds an input to its B side, and which (0 is ONE).
    fn b_input_of(&self, pair: usize) -> Option<usize> {
        (pair < self.num_inputs).then_some(pair)
    }

    /// Whether input `k` (0 is ONE) occurs in B.
    fn input_in_b(&self, k: usize) -> bool {
        let in_product = k < self.num_inputs.min(self.pairs);
        let one_in_sum = k == 0 && self.constraints >= 2;
        in_product || one_in_sum
    }
}

/// One partition's values: public inputs (ONE first) and `(w_l, w_r)` per pair.
struct Values {
    inputs: Vec<Scalar>,
    free: Vec<(Scalar, Scalar)>,
}

impl Values {
    fn product(&self, layout: &Layout, pair: usize) -> Scalar {
        let (w_l, w_r) = self.free[pair];
        match layout.b_input_of(pair) {
            Some(k) => w_l * (w_r + self.inputs[k]),
            None => w_l * w_r,
        }
    }
}

impl SyntheticSpec {
    /// The circuit of partition `index`.
    pub fn circuit(&self, index: usize) -> SyntheticCircuit {
        SyntheticCircuit { spec: *self, index }
    }

    /// Partition `index`'s witness, built directly in parallel; equal to synthesizing
    /// [`SyntheticSpec::circuit`] (the tests check this).
    pub fn witness(&self, index: usize) -> Result<Witness> {
        let layout = self.layout()?;
        let values = self.values(&layout, index);
        let aux: Vec<Scalar> = (0..layout.pairs)
            .into_par_iter()
            .flat_map_iter(|i| {
                let (w_l, w_r) = values.free[i];
                [w_l, w_r, values.product(&layout, i)]
            })
            .collect();

        let total = layout.constraints + values.inputs.len();
        let (mut a, mut b, mut c) = (vec![Scalar::ZERO; total], vec![Scalar::ZERO; total], vec![Scalar::ZERO; total]);
        a.par_iter_mut().zip(b.par_iter_mut()).zip(c.par_iter_mut()).enumerate().for_each(|(j, ((a, b), c))| {
            if j >= layout.constraints {
                // bellperson's `input * 0 = 0`.
                *a = values.inputs[j - layout.constraints];
                return;
            }
            let pair = j / 2;
            let (w_l, w_r, p) = (aux[3 * pair], aux[3 * pair + 1], aux[3 * pair + 2]);
            if j % 2 == 0 {
                *a = w_l;
                *b = layout.b_input_of(pair).map_or(w_r, |k| w_r + values.inputs[k]);
                *c = p;
            } else {
                *a = p + w_l;
                *b = Scalar::ONE;
                *c = p + w_l;
            }
        });

        let a_aux_bits = (0..layout.pairs).flat_map(|i| [true, false, layout.has_sum(i)]).collect();
        let b_aux_bits = (0..layout.pairs).flat_map(|_| [false, true, false]).collect();
        let b_input_bits = (0..values.inputs.len()).map(|k| layout.input_in_b(k)).collect();
        Ok(Witness {
            a,
            b,
            c,
            input_assignment: values.inputs,
            aux_assignment: aux,
            a_aux_density: Density::from_bits(a_aux_bits),
            b_input_density: Density::from_bits(b_input_bits),
            b_aux_density: Density::from_bits(b_aux_bits),
        })
    }

    /// The witness shape of every partition, without building a witness.
    pub fn shape(&self) -> Result<WitnessShape> {
        let layout = self.layout()?;
        Ok(WitnessShape {
            num_constraints: layout.constraints + layout.num_inputs + 1,
            num_inputs: layout.num_inputs + 1,
            num_aux: 3 * layout.pairs,
            a_aux_total: layout.pairs + layout.constraints / 2,
            b_input_total: (0..=layout.num_inputs).filter(|&k| layout.input_in_b(k)).count(),
            b_aux_total: layout.pairs,
        })
    }

    /// The proving key: a real setup for [`KeyKind::Setup`], random points for
    /// [`KeyKind::Random`].
    pub fn proving_key(&self) -> Result<Arc<ProvingKey>> {
        let shape = self.shape()?;
        let key = match self.keys {
            KeyKind::Setup => self.setup_key()?,
            KeyKind::Random => self.random_key(&shape)?,
        };
        key.check_shape(&shape)?;
        Ok(key)
    }

    /// Whether proofs made with [`SyntheticSpec::proving_key`] verify.
    pub fn verifies(&self) -> bool {
        self.keys == KeyKind::Setup
    }

    fn layout(&self) -> Result<Layout> {
        let domain = Domain::from_log_n(self.log_n)?;
        // ONE and each public input take one constraint each; the circuit needs at least one.
        let constraints = domain.size().checked_sub(self.num_inputs + 1).filter(|&m| m >= 1).ok_or_else(|| {
            Error::Config(format!(
                "a synthetic circuit of 2^{} constraints has no room for {} public inputs plus ONE and a constraint",
                self.log_n, self.num_inputs
            ))
        })?;
        Ok(Layout { constraints, pairs: constraints.div_ceil(2), num_inputs: self.num_inputs })
    }

    /// An RNG for one stream of one partition; streams are independent of each other.
    fn rng(&self, index: usize, stream: u64) -> ChaCha8Rng {
        let key = splitmix64(splitmix64(splitmix64(self.seed) ^ index as u64) ^ stream);
        ChaCha8Rng::seed_from_u64(key)
    }

    /// Partition `index`'s public inputs (ONE excluded), what its proof verifies with; drawn
    /// from their own stream, so without making the witness.
    pub fn public_inputs(&self, index: usize) -> Result<Vec<Scalar>> {
        Ok(self.input_values(&self.layout()?, index))
    }

    fn input_values(&self, layout: &Layout, index: usize) -> Vec<Scalar> {
        let mut input_rng = self.rng(index, 0);
        (0..layout.num_inputs).map(|_| Scalar::random(&mut input_rng)).collect()
    }

    fn values(&self, layout: &Layout, index: usize) -> Values {
        let inputs = std::iter::once(Scalar::ONE).chain(self.input_values(layout, index)).collect();
        let chunks = layout.pairs.div_ceil(PAIRS_PER_CHUNK);
        let free = (0..chunks)
            .into_par_iter()
            .flat_map_iter(|chunk| {
                let mut rng = self.rng(index, 1 + chunk as u64);
                let len = PAIRS_PER_CHUNK.min(layout.pairs - chunk * PAIRS_PER_CHUNK);
                let profile = self.profile;
                (0..len).map(|_| (draw(profile, &mut rng), draw(profile, &mut rng))).collect::<Vec<_>>()
            })
            .collect();
        Values { inputs, free }
    }

    fn setup_key(&self) -> Result<Arc<ProvingKey>> {
        // The toxic waste is public on purpose: test keys anyone can reproduce from the seed.
        let mut rng = self.rng(usize::MAX, u64::MAX);
        let mut secret = || loop {
            let x = Scalar::random(&mut rng);
            if !bool::from(x.is_zero()) {
                break x;
            }
        };
        let waste = ToxicWaste { alpha: secret(), beta: secret(), gamma: secret(), delta: secret(), tau: secret() };
        // Small keys are quicker on the host than opening a GPU for them.
        let gpu = match self.log_n >= GPU_SETUP_MIN_LOG_N && backend::cuda::cuda_available() {
            true => {
                let none = CpuModel { devices: 0, device_bytes: 0 };
                backend::open_devices(BackendKind::Cuda, &DeviceSelection::Only(vec![0]), none)?.1.into_iter().next()
            }
            false => None,
        };
        let params = setup_on(self.circuit(0), &waste, gpu.as_deref())?;
        Ok(ProvingKey::from_parameters(&params))
    }

    fn random_key(&self, shape: &WitnessShape) -> Result<Arc<ProvingKey>> {
        let domain = Domain::for_len(shape.num_constraints)?;
        let b_total = shape.b_input_total + shape.b_aux_total;
        let mut rng = self.rng(usize::MAX, u64::MAX - 1);
        let mut g1 = || G1Projective::random(&mut rng).to_affine();
        let (alpha_g1, beta_g1, delta_g1) = (g1(), g1(), g1());
        let mut rng = self.rng(usize::MAX, u64::MAX - 2);
        let mut g2 = || G2Projective::random(&mut rng).to_affine();
        let (beta_g2, gamma_g2, delta_g2) = (g2(), g2(), g2());
        let vk = VerifyingKey {
            alpha_g1,
            beta_g1,
            beta_g2,
            gamma_g2,
            delta_g1,
            delta_g2,
            ic: self.random_points::<G1Projective>(1, shape.num_inputs),
        };
        Ok(Arc::new(ProvingKey {
            vk,
            h: Arc::new(self.random_points::<G1Projective>(2, domain.size() - 1)),
            l: Arc::new(self.random_points::<G1Projective>(3, shape.num_aux)),
            a: Arc::new(self.random_points::<G1Projective>(4, shape.num_inputs + shape.a_aux_total)),
            b_g1: Arc::new(self.random_points::<G1Projective>(5, b_total)),
            b_g2: Arc::new(self.random_points::<G2Projective>(6, b_total)),
            recording: Default::default(),
        }))
    }

    /// `count` pseudo-random points, fast: per chunk a running sum over four random points
    /// (one addition per point instead of a scalar multiplication), then one batch
    /// normalisation (one inversion per chunk). The points are not independent, which a key for timing does not need.
    fn random_points<G: BatchAffine>(&self, tag: u64, count: usize) -> Vec<G::Affine>
    where
        G::Affine: Send + Sync,
    {
        let mut points = vec![G::Affine::identity(); count];
        points.par_chunks_mut(POINTS_PER_CHUNK).enumerate().for_each(|(chunk, out)| {
            let mut rng = self.rng(usize::MAX - tag as usize, chunk as u64);
            let steps: [G; 4] = std::array::from_fn(|_| G::random(&mut rng));
            let mut sum = G::random(&mut rng);
            let projective: Vec<G> = (0..out.len())
                .map(|k| {
                    sum += steps[k % steps.len()];
                    sum
                })
                .collect();
            G::batch_to_affine(&projective, out);
        });
        points
    }
}

/// One free aux value under `profile`.
fn draw(profile: WitnessProfile, rng: &mut ChaCha8Rng) -> Scalar {
    match profile {
        WitnessProfile::Random => Scalar::random(rng),
        WitnessProfile::Bits if rng.gen_range(0..10) < 9 => Scalar::from(rng.gen::<bool>() as u64),
        WitnessProfile::Bits => Scalar::random(rng),
    }
}

/// A bijective mixer (SplitMix64's finaliser), so nearby seeds give unrelated streams.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Circuit<Scalar> for SyntheticCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        // An impossible spec (no room for a constraint) has no satisfying circuit.
        let layout = self.spec.layout().map_err(|_| SynthesisError::Unsatisfiable)?;
        let values = self.spec.values(&layout, self.index);
        let mut inputs: Vec<Variable> = vec![CS::one()];
        for (k, value) in values.inputs.iter().enumerate().skip(1) {
            inputs.push(cs.alloc_input(|| format!("input {k}"), || Ok(*value))?);
        }
        for (i, &(w_l_value, w_r_value)) in values.free.iter().enumerate() {
            let w_l = cs.alloc(|| format!("w_l {i}"), || Ok(w_l_value))?;
            let w_r = cs.alloc(|| format!("w_r {i}"), || Ok(w_r_value))?;
            let p = cs.alloc(|| format!("p {i}"), || Ok(values.product(&layout, i)))?;
            let b_input = layout.b_input_of(i).map(|k| inputs[k]);
            cs.enforce(
                || format!("product {i}"),
                |lc| lc + w_l,
                |lc| match b_input {
                    Some(input) => lc + w_r + input,
                    None => lc + w_r,
                },
                |lc| lc + p,
            );
            if layout.has_sum(i) {
                cs.enforce(|| format!("sum {i}"), |lc| lc + p + w_l, |lc| lc + CS::one(), |lc| lc + p + w_l);
            }
        }
        Ok(())
    }
}
