//! Proof verification, through bellperson's verifier.

use bellperson::groth16::{PreparedVerifyingKey, Proof};
use bellperson::SynthesisError;
use blstrs::Bls12;

use crate::{Error, Result, Scalar};

/// Whether `proof` is valid for `public_inputs` (without ONE).
///
/// A wrong number of public inputs is an error, not `false`: it means the caller paired the
/// proof with the wrong key.
pub fn verify(pvk: &PreparedVerifyingKey<Bls12>, proof: &Proof<Bls12>, public_inputs: &[Scalar]) -> Result<bool> {
    bellperson::groth16::verify_proof(pvk, proof, public_inputs).map_err(|err| match err {
        SynthesisError::MalformedVerifyingKey => Error::Synthesis(format!(
            "{} public inputs do not match the verifying key's number of inputs",
            public_inputs.len()
        )),
        other => Error::from(other),
    })
}
