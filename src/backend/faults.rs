//! Fault injection: a wrapper around any device that makes its operations fail at a seeded
//! rate, and panics injected into actors' handlers, so every failure path runs in tests.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use blstrs::{G1Affine, G2Affine};
use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    Device, DeviceBuffer, DeviceInfo, DeviceStream, Group, HostRange, HostScalars, MsmSlot, PendingResults, PinOutcome,
    StageEvent, WorkTag,
};
use crate::circuit::PackedDensity;
use crate::error::{Error, Result};
use crate::stage::Stage;
use crate::timeline::TimelineRecorder;

/// Where a fault can be injected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FaultSite {
    Allocation,
    Pin,
    PinAlreadyRegistered,
    CopyToDevice,
    CopyToHost,
    KernelLaunch,
    KernelCompletion,
    ActorPanic,
}

/// Decides, at a seeded rate, which operations fail, and counts what it injected.
pub struct FaultInjector {
    rate: f64,
    /// The stage whose actor drops every job it is given, as a stopped actor's mailbox would.
    lose_jobs_at: Mutex<Option<Stage>>,
    /// Whether MSM results come back wrong.
    wrong_results: std::sync::atomic::AtomicBool,
    rng: Mutex<ChaCha8Rng>,
    injected: AtomicU64,
    by_site: Mutex<BTreeMap<String, u64>>,
}

impl FaultInjector {
    /// Injects nothing.
    pub fn disabled() -> Arc<FaultInjector> {
        FaultInjector::new(0.0, 0)
    }

    /// Each operation fails with probability `rate`, drawn from a generator seeded by `seed`.
    /// The rate is split across the sites a partition passes, so `rate` is roughly the share of
    /// partitions that see a fault.
    pub fn new(rate: f64, seed: u64) -> Arc<FaultInjector> {
        Arc::new(FaultInjector {
            rate: rate.clamp(0.0, 1.0),
            lose_jobs_at: Mutex::new(None),
            wrong_results: std::sync::atomic::AtomicBool::new(false),
            rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed)),
            injected: AtomicU64::new(0),
            by_site: Mutex::new(BTreeMap::new()),
        })
    }

    pub fn is_enabled(&self) -> bool {
        self.rate > 0.0 || self.lose_jobs_at.lock().is_some() || self.wrong_results.load(Ordering::SeqCst)
    }

    /// Makes every MSM result copied back to the host wrong, as a device that computes
    /// wrongly without reporting an error would: only verification can tell.
    pub fn return_wrong_results(&self) {
        self.wrong_results.store(true, Ordering::SeqCst);
    }

    /// Makes the actor of `stage` drop every job it is given without an outcome, as a message
    /// sent to a stopped actor is dropped: the fault that must not leave a handle waiting.
    pub fn lose_jobs_at(&self, stage: Stage) {
        *self.lose_jobs_at.lock() = Some(stage);
    }

    /// Whether the actor of `stage` is to drop its jobs (counted as injected when it does).
    pub fn loses_job_at(&self, stage: Stage) -> bool {
        let lose = *self.lose_jobs_at.lock() == Some(stage);
        if lose {
            self.injected.fetch_add(1, Ordering::SeqCst);
            *self.by_site.lock().entry("LostJob".to_string()).or_default() += 1;
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

    /// About 25 fault points are rolled per partition; spread the rate over them.
    fn roll(&self, site: FaultSite) -> bool {
        if self.rate <= 0.0 {
            return false;
        }
        let per_site = self.rate / 25.0;
        let hit = self.rng.lock().gen_bool(per_site);
        if hit {
            self.injected.fetch_add(1, Ordering::SeqCst);
            *self.by_site.lock().entry(format!("{site:?}")).or_default() += 1;
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
}

/// A device whose operations fail at the injector's rate.
pub struct FaultyDevice {
    inner: Arc<dyn Device>,
    faults: Arc<FaultInjector>,
}

impl FaultyDevice {
    pub fn wrap(inner: Arc<dyn Device>, faults: Arc<FaultInjector>) -> Arc<dyn Device> {
        Arc::new(FaultyDevice { inner, faults })
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
        self.inner.free_bytes()
    }
    fn allocate(&self, bytes: u64) -> Result<DeviceBuffer> {
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
        Ok(Arc::new(FaultyStream { inner, faults: self.faults.clone() }))
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
}

struct FaultyStream {
    inner: Arc<dyn DeviceStream>,
    faults: Arc<FaultInjector>,
}

impl FaultyStream {
    /// A kernel that launched but whose completion reports an error.
    fn maybe_fail_on_completion(&self, tag: &WorkTag, kernel: &str) {
        if let Err(err) = self.faults.maybe_fail(FaultSite::KernelCompletion, &format!("{kernel} kernel completion")) {
            tag.fail(err);
        }
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
        self.inner.record_event()
    }
    fn copy_scalars_to_device(&self, src: HostScalars, dst: &DeviceBuffer, tag: &WorkTag) -> Result<()> {
        self.faults.maybe_fail(FaultSite::CopyToDevice, "host-to-device copy")?;
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
        self.faults.maybe_fail(FaultSite::KernelLaunch, "query selection kernel launch")?;
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
        self.faults.maybe_fail(FaultSite::CopyToDevice, "host-to-device copy")?;
        self.inner.copy_g1_to_device(src, range, dst, tag)
    }
    fn copy_g2_to_device(
        &self,
        src: Arc<Vec<G2Affine>>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        self.faults.maybe_fail(FaultSite::CopyToDevice, "host-to-device copy")?;
        self.inner.copy_g2_to_device(src, range, dst, tag)
    }
    fn quotient(&self, a: &DeviceBuffer, b: &DeviceBuffer, c: &DeviceBuffer, log_n: u32, tag: &WorkTag) -> Result<()> {
        self.faults.maybe_fail(FaultSite::KernelLaunch, "NTT kernel launch")?;
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
        self.faults.maybe_fail(FaultSite::KernelLaunch, "MSM kernel launch")?;
        self.inner.msm(group, bases, scalars, terms, results, slot, pass_points, tag)?;
        self.maybe_fail_on_completion(tag, "MSM");
        Ok(())
    }
    fn copy_results_to_host(&self, results: &DeviceBuffer, tag: &WorkTag) -> Result<PendingResults> {
        self.faults.maybe_fail(FaultSite::CopyToHost, "device-to-host copy")?;
        let pending = self.inner.copy_results_to_host(results, tag)?;
        if !self.faults.wrong_results.load(Ordering::SeqCst) {
            return Ok(pending);
        }
        self.faults.injected.fetch_add(1, Ordering::SeqCst);
        *self.faults.by_site.lock().entry("WrongResult".to_string()).or_default() += 1;
        Ok(PendingResults::new(move || {
            let mut results = pending.read()?;
            results.h += <blstrs::G1Projective as group::Group>::generator();
            Ok(results)
        }))
    }
}
