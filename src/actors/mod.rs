//! The pipeline's actors, one module per actor; `actors.md` describes each one.
//!
//! Per device: an admission actor asks the budget actor for the partition's whole memory plan;
//! then pin → htod → ntt → msm → dtoh → assemble actors each do their stage and pass the
//! partition on with the events the next stage waits for. Stage actors only enqueue device
//! work; the device's streams run it, so stages of different partitions overlap.

pub mod admission;
pub mod assemble;
pub mod budget;
pub mod dtoh;
pub mod htod;
pub mod messages;
pub mod msm;
pub mod ntt;
pub mod pin;
pub mod pipeline;
pub mod stage_actor;
pub mod system;

pub use budget::{BudgetReport, Grant, MemoryBudget};
pub use messages::{Advance, PartitionJob};
pub use pin::StagingMode;
pub use pipeline::{DevicePipeline, ResidentKey};
pub use system::ActorSystem;
