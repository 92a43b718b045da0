//! The pinning actor: stages a partition's scalars in page-locked buffers from the pool, and
//! page-locks the proving key's host vectors once (the registry makes a second pin a no-op).

use super::messages::{PartitionJob, StagedInputs};
use super::stage_actor::StageLogic;
use crate::backend::HostRange;
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
            a_query: pool.stage(&witness.a_query_scalars())?,
            b_query: pool.stage(&witness.b_query_scalars())?,
        });
        if let Some(resident) = &job.resident_key {
            let mut pins = resident.pins.lock();
            if pins.is_empty() {
                let registry = pool.registry();
                let key = &job.key;
                for range in [
                    HostRange::of(&key.h),
                    HostRange::of(&key.l),
                    HostRange::of(&key.a),
                    HostRange::of(&key.b_g1),
                    HostRange::of(&key.b_g2),
                ] {
                    if range.len > 0 {
                        pins.push(registry.pin(range)?);
                    }
                }
            }
        }
        Ok(())
    }
}
