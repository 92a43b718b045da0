//! The NTT actor: queues the quotient polynomial h = (a·b − c)/Z on the partition's worker
//! stream, after its uploads; for a partition the device evaluates, a, b and c are computed
//! first, on the same stream, from the key's resident constraint matrices.

use super::messages::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::plan::scalar_bytes;
use crate::error::Result;
use crate::stage::Stage;

/// Computes h on the device.
#[derive(Default)]
pub struct Ntt;

impl StageLogic for Ntt {
    const STAGE: Stage = Stage::Ntt;
    const THREADS: Threads = Threads::PerWorker;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let stream = job.pipeline.compute[job.worker].clone();
        job.used(&stream);
        stream.wait_event(job.htod_done.as_ref().ok_or_else(|| PartitionJob::missing("upload event"))?)?;
        let buffers = job.buffers.as_ref().ok_or_else(|| PartitionJob::missing("device buffers"))?;
        if let Some(matrices) = &job.matrices {
            // a, b and c from the key's resident matrices and the uploaded assignment: the
            // inputs are the first scalars of the A query (every input is in it, ONE first).
            let resident = matrices.uploaded().ok_or_else(|| PartitionJob::missing("uploaded constraint matrices"))?;
            let tag = job.tag(Stage::Ntt).with("what", "constraint evaluation").with("terms", resident.layout().terms());
            stream.evaluate_constraints(&resident, &buffers.a_query, &buffers.aux, &buffers.a, &buffers.b, &buffers.c, &tag)?;
        }
        let tag = job.tag(Stage::Ntt).with("log_n", job.log_n).with("bytes", 3 * scalar_bytes(1usize << job.log_n));
        stream.quotient(&buffers.a, &buffers.b, &buffers.c, job.log_n, &tag)?;
        job.ntt_done = Some(stream.record_event()?);
        Ok(())
    }
}
