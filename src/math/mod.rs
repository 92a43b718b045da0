//! The CPU reference maths: the evaluation domain, NTTs, the quotient polynomial h and MSMs.
//!
//! Everything here computes exactly what bellperson computes (same domain, same roots of
//! unity, same coset generator), so device backends can be checked against it value by value.

pub mod domain;
pub mod msm;
pub mod ntt;
pub mod quotient;

pub use domain::Domain;
pub use msm::{msm_g1, msm_g2};
pub use ntt::{coset_ntt, icoset_ntt, intt, ntt};
pub use quotient::{from_coset_evaluations, pointwise_quotient_on_coset, quotient_h, to_coset_evaluations};
