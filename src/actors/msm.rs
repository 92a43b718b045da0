//! The MSM actor: queues the five multi-scalar multiplications of a proof (h, l, a and b in
//! G1, b in G2) on the partition's worker stream, after its NTT.
//!
//! Each MSM reads the key's device copy of its vector where the key keeps it resident. The
//! vectors it does not keep (all five for a key streamed whole) stream instead: their points
//! go up chunk by chunk, from page-locked host memory, into two chunk buffers on the worker's
//! key stream, while the worker's compute stream runs the MSM of the previous chunk (double
//! buffering: a buffer is refilled only after the MSM that read it). Each chunk's MSM adds
//! into the partition's result slot. The copies are queued at once, so the first chunks of a
//! streamed vector go up while the resident vectors' MSMs run.

use std::ops::Range;
use std::sync::Arc;

use blstrs::{G1Affine, G2Affine};

use super::job::PartitionJob;
use super::stage_actor::{StageLogic, Threads};
use crate::backend::{DeviceBuffer, Group, MsmSlot, StageEvent};
use crate::error::Result;
use crate::plan::KeyVector;
use crate::stage::Stage;

/// Runs the MSMs on the device.
#[derive(Default)]
pub struct Msm;

/// Where one MSM's points come from.
enum KeyPoints<'a> {
    /// Already on the device.
    Resident(&'a DeviceBuffer),
    /// On the host, streamed in chunks.
    Host(HostPoints<'a>),
}

/// A key vector on the host.
enum HostPoints<'a> {
    G1(&'a Arc<Vec<G1Affine>>),
    G2(&'a Arc<Vec<G2Affine>>),
}

/// The chunks `len` terms stream in; one empty chunk when there are none, so the MSM still
/// runs and fills its slot (with the identity).
fn chunks(len: usize, chunk: usize) -> Vec<Range<usize>> {
    if len == 0 {
        return std::iter::once(0..0).collect();
    }
    (0..len).step_by(chunk.max(1)).map(|start| start..(start + chunk).min(len)).collect()
}

impl StageLogic for Msm {
    const STAGE: Stage = Stage::Msm;
    const THREADS: Threads = Threads::PerWorker;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let stream = job.pipeline.compute[job.worker].clone();
        job.used(&stream);
        stream.wait_event(job.ntt_done.as_ref().ok_or_else(|| PartitionJob::missing("NTT event"))?)?;
        let resident = job.resident_key.clone();
        if let Some(key) = &resident {
            key.check_for(Some(job.partition_id))?;
            let uploaded = key.uploaded.get().ok_or_else(|| PartitionJob::missing("proving key upload"))?;
            stream.wait_event(uploaded)?;
        }
        let key_stream = job.pipeline.key_in[job.worker].clone();
        if job.key_chunk_points.is_some() {
            // Before the first chunk is queued: a failure later in this loop must still wait
            // for the chunk copies already queued before it releases the pinned key and the
            // grant they read from and write into.
            job.used(&key_stream);
        }
        let buffers = job.buffers.as_ref().ok_or_else(|| PartitionJob::missing("device buffers"))?;
        let staged = job.staged.as_ref().ok_or_else(|| PartitionJob::missing("pinned inputs"))?;
        let h_len = (1usize << job.log_n) - 1;
        let key = &job.key;
        // Each vector from the device where the key keeps it resident, else from the host.
        let host = |vector: KeyVector| match vector {
            KeyVector::H => HostPoints::G1(&key.h),
            KeyVector::L => HostPoints::G1(&key.l),
            KeyVector::A => HostPoints::G1(&key.a),
            KeyVector::BG1 => HostPoints::G1(&key.b_g1),
            KeyVector::BG2 => HostPoints::G2(&key.b_g2),
        };
        let points = |vector: KeyVector| match resident.as_ref().and_then(|r| r.vector(vector)) {
            Some(buffer) => KeyPoints::Resident(buffer),
            None => KeyPoints::Host(host(vector)),
        };
        let (h, l, a, b_g1, b_g2) =
            (points(KeyVector::H), points(KeyVector::L), points(KeyVector::A), points(KeyVector::BG1), points(KeyVector::BG2));
        let runs = [
            (Group::G1, h, &buffers.a, h_len, MsmSlot::H),
            (Group::G1, l, &buffers.aux, staged.aux.len(), MsmSlot::L),
            (Group::G1, a, &buffers.a_query, staged.a_query_len(), MsmSlot::A),
            (Group::G1, b_g1, &buffers.b_query, staged.b_query_len(), MsmSlot::BG1),
            (Group::G2, b_g2, &buffers.b_query, staged.b_query_len(), MsmSlot::BG2),
        ];

        let chunk = job.key_chunk_points.unwrap_or(usize::MAX);
        // The MSM that last read each chunk buffer: its refill waits for it.
        let mut last_read: [Option<StageEvent>; 2] = [None, None];
        let mut filled = 0usize;
        for (group, source, scalars, len, slot) in runs {
            let tag = job.tag(Stage::Msm).with("msm", format!("{slot:?}")).with("points", len);
            let bases = match source {
                KeyPoints::Resident(bases) => {
                    stream.msm(group, bases, scalars, 0..len, &buffers.results, slot, job.msm_pass_points, &tag)?;
                    continue;
                }
                KeyPoints::Host(points) => points,
            };
            for terms in chunks(len, chunk) {
                let buffer = filled % 2;
                let target = buffers.key_chunks.get(buffer).ok_or_else(|| PartitionJob::missing("key chunk buffers"))?;
                if let Some(read) = &last_read[buffer] {
                    key_stream.wait_event(read)?;
                }
                let copy_tag = job.tag(Stage::Htod).with("key_chunk", format!("{slot:?} {terms:?}"));
                match &bases {
                    HostPoints::G1(points) => {
                        key_stream.copy_g1_to_device((*points).clone(), terms.clone(), target, &copy_tag)?
                    }
                    HostPoints::G2(points) => {
                        key_stream.copy_g2_to_device((*points).clone(), terms.clone(), target, &copy_tag)?
                    }
                }
                stream.wait_event(&key_stream.record_event()?)?;
                stream.msm(group, target, scalars, terms, &buffers.results, slot, job.msm_pass_points, &tag)?;
                last_read[buffer] = Some(stream.record_event()?);
                filled += 1;
            }
        }
        job.msm_done = Some(stream.record_event()?);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::chunks;

    #[test]
    fn chunks_cover_every_term_once() {
        assert_eq!(chunks(10, 4), vec![0..4, 4..8, 8..10]);
        assert_eq!(chunks(8, 4), vec![0..4, 4..8]);
        assert_eq!(chunks(3, 4), vec![0..3]);
        assert_eq!(chunks(0, 4), vec![0..0], "an empty MSM still fills its slot");
    }
}
