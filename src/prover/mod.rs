//! The prover a node embeds: built from a config, it runs the actor pipelines of its devices
//! on its own threads and takes proof requests from any thread or async runtime.

mod health;
pub mod scheduler;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use bellperson::groth16::ParameterSource;
use blstrs::{Bls12, Scalar};
use crossbeam_channel::{unbounded, Sender};
use group::prime::PrimeCurveAffine;
use parking_lot::Mutex;

pub use crate::actors::pipeline::DeviceHealth;
pub use crate::actors::StagingMode;
pub use crate::backend::DeviceSelection;
pub use crate::request::{Priority, ProofHandle, RequestStatus};

use crate::actors::pipeline::pin_key_vectors;
use crate::actors::{ActorSystem, BudgetReport, DevicePipeline, MemoryBudget};
use crate::backend::faults::{FaultInjector, FaultyDevice};
pub use crate::backend::faults::{FaultScope, FaultSite};
use crate::backend::{open_devices, BackendKind, CpuModel, Device};
use crate::circuit::{
    ConstraintEvaluation, ConstraintMatrices, DeferredCircuit, MatricesFile, SatisfactionCheck, SynthesisPool, Witness,
    WitnessShape,
};
use crate::error::{Error, Result};
use crate::memory::{HostPinTable, PinnedRegistry};
use crate::params::cache::{FileStamp, Inserted, KeyCache, KeyCacheStatus, KeyIdentity, VkDigest};
use crate::params::file::{ParamsFile, PointCheck};
use crate::params::ProvingKey;
use crate::request::{InFlightLimiter, PartitionInput, RequestState, Ticket};
use crate::stage::Stage;
use crate::timeline::TimelineRecorder;
use scheduler::Scheduler;

/// How to build a [`Prover`].
#[derive(Debug, Clone)]
pub struct ProverConfig {
    pub backend: BackendKind,
    pub devices: DeviceSelection,
    /// Compute streams (and NTT/MSM actor threads) per device. Two is the production setting.
    pub workers_per_device: usize,
    /// Device memory left out of every budget, for the driver and other users.
    pub memory_reserve_bytes: u64,
    /// A cap on the device memory each device's budget plans with (`None`: the device's
    /// free memory). The budget takes the smaller of the cap and the free memory, less the
    /// reserve, so that a 16, 24, 32 or 48 GB card can be emulated on a larger one, and a
    /// prover can share a card with another user. Every plan (the key's residency, chunks,
    /// MSM passes) follows from the budget, so a capped prover behaves as on the smaller card.
    pub device_memory_bytes: Option<u64>,
    /// Partitions in flight at once per device (the bound over all devices is this times the
    /// number of devices).
    pub in_flight: usize,
    /// How many devices the CPU backend models, and how much memory each has.
    pub cpu_devices: usize,
    pub cpu_device_bytes: u64,
    /// Extra attempts for a failed partition (0: off). A retry avoids the device it failed on
    /// when another is allowed, so a failing device loses no work.
    pub retries: usize,
    /// Workers for particular devices, overriding `workers_per_device`.
    pub workers_by_device: std::collections::BTreeMap<usize, usize>,
    /// How partitions' large host vectors are page-locked for their upload.
    pub staging: StagingMode,
    /// Verify every proof before returning it (on by default). A proof that fails is a
    /// device fault: the partition is retried on another device. Costs a pairing check per
    /// partition on the host (the bench reports the verify stage's time).
    pub verify_proofs: bool,
    /// Timeline spans the prover keeps (the latest; older ones are dropped): the bound on the
    /// timeline's memory over a long life.
    pub timeline_spans: usize,
    /// How long a stage waits for a partition's device work before it calls the device hung
    /// (the watchdog): the device is then drained, recovered and the partition retried. Far
    /// above any partition's device time, queueing behind the others in flight included.
    /// `None`: the backend's own ([`default_stage_timeout`]): a GPU's partition takes seconds,
    /// while the CPU backend runs the same work on the host's cores, minutes for a PoRep
    /// partition on a small or busy machine, which is slowness, not a hang.
    pub stage_timeout: Option<Duration>,
    /// How often a quarantined device (one that failed partitions in a row) is probed with a
    /// small known proof; one that proves it right takes work again.
    pub quarantine_probe_interval: Duration,
    /// How long [`Prover::shutdown`] waits for work in flight: `Drain` cancels what has not
    /// finished by then, and both give up on partitions still stuck after it once more.
    pub shutdown_timeout: Duration,
    /// Host bytes of proving keys the key cache holds (`Prover::key_for_source`, every compat
    /// call) before it evicts the least recently used; the most recent key always stays, even
    /// one larger than this. By default what the host's memory has left once the synthesis
    /// budget and the reserve are taken out ([`host_memory_shares`]): 46.9 GiB on a 125 GiB
    /// host, 8 GiB on a 24 GiB one, 384 GiB on 1 TiB.
    pub key_cache_host_bytes: u64,
    /// Host bytes the witnesses of partitions submitted as circuits may take together, from
    /// their synthesis until their partition ends (see `actors/synthesize.rs`): half the
    /// machine's memory by default ([`host_memory_shares`]). A circuit whose witness alone
    /// needs more fails at once.
    ///
    /// This and `key_cache_host_bytes` share the host's memory: [`ProverConfig::validate`]
    /// refuses a config that sets both so that they add up to more than the host has.
    pub synthesis_host_bytes: u64,
    /// Where the a, b and c of partitions synthesized from their key's recorded constraint
    /// matrices are evaluated: on the device by default, so that only the assignment is
    /// staged. The device's evaluation is used only with `verify_proofs` on (a witness that
    /// does not satisfy the matrices is caught by its proof's verification); without it, the
    /// host evaluates and checks every witness.
    pub constraint_evaluation: ConstraintEvaluation,
    /// Keep each `.params` file's recorded constraint matrices beside it, as
    /// `<file>.snarkpipe-matrices` (on by default): a later process reads them instead of
    /// recording them with its first partition. A file of another key, format or shape, or a
    /// damaged one, is never used; it is replaced by the next recording. Needs the directory
    /// to be writable; where it is not, the matrices are only kept in memory.
    pub constraint_matrices_beside_params: bool,
}

/// The host memory the defaults assume where the host's cannot be read: its shares are the
/// 16 GiB of synthesis budget the prover has always fallen back on, and 12 GiB of keys.
pub const ASSUMED_HOST_BYTES: u64 = 32 << 30;

/// The least host memory left out of the default host budgets (see [`host_memory_reserve`]).
pub const MIN_HOST_RESERVE_BYTES: u64 = 4 << 30;

/// `MemTotal` of a `/proc/meminfo` text, in bytes; `None` when it has none (or says 0).
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    meminfo
        .lines()
        .find_map(|line| line.strip_prefix("MemTotal:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib.saturating_mul(1024))
        .filter(|&bytes| bytes > 0)
}

/// The machine's memory (`MemTotal` in `/proc/meminfo`); `None` where it cannot be read.
///
/// This is the machine's, not a container's memory limit (a cgroup's `memory.max`): in a
/// container limited below the machine, set both host budgets explicitly.
pub fn host_memory_bytes() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo").ok().as_deref().and_then(mem_total_bytes)
}

/// The host memory the default host budgets leave to everything else: the OS and its page
/// cache, the pools of page-locked staging buffers (which grow with the GPUs and partitions in
/// flight, so with the host), the constraint matrices and other allocations of the process.
/// An eighth of the host's memory, at least [`MIN_HOST_RESERVE_BYTES`]; all of it on a host
/// smaller than that.
pub fn host_memory_reserve(host_bytes: u64) -> u64 {
    (host_bytes / 8).max(MIN_HOST_RESERVE_BYTES).min(host_bytes)
}

/// The default `(key_cache_host_bytes, synthesis_host_bytes)` of a host with `host_bytes` of
/// memory, chosen together so that the two budgets and [`host_memory_reserve`] never add up
/// to more than the host has:
///
/// - synthesis takes half the host's memory (as it always has), less only on a host under
///   8 GiB, where half would eat into the reserve;
/// - the key cache takes what is left after the synthesis share and the reserve: 46.9 GiB on
///   a 125 GiB host (synthesis 62.5 GiB, reserve 15.6 GiB), 8 GiB on 24 GiB, 384 GiB on
///   1 TiB, 0 on a host of 8 GiB or less.
///
/// There is no floor of one key: the key sizes are not known when the config is made, and the
/// cache keeps the most recently used key whatever its size, so a bound smaller than one key
/// (a large Filecoin key on a smaller host) means one key at a time. Only then do the keys in
/// host memory exceed their share, by part of that one key.
pub fn host_memory_shares(host_bytes: u64) -> (u64, u64) {
    let usable = host_bytes - host_memory_reserve(host_bytes);
    let synthesis = (host_bytes / 2).min(usable);
    (usable - synthesis, synthesis)
}

impl Default for ProverConfig {
    fn default() -> Self {
        let (default_key_cache, default_synthesis) =
            host_memory_shares(host_memory_bytes().unwrap_or(ASSUMED_HOST_BYTES));
        ProverConfig {
            backend: BackendKind::Auto,
            devices: DeviceSelection::All,
            workers_per_device: 2,
            memory_reserve_bytes: 1 << 30,
            device_memory_bytes: None,
            in_flight: 4,
            cpu_devices: 1,
            cpu_device_bytes: 16 << 30,
            retries: 2,
            workers_by_device: Default::default(),
            staging: StagingMode::default(),
            key_cache_host_bytes: default_key_cache,
            synthesis_host_bytes: default_synthesis,
            constraint_evaluation: ConstraintEvaluation::default(),
            constraint_matrices_beside_params: true,
            timeline_spans: crate::timeline::DEFAULT_TIMELINE_SPANS,
            verify_proofs: true,
            stage_timeout: None,
            quarantine_probe_interval: Duration::from_secs(30),
            shutdown_timeout: Duration::from_secs(60),
        }
    }
}

impl ProverConfig {
    /// Checks the config before a prover starts from it ([`Prover::new`] calls it), against
    /// this machine's memory ([`host_memory_bytes`]).
    pub fn validate(&self) -> Result<()> {
        self.validate_for_host(host_memory_bytes())
    }

    /// [`ProverConfig::validate`] for a host of `host_bytes` of memory (`None`: not known, and
    /// then not checked).
    ///
    /// `key_cache_host_bytes` and `synthesis_host_bytes` that add up to more than the host's
    /// memory are refused with [`Error::HostMemoryOvercommitted`] when *both* were set, that
    /// is, differ from this host's defaults ([`host_memory_shares`]): filled, such budgets get
    /// the process killed by the OS instead of evicting a key or holding a synthesis back, and
    /// two explicit values are a choice the user can correct. When one of them is at its
    /// default, the over-commit is only logged as a warning and the prover starts:
    /// - a larger key cache bound than the host holds is the established way to say "never
    ///   evict" (the key cache tests use 1 TiB on 24 GiB CI machines, and embedders may too),
    ///   and the bounds are ceilings, not allocations: such a config worked before and
    ///   overcommits only if that many keys are actually loaded;
    /// - the fields are plain and filled in with `..ProverConfig::default()`, so a value the
    ///   user did not set cannot be told from one they set to the default, and a config that
    ///   changes one budget cannot be refused for the other, which it did not choose.
    pub fn validate_for_host(&self, host_bytes: Option<u64>) -> Result<()> {
        if self.in_flight == 0 || self.workers_per_device == 0 {
            return Err(Error::Config("in_flight and workers_per_device must be at least 1".into()));
        }
        let Some(host_bytes) = host_bytes else { return Ok(()) };
        let (key_cache_bytes, synthesis_bytes) = (self.key_cache_host_bytes, self.synthesis_host_bytes);
        if key_cache_bytes.saturating_add(synthesis_bytes) <= host_bytes {
            return Ok(());
        }
        let (default_key_cache, default_synthesis) = host_memory_shares(host_bytes);
        if key_cache_bytes != default_key_cache && synthesis_bytes != default_synthesis {
            return Err(Error::HostMemoryOvercommitted { key_cache_bytes, synthesis_bytes, host_bytes });
        }
        tracing::warn!(
            key_cache_bytes,
            synthesis_bytes,
            host_bytes,
            "ProverConfig::key_cache_host_bytes and synthesis_host_bytes add up to more than the host's memory: \
             if both fill up the OS may kill the process; lower the one that was set"
        );
        Ok(())
    }
}

/// Faults to inject into a prover's devices, for fault tests and the bench's `--faults`; a
/// node never sets them ([`Prover::new`] injects none).
#[derive(Debug, Clone, Default)]
pub struct FaultInjection {
    /// The share of device operations that fail, and the seed they are drawn from.
    pub rate: f64,
    pub seed: u64,
    /// Inject only into these devices (None: all), e.g. to model one failing GPU.
    pub devices: Option<Vec<usize>>,
    /// Tells each budget its device has this many bytes: a lie that provokes real
    /// out-of-memory failures.
    pub budget_bytes_override: Option<u64>,
    /// The stage whose actor drops every job it is given without an outcome, as a message to
    /// a stopped actor is dropped.
    pub lose_jobs_at: Option<Stage>,
    /// Every MSM result copied back from a faulty device is wrong (as a silently failing GPU's
    /// would be): the proof assembled from it fails verification.
    pub wrong_results: bool,
    /// An injected sticky error outlives recovery, as a real one does on CUDA: the device
    /// goes out of service and [`Prover::needs_restart`] lists it.
    pub sticky_needs_restart: bool,
    /// Sites armed to fail their next operations (in partitions' stages), and how many: the
    /// sites real devices fail at one at a time (a hang, a sticky error, an event failure).
    pub armed: Vec<(FaultSite, usize)>,
    /// As `armed`, for operations in one stage only.
    pub armed_in: Vec<(FaultSite, Stage, usize)>,
    /// The stage an armed `FaultSite::PanicOutsideStage` panics in (None: admission).
    pub panic_outside_at: Option<Stage>,
    /// Device bytes another process holds on each faulty device from the start (more can be
    /// taken later with `FaultInjector::set_others_use`).
    pub others_use_bytes: u64,
}

impl FaultInjection {
    /// Faults at `rate`, drawn from `seed`, into every device.
    pub fn at_rate(rate: f64, seed: u64) -> FaultInjection {
        FaultInjection { rate, seed, ..FaultInjection::default() }
    }

    /// No injected faults; each budget believes its device has `bytes`.
    pub fn budget_of(bytes: u64) -> FaultInjection {
        FaultInjection { budget_bytes_override: Some(bytes), ..FaultInjection::default() }
    }
}

/// A request: one proving key and the partitions to prove with it.
pub struct ProofRequest {
    pub key: Arc<ProvingKey>,
    pub partitions: Vec<Arc<Witness>>,
    /// One (r, s) per partition.
    pub r: Vec<Scalar>,
    pub s: Vec<Scalar>,
    pub priority: Priority,
    /// Devices this request may run on (None: any).
    pub devices: Option<Vec<usize>>,
}

/// The key of a batch of circuits: known, or found from the first circuit's shape.
pub enum KeyFor<'a> {
    Known(Arc<ProvingKey>),
    Shape(Box<dyn FnOnce(&WitnessShape) -> Result<Arc<ProvingKey>> + 'a>),
}

/// What [`Prover::prove_circuits`] returns.
pub struct CircuitBatch {
    pub proofs: Vec<bellperson::groth16::Proof<Bls12>>,
    pub handle: ProofHandle,
    pub key: Arc<ProvingKey>,
    /// Finding the key (zero when it was known).
    pub key_time: std::time::Duration,
    /// From the call to the submission: the first circuit's synthesis and the key, when the
    /// key came from the shape.
    pub before_proving: std::time::Duration,
    /// Synthesis time summed over the circuits; it overlaps the proving.
    pub synthesis_time: std::time::Duration,
}

/// A request of partitions given as circuits, synthesized by the pipeline (see
/// [`Prover::submit_circuits`]).
pub struct CircuitRequest {
    pub key: Arc<ProvingKey>,
    pub circuits: Vec<DeferredCircuit>,
    pub r: Vec<Scalar>,
    pub s: Vec<Scalar>,
    pub priority: Priority,
    pub devices: Option<Vec<usize>>,
}

impl CircuitRequest {
    /// `'static` circuits with r and s drawn from `rng` (every r, then every s), at normal
    /// priority on any device.
    pub fn new<C, R>(key: Arc<ProvingKey>, circuits: Vec<C>, rng: &mut R) -> CircuitRequest
    where
        C: bellperson::Circuit<Scalar> + Send + 'static,
        R: rand_core::RngCore,
    {
        use ff::Field;
        let r = circuits.iter().map(|_| Scalar::random(&mut *rng)).collect();
        let s = circuits.iter().map(|_| Scalar::random(&mut *rng)).collect();
        let circuits = circuits.into_iter().map(|c| DeferredCircuit::new(c, key.recording.clone())).collect();
        CircuitRequest { key, circuits, r, s, priority: Priority::default(), devices: None }
    }
}

impl ProofRequest {
    /// A request with fresh random r and s for each partition.
    pub fn new(key: Arc<ProvingKey>, partitions: Vec<Arc<Witness>>, rng: &mut impl rand_core::RngCore) -> ProofRequest {
        use ff::Field;
        let r = partitions.iter().map(|_| Scalar::random(&mut *rng)).collect();
        let s = partitions.iter().map(|_| Scalar::random(&mut *rng)).collect();
        ProofRequest { key, partitions, r, s, priority: Priority::Normal, devices: None }
    }
}

/// The watchdog's stage timeout when the configuration sets none: two minutes on a GPU, far
/// above any partition's device time there; an hour on the CPU backend, whose "device" work is
/// a PoRep partition's MSMs on the host's cores.
pub fn default_stage_timeout(backend: BackendKind) -> Duration {
    match backend {
        BackendKind::Cpu => Duration::from_secs(3600),
        _ => Duration::from_secs(120),
    }
}

/// Where the constraint matrices of the `.params` file at `params` are kept: beside it.
pub fn matrices_path(params: &std::path::Path) -> std::path::PathBuf {
    let mut name = params.as_os_str().to_owned();
    name.push(".snarkpipe-matrices");
    std::path::PathBuf::from(name)
}

/// A request's partitions, r and s agree in number, and there is at least one partition.
fn check_request_shape(partitions: usize, r: &[Scalar], s: &[Scalar]) -> Result<()> {
    if partitions == 0 {
        return Err(Error::EmptyRequest);
    }
    if r.len() != partitions || s.len() != partitions {
        return Err(Error::RandomnessLength { circuits: partitions, r: r.len(), s: s.len() });
    }
    Ok(())
}

/// A witness's vectors must agree with each other before its shape is compared with a key.
fn check_witness_lengths(w: &Witness) -> Result<()> {
    let bad = |what: String| Err(Error::MalformedWitness(what));
    if w.a.len() != w.b.len() || w.a.len() != w.c.len() {
        return bad(format!("a, b and c have {}, {} and {} evaluations", w.a.len(), w.b.len(), w.c.len()));
    }
    if w.input_assignment.is_empty() || w.input_assignment.len() != w.b_input_density.len() {
        return bad(format!(
            "{} inputs (ONE included) but a B-input density of {}",
            w.input_assignment.len(),
            w.b_input_density.len()
        ));
    }
    if w.aux_assignment.len() != w.a_aux_density.len() || w.aux_assignment.len() != w.b_aux_density.len() {
        return bad(format!(
            "{} aux values but A and B aux densities of {} and {}",
            w.aux_assignment.len(),
            w.a_aux_density.len(),
            w.b_aux_density.len()
        ));
    }
    Ok(())
}

/// The stamp of the parameter file at `path`, for its key's identity.
fn file_stamp(path: &std::path::Path) -> Result<FileStamp> {
    FileStamp::of(path).map_err(|e| Error::io(format!("reading the stamp of parameter file {}", path.display()), e))
}

/// What a prover holds at one moment ([`Prover::held`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Held {
    /// Budget bytes granted beyond what resident keys hold.
    pub budget_leaked_bytes: u64,
    /// Budget bytes granted, resident keys included.
    pub budget_in_use_bytes: u64,
    /// Grant requests waiting for memory.
    pub waiting_grants: usize,
    /// Page-locked bytes that no idle staging buffer or resident key explains.
    pub pinned_leaked_bytes: u64,
    /// Host bytes page-locked through the prover, pooled buffers and keys included.
    pub pinned_bytes: u64,
    /// Device bytes allocated, resident keys included.
    pub device_bytes: u64,
    /// Proving keys resident on a device.
    pub resident_keys: usize,
    /// Requests submitted and not finished.
    pub unfinished_requests: usize,
    /// Host bytes the synthesis stage holds for witnesses of partitions in flight.
    pub synthesis_host_bytes: u64,
}

impl Held {
    /// Whether anything is held that no resident key or idle pooled buffer explains: budget,
    /// pinned memory, or a grant request still waiting.
    pub fn leaked(&self) -> bool {
        self.budget_leaked_bytes > 0
            || self.pinned_leaked_bytes > 0
            || self.waiting_grants > 0
            || self.synthesis_host_bytes > 0
    }

    /// Whether nothing at all is held: no grant, no pinned byte, no device byte, no key.
    pub fn is_nothing(&self) -> bool {
        *self == Held::default()
    }
}

/// How [`Prover::shutdown`] treats work in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shutdown {
    /// Finish every request already submitted.
    Drain,
    /// Cancel every request; in-flight partitions release what they hold.
    Cancel,
}

/// A Groth16 prover running the actor pipeline on its devices.
pub struct Prover {
    backend: BackendKind,
    devices: Vec<Arc<dyn Device>>,
    pipelines: Vec<Arc<DevicePipeline>>,
    submit: Sender<Ticket>,
    requests: Mutex<Vec<std::sync::Weak<RequestState>>>,
    next_request: AtomicU64,
    stopping: Arc<AtomicBool>,
    /// Set (under the `requests` lock) once shutdown began: a submit either got its request
    /// into the list before, and shutdown drains or cancels it, or fails with `ShutDown`.
    closing: AtomicBool,
    scheduler: Mutex<Option<JoinHandle<()>>>,
    health: Mutex<Option<JoinHandle<()>>>,
    system: Mutex<Option<ActorSystem>>,
    timeline: TimelineRecorder,
    faults: Arc<FaultInjector>,
    limiter: InFlightLimiter,
    /// The page-locked host ranges of every device's pipeline.
    host_pins: Arc<HostPinTable>,
    /// One proving key per parameter set, by identity, held (and page-locked) across calls.
    key_cache: Mutex<KeyCache>,
    /// Identities whose key is being built now: a second caller for the same parameters waits
    /// for the first build instead of reading them again beside it; other keys build at once.
    key_builds: Mutex<HashMap<KeyIdentity, Arc<Mutex<()>>>>,
    /// Page-locks cached keys' host vectors, through the first device over the shared table
    /// (a registry of its own, so the pipelines' leak checks do not count the cache's leases).
    key_pins: Arc<PinnedRegistry>,
    /// The host-memory budget of the witnesses the synthesis stage makes (every pipeline's).
    host_budget: MemoryBudget,
    config: ProverConfig,
    /// The budgets as they stood when the actors stopped.
    final_budgets: Mutex<Option<Vec<BudgetReport>>>,
}

impl Prover {
    /// Opens the devices and starts their pipelines.
    pub fn new(config: ProverConfig) -> Result<Prover> {
        Prover::with_fault_injection(config, FaultInjection::default())
    }

    /// [`Prover::new`], with `injected` faults in its devices (fault tests, the bench).
    pub fn with_fault_injection(config: ProverConfig, injected: FaultInjection) -> Result<Prover> {
        config.validate()?;
        let cpu = CpuModel { devices: config.cpu_devices, device_bytes: config.cpu_device_bytes };
        let (backend, devices) = open_devices(config.backend, &config.devices, cpu)?;
        if devices.is_empty() {
            return Err(Error::Config(format!("no device matches {:?}", config.devices)));
        }
        let stage_timeout = config.stage_timeout.unwrap_or_else(|| default_stage_timeout(backend));
        let faults = FaultInjector::new(injected.rate, injected.seed);
        if let Some(stage) = injected.lose_jobs_at {
            faults.lose_jobs_at(stage);
        }
        if injected.sticky_needs_restart {
            faults.make_sticky_errors_need_restart();
        }
        if injected.wrong_results {
            faults.return_wrong_results();
        }
        faults.set_others_use(injected.others_use_bytes);
        for &(site, times) in &injected.armed {
            faults.arm(site, times);
        }
        for &(site, stage, times) in &injected.armed_in {
            faults.arm_in(site, stage, times);
        }
        if let Some(stage) = injected.panic_outside_at {
            faults.panic_outside_at(stage);
        }
        let timeline = TimelineRecorder::with_capacity(config.timeline_spans);
        let system = ActorSystem::start("snarkpipe-actors")?;
        let mut pipelines = Vec::new();
        let host_pins = HostPinTable::new();
        let synthesis_bytes = config.synthesis_host_bytes;
        let host_budget = system.run(move || MemoryBudget::start_host(synthesis_bytes))?;
        for device in &devices {
            let ordinal = device.info().ordinal;
            let faulty = faults.is_enabled() && injected.devices.as_ref().is_none_or(|d| d.contains(&ordinal));
            let wrapped = if faulty { FaultyDevice::wrap(device.clone(), faults.clone()) } else { device.clone() };
            // From the memory free now, not the total: another process's allocations are not
            // ours to plan with (on a GPU shared with another prover, or a display).
            let capacity = device.info().capacity_bytes;
            let free = wrapped.free_bytes().map_or(capacity, |free| free.min(capacity));
            let free = config.device_memory_bytes.map_or(free, |cap| cap.min(free));
            let budget = injected
                .budget_bytes_override
                .unwrap_or(free.saturating_sub(config.memory_reserve_bytes.min(free / 2)));
            let workers = config.workers_by_device.get(&ordinal).copied().unwrap_or(config.workers_per_device);
            let (in_flight, timeline, host_pins, staging, stage_timeout) =
                (config.in_flight, timeline.clone(), host_pins.clone(), config.staging, stage_timeout);
            let device_faults = if faulty { faults.clone() } else { FaultInjector::disabled() };
            let host_budget = host_budget.clone();
            pipelines.push(system.run(move || {
                DevicePipeline::start(
                    wrapped,
                    host_pins,
                    staging,
                    budget,
                    host_budget,
                    workers,
                    in_flight,
                    stage_timeout,
                    timeline,
                    device_faults,
                )
            })??);
        }
        let (submit, incoming) = unbounded();
        let stopping = Arc::new(AtomicBool::new(false));
        let limiter = InFlightLimiter::new(config.in_flight * pipelines.len());
        let key_pins = PinnedRegistry::sharing(pipelines[0].device.clone(), host_pins.clone());
        let scheduler = Scheduler {
            incoming,
            pipelines: pipelines.clone(),
            limiter: limiter.clone(),
            timeline: timeline.clone(),
            stopping: stopping.clone(),
            next_partition_id: Arc::new(AtomicUsize::new(0)),
            verify_proofs: config.verify_proofs,
            constraint_evaluation: match config.verify_proofs {
                true => config.constraint_evaluation,
                false => ConstraintEvaluation::Host,
            },
        };
        let scheduler = std::thread::Builder::new()
            .name("snarkpipe-scheduler".into())
            .spawn(move || scheduler.run())
            .map_err(|e| Error::io("starting the scheduler thread", e))?;
        let monitor = health::HealthMonitor {
            pipelines: pipelines.clone(),
            stopping: stopping.clone(),
            submit: submit.clone(),
            probe_interval: config.quarantine_probe_interval,
        };
        let health = std::thread::Builder::new()
            .name("snarkpipe-health".into())
            .spawn(move || monitor.run())
            .map_err(|e| Error::io("starting the health monitor thread", e))?;
        Ok(Prover {
            backend,
            devices,
            pipelines,
            submit,
            requests: Mutex::new(Vec::new()),
            next_request: AtomicU64::new(0),
            stopping,
            closing: AtomicBool::new(false),
            scheduler: Mutex::new(Some(scheduler)),
            health: Mutex::new(Some(health)),
            system: Mutex::new(Some(system)),
            timeline,
            faults,
            limiter,
            host_pins,
            key_cache: Mutex::new(KeyCache::new(config.key_cache_host_bytes)),
            key_builds: Mutex::new(HashMap::new()),
            key_pins,
            host_budget,
            config,
            final_budgets: Mutex::new(None),
        })
    }

    /// The backend actually in use (`Auto` resolved).
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    pub fn config(&self) -> &ProverConfig {
        &self.config
    }

    pub fn device_count(&self) -> usize {
        self.pipelines.len()
    }

    /// Checks a request and queues its partitions. Bad input fails here, before any work.
    pub fn submit(&self, request: ProofRequest) -> Result<ProofHandle> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(Error::ShutDown);
        }
        let ProofRequest { key, partitions, r, s, priority, devices } = request;
        // The request's own shape first: a caller whose r and s do not match the partition
        // count hears that, not what is wrong inside one of the witnesses.
        check_request_shape(partitions.len(), &r, &s)?;
        for witness in &partitions {
            check_witness_lengths(witness)?;
            witness.domain()?;
            key.check_shape(&witness.shape())?;
        }
        let inputs = partitions.into_iter().map(PartitionInput::Witness).collect();
        self.submit_inputs(key, inputs, r, s, priority, devices)
    }

    /// Submits partitions given as circuits: each is synthesized by the pipeline's synthesis
    /// stage (`actors/synthesize.rs`) under the host-memory budget, while the partitions
    /// ahead of it prove. Its witness is checked against the key there; a circuit that fails,
    /// panics or does not fit the key fails its own partition with a typed error.
    pub fn submit_circuits(&self, request: CircuitRequest) -> Result<ProofHandle> {
        if self.closing.load(Ordering::SeqCst) {
            return Err(Error::ShutDown);
        }
        let CircuitRequest { key, circuits, r, s, priority, devices } = request;
        let inputs = circuits.into_iter().map(|c| PartitionInput::Circuit(Arc::new(c))).collect();
        self.submit_inputs(key, inputs, r, s, priority, devices)
    }

    /// Proves circuits that borrow (bellperson's and filecoin-proofs' circuits do, so they
    /// cannot move to the pipeline's threads): `threads` threads of this call synthesize them
    /// in the order the synthesis stage asks for them, so that partition k+1 is synthesized
    /// while partition k proves. With [`KeyFor::Shape`] the first circuit is synthesized
    /// first, here, and its shape picks the key. Returns once every partition has an
    /// outcome: the proofs in order, or the first failure.
    #[allow(clippy::too_many_arguments)]
    pub fn prove_circuits<C: bellperson::Circuit<Scalar> + Send>(
        &self,
        key: KeyFor<'_>,
        circuits: Vec<C>,
        r: Vec<Scalar>,
        s: Vec<Scalar>,
        priority: Priority,
        threads: usize,
    ) -> Result<CircuitBatch> {
        self.prove_circuits_observed(key, circuits, r, s, priority, threads, &|_| {})
    }

    /// [`Prover::prove_circuits`], handing the request's handle to `submitted` as soon as its
    /// partitions are queued, before the call waits for them: a caller that serves others (the
    /// daemon) can cancel it from another thread meanwhile.
    #[allow(clippy::too_many_arguments)]
    pub fn prove_circuits_observed<C: bellperson::Circuit<Scalar> + Send>(
        &self,
        key: KeyFor<'_>,
        circuits: Vec<C>,
        r: Vec<Scalar>,
        s: Vec<Scalar>,
        priority: Priority,
        threads: usize,
        submitted: &(dyn Fn(&ProofHandle) + Sync),
    ) -> Result<CircuitBatch> {
        let pool = SynthesisPool::new(circuits, SatisfactionCheck::Off);
        check_request_shape(pool.len(), &r, &s)?;
        let mut inputs: Vec<PartitionInput> =
            pool.defer().into_iter().map(|c| PartitionInput::Circuit(Arc::new(c))).collect();
        let started = std::time::Instant::now();
        // Nothing comes before the proving with a known key: `before_proving` is zero then.
        let (key, key_time, before_proving) = match key {
            KeyFor::Known(key) => (key, std::time::Duration::ZERO, std::time::Duration::ZERO),
            KeyFor::Shape(find) => {
                let (first, matrices) = pool.synthesize_now(0)?;
                let finding = std::time::Instant::now();
                let key = find(&first.shape())?;
                key.check_shape(&first.shape())?;
                // The matrices recorded with the first witness become the key's (and are kept
                // beside its file), unless it has its own already.
                if let Some(matrices) = matrices {
                    key.recording.adopt(matrices);
                }
                inputs[0] = PartitionInput::Witness(Arc::new(first));
                (key, finding.elapsed(), started.elapsed())
            }
        };
        pool.use_recording(key.recording.clone());
        std::thread::scope(|scope| {
            for _ in 0..threads.clamp(1, pool.len()) {
                scope.spawn(|| pool.serve());
            }
            let outcome = self.submit_inputs(key.clone(), inputs, r, s, priority, None).and_then(|handle| {
                submitted(&handle);
                Ok((handle.wait()?, handle))
            });
            pool.close();
            let (proofs, handle) = outcome?;
            Ok(CircuitBatch { proofs, handle, key, key_time, before_proving, synthesis_time: pool.synthesis_time() })
        })
    }

    /// Queues a request's partitions for the scheduler, after the checks every request meets.
    fn submit_inputs(
        &self,
        key: Arc<ProvingKey>,
        inputs: Vec<PartitionInput>,
        r: Vec<Scalar>,
        s: Vec<Scalar>,
        priority: Priority,
        devices: Option<Vec<usize>>,
    ) -> Result<ProofHandle> {
        check_request_shape(inputs.len(), &r, &s)?;
        // A delta at infinity fails every proof at assembly, after all its device work and
        // every retry: refuse the key here, once, before any of it.
        if bool::from(key.vk.delta_g1.is_identity()) || bool::from(key.vk.delta_g2.is_identity()) {
            return Err(Error::UnexpectedIdentity);
        }
        if let Some(wanted) = &devices {
            if !wanted.iter().any(|d| self.pipelines.iter().any(|p| p.ordinal == *d)) {
                return Err(Error::Config(format!("none of the devices {wanted:?} is part of this prover")));
            }
        }
        self.release_unheld_keys();
        let id = self.next_request.fetch_add(1, Ordering::SeqCst);
        let state = RequestState::new(id, key, r, s, priority, devices, self.config.retries, self.submit.clone());
        let mut requests = self.requests.lock();
        // Under the lock shutdown takes its list with: a request is either in that list, or
        // refused here.
        if self.closing.load(Ordering::SeqCst) {
            return Err(Error::ShutDown);
        }
        // Finished requests are forgotten: the list is what shutdown must cancel or drain.
        requests.retain(|r| r.upgrade().is_some_and(|r| !r.status().finished));
        requests.push(Arc::downgrade(&state));
        for (index, input) in inputs.into_iter().enumerate() {
            let ticket = Ticket {
                request: state.clone(),
                index,
                input,
                attempt: 0,
                avoid: Vec::new(),
                requeues: 0,
                not_before: None,
            };
            // The scheduler runs until shutdown has finished every request in the list.
            self.submit.send(ticket).map_err(|_| Error::ShutDown)?;
        }
        Ok(ProofHandle { state })
    }

    /// Submits and waits: the proofs of every partition, in order.
    pub fn prove(&self, request: ProofRequest) -> Result<Vec<bellperson::groth16::Proof<blstrs::Bls12>>> {
        self.submit(request)?.wait()
    }

    /// The timeline recorded so far.
    pub fn timeline(&self) -> &TimelineRecorder {
        &self.timeline
    }

    pub fn faults(&self) -> &FaultInjector {
        &self.faults
    }

    /// Partitions in flight now.
    pub fn in_flight(&self) -> usize {
        self.limiter.in_flight()
    }

    /// Each device's budget, after every release already sent.
    /// After shutdown: as they stood when the actors stopped.
    pub fn budget_reports(&self) -> Result<Vec<BudgetReport>> {
        if let Some(last) = self.final_budgets.lock().clone() {
            return Ok(last);
        }
        self.pipelines.iter().map(|p| p.budget.report()).collect()
    }

    /// Bytes granted beyond what resident keys hold: 0 when the prover is idle.
    pub fn budget_leaked_bytes(&self) -> Result<u64> {
        let reports = self.budget_reports()?;
        Ok(reports
            .iter()
            .zip(&self.pipelines)
            .map(|(report, pipeline)| report.in_use_bytes.saturating_sub(pipeline.residency().1))
            .sum())
    }

    /// Pinned bytes that no idle staging buffer or resident key explains.
    pub fn pinned_leaked_bytes(&self) -> u64 {
        self.pipelines.iter().map(|p| p.pinned_leaked_bytes()).sum()
    }

    /// Every host range page-locked through this prover's pin table now, by any device.
    pub fn pinned_ranges(&self) -> Vec<crate::backend::HostRange> {
        self.host_pins.ranges()
    }

    /// Device bytes allocated now, per device (resident keys included).
    pub fn device_allocated_bytes(&self) -> Vec<u64> {
        self.devices.iter().map(|d| d.allocated_bytes()).collect()
    }

    /// The driver's free memory per device, where the backend reports it.
    pub fn device_free_bytes(&self) -> Vec<Option<u64>> {
        self.devices.iter().map(|d| d.free_bytes()).collect()
    }

    /// Each device's state: whether it takes work, is quarantined, and how often it was
    /// recovered.
    pub fn device_status(&self) -> Vec<DeviceStatus> {
        self.pipelines
            .iter()
            .map(|p| DeviceStatus {
                ordinal: p.ordinal,
                health: p.health(),
                quarantined: p.is_failing(),
                recoveries: p.recoveries(),
                in_flight: p.load(),
                memory_budget_bytes: p.budget.capacity_bytes(),
                keys: p
                    .key_plans()
                    .into_iter()
                    .map(|(key, plan)| KeyResidency {
                        resident: plan.resident.names(),
                        streamed: plan.resident.complement().names(),
                        resident_bytes: plan.resident_bytes(&key.vectors()),
                        chunk_points: plan.chunk_points,
                        partitions: plan.partitions,
                    })
                    .collect(),
            })
            .collect()
    }

    /// The devices this process can no longer use, with why: each one's recovery failed, so
    /// it takes no work for the rest of the prover's life. On CUDA that is what a sticky
    /// error (an illegal address, a trapping kernel) leads to, since the driver keeps the
    /// error until the process exits (see `docs/library.md`, "A GPU that breaks"). A node
    /// that sees this drains the prover and restarts the process to have the GPU back; an
    /// empty list means every device is healthy, quarantined or still recovering.
    pub fn needs_restart(&self) -> Vec<(usize, String)> {
        self.pipelines
            .iter()
            .filter_map(|p| match p.health() {
                DeviceHealth::OutOfService { cause } => Some((p.ordinal, cause)),
                _ => None,
            })
            .collect()
    }

    /// Resident proving keys per device: (count, bytes).
    pub fn residency(&self) -> Vec<(usize, u64)> {
        self.pipelines.iter().map(|p| p.residency()).collect()
    }

    /// Drops every resident key on every device; returns how many went. Keys in use stay
    /// alive until their partitions finish.
    pub fn evict_all_keys(&self) -> usize {
        self.pipelines.iter().map(|p| p.evict_key(None)).sum()
    }

    /// Evicts, from every device, the resident keys that nobody outside the devices holds any
    /// more (no caller, request or key-cache entry): nothing could ask for them again, and
    /// their device memory and page-locked host vectors are better given back now than when
    /// the budget next runs short. Returns how many keys went.
    pub fn release_unheld_keys(&self) -> usize {
        let mut residents: Vec<Arc<ProvingKey>> =
            self.pipelines.iter().flat_map(|p| p.resident_proving_keys()).collect();
        residents.sort_by_key(|k| Arc::as_ptr(k) as usize);
        let unheld: Vec<Arc<ProvingKey>> = residents
            .chunk_by(Arc::ptr_eq)
            // A key resident on n devices is held n times by their entries and n times by
            // `residents`; any other holder makes the count larger. Nobody can take a new
            // handle on an unheld key meanwhile: only the devices have one.
            .filter(|same| Arc::strong_count(&same[0]) <= 2 * same.len())
            .map(|same| same[0].clone())
            .collect();
        drop(residents);
        for key in &unheld {
            self.pipelines.iter().for_each(|p| {
                p.evict_key(Some(key));
            });
        }
        unheld.len()
    }

    /// The proving key for the parameters `source` holds, cut for `shape`, from the prover's
    /// key cache: the same parameters (by verifying-key digest and shape, whichever `Arc` or
    /// `ParameterSource` carries them) give the same key for the life of the prover, resident
    /// and page-locked, and only a miss calls [`ProvingKey::from_source`] (for
    /// `MappedParameters`, a read of every point from the file).
    pub fn key_for_source<P: ParameterSource<Bls12>>(
        &self,
        source: P,
        shape: &WitnessShape,
    ) -> Result<Arc<ProvingKey>> {
        let identity = KeyIdentity::of(source.get_vk(shape.num_inputs)?, shape);
        self.cached_key(identity, || ProvingKey::from_source(source, shape))
    }

    /// [`Prover::key_for_source`] for a `.params` file opened by path: its identity also
    /// carries the file's stamp (path, length, modification time), so another file, or this
    /// one rewritten, is another key.
    pub fn key_for_file(&self, file: &ParamsFile, shape: &WitnessShape) -> Result<Arc<ProvingKey>> {
        self.key_for_file_with(file, shape, None)
    }

    /// [`Prover::key_for_file`], with the circuit's matrices when they are in hand already
    /// (read from beside the parameters by [`Prover::key_from_kept_matrices`]), so that a
    /// key built now takes them instead of reading the file again.
    fn key_for_file_with(
        &self,
        file: &ParamsFile,
        shape: &WitnessShape,
        matrices: Option<Arc<ConstraintMatrices>>,
    ) -> Result<Arc<ProvingKey>> {
        let identity = KeyIdentity::of(file.verifying_key(), shape).from_file(file_stamp(file.path())?);
        let digest = *identity.vk_digest.bytes();
        self.cached_key(identity, || {
            let key = ProvingKey::from_source(file, shape)?;
            if let Some(matrices) = matrices {
                key.recording.adopt(matrices);
            }
            if self.config.constraint_matrices_beside_params {
                let path = matrices_path(file.path());
                match key.recording.load_or_persist(&path, digest, shape) {
                    MatricesFile::Replacing(why) => {
                        tracing::warn!(%why, "recorded constraint matrices not used; recording them again")
                    }
                    done => tracing::debug!(path = %path.display(), ?done, "constraint matrices beside the parameters"),
                }
            }
            Ok(key)
        })
    }

    /// The key of the `.params` file at `path`, cut for the shape of the constraint matrices
    /// an earlier process kept beside it, with those matrices: the first proof of a circuit in
    /// a new process then learns its shape without synthesizing a partition first, and
    /// synthesizes every partition witness-only. None when the prover keeps no matrices
    /// beside parameters, or there is no such file, or it is not this key's (logged; the first
    /// partition then records them again, as [`Prover::key_for_file`] says).
    pub fn key_from_kept_matrices(
        &self,
        path: impl AsRef<std::path::Path>,
        check: PointCheck,
    ) -> Result<Option<Arc<ProvingKey>>> {
        let path = path.as_ref();
        let kept = matrices_path(path);
        if !self.config.constraint_matrices_beside_params || !kept.exists() {
            return Ok(None);
        }
        let file = ParamsFile::open(path, check)?;
        let matrices = match ConstraintMatrices::read_file(&kept, *VkDigest::of(file.verifying_key()).bytes()) {
            Ok(matrices) => Arc::new(matrices),
            Err(err) => {
                tracing::warn!(%err, "constraint matrices beside the parameters not used");
                return Ok(None);
            }
        };
        let shape = matrices.shape();
        if let Some(key) = self.key_cache.lock().get_file(&file_stamp(path)?, &shape) {
            return Ok(Some(key));
        }
        self.key_for_file_with(&file, &shape, Some(matrices)).map(Some)
    }

    /// [`Prover::key_for_file`] for the `.params` file at `path`, which is opened (and its
    /// points checked as `check` says) only when the cache holds no key for the file as it
    /// stands now (same path, length and modification time) and `shape`.
    pub fn key_for_path(
        &self,
        path: impl AsRef<std::path::Path>,
        check: PointCheck,
        shape: &WitnessShape,
    ) -> Result<Arc<ProvingKey>> {
        let path = path.as_ref();
        if let Some(key) = self.key_cache.lock().get_file(&file_stamp(path)?, shape) {
            return Ok(key);
        }
        self.key_for_file(&ParamsFile::open(path, check)?, shape)
    }

    /// The key the cache holds for the `.params` file at `path` as it stands now (same path,
    /// length and modification time), with the shape it was cut for, when it holds exactly
    /// one: a caller proving that file's circuit again need not synthesize a partition first
    /// to find its key (`KeyFor::Shape`). A key cached for another shape of the same file
    /// makes the answer None rather than a guess.
    pub fn cached_key_for_path(
        &self,
        path: impl AsRef<std::path::Path>,
    ) -> Result<Option<(Arc<ProvingKey>, WitnessShape)>> {
        let stamp = file_stamp(path.as_ref())?;
        Ok(self.key_cache.lock().get_file_only(&stamp))
    }

    /// The key cached for `identity`, or the one `build` makes, cached and page-locked. Keys
    /// the cache evicts to stay within its host bytes are evicted from the devices too.
    fn cached_key(
        &self,
        identity: KeyIdentity,
        build: impl FnOnce() -> Result<Arc<ProvingKey>>,
    ) -> Result<Arc<ProvingKey>> {
        if self.stopping.load(Ordering::SeqCst) {
            return Err(Error::ShutDown);
        }
        if let Some(key) = self.key_cache.lock().get(&identity) {
            return Ok(key);
        }
        let slot = self.key_builds.lock().entry(identity.clone()).or_default().clone();
        let built = {
            let _building = slot.lock();
            let cached = self.key_cache.lock().get(&identity);
            match cached {
                // Built by the caller this one waited for.
                Some(key) => Ok(key),
                None => build().map(|key| {
                    let pins = pin_key_vectors(&self.key_pins, &key).unwrap_or_else(|err| {
                        tracing::warn!(%err, "a cached proving key stays pageable: page-locking it failed");
                        Vec::new()
                    });
                    let Inserted { key, evicted } = self.key_cache.lock().insert(identity.clone(), key, pins);
                    for old in &evicted {
                        self.pipelines.iter().for_each(|p| {
                            p.evict_key(Some(old));
                        });
                    }
                    key
                }),
            }
        };
        // Only this build's slot: a later miss (after an eviction) may have made a new one.
        let mut builds = self.key_builds.lock();
        if builds.get(&identity).is_some_and(|current| Arc::ptr_eq(current, &slot)) {
            builds.remove(&identity);
        }
        built
    }

    /// The key cache: each entry's identity, host bytes, tier (hot: resident on a device;
    /// warm: in host memory; cold: evicted from the host cache), hits and loads.
    pub fn key_cache_status(&self) -> KeyCacheStatus {
        self.key_cache
            .lock()
            .status(|key| self.pipelines.iter().filter(|p| p.holds_key(key)).map(|p| p.ordinal).collect())
    }

    /// Drops every key from the key cache and from the devices (partitions in flight keep
    /// theirs until they finish); returns how many keys the cache held.
    pub fn evict_cached_keys(&self) -> usize {
        let keys = self.key_cache.lock().clear();
        for key in &keys {
            self.pipelines.iter().for_each(|p| {
                p.evict_key(Some(key));
            });
        }
        keys.len()
    }

    fn selected(&self, devices: Option<&[usize]>) -> Vec<&Arc<DevicePipeline>> {
        self.pipelines.iter().filter(|p| devices.is_none_or(|d| d.contains(&p.ordinal))).collect()
    }

    /// Makes `key` resident on `devices` (None: all) now, so the first partition does not wait
    /// for its upload. A key is never copied twice to one device.
    pub fn preload(&self, key: &Arc<ProvingKey>, devices: Option<&[usize]>) -> Result<()> {
        self.selected(devices).into_iter().try_for_each(|p| p.preload(key))
    }

    /// Gets `devices` (None: all) ready to stream partitions of `key`: preloads the key and
    /// pins staging buffers for `in_flight` partitions of its shape, all devices at once, so
    /// the first partitions do not wait on page-locking fresh host memory. Returns the host
    /// bytes newly pinned for staging.
    pub fn warm_up(&self, key: &Arc<ProvingKey>, devices: Option<&[usize]>) -> Result<u64> {
        let selected = self.selected(devices);
        std::thread::scope(|scope| {
            let warming: Vec<_> = selected
                .iter()
                .map(|p| scope.spawn(move || p.preload(key).and_then(|()| p.warm_staging(key))))
                .collect();
            warming
                .into_iter()
                .map(|w| {
                    w.join().unwrap_or_else(|_| {
                        Err(Error::Panicked { stage: Stage::Pin, message: "warming up a device panicked".into() })
                    })
                })
                .sum()
        })
    }

    /// Drops `key` from `devices` (None: all); returns on how many devices it was resident.
    pub fn evict(&self, key: &Arc<ProvingKey>, devices: Option<&[usize]>) -> usize {
        self.selected(devices).into_iter().map(|p| p.evict_key(Some(key))).sum()
    }

    /// Whether `key` is resident on device `ordinal`.
    pub fn is_resident(&self, key: &Arc<ProvingKey>, ordinal: usize) -> bool {
        self.pipelines.iter().any(|p| p.ordinal == ordinal && p.holds_key(key))
    }

    /// The devices the prover proves on, in the order of their pipelines.
    pub fn devices(&self) -> &[Arc<dyn Device>] {
        &self.devices
    }

    /// The registry the prover page-locks host memory through (its table of locked ranges is
    /// shared by every device): for callers that pin their own vectors ahead of a request,
    /// such as witnesses they will submit.
    pub fn pin_registry(&self) -> &Arc<PinnedRegistry> {
        &self.key_pins
    }

    /// What the prover holds now, over all its devices: the canonical leak check. With nothing
    /// in flight, [`Held::leaked`] is false; with the keys evicted too (or after
    /// [`Prover::shutdown`]), [`Held::is_nothing`] is true.
    pub fn held(&self) -> Result<Held> {
        let reports = self.budget_reports()?;
        Ok(Held {
            budget_leaked_bytes: self.budget_leaked_bytes()?,
            budget_in_use_bytes: reports.iter().map(|r| r.in_use_bytes).sum(),
            waiting_grants: reports.iter().map(|r| r.waiting).sum(),
            pinned_leaked_bytes: self.pinned_leaked_bytes(),
            pinned_bytes: self.host_pins.ranges().iter().map(|r| r.len as u64).sum(),
            device_bytes: self.device_allocated_bytes().iter().sum(),
            resident_keys: self.residency().iter().map(|(keys, _)| keys).sum(),
            unfinished_requests: self.unfinished_requests(),
            // After every release sent so far; once the actors stopped, the last mirrored count.
            synthesis_host_bytes: self.host_budget.report().map_or(self.host_budget.in_use_bytes(), |r| r.in_use_bytes),
        })
    }

    /// Requests submitted and not yet finished (the finished ones are forgotten here).
    fn unfinished_requests(&self) -> usize {
        let mut requests = self.requests.lock();
        requests.retain(|r| r.upgrade().is_some_and(|r| !r.status().finished));
        requests.len()
    }

    /// Stops taking requests, drains or cancels what is in flight, and stops the actors,
    /// within a bound: `Drain` waits up to `shutdown_timeout` for the requests submitted and
    /// then cancels what is left; partitions still stuck after another `shutdown_timeout`
    /// (a hung device) are given up and fail with `ShutDown`, so no handle waits for ever.
    /// Says what it finished, cancelled and gave up on; a second call reports nothing.
    pub fn shutdown(&self, mode: Shutdown) -> ShutdownReport {
        let started = std::time::Instant::now();
        let live: Vec<Arc<RequestState>> = {
            let requests = self.requests.lock();
            if self.closing.swap(true, Ordering::SeqCst) {
                return ShutdownReport::default();
            }
            requests.iter().filter_map(|r| r.upgrade()).collect()
        };
        let bound = self.config.shutdown_timeout;
        let all_finished = |within: Duration| {
            let deadline = std::time::Instant::now() + within;
            live.iter().all(|r| r.wait_until(deadline))
        };
        let mut cancelled_by_shutdown = mode == Shutdown::Cancel;
        if mode == Shutdown::Cancel || !all_finished(bound) {
            cancelled_by_shutdown = true;
            live.iter().for_each(|r| r.cancel());
        }
        let mut report = ShutdownReport { requests: live.len(), ..ShutdownReport::default() };
        if !all_finished(bound) {
            for request in &live {
                report.abandoned += request.abandon(Error::ShutDown);
            }
        }
        for request in &live {
            let status = request.status();
            report.proved += status.proved;
            report.failed += status.failed;
        }
        report.cancelled = if cancelled_by_shutdown {
            live.iter().map(|r| r.count_failed_with(|e| matches!(e, Error::Cancelled | Error::ShutDown))).sum()
        } else {
            0
        };
        self.stopping.store(true, Ordering::SeqCst);
        if let Some(scheduler) = self.scheduler.lock().take() {
            let _ = scheduler.join();
        }
        if let Some(health) = self.health.lock().take() {
            let _ = health.join();
        }
        let deadline = std::time::Instant::now() + bound;
        while self.limiter.in_flight() > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        report.stuck_partitions = self.limiter.in_flight();
        // The cache's keys and page-locked vectors go before the devices are released.
        drop(self.key_cache.lock().clear());
        self.pipelines.iter().for_each(|p| {
            p.evict_key(None);
            p.pool.clear();
        });
        if let Ok(last) = self.pipelines.iter().map(|p| p.budget.report()).collect::<Result<Vec<_>>>() {
            *self.final_budgets.lock() = Some(last);
        }
        if let Some(system) = self.system.lock().take() {
            system.stop();
        }
        self.devices.iter().for_each(|d| d.release_cached());
        // A process that proves once and exits must not lose the matrices it recorded.
        let unwritten = crate::circuit::recording::finish_matrices_writes(bound);
        if unwritten > 0 {
            tracing::warn!(
                unwritten,
                "constraint matrices still being written at shutdown: the next process records them again"
            );
        }
        report.elapsed = started.elapsed();
        tracing::info!(?mode, ?report, "the prover has shut down");
        report
    }
}

/// One device as [`Prover::device_status`] sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeviceStatus {
    pub ordinal: usize,
    pub health: DeviceHealth,
    /// It failed partitions in a row: it gets work only when no other device can take it,
    /// until a probe proves on it.
    pub quarantined: bool,
    pub recoveries: usize,
    /// Partitions in flight on it.
    pub in_flight: usize,
    /// The device memory its budget plans with: the free memory at start, or the
    /// `device_memory_bytes` cap where smaller, less the reserve.
    pub memory_budget_bytes: u64,
    /// How each key resident on it is held.
    pub keys: Vec<KeyResidency>,
}

/// How a proving key is held on a device (see `plan::residency`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyResidency {
    /// The query vectors kept on the device (`h`, `l`, `a`, `b_g1`, `b_g2`).
    pub resident: Vec<&'static str>,
    /// The vectors streamed through chunk buffers for every partition.
    pub streamed: Vec<&'static str>,
    /// Device bytes of the resident vectors (its matrices not counted).
    pub resident_bytes: u64,
    /// Points per chunk of the streamed vectors (`None`: nothing streams).
    pub chunk_points: Option<usize>,
    /// Partitions of the key the plan leaves room for at once.
    pub partitions: usize,
}

/// What [`Prover::shutdown`] did with the work it found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShutdownReport {
    /// Requests unfinished when shutdown began.
    pub requests: usize,
    /// Their partitions that proved, failed (for any reason), and were cancelled or refused
    /// by the shutdown (counted in `failed` too).
    pub proved: usize,
    pub failed: usize,
    pub cancelled: usize,
    /// Partitions given up after the bound, still running on a device that never answered.
    pub abandoned: usize,
    /// Partitions still holding an in-flight place when the actors were stopped.
    pub stuck_partitions: usize,
    pub elapsed: Duration,
}

impl Drop for Prover {
    fn drop(&mut self) {
        let report = self.shutdown(Shutdown::Cancel);
        if report.requests > 0 {
            tracing::warn!(?report, "a prover dropped with requests unfinished cancelled them");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// The defaults' shares plus the reserve stay within the host.
    fn assert_fits(host: u64) {
        let (key_cache, synthesis) = host_memory_shares(host);
        let reserve = host_memory_reserve(host);
        assert!(
            key_cache + synthesis <= host - reserve,
            "host {host}: key cache {key_cache} + synthesis {synthesis} over the host less its reserve {reserve}"
        );
    }

    #[test]
    fn host_memory_shares_of_a_125_gib_host_fit_it() {
        // The host of the report: 128 GiB of keys and 62.5 GiB of witnesses did not fit it.
        let host = 125 * GIB;
        let (key_cache, synthesis) = host_memory_shares(host);
        assert_eq!(synthesis, host / 2);
        assert_eq!(host_memory_reserve(host), host / 8);
        assert_eq!(key_cache, host - host / 2 - host / 8);
        assert!(key_cache > 46 * GIB && key_cache < 47 * GIB, "{key_cache}");
        assert!(key_cache + synthesis < host - 15 * GIB);
        assert_fits(host);
    }

    #[test]
    fn host_memory_shares_of_a_24_gib_host_fit_it() {
        let (key_cache, synthesis) = host_memory_shares(24 * GIB);
        assert_eq!(host_memory_reserve(24 * GIB), MIN_HOST_RESERVE_BYTES);
        assert_eq!((key_cache, synthesis), (8 * GIB, 12 * GIB));
        assert_fits(24 * GIB);
    }

    #[test]
    fn host_memory_shares_of_a_1_tib_host_fit_it() {
        let (key_cache, synthesis) = host_memory_shares(1024 * GIB);
        assert_eq!(host_memory_reserve(1024 * GIB), 128 * GIB);
        assert_eq!((key_cache, synthesis), (384 * GIB, 512 * GIB));
        assert_fits(1024 * GIB);
    }

    #[test]
    fn host_memory_shares_fit_every_host_and_grow_with_it() {
        // Small hosts too, where the reserve is most of the memory, and odd byte counts.
        let mut hosts: Vec<u64> = vec![0, 1, 4095, GIB, 4 * GIB, 6 * GIB, 8 * GIB, 8 * GIB + 1, u64::MAX];
        hosts.extend((1..=4096).map(|gib| gib * GIB + 12345));
        hosts.sort_unstable();
        let mut last = (0, 0);
        for host in hosts {
            assert_fits(host);
            let shares = host_memory_shares(host);
            if host >= 8 * GIB {
                assert_eq!(shares.1, host / 2, "host {host}: synthesis keeps half the host");
            }
            assert!(shares.0 >= last.0 && shares.1 >= last.1, "host {host}: {shares:?} below {last:?}");
            last = shares;
        }
        assert_eq!(host_memory_shares(0), (0, 0));
        assert_eq!(host_memory_shares(6 * GIB), (0, 2 * GIB));
    }

    #[test]
    fn an_unreadable_host_gets_the_old_synthesis_fallback() {
        assert_eq!(host_memory_shares(ASSUMED_HOST_BYTES), (12 * GIB, 16 * GIB));
    }

    #[test]
    fn mem_total_is_read_from_meminfo() {
        let meminfo = "MemTotal:       131072000 kB\nMemFree:         1024 kB\nMemAvailable:   2048 kB\n";
        assert_eq!(mem_total_bytes(meminfo), Some(131_072_000 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1024 kB\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: lots\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: 0 kB\n"), None);
    }

    #[test]
    fn the_default_config_fits_this_machine() {
        let config = ProverConfig::default();
        config.validate().unwrap();
        let host = host_memory_bytes().unwrap_or(ASSUMED_HOST_BYTES);
        assert_eq!((config.key_cache_host_bytes, config.synthesis_host_bytes), host_memory_shares(host));
        assert!(config.key_cache_host_bytes + config.synthesis_host_bytes <= host - host_memory_reserve(host));
    }

    fn with_budgets(key_cache_host_bytes: u64, synthesis_host_bytes: u64) -> ProverConfig {
        ProverConfig { key_cache_host_bytes, synthesis_host_bytes, ..ProverConfig::default() }
    }

    #[test]
    fn both_budgets_set_over_the_host_are_refused() {
        let host = 125 * GIB;
        // The old default key cache beside a synthesis budget set by hand.
        let err = with_budgets(128 * GIB, 60 * GIB).validate_for_host(Some(host)).unwrap_err();
        match err {
            Error::HostMemoryOvercommitted { key_cache_bytes, synthesis_bytes, host_bytes } => {
                assert_eq!((key_cache_bytes, synthesis_bytes, host_bytes), (128 * GIB, 60 * GIB, host));
            }
            other => panic!("expected HostMemoryOvercommitted, got {other:?}"),
        }
        let message = with_budgets(100 * GIB, 100 * GIB).validate_for_host(Some(host)).unwrap_err().to_string();
        assert!(message.contains("key_cache_host_bytes") && message.contains("synthesis_host_bytes"), "{message}");
        assert!(message.contains("lower"), "{message}");
        // No overflow on absurd values.
        let err = with_budgets(u64::MAX, u64::MAX).validate_for_host(Some(host)).unwrap_err();
        assert!(matches!(err, Error::HostMemoryOvercommitted { .. }), "{err:?}");
    }

    #[test]
    fn both_budgets_set_within_the_host_are_accepted() {
        // The twin of the refusal: the same host, explicit values that fit it (to the byte).
        let host = 125 * GIB;
        with_budgets(60 * GIB, 60 * GIB).validate_for_host(Some(host)).unwrap();
        with_budgets(65 * GIB, 60 * GIB).validate_for_host(Some(host)).unwrap();
        assert!(with_budgets(65 * GIB + 1, 60 * GIB).validate_for_host(Some(host)).is_err());
    }

    #[test]
    fn one_budget_set_over_the_host_beside_the_others_default_is_allowed() {
        // The key cache tests' "never evict" (1 TiB) on a 24 GiB CI machine, synthesis default.
        let host = 24 * GIB;
        let (_, default_synthesis) = host_memory_shares(host);
        with_budgets(1 << 40, default_synthesis).validate_for_host(Some(host)).unwrap();
        let (default_key_cache, _) = host_memory_shares(host);
        with_budgets(default_key_cache, 1 << 40).validate_for_host(Some(host)).unwrap();
    }

    #[test]
    fn an_unknown_host_is_not_checked() {
        with_budgets(1 << 40, 1 << 40).validate_for_host(None).unwrap();
    }

    #[test]
    fn in_flight_and_workers_are_still_checked() {
        let config = ProverConfig { in_flight: 0, ..ProverConfig::default() };
        assert!(matches!(config.validate_for_host(None), Err(Error::Config(_))));
        let config = ProverConfig { workers_per_device: 0, ..ProverConfig::default() };
        assert!(matches!(config.validate_for_host(Some(24 * GIB)), Err(Error::Config(_))));
    }

    #[test]
    fn a_prover_is_not_started_from_budgets_over_this_host() {
        let Some(host) = host_memory_bytes() else { return };
        let config = ProverConfig { backend: BackendKind::Cpu, ..with_budgets(host, host) };
        match Prover::new(config) {
            Err(Error::HostMemoryOvercommitted { host_bytes, .. }) => assert_eq!(host_bytes, host),
            Err(other) => panic!("expected HostMemoryOvercommitted, got {other:?}"),
            Ok(_) => panic!("a prover started with twice the host's memory in its budgets"),
        }
    }
}
