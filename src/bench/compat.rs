//! `snarkpipe bench --api compat`: the synthetic circuits proven through the bellperson drop-in
//! as filecoin-proofs calls bellperson, against the native path on the same prover.
//!
//! The spec's setup key is written as bellperson `Parameters` to a temporary file and opened
//! once as `MappedParameters`; every call passes that one `&MappedParameters` to
//! [`crate::compat::create_random_proof_batch`], which synthesizes its circuits and proves them
//! on compat's shared prover ([`crate::compat::default_prover`]). The calls prove the
//! `--partitions` circuits in turn, `--compat-batch` per call, one call after another as a node
//! proves one sector after another. The first call builds the key from the file (the key
//! cache's one miss); from the second call on a call finds it cached and resident, which is the
//! steady figure.
//!
//! In the same run, on the same prover, the native path proves the same circuits: synthesized
//! with [`Witness::synthesize`] in the calls' batches (so both synthesize with the same
//! parallelism), then streamed as the plain bench streams, with the key the cache built from
//! the same mapped parameters. Its time per partition counts that synthesis, so the ratio of
//! the two compares like with like; the ratio to the native proving alone is reported beside it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::{prepare_verifying_key, MappedParameters, Parameters};
use blstrs::Bls12;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde::Serialize;

use super::{stream_on, BenchArgs, BenchReport, Ownership};
use crate::backend::BackendKind;
use crate::circuit::{SatisfactionCheck, Witness};
use crate::groth16::verify;
use crate::prover::Prover;
use crate::synthetic::KeyKind;
use crate::{Error, Result};

/// The drop-in call every batch goes through.
pub const COMPAT_CALL: &str = "snarkpipe::compat::create_random_proof_batch";

/// One call of the drop-in.
#[derive(Debug, Clone, Serialize)]
pub struct CompatCall {
    pub circuits: usize,
    /// The call's wall time: synthesis, the key lookup (its load on a miss) and proving.
    pub seconds: f64,
    /// Key-cache misses during the call: the call that built the key from the file has one.
    pub key_misses: u64,
    pub verified: usize,
    pub failed: usize,
}

/// The drop-in against the native path, in one run (`compat` in the JSON report).
#[derive(Debug, Clone, Serialize)]
pub struct CompatFigures {
    pub call: &'static str,
    /// Circuits per call (`--compat-batch`).
    pub batch: usize,
    pub calls: Vec<CompatCall>,
    /// Compat proofs that verified with the pairing, over all calls.
    pub verified: usize,
    pub failed: usize,
    /// The bellperson parameter file every call mapped, and writing it (before any clock).
    pub params_file_bytes: u64,
    pub seconds_write_params: f64,
    /// The first call, which builds the key from the mapped file.
    pub first_call_seconds: f64,
    pub first_call_key_misses: u64,
    /// What the first call took beyond a steady call of its size: the key's load from the
    /// mapped file and its first upload, mostly (below zero when the calls' own spread is
    /// larger than that load).
    pub first_call_extra_seconds: f64,
    /// Key-cache misses and hits over every call and the native path's key lookup: one miss
    /// when the parameters were loaded once.
    pub key_misses: u64,
    pub key_hits: u64,
    /// From the second call on: seconds per partition, the calls' synthesis included.
    pub steady_seconds_per_partition: f64,
    /// The native path on the same prover and circuits: `Witness::synthesize` in the calls'
    /// batches, then the stream (after its warm-up, as the plain bench).
    pub native_synthesis_seconds_per_partition: f64,
    pub native_proving_seconds_per_partition: f64,
    /// Synthesis plus proving: what a compat call's time compares with.
    pub native_seconds_per_partition: f64,
    /// Steady compat over native, both with synthesis.
    pub ratio: f64,
    /// Steady compat (its synthesis included) over native proving alone (synthesis left out).
    pub ratio_to_native_proving: f64,
}

/// Runs `--api compat` (see the module's documentation).
pub fn run(args: &BenchArgs) -> Result<BenchReport> {
    if args.compat_batch == Some(0) {
        return Err(Error::Config("--compat-batch must be at least 1".into()));
    }
    if args.partitions < 2 {
        return Err(Error::Config(format!(
            "--api compat needs at least two calls to tell the key's load from a steady call, so at least two \
             partitions, not {}",
            args.partitions
        )));
    }
    if args.keys != KeyKind::Setup {
        return Err(Error::Config("--api compat proves with a real setup (--keys setup), so its proofs verify".into()));
    }
    if args.scaling || args.inject_faults > 0.0 {
        return Err(Error::Config(
            "--scaling and --inject-faults configure the bench's own prover; --api compat proves on compat's shared prover"
                .into(),
        ));
    }
    let prover = shared_prover(args.backend)?;
    let batch = args
        .compat_batch
        .unwrap_or_else(|| (prover.config().in_flight * prover.device_count()).clamp(1, args.partitions / 2));
    let calls = args.partitions.div_ceil(batch);
    if calls < 2 {
        return Err(Error::Config(format!(
            "--api compat needs at least two calls to tell the key's load from a steady call: {} partitions at \
             --compat-batch {batch} make {calls}",
            args.partitions
        )));
    }
    let (spec, key, seconds_key) = super::synthetic_key(args)?;

    let file = TempParams::new(args.seed);
    let writing = Instant::now();
    // The setup key's vectors start at their first point, as `Parameters` holds them.
    let params = Parameters::<Bls12> {
        vk: key.vk.clone(),
        h: key.h.clone(),
        l: key.l.clone(),
        a: key.a.clone(),
        b_g1: key.b_g1.clone(),
        b_g2: key.b_g2.clone(),
    };
    write_params(&params, file.path())?;
    let seconds_write_params = writing.elapsed().as_secs_f64();
    let pvk = prepare_verifying_key(&params.vk);
    // Only the file carries the points from here on: every key below is built from it.
    drop((params, key));
    let params_file_bytes = std::fs::metadata(file.path()).map(|m| m.len()).unwrap_or(0);
    let mapped: MappedParameters<Bls12> = Parameters::build_mapped_parameters(file.path().to_path_buf(), false)
        .map_err(|e| Error::io(format!("mapping {}", file.path().display()), e))?;

    let ranges: Vec<std::ops::Range<usize>> =
        (0..calls).map(|c| c * batch..((c + 1) * batch).min(args.partitions)).collect();

    tracing::info!(partitions = args.partitions, "synthesizing the native path's witnesses");
    let synthesizing = Instant::now();
    let mut witnesses = Vec::with_capacity(args.partitions);
    for range in &ranges {
        let batch = range
            .clone()
            .into_par_iter()
            .map(|i| Witness::synthesize(spec.circuit(i), SatisfactionCheck::Off).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        witnesses.extend(batch);
    }
    let native_synthesis_seconds = synthesizing.elapsed().as_secs_f64();

    let status = prover.key_cache_status();
    let (misses_before, hits_before) = (status.misses, status.hits);
    let mut rng = ChaCha20Rng::seed_from_u64(args.seed ^ 0xc0_4a7);
    let mut errors = Vec::new();
    let mut done = Vec::with_capacity(calls);
    for range in &ranges {
        let circuits: Vec<_> = range.clone().map(|i| spec.circuit(i)).collect();
        let misses = prover.key_cache_status().misses;
        let started = Instant::now();
        let outcome = crate::compat::create_random_proof_batch(circuits, &mapped, &mut rng);
        let seconds = started.elapsed().as_secs_f64();
        let key_misses = prover.key_cache_status().misses - misses;
        let (mut verified, mut failed) = (0, 0);
        match outcome {
            Ok(proofs) if proofs.len() == range.len() => {
                for (proof, i) in proofs.iter().zip(range.clone()) {
                    match verify(&pvk, proof, witnesses[i].public_inputs()) {
                        Ok(true) => verified += 1,
                        Ok(false) => {
                            failed += 1;
                            errors.push(format!("compat proof {i} did not verify"));
                        }
                        Err(err) => {
                            failed += 1;
                            errors.push(format!("compat proof {i}: {err}"));
                        }
                    }
                }
            }
            Ok(proofs) => {
                failed += range.len();
                errors.push(format!("a compat call of {} circuits returned {} proofs", range.len(), proofs.len()));
            }
            Err(err) => {
                failed += range.len();
                errors.push(format!("a compat call failed: {err}"));
            }
        }
        done.push(CompatCall { circuits: range.len(), seconds, key_misses, verified, failed });
    }

    // The native path's key is the one the calls built: a hit, not a second load.
    let key = prover.key_for_source(&mapped, &witnesses[0].shape())?;
    let mut report = stream_on(prover, args, &spec, &key, &witnesses, true, Ownership::Shared)?;
    drop(key);
    let status = prover.key_cache_status();
    let (key_misses, key_hits) = (status.misses - misses_before, status.hits - hits_before);
    // The shared prover outlives the bench: the bench's key should not stay cached in it.
    prover.evict_cached_keys();
    drop(mapped);
    drop(file);

    let first = &done[0];
    let steady_circuits: usize = done[1..].iter().map(|c| c.circuits).sum();
    let steady_seconds: f64 = done[1..].iter().map(|c| c.seconds).sum();
    let steady_seconds_per_partition = steady_seconds / steady_circuits.max(1) as f64;
    let partitions = args.partitions as f64;
    let native_synthesis_seconds_per_partition = native_synthesis_seconds / partitions;
    let native_proving_seconds_per_partition = report.seconds_per_partition;
    let native_seconds_per_partition = native_synthesis_seconds_per_partition + native_proving_seconds_per_partition;
    let verified: usize = done.iter().map(|c| c.verified).sum();
    let failed: usize = done.iter().map(|c| c.failed).sum();
    let figures = CompatFigures {
        call: COMPAT_CALL,
        batch,
        verified,
        failed,
        params_file_bytes,
        seconds_write_params,
        first_call_seconds: first.seconds,
        first_call_key_misses: first.key_misses,
        first_call_extra_seconds: first.seconds - steady_seconds_per_partition * first.circuits as f64,
        key_misses,
        key_hits,
        steady_seconds_per_partition,
        native_synthesis_seconds_per_partition,
        native_proving_seconds_per_partition,
        native_seconds_per_partition,
        ratio: steady_seconds_per_partition / native_seconds_per_partition.max(f64::EPSILON),
        ratio_to_native_proving: steady_seconds_per_partition / native_proving_seconds_per_partition.max(f64::EPSILON),
        calls: done,
    };
    report.seconds_key = seconds_key;
    // The exit status follows `failed`: a compat proof that fails must fail the run too.
    report.verified += figures.verified;
    report.failed += figures.failed;
    report.errors.extend(errors);
    report.compat = Some(figures);
    Ok(report)
}

/// Compat's shared prover, on the backend `--backend` names. Its backend is read from
/// `SNARKPIPE_BACKEND` when it starts, so that is set first; a prover already started on
/// another backend is refused rather than measured.
fn shared_prover(backend: BackendKind) -> Result<&'static Prover> {
    let name = match backend {
        BackendKind::Cpu => "cpu",
        BackendKind::Cuda => "cuda",
        BackendKind::Auto => "auto",
    };
    if std::env::var("SNARKPIPE_BACKEND").ok().as_deref() != Some(name) {
        std::env::set_var("SNARKPIPE_BACKEND", name);
    }
    let prover = crate::compat::default_prover()?;
    if backend != BackendKind::Auto && prover.backend() != backend {
        return Err(Error::Config(format!(
            "compat's shared prover already runs on {:?} in this process, not {backend:?}",
            prover.backend()
        )));
    }
    Ok(prover)
}

/// Writes `params` as bellperson does (`Parameters::write`) to `path`.
fn write_params(params: &Parameters<Bls12>, path: &Path) -> Result<()> {
    let context = || format!("writing the bench's parameters to {}", path.display());
    let file = std::fs::File::create(path).map_err(|e| Error::io(context(), e))?;
    let mut writer = std::io::BufWriter::with_capacity(1 << 20, file);
    params.write(&mut writer).map_err(|e| Error::io(context(), e))?;
    std::io::Write::flush(&mut writer).map_err(|e| Error::io(context(), e))?;
    Ok(())
}

/// A parameter file in the temporary directory (`TMPDIR`), removed when dropped, so neither
/// a finished run nor a failed one leaves a key-sized file behind.
struct TempParams {
    path: PathBuf,
}

impl TempParams {
    fn new(seed: u64) -> TempParams {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let name = format!("snarkpipe-bench-{}-{seed}-{nanos}.params", std::process::id());
        TempParams { path: std::env::temp_dir().join(name) }
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempParams {
    fn drop(&mut self) {
        if let Err(err) = std::fs::remove_file(&self.path) {
            if err.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(%err, path = %self.path.display(), "removing the bench's parameter file failed");
            }
        }
    }
}
