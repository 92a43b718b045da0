//! The pinning actor: makes a partition's host vectors page-locked for the upload, and
//! page-locks the proving key's host vectors once (the registry makes a second pin a no-op).
//!
//! The a, b, c evaluations and the aux assignment are either copied into reusable pinned
//! buffers from the pool ([`StagingMode::Copy`], the default) or registered where they are
//! ([`StagingMode::InPlace`]: no host copy). The A and B queries' scalars are never copied:
//! the pin stage packs their densities, and the device picks them out of the aux assignment
//! it receives.

use std::sync::Arc;

use serde::Serialize;

use super::messages::{PartitionJob, StagedInputs, StagedVector, WitnessPart, WitnessVector};
use super::stage_actor::{StageLogic, Threads};
use crate::circuit::PackedDensity;
use crate::error::Result;
use crate::stage::Stage;

/// How a partition's large host vectors become page-locked for their upload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum StagingMode {
    /// Copy them into page-locked buffers kept in a pool: one parallel memory copy per
    /// vector, no driver call once the pool is warm. The default: a parallel copy is several
    /// times faster than locking and unlocking in place (BENCHMARKS.md, staging).
    #[default]
    Copy,
    /// Page-lock the witness's own vectors for the duration of the partition: no host copy and
    /// no pooled memory, at the price of a page-locking call per vector and partition. For
    /// hosts short of memory, or whose copies are slow.
    InPlace,
}

/// Page-locks what a partition is staged from.
#[derive(Default)]
pub struct Pin;

impl StageLogic for Pin {
    const STAGE: Stage = Stage::Pin;
    const THREADS: Threads = Threads::PerWorker;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let pipeline = job.pipeline.clone();
        let witness = &job.witness()?.clone();
        let stage = |part: WitnessPart| -> Result<StagedVector> {
            let values = part.of(witness);
            match pipeline.staging {
                StagingMode::Copy => Ok(StagedVector::Pooled(pipeline.pool.stage(values)?)),
                StagingMode::InPlace => {
                    let lease = match values.is_empty() {
                        true => None,
                        // The lease owns the witness, so the vector stays where it was pinned.
                        false => Some(pipeline.pool.registry().pin_part(witness.clone(), |w| part.of(w))?),
                    };
                    let vector = Arc::new(WitnessVector { witness: witness.clone(), part });
                    Ok(StagedVector::InPlace { vector, _lease: lease })
                }
            }
        };
        let pool = &pipeline.pool;
        let aux_len = witness.aux_assignment.len();
        job.staged = Some(StagedInputs {
            a: stage(WitnessPart::A)?,
            b: stage(WitnessPart::B)?,
            c: stage(WitnessPart::C)?,
            aux: stage(WitnessPart::Aux)?,
            a_query_inputs: pool.stage(&witness.input_assignment)?,
            b_query_inputs: pool.stage_with(witness.b_input_density.total(), |room| {
                room.extend(witness.b_input_density.select(&witness.input_assignment))
            })?,
            a_aux_selection: Arc::new(PackedDensity::pack(&witness.a_aux_density, aux_len)?),
            b_aux_selection: Arc::new(PackedDensity::pack(&witness.b_aux_density, aux_len)?),
        });
        if let Some(resident) = &job.resident_key {
            job.pipeline.pin_key_host(resident, &job.key)?;
        } else if job.key_chunk_points.is_some() {
            // A streamed key is copied chunk by chunk for every partition: keep it
            // page-locked while this partition uses it (the registry pins a range once).
            job.key_pins = job.pipeline.pin_key_ranges(&job.key)?;
        }
        Ok(())
    }
}
