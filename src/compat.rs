//! Drop-in replacements for bellperson's proving calls, with the same arguments and meaning,
//! returning bellperson's `Proof` and snarkpipe's [`Error`].
//!
//! For the same circuit, parameters, r and s, the proofs are byte-for-byte bellperson's; the
//! random variants draw r and s from the rng in bellperson's order (every r, then every s).
//! Every proof goes through `prove_witnesses`, the one place where this module proves.

use std::sync::{Arc, OnceLock};

use bellperson::groth16::{ParameterSource, Proof};
use bellperson::Circuit;
use blstrs::Bls12;
use ff::Field;
use rand_core::RngCore;
use rayon::prelude::*;

use crate::backend::BackendKind;
use crate::circuit::{SatisfactionCheck, Witness};
use crate::params::ProvingKey;
use crate::prover::{Priority, ProofRequest, Prover, ProverConfig};
use crate::{Error, Result, Scalar};

/// Proves one circuit with the given blinding factors, like `bellperson::groth16::create_proof`.
pub fn create_proof<C, P>(circuit: C, params: P, r: Scalar, s: Scalar) -> Result<Proof<Bls12>>
where
    C: Circuit<Scalar>,
    P: ParameterSource<Bls12>,
{
    let witness = Witness::synthesize(circuit, SatisfactionCheck::Off)?;
    let key = ProvingKey::from_source(params, &witness.shape())?;
    let mut proofs = prove_witnesses(key, vec![witness], vec![r], vec![s])?;
    proofs.pop().ok_or(Error::EmptyRequest)
}

/// Proves one circuit with r and s drawn from `rng`, like
/// `bellperson::groth16::create_random_proof`.
pub fn create_random_proof<C, R, P>(circuit: C, params: P, rng: &mut R) -> Result<Proof<Bls12>>
where
    C: Circuit<Scalar>,
    R: RngCore,
    P: ParameterSource<Bls12>,
{
    let r = Scalar::random(&mut *rng);
    let s = Scalar::random(&mut *rng);
    create_proof(circuit, params, r, s)
}

/// Proves circuits of one shape, `r[i]` and `s[i]` blinding proof `i`, like
/// `bellperson::groth16::create_proof_batch`. Synthesis runs in parallel.
///
/// Fails with [`Error::RandomnessLength`] unless there are as many r's and s's as circuits,
/// and with [`Error::EmptyRequest`] for no circuits.
pub fn create_proof_batch<C, P>(
    circuits: Vec<C>,
    params: P,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
) -> Result<Vec<Proof<Bls12>>>
where
    C: Circuit<Scalar> + Send,
    P: ParameterSource<Bls12>,
{
    if r.len() != circuits.len() || s.len() != circuits.len() {
        return Err(Error::RandomnessLength { circuits: circuits.len(), r: r.len(), s: s.len() });
    }
    if circuits.is_empty() {
        return Err(Error::EmptyRequest);
    }
    let witnesses = circuits
        .into_par_iter()
        .map(|circuit| Witness::synthesize(circuit, SatisfactionCheck::Off))
        .collect::<Result<Vec<_>>>()?;
    // bellperson takes one key for the whole batch, sized by the first circuit; any circuit of
    // another shape fails the key's shape check.
    let key = match witnesses.first() {
        Some(first) => ProvingKey::from_source(params, &first.shape())?,
        None => return Err(Error::EmptyRequest),
    };
    prove_witnesses(key, witnesses, r, s)
}

/// [`create_proof_batch`] with r's and s's drawn from `rng` (all r's first, then all s's, as
/// bellperson does, so the same rng state gives the same proofs).
pub fn create_random_proof_batch<C, R, P>(circuits: Vec<C>, params: P, rng: &mut R) -> Result<Vec<Proof<Bls12>>>
where
    C: Circuit<Scalar> + Send,
    R: RngCore,
    P: ParameterSource<Bls12>,
{
    let r = (0..circuits.len()).map(|_| Scalar::random(&mut *rng)).collect();
    let s = (0..circuits.len()).map(|_| Scalar::random(&mut *rng)).collect();
    create_proof_batch(circuits, params, r, s)
}

/// The one place compat proves: every synthesized witness, with its own r and s, streamed
/// through the shared default [`Prover`].
fn prove_witnesses(
    key: Arc<ProvingKey>,
    witnesses: Vec<Witness>,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
) -> Result<Vec<Proof<Bls12>>> {
    if r.len() != witnesses.len() || s.len() != witnesses.len() {
        return Err(Error::RandomnessLength { circuits: witnesses.len(), r: r.len(), s: s.len() });
    }
    let request = ProofRequest {
        key,
        partitions: witnesses.into_iter().map(Arc::new).collect(),
        r,
        s,
        priority: Priority::Normal,
        devices: None,
    };
    default_prover()?.prove(request)
}

/// The prover the compat functions share, started on first use. `SNARKPIPE_BACKEND`
/// (`auto`, `cpu` or `cuda`) picks its backend; the default is `auto`.
pub fn default_prover() -> Result<&'static Prover> {
    static DEFAULT: OnceLock<std::result::Result<Prover, Error>> = OnceLock::new();
    DEFAULT
        .get_or_init(|| {
            let backend = match std::env::var("SNARKPIPE_BACKEND").as_deref() {
                Ok("cpu") => BackendKind::Cpu,
                Ok("cuda") => BackendKind::Cuda,
                _ => BackendKind::Auto,
            };
            Prover::new(ProverConfig { backend, ..ProverConfig::default() })
        })
        .as_ref()
        .map_err(Clone::clone)
}
