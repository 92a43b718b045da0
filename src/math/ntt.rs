//! Radix-2 number-theoretic transforms over Fr, on the domain and on its coset `g·H`.
//!
//! These compute the same values as bellperson's `EvaluationDomain::{fft, ifft, coset_fft,
//! icoset_fft}`: evaluation at the powers of [`Domain::omega`] in natural order, with the
//! coset shifted by `Scalar::MULTIPLICATIVE_GENERATOR`.
//!
//! Every function takes a slice of exactly `domain.size()` values. A wrong length is a bug in
//! the caller, not a runtime condition, so it is an assertion; the proving path
//! ([`crate::math::quotient_h`]) sizes its vectors before calling.

use ff::Field;
use rayon::prelude::*;

use super::Domain;
use crate::Scalar;

/// Below this size a transform runs on one thread; rayon's overhead would dominate.
const PARALLEL_MIN_SIZE: usize = 1 << 10;
/// The number of elements one rayon task handles in element-wise passes.
const CHUNK: usize = 1 << 12;

/// In place: coefficients → evaluations at `omega^i`, `i = 0..n`.
pub fn ntt(v: &mut [Scalar], domain: Domain) {
    transform(v, domain, domain.omega());
}

/// In place: evaluations at `omega^i` → coefficients.
pub fn intt(v: &mut [Scalar], domain: Domain) {
    transform(v, domain, domain.omega_inv());
    scale(v, domain.size_inv());
}

/// In place: coefficients → evaluations at `g·omega^i` (g is the coset generator).
pub fn coset_ntt(v: &mut [Scalar], domain: Domain) {
    distribute_powers(v, Domain::coset_generator());
    ntt(v, domain);
}

/// In place: evaluations at `g·omega^i` → coefficients.
pub fn icoset_ntt(v: &mut [Scalar], domain: Domain) {
    intt(v, domain);
    let g_inv = Option::from(Domain::coset_generator().invert()).unwrap_or(Scalar::ZERO);
    distribute_powers(v, g_inv);
}

/// `v[i] *= g^i`: turns p(x) into p(g·x).
pub fn distribute_powers(v: &mut [Scalar], g: Scalar) {
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(chunk_index, chunk)| {
        let mut power = g.pow_vartime([(chunk_index * CHUNK) as u64]);
        for x in chunk {
            *x *= power;
            power *= g;
        }
    });
}

fn scale(v: &mut [Scalar], factor: Scalar) {
    v.par_chunks_mut(CHUNK).for_each(|chunk| chunk.iter_mut().for_each(|x| *x *= factor));
}

/// Iterative Cooley–Tukey: bit-reversal permutation, then `log_n` butterfly layers.
fn transform(v: &mut [Scalar], domain: Domain, root: Scalar) {
    let n = domain.size();
    assert_eq!(v.len(), n, "an NTT over a domain of {n} needs exactly {n} values");
    if n == 1 {
        return;
    }
    bit_reverse_permutation(v, domain.log_n());
    let twiddles = twiddles(root, n / 2);
    let parallel = n >= PARALLEL_MIN_SIZE;

    let mut half = 1;
    while half < n {
        // Layer with butterflies of span `half`: twiddle j of this layer is root^(j * n / (2 half)).
        let stride = n / (2 * half);
        let blocks = n / (2 * half);
        if !parallel {
            v.chunks_mut(2 * half).for_each(|block| butterfly_block(block, &twiddles, stride));
        } else if blocks >= rayon::current_num_threads() * 4 {
            // Many small blocks: one task per group of blocks.
            v.par_chunks_mut(2 * half).for_each(|block| butterfly_block(block, &twiddles, stride));
        } else {
            // Few large blocks: split each block's butterflies across tasks.
            for block in v.chunks_mut(2 * half) {
                let (lo, hi) = block.split_at_mut(half);
                lo.par_chunks_mut(CHUNK).zip(hi.par_chunks_mut(CHUNK)).enumerate().for_each(
                    |(chunk_index, (lo, hi))| {
                        butterflies(lo, hi, chunk_index * CHUNK, &twiddles, stride);
                    },
                );
            }
        }
        half *= 2;
    }
}

fn butterfly_block(block: &mut [Scalar], twiddles: &[Scalar], stride: usize) {
    let (lo, hi) = block.split_at_mut(block.len() / 2);
    butterflies(lo, hi, 0, twiddles, stride);
}

/// `(lo, hi) ← (lo + w·hi, lo − w·hi)` with `w = twiddles[(first + k) * stride]`.
fn butterflies(lo: &mut [Scalar], hi: &mut [Scalar], first: usize, twiddles: &[Scalar], stride: usize) {
    for (k, (x, y)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
        let t = *y * twiddles[(first + k) * stride];
        *y = *x - t;
        *x += t;
    }
}

/// `root^0 .. root^(count-1)`, computed in parallel chunks.
fn twiddles(root: Scalar, count: usize) -> Vec<Scalar> {
    let mut powers = vec![Scalar::ONE; count];
    distribute_powers(&mut powers, root);
    powers
}

fn bit_reverse_permutation(v: &mut [Scalar], log_n: u32) {
    let shift = usize::BITS - log_n;
    for i in 0..v.len() {
        let j = i.reverse_bits() >> shift;
        if i < j {
            v.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::fresh_rng;
    use rand_chacha::ChaCha8Rng;

    fn random_vec(rng: &mut ChaCha8Rng, n: usize) -> Vec<Scalar> {
        (0..n).map(|_| Scalar::random(&mut *rng)).collect()
    }

    /// O(n²) evaluation of the polynomial with coefficients `coeffs` at `shift·omega^i`.
    fn naive_evaluations(coeffs: &[Scalar], domain: Domain, shift: Scalar) -> Vec<Scalar> {
        let omega = domain.omega();
        let mut point = shift;
        (0..domain.size())
            .map(|_| {
                let value = coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * point + c);
                point *= omega;
                value
            })
            .collect()
    }

    #[test]
    fn ntt_matches_naive_evaluation() {
        let mut rng = fresh_rng("ntt_matches_naive_evaluation");
        for log_n in 0..=7 {
            let domain = Domain::from_log_n(log_n).unwrap();
            let coeffs = random_vec(&mut rng, domain.size());
            let mut v = coeffs.clone();
            ntt(&mut v, domain);
            assert_eq!(v, naive_evaluations(&coeffs, domain, Scalar::ONE), "log_n {log_n}");

            let mut v = coeffs.clone();
            coset_ntt(&mut v, domain);
            assert_eq!(v, naive_evaluations(&coeffs, domain, Domain::coset_generator()), "coset, log_n {log_n}");
        }
    }

    #[test]
    fn ntt_differs_from_naive_evaluation_at_a_wrong_root() {
        // Negative twin: evaluating at omega^2 (the doubled-domain mistake) must not agree.
        let mut rng = fresh_rng("ntt_differs_from_naive_evaluation_at_a_wrong_root");
        let domain = Domain::from_log_n(5).unwrap();
        let coeffs = random_vec(&mut rng, domain.size());
        let mut v = coeffs.clone();
        ntt(&mut v, domain);
        let wrong = Domain::from_log_n(6).unwrap();
        let mut padded = coeffs.clone();
        padded.resize(wrong.size(), Scalar::ZERO);
        ntt(&mut padded, wrong);
        assert_ne!(v, padded[..domain.size()].to_vec());
    }

    #[test]
    fn inverse_transforms_round_trip() {
        let mut rng = fresh_rng("inverse_transforms_round_trip");
        // 2^11 and 2^13 exercise both parallel layer strategies.
        for log_n in [0, 1, 2, 3, 9, 11, 13] {
            let domain = Domain::from_log_n(log_n).unwrap();
            let original = random_vec(&mut rng, domain.size());

            let mut v = original.clone();
            ntt(&mut v, domain);
            intt(&mut v, domain);
            assert_eq!(v, original, "ntt∘intt, log_n {log_n}");

            let mut v = original.clone();
            coset_ntt(&mut v, domain);
            icoset_ntt(&mut v, domain);
            assert_eq!(v, original, "coset, log_n {log_n}");

            if log_n > 0 {
                // Negative twin: the plain inverse does not undo the coset transform.
                let mut v = original.clone();
                coset_ntt(&mut v, domain);
                intt(&mut v, domain);
                assert_ne!(v, original, "coset vs plain, log_n {log_n}");
            }
        }
    }

    #[test]
    fn large_parallel_ntt_matches_horner() {
        let mut rng = fresh_rng("large_parallel_ntt_matches_horner");
        let domain = Domain::from_log_n(12).unwrap();
        let coeffs = random_vec(&mut rng, domain.size());
        let mut fast = coeffs.clone();
        ntt(&mut fast, domain);
        // Spot-check a few evaluations by Horner's rule.
        let omega = domain.omega();
        for i in [0usize, 1, 7, 1000, 4095] {
            let point = omega.pow_vartime([i as u64]);
            let expected = coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * point + c);
            assert_eq!(fast[i], expected, "index {i}");
        }
    }
}
