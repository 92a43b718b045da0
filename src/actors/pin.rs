//! The pinning actor: stages a partition's scalars in page-locked buffers from the pool, and
//! page-locks the proving key's host vectors once (the registry makes a second pin a no-op).

use super::messages::{PartitionJob, StagedInputs};
use super::stage_actor::StageLogic;
use crate::error::Result;
use crate::stage::Stage;

/// Page-locks what a partition is staged from.
pub struct Pinning;

impl StageLogic for Pinning {
    const STAGE: Stage = Stage::Pin;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let pool = &job.pipeline.pool;
        let witness = &job.witness;
        job.staged = Some(StagedInputs {
            a: pool.stage(&witness.a)?,
            b: pool.stage(&witness.b)?,
            c: pool.stage(&witness.c)?,
            aux: pool.stage(&witness.aux_assignment)?,
            a_query: pool.stage_with(witness.a_query_len(), |out| witness.a_query_into(out))?,
            b_query: pool.stage_with(witness.b_query_len(), |out| witness.b_query_into(out))?,
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
