//! The MSM actor: queues the five multi-scalar multiplications of a proof (h, l, a and b in
//! G1, b in G2) on the partition's worker stream, after its NTT.

use super::htod::missing;
use super::messages::PartitionJob;
use super::stage_actor::StageLogic;
use crate::backend::{Group, MsmSlot};
use crate::error::Result;
use crate::stage::Stage;

/// Runs the MSMs on the device.
pub struct Multiexp;

impl StageLogic for Multiexp {
    const STAGE: Stage = Stage::Msm;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let stream = job.pipeline.compute[job.worker].clone();
        job.used(&stream);
        stream.wait_event(job.ntt_done.as_ref().ok_or_else(|| missing("NTT event"))?)?;
        let key = job.resident_key.clone().ok_or_else(|| missing("resident key"))?;
        key.failure.check()?;
        let uploaded = key.uploaded.get().ok_or_else(|| missing("proving key upload"))?;
        stream.wait_event(uploaded)?;
        let buffers = job.buffers.as_ref().ok_or_else(|| missing("device buffers"))?;
        let staged = job.staged.as_ref().ok_or_else(|| missing("pinned inputs"))?;
        let h_len = (1usize << job.log_n) - 1;
        let runs = [
            (Group::G1, &key.h, &buffers.a, h_len, MsmSlot::H),
            (Group::G1, &key.l, &buffers.aux, staged.aux.len(), MsmSlot::L),
            (Group::G1, &key.a, &buffers.a_query, staged.a_query.len(), MsmSlot::A),
            (Group::G1, &key.b_g1, &buffers.b_query, staged.b_query.len(), MsmSlot::BG1),
            (Group::G2, &key.b_g2, &buffers.b_query, staged.b_query.len(), MsmSlot::BG2),
        ];
        for (group, bases, scalars, len, slot) in runs {
            let tag = job.tag(Stage::Msm).with("msm", format!("{slot:?}")).with("points", len);
            stream.msm(group, bases, scalars, len, &buffers.workspace, &buffers.results, slot, &tag)?;
        }
        job.msm_done = Some(stream.record_event()?);
        Ok(())
    }
}
