//! Host memory for fast staging: the registry of page-locked ranges and the pool of reusable
//! pinned staging buffers.

pub mod pinned;

pub use pinned::{HostPinTable, PinLease, PinnedPool, PinnedRegistry, PinnedScalars};
