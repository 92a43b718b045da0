//! Host memory for fast staging: the registry of page-locked ranges and the pool of reusable
//! pinned staging buffers.

pub mod pinned;

pub use pinned::{HostPinTable, PinLease, PinnedPool, PinnedRegistry, PinnedScalars};

/// The process's peak resident set (`VmHWM` in `/proc/self/status`); `None` where the
/// system does not say.
pub fn host_peak_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("VmHWM:"))?;
    line.trim().trim_end_matches("kB").trim().parse::<u64>().ok().map(|kib| kib * 1024)
}
