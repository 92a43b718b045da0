//! Fixed-base multiplication through a byte-window table: a scalar's multiple of the base is
//! the sum of one table point per nonzero byte, 32 mixed additions instead of a full scalar
//! multiplication. The setup makes its keys this way; the table's layout is the one the GPU's
//! fixed-base kernel reads, so a device can multiply from the same table.

use ff::{Field, PrimeField};
use group::prime::PrimeCurveAffine;
use rayon::prelude::*;

use super::{filled, BatchAffine};
use crate::Scalar;

/// Window bytes per scalar, and multiples per window (every nonzero byte value).
const WINDOWS: usize = 32;
const WINDOW_POINTS: usize = 255;
/// Points per task when multiplying many scalars (one batch inversion each).
const POINTS_PER_TASK: usize = 1 << 10;

/// `b · 2^(8w) · base` for every byte value `b` in 1..=255 and window `w` in 0..32.
pub struct FixedBase<G: BatchAffine> {
    /// Entry `w·255 + b − 1` is `b·2^(8w)·base`.
    table: Vec<G::Affine>,
}

impl<G: BatchAffine> FixedBase<G>
where
    G::Affine: Send + Sync,
{
    /// The table of `base`.
    pub fn new(base: G) -> Self {
        debug_assert_eq!(Scalar::ZERO.to_repr().as_ref().len(), WINDOWS);
        let window_bases: Vec<G> =
            std::iter::successors(Some(base), |b| Some((0..8).fold(*b, |b, _| b.double()))).take(WINDOWS).collect();
        let mut table = vec![<G::Affine as PrimeCurveAffine>::identity(); WINDOWS * WINDOW_POINTS];
        table.par_chunks_mut(WINDOW_POINTS).zip(window_bases).for_each(|(window, window_base)| {
            let multiples: Vec<G> =
                std::iter::successors(Some(window_base), |m| Some(*m + window_base)).take(WINDOW_POINTS).collect();
            G::batch_to_affine(&multiples, window);
        });
        FixedBase { table }
    }

    /// The table, entry `w·255 + b − 1` being `b·2^(8w)·base`.
    pub fn table(&self) -> &[G::Affine] {
        &self.table
    }

    fn mul(&self, scalar: &Scalar) -> G {
        let repr = scalar.to_repr();
        let mut sum = G::identity();
        // Little-endian bytes: byte w weighs 2^(8w).
        for (window, &byte) in self.table.chunks(WINDOW_POINTS).zip(repr.as_ref()) {
            if byte != 0 {
                sum += window[byte as usize - 1];
            }
        }
        sum
    }

    /// `scalars[i] · base` for every scalar, on every core of the host.
    pub fn mul_all(&self, scalars: &[Scalar]) -> Vec<G::Affine> {
        let mut out = filled(scalars.len(), <G::Affine as PrimeCurveAffine>::identity());
        out.par_chunks_mut(POINTS_PER_TASK).zip(scalars.par_chunks(POINTS_PER_TASK)).for_each(|(out, scalars)| {
            let projective: Vec<G> = scalars.iter().map(|s| self.mul(s)).collect();
            G::batch_to_affine(&projective, out);
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use blstrs::{G1Projective, G2Projective};
    use group::{Curve, Group};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn fixed_base_matches_scalar_multiplication() {
        let mut rng = ChaCha8Rng::seed_from_u64(rand::thread_rng().gen());
        let table = FixedBase::new(G1Projective::generator());
        for scalar in [Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::random(&mut rng), Scalar::random(&mut rng)] {
            assert_eq!(table.mul(&scalar), G1Projective::generator() * scalar);
        }
        assert_ne!(table.mul(&Scalar::ONE), G1Projective::generator() * Scalar::from(2u64));
    }

    #[test]
    fn fixed_base_table_has_the_kernel_layout() {
        let table = FixedBase::new(G2Projective::generator());
        assert_eq!(table.table().len(), WINDOWS * WINDOW_POINTS);
        for (w, b) in [(0u32, 1u64), (0, 255), (1, 1), (5, 17), (31, 255)] {
            let expected = G2Projective::generator() * (Scalar::from(b) * Scalar::from(256u64).pow_vartime([w as u64]));
            let entry = table.table()[w as usize * WINDOW_POINTS + b as usize - 1];
            assert_eq!(entry, expected.to_affine(), "window {w}, byte {b}");
            // Negative twin: the neighbouring entry holds another multiple.
            assert_ne!(table.table()[w as usize * WINDOW_POINTS + b as usize % WINDOW_POINTS], expected.to_affine());
        }
    }
}
