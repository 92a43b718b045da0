//! The prover a node embeds: built from a config, it runs the actor pipelines of its devices
//! on its own threads and takes proof requests from any thread or async runtime.

mod config;
mod health;
mod keys;
mod request;
pub mod scheduler;
mod status;

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

pub use config::{
    default_stage_timeout, host_memory_bytes, host_memory_reserve, host_memory_shares, FaultInjection, ProverConfig,
    ASSUMED_HOST_BYTES, MIN_HOST_RESERVE_BYTES,
};
pub use keys::matrices_path;
use request::{check_request_shape, check_witness_lengths};
pub use request::{CircuitBatch, CircuitRequest, KeyFor, ProofRequest};
pub use status::{DeviceStatus, Held, KeyResidency, Shutdown, ShutdownReport};

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
}
