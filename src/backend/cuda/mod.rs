//! The CUDA backend: BLS12-381 kernels (kernels/) driven from Rust.
//!
//! Layers, as in cudarc: `raw` holds the few unsafe driver calls cudarc does not wrap;
//! `context` holds the safe RAII types (GPU context with its kernels, streams, typed buffers,
//! timed events, page-locked ranges); `ntt` and `msm` orchestrate the kernels (launch
//! geometry, tables, window sizes) behind safe methods on [`GpuStream`], the MSM's sizing in
//! `msm_plan` and its curves in `msm_curves`, the launch geometry they share in `launch`. This
//! module is the only place in the crate with `unsafe` code, and within it only `raw`,
//! `context` and `device` allow it (the crate denies it everywhere else).

mod affine_buckets;
mod context;
mod device;
mod kernel_cache;
mod launch;
mod msm;
mod msm_curves;
mod msm_plan;
mod ntt;
mod probe;
mod raw;
mod scan;
mod select;
mod setup;
mod sparse;

use std::sync::Arc;

pub use context::{
    cuda_available, device_count, nvrtc_compile_cached, nvrtc_compile_embedded, nvrtc_compile_source, DeviceElement,
    G1Jacobian, G2Jacobian, GpuBuffer, GpuClock, GpuContext, GpuStream, HostRegistration, KernelSource, PinnedRange,
    TimedEvent,
};
pub use device::workspace_bytes;
pub use kernel_cache::{CacheOutcome, KernelCache};
pub use msm_curves::{MsmCurve, G1, G2};
pub use msm_plan::{
    bucket_method_for, msm_scratch_bytes, scatter_kind_for, window_bits_for, BucketMethod, MsmOptions, ScatterKind,
    AFFINE_FINISH_POINTS, AFFINE_SLICE_ENTRIES, MSM_PASS_POINTS,
};
pub use ntt::domain_root;
pub use probe::ProbeField;

use crate::backend::Device;
use crate::backend::DeviceSelection;
use crate::error::{Error, Result};

/// Opens the selected GPUs as pipeline devices (through [`crate::backend::open_devices`]).
pub(crate) fn open_selected(selection: &DeviceSelection) -> Result<Vec<Arc<dyn Device>>> {
    let count = device_count();
    if count == 0 {
        return Err(Error::BackendUnavailable(
            "no CUDA driver (libcuda) or no GPU found; use --backend cpu or auto".into(),
        ));
    }
    let ordinals: Vec<usize> = match selection {
        DeviceSelection::All => (0..count).collect(),
        DeviceSelection::Only(list) => {
            if let Some(missing) = list.iter().find(|&&d| d >= count) {
                return Err(Error::Config(format!("GPU {missing} does not exist: this machine has {count}")));
            }
            list.clone()
        }
    };
    ordinals.into_iter().map(|d| device::CudaDevice::open(d).map(|dev| Arc::new(dev) as Arc<dyn Device>)).collect()
}
