//! The race on a GPU: per size, one key, the same witnesses, r and s for both provers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bellperson::groth16::{prepare_verifying_key, PreparedVerifyingKey, Proof};
use blstrs::{Bls12, Scalar};
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use snarkpipe::backend::{open_devices, BackendKind, CpuModel, DeviceSelection};
use snarkpipe::circuit::Witness;
use snarkpipe::params::ProvingKey;
use snarkpipe::prover::{Priority, ProofRequest, Prover, ProverConfig, Shutdown};
use snarkpipe::synthetic::{KeyKind, SyntheticSpec, DEFAULT_NUM_INPUTS};

use crate::keys::{self, SrsHeader};
use crate::report::{describe, Race, RaceReport, Samples, SizeReport};
use crate::supraseal::{self, Prepared};
use crate::{Args, ParamsWriter};

/// From this domain on, the setup multiplies its fixed bases on the GPU (as snarkpipe's
/// synthetic keys do).
const GPU_SETUP_MIN_LOG_N: u32 = 16;

/// Runs every size; true when every proof of both provers verified and every size finished.
pub fn run(args: &Args) -> Result<bool> {
    if !snarkpipe::backend::cuda::cuda_available() {
        bail!(
            "no CUDA GPU found (no libcuda or no device): the race needs one; \
             --check-only runs everything but the GPU calls"
        );
    }
    let mut report = RaceReport {
        tool: "snarkpipe-vs-supraseal",
        version: env!("CARGO_PKG_VERSION"),
        device: None,
        partitions: args.partitions,
        distinct_witnesses: args.distinct_witnesses(),
        witness_profile: format!("{:?}", args.witness).to_lowercase(),
        seed: args.seed,
        batch: args.batch_rounds > 0,
        params_writer: args.params_writer,
        snarkpipe_verifies_in_pipeline: args.pipeline_verify,
        sizes: Vec::new(),
        errors: Vec::new(),
        complete: false,
    };
    let dir = args.params_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("creating the parameter directory {}", dir.display()))?;
    for &log_n in &args.log_n {
        match race_size(args, log_n, &dir, &mut report) {
            Ok(size) => {
                print!("{}", describe(&size));
                report.sizes.push(size);
            }
            Err(err) => {
                let message = format!("2^{log_n}: {err:#}");
                eprintln!("error: {message}");
                report.errors.push(message);
            }
        }
        write_report(args.out.as_deref(), &report)?;
    }
    report.complete = report.sizes.len() == args.log_n.len();
    write_report(args.out.as_deref(), &report)?;
    for error in &report.errors {
        eprintln!("failed: {error}");
    }
    Ok(report.errors.is_empty() && report.complete)
}

fn write_report(out: Option<&Path>, report: &RaceReport) -> Result<()> {
    let Some(out) = out else { return Ok(()) };
    let tmp = out.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(report)?)
        .with_context(|| format!("writing the report to {}", tmp.display()))?;
    std::fs::rename(&tmp, out).with_context(|| format!("moving the report to {}", out.display()))
}

/// The parameter file of one size, removed when dropped unless kept.
struct ParamsFile {
    path: PathBuf,
    keep: bool,
}

impl Drop for ParamsFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The synthetic circuit both provers prove at 2^`log_n`, with a setup key.
pub fn synthetic_spec(args: &Args, log_n: u32) -> SyntheticSpec {
    SyntheticSpec {
        log_n,
        num_inputs: DEFAULT_NUM_INPUTS,
        profile: args.witness,
        keys: KeyKind::Setup,
        seed: args.seed,
    }
}

fn race_size(args: &Args, log_n: u32, dir: &Path, report: &mut RaceReport) -> Result<SizeReport> {
    let spec = synthetic_spec(args, log_n);
    let shape = spec.shape()?;
    eprintln!("2^{log_n}: setup");
    let started = Instant::now();
    let params = match log_n >= GPU_SETUP_MIN_LOG_N {
        true => {
            let none = CpuModel { devices: 0, device_bytes: 0 };
            let (_, devices) = open_devices(BackendKind::Cuda, &DeviceSelection::Only(vec![0]), none)?;
            keys::setup_params(&spec, devices.first().map(|d| d.as_ref()))?
        }
        false => keys::setup_params(&spec, None)?,
    };
    let setup_seconds = started.elapsed().as_secs_f64();
    let key = ProvingKey::from_parameters(&params);
    key.check_shape(&shape)?;
    let pvk = prepare_verifying_key(&params.vk);

    eprintln!("2^{log_n}: writing the parameters");
    let file =
        ParamsFile { path: dir.join(format!("synthetic-2^{log_n}-seed{}.params", args.seed)), keep: args.keep_params };
    let started = Instant::now();
    match args.params_writer {
        ParamsWriter::Bellperson => keys::write_params(&params, &file.path)?,
        ParamsWriter::Parallel => keys::write_params_parallel(&params, &file.path)?,
    };
    let params_write_seconds = started.elapsed().as_secs_f64();
    let header = SrsHeader::read(&file.path)?;
    header.check_shape(&shape, log_n)?;

    eprintln!("2^{log_n}: witnesses");
    let started = Instant::now();
    let witnesses: Vec<Arc<Witness>> = (0..args.distinct_witnesses())
        .into_par_iter()
        .map(|i| spec.witness(i).map(Arc::new))
        .collect::<Result<_, _>>()?;
    let prepared: Vec<Prepared<'_>> = witnesses.iter().map(|w| Prepared::new(w)).collect::<Result<_>>()?;
    for p in &prepared {
        p.check_against(&key)?;
    }
    let witnesses_seconds = started.elapsed().as_secs_f64();

    let started = Instant::now();
    let srs = supraseal::open_srs(&file.path)?;
    let supraseal_srs_open_seconds = started.elapsed().as_secs_f64();

    let prover = Prover::new(ProverConfig {
        backend: BackendKind::Cuda,
        devices: DeviceSelection::Only(vec![0]),
        workers_per_device: args.workers,
        in_flight: args.in_flight,
        memory_reserve_bytes: args.reserve_gib << 30,
        retries: 0,
        verify_proofs: args.pipeline_verify,
        ..ProverConfig::default()
    })?;
    if report.device.is_none() {
        report.device = prover.devices().first().map(|d| d.info().name);
    }
    let started = Instant::now();
    prover.warm_up(&key, None)?;
    let snarkpipe_warm_up_seconds = started.elapsed().as_secs_f64();

    let contestants = Contestants { prover: &prover, key: &key, srs: &srs, pvk: &pvk };
    let mut rng = ChaCha20Rng::seed_from_u64(args.seed ^ ((log_n as u64) << 40) ^ 0x00c2_5eed);
    let mut draw = |n: usize| -> (Vec<Scalar>, Vec<Scalar>) {
        let r = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        let s = (0..n).map(|_| Scalar::random(&mut rng)).collect();
        (r, s)
    };
    let errors = &mut report.errors;

    // One untimed proof each first: snarkpipe's first call sets up its streams, supraseal's
    // waits for its SRS read.
    eprintln!("2^{log_n}: first proofs");
    let (r, s) = draw(1);
    let first = [0];
    let (snarkpipe_first, supraseal_first) = contestants.round(&witnesses, &prepared, &first, &r, &s, log_n, errors);
    let mut warm = (Samples::default(), Samples::default());
    let _ =
        contestants.score(&snarkpipe_first, &supraseal_first, &witnesses, &first, &mut warm, log_n, "first", errors);
    let snarkpipe_first_proof_seconds = snarkpipe_first.as_ref().map_or(f64::NAN, |(_, t)| *t);
    let supraseal_first_proof_seconds = supraseal_first.as_ref().map_or(f64::NAN, |(_, t)| *t);

    eprintln!("2^{log_n}: {} single proofs each", args.partitions);
    let mut single = (Samples::default(), Samples::default());
    let (mut identical, mut compared) = (0, 0);
    for i in 0..args.partitions {
        let which = [i % witnesses.len()];
        let (r, s) = draw(1);
        let (p, q) = contestants.round(&witnesses, &prepared, &which, &r, &s, log_n, errors);
        let (same, both) = contestants.score(&p, &q, &witnesses, &which, &mut single, log_n, "single", errors);
        identical += same;
        compared += both;
    }
    let single = Race::new(single.0, single.1, identical, compared);

    let batch = (args.batch_rounds > 0).then(|| {
        eprintln!("2^{log_n}: {} batch rounds of {}", args.batch_rounds, args.partitions);
        let which: Vec<usize> = (0..args.partitions).map(|i| i % witnesses.len()).collect();
        let mut samples = (Samples::default(), Samples::default());
        let (mut identical, mut compared) = (0, 0);
        for _ in 0..args.batch_rounds {
            let (r, s) = draw(which.len());
            let (p, q) = contestants.round(&witnesses, &prepared, &which, &r, &s, log_n, errors);
            let (same, both) = contestants.score(&p, &q, &witnesses, &which, &mut samples, log_n, "batch", errors);
            identical += same;
            compared += both;
        }
        Race::new(samples.0, samples.1, identical, compared)
    });

    let shutdown = prover.shutdown(Shutdown::Drain);
    if shutdown.failed > 0 || shutdown.abandoned > 0 {
        errors.push(format!(
            "2^{log_n}: snarkpipe's shutdown found {} failed and {} abandoned partitions",
            shutdown.failed, shutdown.abandoned
        ));
    }
    drop(prover);
    drop(srs);
    drop(file);

    Ok(SizeReport {
        log_n,
        constraints: shape.num_constraints,
        num_inputs: shape.num_inputs,
        num_aux: shape.num_aux,
        setup_seconds,
        params_write_seconds,
        params_file: header,
        witnesses_seconds,
        supraseal_srs_open_seconds,
        snarkpipe_warm_up_seconds,
        snarkpipe_first_proof_seconds,
        supraseal_first_proof_seconds,
        single,
        batch,
    })
}

/// Proofs from one call and its seconds, or why the call failed.
type Outcome = Result<(Vec<Proof<Bls12>>, f64)>;

struct Contestants<'a> {
    prover: &'a Prover,
    key: &'a Arc<ProvingKey>,
    srs: &'a supraseal_c2::SRS,
    pvk: &'a PreparedVerifyingKey<Bls12>,
}

impl Contestants<'_> {
    /// snarkpipe, then supraseal, each proving witnesses `which` (indices) with `r` and `s`
    /// in one call.
    #[allow(clippy::too_many_arguments)]
    fn round(
        &self,
        witnesses: &[Arc<Witness>],
        prepared: &[Prepared<'_>],
        which: &[usize],
        r: &[Scalar],
        s: &[Scalar],
        log_n: u32,
        errors: &mut Vec<String>,
    ) -> (Outcome, Outcome) {
        let request = ProofRequest {
            key: self.key.clone(),
            partitions: which.iter().map(|&i| witnesses[i].clone()).collect(),
            r: r.to_vec(),
            s: s.to_vec(),
            priority: Priority::Normal,
            devices: None,
        };
        let started = Instant::now();
        let snarkpipe = self
            .prover
            .prove(request)
            .map(|proofs| (proofs, started.elapsed().as_secs_f64()))
            .map_err(|e| anyhow::anyhow!("snarkpipe: {e}"));

        let batch: Vec<&Prepared<'_>> = which.iter().map(|&i| &prepared[i]).collect();
        let started = Instant::now();
        let supraseal =
            supraseal::prove(self.srs, self.key, &batch, r, s).map(|proofs| (proofs, started.elapsed().as_secs_f64()));
        for outcome in [&snarkpipe, &supraseal] {
            if let Err(err) = outcome {
                errors.push(format!("2^{log_n}: {err:#}"));
            }
        }
        (snarkpipe, supraseal)
    }

    /// Verifies both outcomes' proofs against the witnesses' public inputs, records their
    /// seconds per proof (only when every proof of the call verified) and compares the two
    /// provers' proofs. Returns (identical, compared).
    #[allow(clippy::too_many_arguments)]
    fn score(
        &self,
        snarkpipe: &Outcome,
        supraseal: &Outcome,
        witnesses: &[Arc<Witness>],
        which: &[usize],
        samples: &mut (Samples, Samples),
        log_n: u32,
        what: &str,
        errors: &mut Vec<String>,
    ) -> (usize, usize) {
        for (name, outcome, samples) in
            [("snarkpipe", snarkpipe, &mut samples.0), ("supraseal", supraseal, &mut samples.1)]
        {
            match outcome {
                Ok((proofs, seconds)) => {
                    let verified = self.verified(name, proofs, witnesses, which, log_n, what, errors);
                    samples.record(seconds / which.len() as f64, which.len(), verified);
                }
                Err(_) => samples.record_failure(which.len()),
            }
        }
        match (snarkpipe, supraseal) {
            (Ok((p, _)), Ok((q, _))) => (p.iter().zip(q).filter(|(p, q)| p == q).count(), p.len().min(q.len())),
            _ => (0, 0),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn verified(
        &self,
        name: &str,
        proofs: &[Proof<Bls12>],
        witnesses: &[Arc<Witness>],
        which: &[usize],
        log_n: u32,
        what: &str,
        errors: &mut Vec<String>,
    ) -> usize {
        if proofs.len() != which.len() {
            errors.push(format!(
                "2^{log_n} {what}: {name} returned {} proofs for {} witnesses",
                proofs.len(),
                which.len()
            ));
            return 0;
        }
        let mut verified = 0;
        for (k, (proof, &i)) in proofs.iter().zip(which).enumerate() {
            match bellperson::groth16::verify_proof(self.pvk, proof, witnesses[i].public_inputs()) {
                Ok(true) => verified += 1,
                Ok(false) => errors.push(format!("2^{log_n} {what}: {name}'s proof {k} (witness {i}) did not verify")),
                Err(err) => {
                    errors.push(format!("2^{log_n} {what}: {name}'s proof {k} (witness {i}): verifying failed: {err}"))
                }
            }
        }
        verified
    }
}
