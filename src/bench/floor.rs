//! A partition's device floor: the field multiplications its kernels cannot leave out, at the
//! rates the device's own multiplication microkernels reach in the same run. The kernel bench
//! (`benches/cuda_kernels.rs`) judges each kernel this way; this judges a whole partition, so
//! the bench can say how far its time per partition is from what the arithmetic alone costs.
//!
//! What the floor counts, per partition:
//! - **the quotient** (Fr): seven transforms of 2^log_n, (n/2)·log n multiplications each, and
//!   the pointwise (a·b − c)·Z⁻¹, two a point;
//! - **each MSM** (Fp): a mixed addition per 0/1 scalar equal to one, when the MSM takes the
//!   0/1 fast path, and per window per other nonzero scalar, with the window the single-pass
//!   model picks for that many scalars ([`window_bits_for`]). H is dense: its n − 1 coefficients
//!   each count as random. An addition costs what the kernels' formula really performs
//!   ([`G1_MADD`]: madd-2008-s, 8 multiplications and 2 squarings; [`G2_MADD`]: 28 Fp
//!   multiplications, its Fp2 multiplications being three each and its Fp2 squarings two),
//!   each operation at its own measured rate: `tests/floor_counts.rs` counts them in the
//!   kernels' source.
//!
//! It leaves out what a faster method could avoid or overlap: the bucket and window reductions,
//! sorting, the coset shifts, and every memory access. So no run reaches it, and a time well
//! above it says where the method, not the code, sets the limit.

use ff::Field;
use rayon::prelude::*;
use serde::Serialize;

use crate::backend::cuda::window_bits_for;
use crate::backend::ArithmeticRates;
use crate::circuit::{Density, Witness};
use crate::Scalar;

/// The Fp multiplications and squarings of one point formula, as the kernels perform them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FpOps {
    pub muls: u32,
    pub sqrs: u32,
}

impl FpOps {
    /// Seconds of one such formula at `rates`, each operation at its own rate.
    pub fn seconds(self, rates: &ArithmeticRates) -> f64 {
        self.muls as f64 / rates.fp_mul_per_s + self.sqrs as f64 / rates.fp_sqr_per_s
    }
}

/// One mixed (affine into XYZZ) addition on G1, madd-2008-s (`kernels/ec/xyzz.cuh`).
pub const G1_MADD: FpOps = FpOps { muls: 8, sqrs: 2 };
/// The same formula on G2: its 8 Fp2 multiplications take three Fp multiplications each
/// (Karatsuba) and its 2 Fp2 squarings two each (`kernels/ff/bls12_381.cuh`), no Fp squaring.
pub const G2_MADD: FpOps = FpOps { muls: 28, sqrs: 0 };

/// How one MSM's scalars split for the bucket method.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ScalarCounts {
    pub zeros: usize,
    pub ones: usize,
    /// Neither 0 nor 1: these go through the buckets, one addition a window.
    pub others: usize,
}

impl ScalarCounts {
    /// Counts `scalars` (in parallel), taking only those whose bit in `density` is set when
    /// one is given.
    pub fn of(scalars: &[Scalar], density: Option<&Density>) -> ScalarCounts {
        let class = |s: &Scalar| {
            if s.is_zero_vartime() {
                ScalarCounts { zeros: 1, ..Default::default() }
            } else if *s == Scalar::ONE {
                ScalarCounts { ones: 1, ..Default::default() }
            } else {
                ScalarCounts { others: 1, ..Default::default() }
            }
        };
        let add = ScalarCounts::plus;
        match density {
            None => scalars.par_iter().map(class).reduce(ScalarCounts::default, add),
            Some(density) => scalars
                .par_iter()
                .zip(density.bits().par_iter())
                .filter(|(_, &used)| used)
                .map(|(s, _)| class(s))
                .reduce(ScalarCounts::default, add),
        }
    }

    fn plus(self, other: ScalarCounts) -> ScalarCounts {
        ScalarCounts {
            zeros: self.zeros + other.zeros,
            ones: self.ones + other.ones,
            others: self.others + other.others,
        }
    }

    /// The mixed additions of an MSM over these scalars, with the 0/1 fast path on (every one
    /// is a single addition, every other nonzero scalar one a window).
    pub fn msm_additions(&self) -> f64 {
        let windows = match self.others {
            0 => 0.0,
            others => 256f64 / window_bits_for(others.max(2)) as f64,
        };
        self.ones as f64 + self.others as f64 * windows.ceil()
    }
}

/// One partition's floor, in seconds of one device, by the work it is made of.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PartitionFloor {
    pub rates: ArithmeticRates,
    pub quotient_s: f64,
    pub h_msm_s: f64,
    pub l_msm_s: f64,
    pub a_msm_s: f64,
    pub b_g1_msm_s: f64,
    pub b_g2_msm_s: f64,
    pub total_s: f64,
}

/// Fr multiplications of the quotient over a domain of 2^log_n: seven transforms and the
/// pointwise step.
pub fn quotient_fr_muls(log_n: u32) -> f64 {
    let n = (1u64 << log_n) as f64;
    7.0 * n / 2.0 * log_n as f64 + 2.0 * n
}

/// The floor of proving `witness` over a domain of 2^log_n on a device with `rates`.
pub fn partition_floor(witness: &Witness, log_n: u32, rates: ArithmeticRates) -> PartitionFloor {
    let inputs = ScalarCounts::of(&witness.input_assignment, None);
    let aux = ScalarCounts::of(&witness.aux_assignment, None);
    let a_query = inputs.plus(ScalarCounts::of(&witness.aux_assignment, Some(&witness.a_aux_density)));
    let b_query = ScalarCounts::of(&witness.input_assignment, Some(&witness.b_input_density))
        .plus(ScalarCounts::of(&witness.aux_assignment, Some(&witness.b_aux_density)));
    let h = ScalarCounts { others: (1usize << log_n) - 1, ..Default::default() };
    let (g1, g2) = (G1_MADD.seconds(&rates), G2_MADD.seconds(&rates));
    let quotient_s = quotient_fr_muls(log_n) / rates.fr_mul_per_s;
    let h_msm_s = h.msm_additions() * g1;
    let l_msm_s = aux.msm_additions() * g1;
    let a_msm_s = a_query.msm_additions() * g1;
    let b_g1_msm_s = b_query.msm_additions() * g1;
    let b_g2_msm_s = b_query.msm_additions() * g2;
    PartitionFloor {
        rates,
        quotient_s,
        h_msm_s,
        l_msm_s,
        a_msm_s,
        b_g1_msm_s,
        b_g2_msm_s,
        total_s: quotient_s + h_msm_s + l_msm_s + a_msm_s + b_g1_msm_s + b_g2_msm_s,
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    use super::*;
    use crate::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};

    const RATES: ArithmeticRates = ArithmeticRates { fr_mul_per_s: 50e9, fp_mul_per_s: 25e9, fp_sqr_per_s: 40e9 };

    fn random_scalars(rng: &mut ChaCha20Rng, n: usize) -> Vec<Scalar> {
        (0..n)
            .map(|_| match rng.gen_range(0..4) {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            })
            .collect()
    }

    #[test]
    fn counts_match_a_serial_count_and_respect_the_density() {
        let seed = rand::random();
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let n = rng.gen_range(1000..5000);
        let scalars = random_scalars(&mut rng, n);
        let bits: Vec<bool> = (0..n).map(|_| rng.gen_bool(0.3)).collect();
        let density = Density::from_bits(bits.clone());
        let serial = |take: &dyn Fn(usize) -> bool| {
            let mut c = ScalarCounts::default();
            for (_, s) in scalars.iter().enumerate().filter(|(i, _)| take(*i)) {
                match () {
                    _ if *s == Scalar::ZERO => c.zeros += 1,
                    _ if *s == Scalar::ONE => c.ones += 1,
                    _ => c.others += 1,
                }
            }
            c
        };
        assert_eq!(ScalarCounts::of(&scalars, None), serial(&|_| true), "seed {seed}");
        let selected = ScalarCounts::of(&scalars, Some(&density));
        assert_eq!(selected, serial(&|i| bits[i]), "seed {seed}");
        // the negative twin: the density changes the count
        assert_ne!(selected, ScalarCounts::of(&scalars, None), "seed {seed}");
        // edge cases: nothing selected, nothing at all
        assert_eq!(ScalarCounts::of(&scalars, Some(&Density::from_bits(vec![false; n]))), ScalarCounts::default());
        assert_eq!(ScalarCounts::of(&[], None), ScalarCounts::default());
    }

    #[test]
    fn an_msm_costs_one_addition_a_one_and_one_a_window_for_the_rest() {
        let ones = ScalarCounts { zeros: 7, ones: 1000, others: 0 };
        assert_eq!(ones.msm_additions(), 1000.0);
        assert_eq!(ScalarCounts { zeros: 5, ..Default::default() }.msm_additions(), 0.0);
        let dense = ScalarCounts { zeros: 0, ones: 0, others: 1 << 20 };
        let windows = 256u32.div_ceil(window_bits_for(1 << 20)) as f64;
        assert_eq!(dense.msm_additions(), (1u64 << 20) as f64 * windows);
        // a random scalar costs one addition a window, a one a single addition: the bits
        // profile's floor is far below a dense one
        assert!(windows > 10.0);
        let ones = ScalarCounts { ones: 1 << 20, ..Default::default() };
        assert_eq!(dense.msm_additions(), ones.msm_additions() * windows);
    }

    #[test]
    fn an_addition_costs_each_operation_at_its_own_rate() {
        // 8 multiplications at 25 G/s and 2 squarings at 40 G/s
        assert_eq!(G1_MADD.seconds(&RATES), 8.0 / 25e9 + 2.0 / 40e9);
        assert_eq!(G2_MADD.seconds(&RATES), 28.0 / 25e9);
        // the negative twin: squarings no faster than multiplications cost what 10 would
        let even = ArithmeticRates { fp_sqr_per_s: 25e9, ..RATES };
        assert!(G1_MADD.seconds(&even) > G1_MADD.seconds(&RATES));
        assert!((G1_MADD.seconds(&even) - 10.0 / 25e9).abs() <= 1e-12 * G1_MADD.seconds(&even));
    }

    #[test]
    fn the_floor_adds_up_its_parts_and_grows_with_the_witness() {
        let seed = rand::random();
        let spec = |profile| SyntheticSpec { log_n: 10, num_inputs: 4, profile, keys: KeyKind::Random, seed };
        let bits = spec(WitnessProfile::Bits).witness(0).unwrap();
        let random = spec(WitnessProfile::Random).witness(0).unwrap();
        let floor = partition_floor(&bits, 10, RATES);
        let parts =
            floor.quotient_s + floor.h_msm_s + floor.l_msm_s + floor.a_msm_s + floor.b_g1_msm_s + floor.b_g2_msm_s;
        assert!((floor.total_s - parts).abs() <= 1e-12 * parts, "seed {seed}: {floor:?}");
        assert_eq!(floor.quotient_s, quotient_fr_muls(10) / 50e9);
        // H is dense whatever the witness
        let dense = partition_floor(&random, 10, RATES);
        assert_eq!(floor.h_msm_s, dense.h_msm_s);
        // the negative twin: random witnesses cost more in the queries than mostly-bit ones
        assert!(dense.l_msm_s > floor.l_msm_s, "seed {seed}: {dense:?} vs {floor:?}");
        assert!(dense.total_s > floor.total_s, "seed {seed}");
        // twice the multiplication rate halves every part
        let fast =
            partition_floor(&bits, 10, ArithmeticRates { fr_mul_per_s: 100e9, fp_mul_per_s: 50e9, fp_sqr_per_s: 80e9 });
        assert!((fast.total_s * 2.0 - floor.total_s).abs() <= 1e-12 * floor.total_s);
    }

    #[test]
    fn the_quotient_counts_seven_transforms_and_the_pointwise_step() {
        // 2^1: seven transforms of one butterfly, two multiplications a point
        assert_eq!(quotient_fr_muls(1), 7.0 + 4.0);
        let n = (1u64 << 27) as f64;
        assert_eq!(quotient_fr_muls(27), 7.0 * n / 2.0 * 27.0 + 2.0 * n);
    }
}
