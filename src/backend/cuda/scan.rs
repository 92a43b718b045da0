//! The exclusive prefix sum of u32 values on the device (`msm_scan_*` in kernels/msm/msm.cu),
//! which the MSM's sort and the batch-affine rounds both run over their bucket counts.

use super::context::{GpuBuffer, GpuStream, KernelArg};
use super::launch::{grid, THREADS};
use super::msm_plan::SCAN_TILE;
use crate::error::Result;

impl GpuStream {
    /// The exclusive prefix sum of the `m` u32 values at `data`, in place, and their sum in
    /// `total`[0]; `sums` holds at least m / [`SCAN_TILE`] values (rounded up).
    pub(super) fn scan_exclusive(
        &self,
        data: u64,
        m: usize,
        sums: &GpuBuffer<u32>,
        total: &GpuBuffer<u32>,
    ) -> Result<()> {
        let tiles = m.div_ceil(SCAN_TILE);
        debug_assert!(sums.len() >= tiles && !total.is_empty());
        let mu = KernelArg::U32(m as u32);
        self.launch("msm_scan_tiles", tiles as u32, 256, &[KernelArg::Ptr(data), mu, KernelArg::Ptr(sums.ptr(self))])?;
        self.launch(
            "msm_scan_totals",
            1,
            256,
            &[KernelArg::Ptr(sums.ptr(self)), KernelArg::U32(tiles as u32), KernelArg::Ptr(total.ptr(self))],
        )?;
        self.launch(
            "msm_scan_add",
            grid(m, THREADS),
            THREADS,
            &[KernelArg::Ptr(data), mu, KernelArg::Ptr(sums.ptr(self))],
        )
    }
}
