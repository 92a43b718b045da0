//! The CUDA GPU as a pipeline [`Device`].
//!
//! Each pipeline stream is a host thread (a [`HostQueue`]) driving its own CUDA stream, so the
//! upload, compute and download streams of a GPU run concurrently on it. Every piece of work is
//! bracketed by timed CUDA events, and its span on the timeline is the device's own time mapped
//! onto the host clock. The MSM kernels hand their window sums back to the host for the final
//! combination, so an MSM ends with its result on the host; the results "copy" of the download
//! stage then only hands them over.
// Unsafe here: the context reset and the views of page-locked host ranges; every block says why it holds (`// SAFETY:`).
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use std::sync::Weak;

use parking_lot::{Mutex, RwLock};

use super::context::{GpuBuffer, GpuClock, GpuContext, GpuStream, HostRegistration, PinnedRange};
use super::msm_plan::{msm_scratch_bytes, MsmOptions, MSM_PASS_POINTS};
use super::probe::ProbeField;
use crate::backend::host_queue::{DeviceTimes, HostQueue};
use crate::backend::{
    check_satisfaction_buffers, judge_satisfaction, ArithmeticRates, CountedBytes, Device, DeviceBuffer, DeviceInfo,
    DeviceStream, Group, HostConstraints, HostRange, HostScalars, MsmResultSlots, MsmSlot, PendingResults,
    PendingScalars, PinOutcome, ResidentMatrices, StageEvent, WorkTag,
};
use crate::circuit::{ConstraintMatrices, PackedDensity};
use crate::error::{Error, Result};
use crate::math::FixedBase;
use crate::plan::scalar_bytes;
use crate::plan::MatricesLayout;
use crate::timeline::TimelineRecorder;

/// One GPU.
pub struct CudaDevice {
    ordinal: usize,
    total_bytes: u64,
    /// The context and what the device made on it; a new one replaces it when the device is
    /// recovered (None while it is replaced, or after a recovery failed).
    generation: RwLock<Option<Generation>>,
    /// The CUDA streams of every pipeline stream made on this device, made again on the new
    /// context when the device is recovered.
    lanes: Mutex<Vec<Weak<Mutex<Option<Lanes>>>>>,
    allocated: Arc<AtomicU64>,
    registered: Mutex<HashMap<HostRange, PinnedRange>>,
}

/// How long a recovery waits for work queued on the broken context to let go of it.
const HOLDERS_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// A context and the stream the device allocates on.
struct Generation {
    gpu: Arc<GpuContext>,
    allocator: GpuStream,
}

impl CudaDevice {
    pub fn open(ordinal: usize) -> Result<CudaDevice> {
        let gpu = GpuContext::open(ordinal)?;
        let (_, total) = gpu.memory_info()?;
        let allocator = gpu.new_stream()?;
        Ok(CudaDevice {
            ordinal,
            total_bytes: total as u64,
            generation: RwLock::new(Some(Generation { gpu, allocator })),
            lanes: Mutex::new(Vec::new()),
            allocated: Arc::new(AtomicU64::new(0)),
            registered: Mutex::new(HashMap::new()),
        })
    }

    fn out_of_service(&self) -> Error {
        Error::DeviceBroken { device: self.ordinal, message: "its context is being re-created, or could not be".into() }
    }

    /// The current context.
    fn gpu(&self) -> Result<Arc<GpuContext>> {
        self.generation.read().as_ref().map(|g| g.gpu.clone()).ok_or_else(|| self.out_of_service())
    }

    /// Replaces a broken context (see [`Device::recover`]): drops everything this device made
    /// on it, so that the driver destroys it, and makes it all again on a new one. The host
    /// ranges this device page-locked are locked again on the new context, so their leases
    /// stay good. Fails, leaving the device out of service, when anything else still holds
    /// the old context (a buffer, a kernel still running on a stuck stream thread): then a new
    /// context would be the broken one again.
    fn recreate_context(&self) -> Result<()> {
        let live: Vec<Arc<Mutex<Option<Lanes>>>> = {
            let mut lanes = self.lanes.lock();
            lanes.retain(|l| l.strong_count() > 0);
            lanes.iter().filter_map(Weak::upgrade).collect()
        };
        let holders_before = self.generation.read().as_ref().map_or(0, |g| Arc::strong_count(&g.gpu));
        let lanes_held = live.iter().filter(|l| l.lock().is_some()).count();
        for lanes in &live {
            lanes.lock().take();
        }
        let holders_without_lanes = self.generation.read().as_ref().map_or(0, |g| Arc::strong_count(&g.gpu));
        let ranges: Vec<HostRange> = self.registered.lock().drain().map(|(range, _unregistered)| range).collect();
        let mut generation = self.generation.write();
        let old = generation.take().map(|g| g.gpu);
        let mut old_context_holders = 0;
        if let Some(old) = old {
            old.clear_caches();
            // Work already queued on the streams' host threads holds the old streams until it
            // has run (it fails at once on a broken context): give it a moment.
            let deadline = std::time::Instant::now() + HOLDERS_DRAIN;
            while Arc::strong_count(&old) > 1 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let holders = Arc::strong_count(&old) - 1;
            // The context value itself holds the driver context once, and each of its kernel
            // modules once more.
            old_context_holders = old.context_holders().saturating_sub(old.module_count());
            if holders > 0 {
                return Err(Error::Device {
                    device: self.ordinal,
                    operation: "recover the context",
                    message: format!(
                        "it cannot be recovered: {holders} objects of its broken context are still held (work stuck \
                         on it?); held by {holders_before} before the device dropped its {lanes_held} streams' lanes \
                         and {} page-locked ranges, {holders_without_lanes} after the lanes; restart the process to \
                         use GPU {} again",
                        ranges.len(),
                        self.ordinal
                    ),
                });
            }
        }
        // What still holds the driver context once the old value goes (its own modules and
        // tables go with it). With a holder left it would be used after the reset below.
        let remaining = old_context_holders;
        if remaining > 0 {
            return Err(Error::Device {
                device: self.ordinal,
                operation: "recover the context",
                message: format!(
                    "it cannot be recovered: {remaining} holders of the broken driver context beside the device's \
                     own remained; restart the process to use GPU {} again",
                    self.ordinal
                ),
            });
        }
        // Releasing the last retain does not clear a sticky error: the next retain gets the
        // broken context back. Resetting the primary context does.
        // SAFETY: this device made nothing on the old context that is still held (checked
        // above: no lanes, no allocator, no buffers, no registrations, no holders of the driver
        // context). Another prover of this process on the same GPU shares the primary context;
        // its work there already fails with the sticky error, and its own recovery replaces
        // what it held (the driver refuses handles of a destroyed context with an error).
        unsafe { super::raw::primary_context_reset(self.ordinal) }
            .map_err(|err| super::context::driver_error(self.ordinal, "reset the primary context", err))?;
        let gpu = GpuContext::open(self.ordinal).map_err(|err| {
            let cause = match err {
                Error::DeviceBroken { message, .. } => message,
                other => other.to_string(),
            };
            Error::Device {
                device: self.ordinal,
                operation: "recover the context",
                message: format!(
                    "{cause}: the CUDA driver keeps a sticky error for the life of the process (a reset primary \
                     context and a new context both fail with it); restart the process to use GPU {} again",
                    self.ordinal
                ),
            }
        })?;
        let allocator = gpu.new_stream()?;
        for lanes in &live {
            *lanes.lock() = Some(Lanes::on(&gpu)?);
        }
        let mut registered = self.registered.lock();
        for range in ranges {
            // SAFETY: as in `pin_host`: the registry keeps these ranges' memory alive until it
            // unpins them, and they were pinned through this device (so are still alive).
            let slice = unsafe { std::slice::from_raw_parts(range.addr as *const u8, range.len) };
            if let HostRegistration::Registered(pinned) = gpu.register_host(slice)? {
                registered.insert(range, pinned);
            }
        }
        *generation = Some(Generation { gpu, allocator });
        Ok(())
    }
}

/// One allocation, returned to the device's count when dropped.
struct CudaMemory {
    buffer: Mutex<Option<GpuBuffer<u8>>>,
    _counted: CountedBytes,
    /// MSM results land on the host (see the module doc); a results buffer keeps them here.
    results: Mutex<MsmResultSlots>,
}

fn memory_of(buffer: &DeviceBuffer) -> Result<&CudaMemory> {
    buffer.memory::<CudaMemory>("CUDA")
}

/// Takes a buffer's device memory for the duration of one piece of work, seen as `T`.
fn with_buffer<T: super::context::DeviceElement, R>(
    buffer: &DeviceBuffer,
    work: impl FnOnce(&mut GpuBuffer<T>) -> Result<R>,
) -> Result<R> {
    let memory = memory_of(buffer)?;
    let mut slot = memory.buffer.lock();
    lend(&mut slot, buffer.device(), |raw| raw.retype::<T>(), |typed| typed.retype::<u8>(), work)
}

/// Lends the value in `slot` to `work` as another type, and puts it back afterwards, also
/// when `work` panics: a buffer taken out and never returned (a resident key's) would fail
/// every later partition that uses it with "in use".
fn lend<Raw, Typed, R>(
    slot: &mut Option<Raw>,
    device: usize,
    to: impl FnOnce(Raw) -> Typed,
    back: impl Fn(Typed) -> Raw,
    work: impl FnOnce(&mut Typed) -> Result<R>,
) -> Result<R> {
    struct PutBack<'a, Raw, Typed, F: Fn(Typed) -> Raw> {
        slot: &'a mut Option<Raw>,
        lent: Option<Typed>,
        back: F,
    }
    impl<Raw, Typed, F: Fn(Typed) -> Raw> Drop for PutBack<'_, Raw, Typed, F> {
        fn drop(&mut self) {
            if let Some(lent) = self.lent.take() {
                *self.slot = Some((self.back)(lent));
            }
        }
    }
    let raw = slot.take().ok_or_else(|| Error::Device {
        device,
        operation: "use buffer",
        message: "the buffer is in use by other work".into(),
    })?;
    let mut guard = PutBack { lent: Some(to(raw)), slot, back };
    work(guard.lent.as_mut().expect("lent until the guard drops"))
}

impl Device for CudaDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            ordinal: self.ordinal,
            name: self.gpu().map(|g| g.name()).unwrap_or_else(|_| "CUDA device (out of service)".into()),
            capacity_bytes: self.total_bytes,
            device_clock: true,
            startup: self.gpu().ok().map(|g| g.startup()),
        }
    }

    fn allocated_bytes(&self) -> u64 {
        self.allocated.load(Ordering::SeqCst)
    }

    fn free_bytes(&self) -> Option<u64> {
        self.gpu().and_then(|g| g.memory_info()).ok().map(|(free, _)| free as u64)
    }

    fn allocate(&self, bytes: u64) -> Result<DeviceBuffer> {
        let generation = self.generation.read();
        let allocator = &generation.as_ref().ok_or_else(|| self.out_of_service())?.allocator;
        let buffer = allocator.alloc::<u8>(bytes as usize)?;
        allocator.synchronize()?;
        let memory = CudaMemory {
            buffer: Mutex::new(Some(buffer)),
            _counted: CountedBytes::count(&self.allocated, bytes),
            results: Mutex::new(MsmResultSlots::default()),
        };
        Ok(DeviceBuffer::new(self.ordinal, bytes, Arc::new(memory)))
    }

    fn pin_host(&self, range: HostRange) -> Result<PinOutcome> {
        // SAFETY: the pinned registry hands us ranges of live host allocations that it keeps
        // alive (through its leases) until it unpins them; we only register, never read.
        let slice = unsafe { std::slice::from_raw_parts(range.addr as *const u8, range.len) };
        match self.gpu()?.register_host(slice)? {
            HostRegistration::Registered(pinned) => {
                self.registered.lock().insert(range, pinned);
                Ok(PinOutcome::Pinned)
            }
            HostRegistration::AlreadyRegistered => Ok(PinOutcome::AlreadyPinned),
        }
    }

    fn unpin_host(&self, range: HostRange) -> Result<()> {
        match self.registered.lock().remove(&range) {
            Some(pinned) => pinned.unregister(),
            None => Err(Error::Device {
                device: self.ordinal,
                operation: "unpin host memory",
                message: format!("range {:#x}+{} was not pinned by this device", range.addr, range.len),
            }),
        }
    }

    fn new_stream(&self, name: &str, timeline: TimelineRecorder) -> Result<Arc<dyn DeviceStream>> {
        let lanes = Arc::new(Mutex::new(Some(Lanes::on(&self.gpu()?)?)));
        self.lanes.lock().push(Arc::downgrade(&lanes));
        Ok(Arc::new(CudaStream { queue: HostQueue::start(self.ordinal, name, timeline)?, lanes, device: self.ordinal }))
    }

    fn release_cached(&self) {
        let generation = self.generation.read();
        let Some(generation) = generation.as_ref() else { return };
        generation.gpu.clear_caches();
        // Freed stream-ordered blocks go back to the driver at a synchronisation.
        if let Err(err) = generation.gpu.synchronize().and_then(|_| generation.allocator.synchronize()) {
            tracing::warn!(%err, "synchronising before releasing cached memory failed");
        }
    }

    fn recover(&self) -> Result<()> {
        self.recreate_context()
    }

    fn workspace_bytes(&self, log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64 {
        workspace_bytes(log_n, max_msm_len, msm_pass_points)
    }

    fn min_msm_pass_points(&self) -> usize {
        MSM_PASS_POINTS
    }

    fn fixed_base_g1(&self, base: &FixedBase<G1Projective>, scalars: &[Scalar]) -> Result<Vec<G1Affine>> {
        super::setup::fixed_base_g1(&self.gpu()?, base.table(), scalars)
    }

    fn fixed_base_g2(&self, base: &FixedBase<G2Projective>, scalars: &[Scalar]) -> Result<Vec<G2Affine>> {
        super::setup::fixed_base_g2(&self.gpu()?, base.table(), scalars)
    }

    fn arithmetic_rates(&self) -> Result<Option<ArithmeticRates>> {
        // Enough threads for several waves on the largest GPUs (132 SMs × 2048 threads), and
        // a fraction of a second of multiplications there: long enough to time, short enough
        // to run before every bench.
        let stream = self.gpu()?.new_stream()?;
        let fr_mul_per_s = stream.field_mul_rate(ProbeField::Fr, 132 * 2048 * 4, 2000)?;
        let fp_mul_per_s = stream.field_mul_rate(ProbeField::Fp, 132 * 2048 * 2, 1000)?;
        let fp_sqr_per_s = stream.field_mul_rate(ProbeField::FpSquaring, 132 * 2048 * 2, 1000)?;
        Ok(Some(ArithmeticRates { fr_mul_per_s, fp_mul_per_s, fp_sqr_per_s }))
    }
}

/// The scratch a partition's kernels allocate on a GPU as they run, which the budget reserves
/// (`Device::workspace_bytes`): the NTT's twiddles, and the scratch of the largest MSM, of
/// `max_msm_len` points in passes of `msm_pass_points` (msm.rs).
pub fn workspace_bytes(log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64 {
    scalar_bytes(1usize << log_n) / 2 + msm_scratch_bytes(max_msm_len, msm_pass_points) + (64 << 20)
}

/// A CUDA stream and the clock that maps its events onto the host's.
struct GpuWork {
    stream: GpuStream,
    clock: GpuClock,
}

impl GpuWork {
    /// Runs `work` on the stream between two timed events and waits for it.
    fn timed(&self, work: impl FnOnce(&GpuStream) -> Result<()>) -> Result<DeviceTimes> {
        let start = self.stream.record()?;
        work(&self.stream)?;
        let end = self.stream.record()?;
        self.stream.synchronize()?;
        Ok(Some((self.clock.host_time(&start)?, self.clock.host_time(&end)?)))
    }
}

/// A pipeline stream: a host queue that runs each piece of work on one of two CUDA streams,
/// the urgent one when the work's partition is the oldest in flight on the device (see
/// [`crate::backend::AdmissionLine`]), the default one otherwise. The queue runs one piece at
/// a time and waits for it, so switching streams between pieces keeps their order.
struct CudaStream {
    queue: HostQueue,
    /// None while the device's context is re-created.
    lanes: Arc<Mutex<Option<Lanes>>>,
    device: usize,
}

/// The two CUDA streams a pipeline stream runs its work on.
struct Lanes {
    gpu: Arc<GpuWork>,
    urgent: Arc<GpuWork>,
}

impl Lanes {
    fn on(gpu: &Arc<GpuContext>) -> Result<Lanes> {
        let work_on = |stream: GpuStream| -> Result<Arc<GpuWork>> {
            let clock = stream.clock()?;
            Ok(Arc::new(GpuWork { stream, clock }))
        };
        Ok(Lanes { gpu: work_on(gpu.new_stream()?)?, urgent: work_on(gpu.new_urgent_stream()?)? })
    }
}

impl CudaStream {
    /// Queues `work` on the streams of the context current when it is queued.
    fn enqueue(&self, tag: &WorkTag, work: impl FnOnce(&GpuStream) -> Result<()> + Send + 'static) -> Result<()> {
        let (gpu, urgent) = match &*self.lanes.lock() {
            Some(lanes) => (lanes.gpu.clone(), lanes.urgent.clone()),
            None => {
                return Err(Error::DeviceBroken {
                    device: self.device,
                    message: "its context is being re-created, or could not be".into(),
                })
            }
        };
        self.queue.enqueue_work(tag, move |oldest| if oldest { urgent.timed(work) } else { gpu.timed(work) })
    }

    /// Copies `src[range]` to the start of `dst`; the rest of `dst` is zeroed.
    fn upload<T: super::context::DeviceElement>(
        &self,
        src: Arc<dyn AsRef<[T]> + Send + Sync>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        let dst = dst.clone();
        self.enqueue(tag, move |stream| {
            let all = (*src).as_ref();
            let values = all.get(range.clone()).ok_or_else(|| Error::Device {
                device: dst.device(),
                operation: "copy to device",
                message: format!("values {range:?} of a vector of {}", all.len()),
            })?;
            with_buffer::<T, _>(&dst, |buffer| {
                if values.len() < buffer.len() {
                    // The rest of the buffer must read as zeros (the domain's padding).
                    with_zeros(stream, buffer)?;
                }
                stream.upload_into(values, buffer)
            })
        })
    }
}

/// Zero-fills a buffer through a u32 view of it.
fn with_zeros<T: super::context::DeviceElement>(stream: &GpuStream, buffer: &mut GpuBuffer<T>) -> Result<()> {
    let taken = std::mem::replace(buffer, stream.alloc::<T>(0)?);
    let mut words = taken.retype::<u32>();
    let filled = stream.fill_u32(&mut words, 0);
    *buffer = words.retype::<T>();
    filled
}

impl DeviceStream for CudaStream {
    fn name(&self) -> &str {
        self.queue.name()
    }

    fn wait_event(&self, event: &StageEvent) -> Result<()> {
        self.queue.wait_event(event)
    }

    fn record_event(&self) -> Result<StageEvent> {
        self.queue.record_event()
    }

    fn break_context(&self, tag: &WorkTag) -> Result<bool> {
        self.enqueue(tag, |stream| stream.launch("debug_trap", 1, 1, &[]))?;
        Ok(true)
    }

    fn copy_scalars_to_device(&self, src: HostScalars, dst: &DeviceBuffer, tag: &WorkTag) -> Result<()> {
        let all = 0..(*src).as_ref().len();
        self.upload(src, all, dst, tag)
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
        let (src, packed, dst) = (src.clone(), packed.clone(), dst.clone());
        self.enqueue(tag, move |stream| {
            with_buffer::<Scalar, _>(&src, |values| {
                with_buffer::<Scalar, _>(&dst, |out| {
                    with_buffer::<u32, _>(&packed, |words| {
                        stream.select_scalars(values, &selection, words, out, dst_start)
                    })
                })
            })
        })
    }

    fn copy_g1_to_device(
        &self,
        src: Arc<Vec<G1Affine>>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        self.upload(src, range, dst, tag)
    }

    fn copy_g2_to_device(
        &self,
        src: Arc<Vec<G2Affine>>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        self.upload(src, range, dst, tag)
    }

    fn quotient(&self, a: &DeviceBuffer, b: &DeviceBuffer, c: &DeviceBuffer, log_n: u32, tag: &WorkTag) -> Result<()> {
        let (a, b, c) = (a.clone(), b.clone(), c.clone());
        self.enqueue(tag, move |stream| {
            with_buffer::<Scalar, _>(&a, |a| {
                with_buffer::<Scalar, _>(&b, |b| with_buffer::<Scalar, _>(&c, |c| stream.quotient_h(a, b, c, log_n)))
            })
        })
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
        let (bases, scalars, results) = (bases.clone(), scalars.clone(), results.clone());
        self.enqueue(tag, move |stream| {
            let opts = MsmOptions { ones_fast_path: true, pass_points: Some(pass_points), ..MsmOptions::default() };
            let out = memory_of(&results)?;
            let len = terms.len();
            with_buffer::<Scalar, _>(&scalars, |all_scalars| {
                // A chunk of a streamed key pairs with scalars further in: copy them to the front
                // of a scratch buffer (a device-to-device copy, microseconds).
                let shifted = match terms.start {
                    0 => None,
                    start => {
                        let mut chunk = stream.alloc::<Scalar>(len)?;
                        stream.copy_from_offset(all_scalars, start, &mut chunk)?;
                        Some(chunk)
                    }
                };
                let scalars = shifted.as_ref().unwrap_or(all_scalars);
                match (group, slot) {
                    (Group::G2, MsmSlot::BG2) => {
                        let sum = with_buffer::<G2Affine, _>(&bases, |bases| stream.msm_g2(bases, scalars, len, opts))?;
                        out.results.lock().add_b_g2(sum);
                        Ok(())
                    }
                    (Group::G1, slot) if slot != MsmSlot::BG2 => {
                        let sum = with_buffer::<G1Affine, _>(&bases, |bases| stream.msm_g1(bases, scalars, len, opts))?;
                        out.results.lock().add_g1(slot, sum)
                    }
                    _ => Err(Error::Device {
                        device: stream.gpu().ordinal(),
                        operation: "msm",
                        message: format!("a {group:?} MSM cannot fill the {slot:?} result"),
                    }),
                }
            })
        })
    }

    fn copy_matrices_to_device(
        &self,
        matrices: Arc<ConstraintMatrices>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        let layout = MatricesLayout::of(&matrices);
        if dst.bytes() < layout.bytes {
            return Err(Error::Device {
                device: dst.device(),
                operation: "copy constraint matrices to device",
                message: format!("a buffer of {} bytes for matrices of {} bytes", dst.bytes(), layout.bytes),
            });
        }
        let dst = dst.clone();
        self.enqueue(tag, move |stream| {
            with_buffer::<u8, _>(&dst, |buffer| stream.upload_matrices(&matrices, &layout, buffer))
        })
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
        matrices.check_evaluation(inputs, aux, [a, b, c])?;
        let (resident, layout) = (matrices.buffer().clone(), *matrices.layout());
        let (inputs, aux, a, b, c) = (inputs.clone(), aux.clone(), a.clone(), b.clone(), c.clone());
        self.enqueue(tag, move |stream| {
            with_buffer::<u8, _>(&resident, |resident| {
                with_buffer::<Scalar, _>(&inputs, |inputs| {
                    with_buffer::<Scalar, _>(&aux, |aux| {
                        with_buffer::<Scalar, _>(&a, |a| {
                            with_buffer::<Scalar, _>(&b, |b| {
                                with_buffer::<Scalar, _>(&c, |c| {
                                    stream.evaluate_constraints(resident, &layout, inputs, aux, [a, b, c])
                                })
                            })
                        })
                    })
                })
            })
        })
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
        check_satisfaction_buffers(a, b, c, len)?;
        let (a, b, c) = (a.clone(), b.clone(), c.clone());
        let device = self.device;
        self.enqueue(tag, move |stream| {
            let first = with_buffer::<Scalar, _>(&a, |a| {
                with_buffer::<Scalar, _>(&b, |b| {
                    with_buffer::<Scalar, _>(&c, |c| stream.first_unsatisfied(a, b, c, len))
                })
            })?;
            judge_satisfaction(device, first, len, &*host)
        })
    }

    fn copy_scalars_to_host(&self, src: &DeviceBuffer, len: usize, tag: &WorkTag) -> Result<PendingScalars> {
        let src = src.clone();
        let landed: Arc<Mutex<Option<Vec<Scalar>>>> = Arc::default();
        let landing = landed.clone();
        let device = self.queue.device();
        self.enqueue(tag, move |stream| {
            let values = with_buffer::<Scalar, _>(&src, |buffer| stream.download_first(buffer, len))?;
            *landing.lock() = Some(values);
            Ok(())
        })?;
        Ok(PendingScalars::new(move || {
            landed.lock().take().ok_or_else(|| Error::Device {
                device,
                operation: "copy scalars to host",
                message: "the scalars were not copied".into(),
            })
        }))
    }

    fn copy_results_to_host(&self, results: &DeviceBuffer, tag: &WorkTag) -> Result<PendingResults> {
        let results = results.clone();
        let landed: Arc<Mutex<Option<MsmResultSlots>>> = Arc::default();
        let landing = landed.clone();
        let device = self.queue.device();
        self.enqueue(tag, move |_| {
            *landing.lock() = Some(*memory_of(&results)?.results.lock());
            Ok(())
        })?;
        Ok(PendingResults::new(move || {
            let slots = landed.lock().take().ok_or_else(|| Error::Device {
                device,
                operation: "copy results to host",
                message: "the results were not copied".into(),
            })?;
            slots.complete(device)
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::lend;
    use crate::error::Error;

    #[test]
    fn a_lent_buffer_comes_back_after_success_error_and_panic() {
        let mut slot = Some(7u64);
        let doubled = lend(&mut slot, 0, |v| v as i64, |v| v as u64, |v| Ok(*v * 2)).unwrap();
        assert_eq!((doubled, slot), (14, Some(7)));
        let failed = lend(
            &mut slot,
            0,
            |v| v as i64,
            |v| v as u64,
            |v| {
                *v += 1;
                Err::<(), _>(Error::Internal("kernel failed".into()))
            },
        );
        assert!(failed.is_err());
        assert_eq!(slot, Some(8), "a failed use must give the buffer back");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            lend(
                &mut slot,
                0,
                |v| v as i64,
                |v| v as u64,
                |_| -> crate::error::Result<()> { panic!("a panicking kernel wrapper") },
            )
        }));
        assert!(panicked.is_err());
        assert_eq!(slot, Some(8), "a panic while the buffer was lent lost it");
        // The negative twin: an empty slot (the buffer really is elsewhere) is refused.
        let mut empty: Option<u64> = None;
        assert!(matches!(lend(&mut empty, 3, |v| v, |v| v, |_| Ok(())), Err(Error::Device { device: 3, .. })));
    }
}
