//! The CPU reference maths: the evaluation domain, NTTs, the quotient polynomial h, MSMs and
//! batched conversion of points to affine.
//!
//! Everything here computes exactly what bellperson computes (same domain, same roots of
//! unity, same coset generator), so device backends can be checked against it value by value.

pub mod affine;
pub mod domain;
pub mod fixed_base;
pub mod msm;
pub mod ntt;
pub mod quotient;

pub use affine::BatchAffine;
pub use domain::Domain;
pub use fixed_base::FixedBase;
pub use msm::{msm_g1, msm_g2, MsmResults};
pub use ntt::{coset_ntt, icoset_ntt, intt, ntt};
pub use quotient::{from_coset_evaluations, pointwise_quotient_on_coset, quotient_h, to_coset_evaluations};

/// `len` copies of `value`, written by every core: at 2^26 and up, touching the fresh pages
/// from one thread takes longer than most of the work later done on them.
pub(crate) fn filled<T: Copy + Send + Sync>(len: usize, value: T) -> Vec<T> {
    use rayon::prelude::*;
    let mut out = Vec::with_capacity(len);
    (0..len).into_par_iter().with_min_len(1 << 12).map(|_| value).collect_into_vec(&mut out);
    out
}

/// A fresh RNG for a unit test, its seed printed so that a failure can be replayed.
#[cfg(test)]
pub(crate) fn fresh_rng(test: &str) -> rand_chacha::ChaCha8Rng {
    use rand::{Rng, SeedableRng};
    let seed: u64 = rand::thread_rng().gen();
    eprintln!("{test}: seed {seed}");
    rand_chacha::ChaCha8Rng::seed_from_u64(seed)
}
