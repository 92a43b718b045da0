//! The device-to-host actor: queues the copy of the MSM results on its worker's download
//! stream once the partition's MSMs are done.

use super::job::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::plan::MSM_RESULTS_BYTES;
use crate::error::Result;
use crate::stage::Stage;

/// Collects results from the device.
#[derive(Default)]
pub struct Dtoh;

impl StageLogic for Dtoh {
    const STAGE: Stage = Stage::Dtoh;
    const THREADS: Threads = Threads::One;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let stream = job.pipeline.copy_out[job.worker].clone();
        job.used(&stream);
        stream.wait_event(job.msm_done.as_ref().ok_or_else(|| PartitionJob::missing("MSM event"))?)?;
        let buffers = job.buffers.as_ref().ok_or_else(|| PartitionJob::missing("device buffers"))?;
        let tag = job.tag(Stage::Dtoh).with("bytes", MSM_RESULTS_BYTES);
        job.pending_results = Some(stream.copy_results_to_host(&buffers.results, &tag)?);
        job.dtoh_done = Some(stream.record_event()?);
        Ok(())
    }
}
