//! Proof assembly: the MSM results, the verifying key and the blinding factors r, s become
//! the proof's three points.

use bellperson::groth16::{Proof, VerifyingKey};
use blstrs::{Bls12, G1Projective, G2Projective};
use group::{prime::PrimeCurveAffine, Curve};

use super::MsmResults;
use crate::{Error, Result, Scalar};

/// Assembles a proof with bellperson's formulas:
///
/// ```text
/// A = α + a + r·δ
/// B = β + b_g2 + s·δ
/// C = s·a + r·b_g1 + r·s·δ + s·α + r·β + h + l     (= s·A + r·B_G1 − r·s·δ + h + l)
/// ```
///
/// Fails with [`Error::UnexpectedIdentity`] if δ is the identity in G1 or G2: such parameters
/// are subverted, and the blinding would not hide the witness.
pub fn assemble_proof(vk: &VerifyingKey<Bls12>, msm: &MsmResults, r: Scalar, s: Scalar) -> Result<Proof<Bls12>> {
    if bool::from(vk.delta_g1.is_identity()) || bool::from(vk.delta_g2.is_identity()) {
        return Err(Error::UnexpectedIdentity);
    }
    let delta_g1 = G1Projective::from(vk.delta_g1);
    let alpha_g1 = G1Projective::from(vk.alpha_g1);

    let a = alpha_g1 + msm.a + delta_g1 * r;
    let b = G2Projective::from(vk.beta_g2) + msm.b_g2 + G2Projective::from(vk.delta_g2) * s;
    let c = msm.a * s
        + msm.b_g1 * r
        + delta_g1 * (r * s)
        + alpha_g1 * s
        + G1Projective::from(vk.beta_g1) * r
        + msm.h
        + msm.l;

    Ok(Proof { a: a.to_affine(), b: b.to_affine(), c: c.to_affine() })
}
