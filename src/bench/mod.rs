//! `snarkpipe bench`: streams synthetic partitions through the pipeline and reports what
//! happened: time per partition, proofs verified, stage times, overlap, device busy time,
//! budget and pinned-memory leaks, and injected faults, and the time per partition against
//! the device floor its arithmetic sets ([`floor`]).
//!
//! `--api compat` proves the same synthetic circuits through the bellperson drop-in
//! ([`compat`]) and natively on the same prover, and compares them. `--circuit` other than
//! `synthetic` proves a real Filecoin job made by `snarkpipe fixtures` on snarkpipe and on
//! bellperson (`filecoin`, with the `filecoin` feature).

mod compat;
#[cfg(feature = "filecoin")]
mod filecoin;
pub mod floor;

pub use compat::{CompatCall, CompatFigures};
#[cfg(feature = "filecoin")]
pub use filecoin::FilecoinFigures;
pub use floor::PartitionFloor;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;
use serde::Serialize;

use crate::actors::messages::WitnessPart;
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

/// The bench's flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// Which backend proves: auto picks CUDA when a GPU is usable, else the CPU.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendKind,
    /// Devices to use: `all` or a list such as `0,1`.
    #[arg(long, default_value = "all")]
    pub devices: String,
    /// Partitions to prove (one proof each).
    #[arg(long, default_value_t = 4)]
    pub partitions: usize,
    /// Each partition fills a domain of 2^log_n (constraints + public inputs + ONE).
    #[arg(long, default_value_t = 10)]
    pub log_n: u32,
    #[arg(long, value_enum, default_value = "bits")]
    pub witness: WitnessProfile,
    /// `setup`: keys from a test setup, proofs verify. `random`: random points, for sizes
    /// where a setup is too slow; proofs are not verified.
    #[arg(long, value_enum, default_value = "setup")]
    pub keys: KeyKind,
    /// Compute streams per device.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Partitions in flight at once, per device.
    #[arg(long, default_value_t = 4)]
    pub in_flight: usize,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write a Chrome trace (open it in ui.perfetto.dev).
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// Write the timeline as an SVG Gantt chart.
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// Print one JSON object on stdout instead of the human summary.
    #[arg(long)]
    pub json: bool,
    /// Inject faults into this share of partitions (0 to 1), seeded by --seed.
    #[arg(long, default_value_t = 0.0)]
    pub inject_faults: f64,
    /// Extra attempts for a failed partition.
    #[arg(long, default_value_t = 0)]
    pub retries: usize,
    /// Modelled devices for the CPU backend.
    #[arg(long, default_value_t = 1)]
    pub cpu_devices: usize,
    /// Memory of each modelled CPU device, in MiB.
    #[arg(long, default_value_t = 16384)]
    pub cpu_device_mib: u64,
    /// Cap on the device memory each device's budget plans with, in bytes or with a unit
    /// (`24GiB`, `16GB`, `512MiB`): emulates a smaller card on a larger one.
    #[arg(long, value_parser = crate::plan::parse_bytes)]
    pub device_memory: Option<u64>,
    /// Also run the same stream on the first selected device alone and report the speedup.
    #[arg(long)]
    pub scaling: bool,
    /// Start cold: no key preload and no pinned staging buffers before the clock starts.
    #[arg(long)]
    pub no_warm_up: bool,
    /// Skip measuring the host's staging rates and the device's multiplication rates (the
    /// floors): about two seconds of microbenchmarks that a user's first proof never pays, so
    /// `seconds_to_first_proof` is the user's figure.
    #[arg(long)]
    pub no_floors: bool,
    /// How partitions' large host vectors are page-locked for upload: copied into pooled
    /// pinned buffers (copy) or registered where they are (in-place).
    #[arg(long, value_enum, default_value = "copy")]
    pub staging: StagingMode,
    /// Distinct witnesses the stream cycles through (default: enough that no two partitions
    /// in flight share one). Fewer save host memory at large sizes: partitions in flight that
    /// share a witness share its page-locked ranges too.
    #[arg(long)]
    pub witnesses: Option<usize>,
    /// With `--staging in-place`: page-lock every distinct witness's large vectors before the
    /// clock and keep them locked, as a node that synthesizes witnesses into page-locked memory
    /// would. The partitions' own pins then find them locked and lock nothing.
    #[arg(long)]
    pub prepin_witnesses: bool,
    /// Submit each partition as its synthetic circuit (`Prover::submit_circuits`) instead of
    /// its witness: the pipeline's synthesis stage synthesizes it, from the key's recorded
    /// constraint matrices after the first, while the partitions ahead of it prove. The
    /// summary says how long the device waited on synthesis.
    #[arg(long)]
    pub synthesize: bool,
    /// Which API proves: `native` streams requests to the bench's own `Prover`; `compat` calls
    /// `snarkpipe::compat::create_random_proof_batch` as filecoin-proofs calls bellperson (one
    /// `MappedParameters` for every call, on compat's shared prover, whose configuration is
    /// its default one: `--workers`, `--in-flight` and `--cpu-devices` do not apply), then
    /// streams the same circuits natively on that prover, and compares.
    #[arg(long, value_enum, default_value = "native")]
    pub api: BenchApi,
    /// With `--api compat`: circuits per call. The calls prove the `--partitions` circuits in
    /// turn, this many each (the last call may have fewer); there must be at least two calls.
    /// Default: as many as the shared prover keeps in flight over its devices, so that a call
    /// fills the pipeline as the native stream does, but at most half the partitions.
    #[arg(long)]
    pub compat_batch: Option<usize>,
    /// What is proven: synthetic partitions of 2^log_n, or a real Filecoin job (`--job`, with
    /// its parameters in `--params-dir`), proven `--partitions` times (repetitions).
    #[arg(long, value_enum, default_value = "synthetic")]
    pub circuit: BenchCircuit,
    /// With a Filecoin `--circuit`: the parameter directory `snarkpipe fixtures` generated
    /// (it becomes filecoin-proofs' parameter cache for this process).
    #[arg(long)]
    pub params_dir: Option<PathBuf>,
    /// With a Filecoin `--circuit`: the vanilla job file `snarkpipe fixtures` wrote.
    #[arg(long)]
    pub job: Option<PathBuf>,
}

/// The API the bench proves through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BenchApi {
    Native,
    Compat,
}

/// What the bench proves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum BenchCircuit {
    Synthetic,
    Porep,
    Snap,
    WindowPost,
    WinningPost,
}

impl BenchCircuit {
    pub fn name(self) -> &'static str {
        match self {
            BenchCircuit::Synthetic => "synthetic",
            BenchCircuit::Porep => "porep",
            BenchCircuit::Snap => "snap",
            BenchCircuit::WindowPost => "window-post",
            BenchCircuit::WinningPost => "winning-post",
        }
    }
}

/// The host's own rates for the two ways of staging, measured in the same run on one
/// witness-sized vector: what the `pin` stage's time is judged against.
#[derive(Debug, Clone, Serialize)]
pub struct HostStagingFloors {
    pub bytes: u64,
    /// A parallel copy into page-locked memory (the `copy` staging), GB/s.
    pub copy_gbps: f64,
    /// Page-locking memory in place and unlocking it again (the `in-place` staging), GB/s
    /// of memory locked and unlocked.
    pub lock_unlock_gbps: f64,
}

/// Budget figures in the report.
#[derive(Debug, Clone, Serialize)]
pub struct BudgetFigures {
    pub capacity_bytes: u64,
    pub peak_bytes: u64,
    pub leaked_bytes: u64,
    /// Every device's budget back at full capacity once resident keys are evicted.
    pub back_to_capacity: bool,
}

/// Pinned-memory figures in the report.
#[derive(Debug, Clone, Serialize)]
pub struct PinnedFigures {
    pub leaked_bytes: u64,
}

/// Fault figures in the report.
#[derive(Debug, Clone, Serialize)]
pub struct FaultFigures {
    pub injected: u64,
    pub failed_partitions: usize,
    /// Failures that no injected fault explains: must be 0.
    pub cascaded: usize,
    pub by_site: BTreeMap<String, u64>,
}

/// The bench's report (`--json` prints it).
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub backend: BackendKind,
    pub devices: usize,
    pub partitions: usize,
    pub log_n: u32,
    pub witness: WitnessProfile,
    pub keys: KeyKind,
    pub workers: usize,
    pub in_flight: usize,
    pub api: BenchApi,
    pub circuit: BenchCircuit,
    /// Proofs checked with the pairing (0 with random keys: they cannot verify). With a
    /// Filecoin `--circuit`: whole proofs (all the job's partitions) filecoin-proofs accepted.
    pub verified: usize,
    pub failed: usize,
    pub proofs_checked: bool,
    /// Starting the prover the stream ran on: opening its devices (`device_startup` says what
    /// each GPU's context and kernels cost) and its actors. Zero on a prover made before.
    pub seconds_prover_start: f64,
    pub device_startup: Vec<crate::backend::DeviceStartup>,
    /// Making the proving key (a setup with `--keys setup`).
    pub seconds_key: f64,
    /// Preloading the key and pinning staging buffers before the clock starts.
    pub seconds_warm_up: f64,
    pub staging_bytes_pinned: u64,
    /// Why the warm-up failed, if it did (the run then started cold).
    pub warm_up_error: Option<String>,
    /// From the process's start ([`crate::process_started`]) to the first request's proof:
    /// what a user waits for a process's first proof, with the bench's own setup (the key,
    /// the witnesses, and the floors unless `--no-floors`) inside it.
    pub seconds_to_first_proof: Option<f64>,
    /// The process's peak resident host memory (`VmHWM`) when the report was made: the key,
    /// the witnesses, the staging and everything else the run held at once.
    pub host_peak_bytes: Option<u64>,
    /// From the first submission to the last proof, after the warm-up and with the witnesses
    /// made (the stream cycles through `min(partitions, devices·(in_flight + 2))` distinct ones).
    pub seconds_total: f64,
    pub seconds_per_partition: f64,
    pub stages: BTreeMap<String, StageFigures>,
    /// Throughput once the devices compute (warm-up left out).
    pub steady_state: SteadyState,
    /// With `--scaling`: the same stream on one device, and the speedup of the full run.
    pub scaling: Option<ScalingFigures>,
    pub overlap_fraction: f64,
    pub busy_fraction: BTreeMap<String, f64>,
    pub budget: BudgetFigures,
    pub pinned: PinnedFigures,
    pub faults: FaultFigures,
    pub device_bytes_after: Vec<u64>,
    /// The driver's free memory per device once the prover started, and after the run.
    pub device_free_bytes_before: Vec<Option<u64>>,
    pub device_free_bytes_after: Vec<Option<u64>>,
    /// Proving keys resident per device at the end of the run, before eviction.
    pub residency: Vec<ResidencyFigures>,
    pub staging: StagingMode,
    /// Whether the witnesses were page-locked before the clock (`--prepin-witnesses`).
    pub witnesses_prepinned: bool,
    /// The host's staging rates, measured before the clock starts.
    pub host_floors: Option<HostStagingFloors>,
    /// One partition's device floor ([`floor::partition_floor`]) at the first device's
    /// multiplication rates, measured before the clock starts; `None` on the CPU.
    pub device_floor: Option<floor::PartitionFloor>,
    /// Idle gaps over 1 ms on each device, with what it was waiting on.
    pub idle_gaps: Vec<summary::IdleGap>,
    /// The human-readable timeline summary.
    pub timeline_summary: String,
    pub errors: Vec<String>,
    /// With `--api compat`: the drop-in's calls against the native stream of the same
    /// circuits (the rest of the report is that native stream's).
    pub compat: Option<compat::CompatFigures>,
    /// With a Filecoin `--circuit`: the job's figures on snarkpipe and on bellperson.
    #[cfg(feature = "filecoin")]
    pub filecoin: Option<filecoin::FilecoinFigures>,
}

/// Keys resident on one device.
#[derive(Debug, Clone, Serialize)]
pub struct ResidencyFigures {
    pub device: usize,
    pub keys: usize,
    pub bytes: u64,
    /// The device memory its budget planned with (the cap where one was set).
    pub budget_bytes: u64,
    /// How each resident key was held: which vectors resident, which streamed.
    pub plans: Vec<crate::prover::KeyResidency>,
    /// The longest a partition waited in admission for its device memory.
    pub longest_admission_wait_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageFigures {
    pub seconds: f64,
}

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

/// The single-device run of `--scaling`, against which the full run is compared.
#[derive(Debug, Clone, Serialize)]
pub struct ScalingFigures {
    pub single_device_seconds_per_partition: f64,
    pub single_device_steady_seconds_per_partition: f64,
    pub single_device_verified: usize,
    pub single_device_failed: usize,
    /// Single-device seconds per partition over the full run's, end to end (after warm-up).
    pub speedup: f64,
    /// The same from the steady-state figures.
    pub steady_speedup: f64,
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

/// Throughput once the devices compute: from each device's first NTT to its last device
/// work, so pinned-pool and key warm-up at the start of a run are left out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SteadyState {
    /// Seconds per partition over all devices together.
    pub seconds_per_partition: f64,
    /// Per device: seconds per partition on that device, and how busy its compute streams were.
    pub devices: BTreeMap<String, SteadyDevice>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SteadyDevice {
    pub partitions: usize,
    pub seconds_per_partition: f64,
    pub busy_fraction: f64,
}

/// Computes [`SteadyState`] from the device streams' compute spans.
pub(crate) fn steady_state(timeline: &crate::timeline::Timeline) -> SteadyState {
    use crate::stage::Stage;
    let mut by_device: BTreeMap<usize, Vec<&crate::timeline::Span>> = BTreeMap::new();
    for span in timeline.spans.iter().filter(|s| s.track.is_device() && matches!(s.stage, Stage::Ntt | Stage::Msm)) {
        if let Some(device) = span.track.device() {
            by_device.entry(device).or_default().push(span);
        }
    }
    let mut steady = SteadyState::default();
    let mut rate = 0.0;
    for (device, spans) in by_device {
        let Some(first) = spans.iter().filter(|s| s.stage == Stage::Ntt).map(|s| s.start_s).reduce(f64::min) else {
            continue;
        };
        let last = spans.iter().map(|s| s.end_s).fold(first, f64::max);
        let partitions = spans.iter().map(|s| s.partition).collect::<std::collections::BTreeSet<_>>().len();
        let window = (last - first).max(f64::EPSILON);
        let mut intervals: Vec<(f64, f64)> = spans.iter().map(|s| (s.start_s, s.end_s)).collect();
        intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut busy, mut open) = (0.0, intervals[0]);
        for &(start, end) in &intervals[1..] {
            if start > open.1 {
                busy += open.1 - open.0;
                open = (start, end);
            } else {
                open.1 = open.1.max(end);
            }
        }
        busy += open.1 - open.0;
        rate += partitions as f64 / window;
        steady.devices.insert(
            format!("gpu{device}"),
            SteadyDevice {
                partitions,
                seconds_per_partition: window / partitions as f64,
                busy_fraction: busy / window,
            },
        );
    }
    steady.seconds_per_partition = if rate > 0.0 { 1.0 / rate } else { 0.0 };
    steady
}

/// The human summary printed without `--json`.
pub fn describe(report: &BenchReport) -> String {
    let mut out = String::new();
    #[cfg(feature = "filecoin")]
    if let Some(fc) = &report.filecoin {
        out += &filecoin_lines(report, fc);
    }
    if out.is_empty() {
        out = format!(
            "snarkpipe bench: {} partitions of 2^{} ({:?} witness, {:?} keys) on {} {:?} device(s), {} workers\n",
            report.partitions,
            report.log_n,
            report.witness,
            report.keys,
            report.devices,
            report.backend,
            report.workers
        );
    }
    if let Some(compat) = &report.compat {
        out += &format!(
            "  compat ({}, {} circuit(s) a call, {} calls): first call {:.3} s ({} key miss(es); {:.3} s beyond a steady call), \
             steady {:.3} s per partition; native {:.3} s per partition ({:.3} synthesis + {:.3} proving): \
             ratio {:.3} with synthesis on both sides, {:.3} to native proving alone; {} compat proofs verified, {} failed\n",
            compat.call,
            compat.batch,
            compat.calls.len(),
            compat.first_call_seconds,
            compat.first_call_key_misses,
            compat.first_call_extra_seconds,
            compat.steady_seconds_per_partition,
            compat.native_seconds_per_partition,
            compat.native_synthesis_seconds_per_partition,
            compat.native_proving_seconds_per_partition,
            compat.ratio,
            compat.ratio_to_native_proving,
            compat.verified,
            compat.failed
        );
    }
    out += &format!("  prover start {:.2} s", report.seconds_prover_start);
    for (device, startup) in report.device_startup.iter().enumerate() {
        out += &format!(
            "; GPU {device}: context {:.2} s, kernels {:.2} s from {}",
            startup.context_seconds, startup.kernels_seconds, startup.kernels_from
        );
    }
    out += "\n";
    out += &format!(
        "  key {:.1} s, warm-up {:.1} s ({} bytes of staging pinned)\n",
        report.seconds_key, report.seconds_warm_up, report.staging_bytes_pinned
    );
    if let Some(first) = report.seconds_to_first_proof {
        out += &format!("  first proof {first:.2} s after the process started\n");
    }
    if let Some(peak) = report.host_peak_bytes {
        out += &format!("  host memory peak {:.1} GiB\n", peak as f64 / (1u64 << 30) as f64);
    }
    out += &format!("  {:.3} s total, {:.3} s per partition\n", report.seconds_total, report.seconds_per_partition);
    if let Some(scaling) = &report.scaling {
        out += &format!(
            "  one device: {:.3} s per partition ({:.3} steady), {} verified; speedup {:.2}x ({:.2}x steady)\n",
            scaling.single_device_seconds_per_partition,
            scaling.single_device_steady_seconds_per_partition,
            scaling.single_device_verified,
            scaling.speedup,
            scaling.steady_speedup
        );
    }
    out += &format!(
        "  steady state (from the first NTT): {:.3} s per partition\n",
        report.steady_state.seconds_per_partition
    );
    if let Some(floor) = &report.device_floor {
        // the steady figure is over all devices; the floor is one device's
        let per_device = report.steady_state.seconds_per_partition * report.devices.max(1) as f64;
        out += &format!(
            "  device floor {:.3} s per partition on one device (steady state {:.2}x the floor): quotient {:.3}, H {:.3}, L {:.3}, A {:.3}, B G1 {:.3}, B G2 {:.3} s at {:.1} G Fr / {:.1} G Fp multiplications and {:.1} G Fp squarings a second\n",
            floor.total_s,
            per_device / floor.total_s.max(1e-12),
            floor.quotient_s,
            floor.h_msm_s,
            floor.l_msm_s,
            floor.a_msm_s,
            floor.b_g1_msm_s,
            floor.b_g2_msm_s,
            floor.rates.fr_mul_per_s / 1e9,
            floor.rates.fp_mul_per_s / 1e9,
            floor.rates.fp_sqr_per_s / 1e9
        );
    }
    if report.proofs_checked {
        out += &format!("  {} verified, {} failed\n", report.verified, report.failed);
    } else {
        out += &format!("  proofs NOT verified (random keys), {} failed\n", report.failed);
    }
    for (stage, figures) in &report.stages {
        out += &format!("  {stage:>9}: {:.3} s\n", figures.seconds);
    }
    out += &format!("  overlap {:.0}%", report.overlap_fraction * 100.0);
    for (device, busy) in &report.busy_fraction {
        out += &format!(", {device} busy {:.0}%", busy * 100.0);
    }
    out += &format!(
        "\n  budget peak {} of {} bytes, {} leaked; pinned leaked {} bytes\n",
        report.budget.peak_bytes, report.budget.capacity_bytes, report.budget.leaked_bytes, report.pinned.leaked_bytes
    );
    for resident in &report.residency {
        out += &format!(
            "  gpu{}: {} resident key(s), {} bytes of a {} byte budget; longest admission wait {:.3} s\n",
            resident.device, resident.keys, resident.bytes, resident.budget_bytes, resident.longest_admission_wait_s
        );
        for plan in &resident.plans {
            let streamed = match plan.chunk_points {
                Some(chunk) => format!("{} streamed in chunks of {chunk} points", plan.streamed.join(",")),
                None => "nothing streamed".to_string(),
            };
            out += &format!(
                "    key: {} resident ({} bytes), {streamed}; room for {} partition(s)\n",
                plan.resident.join(","),
                plan.resident_bytes,
                plan.partitions
            );
        }
    }
    out += &report.timeline_summary;
    if !out.ends_with('\n') {
        out.push('\n');
    }
    if report.faults.injected > 0 {
        out += &format!(
            "  faults: {} injected, {} partitions failed, {} cascaded\n",
            report.faults.injected, report.faults.failed_partitions, report.faults.cascaded
        );
    }
    out
}

/// The lines a Filecoin `--circuit` run starts its summary with.
#[cfg(feature = "filecoin")]
fn filecoin_lines(report: &BenchReport, fc: &filecoin::FilecoinFigures) -> String {
    let mut out = format!(
        "snarkpipe bench: {} job {} ({} partition(s) of {} constraints), {} repetition(s) on {} {:?} device(s), {} workers\n",
        fc.kind,
        fc.job.display(),
        fc.partitions_per_proof,
        fc.constraints_per_partition,
        fc.repetitions,
        report.devices,
        report.backend,
        report.workers
    );
    out += &format!(
        "  first repetition: key load {:.3} s ({} key miss(es)); {} key miss(es) in all\n",
        fc.first_key_load_seconds, fc.first_key_misses, fc.key_misses
    );
    out += &format!(
        "  per partition{}: synthesis {:.3}, queue {:.3}, gpu {:.3}, key {:.3} s; synthesis + queue + gpu {:.3} s; verify {:.3} s a proof\n",
        if fc.runs.len() > 1 { " from the second repetition on" } else { "" },
        fc.synthesis_seconds_per_partition,
        fc.queue_seconds_per_partition,
        fc.gpu_seconds_per_partition,
        fc.key_load_seconds_per_partition,
        fc.snarkpipe_total_seconds_per_partition,
        fc.verify_seconds_per_proof
    );
    match (fc.bellperson_total_seconds_per_partition, fc.speedup_over_bellperson) {
        (Some(total), Some(speedup)) => {
            out += &format!(
                "  bellperson on this machine's CPU (synthesis + proving): {total:.3} s per partition; snarkpipe {speedup:.2}x faster\n"
            )
        }
        _ => out += "  bellperson: no figure (its runs failed)\n",
    }
    out += &format!(
        "  filecoin-proofs accepted {} of {} proof(s) ({} failed); bellperson {} accepted, {} failed\n",
        fc.verified, fc.repetitions, fc.failed, fc.bellperson_verified, fc.bellperson_failed
    );
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use super::steady_state;
    use crate::stage::Stage;
    use crate::timeline::{TimelineRecorder, Track};

    #[test]
    fn steady_state_leaves_out_warm_up_and_adds_devices_up() {
        let recorder = TimelineRecorder::new();
        let at = |ms: u64| recorder.origin() + Duration::from_millis(ms);
        let stream = |device| Track::Stream { device, name: "compute0".into() };
        // A long warm-up (pinning) before either device computes.
        recorder.record(
            Track::Actor { name: "pin".into(), device: Some(0), worker: None },
            Stage::Pin,
            0,
            at(0),
            at(5000),
            BTreeMap::new(),
        );
        for device in 0..2 {
            for p in 0..2u64 {
                let start = 5000 + p * 1000;
                recorder.record(
                    stream(device),
                    Stage::Ntt,
                    (device * 2) + p as usize,
                    at(start),
                    at(start + 200),
                    BTreeMap::new(),
                );
                recorder.record(
                    stream(device),
                    Stage::Msm,
                    (device * 2) + p as usize,
                    at(start + 200),
                    at(start + 1000),
                    BTreeMap::new(),
                );
            }
        }
        let steady = steady_state(&recorder.snapshot());
        // Each device: 2 partitions in 2 s, fully busy; together 0.5 s per partition.
        assert!((steady.devices["gpu0"].seconds_per_partition - 1.0).abs() < 1e-3);
        assert!((steady.devices["gpu1"].busy_fraction - 1.0).abs() < 1e-3);
        assert!((steady.seconds_per_partition - 0.5).abs() < 1e-3, "{steady:?}");
        // The negative twin: counting the warm-up would give 3.5 s per partition per device.
        assert!(steady.devices["gpu0"].seconds_per_partition < 3.5);
    }
}
