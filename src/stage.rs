//! The stages of one partition's path through the pipeline.

use serde::{Deserialize, Serialize};

/// A stage of the pipeline; each one is run by its own actor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    /// Waiting for the memory budget to grant the partition's device memory.
    Budget,
    /// Page-locking the host buffers the partition is staged from.
    Pin,
    /// Host-to-device copies.
    Htod,
    /// The NTT family: the quotient polynomial h.
    Ntt,
    /// Pippenger MSMs over G1 and G2.
    Msm,
    /// Device-to-host copies of the MSM results.
    Dtoh,
    /// Proof assembly on the host.
    Assemble,
}

impl Stage {
    /// Every stage in pipeline order.
    pub const ALL: [Stage; 7] =
        [Stage::Budget, Stage::Pin, Stage::Htod, Stage::Ntt, Stage::Msm, Stage::Dtoh, Stage::Assemble];

    /// The stage's name as used in traces and JSON output.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Budget => "budget",
            Stage::Pin => "pin",
            Stage::Htod => "htod",
            Stage::Ntt => "ntt",
            Stage::Msm => "msm",
            Stage::Dtoh => "dtoh",
            Stage::Assemble => "assemble",
        }
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
