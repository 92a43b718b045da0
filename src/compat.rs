//! Drop-in replacements for bellperson 0.27's eight proving calls, with bellperson's
//! signatures for its engine fixed to `Bls12`: swap the `use` line, and a caller's code that
//! type-checks with bellperson for Bls12 type-checks unchanged (unless it names the engine in
//! a turbofish, as `E` is not a type parameter here).
//!
//! For the same circuit, parameters, r and s, the proofs are byte-for-byte bellperson's; the
//! random variants draw r and s from the rng in bellperson's order (every r, then every s).
//!
//! Like bellperson's, the calls return `bellperson::SynthesisError`. A snarkpipe failure is a
//! `SynthesisError::IoError` of kind `Other` whose message is the failure's whole `Display`
//! and whose inner error is the typed [`Error`] itself: [`snarkpipe_error`] gets it back.
//!
//! bellperson's `_in_priority` calls take its GPU lock ahead of other work; here they submit at
//! [`Priority::High`] (the others at [`Priority::Normal`]), so their waiting partitions are
//! admitted before any waiting normal-priority work. Running work is never interrupted.
//!
//! Every call proves on the shared [`default_prover`] and takes its key from that prover's key
//! cache ([`Prover::key_for_source`]): the same parameters passed again (the same in-memory
//! `Parameters`, the same `MappedParameters` file) reuse the key built the first time, still
//! resident and page-locked, instead of reading every point again.
//!
//! [`prove_batch`] and [`prove_batch_from_source`] are the typed core the eight calls share,
//! for callers inside snarkpipe that want [`Error`] and the [`BatchTimings`].

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bellperson::groth16::{ParameterSource, Proof};
use bellperson::{Circuit, SynthesisError};
use blstrs::Bls12;
use ff::Field;
use rand_core::RngCore;
use serde::Serialize;

use crate::backend::BackendKind;
use crate::circuit::WitnessShape;
use crate::params::ProvingKey;
use crate::prover::{KeyFor, Priority, Prover, ProverConfig};
use crate::{Error, Result, Scalar};

/// Where a batch's time went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct BatchTimings {
    /// Synthesizing the circuits, summed over them: it overlaps the proving (only the first
    /// circuit's, when its shape picks the key, comes before it).
    pub synthesis: Duration,
    /// Finding the proving key in the prover's key cache, or building it on a miss (zero when
    /// the caller passed the key).
    pub key: Duration,
    /// From submitting the partitions until the last proof came back, waiting and the
    /// synthesis it overlaps included.
    pub proving: Duration,
    /// Of `proving`, the wait before the first partition reached a device, when known.
    pub queue: Option<Duration>,
}

/// Proves `circuits` with `key` on `prover` at `priority`, `r[i]` and `s[i]` blinding proof
/// `i`, each circuit synthesized by this call's threads when the pipeline's synthesis stage
/// asks for it, so that synthesis overlaps proving; the proofs in order, and where the time
/// went.
///
/// Fails with [`Error::RandomnessLength`] unless there are as many r's and s's as circuits,
/// with [`Error::EmptyRequest`] for no circuits, and with [`Error::ParamsMismatch`] when a
/// circuit's shape is not the key's.
pub fn prove_batch<C>(
    prover: &Prover,
    key: Arc<ProvingKey>,
    circuits: Vec<C>,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
    priority: Priority,
) -> Result<(Vec<Proof<Bls12>>, BatchTimings)>
where
    C: Circuit<Scalar> + Send,
{
    check_batch(circuits.len(), &r, &s)?;
    prove_circuits(prover, KeyFor::Known(key), circuits, r, s, priority)
}

/// [`prove_batch`] with the key from `prover`'s key cache for `params`, cut for the first
/// circuit's shape as bellperson does (built only on a miss). The first circuit is
/// synthesized before the others, as its shape picks the key.
pub fn prove_batch_from_source<C, P>(
    prover: &Prover,
    params: P,
    circuits: Vec<C>,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
    priority: Priority,
) -> Result<(Vec<Proof<Bls12>>, BatchTimings)>
where
    C: Circuit<Scalar> + Send,
    P: ParameterSource<Bls12>,
{
    check_batch(circuits.len(), &r, &s)?;
    let find = KeyFor::Shape(Box::new(move |shape: &WitnessShape| prover.key_for_source(params, shape)));
    prove_circuits(prover, find, circuits, r, s, priority)
}

/// The batch through [`Prover::prove_circuits`], synthesized on as many threads as the
/// machine has.
fn prove_circuits<C: Circuit<Scalar> + Send>(
    prover: &Prover,
    key: KeyFor<'_>,
    circuits: Vec<C>,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
    priority: Priority,
) -> Result<(Vec<Proof<Bls12>>, BatchTimings)> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let started = Instant::now();
    let batch = prover.prove_circuits(key, circuits, r, s, priority, threads)?;
    let total = started.elapsed();
    let proving = total.saturating_sub(batch.before_proving);
    let timings = BatchTimings {
        synthesis: batch.synthesis_time,
        key: batch.key_time,
        proving,
        queue: batch.handle.queued_for().map(|queue| queue.min(proving)),
    };
    Ok((batch.proofs, timings))
}

/// bellperson's error for a snarkpipe failure: an I/O error of kind `Other` whose message is
/// the failure's whole `Display` and whose inner error is the failure itself.
pub fn to_synthesis_error(err: Error) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::other(err))
}

/// The typed failure inside an error the compat calls returned, if it is one of snarkpipe's.
pub fn snarkpipe_error(err: &SynthesisError) -> Option<&Error> {
    match err {
        SynthesisError::IoError(io) => io.get_ref()?.downcast_ref::<Error>(),
        _ => None,
    }
}

/// Creates a proof with the given blinding factors, like bellperson's `create_proof`.
pub fn create_proof<C, P>(circuit: C, params: P, r: Scalar, s: Scalar) -> Result<Proof<Bls12>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    P: ParameterSource<Bls12>,
{
    single(batch(vec![circuit], params, vec![r], vec![s], Priority::Normal))
}

/// Creates a proof with r and s drawn from `rng`, like bellperson's `create_random_proof`.
pub fn create_random_proof<C, R, P>(circuit: C, params: P, rng: &mut R) -> Result<Proof<Bls12>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    R: RngCore,
    P: ParameterSource<Bls12>,
{
    single(random_batch(vec![circuit], params, rng, Priority::Normal))
}

/// Creates proofs of circuits of one shape, `r[i]` and `s[i]` blinding proof `i`, like
/// bellperson's `create_proof_batch`. Synthesis runs in parallel.
pub fn create_proof_batch<C, P>(
    circuits: Vec<C>,
    params: P,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
) -> Result<Vec<Proof<Bls12>>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    P: ParameterSource<Bls12>,
{
    batch(circuits, params, r, s, Priority::Normal)
}

/// [`create_proof_batch`] with r's and s's drawn from `rng` (all r's first, then all s's, as
/// bellperson does, so the same rng state gives the same proofs).
pub fn create_random_proof_batch<C, R, P>(
    circuits: Vec<C>,
    params: P,
    rng: &mut R,
) -> Result<Vec<Proof<Bls12>>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    R: RngCore,
    P: ParameterSource<Bls12>,
{
    random_batch(circuits, params, rng, Priority::Normal)
}

/// [`create_proof`] at [`Priority::High`], like bellperson's `create_proof_in_priority`.
pub fn create_proof_in_priority<C, P>(
    circuit: C,
    params: P,
    r: Scalar,
    s: Scalar,
) -> Result<Proof<Bls12>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    P: ParameterSource<Bls12>,
{
    single(batch(vec![circuit], params, vec![r], vec![s], Priority::High))
}

/// [`create_random_proof`] at [`Priority::High`], like bellperson's
/// `create_random_proof_in_priority`.
pub fn create_random_proof_in_priority<C, R, P>(
    circuit: C,
    params: P,
    rng: &mut R,
) -> Result<Proof<Bls12>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    R: RngCore,
    P: ParameterSource<Bls12>,
{
    single(random_batch(vec![circuit], params, rng, Priority::High))
}

/// [`create_proof_batch`] at [`Priority::High`], like bellperson's
/// `create_proof_batch_in_priority`.
pub fn create_proof_batch_in_priority<C, P>(
    circuits: Vec<C>,
    params: P,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
) -> Result<Vec<Proof<Bls12>>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    P: ParameterSource<Bls12>,
{
    batch(circuits, params, r, s, Priority::High)
}

/// [`create_random_proof_batch`] at [`Priority::High`], like bellperson's
/// `create_random_proof_batch_in_priority`.
pub fn create_random_proof_batch_in_priority<C, R, P>(
    circuits: Vec<C>,
    params: P,
    rng: &mut R,
) -> Result<Vec<Proof<Bls12>>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    R: RngCore,
    P: ParameterSource<Bls12>,
{
    random_batch(circuits, params, rng, Priority::High)
}

/// The one way the eight calls prove: on the default prover, through its key cache.
fn batch<C, P>(
    circuits: Vec<C>,
    params: P,
    r: Vec<Scalar>,
    s: Vec<Scalar>,
    priority: Priority,
) -> Result<Vec<Proof<Bls12>>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    P: ParameterSource<Bls12>,
{
    default_prover()
        .and_then(|prover| prove_batch_from_source(prover, params, circuits, r, s, priority))
        .map(|(proofs, _)| proofs)
        .map_err(to_synthesis_error)
}

/// [`batch`] with every r drawn from `rng`, then every s.
fn random_batch<C, R, P>(
    circuits: Vec<C>,
    params: P,
    rng: &mut R,
    priority: Priority,
) -> Result<Vec<Proof<Bls12>>, SynthesisError>
where
    C: Circuit<Scalar> + Send,
    R: RngCore,
    P: ParameterSource<Bls12>,
{
    let r = (0..circuits.len()).map(|_| Scalar::random(&mut *rng)).collect();
    let s = (0..circuits.len()).map(|_| Scalar::random(&mut *rng)).collect();
    batch(circuits, params, r, s, priority)
}

/// The one proof of a batch of one.
fn single(proofs: Result<Vec<Proof<Bls12>>, SynthesisError>) -> Result<Proof<Bls12>, SynthesisError> {
    proofs?.pop().ok_or_else(|| to_synthesis_error(Error::EmptyRequest))
}

/// A batch must have circuits, and one r and one s for each.
fn check_batch(circuits: usize, r: &[Scalar], s: &[Scalar]) -> Result<()> {
    if r.len() != circuits || s.len() != circuits {
        return Err(Error::RandomnessLength { circuits, r: r.len(), s: s.len() });
    }
    if circuits == 0 {
        return Err(Error::EmptyRequest);
    }
    Ok(())
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
