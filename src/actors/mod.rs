//! The pipeline's actors, one module per actor; `actors.md` describes each one.
//!
//! Per device: the admission actor asks the budget actor for the partition's whole memory
//! plan; then the actors of the later stages each do their stage and pass the partition on
//! with the events the next stage waits for. Stage actors only enqueue device work; the
//! device's streams run it, so stages of different partitions overlap.
//!
//! The stage actors' modules, their start and their order come from the stage list
//! (`crate::stage::stage_list`); the modules declared by hand here are the actors' shared parts.

pub mod budget;
pub mod job;
pub mod pipeline;
pub mod stage_actor;
pub mod system;

/// Part of the memory plan; named here too, where the prover and the bench import it.
pub use crate::plan::StagingMode;
pub use budget::{BudgetReport, Grant, MemoryBudget};
pub use job::PartitionJob;
pub use pipeline::{Advance, DevicePipeline, ResidentKey};
pub use system::ActorSystem;

use actix::Recipient;

/// Declares one module per stage actor and starts them in pipeline order, each checked to be
/// the actor of its line in the stage list.
macro_rules! stage_actors {
    ($($(#[$doc:meta])* $variant:ident $name:literal $colour:literal $module:ident :: $logic:ident,)*) => {
        $(pub mod $module;)*

        $(const _: () = assert!(
            matches!(<$module::$logic as stage_actor::StageLogic>::STAGE, crate::stage::Stage::$variant),
            concat!(stringify!($module::$logic), " runs another stage than its line in the stage list"),
        );)*

        /// Starts every stage's actors for device `device` with `workers` workers and up to
        /// `in_flight` partitions in flight; the addresses are in the order of
        /// [`crate::stage::Stage::ALL`].
        pub(crate) fn start_stage_actors(device: usize, workers: usize, in_flight: usize) -> Vec<Recipient<Advance>> {
            vec![$(stage_actor::StageActor::<$module::$logic>::start(device, workers, in_flight).recipient()),*]
        }
    };
}
crate::stage::stage_list!(stage_actors);
