//! The CPU model of a device: the reference maths behind the device seam.
//!
//! It behaves like a GPU where that matters to the pipeline: its memory has a capacity and an
//! allocation beyond it fails as an out-of-memory; pinning the same range twice answers
//! "already pinned"; each stream is a thread that runs its queued work in order; events
//! complete when a stream reaches them. Work runs the CPU reference maths, so results are
//! exactly what the CUDA device must produce too.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use blstrs::{G1Affine, G2Affine, Scalar};
use parking_lot::Mutex;
use rayon::prelude::*;

use super::host_queue::HostQueue;
use super::{
    check_satisfaction_buffers, judge_satisfaction, CountedBytes, Device, DeviceBuffer, DeviceInfo, DeviceStream,
    Group, HostConstraints, HostRange, HostScalars, MsmResultSlots, MsmSlot, PendingResults, PendingScalars,
    PinOutcome, ResidentMatrices, StageEvent, WorkTag,
};
use crate::circuit::{ConstraintMatrices, PackedDensity};
use crate::error::{Error, Result};
use crate::math::{msm, quotient};
use crate::plan::{g1_bytes, g2_bytes, scalar_bytes, MatricesLayout};
use crate::timeline::TimelineRecorder;

/// A modelled device with `capacity_bytes` of memory.
pub struct CpuDevice {
    ordinal: usize,
    capacity_bytes: u64,
    allocated: Arc<AtomicU64>,
    pinned: Mutex<HashSet<HostRange>>,
}

impl CpuDevice {
    pub fn new(ordinal: usize, capacity_bytes: u64) -> CpuDevice {
        CpuDevice {
            ordinal,
            capacity_bytes,
            allocated: Arc::new(AtomicU64::new(0)),
            pinned: Mutex::new(HashSet::new()),
        }
    }

    /// Host ranges currently page-locked on this device (a leak check).
    pub fn pinned_ranges(&self) -> usize {
        self.pinned.lock().len()
    }
}

/// What a modelled allocation holds. Typed, because the model computes on real values.
#[derive(Default)]
enum Contents {
    #[default]
    Empty,
    Scalars(Vec<Scalar>),
    G1(Vec<G1Affine>),
    G2(Vec<G2Affine>),
    Results(Box<MsmResultSlots>),
    /// A circuit shape's constraint matrices, in the bytes [`MatricesLayout`] gives them.
    Matrices(Arc<ConstraintMatrices>),
}

/// One modelled allocation; returns its bytes to the device when dropped.
struct CpuMemory {
    _counted: CountedBytes,
    contents: Mutex<Contents>,
}

fn memory_of(buffer: &DeviceBuffer) -> Result<&CpuMemory> {
    buffer.memory::<CpuMemory>("CPU")
}

impl Device for CpuDevice {
    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            ordinal: self.ordinal,
            name: format!("cpu-model-{}", self.ordinal),
            capacity_bytes: self.capacity_bytes,
            device_clock: false,
            startup: None,
        }
    }

    fn allocated_bytes(&self) -> u64 {
        self.allocated.load(Ordering::SeqCst)
    }

    fn free_bytes(&self) -> Option<u64> {
        Some(self.capacity_bytes.saturating_sub(self.allocated_bytes()))
    }

    fn allocate(&self, bytes: u64) -> Result<DeviceBuffer> {
        let reserved = self.allocated.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
            used.checked_add(bytes).filter(|&total| total <= self.capacity_bytes)
        });
        if reserved.is_err() {
            return Err(Error::OutOfMemory { device: self.ordinal, requested_bytes: bytes });
        }
        let memory = CpuMemory {
            _counted: CountedBytes::already_counted(&self.allocated, bytes),
            contents: Mutex::new(Contents::Empty),
        };
        Ok(DeviceBuffer::new(self.ordinal, bytes, Arc::new(memory)))
    }

    fn pin_host(&self, range: HostRange) -> Result<PinOutcome> {
        if self.pinned.lock().insert(range) {
            Ok(PinOutcome::Pinned)
        } else {
            Ok(PinOutcome::AlreadyPinned)
        }
    }

    fn unpin_host(&self, range: HostRange) -> Result<()> {
        if self.pinned.lock().remove(&range) {
            Ok(())
        } else {
            Err(Error::Device {
                device: self.ordinal,
                operation: "unpin host memory",
                message: format!("range {:#x}+{} is not pinned", range.addr, range.len),
            })
        }
    }

    fn new_stream(&self, name: &str, timeline: TimelineRecorder) -> Result<Arc<dyn DeviceStream>> {
        let scratch =
            Scratch { ordinal: self.ordinal, capacity_bytes: self.capacity_bytes, allocated: self.allocated.clone() };
        Ok(Arc::new(CpuStream { queue: HostQueue::start(self.ordinal, name, timeline)?, scratch }))
    }

    fn workspace_bytes(&self, log_n: u32, _max_msm_len: usize, _msm_pass_points: usize) -> u64 {
        // Twiddle factors for the domain, which the quotient allocates while it runs (as the
        // CUDA kernels allocate theirs); the CPU's MSM needs no device scratch.
        scalar_bytes(1usize << log_n)
    }
}

/// Device memory a modelled kernel allocates for itself while it runs, as the CUDA kernels
/// do: from the same capacity as the buffers, so scratch the budget did not plan for runs
/// the model out of memory just as it would a GPU.
#[derive(Clone)]
struct Scratch {
    ordinal: usize,
    capacity_bytes: u64,
    allocated: Arc<AtomicU64>,
}

impl Scratch {
    fn take(&self, bytes: u64) -> Result<CountedBytes> {
        self.allocated
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |used| {
                used.checked_add(bytes).filter(|&total| total <= self.capacity_bytes)
            })
            .map_err(|_| Error::OutOfMemory { device: self.ordinal, requested_bytes: bytes })?;
        Ok(CountedBytes::already_counted(&self.allocated, bytes))
    }
}

/// A modelled stream: a thread that runs its queued work in order.
struct CpuStream {
    queue: HostQueue,
    scratch: Scratch,
}

impl CpuStream {
    /// Queues work timed on the host (the model has no device clock).
    fn enqueue_work(&self, tag: &WorkTag, work: impl FnOnce() -> Result<()> + Send + 'static) -> Result<()> {
        self.queue.enqueue_work(tag, move |_oldest| work().map(|()| None))
    }
}

fn too_small(buffer: &DeviceBuffer, needed: u64) -> Error {
    Error::Device {
        device: buffer.device(),
        operation: "copy to device",
        message: format!("buffer of {} bytes is smaller than the {needed} bytes copied", buffer.bytes()),
    }
}

fn store(dst: &DeviceBuffer, needed: u64, contents: Contents) -> Result<()> {
    if needed > dst.bytes() {
        return Err(too_small(dst, needed));
    }
    *memory_of(dst)?.contents.lock() = contents;
    Ok(())
}

fn take_scalars(buffer: &DeviceBuffer, what: &str) -> Result<Vec<Scalar>> {
    match std::mem::take(&mut *memory_of(buffer)?.contents.lock()) {
        Contents::Scalars(v) => Ok(v),
        _ => Err(not_holding(buffer, what)),
    }
}

/// The first `len` scalars a buffer holds; device memory past what was written reads as zeros.
fn scalars_prefix(buffer: &DeviceBuffer, len: usize, what: &str) -> Result<Vec<Scalar>> {
    if buffer.bytes() < scalar_bytes(len) {
        return Err(Error::Device {
            device: buffer.device(),
            operation: "read device buffer",
            message: format!("{len} scalars read from a buffer of {} bytes", buffer.bytes()),
        });
    }
    let contents = memory_of(buffer)?.contents.lock();
    let mut values = match &*contents {
        Contents::Scalars(v) => v[..len.min(v.len())].to_vec(),
        Contents::Empty => Vec::new(),
        _ => return Err(not_holding(buffer, what)),
    };
    values.resize(len, Scalar::from(0u64));
    Ok(values)
}

fn not_holding(buffer: &DeviceBuffer, what: &str) -> Error {
    Error::Device {
        device: buffer.device(),
        operation: "read device buffer",
        message: format!("the buffer does not hold {what}"),
    }
}

impl DeviceStream for CpuStream {
    fn name(&self) -> &str {
        self.queue.name()
    }

    fn wait_event(&self, event: &StageEvent) -> Result<()> {
        self.queue.wait_event(event)
    }

    fn record_event(&self) -> Result<StageEvent> {
        self.queue.record_event()
    }

    fn copy_scalars_to_device(&self, src: HostScalars, dst: &DeviceBuffer, tag: &WorkTag) -> Result<()> {
        let dst = dst.clone();
        self.enqueue_work(tag, move || {
            let values = (*src).as_ref();
            store(&dst, scalar_bytes(values.len()), Contents::Scalars(values.to_vec()))
        })
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
        self.enqueue_work(tag, move || {
            let needed = PackedDensity::device_bytes(selection.len());
            if packed.bytes() < needed {
                return Err(too_small(&packed, needed));
            }
            let end = dst_start + selection.taken();
            if dst.bytes() < scalar_bytes(end) {
                return Err(too_small(&dst, scalar_bytes(end)));
            }
            if std::ptr::eq(memory_of(&src)?, memory_of(&dst)?) {
                return Err(Error::Device {
                    device: dst.device(),
                    operation: "select scalars",
                    message: "the selection would overwrite the values it reads".into(),
                });
            }
            let source = memory_of(&src)?.contents.lock();
            let Contents::Scalars(values) = &*source else { return Err(not_holding(&src, "scalars")) };
            let mut target = memory_of(&dst)?.contents.lock();
            if !matches!(*target, Contents::Scalars(_)) {
                *target = Contents::Scalars(Vec::new());
            }
            let Contents::Scalars(out) = &mut *target else { unreachable!("set just above") };
            // Device memory past what was written reads as zeros, as after an upload.
            out.resize(out.len().max(end), Scalar::from(0u64));
            selection.select_into(values, &mut out[dst_start..end])
        })
    }

    fn copy_g1_to_device(
        &self,
        src: Arc<Vec<G1Affine>>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        let dst = dst.clone();
        self.enqueue_work(tag, move || {
            let points = src.get(range.clone()).ok_or_else(|| out_of_range(&dst, &range, src.len()))?;
            store(&dst, g1_bytes(points.len()), Contents::G1(points.to_vec()))
        })
    }

    fn copy_g2_to_device(
        &self,
        src: Arc<Vec<G2Affine>>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        let dst = dst.clone();
        self.enqueue_work(tag, move || {
            let points = src.get(range.clone()).ok_or_else(|| out_of_range(&dst, &range, src.len()))?;
            store(&dst, g2_bytes(points.len()), Contents::G2(points.to_vec()))
        })
    }

    fn quotient(&self, a: &DeviceBuffer, b: &DeviceBuffer, c: &DeviceBuffer, log_n: u32, tag: &WorkTag) -> Result<()> {
        let (a, b, c) = (a.clone(), b.clone(), c.clone());
        let scratch = self.scratch.clone();
        self.enqueue_work(tag, move || {
            let n = 1usize << log_n;
            let _twiddles = scratch.take(scalar_bytes(n))?;
            let mut evaluations = [take_scalars(&a, "a")?, take_scalars(&b, "b")?, take_scalars(&c, "c")?];
            for values in evaluations.iter_mut() {
                if values.len() > n {
                    return Err(Error::Device {
                        device: a.device(),
                        operation: "quotient",
                        message: format!("{} evaluations do not fit a domain of 2^{log_n}", values.len()),
                    });
                }
                values.resize(n, Scalar::from(0u64));
            }
            let [ea, eb, ec] = evaluations;
            let h = quotient::quotient_h(ea, eb, ec)?;
            *memory_of(&a)?.contents.lock() = Contents::Scalars(h);
            Ok(())
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
        _pass_points: usize,
        tag: &WorkTag,
    ) -> Result<()> {
        let (bases, scalars, results) = (bases.clone(), scalars.clone(), results.clone());
        self.enqueue_work(tag, move || {
            let len = terms.len();
            let scalar_contents = memory_of(&scalars)?.contents.lock();
            let Contents::Scalars(scalar_values) = &*scalar_contents else {
                return Err(not_holding(&scalars, "scalars"));
            };
            let scalar_values = scalar_values.get(terms.clone()).ok_or_else(|| short(&scalars, terms.end))?;
            let base_contents = memory_of(&bases)?.contents.lock();
            let mut out = memory_of(&results)?.contents.lock();
            if !matches!(*out, Contents::Results(_)) {
                *out = Contents::Results(Box::default());
            }
            let Contents::Results(slots) = &mut *out else { unreachable!("set just above") };
            match (group, &*base_contents) {
                (Group::G1, Contents::G1(points)) => {
                    let points = points.get(..len).ok_or_else(|| short(&bases, len))?;
                    slots.add_g1(slot, msm::msm_g1(points, scalar_values))?;
                }
                (Group::G2, Contents::G2(points)) if slot == MsmSlot::BG2 => {
                    let points = points.get(..len).ok_or_else(|| short(&bases, len))?;
                    slots.add_b_g2(msm::msm_g2(points, scalar_values));
                }
                _ => return Err(not_holding(&bases, "points of the requested group")),
            }
            Ok(())
        })
    }

    fn copy_matrices_to_device(
        &self,
        matrices: Arc<ConstraintMatrices>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()> {
        let dst = dst.clone();
        self.enqueue_work(tag, move || {
            let bytes = MatricesLayout::of(&matrices).bytes;
            store(&dst, bytes, Contents::Matrices(matrices))
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
        let (inputs, aux, outputs) = (inputs.clone(), aux.clone(), [a.clone(), b.clone(), c.clone()]);
        self.enqueue_work(tag, move || {
            let recorded = match &*memory_of(&resident)?.contents.lock() {
                Contents::Matrices(m) => m.clone(),
                _ => return Err(not_holding(&resident, "constraint matrices")),
            };
            // What was uploaded is what the layout was made from; anything else is a buffer
            // that other work overwrote.
            if MatricesLayout::of(&recorded) != layout {
                return Err(not_holding(&resident, "the constraint matrices of this layout"));
            }
            let w_inputs = scalars_prefix(&inputs, layout.num_inputs, "inputs")?;
            let w_aux = scalars_prefix(&aux, layout.num_aux, "aux")?;
            let (ea, eb, ec) = recorded.evaluate(&w_inputs, &w_aux)?;
            for (out, values) in outputs.iter().zip([ea, eb, ec]) {
                // The values written, then zeros to the end of the buffer, as on a GPU.
                store(out, scalar_bytes(values.len()), Contents::Scalars(values))?;
            }
            Ok(())
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
        self.enqueue_work(tag, move || {
            let device = a.device();
            let values = [scalars_prefix(&a, len, "a")?, scalars_prefix(&b, len, "b")?, scalars_prefix(&c, len, "c")?];
            judge_satisfaction(device, first_unsatisfied(&values[0], &values[1], &values[2]), len, &*host)
        })
    }

    fn copy_scalars_to_host(&self, src: &DeviceBuffer, len: usize, tag: &WorkTag) -> Result<PendingScalars> {
        let src = src.clone();
        let landed: Arc<Mutex<Option<Vec<Scalar>>>> = Arc::default();
        let landing = landed.clone();
        let device = self.queue.device();
        self.enqueue_work(tag, move || {
            *landing.lock() = Some(scalars_prefix(&src, len, "scalars")?);
            Ok(())
        })?;
        Ok(PendingScalars::new(move || {
            landed.lock().take().ok_or_else(|| missing(device, "the scalars were not copied"))
        }))
    }

    fn copy_results_to_host(&self, results: &DeviceBuffer, tag: &WorkTag) -> Result<PendingResults> {
        let results = results.clone();
        let landed: Arc<Mutex<Option<MsmResultSlots>>> = Arc::default();
        let landing = landed.clone();
        let device = self.queue.device();
        self.enqueue_work(tag, move || {
            let contents = memory_of(&results)?.contents.lock();
            let Contents::Results(slots) = &*contents else {
                return Err(not_holding(&results, "MSM results"));
            };
            *landing.lock() = Some(**slots);
            Ok(())
        })?;
        Ok(PendingResults::new(move || {
            let slots = landed.lock().take().ok_or_else(|| missing(device, "the results were not copied"))?;
            slots.complete(device)
        }))
    }
}

/// The first `i` where `a[i]·b[i] ≠ c[i]`, over the shortest of the three: the reference for
/// the devices' satisfaction check ([`DeviceStream::check_satisfied`]). In parallel.
pub fn first_unsatisfied(a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Option<usize> {
    let len = a.len().min(b.len()).min(c.len());
    (0..len).into_par_iter().find_first(|&i| a[i] * b[i] != c[i])
}

fn out_of_range(dst: &DeviceBuffer, range: &Range<usize>, len: usize) -> Error {
    Error::Device {
        device: dst.device(),
        operation: "copy to device",
        message: format!("points {range:?} of a vector of {len}"),
    }
}

fn short(buffer: &DeviceBuffer, len: usize) -> Error {
    Error::Device {
        device: buffer.device(),
        operation: "msm",
        message: format!("the buffer holds fewer than the {len} elements the MSM reads"),
    }
}

fn missing(device: usize, what: &str) -> Error {
    Error::Device { device, operation: "copy results to host", message: what.to_string() }
}
