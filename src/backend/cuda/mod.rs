//! The CUDA backend: BLS12-381 kernels (kernels/) driven from Rust.
//!
//! Layers, as in cudarc: `raw` holds the few unsafe driver calls cudarc does not wrap;
//! `context` holds the safe RAII types (GPU context with its kernels, streams, typed buffers,
//! timed events, page-locked ranges); `ntt` and `msm` orchestrate the kernels (launch
//! geometry, tables, window sizes) behind safe methods on [`GpuStream`]. This module is the
//! only place in the crate with `unsafe` code.
#![allow(unsafe_code)]

mod affine_buckets;
mod context;
mod device;
mod kernel_cache;
mod msm;
mod ntt;
mod probe;
mod raw;
mod select;
mod setup;
mod sparse;

use std::sync::Arc;

pub use context::{
    nvrtc_compile_cached, nvrtc_compile_embedded, nvrtc_compile_source, DeviceElement, G1Jacobian, G2Jacobian,
    GpuBuffer, GpuClock, GpuContext, GpuStream, HostRegistration, KernelSource, PinnedRange, TimedEvent,
};
pub use device::workspace_bytes;
pub use kernel_cache::{CacheOutcome, KernelCache};
pub use msm::{
    bucket_method_for, msm_scratch_bytes, scatter_kind_for, window_bits_for, BucketMethod, MsmCurve, MsmOptions,
    ScatterKind, AFFINE_FINISH_POINTS, AFFINE_SLICE_ENTRIES, G1, G2, MSM_PASS_POINTS,
};
pub use ntt::domain_root;
pub use probe::ProbeField;

use crate::backend::Device;
use crate::backend::DeviceSelection;
use crate::error::{Error, Result};

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
