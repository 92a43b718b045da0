//! One device's pipeline: its device, budget, pinned pool, streams, resident keys and the
//! addresses of its stage actors.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use actix::{Message, Recipient};
use parking_lot::Mutex;

use super::budget::{Grant, MemoryBudget, PendingGrant};
use super::job::PartitionJob;
use crate::backend::faults::FaultInjector;
use crate::backend::{
    AdmissionLine, Device, DeviceBuffer, DeviceStream, FailureSlot, ResidentMatrices, Seniority, StageEvent, WorkTag,
};
use crate::circuit::ConstraintMatrices;
use crate::circuit::WitnessShape;
use crate::error::{Error, Result};
use crate::memory::{HostPinTable, PinLease, PinnedPool, PinnedRegistry};
use crate::params::ProvingKey;
use crate::plan::{partition_plan_bytes, plan_key, KeyPlan, KeyVector, StagingMode};
use crate::stage::Stage;
use crate::timeline::TimelineRecorder;

/// Passes a partition to the next stage's actor.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Advance(pub Box<PartitionJob>);

/// The budget rank of a preload: below every partition's (`1 + priority`), so that a preload
/// never stands at the head of the queue in front of a partition that needs its memory.
pub const PRELOAD_RANK: u8 = 0;

/// A proving key held on a device, shared by every partition that uses it.
///
/// It holds its key strongly: the key is compared by `Arc::ptr_eq` with a reference that
/// keeps it alive (so no other key can ever take its address), and the leases in `pins` own
/// the host vectors they page-lock. Residency ends by eviction (least recently used under the
/// budget, explicit, or once nobody outside the devices holds the key: see
/// `Prover::release_unheld_keys`), never because the caller dropped its handle.
pub struct ResidentKey {
    key: Arc<ProvingKey>,
    /// Its vectors on the device, indexed by `KeyVector as usize`: those the plan keeps
    /// resident; the others stream through each partition's chunk buffers.
    vectors: [Option<DeviceBuffer>; 5],
    /// How the key is held here: which vectors are resident, the chunks the others stream
    /// in, and how many partitions of the key fit beside it (see `plan::residency`).
    pub plan: KeyPlan,
    /// Set once the copies are queued; partitions wait for it.
    pub uploaded: OnceLock<StageEvent>,
    upload_started: AtomicBool,
    /// A failed upload fails every partition that used the key, and evicts it.
    pub failure: FailureSlot,
    /// Whose work queued the upload (None: a preload).
    uploader: OnceLock<Option<Uploader>>,
    pub pins: Mutex<Vec<PinLease>>,
    last_used: Mutex<Instant>,
    /// The key's constraint matrices on this device, once a partition evaluated on the device
    /// needed them; they go with the key.
    matrices: Mutex<Option<Arc<DeviceMatrices>>>,
    _grant: Grant,
}

impl ResidentKey {
    /// The device copy of `vector`, if it is resident.
    pub fn vector(&self, vector: KeyVector) -> Option<&DeviceBuffer> {
        self.vectors[vector as usize].as_ref()
    }

    /// Device bytes the key holds, its constraint matrices included.
    pub fn bytes(&self) -> u64 {
        self._grant.bytes() + self.matrices.lock().as_ref().map_or(0, |m| m.bytes())
    }

    /// The key's matrices on this device if they are `matrices` and their upload has not
    /// failed (failed ones are dropped, so that the next partition uploads them afresh).
    pub fn matrices_for(&self, matrices: &Arc<ConstraintMatrices>) -> Option<Arc<DeviceMatrices>> {
        let mut held = self.matrices.lock();
        if held.as_ref().is_some_and(|m| m.failure.is_failed()) {
            *held = None;
        }
        held.as_ref().filter(|m| Arc::ptr_eq(&m.source, matrices)).cloned()
    }

    /// Holds `matrices` on this device beside the key, in memory granted by `grant` (their
    /// buffer is allocated when the htod stage uploads them). Matrices of another recording
    /// held before are replaced; the same ones, already held, are kept and the grant goes back.
    pub fn attach_matrices(&self, matrices: Arc<ConstraintMatrices>, grant: Grant) -> Arc<DeviceMatrices> {
        if let Some(held) = self.matrices_for(&matrices) {
            return held;
        }
        let attached = Arc::new(DeviceMatrices {
            source: matrices,
            resident: Mutex::new(None),
            failure: FailureSlot::new(),
            uploader: OnceLock::new(),
            _grant: grant,
        });
        *self.matrices.lock() = Some(attached.clone());
        attached
    }
    pub fn is_key(&self, key: &Arc<ProvingKey>) -> bool {
        Arc::ptr_eq(&self.key, key)
    }
    /// Queues the key's copies on `stream` the first time it is called; later calls do
    /// nothing, as the stream orders them after the copies. A failed enqueue marks the key
    /// failed, so it is dropped from the cache and uploaded afresh for the next partition.
    /// The copies are drawn under, and ranked as, the partition whose staging queues them.
    pub fn upload_once(
        &self,
        key: &ProvingKey,
        stream: &Arc<dyn DeviceStream>,
        uploader: Option<Uploader>,
        seniority: Seniority,
    ) -> Result<()> {
        if self.upload_started.swap(true, Ordering::SeqCst) {
            // The upload is queued (or its queueing failed, and this key is no use).
            return self.check_for(uploader.map(|u| u.partition_id));
        }
        let _ = self.uploader.set(uploader);
        // The copies' failures name the uploader's partition (its index in its request).
        let index = uploader.map_or(usize::MAX, |u| u.index);
        let drawn_as = uploader.map_or(usize::MAX, |u| u.partition_id);
        let tag = WorkTag::new(index, Stage::Htod, &self.failure)
            .drawn_as(drawn_as)
            .ranked(seniority)
            .with("partition", drawn_as)
            .with("what", "proving key")
            .with("vectors", self.plan.resident.names().join(","))
            .with("bytes", self.plan.resident_bytes(&key.vectors()));
        let queued = (|| -> Result<()> {
            let resident = KeyVector::ALL.into_iter().zip(&self.vectors);
            for (vector, target) in resident.filter_map(|(v, buffer)| Some((v, buffer.as_ref()?))) {
                match vector {
                    KeyVector::H => stream.copy_g1_to_device(key.h.clone(), 0..key.h.len(), target, &tag)?,
                    KeyVector::L => stream.copy_g1_to_device(key.l.clone(), 0..key.l.len(), target, &tag)?,
                    KeyVector::A => stream.copy_g1_to_device(key.a.clone(), 0..key.a.len(), target, &tag)?,
                    KeyVector::BG1 => stream.copy_g1_to_device(key.b_g1.clone(), 0..key.b_g1.len(), target, &tag)?,
                    KeyVector::BG2 => stream.copy_g2_to_device(key.b_g2.clone(), 0..key.b_g2.len(), target, &tag)?,
                }
            }
            let _ = self.uploaded.set(stream.record_event()?);
            Ok(())
        })();
        if let Err(err) = &queued {
            self.failure.fail(err.clone());
        }
        queued
    }
}

/// A key's constraint matrices on one device ([`ResidentKey::attach_matrices`]): uploaded by
/// the first partition evaluated on the device, then read by every later one's evaluation.
pub struct DeviceMatrices {
    source: Arc<ConstraintMatrices>,
    /// Set once their upload is queued on the device's copy-in stream: every partition's own
    /// uploads, and so its evaluation, are ordered after it.
    resident: Mutex<Option<ResidentMatrices>>,
    /// A failed upload fails every partition that evaluated with them (see `check_for`).
    pub failure: FailureSlot,
    uploader: OnceLock<Uploader>,
    _grant: Grant,
}

impl DeviceMatrices {
    /// Device bytes granted for them.
    pub fn bytes(&self) -> u64 {
        self._grant.bytes()
    }

    /// The matrices on the device: allocated and queued for upload on `stream` (the device's
    /// copy-in stream) the first time, by `uploader`'s staging; the same buffer afterwards.
    pub fn upload_once(
        &self,
        device: &dyn Device,
        stream: &Arc<dyn DeviceStream>,
        uploader: Uploader,
        seniority: Seniority,
    ) -> Result<ResidentMatrices> {
        let mut resident = self.resident.lock();
        if let Some(resident) = &*resident {
            self.check_for(Some(uploader.partition_id))?;
            return Ok(resident.clone());
        }
        self.check_for(Some(uploader.partition_id))?;
        let _ = self.uploader.set(uploader);
        let tag = WorkTag::new(uploader.index, Stage::Htod, &self.failure)
            .drawn_as(uploader.partition_id)
            .ranked(seniority)
            .with("partition", uploader.partition_id)
            .with("what", "constraint matrices")
            .with("bytes", self.bytes());
        match ResidentMatrices::upload(device, stream.as_ref(), self.source.clone(), &tag) {
            Ok(uploaded) => {
                *resident = Some(uploaded.clone());
                Ok(uploaded)
            }
            Err(err) => {
                self.failure.fail(err.clone());
                Err(err)
            }
        }
    }

    /// The matrices on the device, once their upload is queued.
    pub fn uploaded(&self) -> Option<ResidentMatrices> {
        self.resident.lock().clone()
    }

    /// Whether the matrices are usable by partition `partition_id`: a failed upload is its
    /// uploader's own failure, and [`Error::SharedKeyFailed`] (sent round again without
    /// spending an attempt) to any other partition.
    pub fn check_for(&self, partition_id: Option<usize>) -> Result<()> {
        let Some(cause) = self.failure.failure() else { return Ok(()) };
        match self.uploader.get() {
            Some(u) if Some(u.partition_id) == partition_id => Err(cause),
            Some(u) => Err(Error::SharedKeyFailed {
                queued_by: format!("partition {} of request {} (the key's constraint matrices)", u.index, u.request),
                cause: Box::new(cause),
            }),
            None => Err(cause),
        }
    }
}

/// The partition whose work queued a key's upload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Uploader {
    pub request: u64,
    /// The partition's index in its request.
    pub index: usize,
    /// The prover-wide partition id.
    pub partition_id: usize,
}

impl ResidentKey {
    /// Whether the key is usable by the partition `partition_id` (None: not a partition). A
    /// failed upload is the uploader's own failure; to any other partition it is
    /// [`Error::SharedKeyFailed`], which names the uploader and sends the partition round
    /// again without spending an attempt.
    pub fn check_for(&self, partition_id: Option<usize>) -> Result<()> {
        let Some(cause) = self.failure.failure() else { return Ok(()) };
        let uploader = self.uploader.get().copied().flatten();
        if uploader.is_some_and(|u| Some(u.partition_id) == partition_id) {
            return Err(cause);
        }
        Err(Error::SharedKeyFailed {
            queued_by: match uploader {
                Some(u) => format!("partition {} of request {}", u.index, u.request),
                None => "a preload".into(),
            },
            cause: Box::new(cause),
        })
    }
}

/// Everything one device needs to prove.
pub struct DevicePipeline {
    pub ordinal: usize,
    pub device: Arc<dyn Device>,
    pub budget: MemoryBudget,
    /// The prover-wide host-memory budget the synthesis stage takes witnesses' memory from.
    pub host_budget: MemoryBudget,
    pub pool: PinnedPool,
    pub copy_in: Arc<dyn DeviceStream>,
    /// Per worker, the stream its partitions' results come back on. One per worker, not per
    /// device: a copy waits for its partition's MSMs, and on a shared stream a partition that
    /// finished early waited behind an older one still running on the other worker.
    pub copy_out: Vec<Arc<dyn DeviceStream>>,
    pub compute: Vec<Arc<dyn DeviceStream>>,
    /// Per worker, the copy stream a streamed key's chunks go up on (so they overlap the
    /// worker's MSMs without holding up other partitions' uploads).
    pub key_in: Vec<Arc<dyn DeviceStream>>,
    pub timeline: TimelineRecorder,
    /// Panics injected into this device's actors (disabled unless faults target this device).
    pub faults: Arc<FaultInjector>,
    keys: Mutex<Vec<Arc<ResidentKey>>>,
    /// The stage actors' addresses, in the order of `Stage::ALL`.
    stages: OnceLock<Vec<Recipient<Advance>>>,
    in_flight: Arc<AtomicUsize>,
    /// Partitions this device takes at once (the pinned pool is sized for them).
    max_in_flight: usize,
    /// How partitions' large host vectors are page-locked.
    pub staging: StagingMode,
    next_worker: AtomicUsize,
    /// The partitions admitted and in flight, oldest first (its work runs ahead on a GPU).
    pub line: AdmissionLine,
    /// Partitions that failed on this device in a row (a device that keeps failing is avoided).
    consecutive_failures: AtomicUsize,
    /// How long a stage waits for device work before it calls the device hung.
    pub stage_timeout: Duration,
    /// Whether the device takes partitions (see [`DeviceHealth`]).
    health: Mutex<DeviceHealth>,
    /// What partitions held when their work never completed (a hung device): kept until the
    /// device is recovered, since the work may still read it until its context is gone.
    stranded: Mutex<Vec<Box<dyn Send>>>,
    /// Times the device was recovered.
    recoveries: AtomicUsize,
}

/// Whether a device takes partitions.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum DeviceHealth {
    /// It takes partitions.
    Healthy,
    /// Its context broke (a sticky error or a hung kernel): it takes nothing until it is
    /// drained and recovered.
    Broken { cause: String },
    /// Recovering it failed: it takes nothing for the rest of the prover's life.
    OutOfService { cause: String },
}

impl DevicePipeline {
    /// Builds the pipeline of `device` and starts its actors; call on the actor system.
    /// `host_pins` is the process-wide table of page-locked host ranges, shared by every
    /// device's pipeline.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        device: Arc<dyn Device>,
        host_pins: Arc<HostPinTable>,
        staging: StagingMode,
        budget_bytes: u64,
        host_budget: MemoryBudget,
        workers: usize,
        in_flight: usize,
        stage_timeout: Duration,
        timeline: TimelineRecorder,
        faults: Arc<FaultInjector>,
    ) -> Result<Arc<DevicePipeline>> {
        let ordinal = device.info().ordinal;
        let workers = workers.max(1);
        let copy_in = device.new_stream("htod", timeline.clone())?;
        let copy_out = (0..workers)
            .map(|w| device.new_stream(&format!("dtoh{w}"), timeline.clone()))
            .collect::<Result<Vec<_>>>()?;
        let compute = (0..workers)
            .map(|w| device.new_stream(&format!("compute{w}"), timeline.clone()))
            .collect::<Result<Vec<_>>>()?;
        let key_in = (0..workers)
            .map(|w| device.new_stream(&format!("key{w}"), timeline.clone()))
            .collect::<Result<Vec<_>>>()?;
        let registry = PinnedRegistry::sharing(device.clone(), host_pins);
        let pipeline = Arc::new(DevicePipeline {
            ordinal,
            budget: MemoryBudget::start(ordinal, budget_bytes),
            host_budget,
            pool: PinnedPool::new(registry, 6 * in_flight.max(1)),
            device,
            copy_in,
            copy_out,
            compute,
            key_in,
            timeline,
            faults,
            keys: Mutex::new(Vec::new()),
            stages: OnceLock::new(),
            in_flight: Arc::new(AtomicUsize::new(0)),
            max_in_flight: in_flight.max(1),
            staging,
            next_worker: AtomicUsize::new(0),
            line: AdmissionLine::default(),
            consecutive_failures: AtomicUsize::new(0),
            stage_timeout,
            health: Mutex::new(DeviceHealth::Healthy),
            stranded: Mutex::new(Vec::new()),
            recoveries: AtomicUsize::new(0),
        });
        let _ = pipeline.stages.set(super::start_stage_actors(ordinal, workers, in_flight.max(1)));
        Ok(pipeline)
    }

    pub fn workers(&self) -> usize {
        self.compute.len()
    }

    /// The most partitions in flight on this device at once.
    pub fn max_in_flight(&self) -> usize {
        self.max_in_flight
    }

    /// Picks the compute stream (worker) for the next partition, round robin.
    pub fn next_worker(&self) -> usize {
        self.next_worker.fetch_add(1, Ordering::SeqCst) % self.compute.len()
    }

    /// Partitions admitted to this device and not yet finished.
    pub fn load(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The count behind [`DevicePipeline::load`], for a partition's in-flight token.
    pub fn load_counter(&self) -> Arc<AtomicUsize> {
        self.in_flight.clone()
    }

    /// Hands a new partition to the actor of this device's first stage.
    pub fn admit(&self, job: Box<PartitionJob>) {
        self.send_to(Stage::ALL[0], job);
    }

    /// Sends a job to the actor of `stage` on this device.
    pub fn send_to(&self, stage: Stage, job: Box<PartitionJob>) {
        let stages = self.stages.get().expect("set in start, before any job exists");
        stages[stage.index()].do_send(Advance(job));
    }

    /// The key if it is resident here (and still valid).
    pub fn resident_key(&self, key: &Arc<ProvingKey>) -> Option<Arc<ResidentKey>> {
        let mut keys = self.keys.lock();
        keys.retain(|k| !k.failure.is_failed());
        let found = keys.iter().find(|k| k.is_key(key)).cloned();
        if let Some(k) = &found {
            *k.last_used.lock() = Instant::now();
        }
        found
    }

    /// The keys resident here (a handle on each, for the prover's bookkeeping).
    pub fn resident_proving_keys(&self) -> Vec<Arc<ProvingKey>> {
        self.keys.lock().iter().map(|k| k.key.clone()).collect()
    }

    /// Whether `key` is resident on this device.
    pub fn holds_key(&self, key: &Arc<ProvingKey>) -> bool {
        self.keys.lock().iter().any(|k| k.is_key(key) && !k.failure.is_failed())
    }

    /// Evicts idle keys, least recently used first, until `needed` more bytes could be granted.
    pub fn evict_idle_keys_for(&self, needed: u64) {
        let mut keys = self.keys.lock();
        keys.sort_by_key(|k| *k.last_used.lock());
        let mut free = self.budget.capacity_bytes().saturating_sub(self.budget.in_use_bytes());
        while free < needed {
            let Some(i) = keys.iter().position(|k| Arc::strong_count(k) == 1) else { break };
            let evicted = keys.remove(i);
            free += evicted.bytes();
            tracing::info!(device = self.ordinal, bytes = evicted.bytes(), "evicting an idle proving key");
        }
    }

    /// Records how a partition on this device ended.
    pub fn record_outcome(&self, device_failure: bool) {
        if device_failure {
            self.consecutive_failures.fetch_add(1, Ordering::SeqCst);
        } else {
            self.consecutive_failures.store(0, Ordering::SeqCst);
        }
    }

    /// Whether the device has failed too many partitions in a row to be given more while
    /// another device can take them (a quarantine, lifted by a probe that proves).
    pub fn is_failing(&self) -> bool {
        self.consecutive_failures.load(Ordering::SeqCst) >= 3
    }

    /// Keeps the quarantine: a probe proof on the device failed or came out wrong.
    pub fn record_probe_failed(&self) {
        self.consecutive_failures.fetch_max(3, Ordering::SeqCst);
    }

    /// Lifts the quarantine: a probe proof on the device came out right.
    pub fn record_probe_passed(&self) {
        self.consecutive_failures.store(0, Ordering::SeqCst);
    }

    pub fn health(&self) -> DeviceHealth {
        self.health.lock().clone()
    }

    /// Whether the scheduler may place partitions here.
    pub fn takes_work(&self) -> bool {
        *self.health.lock() == DeviceHealth::Healthy
    }

    pub fn is_broken(&self) -> bool {
        matches!(*self.health.lock(), DeviceHealth::Broken { .. })
    }

    /// Takes the device out of service until it is recovered: `cause` broke its context.
    pub fn mark_broken(&self, cause: &Error) {
        let mut health = self.health.lock();
        if *health == DeviceHealth::Healthy {
            tracing::error!(device = self.ordinal, %cause, "the device is broken: draining it to recover it");
            *health = DeviceHealth::Broken { cause: cause.to_string() };
        }
    }

    /// Times the device was recovered.
    pub fn recoveries(&self) -> usize {
        self.recoveries.load(Ordering::SeqCst)
    }

    /// Keeps what a partition held until the device is recovered (its work hangs).
    pub fn strand(&self, held: Box<dyn Send>) {
        self.stranded.lock().push(held);
    }

    /// Recovers a broken device once no partition is in flight on it: drops its resident keys,
    /// pooled staging and what hung work held, re-creates its context, and uploads again the
    /// keys someone still holds. Returns whether it recovered (false: not broken, or still
    /// busy). A device whose recovery fails goes out of service.
    pub fn recover_when_idle(&self) -> bool {
        if !self.is_broken() || self.load() > 0 {
            return false;
        }
        let keys = self.resident_proving_keys();
        self.evict_key(None);
        self.pool.clear();
        self.stranded.lock().clear();
        if let Err(err) = self.device.recover() {
            tracing::error!(device = self.ordinal, %err, "recovering the device failed: it stays out of service");
            *self.health.lock() = DeviceHealth::OutOfService { cause: err.to_string() };
            return false;
        }
        self.consecutive_failures.store(0, Ordering::SeqCst);
        self.recoveries.fetch_add(1, Ordering::SeqCst);
        *self.health.lock() = DeviceHealth::Healthy;
        tracing::info!(device = self.ordinal, "the device is recovered");
        // Keys nobody else holds any more are not worth the upload.
        for key in keys.into_iter().filter(|key| Arc::strong_count(key) > 1) {
            if let Err(err) = self.preload(&key) {
                tracing::warn!(device = self.ordinal, %err, "uploading a key again after recovery failed");
            }
        }
        true
    }

    /// Page-locks the key's host vectors once for this resident key.
    pub fn pin_key_host(&self, resident: &ResidentKey, key: &ProvingKey) -> Result<()> {
        let mut pins = resident.pins.lock();
        if !pins.is_empty() {
            return Ok(());
        }
        *pins = self.pin_key_ranges(key)?;
        Ok(())
    }

    /// Leases on the key's five host vectors: all five or none, since a partial set would
    /// leave the key half pinned. Pinning a range already pinned only counts a user. Each
    /// lease owns its vector, so the key's memory stays allocated while it is page-locked,
    /// whoever else lets go of the key.
    pub fn pin_key_ranges(&self, key: &ProvingKey) -> Result<Vec<PinLease>> {
        pin_key_vectors(self.pool.registry(), key)
    }

    /// How `key` is held on this device for partitions of `shape` over a domain of
    /// `2^log_n` (see [`plan_key`]): room beside its resident vectors for as many of its
    /// partitions at once as the device has workers, or fewer, down to one. No plan at all
    /// fails with [`Error::PlanExceedsDevice`], naming the bytes the smallest one needs.
    pub fn key_plan(&self, key: &ProvingKey, shape: &WitnessShape, log_n: u32) -> Result<(KeyPlan, u64)> {
        let partition = partition_plan_bytes(self.device.as_ref(), shape, log_n);
        let plan = plan_key(self.budget.capacity_bytes(), &key.vectors(), partition, self.workers()).map_err(|no| {
            Error::PlanExceedsDevice {
                device: self.ordinal,
                needed_bytes: no.needed_bytes,
                capacity_bytes: no.capacity_bytes,
            }
        })?;
        Ok((plan, partition))
    }

    /// Waits for `pending`, a request for memory on this device's budget. While it waits, idle
    /// keys are evicted whenever `needed` bytes are not free (a key whose last partition ended
    /// after the wait began would otherwise hold the room for ever). Every stage timeout it
    /// logs what it waits for and what holds the memory (the watchdog). Gives up, withdrawing
    /// the request, once `give_up` says so; `None` then, or when the budget is gone.
    pub fn wait_for_grant(
        &self,
        pending: PendingGrant,
        needed: u64,
        what: &str,
        mut give_up: impl FnMut() -> bool,
    ) -> Option<Grant> {
        let started = Instant::now();
        let mut next_report = self.stage_timeout;
        pending.wait_unless(|| {
            self.evict_idle_keys_for(needed);
            let waited = started.elapsed();
            if waited >= next_report {
                next_report += self.stage_timeout;
                self.report_memory_wait(what, needed, waited);
            }
            give_up()
        })
    }

    /// The watchdog's line: what waits, for how long, and who holds this device's memory.
    fn report_memory_wait(&self, what: &str, needed: u64, waited: Duration) {
        let holders: Vec<String> = self
            .keys
            .lock()
            .iter()
            .map(|k| {
                format!(
                    "key of {} bytes ({:?} resident), used by {} partitions",
                    k.bytes(),
                    k.plan.resident,
                    Arc::strong_count(k) - 1
                )
            })
            .collect();
        tracing::warn!(
            device = self.ordinal,
            what,
            needed_bytes = needed,
            waited_s = waited.as_secs_f64(),
            in_use_bytes = self.budget.in_use_bytes(),
            capacity_bytes = self.budget.capacity_bytes(),
            partitions_in_flight = self.load(),
            keys = ?holders,
            "waiting for device memory longer than the stage timeout"
        );
    }

    /// Makes `key` resident now, as far as its plan keeps it, and waits for its upload (an
    /// explicit preload). A key that the plan streams whole is left on the host. The preload
    /// waits behind every partition waiting for memory (it asks at the lowest rank), evicting
    /// idle keys; after the stage timeout it gives up with [`Error::PreloadWaited`], and the
    /// key's first partition makes it resident instead.
    pub fn preload(&self, key: &Arc<ProvingKey>) -> Result<()> {
        if self.holds_key(key) {
            return Ok(());
        }
        let (shape, log_n) = key.planning_shape();
        let (plan, _) = self.key_plan(key, &shape, log_n)?;
        if plan.resident.is_empty() {
            tracing::info!(device = self.ordinal, "the key streams whole on this device: nothing to preload");
            return Ok(());
        }
        let bytes = plan.resident_bytes(&key.vectors());
        let started = Instant::now();
        let pending = self.budget.request_ranked(bytes, PRELOAD_RANK)?;
        let grant = self
            .wait_for_grant(pending, bytes, "a preload", || started.elapsed() >= self.stage_timeout)
            .ok_or_else(|| match started.elapsed() >= self.stage_timeout {
                true => Error::PreloadWaited {
                    device: self.ordinal,
                    needed_bytes: bytes,
                    in_use_bytes: self.budget.in_use_bytes(),
                    waited_ms: started.elapsed().as_millis() as u64,
                },
                false => Error::ShutDown,
            })?;
        let resident = self.make_resident(key, plan, grant)?;
        self.pin_key_host(&resident, key)?;
        resident.upload_once(key, &self.copy_in, None, Seniority::default())?;
        if let Some(uploaded) = resident.uploaded.get() {
            if !uploaded.wait_within(self.stage_timeout)? {
                let err = Error::DeviceHang {
                    device: self.ordinal,
                    stage: Stage::Htod,
                    waited_ms: self.stage_timeout.as_millis() as u64,
                };
                self.mark_broken(&err);
                return Err(err);
            }
        }
        resident.check_for(None)
    }

    /// Pins staging buffers for `in_flight` partitions of `key`'s shape ahead of the first
    /// partition (see [`PinnedPool::warm`]); returns the bytes newly pinned.
    pub fn warm_staging(&self, key: &ProvingKey) -> Result<u64> {
        let lengths = key.staging_lengths();
        let pooled = match self.staging {
            StagingMode::Copy => &lengths[..],
            // The large vectors are page-locked where they are: only the inputs are pooled.
            StagingMode::InPlace => &lengths[4..],
        };
        let all: Vec<usize> = (0..self.max_in_flight).flat_map(|_| pooled.iter().copied()).collect();
        self.pool.warm(&all)
    }

    /// Drops `key` (or every key) from this device's residents; returns how many went.
    /// Partitions still using it keep it alive until they finish.
    pub fn evict_key(&self, key: Option<&Arc<ProvingKey>>) -> usize {
        let mut keys = self.keys.lock();
        let before = keys.len();
        keys.retain(|k| key.is_some_and(|key| !k.is_key(key)));
        before - keys.len()
    }

    /// Makes `key` resident as `plan` keeps it: allocates the resident vectors' buffers under
    /// `grant`; the htod actor queues the copies. A key is resident once per device: when a
    /// preload and a partition's admission race to make it resident, the second finds the
    /// first's and gives its grant back.
    pub fn make_resident(&self, key: &Arc<ProvingKey>, plan: KeyPlan, grant: Grant) -> Result<Arc<ResidentKey>> {
        if let Some(existing) = self.resident_key(key) {
            return Ok(existing);
        }
        let sizes = key.vectors();
        let mut vectors: [Option<DeviceBuffer>; 5] = Default::default();
        for vector in plan.resident.iter() {
            vectors[vector as usize] = Some(self.device.allocate(sizes.bytes(vector))?);
        }
        let resident = Arc::new(ResidentKey {
            key: key.clone(),
            vectors,
            plan,
            uploaded: OnceLock::new(),
            upload_started: AtomicBool::new(false),
            failure: FailureSlot::new(),
            uploader: OnceLock::new(),
            pins: Mutex::new(Vec::new()),
            last_used: Mutex::new(Instant::now()),
            matrices: Mutex::new(None),
            _grant: grant,
        });
        let mut keys = self.keys.lock();
        if let Some(existing) = keys.iter().find(|k| k.is_key(key) && !k.failure.is_failed()) {
            // Made resident while this one allocated: its buffers and grant go back.
            return Ok(existing.clone());
        }
        keys.push(resident.clone());
        Ok(resident)
    }

    /// The resident keys' plans, for status: which vectors each keeps on the device.
    pub fn key_plans(&self) -> Vec<(Arc<ProvingKey>, KeyPlan)> {
        self.keys.lock().iter().map(|k| (k.key.clone(), k.plan)).collect()
    }

    /// Resident keys: how many and how many bytes.
    pub fn residency(&self) -> (usize, u64) {
        let keys = self.keys.lock();
        (keys.len(), keys.iter().map(|k| k.bytes()).sum())
    }

    /// Bytes still pinned that no idle pool buffer or resident key explains (a leak check).
    pub fn pinned_leaked_bytes(&self) -> u64 {
        let key_pins: u64 = self
            .keys
            .lock()
            .iter()
            .flat_map(|k| k.pins.lock().iter().map(|p| p.range().len as u64).collect::<Vec<_>>())
            .sum();
        self.pool.registry().pinned_bytes().saturating_sub(self.pool.idle_bytes() + key_pins)
    }
}

/// Leases on `key`'s five host vectors through `registry` (see
/// [`DevicePipeline::pin_key_ranges`]); each lease owns its vector.
pub fn pin_key_vectors(registry: &Arc<PinnedRegistry>, key: &ProvingKey) -> Result<Vec<PinLease>> {
    let mut leases = Vec::with_capacity(5);
    for g1 in [&key.h, &key.l, &key.a, &key.b_g1] {
        if !g1.is_empty() {
            leases.push(registry.pin_owned(g1.clone())?);
        }
    }
    if !key.b_g2.is_empty() {
        leases.push(registry.pin_owned(key.b_g2.clone())?);
    }
    Ok(leases)
}

impl Drop for DevicePipeline {
    fn drop(&mut self) {
        self.keys.lock().clear();
        self.pool.clear();
    }
}
