//! The stages of one partition's path through the pipeline, and the stage list they all come
//! from.

use serde::{Deserialize, Serialize};

/// The stage list: every stage of a partition's path, in pipeline order. Each line gives the
/// stage's `Stage` variant (its doc, then its name), its name in traces and JSON, its colour on
/// the timeline, and the actor that runs it (`module::Logic` under `src/actors/`).
///
/// Everything else is derived from it: the [`Stage`] enum and [`Stage::ALL`], the actor
/// modules and their start (`actors/mod.rs`), the routing (each stage hands a partition on to
/// the next line's; after the last one the partition is finished), and the timeline's colours.
/// Adding a stage is a line here, its actor file, and its section in `actors.md`.
///
/// The macro hands the list to `$then`, a macro that takes it in this form.
macro_rules! stage_list {
    ($then:ident) => {
        $then! {
            /// Synthesizing a partition submitted as a circuit (nothing for a witness), under
            /// the host-memory budget.
            Synthesize "synthesize" "#66bb6a" synthesize::Synthesize,
            /// Waiting for the memory budget to grant the partition's device memory (and room
            /// for its proving key when that is not resident).
            Admission "admission" "#9e9e9e" admission::Admission,
            /// Page-locking the host buffers the partition is staged from.
            Pin "pin" "#a1887f" pin::Pin,
            /// Host-to-device copies.
            Htod "htod" "#42a5f5" htod::Htod,
            /// The NTT family: the quotient polynomial h.
            Ntt "ntt" "#ab47bc" ntt::Ntt,
            /// Pippenger MSMs over G1 and G2.
            Msm "msm" "#ef5350" msm::Msm,
            /// Device-to-host copies of the MSM results.
            Dtoh "dtoh" "#26a69a" dtoh::Dtoh,
            /// Proof assembly on the host.
            Assemble "assemble" "#ffa726" assemble::Assemble,
            /// The proof's pairing check on the host, before it leaves the prover.
            Verify "verify" "#8d6e63" verify::Verify,
        }
    };
}
pub(crate) use stage_list;

/// Defines [`Stage`] from the stage list.
macro_rules! define_stages {
    ($($(#[$doc:meta])* $variant:ident $name:literal $colour:literal $module:ident :: $logic:ident,)*) => {
        /// A stage of the pipeline; each one is run by its own actor.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum Stage {
            $($(#[$doc])* $variant,)*
        }

        impl Stage {
            /// Every stage in pipeline order.
            pub const ALL: [Stage; 0 $(+ { let _ = Stage::$variant; 1 })*] = [$(Stage::$variant),*];

            /// The stage's name as used in traces and JSON output.
            pub fn name(self) -> &'static str {
                match self {
                    $(Stage::$variant => $name,)*
                }
            }

            /// The stage's colour on the timeline (SVG fill).
            pub fn colour(self) -> &'static str {
                match self {
                    $(Stage::$variant => $colour,)*
                }
            }
        }
    };
}
stage_list!(define_stages);

impl Stage {
    /// The stage's place in [`Stage::ALL`] (variants are declared in pipeline order).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The stage after this one, `None` after the last.
    pub fn next(self) -> Option<Stage> {
        Stage::ALL.get(self.index() + 1).copied()
    }
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stages_follow_each_other_in_the_order_of_the_list() {
        for (i, stage) in Stage::ALL.into_iter().enumerate() {
            assert_eq!(stage.index(), i);
            assert_eq!(stage.next(), Stage::ALL.get(i + 1).copied());
        }
        assert_eq!(Stage::Admission.next(), Some(Stage::Pin));
        assert_eq!(Stage::ALL[Stage::ALL.len() - 1].next(), None, "the last stage finishes the partition");
        // Names are unique, as the trace and the JSON tell stages apart by them.
        let names: std::collections::BTreeSet<_> = Stage::ALL.iter().map(|s| s.name()).collect();
        assert_eq!(names.len(), Stage::ALL.len());
        assert_eq!(serde_json::to_string(&Stage::Htod).unwrap(), "\"htod\"");
    }
}
