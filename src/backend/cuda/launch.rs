//! Launch geometry that several orchestration files share: the block sizes of the element-wise
//! and the curve kernels, and the grid that covers `n` threads. Kernel-specific shapes (the
//! NTT's tiles, the scan's tiles, the binned scatter's blocks) stay beside their kernels.

/// Threads a block of the element-wise kernels (one scalar or word a thread, any block size).
pub(super) const THREADS: u32 = 256;

/// Threads a block of the curve kernels: kernels/msm/ bounds them to 128
/// (`__launch_bounds__(128, MIN_BLOCKS)`), so a larger block would fail to launch.
pub(super) const CURVE_THREADS: u32 = 128;

/// Blocks of `threads` covering `n` threads: at least one, at most 2^20. The kernels launched
/// through it loop with a grid stride, so a capped grid still covers every element.
pub(super) fn grid(n: usize, threads: u32) -> u32 {
    n.div_ceil(threads as usize).clamp(1, 1 << 20) as u32
}
