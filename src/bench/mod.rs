//! `snarkpipe bench`: streams synthetic partitions through the pipeline and reports what
//! happened: time per partition, proofs verified, stage times, overlap, device busy time,
//! budget and pinned-memory leaks, and injected faults, and the time per partition against
//! the device floor its arithmetic sets ([`floor`]).
//!
//! `--api compat` proves the same synthetic circuits through the bellperson drop-in
//! ([`compat`]) and natively on the same prover, and compares them. `--circuit` other than
//! `synthetic` proves a real Filecoin job made by `snarkpipe fixtures` on snarkpipe and on
//! bellperson (`filecoin`, with the `filecoin` feature).

mod args;
mod compat;
#[cfg(feature = "filecoin")]
mod filecoin;
pub mod floor;
mod render;
mod report;

pub use compat::{CompatCall, CompatFigures};
#[cfg(feature = "filecoin")]
pub use filecoin::FilecoinFigures;
pub use floor::PartitionFloor;

pub use args::{BenchApi, BenchArgs, BenchCircuit};
pub use render::describe;
pub(crate) use report::steady_state;
pub use report::{
    BenchReport, BudgetFigures, FaultFigures, HostStagingFloors, PinnedFigures, ResidencyFigures, ScalingFigures,
    StageFigures, SteadyDevice, SteadyState,
};

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde::Serialize;

use crate::actors::job::WitnessPart;
use crate::actors::StagingMode;
use crate::backend::faults::FaultScope;
use crate::backend::BackendKind;
use crate::error::{Error, Result};
use crate::groth16::verify;
pub(crate) use crate::memory::host_peak_bytes;
use crate::memory::{PinLease, PinnedPool};
use crate::prover::{CircuitRequest, DeviceSelection, FaultInjection, ProofRequest, Prover, ProverConfig, Shutdown};
use crate::synthetic::{KeyKind, SyntheticSpec, WitnessProfile};
use crate::timeline::{chrome, summary, svg};

/// Runs the bench and returns its report; writes the trace and SVG if asked. With
/// `--scaling`, the same stream first runs on the first selected device alone, in the same
/// process, and the report compares the two.
/// The synthetic spec the flags describe and its proving key, with the seconds the key took.
fn synthetic_key(args: &BenchArgs) -> Result<(SyntheticSpec, Arc<crate::params::ProvingKey>, f64)> {
    let spec =
        SyntheticSpec { log_n: args.log_n, num_inputs: 8, profile: args.witness, keys: args.keys, seed: args.seed };
    tracing::info!(log_n = args.log_n, "generating the proving key");
    let key_started = Instant::now();
    let key = spec.proving_key()?;
    Ok((spec, key, key_started.elapsed().as_secs_f64()))
}

pub fn run(args: &BenchArgs) -> Result<BenchReport> {
    if args.partitions == 0 {
        return Err(Error::EmptyRequest);
    }
    if args.circuit != BenchCircuit::Synthetic {
        if args.api == BenchApi::Compat {
            return Err(Error::Config(format!(
                "--api compat proves synthetic circuits; --circuit {} is proven through snarkpipe::filecoin",
                args.circuit.name()
            )));
        }
        let (job, params_dir) = filecoin_inputs(args)?;
        return run_filecoin(args, &job, &params_dir);
    }
    if args.api == BenchApi::Compat {
        return compat::run(args);
    }
    let (spec, key, seconds_key) = synthetic_key(args)?;
    let devices = args.devices.parse::<DeviceSelection>()?;
    // Distinct witnesses, made once for both runs: enough that no two partitions in flight or
    // queued on any device share one.
    let most_devices = match &devices {
        DeviceSelection::Only(list) => list.len(),
        DeviceSelection::All => crate::backend::cuda::device_count().max(args.cpu_devices),
    };
    // With --synthesize the pipeline makes each partition's witness from its circuit; one
    // witness made here serves the floors (at 2^26 a witness is about 10 GB, and holding as
    // many as the stream cycles through beside the synthesis ran a host out of memory).
    let distinct = match args.synthesize {
        true => 1,
        false => args.witnesses.unwrap_or((args.in_flight + 2) * most_devices.max(1)).clamp(1, args.partitions.max(1)),
    };
    tracing::info!(distinct, "generating witnesses");
    let witnesses = (0..distinct).into_par_iter().map(|i| spec.witness(i).map(Arc::new)).collect::<Result<Vec<_>>>()?;

    let single = if args.scaling {
        let first = match &devices {
            DeviceSelection::All => 0,
            DeviceSelection::Only(list) => *list.first().ok_or_else(|| Error::Config("no device selected".into()))?,
        };
        Some(run_on(args, &spec, &key, &witnesses, DeviceSelection::Only(vec![first]), false)?)
    } else {
        None
    };
    let mut report = run_on(args, &spec, &key, &witnesses, devices, true)?;
    report.seconds_key = seconds_key;
    if let Some(single) = single {
        report.scaling = Some(ScalingFigures {
            single_device_seconds_per_partition: single.seconds_per_partition,
            single_device_steady_seconds_per_partition: single.steady_state.seconds_per_partition,
            single_device_verified: single.verified,
            single_device_failed: single.failed,
            speedup: single.seconds_per_partition / report.seconds_per_partition.max(f64::EPSILON),
            steady_speedup: single.steady_state.seconds_per_partition
                / report.steady_state.seconds_per_partition.max(f64::EPSILON),
        });
    }
    Ok(report)
}

/// The job file and parameter directory a Filecoin `--circuit` needs; a missing flag is an
/// [`Error::Config`] naming it, before anything is read.
fn filecoin_inputs(args: &BenchArgs) -> Result<(PathBuf, PathBuf)> {
    let mut missing = Vec::new();
    if args.job.is_none() {
        missing.push("--job FILE (a vanilla job file)");
    }
    if args.params_dir.is_none() {
        missing.push("--params-dir DIR (its parameter directory)");
    }
    match (&args.job, &args.params_dir) {
        (Some(job), Some(dir)) => Ok((job.clone(), dir.clone())),
        _ => Err(Error::Config(format!(
            "--circuit {} needs {}, as `snarkpipe fixtures --params-dir DIR --out JOBS --kinds {}` makes them",
            args.circuit.name(),
            missing.join(" and "),
            args.circuit.name()
        ))),
    }
}

#[cfg(feature = "filecoin")]
fn run_filecoin(args: &BenchArgs, job: &std::path::Path, params_dir: &std::path::Path) -> Result<BenchReport> {
    filecoin::run(args, job, params_dir)
}

#[cfg(not(feature = "filecoin"))]
fn run_filecoin(args: &BenchArgs, _job: &std::path::Path, _params_dir: &std::path::Path) -> Result<BenchReport> {
    Err(Error::Config(format!("--circuit {} needs snarkpipe built with the `filecoin` feature", args.circuit.name())))
}

/// What came back from streaming the partitions.
struct Streamed {
    outcomes: Vec<Result<bellperson::groth16::Proof<blstrs::Bls12>>>,
    /// When the first request's outcomes were in.
    first_done: Option<Instant>,
    /// Whose work each outcome came from (its request, partition and last attempt).
    scopes: Vec<FaultScope>,
    public_inputs: Vec<Vec<blstrs::Scalar>>,
    seconds: f64,
}

/// Streams `partitions` partitions through `prover`, each submitted as its own request, with
/// no more than `outstanding` unfinished at once. Partition i proves `witnesses[i mod K]` with
/// its own r and s, so every proof differs and is checked, while the synthetic witnesses are
/// made before the clock starts: the figures are the prover's, not the generator's (a 2^24
/// witness takes the generator over a second, longer than a GPU needs to prove it).
fn stream_partitions(
    prover: &Prover,
    key: &Arc<crate::params::ProvingKey>,
    spec: &SyntheticSpec,
    witnesses: &[Arc<crate::circuit::Witness>],
    partitions: usize,
    outstanding: usize,
    synthesize: bool,
    progress: Option<&indicatif::ProgressBar>,
) -> Result<Streamed> {
    let mut rng = ChaCha20Rng::seed_from_u64(spec.seed ^ 0x5eed);
    let mut pending: std::collections::VecDeque<crate::prover::ProofHandle> = Default::default();
    let mut outcomes = Vec::with_capacity(partitions);
    let mut public_inputs = Vec::with_capacity(partitions);
    let mut scopes = Vec::with_capacity(partitions);
    let mut first_done = None;
    let mut settle = |handle: crate::prover::ProofHandle, outcomes: &mut Vec<_>| {
        outcomes.extend(handle.wait_each());
        first_done.get_or_insert_with(Instant::now);
        scopes.extend(handle.attempts().into_iter().enumerate().map(|(partition, attempt)| FaultScope {
            request: handle.id(),
            partition,
            attempt,
        }));
        if let Some(bar) = progress {
            bar.set_position(outcomes.len() as u64);
        }
    };
    let started = Instant::now();
    for i in 0..partitions {
        let handle = match synthesize {
            // A circuit of its own for every partition; its inputs are what its proof verifies
            // with.
            true => {
                public_inputs.push(spec.public_inputs(i)?);
                prover.submit_circuits(CircuitRequest::new(key.clone(), vec![spec.circuit(i)], &mut rng))?
            }
            false => {
                let witness = witnesses
                    .get(i % witnesses.len().max(1))
                    .ok_or_else(|| Error::Config("the bench has no witness to stream".into()))?;
                public_inputs.push(witness.public_inputs().to_vec());
                prover.submit(ProofRequest::new(key.clone(), vec![witness.clone()], &mut rng))?
            }
        };
        pending.push_back(handle);
        while pending.len() > outstanding {
            let oldest = pending.pop_front().expect("non-empty");
            settle(oldest, &mut outcomes);
        }
    }
    while let Some(oldest) = pending.pop_front() {
        settle(oldest, &mut outcomes);
    }
    Ok(Streamed { outcomes, first_done, scopes, public_inputs, seconds: started.elapsed().as_secs_f64() })
}

/// Times a parallel copy of `values` into page-locked memory, and page-locking a copy of it
/// in place and unlocking it, through the prover's pin registry.
fn measure_host_floors(prover: &Prover, values: &[crate::Scalar]) -> Result<HostStagingFloors> {
    let registry = prover.pin_registry();
    let pool = PinnedPool::new(registry.clone(), 1);
    let bytes = std::mem::size_of_val(values) as u64;
    let gbps = |seconds: f64| bytes as f64 / seconds.max(1e-9) / 1e9;
    // Warm the pooled buffer first so the copy is timed, not the page-locking of a fresh one.
    drop(pool.stage(values)?);
    let started = Instant::now();
    let staged = pool.stage(values)?;
    let copy_gbps = gbps(started.elapsed().as_secs_f64());
    drop(staged);
    pool.clear();
    let fresh: Arc<Vec<crate::Scalar>> = Arc::new(values.par_iter().copied().collect());
    let started = Instant::now();
    let lease = registry.pin_owned(fresh.clone())?;
    drop(lease);
    let lock_unlock_gbps = gbps(started.elapsed().as_secs_f64());
    // Freed after the clock: only locking and unlocking are timed.
    drop(fresh);
    Ok(HostStagingFloors { bytes, copy_gbps, lock_unlock_gbps })
}

/// The first device's multiplication rates and one partition's floor at them (`None` for a
/// device without the probe: the CPU).
fn measure_device_floor(
    prover: &Prover,
    witness: &crate::circuit::Witness,
    log_n: u32,
) -> Result<Option<floor::PartitionFloor>> {
    let device = prover.devices().first().ok_or_else(|| Error::Config("no device".into()))?;
    Ok(device.arithmetic_rates()?.map(|rates| floor::partition_floor(witness, log_n, rates)))
}

/// Page-locks the a, b, c and aux vectors of every witness through the first device's registry
/// (the table of locked ranges is process-wide); the leases keep them locked until dropped.
fn pin_witnesses(prover: &Prover, witnesses: &[Arc<crate::circuit::Witness>]) -> Result<Vec<PinLease>> {
    let registry = prover.pin_registry();
    let mut leases = Vec::new();
    for witness in witnesses {
        for part in [WitnessPart::A, WitnessPart::B, WitnessPart::C, WitnessPart::Aux] {
            if !part.of_witness(witness).is_empty() {
                // Each lease owns the witness, so the vectors stay allocated while locked.
                leases.push(registry.pin_part(witness.clone(), |w| part.of_witness(w))?);
            }
        }
    }
    Ok(leases)
}

/// The bench's own prover's configuration, from its flags.
fn prover_config(args: &BenchArgs, devices: DeviceSelection) -> ProverConfig {
    ProverConfig {
        backend: args.backend,
        devices,
        workers_per_device: args.workers,
        in_flight: args.in_flight,
        cpu_devices: args.cpu_devices,
        cpu_device_bytes: args.cpu_device_mib << 20,
        memory_reserve_bytes: if args.backend == BackendKind::Cpu { 0 } else { 1 << 30 },
        device_memory_bytes: args.device_memory,
        retries: args.retries,
        staging: args.staging,
        // Random keys' proofs cannot verify; the bench checks setup keys' proofs again itself.
        verify_proofs: args.keys == KeyKind::Setup,
        ..ProverConfig::default()
    }
}

/// The faults `--inject-faults` asks for (none at 0).
fn injected_faults(args: &BenchArgs) -> FaultInjection {
    FaultInjection::at_rate(args.inject_faults, args.seed)
}

/// Whether the bench may shut the prover it streams on down at the end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ownership {
    /// The bench's own prover: shut down, so the figures after the run are final.
    Owned,
    /// A prover that outlives the bench (compat's shared one): left running.
    Shared,
}

/// One run on `devices`: a fresh prover, warmed up unless `--no-warm-up`, streams the
/// partitions, checks every proof and reports. `export` writes the trace and SVG.
fn run_on(
    args: &BenchArgs,
    spec: &SyntheticSpec,
    key: &Arc<crate::params::ProvingKey>,
    witnesses: &[Arc<crate::circuit::Witness>],
    devices: DeviceSelection,
    export: bool,
) -> Result<BenchReport> {
    let starting = Instant::now();
    let prover = Prover::with_fault_injection(prover_config(args, devices), injected_faults(args))?;
    let seconds_prover_start = starting.elapsed().as_secs_f64();
    let report = stream_on(&prover, args, spec, key, witnesses, export, Ownership::Owned)?;
    Ok(BenchReport { seconds_prover_start, ..report })
}

/// The stream of [`run_on`] on `prover`: warmed up unless `--no-warm-up`, every proof checked.
/// Only what `prover` records from here on counts, so a shared prover's earlier work is left
/// out of the stage times, the steady state and the exports.
fn stream_on(
    prover: &Prover,
    args: &BenchArgs,
    spec: &SyntheticSpec,
    key: &Arc<crate::params::ProvingKey>,
    witnesses: &[Arc<crate::circuit::Witness>],
    export: bool,
    ownership: Ownership,
) -> Result<BenchReport> {
    let since = prover.timeline().seconds_since_origin(Instant::now());
    // With `--backend auto` and no GPU, `open_devices` has already said so on stderr.
    let device_free_bytes_before = prover.device_free_bytes();

    let warm_started = Instant::now();
    // The warm-up only saves time: if it fails, the stream still runs cold and says why.
    let (staging_bytes_pinned, warm_up_error) = match args.no_warm_up {
        true => (0, None),
        false => match prover.warm_up(key, None) {
            Ok(bytes) => (bytes, None),
            Err(err) => {
                tracing::warn!(%err, "warming up failed; streaming cold");
                (0, Some(err.to_string()))
            }
        },
    };
    let witness_pins = match args.prepin_witnesses && args.staging == StagingMode::InPlace {
        true => pin_witnesses(prover, witnesses)?,
        false => Vec::new(),
    };
    let seconds_warm_up = warm_started.elapsed().as_secs_f64();
    let host_floors = witnesses.first().filter(|_| !args.no_floors).and_then(|witness| {
        match measure_host_floors(prover, &witness.a) {
            Ok(floors) => Some(floors),
            Err(err) => {
                tracing::warn!(%err, "measuring the host's staging rates failed");
                None
            }
        }
    });
    let device_floor = witnesses.first().filter(|_| !args.no_floors).and_then(|witness| {
        match measure_device_floor(prover, witness, args.log_n) {
            Ok(floor) => floor,
            Err(err) => {
                tracing::warn!(%err, "measuring the device's multiplication rates failed");
                None
            }
        }
    });

    let bar = (!args.json && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(args.partitions as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {pos}/{len} partitions [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let devices = prover.device_count();
    // Enough requests queued that no device waits for the next submission.
    let outstanding = (prover.config().in_flight + 1) * devices;
    let streamed =
        stream_partitions(prover, key, spec, witnesses, args.partitions, outstanding, args.synthesize, bar.as_ref())?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let seconds_total = streamed.seconds;
    let seconds_to_first_proof =
        streamed.first_done.map(|at| at.duration_since(crate::process_started()).as_secs_f64());

    let proofs_checked = spec.verifies();
    let pvk = key.prepared_vk();
    let mut verified = 0;
    let mut failed = 0;
    let mut cascaded = 0;
    let mut errors = Vec::new();
    for ((inputs, outcome), scope) in streamed.public_inputs.iter().zip(&streamed.outcomes).zip(&streamed.scopes) {
        match outcome {
            Ok(proof) if proofs_checked => {
                if verify(&pvk, proof, inputs)? {
                    verified += 1;
                } else {
                    failed += 1;
                    cascaded += 1;
                    errors.push("a proof did not verify".into());
                }
            }
            Ok(_) => {}
            Err(err) => {
                failed += 1;
                // Cascaded: it failed although no fault went into its own last attempt.
                if !prover.faults().injected_into(*scope) {
                    cascaded += 1;
                }
                errors.push(err.to_string());
            }
        }
    }

    // The bench's own witness leases go first: what is left pinned then is a leak.
    drop(witness_pins);
    let after = after_run(prover, args, since, export, ownership)?;
    let faults = FaultFigures {
        injected: after.injected,
        failed_partitions: failed,
        cascaded,
        by_site: after.injected_by_site.clone(),
    };

    Ok(BenchReport {
        backend: after.backend,
        devices,
        partitions: args.partitions,
        log_n: args.log_n,
        witness: args.witness,
        keys: args.keys,
        workers: prover.config().workers_per_device,
        in_flight: prover.config().in_flight,
        api: args.api,
        circuit: args.circuit,
        verified,
        failed,
        proofs_checked,
        seconds_prover_start: 0.0,
        device_startup: prover.devices().iter().filter_map(|d| d.info().startup).collect(),
        seconds_key: 0.0,
        seconds_warm_up,
        seconds_to_first_proof,
        host_peak_bytes: host_peak_bytes(),
        staging_bytes_pinned,
        warm_up_error,
        seconds_total,
        seconds_per_partition: seconds_total / args.partitions as f64,
        steady_state: after.steady_state,
        scaling: None,
        stages: after.stages,
        overlap_fraction: after.overlap_fraction,
        busy_fraction: after.busy_fraction,
        budget: after.budget,
        pinned: after.pinned,
        faults,
        device_bytes_after: after.device_bytes_after,
        device_free_bytes_before,
        device_free_bytes_after: after.device_free_bytes_after,
        residency: after.residency,
        staging: args.staging,
        witnesses_prepinned: args.prepin_witnesses && args.staging == StagingMode::InPlace,
        host_floors,
        device_floor,
        timeline_summary: after.timeline_summary,
        idle_gaps: after.idle_gaps,
        errors,
        compat: None,
        #[cfg(feature = "filecoin")]
        filecoin: None,
    })
}

/// What a prover's timeline and state say once a run is over.
struct AfterRun {
    backend: BackendKind,
    stages: BTreeMap<String, StageFigures>,
    steady_state: SteadyState,
    overlap_fraction: f64,
    busy_fraction: BTreeMap<String, f64>,
    budget: BudgetFigures,
    pinned: PinnedFigures,
    injected: u64,
    injected_by_site: BTreeMap<String, u64>,
    device_bytes_after: Vec<u64>,
    device_free_bytes_after: Vec<Option<u64>>,
    residency: Vec<ResidencyFigures>,
    idle_gaps: Vec<summary::IdleGap>,
    timeline_summary: String,
}

/// Summarizes what `prover` recorded from `since` (seconds from its timeline's origin) on,
/// writes the trace and SVG when `export`, checks the budget and pins for leaks, evicts the
/// resident keys and checks the budget is whole again, and shuts an owned prover down. Every
/// partition must be finished and every lease the caller took dropped first: what is still
/// granted or pinned then counts as a leak.
fn after_run(prover: &Prover, args: &BenchArgs, since: f64, export: bool, ownership: Ownership) -> Result<AfterRun> {
    let mut timeline = prover.timeline().snapshot();
    timeline.spans.retain(|span| span.start_s >= since);
    if export {
        if let Some(path) = &args.trace {
            chrome::write_chrome_trace(&timeline, path)?;
        }
        if let Some(path) = &args.timeline {
            svg::write_svg(&timeline, path)?;
        }
    }
    let summary = summary::summarize(&timeline);
    let steady_state = steady_state(&timeline);
    let status = prover.device_status();
    let residency = prover
        .residency()
        .into_iter()
        .enumerate()
        .map(|(device, (keys, bytes))| {
            let ordinal = status.get(device).map_or(device, |s| s.ordinal);
            let longest_admission_wait_s = timeline
                .spans
                .iter()
                .filter(|s| s.stage == crate::stage::Stage::Admission && s.track.device() == Some(ordinal))
                .map(|s| s.duration_s())
                .fold(0.0, f64::max);
            ResidencyFigures {
                device,
                keys,
                bytes,
                budget_bytes: status.get(device).map_or(0, |s| s.memory_budget_bytes),
                plans: status.get(device).map_or_else(Vec::new, |s| s.keys.clone()),
                longest_admission_wait_s,
            }
        })
        .collect();
    let reports = prover.budget_reports()?;
    let leaked_bytes = prover.budget_leaked_bytes()?;
    let pinned_leaked = prover.pinned_leaked_bytes();
    prover.evict_all_keys();
    let after_eviction = prover.budget_reports()?;
    let back_to_capacity = after_eviction.iter().all(|r| r.in_use_bytes == 0 && r.waiting == 0);
    let injected = prover.faults().injected();
    let injected_by_site = prover.faults().injected_by_site();
    let backend = prover.backend();
    if ownership == Ownership::Owned {
        prover.shutdown(Shutdown::Drain);
    }
    Ok(AfterRun {
        backend,
        stages: summary.stage_seconds.iter().map(|(k, v)| (k.clone(), StageFigures { seconds: *v })).collect(),
        steady_state,
        overlap_fraction: summary.overlap_fraction,
        busy_fraction: summary.busy_fraction.iter().map(|(d, f)| (format!("gpu{d}"), *f)).collect(),
        budget: BudgetFigures {
            capacity_bytes: reports.iter().map(|r| r.capacity_bytes).sum(),
            peak_bytes: reports.iter().map(|r| r.peak_bytes).max().unwrap_or(0),
            leaked_bytes,
            back_to_capacity,
        },
        pinned: PinnedFigures { leaked_bytes: pinned_leaked },
        injected,
        injected_by_site,
        device_bytes_after: prover.device_allocated_bytes(),
        device_free_bytes_after: prover.device_free_bytes(),
        residency,
        timeline_summary: summary.to_string(),
        idle_gaps: summary.idle_gaps,
    })
}
