//! The assembly actor: waits for a partition's results to reach the host and assembles the
//! proof A, B, C with the partition's r and s.

use super::job::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::error::{Error, Result};
use crate::groth16::assemble_proof;
use crate::stage::Stage;

/// Assembles proofs on the host.
#[derive(Default)]
pub struct Assemble;

impl StageLogic for Assemble {
    const STAGE: Stage = Stage::Assemble;
    const THREADS: Threads = Threads::PerWorker;

    /// Waits for the partition's device work, at most the stage timeout: work that takes
    /// longer hangs, and the device is recovered.
    fn inputs_ready(&mut self, job: &mut PartitionJob) -> Result<()> {
        let downloaded = job.dtoh_done.as_ref().ok_or_else(|| PartitionJob::missing("download event"))?;
        let timeout = job.pipeline.stage_timeout;
        if downloaded.wait_within(timeout)? {
            return Ok(());
        }
        Err(Error::DeviceHang { device: job.pipeline.ordinal, stage: Stage::Assemble, waited_ms: timeout.as_millis() as u64 })
    }

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        // A failed key upload explains whatever its partitions' MSMs then saw: report it first.
        if let Some(resident) = &job.resident_key {
            resident.check_for(Some(job.partition_id))?;
        }
        if let Some(matrices) = &job.matrices {
            matrices.check_for(Some(job.partition_id))?;
        }
        job.failure.check()?;
        let results = job.pending_results.take().ok_or_else(|| PartitionJob::missing("results"))?.read()?;
        job.proof = Some(assemble_proof(&job.key.vk, &results, job.r, job.s)?);
        Ok(())
    }
}
