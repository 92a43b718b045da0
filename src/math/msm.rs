//! Multi-scalar multiplication over G1 and G2, through blst's Pippenger (`blstrs::multi_exp`).

use group::Group;
use rayon::prelude::*;

use crate::Scalar;
use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};

/// The five MSM results one proof is assembled from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmResults {
    /// `Σ h_i · H_i`: the quotient polynomial against the key's `h` query.
    pub h: G1Projective,
    /// `Σ aux_i · L_i`.
    pub l: G1Projective,
    /// The A query against every input and the aux variables that occur in A.
    pub a: G1Projective,
    /// The B query in G1 (only C uses it).
    pub b_g1: G1Projective,
    /// The B query in G2.
    pub b_g2: G2Projective,
}

/// Points per blst call: bounds the projective copy blst needs, without hurting Pippenger.
const MSM_CHUNK: usize = 1 << 20;

/// `Σ scalars[i] · bases[i]`. The lengths must match (checked in debug builds; in release the
/// shorter length wins). Identity bases are allowed; empty input gives the identity.
pub fn msm_g1(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
    debug_assert_eq!(bases.len(), scalars.len(), "msm_g1: bases and scalars differ in length");
    let n = bases.len().min(scalars.len());
    bases[..n]
        .chunks(MSM_CHUNK)
        .zip(scalars[..n].chunks(MSM_CHUNK))
        .map(|(bases, scalars)| {
            // blstrs only takes projective points; it normalises them back in one batch.
            let points: Vec<G1Projective> = bases.par_iter().map(G1Projective::from).collect();
            G1Projective::multi_exp(&points, scalars)
        })
        .fold(G1Projective::identity(), |acc, part| acc + part)
}

/// `Σ scalars[i] · bases[i]` over G2; same contract as [`msm_g1`].
pub fn msm_g2(bases: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
    debug_assert_eq!(bases.len(), scalars.len(), "msm_g2: bases and scalars differ in length");
    let n = bases.len().min(scalars.len());
    bases[..n]
        .chunks(MSM_CHUNK)
        .zip(scalars[..n].chunks(MSM_CHUNK))
        .map(|(bases, scalars)| {
            let points: Vec<G2Projective> = bases.par_iter().map(G2Projective::from).collect();
            G2Projective::multi_exp(&points, scalars)
        })
        .fold(G2Projective::identity(), |acc, part| acc + part)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::fresh_rng;
    use ff::Field;
    use group::{prime::PrimeCurveAffine, Curve};
    use rand_chacha::ChaCha8Rng;

    fn naive_g1(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        bases.iter().zip(scalars).map(|(p, s)| G1Projective::from(p) * s).sum()
    }

    fn naive_g2(bases: &[G2Affine], scalars: &[Scalar]) -> G2Projective {
        bases.iter().zip(scalars).map(|(p, s)| G2Projective::from(p) * s).sum()
    }

    /// Random bases with some identities, and scalars with zeros, ones and minus ones mixed in.
    fn inputs_g1(rng: &mut ChaCha8Rng, n: usize) -> (Vec<G1Affine>, Vec<Scalar>) {
        let bases = (0..n)
            .map(|i| if i % 7 == 3 { G1Affine::identity() } else { G1Projective::random(&mut *rng).to_affine() })
            .collect();
        (bases, edge_scalars(rng, n))
    }

    fn edge_scalars(rng: &mut ChaCha8Rng, n: usize) -> Vec<Scalar> {
        (0..n)
            .map(|i| match i % 5 {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                2 => -Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            })
            .collect()
    }

    #[test]
    fn msm_g1_matches_naive_sum() {
        let mut rng = fresh_rng("msm_g1_matches_naive_sum");
        for n in [0usize, 1, 2, 3, 31, 32, 33, 100, 300] {
            let (bases, scalars) = inputs_g1(&mut rng, n);
            assert_eq!(msm_g1(&bases, &scalars), naive_g1(&bases, &scalars), "n {n}");
        }
    }

    #[test]
    fn msm_g2_matches_naive_sum() {
        let mut rng = fresh_rng("msm_g2_matches_naive_sum");
        for n in [0usize, 1, 2, 33, 100] {
            let bases: Vec<G2Affine> = (0..n)
                .map(|i| if i % 7 == 3 { G2Affine::identity() } else { G2Projective::random(&mut rng).to_affine() })
                .collect();
            let scalars = edge_scalars(&mut rng, n);
            assert_eq!(msm_g2(&bases, &scalars), naive_g2(&bases, &scalars), "n {n}");
        }
    }

    #[test]
    fn msm_g1_detects_a_changed_scalar() {
        // Negative twin: a single changed scalar changes the result.
        let mut rng = fresh_rng("msm_g1_detects_a_changed_scalar");
        let (bases, mut scalars) = inputs_g1(&mut rng, 64);
        let before = msm_g1(&bases, &scalars);
        scalars[4] += Scalar::ONE; // base 4 is not an identity (4 % 7 != 3)
        assert_ne!(msm_g1(&bases, &scalars), before);
    }

    #[test]
    fn all_identity_bases_give_identity() {
        let bases = vec![G1Affine::identity(); 50];
        let scalars = vec![Scalar::ONE; 50];
        assert_eq!(msm_g1(&bases, &scalars), G1Projective::identity());
    }
}
