//! Fault injection: a wrapper around any device that makes its operations fail at a seeded
//! rate, and panics injected into actors' handlers, so every failure path runs in tests.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use blstrs::{G1Affine, G2Affine};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::event::HostCompletion;
use super::{
    Device, DeviceBuffer, DeviceInfo, DeviceStream, Group, HostConstraints, HostRange, HostScalars, MsmSlot,
    PendingResults, PendingScalars, PinOutcome, ResidentMatrices, StageEvent, WorkTag,
};
use crate::circuit::{ConstraintMatrices, PackedDensity};
use crate::error::{Error, Result};
use crate::stage::Stage;
use crate::timeline::TimelineRecorder;

/// Where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum FaultSite {
    Allocation,
    Pin,
    PinAlreadyRegistered,
    CopyToDevice,
    CopyToHost,
    KernelLaunch,
    KernelCompletion,
    ActorPanic,
    /// Recording an event fails (armed only).
    EventRecord,
    /// A kernel launches and never completes: its stream stops until the device is recovered
    /// (armed only).
    Hang,
    /// A kernel leaves the device's context unusable (an illegal address, a trap): every later
    /// operation on the device fails until it is recovered (armed only).
    Sticky,
    /// A panic in a stage actor outside the stage's own logic (armed only).
    PanicOutsideStage,
    /// A job dropped without an outcome (`FaultInjection::lose_jobs_at`).
    LostJob,
    /// A copy to the device stalls: its stream waits, as behind a slow transfer still in
    /// flight, until [`FaultInjector::release_stalled_copies`] (armed only). What a failed
    /// partition queued must drain before its memory is released, and this keeps some queued.
    StalledCopy,
    /// MSM results that come back wrong (`FaultInjection::wrong_results`).
    WrongResult,
}

/// The sites the seeded rate rolls at; the others are armed one at a time.
const RATED_SITES: [FaultSite; 8] = [
    FaultSite::Allocation,
    FaultSite::Pin,
    FaultSite::PinAlreadyRegistered,
    FaultSite::CopyToDevice,
    FaultSite::CopyToHost,
    FaultSite::KernelLaunch,
    FaultSite::KernelCompletion,
    FaultSite::ActorPanic,
];

/// Whose work a fault falls into: one attempt of one partition of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct FaultScope {
    pub request: u64,
    pub partition: usize,
    pub attempt: usize,
}

/// One injected fault, and whose work it fell into (None: work of no partition's stage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct InjectedFault {
    pub scope: Option<FaultScope>,
    pub stage: Option<Stage>,
    pub site: FaultSite,
}

/// The most injected faults the log keeps (the counts go on beyond it).
const LOG_CAP: usize = 1 << 16;

/// The scope a stage actor's thread works in now, and the draws of its stage so far.
struct ActiveScope {
    scope: FaultScope,
    stage: Stage,
    /// The key of this scope's stage: each site's k-th draw in it comes from (key, site, k),
    /// so a site rolled more often on one path (a fresh pin, a key upload) does not shift
    /// the draws of the others.
    key: u64,
    draws_by_site: BTreeMap<FaultSite, u64>,
}

impl ActiveScope {
    fn draw(&mut self, site: FaultSite, probability: f64) -> bool {
        let k = self.draws_by_site.entry(site).or_default();
        let seed = mix(mix(self.key ^ site as u64) ^ *k);
        *k += 1;
        ChaCha8Rng::seed_from_u64(seed).gen_bool(probability)
    }
}

thread_local! {
    static ACTIVE: RefCell<Option<ActiveScope>> = const { RefCell::new(None) };
}

/// Restores the thread's previous scope when dropped (also while a panic unwinds).
pub struct ScopeGuard {
    previous: Option<ActiveScope>,
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        ACTIVE.with(|active| *active.borrow_mut() = previous);
    }
}

/// A 64-bit mix (splitmix64's finaliser): neighbouring inputs give unrelated outputs.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Decides which operations fail and counts what it injected.
///
/// Rated faults are drawn per (seed, request, partition, attempt, stage): each stage of each
/// attempt draws from its own generator, so the same seed injects the same faults into the
/// same work however the threads interleave. Work outside a partition's stage (a preload)
/// draws none. Armed faults hit the next operations at their site, whoever's they are.
pub struct FaultInjector {
    /// The rate's bits (an f64), changeable while the prover runs.
    rate: AtomicU64,
    seed: u64,
    /// The stage whose actor drops every job it is given, as a stopped actor's mailbox would.
    lose_jobs_at: Mutex<Option<Stage>>,
    /// Whether MSM results come back wrong.
    wrong_results: AtomicBool,
    /// Whether an injected sticky error outlives recovery, as a real one does on CUDA.
    sticky_needs_restart: AtomicBool,
    /// Sites armed to fail their next operations, in one stage or in any (None), and how many.
    armed: Mutex<BTreeMap<(FaultSite, Option<Stage>), usize>>,
    /// The gates of stalled copies, opened by `release_stalled_copies`.
    stalled_copies: Mutex<Vec<Arc<HostCompletion>>>,
    /// A stage armed with `PanicOutsideStage` panics there (default: admission, one thread).
    panic_outside_at: Mutex<Option<Stage>>,
    /// Device bytes another process holds on each wrapped device.
    others_use_bytes: AtomicU64,
    /// Allocations refused for the memory another process holds, and its signal: what a test
    /// waits on to know the pressure was felt.
    pressure_refusals: Mutex<u64>,
    pressure_felt: parking_lot::Condvar,
    injected: AtomicU64,
    by_site: Mutex<BTreeMap<String, u64>>,
    log: Mutex<Vec<InjectedFault>>,
}

impl FaultInjector {
    /// Injects nothing.
    pub fn disabled() -> Arc<FaultInjector> {
        FaultInjector::new(0.0, 0)
    }

    /// Each operation fails with probability `rate`, drawn from `seed` (see the type's doc).
    /// The rate is split across the sites a partition passes, so `rate` is roughly the share of
    /// partitions that see a fault.
    pub fn new(rate: f64, seed: u64) -> Arc<FaultInjector> {
        Arc::new(FaultInjector {
            rate: AtomicU64::new(rate.clamp(0.0, 1.0).to_bits()),
            seed,
            lose_jobs_at: Mutex::new(None),
            wrong_results: AtomicBool::new(false),
            sticky_needs_restart: AtomicBool::new(false),
            armed: Mutex::new(BTreeMap::new()),
            stalled_copies: Mutex::new(Vec::new()),
            panic_outside_at: Mutex::new(None),
            others_use_bytes: AtomicU64::new(0),
            pressure_refusals: Mutex::new(0),
            pressure_felt: parking_lot::Condvar::new(),
            injected: AtomicU64::new(0),
            by_site: Mutex::new(BTreeMap::new()),
            log: Mutex::new(Vec::new()),
        })
    }

    fn rate(&self) -> f64 {
        f64::from_bits(self.rate.load(Ordering::SeqCst))
    }

    /// Changes the rate from now on (a device that starts or stops failing). Only devices
    /// wrapped when the prover started can fail: give those a rate from the start.
    pub fn set_rate(&self, rate: f64) {
        self.rate.store(rate.clamp(0.0, 1.0).to_bits(), Ordering::SeqCst);
    }

    pub fn is_enabled(&self) -> bool {
        self.rate() > 0.0
            || self.lose_jobs_at.lock().is_some()
            || self.wrong_results.load(Ordering::SeqCst)
            || !self.armed.lock().is_empty()
            || self.others_use_bytes.load(Ordering::SeqCst) > 0
    }

    /// Makes another process hold `bytes` of each wrapped device's memory from now on: the
    /// driver reports that much less free, and allocations beyond what is left run out of
    /// memory (a real out-of-memory, not an injected fault).
    pub fn set_others_use(&self, bytes: u64) {
        self.others_use_bytes.store(bytes, Ordering::SeqCst);
    }

    /// Allocations refused so far because of the memory another process holds.
    pub fn pressure_refusals(&self) -> u64 {
        *self.pressure_refusals.lock()
    }

    /// Waits until at least `count` allocations were refused for another process's memory, or
    /// `within` has passed; whether they were.
    pub fn wait_for_pressure_refusals(&self, count: u64, within: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + within;
        let mut refusals = self.pressure_refusals.lock();
        while *refusals < count {
            if self.pressure_felt.wait_until(&mut refusals, deadline).timed_out() {
                return *refusals >= count;
            }
        }
        true
    }

    /// Makes every MSM result copied back to the host wrong, as a device that computes
    /// wrongly without reporting an error would: only verification can tell.
    pub fn return_wrong_results(&self) {
        self.wrong_results.store(true, Ordering::SeqCst);
    }

    /// Ends [`FaultInjector::return_wrong_results`]: the device computes right again.
    pub fn return_right_results(&self) {
        self.wrong_results.store(false, Ordering::SeqCst);
    }

    /// Makes an injected sticky error outlive every recovery, as a real one does on CUDA (the
    /// driver keeps it until the process exits): the device goes out of service and the
    /// prover says it needs a restart.
    pub fn make_sticky_errors_need_restart(&self) {
        self.sticky_needs_restart.store(true, Ordering::SeqCst);
    }

    /// Makes the actor of `stage` drop every job it is given without an outcome, as a message
    /// sent to a stopped actor is dropped: the fault that must not leave a handle waiting.
    pub fn lose_jobs_at(&self, stage: Stage) {
        *self.lose_jobs_at.lock() = Some(stage);
    }

    /// Makes the next `times` operations at `site` fail (in partitions' stages, on the devices
    /// this injector wraps).
    pub fn arm(&self, site: FaultSite, times: usize) {
        if times > 0 {
            *self.armed.lock().entry((site, None)).or_default() += times;
        }
    }

    /// As [`FaultInjector::arm`], for operations in `stage` only: a fault placed at one point of
    /// a partition's path (say the MSM stage's first launch, after its first key copy).
    pub fn arm_in(&self, site: FaultSite, stage: Stage, times: usize) {
        if times > 0 {
            *self.armed.lock().entry((site, Some(stage))).or_default() += times;
        }
    }

    /// Lets every stalled copy go on (`FaultSite::StalledCopy`); returns how many there were.
    pub fn release_stalled_copies(&self) -> usize {
        let stalled = std::mem::take(&mut *self.stalled_copies.lock());
        for gate in &stalled {
            gate.complete();
        }
        stalled.len()
    }

    /// A gate for a copy that stalls, if an armed `StalledCopy` hits this one.
    fn stall_copy(&self) -> Option<Arc<HostCompletion>> {
        self.roll(FaultSite::StalledCopy).then(|| {
            let gate = Arc::new(HostCompletion::new());
            self.stalled_copies.lock().push(gate.clone());
            gate
        })
    }

    /// Where an armed `PanicOutsideStage` panics.
    pub fn panic_outside_at(&self, stage: Stage) {
        *self.panic_outside_at.lock() = Some(stage);
    }

    /// Runs the current thread's draws in `scope`'s `stage` until the guard is dropped.
    pub fn enter(&self, scope: FaultScope, stage: Stage) -> ScopeGuard {
        let key = [scope.request, scope.partition as u64, scope.attempt as u64, stage.index() as u64]
            .iter()
            .fold(mix(self.seed), |acc, part| mix(acc ^ part));
        let active = ActiveScope { scope, stage, key, draws_by_site: BTreeMap::new() };
        let previous = ACTIVE.with(|slot| slot.borrow_mut().replace(active));
        ScopeGuard { previous }
    }

    /// Whether the actor of `stage` is to drop its jobs (counted as injected when it does).
    pub fn loses_job_at(&self, stage: Stage) -> bool {
        let lose = *self.lose_jobs_at.lock() == Some(stage);
        if lose {
            self.record(FaultSite::LostJob);
        }
        lose
    }

    /// Faults injected so far.
    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::SeqCst)
    }

    /// Faults injected so far, per site.
    pub fn injected_by_site(&self) -> BTreeMap<String, u64> {
        self.by_site.lock().clone()
    }

    /// The faults injected so far, in the order they were (the first [`LOG_CAP`]).
    pub fn log(&self) -> Vec<InjectedFault> {
        self.log.lock().clone()
    }

    /// Whether any fault was injected into the work of `scope` (any of its stages): what
    /// tells a partition's own failure from a cascade.
    pub fn injected_into(&self, scope: FaultScope) -> bool {
        self.log.lock().iter().any(|fault| fault.scope == Some(scope))
    }

    fn record(&self, site: FaultSite) {
        self.injected.fetch_add(1, Ordering::SeqCst);
        *self.by_site.lock().entry(format!("{site:?}")).or_default() += 1;
        let (scope, stage) = ACTIVE.with(|active| active.borrow().as_ref().map(|a| (a.scope, a.stage)).unzip());
        let mut log = self.log.lock();
        if log.len() < LOG_CAP {
            log.push(InjectedFault { scope, stage, site });
        }
    }

    /// Whether the operation at `site` fails: an armed fault first, then the seeded rate
    /// (about 25 rolls per partition: the rate is spread over them).
    fn roll(&self, site: FaultSite) -> bool {
        let Some(stage) = ACTIVE.with(|active| active.borrow().as_ref().map(|a| a.stage)) else {
            return false;
        };
        let armed = {
            let mut armed = self.armed.lock();
            // A fault armed for this stage goes first, then one armed for any.
            [(site, Some(stage)), (site, None)].into_iter().any(|key| match armed.get_mut(&key) {
                Some(left) => {
                    *left -= 1;
                    if *left == 0 {
                        armed.remove(&key);
                    }
                    true
                }
                None => false,
            })
        };
        let rate = self.rate();
        let hit = armed
            || (rate > 0.0
                && RATED_SITES.contains(&site)
                && ACTIVE.with(|active| active.borrow_mut().as_mut().is_some_and(|a| a.draw(site, rate / 25.0))));
        if hit {
            self.record(site);
        }
        hit
    }

    /// An injected error at `site`, if this roll hits.
    pub fn maybe_fail(&self, site: FaultSite, what: &str) -> Result<()> {
        if self.roll(site) {
            Err(Error::Injected(format!("{what} failed ({site:?})")))
        } else {
            Ok(())
        }
    }

    /// Panics inside an actor's handler, if this roll hits.
    pub fn maybe_panic(&self, stage: Stage) -> Result<()> {
        if self.roll(FaultSite::ActorPanic) {
            panic!("injected panic in the {stage} actor");
        }
        Ok(())
    }

    /// Panics in the actor of `stage` outside the stage's logic, if armed there.
    pub fn maybe_panic_outside(&self, stage: Stage) {
        let here = self.panic_outside_at.lock().unwrap_or(Stage::Admission) == stage;
        if here && self.roll(FaultSite::PanicOutsideStage) {
            panic!("injected panic in the {stage} actor, outside its stage");
        }
    }
}

/// What a faulty device and its streams share: whether an injected sticky error broke it,
/// and the kernels hung on it (released when the device is recovered or dropped, as
/// destroying a context ends its kernels).
#[derive(Default)]
struct DeviceFaults {
    broken: Mutex<Option<String>>,
    hung: Mutex<Vec<Arc<HostCompletion>>>,
}

impl DeviceFaults {
    fn check(&self, device: usize) -> Result<()> {
        match &*self.broken.lock() {
            Some(message) => Err(Error::DeviceBroken { device, message: message.clone() }),
            None => Ok(()),
        }
    }

    fn release_hung(&self) {
        for hung in std::mem::take(&mut *self.hung.lock()) {
            hung.complete();
        }
    }
}

/// A device whose operations fail at the injector's rate.
pub struct FaultyDevice {
    inner: Arc<dyn Device>,
    faults: Arc<FaultInjector>,
    state: Arc<DeviceFaults>,
}

impl FaultyDevice {
    pub fn wrap(inner: Arc<dyn Device>, faults: Arc<FaultInjector>) -> Arc<dyn Device> {
        Arc::new(FaultyDevice { inner, faults, state: Arc::default() })
    }

    fn ordinal(&self) -> usize {
        self.inner.info().ordinal
    }
}

impl Drop for FaultyDevice {
    fn drop(&mut self) {
        self.state.release_hung();
    }
}

impl Device for FaultyDevice {
    fn info(&self) -> DeviceInfo {
        self.inner.info()
    }
    fn allocated_bytes(&self) -> u64 {
        self.inner.allocated_bytes()
    }
    fn free_bytes(&self) -> Option<u64> {
        let others = self.faults.others_use_bytes.load(Ordering::SeqCst);
        self.inner.free_bytes().map(|free| free.saturating_sub(others))
    }
    fn allocate(&self, bytes: u64) -> Result<DeviceBuffer> {
        self.state.check(self.ordinal())?;
        let others = self.faults.others_use_bytes.load(Ordering::SeqCst);
        if others > 0 && self.inner.allocated_bytes() + others + bytes > self.inner.info().capacity_bytes {
            *self.faults.pressure_refusals.lock() += 1;
            self.faults.pressure_felt.notify_all();
            return Err(Error::OutOfMemory { device: self.ordinal(), requested_bytes: bytes });
        }
        self.faults.maybe_fail(FaultSite::Allocation, &format!("allocating {bytes} bytes (out of memory)"))?;
        self.inner.allocate(bytes)
    }
    fn pin_host(&self, range: HostRange) -> Result<PinOutcome> {
        self.faults.maybe_fail(FaultSite::Pin, "page-locking host memory")?;
        if self.faults.roll(FaultSite::PinAlreadyRegistered) {
            // The driver's "already registered": state, not failure. Nothing was pinned by us.
            return Ok(PinOutcome::AlreadyPinned);
        }
        self.inner.pin_host(range)
    }
    fn unpin_host(&self, range: HostRange) -> Result<()> {
        self.inner.unpin_host(range)
    }
    fn new_stream(&self, name: &str, timeline: TimelineRecorder) -> Result<Arc<dyn DeviceStream>> {
        let inner = self.inner.new_stream(name, timeline)?;
        Ok(Arc::new(FaultyStream {
            inner,
            faults: self.faults.clone(),
            state: self.state.clone(),
            device: self.ordinal(),
        }))
    }
    fn workspace_bytes(&self, log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64 {
        self.inner.workspace_bytes(log_n, max_msm_len, msm_pass_points)
    }
    fn min_msm_pass_points(&self) -> usize {
        self.inner.min_msm_pass_points()
    }
    fn release_cached(&self) {
        self.inner.release_cached()
    }
    /// Clears an injected sticky error and ends the hung kernels, as re-creating a context
    /// does, then recovers the device beneath.
    fn recover(&self) -> Result<()> {
        self.state.release_hung();
        if self.faults.sticky_needs_restart.load(Ordering::SeqCst) {
            if let Some(message) = self.state.broken.lock().clone() {
                return Err(Error::Device {
                    device: self.ordinal(),
                    operation: "recover the context",
                    message: format!("{message}: the error outlives the context; restart the process"),
                });
            }
        }
        *self.state.broken.lock() = None;
        self.inner.recover()
    }
}

struct FaultyStream {
    inner: Arc<dyn DeviceStream>,
    faults: Arc<FaultInjector>,
    state: Arc<DeviceFaults>,
    device: usize,
}

impl FaultyStream {
    /// A kernel that launched but whose completion reports an error.
    fn maybe_fail_on_completion(&self, tag: &WorkTag, kernel: &str) {
        if let Err(err) = self.faults.maybe_fail(FaultSite::KernelCompletion, &format!("{kernel} kernel completion")) {
            tag.fail(err);
        }
    }

    /// Before a kernel launch: the device must not be broken; an armed sticky fault breaks it
    /// now (this kernel is the one that trapped); an armed hang stops the stream before the
    /// kernel, until the device is recovered.
    fn before_kernel(&self, kernel: &str, tag: &WorkTag) -> Result<()> {
        self.state.check(self.device)?;
        if self.faults.roll(FaultSite::Sticky) {
            if self.inner.break_context(tag)? {
                // A real trap queued ahead of the kernel: the device reports the rest.
                return Ok(());
            }
            let message = format!("injected sticky error: the {kernel} kernel trapped");
            *self.state.broken.lock() = Some(message.clone());
            return Err(Error::DeviceBroken { device: self.device, message });
        }
        if self.faults.roll(FaultSite::Hang) {
            let hung = Arc::new(HostCompletion::new());
            self.state.hung.lock().push(hung.clone());
            self.inner.wait_event(&StageEvent::new(hung))?;
        }
        self.faults.maybe_fail(FaultSite::KernelLaunch, &format!("{kernel} kernel launch"))
    }

    /// Before a copy: a broken device copies nothing; a stalled copy holds its stream first.
    fn before_copy(&self, what: &str) -> Result<()> {
        self.state.check(self.device)?;
        if let Some(gate) = self.faults.stall_copy() {
            self.inner.wait_event(&StageEvent::new(gate))?;
        }
        self.faults.maybe_fail(FaultSite::CopyToDevice, what)
    }
}

impl DeviceStream for FaultyStream {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn wait_event(&self, event: &StageEvent) -> Result<()> {
        self.inner.wait_event(event)
    }
    fn record_event(&self) -> Result<StageEvent> {
        self.faults.maybe_fail(FaultSite::EventRecord, "recording an event")?;
        self.inner.record_event()
    }
    fn copy_scalars_to_device(&self, src: HostScalars, dst: &DeviceBuffer, tag: &WorkTag) -> Result<()> {
        self.before_copy("host-to-device copy")?;
        self.inner.copy_scalars_to_device(src, dst, tag)
    }
    fn select_scalars(
        &self,
        src: &DeviceBuffer,
        selection: Arc<PackedDensity>,
        packed: &DeviceBuffer,
        dst: &DeviceBuffer,
        dst_start: usize,
        tag: &WorkTag,
    ) -> Result<()> {
        self.before_kernel("query selection", tag)?;
        self.inner.select_scalars(src, selection, packed, dst, dst_start, tag)?;
        self.maybe_fail_on_completion(tag, "query selection");
        Ok(())
    }
    fn copy_g1_to_device(
        &self,
        src: Arc<Vec<G1Affine>>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        self.before_copy("host-to-device copy")?;
        self.inner.copy_g1_to_device(src, range, dst, tag)
    }
    fn copy_g2_to_device(
        &self,
        src: Arc<Vec<G2Affine>>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        self.before_copy("host-to-device copy")?;
        self.inner.copy_g2_to_device(src, range, dst, tag)
    }
    fn quotient(&self, a: &DeviceBuffer, b: &DeviceBuffer, c: &DeviceBuffer, log_n: u32, tag: &WorkTag) -> Result<()> {
        self.before_kernel("NTT", tag)?;
        self.inner.quotient(a, b, c, log_n, tag)?;
        self.maybe_fail_on_completion(tag, "NTT");
        Ok(())
    }
    fn msm(
        &self,
        group: Group,
        bases: &DeviceBuffer,
        scalars: &DeviceBuffer,
        terms: Range<usize>,
        results: &DeviceBuffer,
        slot: MsmSlot,
        pass_points: usize,
        tag: &WorkTag,
    ) -> Result<()> {
        self.before_kernel("MSM", tag)?;
        self.inner.msm(group, bases, scalars, terms, results, slot, pass_points, tag)?;
        self.maybe_fail_on_completion(tag, "MSM");
        Ok(())
    }
    fn copy_matrices_to_device(
        &self,
        matrices: Arc<ConstraintMatrices>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        self.before_copy("host-to-device copy of constraint matrices")?;
        self.inner.copy_matrices_to_device(matrices, dst, tag)
    }
    fn evaluate_constraints(
        &self,
        matrices: &ResidentMatrices,
        inputs: &DeviceBuffer,
        aux: &DeviceBuffer,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        c: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        self.before_kernel("constraint evaluation", tag)?;
        self.inner.evaluate_constraints(matrices, inputs, aux, a, b, c, tag)?;
        self.maybe_fail_on_completion(tag, "constraint evaluation");
        Ok(())
    }
    fn check_satisfied(
        &self,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        c: &DeviceBuffer,
        len: usize,
        host: Arc<dyn HostConstraints>,
        tag: &WorkTag,
    ) -> Result<()> {
        self.before_kernel("satisfaction check", tag)?;
        self.inner.check_satisfied(a, b, c, len, host, tag)?;
        self.maybe_fail_on_completion(tag, "satisfaction check");
        Ok(())
    }
    fn copy_scalars_to_host(&self, src: &DeviceBuffer, len: usize, tag: &WorkTag) -> Result<PendingScalars> {
        self.state.check(self.device)?;
        self.faults.maybe_fail(FaultSite::CopyToHost, "device-to-host copy of scalars")?;
        let pending = self.inner.copy_scalars_to_host(src, len, tag)?;
        // Scalars read after the device broke are as lost as the context that held them.
        let (state, device) = (self.state.clone(), self.device);
        Ok(PendingScalars::new(move || {
            state.check(device)?;
            pending.read()
        }))
    }
    fn copy_results_to_host(&self, results: &DeviceBuffer, tag: &WorkTag) -> Result<PendingResults> {
        self.state.check(self.device)?;
        self.faults.maybe_fail(FaultSite::CopyToHost, "device-to-host copy")?;
        let pending = self.inner.copy_results_to_host(results, tag)?;
        let wrong = self.faults.wrong_results.load(Ordering::SeqCst);
        if wrong {
            self.faults.record(FaultSite::WrongResult);
        }
        // Results read after the device broke are as lost as the context that held them.
        let (state, device) = (self.state.clone(), self.device);
        Ok(PendingResults::new(move || {
            state.check(device)?;
            let mut results = pending.read()?;
            if wrong {
                results.h += <blstrs::G1Projective as group::Group>::generator();
            }
            Ok(results)
        }))
    }
}
