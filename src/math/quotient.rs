//! The quotient polynomial `h = (a·b − c) / Z`, computed on the coset exactly as bellperson's
//! `execute_fft` does:
//!
//! ```text
//! a, b, c (evaluations on H) ─intt─► coefficients ─coset_ntt─► evaluations on g·H
//!   ─► (a·b − c) · Z(g)^-1 ─icoset_ntt─► h's coefficients (the top one, always 0, dropped)
//! ```
//!
//! The pieces are public so that a device backend can be checked step by step.

use ff::Field;
use rayon::prelude::*;

use super::{coset_ntt, icoset_ntt, intt, Domain};
use crate::{Error, Result, Scalar};

/// The coefficients of `h`: `domain.size() - 1` of them, as many as the key's `h` query.
///
/// `a`, `b` and `c` are the constraint evaluations of one witness (equal lengths); they are
/// zero-padded to the domain here.
pub fn quotient_h(mut a: Vec<Scalar>, mut b: Vec<Scalar>, mut c: Vec<Scalar>) -> Result<Vec<Scalar>> {
    if a.len() != b.len() || a.len() != c.len() {
        return Err(Error::Synthesis(format!(
            "the constraint evaluations differ in length: a {}, b {}, c {}",
            a.len(),
            b.len(),
            c.len()
        )));
    }
    let domain = Domain::for_len(a.len())?;
    rayon::join(
        || to_coset_evaluations(&mut a, domain),
        || rayon::join(|| to_coset_evaluations(&mut b, domain), || to_coset_evaluations(&mut c, domain)),
    );
    pointwise_quotient_on_coset(&mut a, &b, &c, domain);
    // b and c are no longer needed; free them before the last transform to bound peak memory.
    drop((b, c));
    from_coset_evaluations(&mut a, domain);
    // deg(a·b − c) ≤ 2n − 2, so deg h ≤ n − 2: the last coefficient is zero and the key has
    // no point for it.
    a.truncate(domain.size() - 1);
    Ok(a)
}

/// Evaluations on H (zero-padded to the domain) → evaluations on the coset g·H.
pub fn to_coset_evaluations(v: &mut Vec<Scalar>, domain: Domain) {
    v.resize(domain.size(), Scalar::ZERO);
    intt(v, domain);
    coset_ntt(v, domain);
}

/// `a[i] = (a[i]·b[i] − c[i]) · Z(g)^-1`, on coset evaluations.
///
/// Z is constant on the coset, so one inverse serves every point.
pub fn pointwise_quotient_on_coset(a: &mut [Scalar], b: &[Scalar], c: &[Scalar], domain: Domain) {
    debug_assert!(a.len() == b.len() && a.len() == c.len());
    let z_inv = domain.coset_vanishing_inverse();
    a.par_iter_mut().zip(b.par_iter()).zip(c.par_iter()).with_min_len(1 << 10).for_each(|((a, b), c)| {
        *a = (*a * b - c) * z_inv;
    });
}

/// Evaluations on the coset g·H → coefficients.
pub fn from_coset_evaluations(v: &mut [Scalar], domain: Domain) {
    icoset_ntt(v, domain);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::fresh_rng;
    use crate::math::ntt;
    use rand_chacha::ChaCha8Rng;

    fn horner(coeffs: &[Scalar], x: Scalar) -> Scalar {
        coeffs.iter().rev().fold(Scalar::ZERO, |acc, c| acc * x + c)
    }

    /// Evaluations a, b on H of random polynomials, and c = a·b on H, so that a·b − c
    /// vanishes on H (what a satisfied witness gives). Returns the interpolated coefficients too.
    fn satisfied_evaluations(rng: &mut ChaCha8Rng, len: usize) -> (Vec<Scalar>, Vec<Scalar>, Vec<Scalar>) {
        let a: Vec<Scalar> = (0..len).map(|_| Scalar::random(&mut *rng)).collect();
        let b: Vec<Scalar> = (0..len).map(|_| Scalar::random(&mut *rng)).collect();
        let c = a.iter().zip(&b).map(|(a, b)| *a * b).collect();
        (a, b, c)
    }

    fn interpolate(mut evaluations: Vec<Scalar>, domain: Domain) -> Vec<Scalar> {
        evaluations.resize(domain.size(), Scalar::ZERO);
        ntt::intt(&mut evaluations, domain);
        evaluations
    }

    #[test]
    fn h_satisfies_the_polynomial_identity() {
        let mut rng = fresh_rng("h_satisfies_the_polynomial_identity");
        // Lengths on both sides of powers of two, including a single constraint.
        for len in [1usize, 2, 3, 7, 8, 9, 63, 64, 65, 1000, 1024, 1025] {
            let (a, b, c) = satisfied_evaluations(&mut rng, len);
            let domain = Domain::for_len(len).unwrap();
            let h = quotient_h(a.clone(), b.clone(), c.clone()).unwrap();
            assert_eq!(h.len(), domain.size() - 1, "len {len}");

            let (pa, pb, pc) = (interpolate(a, domain), interpolate(b, domain), interpolate(c, domain));
            let x = Scalar::random(&mut rng);
            let lhs = horner(&pa, x) * horner(&pb, x) - horner(&pc, x);
            let rhs = horner(&h, x) * domain.vanishing_at(x);
            assert_eq!(lhs, rhs, "a(x)b(x) - c(x) = h(x)Z(x), len {len}");
        }
    }

    #[test]
    fn h_of_an_unsatisfied_witness_breaks_the_identity() {
        // Negative twin: one wrong c evaluation means Z no longer divides a·b − c.
        let mut rng = fresh_rng("h_of_an_unsatisfied_witness_breaks_the_identity");
        let len = 100;
        let (a, b, mut c) = satisfied_evaluations(&mut rng, len);
        c[37] += Scalar::ONE;
        let domain = Domain::for_len(len).unwrap();
        let h = quotient_h(a.clone(), b.clone(), c.clone()).unwrap();
        let (pa, pb, pc) = (interpolate(a, domain), interpolate(b, domain), interpolate(c, domain));
        let x = Scalar::random(&mut rng);
        assert_ne!(horner(&pa, x) * horner(&pb, x) - horner(&pc, x), horner(&h, x) * domain.vanishing_at(x));
    }

    #[test]
    fn pieces_compose_to_quotient_h() {
        let mut rng = fresh_rng("pieces_compose_to_quotient_h");
        let (a, b, c) = satisfied_evaluations(&mut rng, 300);
        let domain = Domain::for_len(300).unwrap();
        let whole = quotient_h(a.clone(), b.clone(), c.clone()).unwrap();
        let (mut a, mut b, mut c) = (a, b, c);
        for v in [&mut a, &mut b, &mut c] {
            to_coset_evaluations(v, domain);
        }
        pointwise_quotient_on_coset(&mut a, &b, &c, domain);
        from_coset_evaluations(&mut a, domain);
        assert_eq!(a[domain.size() - 1], Scalar::ZERO, "the top coefficient of h is zero");
        assert_eq!(&a[..domain.size() - 1], &whole[..]);
    }

    #[test]
    fn mismatched_and_empty_inputs_are_errors() {
        let one = Scalar::ONE;
        assert!(matches!(quotient_h(vec![one; 3], vec![one; 2], vec![one; 3]), Err(Error::Synthesis(_))));
        assert!(matches!(quotient_h(vec![], vec![], vec![]), Err(Error::EmptyCircuit)));
    }
}
