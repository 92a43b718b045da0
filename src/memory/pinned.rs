//! Page-locked host memory.
//!
//! Copies from pageable memory crawl (several times slower than from pinned memory: the engine
//! we replace lost most of its upload bandwidth to them), and page-locking is slow (a fraction
//! of a second per few GiB), so snarkpipe pins once and reuses. The [`PinnedRegistry`] makes pinning idempotent: a range pinned
//! twice is pinned once and counted twice, "already registered" from the driver is state, and
//! a range is unpinned when its last [`PinLease`] is dropped. The [`PinnedPool`] keeps pinned
//! staging buffers for the next partition.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

use blstrs::Scalar;
use parking_lot::{Condvar, Mutex};
use rayon::prelude::*;

use crate::backend::{Device, HostRange, PinOutcome};
use crate::error::{Error, Result};

/// Where a range stands in the table. Page-locking gigabytes takes a while, so the driver calls
/// run outside the table's lock: a range being locked or unlocked
/// is marked, and only pinners of that same range wait for it.
enum PinState {
    /// One registry is page-locking it now.
    Locking,
    /// Page-locked, held by `users` leases (of any device).
    Locked {
        users: usize,
        /// The device whose driver call pinned it, and so must unpin it; `None` when it was
        /// already page-locked by someone outside snarkpipe.
        pinned_by: Option<Arc<dyn Device>>,
    },
    /// Its last lease is gone and it is being unlocked now.
    Unlocking,
}

/// The page-locked host ranges of the whole process, shared by every device's registry.
///
/// Page-locking is a property of host memory, not of one device (snarkpipe registers ranges
/// as portable across contexts), so two devices staging from the same range, say a proving
/// key both stream, must share one registration: were each device to count its own, the
/// first to finish would unpin the range under the other's copies.
#[derive(Default)]
pub struct HostPinTable {
    ranges: Mutex<HashMap<HostRange, PinState>>,
    /// Signalled whenever a range finishes locking or unlocking.
    settled: Condvar,
}

impl HostPinTable {
    pub fn new() -> Arc<HostPinTable> {
        Arc::new(HostPinTable::default())
    }

    /// Bytes page-locked through the table right now, by every device.
    pub fn pinned_bytes(&self) -> u64 {
        let ranges = self.ranges.lock();
        ranges.iter().filter(|(_, state)| matches!(state, PinState::Locked { .. })).map(|(r, _)| r.len as u64).sum()
    }

    /// Every range registered through the table right now, in any state (being locked, locked
    /// or being unlocked), ordered by address.
    pub fn ranges(&self) -> Vec<HostRange> {
        let mut ranges: Vec<HostRange> = self.ranges.lock().keys().copied().collect();
        ranges.sort_unstable();
        ranges
    }

    /// Ends a range's locking or unlocking: sets what follows (`None` removes the entry) and
    /// wakes the pinners waiting for it.
    fn settle(&self, range: HostRange, next: Option<PinState>) {
        {
            let mut ranges = self.ranges.lock();
            match next {
                Some(state) => ranges.insert(range, state),
                None => ranges.remove(&range),
            };
        }
        self.settled.notify_all();
    }
}

/// A range this thread has marked `Locking`. Dropped without [`LockingClaim::settle`] (an
/// error or a panic in the driver call), it removes the mark, so waiting pinners try again
/// rather than wait forever.
struct LockingClaim<'a> {
    table: &'a HostPinTable,
    range: HostRange,
    settled: bool,
}

impl LockingClaim<'_> {
    fn settle(mut self, state: PinState) {
        self.settled = true;
        self.table.settle(self.range, Some(state));
    }
}

impl Drop for LockingClaim<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.table.settle(self.range, None);
        }
    }
}

/// One device's view of the [`HostPinTable`]: pins through that device's driver when a range
/// is not yet locked, and counts the leases it hands out (a leak check per device).
pub struct PinnedRegistry {
    device: Arc<dyn Device>,
    table: Arc<HostPinTable>,
    /// Leases of this registry per range.
    mine: Mutex<HashMap<HostRange, usize>>,
}

impl PinnedRegistry {
    /// A registry with a table of its own (one device, or tests).
    pub fn new(device: Arc<dyn Device>) -> Arc<PinnedRegistry> {
        PinnedRegistry::sharing(device, HostPinTable::new())
    }

    /// A registry for `device` over the process-wide `table`.
    pub fn sharing(device: Arc<dyn Device>, table: Arc<HostPinTable>) -> Arc<PinnedRegistry> {
        Arc::new(PinnedRegistry { device, table, mine: Mutex::new(HashMap::new()) })
    }

    /// Pins the elements of `memory`, or counts one more user of them if they are pinned
    /// already (by any device). The lease keeps `memory` alive: it cannot be freed, nor
    /// reallocated, while its range is registered.
    pub fn pin_owned<T: Send + Sync + 'static>(self: &Arc<Self>, memory: Arc<Vec<T>>) -> Result<PinLease> {
        let range = HostRange::of(memory.as_slice());
        self.pin_within(range, memory)
    }

    /// Pins the slice `part` borrows from `owner` (a witness's vector, say), keeping `owner`
    /// alive for as long as the lease lives. The slice borrows from `owner` for as long as
    /// `owner` lives, so its memory is `owner`'s (or static) and stays where it is: nothing can
    /// move it out from under the shared `Arc` the lease holds.
    pub fn pin_part<O, T>(self: &Arc<Self>, owner: Arc<O>, part: impl FnOnce(&O) -> &[T]) -> Result<PinLease>
    where
        O: Send + Sync + 'static,
    {
        let range = HostRange::of(part(&owner));
        self.pin_within(range, owner)
    }

    /// Pins `range`, which lies inside memory `owner` keeps alive, or counts one more user of
    /// it. Every public way in computes `range` from its owner; this is the one place that
    /// takes the two apart, and it is private to this module.
    ///
    /// The driver call runs without the table's lock, so pins of different ranges proceed
    /// together; a pin of a range that is being locked or unlocked waits for that to finish.
    fn pin_within(self: &Arc<Self>, range: HostRange, owner: PinOwner) -> Result<PinLease> {
        let must_lock = {
            let mut ranges = self.table.ranges.lock();
            loop {
                match ranges.get_mut(&range) {
                    Some(PinState::Locked { users, .. }) => {
                        *users += 1;
                        break false;
                    }
                    Some(PinState::Locking | PinState::Unlocking) => self.table.settled.wait(&mut ranges),
                    None => {
                        ranges.insert(range, PinState::Locking);
                        break true;
                    }
                }
            }
        };
        if must_lock {
            let claim = LockingClaim { table: &self.table, range, settled: false };
            let pinned_by = match self.device.pin_host(range)? {
                PinOutcome::Pinned => Some(self.device.clone()),
                PinOutcome::AlreadyPinned => None,
            };
            claim.settle(PinState::Locked { users: 1, pinned_by });
        }
        *self.mine.lock().entry(range).or_default() += 1;
        Ok(PinLease { range, registry: self.clone(), owner })
    }

    fn release(&self, range: HostRange) {
        {
            let mut mine = self.mine.lock();
            if let Some(count) = mine.get_mut(&range) {
                *count -= 1;
                if *count == 0 {
                    mine.remove(&range);
                }
            }
        }
        let pinned_by = {
            let mut ranges = self.table.ranges.lock();
            let Some(PinState::Locked { users, .. }) = ranges.get_mut(&range) else { return };
            *users -= 1;
            if *users > 0 {
                return;
            }
            match ranges.insert(range, PinState::Unlocking) {
                Some(PinState::Locked { pinned_by, .. }) => pinned_by,
                _ => None,
            }
        };
        // Unlocking, like locking, runs without the table's lock.
        if let Some(device) = pinned_by {
            if let Err(err) = device.unpin_host(range) {
                tracing::warn!(%err, "unpinning a host range failed");
            }
        }
        self.table.settle(range, None);
    }

    /// Bytes of the ranges this registry holds leases on right now.
    pub fn pinned_bytes(&self) -> u64 {
        self.mine.lock().keys().map(|r| r.len as u64).sum()
    }

    /// Ranges this registry holds leases on right now.
    pub fn pinned_ranges(&self) -> usize {
        self.mine.lock().len()
    }
}

/// What a lease keeps alive: the memory its range lies in, of any type.
type PinOwner = Arc<dyn Any + Send + Sync>;

/// One user's hold on a pinned range; the range is unpinned when the last lease drops.
///
/// A lease owns the memory it pins: the range is released in `drop`, before the fields (and
/// so the owner) go, so no range in the [`HostPinTable`] can outlive its allocation. It holds
/// its registry strongly for the same reason: a lease that outlived its registry could not
/// unregister its range before freeing the memory.
pub struct PinLease {
    range: HostRange,
    registry: Arc<PinnedRegistry>,
    owner: PinOwner,
}

impl PinLease {
    pub fn range(&self) -> HostRange {
        self.range
    }

    /// The owner, when this lease is its only holder and it is a `T`. Private: it hands out
    /// the memory mutably, and only the pool (which never lets a buffer grow) may do that.
    fn sole_owner_mut<T: Any>(&mut self) -> Option<&mut T> {
        Arc::get_mut(&mut self.owner)?.downcast_mut()
    }
}

impl Drop for PinLease {
    fn drop(&mut self) {
        self.registry.release(self.range);
    }
}

impl std::fmt::Debug for PinLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinLease({:#x}+{})", self.range.addr, self.range.len)
    }
}

/// A pinned staging buffer of scalars, lent by a [`PinnedPool`] and returned to it on drop.
/// Its lease owns the buffer; `data` is a typed handle on the same allocation.
pub struct PinnedScalars {
    data: Option<Arc<Vec<Scalar>>>,
    lease: Option<PinLease>,
    pool: Weak<PoolShelf>,
}

impl PinnedScalars {
    /// The staged values, shared with the copies that read them.
    pub fn shared(&self) -> Arc<Vec<Scalar>> {
        self.data.clone().expect("present until dropped")
    }
    pub fn len(&self) -> usize {
        self.data.as_ref().map_or(0, |d| d.len())
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for PinnedScalars {
    fn drop(&mut self) {
        let (Some(data), Some(mut lease)) = (self.data.take(), self.lease.take()) else { return };
        drop(data);
        // Only a buffer nobody else still reads can be reused; otherwise the lease goes, and
        // the readers' handles keep the (now unpinned) memory until they are done.
        if let Some(shelf) = self.pool.upgrade() {
            if lease.sole_owner_mut::<Vec<Scalar>>().is_some() {
                shelf.put_back(lease);
            }
        }
    }
}

/// Room in a pooled pinned buffer: values go in up to the length asked for (and so within
/// its capacity) and never beyond, so the buffer is never reallocated away from the range its
/// lease pinned.
pub struct PinnedFill<'a> {
    data: &'a mut Vec<Scalar>,
    /// The length asked for; never more than the capacity.
    limit: usize,
}

impl PinnedFill<'_> {
    /// Scalars that still fit.
    pub fn room(&self) -> usize {
        self.limit.min(self.data.capacity()) - self.data.len()
    }

    /// Appends `values`, copying with every core (a partition's vectors are gigabytes).
    pub fn extend_from_slice(&mut self, values: &[Scalar]) -> Result<()> {
        self.check_room(values.len())?;
        // Within capacity, `par_extend` reserves nothing new: the buffer stays where it is.
        self.data.par_extend(values.par_iter().copied());
        Ok(())
    }

    /// Appends `values` one by one, failing (with what fitted kept) if there are more than fit.
    pub fn extend(&mut self, values: impl IntoIterator<Item = Scalar>) -> Result<()> {
        let mut values = values.into_iter();
        while self.room() > 0 {
            match values.next() {
                Some(value) => self.data.push(value),
                None => return Ok(()),
            }
        }
        match values.next() {
            None => Ok(()),
            Some(_) => self.check_room(1 + values.count()),
        }
    }

    fn check_room(&self, more: usize) -> Result<()> {
        if more > self.room() {
            return Err(Error::MalformedWitness(format!(
                "{} more values for a staging buffer with room for {}",
                more,
                self.room()
            )));
        }
        Ok(())
    }
}

/// Idle pooled buffers: each lease owns a `Vec<Scalar>` whose whole capacity it pins, and is
/// that vector's only holder.
struct PoolShelf {
    idle: Mutex<Vec<PinLease>>,
    max_idle: usize,
}

impl PoolShelf {
    fn put_back(&self, lease: PinLease) {
        let mut idle = self.idle.lock();
        if idle.len() < self.max_idle {
            idle.push(lease);
        }
    }
}

/// Scalars a pooled buffer's lease covers (its whole capacity).
fn pooled_capacity(lease: &PinLease) -> usize {
    lease.range().len / std::mem::size_of::<Scalar>()
}

/// Reusable pinned staging buffers of one device.
pub struct PinnedPool {
    registry: Arc<PinnedRegistry>,
    shelf: Arc<PoolShelf>,
}

impl PinnedPool {
    /// A pool that keeps at most `max_idle` idle buffers pinned between partitions.
    pub fn new(registry: Arc<PinnedRegistry>, max_idle: usize) -> PinnedPool {
        PinnedPool { registry, shelf: Arc::new(PoolShelf { idle: Mutex::new(Vec::new()), max_idle }) }
    }

    pub fn registry(&self) -> &Arc<PinnedRegistry> {
        &self.registry
    }

    /// A pinned buffer holding a copy of `values`, reusing an idle one when one is big enough.
    pub fn stage(&self, values: &[Scalar]) -> Result<PinnedScalars> {
        self.stage_with(values.len(), |room| room.extend_from_slice(values))
    }

    /// A pinned buffer of room for `len` scalars, filled by `fill`, so values computed for
    /// staging go straight into pinned memory. A `fill` that fails or offers more than `len`
    /// fails the staging; the buffer goes back to the pool.
    pub fn stage_with(
        &self,
        len: usize,
        fill: impl FnOnce(&mut PinnedFill<'_>) -> Result<()>,
    ) -> Result<PinnedScalars> {
        let reused = {
            let mut idle = self.shelf.idle.lock();
            let fit = idle
                .iter()
                .enumerate()
                .filter(|(_, lease)| pooled_capacity(lease) >= len)
                .min_by_key(|(_, lease)| pooled_capacity(lease))
                .map(|(i, _)| i);
            fit.map(|i| idle.swap_remove(i))
        };
        let mut lease = match reused {
            Some(found) => found,
            // Never an empty allocation: a zero-length range cannot be pinned.
            None => self.pin_buffer(len.max(1))?,
        };
        let filled = {
            let data = lease.sole_owner_mut::<Vec<Scalar>>().expect("an idle or fresh pooled buffer has one holder");
            data.clear();
            fill(&mut PinnedFill { data, limit: len })
        };
        if let Err(err) = filled {
            self.shelf.put_back(lease);
            return Err(err);
        }
        let data = lease.owner.clone().downcast::<Vec<Scalar>>().expect("a pooled buffer owns a Vec<Scalar>");
        Ok(PinnedScalars { data: Some(data), lease: Some(lease), pool: Arc::downgrade(&self.shelf) })
    }

    /// A fresh buffer of room for `len` scalars, its whole capacity pinned and owned by the
    /// lease.
    fn pin_buffer(&self, len: usize) -> Result<PinLease> {
        let data: Vec<Scalar> = Vec::with_capacity(len);
        let range = HostRange { addr: data.as_ptr() as usize, len: data.capacity() * std::mem::size_of::<Scalar>() };
        // Moving the vector into its `Arc` moves its header, not its heap buffer.
        self.registry.pin_within(range, Arc::new(data))
    }

    /// Allocates and pins idle buffers ahead of use, one per entry of `lengths` (in scalars),
    /// so the first partitions do not pay for page-locking fresh memory. Idle buffers that
    /// already fit are counted, and the pool never holds more than its idle limit.
    /// Returns the bytes newly pinned.
    pub fn warm(&self, lengths: &[usize]) -> Result<u64> {
        let mut wanted: Vec<usize> = lengths.iter().map(|&len| len.max(1)).collect();
        wanted.sort_unstable_by(|x, y| y.cmp(x));
        // Match the largest requests against the idle buffers first (each buffer once).
        let mut idle_capacities: Vec<usize> = self.shelf.idle.lock().iter().map(pooled_capacity).collect();
        idle_capacities.sort_unstable_by(|x, y| y.cmp(x));
        let mut missing = Vec::new();
        for len in wanted {
            match idle_capacities.iter().position(|&cap| cap >= len) {
                Some(i) => {
                    idle_capacities.remove(i);
                }
                None => missing.push(len),
            }
        }
        let room = self.shelf.max_idle.saturating_sub(self.shelf.idle.lock().len());
        let mut pinned = 0;
        for len in missing.into_iter().take(room) {
            let lease = self.pin_buffer(len)?;
            pinned += lease.range().len as u64;
            self.shelf.put_back(lease);
        }
        Ok(pinned)
    }

    /// Idle buffers held pinned.
    pub fn idle_buffers(&self) -> usize {
        self.shelf.idle.lock().len()
    }

    /// Bytes held pinned by idle buffers.
    pub fn idle_bytes(&self) -> u64 {
        self.shelf.idle.lock().iter().map(|lease| lease.range().len as u64).sum()
    }

    /// Unpins every idle buffer.
    pub fn clear(&self) {
        self.shelf.idle.lock().clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::backend::cpu::CpuDevice;
    use crate::backend::{DeviceBuffer, DeviceInfo, DeviceStream};
    use crate::error::Error;
    use crate::timeline::TimelineRecorder;

    /// A CPU device whose page-locking takes a while: each call waits, up to half a second,
    /// for a second call to be in progress. It records how many ran at once and how many ran,
    /// and can fail its first call.
    struct SlowPins {
        inner: CpuDevice,
        in_progress: Mutex<usize>,
        changed: Condvar,
        most_at_once: AtomicUsize,
        calls: AtomicUsize,
        fail_first: AtomicBool,
    }

    impl SlowPins {
        fn new(fail_first: bool) -> Arc<SlowPins> {
            Arc::new(SlowPins {
                inner: CpuDevice::new(0, 1 << 20),
                in_progress: Mutex::new(0),
                changed: Condvar::new(),
                most_at_once: AtomicUsize::new(0),
                calls: AtomicUsize::new(0),
                fail_first: AtomicBool::new(fail_first),
            })
        }
    }

    impl Device for SlowPins {
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
            self.inner.allocate(bytes)
        }
        fn pin_host(&self, range: HostRange) -> Result<PinOutcome> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            {
                let mut in_progress = self.in_progress.lock();
                *in_progress += 1;
                self.most_at_once.fetch_max(*in_progress, Ordering::SeqCst);
                self.changed.notify_all();
                let deadline = Instant::now() + Duration::from_millis(500);
                while *in_progress < 2 && !self.changed.wait_until(&mut in_progress, deadline).timed_out() {}
                *in_progress -= 1;
            }
            if self.fail_first.swap(false, Ordering::SeqCst) {
                return Err(Error::Device { device: 0, operation: "pin host memory", message: "injected".into() });
            }
            self.inner.pin_host(range)
        }
        fn unpin_host(&self, range: HostRange) -> Result<()> {
            self.inner.unpin_host(range)
        }
        fn new_stream(&self, name: &str, timeline: TimelineRecorder) -> Result<Arc<dyn DeviceStream>> {
            self.inner.new_stream(name, timeline)
        }
        fn workspace_bytes(&self, log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64 {
            self.inner.workspace_bytes(log_n, max_msm_len, msm_pass_points)
        }
        fn min_msm_pass_points(&self) -> usize {
            self.inner.min_msm_pass_points()
        }
    }

    /// Pins `memory` on a thread of its own.
    fn pin_on_a_thread(registry: &Arc<PinnedRegistry>, memory: &Arc<Vec<u8>>) -> PinThread {
        let (registry, memory) = (registry.clone(), memory.clone());
        std::thread::spawn(move || registry.pin_owned(memory))
    }

    type PinThread = std::thread::JoinHandle<Result<PinLease>>;

    /// Pins `memory` on two threads, the second starting once the first's call reached the
    /// device (so it finds the range being locked).
    fn pin_twice_while_the_first_locks(
        device: &SlowPins,
        registry: &Arc<PinnedRegistry>,
        memory: &Arc<Vec<u8>>,
    ) -> (PinThread, PinThread) {
        let first = pin_on_a_thread(registry, memory);
        while device.calls.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        (first, pin_on_a_thread(registry, memory))
    }

    fn page() -> Arc<Vec<u8>> {
        Arc::new(vec![0u8; 4096])
    }

    #[test]
    fn pins_of_different_ranges_page_lock_at_once() {
        // Locking a range takes seconds for gigabytes; holding the table's lock through it
        // would queue every other partition's pin behind it.
        let device = SlowPins::new(false);
        let registry = PinnedRegistry::new(device.clone());
        let first = pin_on_a_thread(&registry, &page());
        let second = pin_on_a_thread(&registry, &page());
        let leases = [first.join().unwrap().unwrap(), second.join().unwrap().unwrap()];
        assert_eq!(device.most_at_once.load(Ordering::SeqCst), 2, "the second pin waited for the first");
        assert_eq!(device.inner.pinned_ranges(), 2);
        drop(leases);
        assert_eq!(device.inner.pinned_ranges(), 0);
    }

    #[test]
    fn pins_of_one_range_at_once_lock_it_once() {
        // The twin: the same range pinned from two threads is page-locked by one call, while
        // the other waits and shares it (a second call would meet "already registered").
        let device = SlowPins::new(false);
        let registry = PinnedRegistry::new(device.clone());
        let (first, second) = pin_twice_while_the_first_locks(&device, &registry, &page());
        let leases = [first.join().unwrap().unwrap(), second.join().unwrap().unwrap()];
        assert_eq!(device.calls.load(Ordering::SeqCst), 1, "the range was page-locked twice");
        assert_eq!(device.most_at_once.load(Ordering::SeqCst), 1);
        assert_eq!(registry.pinned_bytes(), 4096);
        drop(leases);
        assert_eq!((device.inner.pinned_ranges(), registry.pinned_bytes()), (0, 0));
    }

    #[test]
    fn a_failed_lock_lets_the_waiting_pinner_try_again() {
        let device = SlowPins::new(true);
        let registry = PinnedRegistry::new(device.clone());
        let (first, second) = pin_twice_while_the_first_locks(&device, &registry, &page());
        assert!(first.join().unwrap().is_err(), "the injected failure was lost");
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(second.join().unwrap()));
        let lease = finished
            .recv_timeout(Duration::from_secs(10))
            .expect("the waiting pinner hangs on a range whose locking failed")
            .expect("the waiting pinner locks the range itself");
        assert_eq!((device.calls.load(Ordering::SeqCst), device.inner.pinned_ranges()), (2, 1));
        drop(lease);
        assert_eq!(device.inner.pinned_ranges(), 0);
        assert_eq!(registry.table.pinned_bytes(), 0);
    }

    #[test]
    fn pinning_a_range_twice_pins_it_once_and_unpins_after_the_last_user() {
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let registry = PinnedRegistry::new(device.clone());
        let data = page();
        let first = registry.pin_owned(data.clone()).unwrap();
        let second = registry.pin_owned(data).expect("pinning the same range again is not an error");
        assert_eq!(device.pinned_ranges(), 1);
        drop(first);
        assert_eq!(device.pinned_ranges(), 1, "unpinned while a user remained");
        drop(second);
        assert_eq!(device.pinned_ranges(), 0);
        assert_eq!(registry.pinned_bytes(), 0);
    }

    #[test]
    fn a_range_pinned_by_someone_else_is_used_but_not_unpinned() {
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let data = page();
        // Someone outside the registry pinned it: the driver answers "already registered".
        assert_eq!(device.pin_host(HostRange::of(data.as_slice())).unwrap(), PinOutcome::Pinned);
        let registry = PinnedRegistry::new(device.clone());
        let lease = registry.pin_owned(data).expect("already registered is state, not failure");
        drop(lease);
        assert_eq!(device.pinned_ranges(), 1, "unpinned a range the registry did not pin");
    }

    #[test]
    fn two_devices_share_one_pin_and_the_last_user_unpins_it() {
        let (first, second) = (Arc::new(CpuDevice::new(0, 1 << 20)), Arc::new(CpuDevice::new(1, 1 << 20)));
        let table = HostPinTable::new();
        let on_first = PinnedRegistry::sharing(first.clone(), table.clone());
        let on_second = PinnedRegistry::sharing(second.clone(), table.clone());
        let data = page();
        let held_by_first = on_first.pin_owned(data.clone()).unwrap();
        let held_by_second = on_second.pin_owned(data).expect("a range the other device pinned is shared");
        assert_eq!((first.pinned_ranges(), second.pinned_ranges()), (1, 0), "pinned twice");
        drop(held_by_first);
        assert_eq!(first.pinned_ranges(), 1, "unpinned under the second device's lease");
        assert_eq!((on_first.pinned_bytes(), on_second.pinned_bytes()), (0, 4096));
        drop(held_by_second);
        assert_eq!(first.pinned_ranges(), 0, "the last lease did not unpin");
        assert_eq!(table.pinned_bytes(), 0);
    }

    #[test]
    fn separate_tables_do_not_share() {
        // The negative twin: registries over separate tables pin on their own.
        let (first, second) = (Arc::new(CpuDevice::new(0, 1 << 20)), Arc::new(CpuDevice::new(1, 1 << 20)));
        let data = page();
        let one = PinnedRegistry::new(first.clone()).pin_owned(data.clone());
        let other = PinnedRegistry::new(second.clone()).pin_owned(data);
        assert!(one.is_ok() && other.is_ok());
        assert_eq!((first.pinned_ranges(), second.pinned_ranges()), (1, 1));
    }

    #[test]
    fn a_lease_keeps_its_memory_alive_until_it_is_unpinned() {
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let registry = PinnedRegistry::new(device.clone());
        let data = page();
        let alive = Arc::downgrade(&data);
        let lease = registry.pin_owned(data).unwrap();
        // The caller's handle is gone; the lease's keeps the pinned memory allocated.
        assert!(alive.upgrade().is_some(), "pinned memory was freed while its range was registered");
        assert_eq!(registry.table.ranges(), vec![lease.range()]);
        drop(lease);
        // The twin: once unpinned, nothing holds it.
        assert!(alive.upgrade().is_none(), "the lease leaked its memory");
        assert!(registry.table.ranges().is_empty());
        assert_eq!(device.pinned_ranges(), 0);
    }

    #[test]
    fn a_pinned_part_keeps_its_whole_owner_alive() {
        struct TwoVectors {
            first: Vec<u64>,
            second: Vec<u64>,
        }
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let registry = PinnedRegistry::new(device.clone());
        let owner = Arc::new(TwoVectors { first: vec![1; 512], second: vec![2; 256] });
        let expected = HostRange::of(owner.second.as_slice());
        let alive = Arc::downgrade(&owner);
        let lease = registry.pin_part(owner, |o| &o.second).unwrap();
        assert_eq!(lease.range(), expected);
        assert!(alive.upgrade().is_some_and(|o| o.first.len() == 512));
        drop(lease);
        assert!(alive.upgrade().is_none());
    }

    #[test]
    fn a_lease_that_outlives_its_registry_still_unpins() {
        // Were the lease to hold its registry weakly, dropping it after the registry would
        // free the memory with its range still registered and page-locked.
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let table = HostPinTable::new();
        let lease = PinnedRegistry::sharing(device.clone(), table.clone()).pin_owned(page()).unwrap();
        assert_eq!(device.pinned_ranges(), 1);
        drop(lease);
        assert_eq!((device.pinned_ranges(), table.ranges().len()), (0, 0));
    }

    #[test]
    fn a_fill_that_offers_more_than_it_asked_for_fails_and_the_buffer_stays_put() {
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let pool = PinnedPool::new(PinnedRegistry::new(device.clone()), 4);
        let values: Vec<Scalar> = (0..100u64).map(Scalar::from).collect();
        let roomy = pool.stage(&values).unwrap();
        let (addr, range) = (roomy.shared().as_ptr(), pool.registry().table.ranges());
        drop(roomy);
        // A larger idle buffer is reused, but a fill still gets only the room it asked for.
        let too_many = pool.stage_with(10, |room| room.extend(values.iter().copied()));
        assert!(matches!(too_many, Err(Error::MalformedWitness(_))), "{:?}", too_many.err());
        let too_many = pool.stage_with(10, |room| room.extend_from_slice(&values[..11]));
        assert!(too_many.is_err());
        assert_eq!((pool.idle_buffers(), pool.registry().table.ranges()), (1, range), "the buffer was lost or moved");
        // The twin: a fill within its room stages, in the same pinned buffer.
        let fits = pool.stage_with(10, |room| room.extend(values[..10].iter().copied())).unwrap();
        let shared = fits.shared();
        assert_eq!((shared.as_ptr(), shared.as_slice()), (addr, &values[..10]));
    }

    #[test]
    fn a_staged_buffer_still_read_elsewhere_is_not_reused() {
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let pool = PinnedPool::new(PinnedRegistry::new(device.clone()), 4);
        let values: Vec<Scalar> = (0..100u64).map(Scalar::from).collect();
        let staged = pool.stage(&values).unwrap();
        let reader = staged.shared();
        drop(staged);
        // The reader's copy may still be running: the buffer is unpinned and let go, not
        // refilled under it, and stays allocated for the reader.
        assert_eq!((pool.idle_buffers(), device.pinned_ranges()), (0, 0));
        assert_eq!(reader.as_slice(), values.as_slice());
    }

    #[test]
    fn the_pool_reuses_pinned_buffers() {
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let pool = PinnedPool::new(PinnedRegistry::new(device.clone()), 4);
        let values: Vec<Scalar> = (0..100u64).map(Scalar::from).collect();
        let first = pool.stage(&values).unwrap();
        assert_eq!(first.shared().as_slice(), values.as_slice());
        let addr = first.shared().as_ptr();
        drop(first);
        let second = pool.stage(&values[..50]).unwrap();
        assert_eq!(second.shared().as_ptr(), addr, "a fitting idle buffer was not reused");
        assert_eq!(second.shared().as_slice(), &values[..50]);
        assert_eq!(device.pinned_ranges(), 1);
        drop(second);
        pool.clear();
        assert_eq!(device.pinned_ranges(), 0);
    }

    #[test]
    fn a_warmed_pool_stages_without_pinning_again() {
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let pool = PinnedPool::new(PinnedRegistry::new(device.clone()), 3);
        let bytes = pool.warm(&[100, 40, 40]).unwrap();
        assert_eq!(bytes, (100 + 40 + 40) * 32);
        assert_eq!((device.pinned_ranges(), pool.idle_buffers()), (3, 3));
        // Warming again for the same shape pins nothing new.
        assert_eq!(pool.warm(&[100, 40, 40]).unwrap(), 0);
        assert_eq!(device.pinned_ranges(), 3);

        let values: Vec<Scalar> = (0..100u64).map(Scalar::from).collect();
        let staged =
            [pool.stage(&values).unwrap(), pool.stage(&values[..40]).unwrap(), pool.stage(&values[..7]).unwrap()];
        assert_eq!(device.pinned_ranges(), 3, "staging pinned fresh memory after a warm-up");
        assert_eq!(staged[0].shared().as_slice(), values.as_slice());
        assert_eq!(staged[2].shared().as_slice(), &values[..7]);
        drop(staged);
        assert_eq!(pool.idle_buffers(), 3);
    }

    #[test]
    fn warming_stops_at_the_idle_limit() {
        let device = Arc::new(CpuDevice::new(0, 1 << 20));
        let pool = PinnedPool::new(PinnedRegistry::new(device.clone()), 2);
        assert_eq!(pool.warm(&[10, 20, 30, 40]).unwrap(), (40 + 30) * 32, "the largest buffers come first");
        assert_eq!(device.pinned_ranges(), 2);
        pool.clear();
        assert_eq!(device.pinned_ranges(), 0);
    }
}
