//! The CPU reference Groth16 prover, split into the steps the pipeline runs stage by stage:
//!
//! ```text
//! Witness ─quotient_h─► h ─compute_msms─► MsmResults ─assemble_proof─► Proof (A, B, C)
//! ```
//!
//! Each step computes exactly what bellperson's native prover computes, so a proof from here
//! is byte-for-byte bellperson's for the same circuit, parameters, r and s.

mod assemble;
pub mod setup;
mod verify;

pub use assemble::assemble_proof;
pub use verify::verify;

use bellperson::groth16::Proof;
use blstrs::Bls12;

use crate::circuit::Witness;
pub use crate::math::MsmResults;
use crate::math::{msm_g1, msm_g2, quotient_h};
use crate::params::ProvingKey;
use crate::{Error, Result, Scalar};

/// Runs the five MSMs of one proof. `h_coeffs` are [`quotient_h`]'s output for `witness`.
///
/// Checks the key against the witness's shape first, so every MSM pairs equal lengths.
pub fn compute_msms(key: &ProvingKey, witness: &Witness, h_coeffs: &[Scalar]) -> Result<MsmResults> {
    key.check_shape(&witness.shape())?;
    if h_coeffs.len() != key.h.len() {
        return Err(Error::ParamsMismatch {
            what: "h (coefficients of h)",
            in_params: key.h.len(),
            in_circuit: h_coeffs.len(),
        });
    }
    let b_scalars = witness.b_query_scalars();
    // blst parallelises each MSM internally, so they run one after the other.
    Ok(MsmResults {
        h: msm_g1(&key.h, h_coeffs),
        l: msm_g1(&key.l, &witness.aux_assignment),
        a: msm_g1(&key.a, &witness.a_query_scalars()),
        b_g1: msm_g1(&key.b_g1, &b_scalars),
        b_g2: msm_g2(&key.b_g2, &b_scalars),
    })
}

/// Proves one witness with the blinding factors `r` and `s`: shape check, quotient, MSMs,
/// assembly.
pub fn prove(key: &ProvingKey, witness: &Witness, r: Scalar, s: Scalar) -> Result<Proof<Bls12>> {
    key.check_shape(&witness.shape())?;
    let h = quotient_h(witness.a.clone(), witness.b.clone(), witness.c.clone())?;
    let msm = compute_msms(key, witness, &h)?;
    assemble_proof(&key.vk, &msm, r, s)
}
