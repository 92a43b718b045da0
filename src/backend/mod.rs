//! The seam between the pipeline and a device.
//!
//! The actors never touch a GPU directly: they allocate [`DeviceBuffer`]s, enqueue work on
//! [`DeviceStream`]s and hand each other [`StageEvent`]s. Two devices sit behind the seam:
//! [`cpu::CpuDevice`], which models a GPU on the CPU (a memory capacity that fails like an
//! out-of-memory, streams that run queued work in order on their own thread, events), so
//! that the budget, the overlap and every failure path run in CI; and the CUDA device.
//! [`faults::FaultyDevice`] wraps either one and injects failures at a seeded rate.

pub mod cpu;
pub mod cuda;
mod event;
pub mod faults;
pub mod host_queue;
mod work;

use std::any::Any;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

pub use event::StageEvent;
pub use work::{
    AdmissionLine, AdmissionTicket, FailureSlot, MsmResultSlots, MsmSlot, PendingResults, Seniority, WorkTag,
};

use crate::circuit::{ConstraintMatrices, PackedDensity};
use crate::error::{Error, Result};
use crate::math::FixedBase;
use crate::plan::{scalar_bytes, MatricesLayout};
use crate::timeline::TimelineRecorder;

/// Which backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    /// CUDA when a GPU and driver are present, else the CPU (and say so).
    Auto,
    /// The CPU model of a device.
    Cpu,
    /// NVIDIA GPUs through CUDA; fails with a clear error when none is usable.
    Cuda,
}

/// Which devices a prover uses.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum DeviceSelection {
    #[default]
    All,
    Only(Vec<usize>),
}

impl std::str::FromStr for DeviceSelection {
    type Err = Error;
    fn from_str(s: &str) -> Result<DeviceSelection> {
        if s.trim() == "all" {
            return Ok(DeviceSelection::All);
        }
        s.split(',')
            .map(|d| {
                d.trim()
                    .parse::<usize>()
                    .map_err(|_| Error::Config(format!("bad device list {s:?}: use `all` or `0,1`")))
            })
            .collect::<Result<Vec<_>>>()
            .map(DeviceSelection::Only)
    }
}

impl DeviceSelection {
    /// Whether device `ordinal` is selected.
    pub fn includes(&self, ordinal: usize) -> bool {
        match self {
            DeviceSelection::All => true,
            DeviceSelection::Only(list) => list.contains(&ordinal),
        }
    }
}

/// The devices the CPU backend models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuModel {
    /// How many devices.
    pub devices: usize,
    /// Memory of each.
    pub device_bytes: u64,
}

/// Opens the selected devices of `backend`; `Auto` takes CUDA's GPUs when any is usable and
/// falls back to the CPU model, and says so. The kind returned is the backend opened.
pub fn open_devices(
    backend: BackendKind,
    selection: &DeviceSelection,
    cpu: CpuModel,
) -> Result<(BackendKind, Vec<Arc<dyn Device>>)> {
    let cpu_devices = || -> Vec<Arc<dyn Device>> {
        (0..cpu.devices.max(1))
            .filter(|d| selection.includes(*d))
            .map(|d| Arc::new(cpu::CpuDevice::new(d, cpu.device_bytes)) as Arc<dyn Device>)
            .collect()
    };
    match backend {
        BackendKind::Cpu => Ok((BackendKind::Cpu, cpu_devices())),
        BackendKind::Cuda => Ok((BackendKind::Cuda, cuda::open_selected(selection)?)),
        BackendKind::Auto => match cuda::open_selected(selection) {
            Ok(devices) if !devices.is_empty() => Ok((BackendKind::Cuda, devices)),
            Ok(_) | Err(_) => {
                tracing::warn!("no usable CUDA GPU found; proving on the CPU backend");
                Ok((BackendKind::Cpu, cpu_devices()))
            }
        },
    }
}

/// What a device is and how much memory it offers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// Bytes of device memory that proving may use.
    pub capacity_bytes: u64,
    /// Whether stage times come from the device's own clock (CUDA events).
    pub device_clock: bool,
    /// What opening the device cost, for a GPU: the first proof of a process waits for it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub startup: Option<DeviceStartup>,
}

/// What opening a GPU cost, in seconds: creating its context, and loading the kernels from
/// where they came (`cubin`, `ptx`, `nvrtc`, or `nvrtc-cache` when every NVRTC module was read
/// from the kernel cache).
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceStartup {
    pub context_seconds: f64,
    pub kernels_seconds: f64,
    pub kernels_from: String,
}

/// A host address range to page-lock. Identity is the exact (address, length) pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostRange {
    pub addr: usize,
    pub len: usize,
}

impl HostRange {
    /// The range a slice occupies.
    pub fn of<T>(slice: &[T]) -> HostRange {
        HostRange { addr: slice.as_ptr() as usize, len: std::mem::size_of_val(slice) }
    }
}

/// What the driver said to a pin request. "Already registered" is state, not failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinOutcome {
    /// This call page-locked the range; it must be unpinned later.
    Pinned,
    /// The range was already page-locked by someone else; it must not be unpinned by us.
    AlreadyPinned,
}

/// Device memory. Cloning shares it; it is freed when the last handle is dropped, so work
/// queued on a stream keeps its buffers alive until it has run.
#[derive(Clone)]
pub struct DeviceBuffer {
    bytes: u64,
    device: usize,
    memory: Arc<dyn Any + Send + Sync>,
}

impl DeviceBuffer {
    /// Wraps a backend's own allocation. The allocation frees itself on drop.
    pub fn new(device: usize, bytes: u64, memory: Arc<dyn Any + Send + Sync>) -> DeviceBuffer {
        DeviceBuffer { bytes, device, memory }
    }
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    pub fn device(&self) -> usize {
        self.device
    }
    /// The backend's allocation, for the backend that made it; `backend` names that backend
    /// in the error a buffer of another backend gets.
    pub fn memory<T: Any + Send + Sync>(&self, backend: &str) -> Result<&T> {
        self.memory.downcast_ref::<T>().ok_or_else(|| crate::error::Error::Device {
            device: self.device,
            operation: "use buffer",
            message: format!("the buffer was not allocated by the {backend} device"),
        })
    }
}

/// The bytes of one allocation, counted on its device until the allocation is dropped: the
/// count behind `Device::allocated_bytes`, the leak check.
pub struct CountedBytes {
    bytes: u64,
    counter: Arc<std::sync::atomic::AtomicU64>,
}

impl CountedBytes {
    /// Records `bytes` already added to `counter`.
    pub fn already_counted(counter: &Arc<std::sync::atomic::AtomicU64>, bytes: u64) -> CountedBytes {
        CountedBytes { bytes, counter: counter.clone() }
    }

    /// Adds `bytes` to `counter`.
    pub fn count(counter: &Arc<std::sync::atomic::AtomicU64>, bytes: u64) -> CountedBytes {
        counter.fetch_add(bytes, std::sync::atomic::Ordering::SeqCst);
        CountedBytes::already_counted(counter, bytes)
    }
}

impl Drop for CountedBytes {
    fn drop(&mut self) {
        self.counter.fetch_sub(self.bytes, std::sync::atomic::Ordering::SeqCst);
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeviceBuffer({} bytes on device {})", self.bytes, self.device)
    }
}

/// A circuit shape's constraint matrices on one device, in one buffer laid out as
/// [`MatricesLayout`] says: made once per shape ([`ResidentMatrices::upload`]) and then used by
/// every partition's [`DeviceStream::evaluate_constraints`]. Cloning shares the buffer.
///
/// The fields are private: a value is only made by uploading a [`ConstraintMatrices`], whose
/// invariants (columns within the assignment, coefficient indices within the table) the
/// kernels rely on.
#[derive(Clone, Debug)]
pub struct ResidentMatrices {
    buffer: DeviceBuffer,
    layout: MatricesLayout,
}

impl ResidentMatrices {
    /// Allocates the matrices' buffer on `device` and queues their upload on `stream` (a
    /// stream of the same device); they are usable by work queued after it on that stream, or
    /// on another stream once it has waited for an event recorded after it.
    pub fn upload(
        device: &dyn Device,
        stream: &dyn DeviceStream,
        matrices: Arc<ConstraintMatrices>,
        tag: &WorkTag,
    ) -> Result<ResidentMatrices> {
        let layout = MatricesLayout::of(&matrices);
        let buffer = device.allocate(layout.bytes)?;
        stream.copy_matrices_to_device(matrices, &buffer, tag)?;
        Ok(ResidentMatrices { buffer, layout })
    }

    /// Where each part lies in [`ResidentMatrices::buffer`].
    pub fn layout(&self) -> &MatricesLayout {
        &self.layout
    }

    /// The device buffer holding them.
    pub fn buffer(&self) -> &DeviceBuffer {
        &self.buffer
    }

    /// Checks that `inputs` and `aux` hold a whole assignment for these matrices and that
    /// `a`, `b` and `c` each hold a value per constraint, all on the matrices' device: the
    /// typed error every backend returns before it queues an evaluation.
    pub fn check_evaluation(
        &self,
        inputs: &DeviceBuffer,
        aux: &DeviceBuffer,
        outputs: [&DeviceBuffer; 3],
    ) -> Result<()> {
        let l = &self.layout;
        let wanted = [
            ("inputs", inputs, l.num_inputs),
            ("aux", aux, l.num_aux),
            ("a", outputs[0], l.num_constraints),
            ("b", outputs[1], l.num_constraints),
            ("c", outputs[2], l.num_constraints),
        ];
        let mut seen: Vec<(&str, &DeviceBuffer)> = vec![("matrices", &self.buffer)];
        for (what, buffer, values) in wanted {
            let shared = seen.iter().find(|(_, other)| Arc::ptr_eq(&other.memory, &buffer.memory)).map(|s| s.0);
            seen.push((what, buffer));
            let problem = if let Some(other) = shared {
                // The kernels read some of these while they write others: one allocation in
                // two roles would be read after it was overwritten.
                format!("the {what} buffer is also the {other} buffer")
            } else if buffer.device() != self.buffer.device() {
                format!("the {what} buffer is on device {}, the matrices on {}", buffer.device(), self.buffer.device())
            } else if buffer.bytes() < scalar_bytes(values) {
                format!(
                    "the {what} buffer of {} bytes is smaller than the {values} scalars ({} bytes) the matrices need",
                    buffer.bytes(),
                    scalar_bytes(values)
                )
            } else {
                continue;
            };
            return Err(Error::Device { device: buffer.device(), operation: "evaluate constraints", message: problem });
        }
        Ok(())
    }
}

/// A partition's constraints as the host sees them. A device's report that a constraint
/// fails is judged by it before the witness is blamed: a device that computed a, b or c
/// wrongly must neither make a good witness look bad nor pass its own fault off as the input's.
pub trait HostConstraints: Send + Sync {
    /// Whether a·b = c holds at `constraint` by the host's own values.
    fn holds(&self, constraint: usize) -> bool;
}

impl<F: Fn(usize) -> bool + Send + Sync> HostConstraints for F {
    fn holds(&self, constraint: usize) -> bool {
        self(constraint)
    }
}

/// Checks the buffers of [`DeviceStream::check_satisfied`] before anything is queued: each of
/// `a`, `b` and `c` holds `len` scalars, all on one device, in three allocations (a backend
/// lends each buffer to one use at a time).
pub fn check_satisfaction_buffers(a: &DeviceBuffer, b: &DeviceBuffer, c: &DeviceBuffer, len: usize) -> Result<()> {
    let named = [("a", a), ("b", b), ("c", c)];
    for (i, (what, buffer)) in named.iter().enumerate() {
        let problem = if let Some((other, _)) = named[..i].iter().find(|(_, o)| Arc::ptr_eq(&o.memory, &buffer.memory))
        {
            format!("the {what} buffer is also the {other} buffer")
        } else if buffer.device() != a.device() {
            format!("the {what} buffer is on device {}, the a buffer on {}", buffer.device(), a.device())
        } else if buffer.bytes() < scalar_bytes(len) {
            format!("the {what} buffer of {} bytes is smaller than the {len} scalars checked", buffer.bytes())
        } else {
            continue;
        };
        return Err(Error::Device { device: buffer.device(), operation: "check the witness", message: problem });
    }
    Ok(())
}

/// What the first failing constraint a device found (`None`: every one of the `len` checked
/// holds) means, judged by `host`: the witness's fault ([`Error::UnsatisfiedWitness`]) when
/// the host agrees, the device's own when the host's values satisfy the constraint or the
/// device named one it was not asked to check.
pub fn judge_satisfaction(device: usize, first: Option<usize>, len: usize, host: &dyn HostConstraints) -> Result<()> {
    let Some(constraint) = first else { return Ok(()) };
    let disagreement = if constraint >= len {
        format!("the device named constraint {constraint} as failing, of the {len} it checked")
    } else if host.holds(constraint) {
        format!(
            "the device found constraint {constraint} unsatisfied, but the host's values satisfy it: the device's \
             a, b or c are wrong"
        )
    } else {
        return Err(Error::UnsatisfiedWitness { constraint });
    };
    Err(Error::Device { device, operation: "check the witness", message: disagreement })
}

/// Which curve group an MSM runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    G1,
    G2,
}

/// One device as the pipeline sees it.
pub trait Device: Send + Sync {
    fn info(&self) -> DeviceInfo;

    /// Bytes the backend has allocated right now (a leak check: 0 when idle).
    fn allocated_bytes(&self) -> u64;

    /// The driver's view of free memory, where the backend has one.
    fn free_bytes(&self) -> Option<u64>;

    /// Allocates device memory; fails with `Error::OutOfMemory` when the device is full.
    fn allocate(&self, bytes: u64) -> Result<DeviceBuffer>;

    /// Page-locks a host range for fast copies.
    fn pin_host(&self, range: HostRange) -> Result<PinOutcome>;

    /// Undoes `pin_host` for a range this process pinned.
    fn unpin_host(&self, range: HostRange) -> Result<()>;

    /// A new in-order work queue. Its work is recorded on `timeline` under the stream's name.
    fn new_stream(&self, name: &str, timeline: TimelineRecorder) -> Result<Arc<dyn DeviceStream>>;

    /// Gives back memory the backend keeps cached (kernel tables, freed pool blocks), so the
    /// driver's free memory is what it was before proving. Called at shutdown.
    fn release_cached(&self) {}

    /// Scratch bytes a partition needs beside its inputs: NTT twiddles and MSM buckets for the
    /// largest MSM of `max_msm_len` points, run in passes of `msm_pass_points` points. Part of
    /// every partition's memory plan ([`crate::plan`]): the budget reserves it, and the kernels allocate their
    /// scratch within it as they run (it is not allocated up front as well, which would hold
    /// the same memory twice).
    fn workspace_bytes(&self, log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64;

    /// The shortest MSM pass this device runs: the one that bounds an MSM's scratch whatever its
    /// length. The plan takes longer passes, up to one pass over the largest MSM, where
    /// the budget has room for them ([`crate::plan::msm_pass_points`]). Devices
    /// whose MSM scratch does not depend on the pass (the CPU) run every MSM in one pass.
    fn min_msm_pass_points(&self) -> usize {
        usize::MAX
    }

    /// `scalars[i]·G` on G1 for the fixed base `G` of `base`'s table: the setup's bulk work,
    /// for test and benchmark keys. The host's cores do it unless the device can.
    fn fixed_base_g1(&self, base: &FixedBase<G1Projective>, scalars: &[Scalar]) -> Result<Vec<G1Affine>> {
        Ok(base.mul_all(scalars))
    }

    /// [`Device::fixed_base_g1`] on G2.
    fn fixed_base_g2(&self, base: &FixedBase<G2Projective>, scalars: &[Scalar]) -> Result<Vec<G2Affine>> {
        Ok(base.mul_all(scalars))
    }

    /// The device's field-multiplication rates, measured on it with its kernels' own
    /// arithmetic, for the bench's floors; `None` where the backend has no such probe (the
    /// CPU). Runs a few hundred milliseconds of kernels and holds about 60 MB of scratch while
    /// it runs, inside the budget's reserve: call it before the partitions stream.
    fn arithmetic_rates(&self) -> Result<Option<ArithmeticRates>> {
        Ok(None)
    }

    /// Makes a device whose context broke (a sticky error, a hung kernel) usable again:
    /// re-creates its context and makes its streams run on the new one. Called only when no
    /// partition is in flight on the device and none of its buffers or keys is held; every
    /// device buffer made before is invalid afterwards. A device that cannot be recovered
    /// fails here and stays out of service.
    fn recover(&self) -> Result<()> {
        Ok(())
    }
}

/// Field multiplications per second on one device, as its microkernels run them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ArithmeticRates {
    /// Fr (scalar field, 255 bits) Montgomery multiplications per second.
    pub fr_mul_per_s: f64,
    /// Fp (base field, 381 bits) Montgomery multiplications per second.
    pub fp_mul_per_s: f64,
    /// Fp squarings per second, by the dedicated squaring (cross products once): faster than
    /// multiplications, so the floor counts them apart.
    pub fp_sqr_per_s: f64,
}

/// An in-order queue of device work. Every call only enqueues; completion is observed through
/// events. Each call clones the buffers it uses, so they live until the work has run.
/// Work whose tag's failure slot is already set is skipped, and a failing piece of work sets
/// it, so a failure stays inside its partition.
pub trait DeviceStream: Send + Sync {
    fn name(&self) -> &str;

    /// Later work on this stream waits until `event` has completed (no host synchronisation).
    fn wait_event(&self, event: &StageEvent) -> Result<()>;

    /// An event that completes when all work queued so far has run.
    fn record_event(&self) -> Result<StageEvent>;

    /// Queues a kernel that traps, breaking the device's context for real: the fault
    /// injector's sticky error on a backend that can (a GPU). Returns false where the backend
    /// cannot, and the injector models the broken context instead.
    fn break_context(&self, _tag: &WorkTag) -> Result<bool> {
        Ok(false)
    }

    /// Copies `src` to the start of `dst`; the rest of `dst` reads as zeros.
    fn copy_scalars_to_device(&self, src: HostScalars, dst: &DeviceBuffer, tag: &WorkTag) -> Result<()>;

    /// Writes the values of `src` that `selection` uses, in order, into `dst` from element
    /// `dst_start` on. `packed` is scratch of [`PackedDensity::device_bytes`] for the packed
    /// density itself. This is how a query's scalars are picked out of the aux assignment
    /// on the device rather than copied from the host a second time.
    #[allow(clippy::too_many_arguments)]
    fn select_scalars(
        &self,
        src: &DeviceBuffer,
        selection: Arc<PackedDensity>,
        packed: &DeviceBuffer,
        dst: &DeviceBuffer,
        dst_start: usize,
        tag: &WorkTag,
    ) -> Result<()>;
    /// Copies `src[range]` to the start of `dst` (a whole key vector, or one chunk of it).
    fn copy_g1_to_device(
        &self,
        src: Arc<Vec<G1Affine>>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()>;
    fn copy_g2_to_device(
        &self,
        src: Arc<Vec<G2Affine>>,
        range: Range<usize>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()>;

    /// The quotient polynomial: `a`, `b`, `c` hold evaluations over the domain of size
    /// 2^log_n (zero-padded); afterwards `a` holds h's first 2^log_n − 1 coefficients.
    fn quotient(&self, a: &DeviceBuffer, b: &DeviceBuffer, c: &DeviceBuffer, log_n: u32, tag: &WorkTag) -> Result<()>;

    /// Σ scalars[terms.start + i]·bases[i] for i < terms.len(), added into `slot` of `results`
    /// (which starts empty): the whole MSM with a resident key, or one chunk of it when the
    /// key streams through `bases`. It runs in passes of at most `pass_points` points, the
    /// pass the partition's memory plan was sized for.
    #[allow(clippy::too_many_arguments)]
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
    ) -> Result<()>;

    /// Copies a circuit shape's constraint matrices into `dst` as [`MatricesLayout`] lays
    /// them out; `dst` must hold at least the layout's bytes. [`ResidentMatrices::upload`] is
    /// how the rest of the crate calls it.
    fn copy_matrices_to_device(
        &self,
        matrices: Arc<ConstraintMatrices>,
        dst: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()>;

    /// `a = A·w`, `b = B·w`, `c = C·w` for the assignment `w = inputs ‖ aux`, each constraint's
    /// value in order, as [`ConstraintMatrices::evaluate`] computes them; the rest of each
    /// output buffer reads as zeros afterwards (the domain's padding, as after an upload).
    /// `inputs` (ONE first) and `aux` must hold at least the matrices' numbers of inputs and
    /// aux variables, and each output a scalar per constraint: otherwise a typed error,
    /// before anything is queued ([`ResidentMatrices::check_evaluation`]).
    #[allow(clippy::too_many_arguments)]
    fn evaluate_constraints(
        &self,
        matrices: &ResidentMatrices,
        inputs: &DeviceBuffer,
        aux: &DeviceBuffer,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        c: &DeviceBuffer,
        tag: &WorkTag,
    ) -> Result<()>;

    /// Checks that a·b = c holds for each of the first `len` values of `a`, `b` and `c` (a
    /// partition's constraint evaluations, before the quotient overwrites them). Where it does
    /// not, the work fails at the first such constraint, as [`judge_satisfaction`] says with
    /// `host`: [`Error::UnsatisfiedWitness`] when the host's values agree, a device error when
    /// they do not. The failure goes to the tag's failure slot, so the partition's later work is
    /// skipped. A backend reads its device's answer back at the end of the work, where its stream
    /// synchronises anyway. Buffers that [`check_satisfaction_buffers`] refuses are a typed
    /// error before anything is queued.
    fn check_satisfied(
        &self,
        a: &DeviceBuffer,
        b: &DeviceBuffer,
        c: &DeviceBuffer,
        len: usize,
        host: Arc<dyn HostConstraints>,
        tag: &WorkTag,
    ) -> Result<()>;

    /// Copies the first `len` scalars of `src` back to the host; read them once the stream has
    /// passed this point (an event recorded after it has completed). How tests and benches
    /// read what a kernel left on the device.
    fn copy_scalars_to_host(&self, src: &DeviceBuffer, len: usize, tag: &WorkTag) -> Result<PendingScalars>;

    /// Copies the MSM results back to the host; read them once the stream has passed this point.
    fn copy_results_to_host(&self, results: &DeviceBuffer, tag: &WorkTag) -> Result<PendingResults>;
}

/// Scalars on their way back from a device ([`DeviceStream::copy_scalars_to_host`]).
pub struct PendingScalars(Box<dyn FnOnce() -> Result<Vec<Scalar>> + Send>);

impl PendingScalars {
    pub fn new(read: impl FnOnce() -> Result<Vec<Scalar>> + Send + 'static) -> PendingScalars {
        PendingScalars(Box::new(read))
    }
    /// Reads the scalars; call only after an event recorded after the copy has completed.
    pub fn read(self) -> Result<Vec<Scalar>> {
        (self.0)()
    }
}

impl fmt::Debug for PendingScalars {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PendingScalars")
    }
}

/// Host scalars a copy reads, shared so that they live until the queued copy has run: a
/// pinned staging buffer, or a witness's own vector page-locked in place.
pub type HostScalars = Arc<dyn AsRef<[Scalar]> + Send + Sync>;

/// Every device is a workspace model for the memory plan.
impl<D: Device + ?Sized> crate::plan::Workspace for D {
    fn workspace_bytes(&self, log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64 {
        Device::workspace_bytes(self, log_n, max_msm_len, msm_pass_points)
    }
    fn min_msm_pass_points(&self) -> usize {
        Device::min_msm_pass_points(self)
    }
}
