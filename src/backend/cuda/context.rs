//! Safe RAII types over one GPU: the context with its loaded kernels, streams, typed device
//! buffers, timed events on the host clock, and page-locked host ranges.
// Unsafe here: the safe types over the driver: launches, copies, page-locking, Send and Sync; every block says why it holds (`// SAFETY:`).
#![allow(unsafe_code)]

use std::collections::HashMap;
use std::ffi::c_void;
use std::marker::PhantomData;
use std::sync::Arc;

use parking_lot::Mutex;
use std::time::{Duration, Instant};

use blstrs::{G1Affine, G2Affine, Scalar};
use cudarc::driver::result::DriverError;
use cudarc::driver::sys::{self, CUresult};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{CompileOptions, Ptx};

use super::kernel_cache::{CacheOutcome, KernelCache};
use super::raw;
use crate::error::{Error, Result};

/// A kernel file as embedded by build.rs: sm_90 cubin and PTX when nvcc was found at build
/// time, and always the source (headers inlined) for NVRTC.
pub(crate) struct EmbeddedModule {
    pub name: &'static str,
    pub cubin_sm90: Option<&'static [u8]>,
    pub ptx: Option<&'static str>,
    pub source: &'static str,
}

pub(crate) const MODULES: &[EmbeddedModule] = include!(concat!(env!("OUT_DIR"), "/kernels.rs"));

/// Every `extern "C" __global__` entry point of kernels/, by module.
const ENTRY_POINTS: &[(&str, &[&str])] = &[
    (
        "ntt",
        &[
            "ntt_bit_reverse",
            "ntt_expand_powers",
            "ntt_scale_by_powers",
            "ntt_reverse_and_scale",
            "ntt_reverse_and_scale_by_powers",
            "ntt_dit_stages",
            "ntt_dit_pass",
            "ntt_dif_inverse_pass",
            "ntt_dif_inverse_pass_scaled",
            "ntt_quotient_pointwise",
            "ff_fr_mul_rate",
            "ff_fp_mul_rate",
            "ff_fp_sqr_rate",
        ],
    ),
    ("fixed_base", &["setup_g1_fixed_base", "setup_g2_fixed_base"]),
    ("select", &["select_scalars", "debug_trap"]),
    ("sparse", &["sparse_evaluate_rows", "sparse_first_unsatisfied"]),
    (
        "msm",
        &[
            "msm_prepare_compact",
            "msm_digit_histogram",
            "msm_scatter_indexed",
            "msm_bin_cursors",
            "msm_bin_scatter",
            "msm_bin_place",
            "msm_scan_tiles",
            "msm_scan_totals",
            "msm_scan_add",
            "msm_g1_buckets",
            "msm_g1_bucket_fixup",
            "msm_g1_to_jacobian",
            "msm_g1_window_segments",
            "msm_g1_reduce",
            "msm_g1_sum_points",
            "msm_g2_buckets",
            "msm_g2_bucket_fixup",
            "msm_g2_to_jacobian",
            "msm_g2_window_segments",
            "msm_g2_reduce",
            "msm_g2_sum_points",
            "msm_affine_slice_buckets",
            "msm_affine_clip",
            "msm_affine_halve",
            "msm_affine_ends",
            "msm_g1_affine_fwd_entries",
            "msm_g1_affine_fwd_points",
            "msm_g1_affine_bwd_entries",
            "msm_g1_affine_bwd_points",
            "msm_g1_affine_finish_entries",
            "msm_g1_affine_finish_points",
            "msm_g1_affine_tree_up",
            "msm_g1_affine_tree_down",
            "msm_g1_affine_tree_top",
            "msm_g2_affine_fwd_entries",
            "msm_g2_affine_fwd_points",
            "msm_g2_affine_bwd_entries",
            "msm_g2_affine_bwd_points",
            "msm_g2_affine_finish_entries",
            "msm_g2_affine_finish_points",
            "msm_g2_affine_tree_up",
            "msm_g2_affine_tree_down",
            "msm_g2_affine_tree_top",
        ],
    ),
];

/// A driver error as the crate's error, naming the device and the operation.
pub(crate) fn driver_error(device: usize, operation: &'static str, err: DriverError) -> Error {
    let name = err.error_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let text = err.error_string().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let message = format!("{name} ({}): {text}", err.0 as u32);
    if is_sticky(err.0) {
        return Error::DeviceBroken { device, message: format!("{operation} failed: {message}") };
    }
    Error::Device { device, operation, message }
}

/// The errors after which the context is unusable: every later call on it fails the same
/// way until it is destroyed and created afresh (the CUDA driver API's "sticky" errors).
fn is_sticky(code: CUresult) -> bool {
    matches!(
        code,
        CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
            | CUresult::CUDA_ERROR_LAUNCH_TIMEOUT
            | CUresult::CUDA_ERROR_ASSERT
            | CUresult::CUDA_ERROR_HARDWARE_STACK_ERROR
            | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
            | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
            | CUresult::CUDA_ERROR_INVALID_ADDRESS_SPACE
            | CUresult::CUDA_ERROR_INVALID_PC
            | CUresult::CUDA_ERROR_LAUNCH_FAILED
            | CUresult::CUDA_ERROR_ECC_UNCORRECTABLE
            | CUresult::CUDA_ERROR_CONTEXT_IS_DESTROYED
    )
}

/// How the kernels were loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelSource {
    /// The build's sm_90 cubin.
    Cubin,
    /// The build's compute_90 PTX, compiled by the driver.
    Ptx,
    /// The embedded sources, compiled at run time by NVRTC.
    Nvrtc,
}

impl KernelSource {
    /// The source `SNARKPIPE_KERNELS` forces (`cubin`, `ptx`, `nvrtc`; unset or empty: none).
    pub fn forced(setting: Option<&str>) -> Result<Option<KernelSource>> {
        match setting {
            None | Some("") => Ok(None),
            Some("cubin") => Ok(Some(KernelSource::Cubin)),
            Some("ptx") => Ok(Some(KernelSource::Ptx)),
            Some("nvrtc") => Ok(Some(KernelSource::Nvrtc)),
            Some(other) => {
                Err(Error::Config(format!("SNARKPIPE_KERNELS={other:?}: use cubin, ptx or nvrtc, or unset it")))
            }
        }
    }
}

/// Device tables for one NTT domain size, built once per GPU and size by `ntt.rs` and cached
/// here, with the GPU they live on ([`GpuContext::clear_caches`] frees them).
pub(crate) struct NttTables {
    /// ω^e for e < n/2.
    pub(super) twiddles: GpuBuffer<Scalar>,
    /// g^i split as hi[i >> log_lo] · lo[i & mask].
    pub(super) coset: PowerTables,
    /// g^i/n and g^-i/n: an inverse transform's 1/n merged into the coset shift that follows it.
    pub(super) coset_over_n: PowerTables,
    pub(super) coset_inv_over_n: PowerTables,
    /// 1/n and 1/(g^n − 1), one element each.
    pub(super) n_inv: GpuBuffer<Scalar>,
    pub(super) z_inv: GpuBuffer<Scalar>,
}

pub(crate) struct PowerTables {
    pub(super) hi: GpuBuffer<Scalar>,
    pub(super) lo: GpuBuffer<Scalar>,
    pub(super) log_lo: u32,
}

/// Whether a CUDA driver is present and reports at least one GPU. Never panics.
pub fn cuda_available() -> bool {
    device_count() > 0
}

/// The number of CUDA GPUs (0 without a driver).
pub fn device_count() -> usize {
    if !raw::culib_present() {
        return 0;
    }
    cudarc::driver::CudaContext::device_count().map(|n| n.max(0) as usize).unwrap_or(0)
}

/// One GPU with the snarkpipe kernels loaded.
pub struct GpuContext {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    functions: HashMap<&'static str, CudaFunction>,
    loaded_from: KernelSource,
    startup: crate::backend::DeviceStartup,
    pub(crate) ntt_tables: Mutex<HashMap<u32, Arc<NttTables>>>,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GpuContext(device {}, kernels from {:?})", self.ordinal, self.loaded_from)
    }
}

impl GpuContext {
    /// Opens GPU `ordinal` and loads the kernels: the cubin on sm_90, else PTX, else NVRTC;
    /// or from where `SNARKPIPE_KERNELS` (`cubin`, `ptx` or `nvrtc`) says, to measure a
    /// fallback's cost on a GPU the build has code for.
    pub fn open(ordinal: usize) -> Result<Arc<GpuContext>> {
        let forced = KernelSource::forced(std::env::var("SNARKPIPE_KERNELS").ok().as_deref())?;
        GpuContext::open_with(ordinal, forced)
    }

    /// Opens GPU `ordinal` loading every kernel module from `source`, as a GPU without a
    /// cubin (PTX) or without either (NVRTC) would: how the fallbacks are tested on a GPU.
    /// Errors when the build embedded no such form.
    pub fn open_from(ordinal: usize, source: KernelSource) -> Result<Arc<GpuContext>> {
        GpuContext::open_with(ordinal, Some(source))
    }

    fn open_with(ordinal: usize, forced: Option<KernelSource>) -> Result<Arc<GpuContext>> {
        if !cuda_available() || ordinal >= device_count() {
            return Err(Error::BackendUnavailable(format!("no CUDA device {ordinal}")));
        }
        let e = |op| move |err| driver_error(ordinal, op, err);
        let opening = Instant::now();
        let ctx = CudaContext::new(ordinal).map_err(e("create context"))?;
        let context_seconds = opening.elapsed().as_secs_f64();
        let loading = Instant::now();
        let mut all_cached = true;
        // Streams are ordered explicitly with events; cudarc's per-buffer tracking is not needed.
        // SAFETY: no buffer or stream of this context exists yet.
        unsafe { ctx.disable_event_tracking() };
        let cc = ctx.compute_capability().map_err(e("query compute capability"))?;
        let mut functions = HashMap::new();
        let mut loaded_from = forced.unwrap_or(KernelSource::Cubin);
        for (module_name, names) in ENTRY_POINTS {
            let embedded = MODULES.iter().find(|m| m.name == *module_name).ok_or_else(|| Error::Device {
                device: ordinal,
                operation: "load kernels",
                message: format!("kernel module {module_name} was not embedded"),
            })?;
            let not_embedded = |form: &str| Error::Device {
                device: ordinal,
                operation: "load kernels",
                message: format!("the build embedded no {form} of kernel module {module_name} (built without nvcc?)"),
            };
            let (ptx, source) = match (forced, cc, embedded.cubin_sm90, embedded.ptx) {
                (Some(KernelSource::Cubin), _, Some(cubin), _) => {
                    (Ptx::from_binary(cubin.to_vec()), KernelSource::Cubin)
                }
                (Some(KernelSource::Cubin), _, None, _) => return Err(not_embedded("sm_90 cubin")),
                (Some(KernelSource::Ptx), _, _, Some(ptx)) => (Ptx::from_src(ptx), KernelSource::Ptx),
                (Some(KernelSource::Ptx), _, _, None) => return Err(not_embedded("PTX")),
                (Some(KernelSource::Nvrtc), ..) => {
                    (nvrtc_module(ordinal, embedded.name, embedded.source, cc, &mut all_cached)?, KernelSource::Nvrtc)
                }
                (None, (9, 0), Some(cubin), _) => (Ptx::from_binary(cubin.to_vec()), KernelSource::Cubin),
                (None, _, _, Some(ptx)) if cc.0 >= 9 => (Ptx::from_src(ptx), KernelSource::Ptx),
                (None, ..) => {
                    (nvrtc_module(ordinal, embedded.name, embedded.source, cc, &mut all_cached)?, KernelSource::Nvrtc)
                }
            };
            if source != KernelSource::Cubin {
                loaded_from = source;
            }
            let module = ctx.load_module(ptx).map_err(e("load kernel module"))?;
            for name in names.iter() {
                functions.insert(*name, module.load_function(name).map_err(e("find kernel"))?);
            }
        }
        let kernels_from = match loaded_from {
            KernelSource::Cubin => "cubin",
            KernelSource::Ptx => "ptx",
            KernelSource::Nvrtc if all_cached => "nvrtc-cache",
            KernelSource::Nvrtc => "nvrtc",
        };
        let startup = crate::backend::DeviceStartup {
            context_seconds,
            kernels_seconds: loading.elapsed().as_secs_f64(),
            kernels_from: kernels_from.into(),
        };
        tracing::info!(device = ordinal, ?startup, "GPU opened");
        Ok(Arc::new(GpuContext {
            ordinal,
            ctx,
            functions,
            loaded_from,
            startup,
            ntt_tables: Mutex::new(HashMap::new()),
        }))
    }

    /// What opening this context cost.
    pub fn startup(&self) -> crate::backend::DeviceStartup {
        self.startup.clone()
    }

    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
    /// Holders of the driver context beside this value (streams, modules, buffers, events):
    /// what keeps a broken context alive after this value is dropped.
    pub(crate) fn context_holders(&self) -> usize {
        Arc::strong_count(&self.ctx) - 1
    }
    /// The kernel modules loaded (each holds the driver context).
    pub(crate) fn module_count(&self) -> usize {
        ENTRY_POINTS.len()
    }
    pub fn kernel_source(&self) -> KernelSource {
        self.loaded_from
    }
    pub fn name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "CUDA device".into())
    }

    /// (free, total) bytes of device memory as the driver sees them.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(|err| driver_error(self.ordinal, "query memory", err))
    }

    /// A new stream of this GPU, at the lowest scheduling priority (the default).
    pub fn new_stream(self: &Arc<Self>) -> Result<GpuStream> {
        let inner = self.ctx.new_stream().map_err(|err| driver_error(self.ordinal, "create stream", err))?;
        Ok(GpuStream { gpu: self.clone(), inner })
    }

    /// A new stream whose kernels the GPU schedules ahead of those of default streams: when
    /// both have blocks waiting, an SM that frees up takes this stream's first.
    pub fn new_urgent_stream(self: &Arc<Self>) -> Result<GpuStream> {
        let (_least, greatest) = cudarc::driver::result::stream::get_priority_range()
            .map_err(|err| driver_error(self.ordinal, "query stream priorities", err))?;
        let inner = self
            .ctx
            .new_stream_with_priority(greatest)
            .map_err(|err| driver_error(self.ordinal, "create stream", err))?;
        Ok(GpuStream { gpu: self.clone(), inner })
    }

    /// Waits for all work on this GPU.
    pub fn synchronize(&self) -> Result<()> {
        self.ctx.synchronize().map_err(|err| driver_error(self.ordinal, "synchronize", err))
    }

    /// Frees the cached NTT tables (they are rebuilt on demand).
    pub fn clear_caches(&self) {
        self.ntt_tables.lock().clear();
    }

    pub(crate) fn function(&self, name: &'static str) -> &CudaFunction {
        // Every name in ENTRY_POINTS was loaded by `open`; callers only use those names.
        &self.functions[name]
    }

    /// Page-locks a host range (cuMemHostRegister) until the returned value is dropped.
    /// A range someone else already registered yields `Ok(HostRegistration::AlreadyRegistered)`.
    ///
    /// The caller must keep the memory allocated while the registration is alive.
    pub fn register_host<T>(self: &Arc<Self>, range: &[T]) -> Result<HostRegistration> {
        let ptr = range.as_ptr() as *mut c_void;
        let len = std::mem::size_of_val(range);
        self.ctx.bind_to_thread().map_err(|err| driver_error(self.ordinal, "bind context", err))?;
        // SAFETY: `range` is a live allocation of `len` bytes; the registration is undone in
        // `Drop` of the returned value, which the caller keeps no longer than the memory.
        match unsafe { raw::host_register(ptr, len) } {
            Ok(()) => Ok(HostRegistration::Registered(PinnedRange {
                gpu: self.clone(),
                ptr: ptr as usize,
                len,
                unregistered: false,
            })),
            Err(DriverError(CUresult::CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)) => {
                Ok(HostRegistration::AlreadyRegistered)
            }
            Err(err) => Err(driver_error(self.ordinal, "register host memory", err)),
        }
    }
}

/// Compiles every embedded kernel module's source with NVRTC for compute capability `cc`, as
/// the backend does on a GPU its build has no cubin or PTX for. Needs only the NVRTC library,
/// not a GPU, so the run-time compile path is checked wherever libnvrtc is found. Returns each
/// module's name, its PTX, and the entry points the backend will look up in it.
pub fn nvrtc_compile_embedded(cc: (i32, i32)) -> Result<Vec<(&'static str, String, &'static [&'static str])>> {
    if !raw::nvrtc_present() {
        return Err(Error::BackendUnavailable("the NVRTC library (libnvrtc) was not found".into()));
    }
    ENTRY_POINTS
        .iter()
        .map(|(module_name, entries)| {
            let module = MODULES.iter().find(|m| m.name == *module_name).ok_or_else(|| Error::Device {
                device: 0,
                operation: "compile kernels with NVRTC",
                message: format!("kernel module {module_name} was not embedded"),
            })?;
            let ptx = nvrtc_compile(0, module.name, module.source, cc)?;
            Ok((module.name, ptx.to_src(), *entries))
        })
        .collect()
}

/// Compiles one source with NVRTC as [`nvrtc_compile_embedded`] does; a source that does not
/// compile is an `Error::Device` carrying NVRTC's log.
pub fn nvrtc_compile_source(name: &str, source: &str, cc: (i32, i32)) -> Result<String> {
    if !raw::nvrtc_present() {
        return Err(Error::BackendUnavailable("the NVRTC library (libnvrtc) was not found".into()));
    }
    nvrtc_compile(0, name, source, cc).map(|ptx| ptx.to_src())
}

/// Compiles one source with NVRTC to a cubin for compute capability `cc` through `cache`, as a
/// GPU context does through the cache the environment names ([`KernelCache::from_env`]): the
/// cubin, and whether it was read or compiled.
pub fn nvrtc_compile_cached(
    cache: &KernelCache,
    name: &str,
    source: &str,
    cc: (i32, i32),
) -> Result<(Vec<u8>, CacheOutcome)> {
    let version = raw::nvrtc_version()
        .ok_or_else(|| Error::BackendUnavailable("the NVRTC library (libnvrtc) was not found".into()))?;
    cache.image(name, source, cc, version, "cubin", || nvrtc_compile_cubin(0, name, source, cc))
}

/// A kernel module's machine code for a GPU the build has no code for: from the kernel cache
/// when the environment names one and it holds this module's, else compiled by NVRTC for the
/// GPU's own architecture (and cached). A cubin, not PTX, so that the driver has nothing left
/// to compile. Clears `all_cached` unless it came from the cache.
fn nvrtc_module(ordinal: usize, name: &str, source: &str, cc: (i32, i32), all_cached: &mut bool) -> Result<Ptx> {
    let (Some(cache), Some(version)) = (KernelCache::from_env(), raw::nvrtc_version()) else {
        *all_cached = false;
        return nvrtc_compile_cubin(ordinal, name, source, cc).map(Ptx::from_binary);
    };
    let compile = || nvrtc_compile_cubin(ordinal, name, source, cc);
    let (cubin, outcome) = cache.image(name, source, cc, version, "cubin", compile)?;
    tracing::debug!(module = name, cache = %cache.dir().display(), ?outcome, "kernel cubin");
    *all_cached &= outcome == CacheOutcome::Hit;
    Ok(Ptx::from_binary(cubin))
}

fn nvrtc_compile_cubin(ordinal: usize, name: &str, source: &str, cc: (i32, i32)) -> Result<Vec<u8>> {
    raw::nvrtc_cubin(name, source, &format!("sm_{}{}", cc.0, cc.1)).map_err(|log| Error::Device {
        device: ordinal,
        operation: "compile kernels with NVRTC",
        message: format!("{name}: {log}"),
    })
}

fn nvrtc_compile(ordinal: usize, name: &str, source: &str, cc: (i32, i32)) -> Result<Ptx> {
    let arch: Option<&'static str> = match cc {
        (7, 0) => Some("compute_70"),
        (7, 5) => Some("compute_75"),
        (8, 0) => Some("compute_80"),
        (8, 6) => Some("compute_86"),
        (8, 9) => Some("compute_89"),
        (9, 0) => Some("compute_90"),
        (10, 0) => Some("compute_100"),
        (12, 0) => Some("compute_120"),
        _ => None,
    };
    let opts = CompileOptions { arch, name: Some(format!("{name}.cu")), ..Default::default() };
    cudarc::nvrtc::compile_ptx_with_opts(source, opts).map_err(|err| Error::Device {
        device: ordinal,
        operation: "compile kernels with NVRTC",
        message: format!("{name}: {err:?}"),
    })
}

/// The outcome of [`GpuContext::register_host`].
#[derive(Debug)]
pub enum HostRegistration {
    /// Registered by this call; unregistered when dropped.
    Registered(PinnedRange),
    /// Already page-locked by someone else: state, not failure; nothing to undo.
    AlreadyRegistered,
}

/// A host range this process page-locked; unregisters on drop.
#[derive(Debug)]
pub struct PinnedRange {
    gpu: Arc<GpuContext>,
    ptr: usize,
    len: usize,
    /// Set once `unregister` has run, so that drop does not unregister a second time.
    unregistered: bool,
}

impl PinnedRange {
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Unregisters now, reporting a driver error (drop ignores it). The value is dropped
    /// normally afterwards (not forgotten: that kept its context alive for ever, and a broken
    /// context could then never be destroyed and re-created).
    pub fn unregister(mut self) -> Result<()> {
        let result = self.unregister_inner();
        self.unregistered = true;
        result
    }
    fn unregister_inner(&self) -> Result<()> {
        self.gpu.ctx.bind_to_thread().map_err(|err| driver_error(self.gpu.ordinal, "bind context", err))?;
        // SAFETY: `ptr` was registered by `register_host` and not yet unregistered (this value
        // is consumed or dropped exactly once).
        unsafe { raw::host_unregister(self.ptr as *mut c_void) }
            .map_err(|err| driver_error(self.gpu.ordinal, "unregister host memory", err))
    }
}

impl Drop for PinnedRange {
    fn drop(&mut self) {
        if !self.unregistered {
            let _ = self.unregister_inner();
        }
    }
}

/// Host types that live on the device as their exact bytes.
///
/// # Safety
/// Implementors must be plain data without padding whose every bit pattern is a valid value,
/// with the size and layout the kernels expect.
pub unsafe trait DeviceElement: Copy + Send + Sync + 'static {}

// SAFETY: blstrs::Scalar is repr(transparent) over blst_fr { l: [u64; 4] } (Montgomery limbs),
// the 8×u32 little-endian limbs of fr_t in kernels/ff.
unsafe impl DeviceElement for Scalar {}
// SAFETY: G1Affine is repr(transparent) over blst_p1_affine { x: [u64; 6], y: [u64; 6] } (repr(C)),
// the layout of affine_t<fp_t>; the point at infinity is all zeros on both sides.
unsafe impl DeviceElement for G1Affine {}
// SAFETY: G2Affine is repr(transparent) over blst_p2_affine { x: blst_fp2, y: blst_fp2 } (repr(C),
// blst_fp2 = [blst_fp; 2]), the layout of affine_t<fp2_t>.
unsafe impl DeviceElement for G2Affine {}
// SAFETY: plain integers.
unsafe impl DeviceElement for u64 {}
// SAFETY: plain integers.
unsafe impl DeviceElement for u32 {}
unsafe impl DeviceElement for u8 {}
// SAFETY: G1/G2 Jacobian points as raw limbs, the layout of jacobian_t<fp_t>/<fp2_t>.
unsafe impl DeviceElement for G1Jacobian {}
unsafe impl DeviceElement for G2Jacobian {}

/// A G1 point in Jacobian coordinates as the kernels write it (blst_p1 layout: X, Y, Z).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct G1Jacobian(pub [u64; 18]);
/// A G2 point in Jacobian coordinates as the kernels write it (blst_p2 layout).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct G2Jacobian(pub [u64; 36]);

/// The bytes of a slice of device elements.
pub(crate) fn as_bytes<T: DeviceElement>(s: &[T]) -> &[u8] {
    // SAFETY: DeviceElement types are padding-free plain data; the byte view covers exactly
    // the slice's memory and borrows it for the same lifetime.
    unsafe { std::slice::from_raw_parts(s.as_ptr() as *const u8, std::mem::size_of_val(s)) }
}

/// Device memory holding `len` values of `T`, freed on drop.
pub struct GpuBuffer<T> {
    pub(crate) bytes: CudaSlice<u8>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: DeviceElement> GpuBuffer<T> {
    /// The same device memory seen as elements of `U`; the length is recomputed, and trailing
    /// bytes that do not fill a `U` are not addressed.
    pub fn retype<U: DeviceElement>(self) -> GpuBuffer<U> {
        let len = self.size_bytes() / std::mem::size_of::<U>();
        GpuBuffer { bytes: self.bytes, len, _t: PhantomData }
    }

    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn size_bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    pub(crate) fn ptr(&self, stream: &GpuStream) -> sys::CUdeviceptr {
        let (ptr, _sync) = self.bytes.device_ptr(&stream.inner);
        ptr
    }
}

/// A device event recorded on a stream, timed against the device clock.
pub struct TimedEvent {
    pub(crate) event: CudaEvent,
}

/// Maps device event times onto the host clock: a reference event recorded at a known host
/// instant; later events are placed by their elapsed device time since it.
pub struct GpuClock {
    reference: CudaEvent,
    host: Instant,
}

impl GpuClock {
    /// The host instant at which `event` completed (the event must have completed).
    pub fn host_time(&self, event: &TimedEvent) -> Result<Instant> {
        let ms = self.reference.elapsed_ms(&event.event).map_err(|err| driver_error(0, "read event time", err))?;
        Ok(if ms >= 0.0 {
            self.host + Duration::from_secs_f64(ms as f64 / 1e3)
        } else {
            self.host - Duration::from_secs_f64(-ms as f64 / 1e3)
        })
    }
}

/// An in-order queue of work on one GPU.
pub struct GpuStream {
    pub(crate) gpu: Arc<GpuContext>,
    pub(crate) inner: Arc<CudaStream>,
}

impl GpuStream {
    pub fn gpu(&self) -> &Arc<GpuContext> {
        &self.gpu
    }
    pub(crate) fn err(&self, op: &'static str) -> impl Fn(DriverError) -> Error + '_ {
        move |err| driver_error(self.gpu.ordinal, op, err)
    }

    /// Uninitialised device memory for `len` values.
    pub fn alloc<T: DeviceElement>(&self, len: usize) -> Result<GpuBuffer<T>> {
        let bytes = len * std::mem::size_of::<T>();
        // SAFETY: u8 has no invalid bit patterns; kernels write before reading (callers' duty
        // for the contents, not for memory safety of the host).
        let slice = unsafe { self.inner.alloc::<u8>(bytes.max(1)) }.map_err(|err| self.alloc_error(bytes, err))?;
        Ok(GpuBuffer { bytes: slice, len, _t: PhantomData })
    }

    /// Device memory for `len` values, all bytes zero.
    pub fn alloc_zeroed<T: DeviceElement>(&self, len: usize) -> Result<GpuBuffer<T>> {
        let bytes = len * std::mem::size_of::<T>();
        let slice = self.inner.alloc_zeros::<u8>(bytes.max(1)).map_err(|err| self.alloc_error(bytes, err))?;
        Ok(GpuBuffer { bytes: slice, len, _t: PhantomData })
    }

    fn alloc_error(&self, bytes: usize, err: DriverError) -> Error {
        if err.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            Error::OutOfMemory { device: self.gpu.ordinal, requested_bytes: bytes as u64 }
        } else {
            driver_error(self.gpu.ordinal, "allocate device memory", err)
        }
    }

    /// Copies host values to a new device buffer (asynchronous when `src` is page-locked).
    pub fn upload<T: DeviceElement>(&self, src: &[T]) -> Result<GpuBuffer<T>> {
        let mut dst = self.alloc::<T>(src.len())?;
        self.upload_into(src, &mut dst)?;
        Ok(dst)
    }

    /// Copies host values into the start of an existing device buffer.
    pub fn upload_into<T: DeviceElement>(&self, src: &[T], dst: &mut GpuBuffer<T>) -> Result<()> {
        self.upload_at(src, dst, 0)
    }

    /// Copies host values into an existing device buffer from element `offset` on.
    pub fn upload_at<T: DeviceElement>(&self, src: &[T], dst: &mut GpuBuffer<T>, offset: usize) -> Result<()> {
        if offset + src.len() > dst.len {
            return Err(Error::Device {
                device: self.gpu.ordinal,
                operation: "copy to device",
                message: format!("{} values at {offset} into a buffer of {}", src.len(), dst.len),
            });
        }
        if src.is_empty() {
            return Ok(());
        }
        let start = offset * std::mem::size_of::<T>();
        let mut view = dst.bytes.slice_mut(start..start + std::mem::size_of_val(src));
        self.inner.memcpy_htod(as_bytes(src), &mut view).map_err(self.err("copy to device"))
    }

    /// Copies a device buffer back to the host (waits for the stream).
    pub fn download<T: DeviceElement>(&self, src: &GpuBuffer<T>) -> Result<Vec<T>> {
        let bytes: Vec<u8> =
            self.inner.clone_dtoh(&src.bytes.slice(0..src.size_bytes().max(1))).map_err(self.err("copy to host"))?;
        self.synchronize()?;
        let mut out = Vec::<T>::with_capacity(src.len);
        // SAFETY: `out` has capacity for `len` values = size_bytes() bytes; DeviceElement types
        // accept every bit pattern, so the copied bytes form valid values.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), out.as_mut_ptr() as *mut u8, src.size_bytes());
            out.set_len(src.len);
        }
        Ok(out)
    }

    /// Copies the first `len` values of a device buffer back to the host (waits for the stream).
    pub fn download_first<T: DeviceElement>(&self, src: &GpuBuffer<T>, len: usize) -> Result<Vec<T>> {
        if len > src.len {
            return Err(Error::Device {
                device: self.gpu.ordinal,
                operation: "copy to host",
                message: format!("{len} values from a buffer of {}", src.len),
            });
        }
        let bytes = len * std::mem::size_of::<T>();
        let copied: Vec<u8> =
            self.inner.clone_dtoh(&src.bytes.slice(0..bytes.max(1))).map_err(self.err("copy to host"))?;
        self.synchronize()?;
        let mut out = Vec::<T>::with_capacity(len);
        // SAFETY: `out` has capacity for `len` values = `bytes` bytes, and `copied` holds at
        // least `bytes`; DeviceElement types accept every bit pattern.
        unsafe {
            std::ptr::copy_nonoverlapping(copied.as_ptr(), out.as_mut_ptr() as *mut u8, bytes);
            out.set_len(len);
        }
        Ok(out)
    }

    /// Device-to-device copy of a whole buffer into `dst`.
    pub fn copy<T: DeviceElement>(&self, src: &GpuBuffer<T>, dst: &mut GpuBuffer<T>) -> Result<()> {
        let n = src.size_bytes().min(dst.size_bytes());
        let mut view = dst.bytes.slice_mut(0..n);
        self.inner.memcpy_dtod(&src.bytes.slice(0..n), &mut view).map_err(self.err("copy on device"))
    }

    /// Device-to-device copy of `src[offset..offset + dst.len()]` into `dst`.
    pub fn copy_from_offset<T: DeviceElement>(
        &self,
        src: &GpuBuffer<T>,
        offset: usize,
        dst: &mut GpuBuffer<T>,
    ) -> Result<()> {
        let size = std::mem::size_of::<T>();
        if offset + dst.len > src.len {
            return Err(Error::Device {
                device: self.gpu.ordinal,
                operation: "copy on device",
                message: format!("values {offset}..{} of a buffer of {}", offset + dst.len, src.len),
            });
        }
        let (start, n) = (offset * size, dst.size_bytes());
        let mut view = dst.bytes.slice_mut(0..n);
        self.inner.memcpy_dtod(&src.bytes.slice(start..start + n), &mut view).map_err(self.err("copy on device"))
    }

    /// Sets every u32 of `dst` to `value`.
    pub fn fill_u32(&self, dst: &mut GpuBuffer<u32>, value: u32) -> Result<()> {
        let ptr = dst.ptr(self);
        // SAFETY: `ptr` addresses `dst.len` u32 words of this context's memory, kept alive by
        // `dst` (cudarc frees on drop in stream order, after this operation).
        unsafe { raw::memset_u32(ptr, value, dst.len, self.inner.cu_stream()) }.map_err(self.err("fill device memory"))
    }

    pub fn synchronize(&self) -> Result<()> {
        self.inner.synchronize().map_err(self.err("synchronize stream"))
    }

    /// A timed event completing after all work queued so far.
    pub fn record(&self) -> Result<TimedEvent> {
        let event =
            self.inner.record_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(self.err("record event"))?;
        Ok(TimedEvent { event })
    }

    /// Later work on this stream waits for `event` (no host synchronisation).
    pub fn wait(&self, event: &TimedEvent) -> Result<()> {
        self.inner.wait(&event.event).map_err(self.err("wait for event"))
    }

    /// A clock whose reference is "now" on this stream and on the host.
    pub fn clock(&self) -> Result<GpuClock> {
        let reference = self.record()?.event;
        reference.synchronize().map_err(self.err("synchronize event"))?;
        Ok(GpuClock { reference, host: Instant::now() })
    }

    /// Milliseconds between two completed events.
    pub fn elapsed_ms(&self, start: &TimedEvent, end: &TimedEvent) -> Result<f32> {
        end.event.synchronize().map_err(self.err("synchronize event"))?;
        start.event.elapsed_ms(&end.event).map_err(self.err("read event time"))
    }

    /// Launches `name` with a 1-D geometry and the given arguments, in the kernel's order.
    pub(crate) fn launch(&self, name: &'static str, grid: u32, block: u32, args: &[KernelArg]) -> Result<()> {
        self.launch_with_shared(name, grid, block, 0, args)
    }

    /// The most dynamic shared memory a block of any kernel without static shared memory may
    /// take on this device, in bytes (the opt-in limit: 227 KiB on sm_90, 48 KiB without opting
    /// in), for [`GpuStream::launch_with_shared`].
    pub(crate) fn max_dynamic_shared_bytes(&self) -> Result<u32> {
        let optin = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN;
        let bytes = self.gpu.ctx.attribute(optin).map_err(self.err("query shared memory per block"))?;
        Ok(bytes.max(0) as u32)
    }

    /// [`GpuStream::launch`] with `shared_bytes` of dynamic shared memory a block (the kernel's
    /// `extern __shared__` array). Above the 48 KiB every kernel may take, the kernel is first
    /// allowed the device's whole opt-in limit (less its static shared memory): always that
    /// value, so that launches of one kernel from several streams, of different sizes, never
    /// lower it under each other. More than the limit is an error, not a failed launch.
    pub(crate) fn launch_with_shared(
        &self,
        name: &'static str,
        grid: u32,
        block: u32,
        shared_bytes: u32,
        args: &[KernelArg],
    ) -> Result<()> {
        const DEFAULT_DYNAMIC_SHARED: u32 = 48 << 10;
        let f = self.gpu.function(name);
        if shared_bytes > DEFAULT_DYNAMIC_SHARED {
            let fixed = f.shared_size_bytes().map_err(self.err("query a kernel's shared memory"))?.max(0) as u32;
            let allowed = self.max_dynamic_shared_bytes()?.saturating_sub(fixed);
            if shared_bytes > allowed {
                return Err(Error::Device {
                    device: self.gpu.ordinal,
                    operation: name,
                    message: format!(
                        "{shared_bytes} bytes of dynamic shared memory a block, past the {allowed} allowed"
                    ),
                });
            }
            let max_dynamic = sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            f.set_attribute(max_dynamic, allowed as i32).map_err(self.err("allow dynamic shared memory"))?;
        }
        let cfg =
            LaunchConfig { grid_dim: (grid.max(1), 1, 1), block_dim: (block, 1, 1), shared_mem_bytes: shared_bytes };
        let mut builder = self.inner.launch_builder(f);
        for arg in args {
            match arg {
                KernelArg::Ptr(p) => builder.arg(p),
                KernelArg::U32(v) => builder.arg(v),
                KernelArg::U64(v) => builder.arg(v),
            };
        }
        // SAFETY: the arguments' types and order match the kernel's parameters (each launch
        // site in ntt.rs/msm.rs/sparse.rs mirrors its kernel's signature: pointers are 8-byte
        // device addresses, integers u32 or u64 as the kernel declares them), and the buffers
        // they address belong to this context and are kept alive by the caller until the
        // stream has run the launch. Dynamic shared memory past the kernel's allowance fails the
        // launch with an error (the driver checks it), never an access outside it.
        unsafe { builder.launch(cfg) }.map(|_| ()).map_err(self.err(name))
    }
}

/// One kernel argument: a device address or a 32-bit integer.
#[derive(Clone, Copy, Debug)]
pub(crate) enum KernelArg {
    Ptr(u64),
    U32(u32),
    U64(u64),
}
