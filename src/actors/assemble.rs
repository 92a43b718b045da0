//! The assembly actor: waits for a partition's results to reach the host and assembles the
//! proof A, B, C with the partition's r and s.

use super::messages::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::error::Result;
use crate::groth16::assemble_proof;
use crate::stage::Stage;

/// Assembles proofs on the host.
#[derive(Default)]
pub struct Assemble;

impl StageLogic for Assemble {
    const STAGE: Stage = Stage::Assemble;
    const THREADS: Threads = Threads::PerWorker;

    fn inputs_ready(&mut self, job: &mut PartitionJob) -> Result<()> {
        job.dtoh_done.as_ref().ok_or_else(|| PartitionJob::missing("download event"))?.wait()
    }

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        // A failed key upload explains whatever its partitions' MSMs then saw: report it first.
        if let Some(resident) = &job.resident_key {
            resident.failure.check()?;
        }
        job.failure.check()?;
        let results = job.pending_results.take().ok_or_else(|| PartitionJob::missing("results"))?.read()?;
        job.proof = Some(assemble_proof(&job.key.vk, &results, job.r, job.s)?);
        Ok(())
    }
}
