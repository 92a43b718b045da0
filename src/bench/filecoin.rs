//! `snarkpipe bench --circuit porep|snap|window-post|winning-post`: a real Filecoin job (a
//! vanilla job file and its parameters, as `snarkpipe fixtures` makes them) proven
//! `--partitions` times (repetitions; each proves all the job's partitions) through
//! [`FilecoinProver`] on the bench's prover, then by bellperson on the same circuits and this
//! machine's cores, for the baseline.
//!
//! filecoin-proofs verifies every proof inside `prove_job`; a rejected or failed proof is
//! counted and reported, and the next repetition still runs.
//!
//! snarkpipe's time splits into synthesis, the wait for the pipeline, proving and the key's
//! load; bellperson synthesizes inside its prover, so its figure is the two together and is
//! compared with snarkpipe's synthesis, wait and proving together.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use super::{after_run, host_peak_bytes, prover_config, BenchArgs, BenchCircuit, BenchReport, FaultFigures, Ownership};
use crate::backend::faults::FaultScope;
use crate::filecoin::{params, FilecoinProver, ProofKind, ProofTimings, ProvenKind, SynthesisFigures, VanillaRequest};
use crate::prover::{DeviceSelection, ProofHandle, Prover};
use crate::synthetic::{KeyKind, WitnessProfile};
use crate::{Error, Result};

/// The job's figures on snarkpipe and on bellperson (`filecoin` in the JSON report).
#[derive(Debug, Clone, Serialize)]
pub struct FilecoinFigures {
    pub kind: ProofKind,
    pub job: PathBuf,
    pub params_dir: PathBuf,
    pub sector_size: u64,
    pub partitions_per_proof: usize,
    /// Constraints of one partition's circuit.
    pub constraints_per_partition: usize,
    pub repetitions: usize,
    /// Whole proofs filecoin-proofs accepted, and repetitions that failed.
    pub verified: usize,
    pub failed: usize,
    /// Each accepted repetition's timings for the whole proof, in seconds, in order.
    pub runs: Vec<ProofTimings>,
    /// The first repetition's key load (opening, checking and decoding the `.params` file),
    /// and the key-cache misses it had.
    pub first_key_load_seconds: f64,
    pub first_key_misses: u64,
    /// Key-cache misses over every repetition: one when the parameters were loaded once.
    pub key_misses: u64,
    /// Per partition, over the repetitions from the second on (the first alone when there
    /// is one): synthesis (summed; all but the first partition's overlaps the proving), the
    /// wait for the pipeline, proving and the key's lookup.
    pub synthesis_seconds_per_partition: f64,
    pub queue_seconds_per_partition: f64,
    pub gpu_seconds_per_partition: f64,
    pub key_load_seconds_per_partition: f64,
    /// The first partition's synthesis, the wait and proving together (the later partitions'
    /// synthesis overlaps the proving): what bellperson's figure compares with.
    pub snarkpipe_total_seconds_per_partition: f64,
    /// filecoin-proofs' verifier on each whole proof.
    pub verify_seconds_per_proof: f64,
    /// bellperson's runs of the same job (`create_proof_batch` over the mapped file): its
    /// `gpu` is synthesis and proving together, its `key_load` the file's mapping.
    pub bellperson_runs: Vec<ProofTimings>,
    pub bellperson_verified: usize,
    pub bellperson_failed: usize,
    /// bellperson's synthesis and proving together, per partition, from its last run (the
    /// file's pages are cached by then, as snarkpipe's key is).
    pub bellperson_total_seconds_per_partition: Option<f64>,
    /// bellperson's figure over snarkpipe's.
    pub speedup_over_bellperson: Option<f64>,
    /// One more run, after the others, measuring partition 0's synthesis four ways on the same
    /// circuit and cores: bellperson's full synthesis, recording the matrices, witness-only
    /// synthesis and the evaluation (issue 20's figures).
    pub synthesis: Option<SynthesisFigures>,
}

/// The proof kind a `--circuit` names.
fn proof_kind(circuit: BenchCircuit) -> Result<ProofKind> {
    match circuit {
        BenchCircuit::Porep => Ok(ProofKind::Porep),
        BenchCircuit::Snap => Ok(ProofKind::Snap),
        BenchCircuit::WindowPost => Ok(ProofKind::WindowPost),
        BenchCircuit::WinningPost => Ok(ProofKind::WinningPost),
        BenchCircuit::Synthetic => Err(Error::Config("a synthetic circuit is not a Filecoin job".into())),
    }
}

/// Runs the bench on the job at `job_path` with the parameters in `params_dir`.
pub fn run(args: &BenchArgs, job_path: &Path, params_dir: &Path) -> Result<BenchReport> {
    let kind = proof_kind(args.circuit)?;
    if args.scaling || args.prepin_witnesses {
        return Err(Error::Config(format!(
            "--scaling and --prepin-witnesses stream synthetic partitions; --circuit {kind} proves a job",
        )));
    }
    // filecoin-proofs reads its settings once per process: point them at the directory first.
    let params_dir = params::use_parameter_dir(params_dir)?;
    let job = VanillaRequest::read(job_path)?;
    job.expect_kind(kind, job_path)?;
    let devices = args.devices.parse::<DeviceSelection>()?;
    let starting = Instant::now();
    let prover = Prover::new(prover_config(args, devices))?;
    let seconds_prover_start = starting.elapsed().as_secs_f64();
    let device_free_bytes_before = prover.device_free_bytes();
    let since = prover.timeline().seconds_since_origin(Instant::now());
    // Each repetition's pipeline request, to judge its failures partition by partition.
    let last_request: parking_lot::Mutex<Option<ProofHandle>> = parking_lot::Mutex::new(None);
    let record = |handle: &ProofHandle| *last_request.lock() = Some(handle.clone());
    let engine = FilecoinProver::with_params_dir(&prover, &params_dir)?.on_submitted(&record);

    let mut errors = Vec::new();
    let mut proven: Vec<ProvenKind> = Vec::new();
    let (mut failed, mut cascaded) = (0, 0);
    let misses_before = prover.key_cache_status().misses;
    let mut first_key_misses = 0;
    let started = Instant::now();
    for repetition in 0..args.partitions {
        last_request.lock().take();
        match engine.prove_job(&job) {
            Ok(proof) => proven.push(proof),
            Err(err) => {
                failed += 1;
                if cascaded_failure(&prover, last_request.lock().take(), &err) {
                    cascaded += 1;
                }
                tracing::warn!(%err, repetition, "a repetition failed");
                errors.push(format!("repetition {repetition}: {err}"));
            }
        }
        if repetition == 0 {
            first_key_misses = prover.key_cache_status().misses - misses_before;
        }
    }
    let seconds_total = started.elapsed().as_secs_f64();
    let key_misses = prover.key_cache_status().misses - misses_before;

    // bellperson proves on this machine's cores with the pipeline idle; twice at most, the
    // second with the parameter file's pages cached.
    let reference = FilecoinProver::with_params_dir(&prover, &params_dir)?.bellperson_reference();
    let mut bellperson_runs = Vec::new();
    let mut bellperson_failed = 0;
    let mut bellperson_partitions = 0;
    for run in 0..args.partitions.min(2) {
        match reference.prove_job(&job) {
            Ok(proof) => {
                bellperson_partitions = proof.partitions;
                bellperson_runs.push(proof.timings);
            }
            Err(err) => {
                bellperson_failed += 1;
                errors.push(format!("bellperson run {run}: {err}"));
            }
        }
    }

    let synthesis =
        match FilecoinProver::with_params_dir(&prover, &params_dir)?.with_synthesis_figures().prove_job(&job) {
            Ok(proof) => proof.synthesis,
            Err(err) => {
                errors.push(format!("the synthesis figures' run: {err}"));
                None
            }
        };

    let after = after_run(&prover, args, since, true, Ownership::Owned)?;
    let partitions_per_proof = proven.first().map_or(0, |p| p.partitions);
    let constraints_per_partition = proven.first().map_or(0, |p| p.constraints);
    let runs: Vec<ProofTimings> = proven.iter().map(|p| p.timings).collect();
    let steady = if runs.len() > 1 { &runs[1..] } else { &runs[..] };
    let per_partition = |field: fn(&ProofTimings) -> f64| {
        let partitions = (steady.len() * partitions_per_proof).max(1) as f64;
        steady.iter().map(field).sum::<f64>() / partitions
    };
    let synthesis_per_partition = per_partition(|t| t.synthesis);
    let queue = per_partition(|t| t.queue);
    let gpu = per_partition(|t| t.gpu);
    let snarkpipe_total = per_partition(|t| t.first_synthesis) + queue + gpu;
    let bellperson_total =
        bellperson_runs.last().filter(|_| bellperson_partitions > 0).map(|t| t.gpu / bellperson_partitions as f64);
    let partitions = proven.len() * partitions_per_proof;
    let first_key_load_seconds = runs.first().map_or(0.0, |t| t.key_load);
    let figures = FilecoinFigures {
        kind,
        job: job_path.to_path_buf(),
        params_dir: params_dir.clone(),
        sector_size: job.sector_size(),
        partitions_per_proof,
        constraints_per_partition,
        repetitions: args.partitions,
        verified: proven.len(),
        failed,
        first_key_load_seconds,
        first_key_misses,
        key_misses,
        synthesis_seconds_per_partition: synthesis_per_partition,
        queue_seconds_per_partition: queue,
        gpu_seconds_per_partition: gpu,
        key_load_seconds_per_partition: per_partition(|t| t.key_load),
        snarkpipe_total_seconds_per_partition: snarkpipe_total,
        verify_seconds_per_proof: steady.iter().map(|t| t.verify).sum::<f64>() / steady.len().max(1) as f64,
        bellperson_verified: bellperson_runs.len(),
        bellperson_failed,
        bellperson_total_seconds_per_partition: bellperson_total,
        speedup_over_bellperson: bellperson_total.filter(|_| snarkpipe_total > 0.0).map(|b| b / snarkpipe_total),
        bellperson_runs,
        runs,
        synthesis,
    };
    Ok(BenchReport {
        backend: after.backend,
        devices: prover.device_count(),
        partitions,
        log_n: constraints_per_partition.max(1).next_power_of_two().trailing_zeros(),
        witness: WitnessProfile::Bits,
        keys: KeyKind::Setup,
        workers: prover.config().workers_per_device,
        in_flight: prover.config().in_flight,
        api: args.api,
        circuit: args.circuit,
        verified: figures.verified,
        // bellperson's failures fail the run too: its figure is the baseline.
        failed: figures.failed + figures.bellperson_failed,
        proofs_checked: true,
        seconds_prover_start,
        device_startup: prover.devices().iter().filter_map(|d| d.info().startup).collect(),
        seconds_key: first_key_load_seconds,
        seconds_warm_up: 0.0,
        seconds_to_first_proof: None,
        host_peak_bytes: host_peak_bytes(),
        staging_bytes_pinned: 0,
        warm_up_error: None,
        seconds_total,
        seconds_per_partition: seconds_total / partitions.max(1) as f64,
        steady_state: after.steady_state,
        scaling: None,
        stages: after.stages,
        overlap_fraction: after.overlap_fraction,
        busy_fraction: after.busy_fraction,
        budget: after.budget,
        pinned: after.pinned,
        faults: FaultFigures {
            injected: after.injected,
            failed_partitions: failed * partitions_per_proof.max(1),
            cascaded,
            by_site: after.injected_by_site,
        },
        device_bytes_after: after.device_bytes_after,
        device_free_bytes_before,
        device_free_bytes_after: after.device_free_bytes_after,
        residency: after.residency,
        staging: args.staging,
        witnesses_prepinned: false,
        host_floors: None,
        device_floor: None,
        timeline_summary: after.timeline_summary,
        idle_gaps: after.idle_gaps,
        errors,
        compat: None,
        filecoin: Some(figures),
    })
}

/// Whether a failed repetition was a cascade: one of its partitions failed although no fault
/// was injected into the work of that partition's last attempt (as the synthetic bench and the
/// soak judge). A repetition that failed before its partitions were queued (its synthesis, its
/// key) has no partitions to judge: its error's root cause decides.
fn cascaded_failure(prover: &Prover, request: Option<ProofHandle>, err: &Error) -> bool {
    let Some(handle) = request else { return !err.is_injected() };
    let attempts = handle.attempts();
    handle.wait_each().iter().enumerate().any(|(partition, outcome)| {
        let scope = FaultScope { request: handle.id(), partition, attempt: attempts[partition] };
        outcome.is_err() && !prover.faults().injected_into(scope)
    })
}
