//! The admission actor: plans a partition's device memory and waits for the budget actor to
//! grant all of it (and room for the proving key if it is not resident) before any stage
//! starts. A plan that can never fit fails here, not mid-proof.

use super::messages::PartitionJob;
use super::stage_actor::StageLogic;
use crate::backend::{g2_bytes, scalar_bytes, Device, MSM_RESULTS_BYTES};
use crate::circuit::{PackedDensity, WitnessShape};
use crate::error::{Error, Result};
use crate::stage::Stage;

/// Admits partitions to one device.
pub struct Admission;

/// Device bytes one partition needs beside its proving key: the a, b, c evaluations over the
/// domain (h is computed in place of a), the scalars of the l, a and b MSMs, the packed
/// densities the a and b scalars are selected with, scratch, results.
pub fn partition_plan_bytes(device: &dyn Device, shape: &WitnessShape, log_n: u32) -> u64 {
    let domain = 1usize << log_n;
    let a_query = shape.num_inputs + shape.a_aux_total;
    let b_query = shape.b_input_total + shape.b_aux_total;
    let largest_msm = (domain - 1).max(shape.num_aux).max(a_query).max(b_query);
    3 * scalar_bytes(domain)
        + scalar_bytes(shape.num_aux.max(1))
        + scalar_bytes(a_query.max(1))
        + scalar_bytes(b_query.max(1))
        + 2 * PackedDensity::device_bytes(shape.num_aux).max(8)
        + device.workspace_bytes(log_n, largest_msm)
        + MSM_RESULTS_BYTES
}

/// The fewest points a streamed key's chunk may hold: below this the copies and launches
/// cost more than the work they carry.
pub const MIN_KEY_CHUNK_POINTS: usize = 64;
/// The most points a streamed key's chunk holds: 2^22 G2 points are 768 MiB per buffer,
/// enough to keep the MSM kernels at full width.
pub const MAX_KEY_CHUNK_POINTS: usize = 1 << 22;

/// Device bytes of a streamed key's two chunk buffers (each sized for G2 points, the larger).
pub fn key_chunk_bytes(chunk_points: usize) -> u64 {
    2 * g2_bytes(chunk_points)
}

/// The chunk for streaming `key_points` (the longest key vector) through `room` bytes, or
/// `None` when not even the smallest chunk fits.
pub fn key_chunk_points(room: u64, key_points: usize) -> Option<usize> {
    let fitting = (room / key_chunk_bytes(1)) as usize;
    let chunk = fitting.min(MAX_KEY_CHUNK_POINTS).min(key_points.max(MIN_KEY_CHUNK_POINTS));
    (chunk >= MIN_KEY_CHUNK_POINTS).then_some(chunk)
}

impl StageLogic for Admission {
    const STAGE: Stage = Stage::Budget;

    fn advance(&mut self, job: &mut PartitionJob) -> Result<()> {
        let pipeline = job.pipeline.clone();
        let plan = partition_plan_bytes(pipeline.device.as_ref(), &job.witness.shape(), job.log_n);
        let resident = pipeline.resident_key(&job.key);
        let key_bytes = if resident.is_some() { 0 } else { job.key.device_bytes() };
        let capacity = pipeline.budget.capacity_bytes();
        let request = job.request.clone();
        let cancelled = move || request.is_cancelled();
        if plan + key_bytes > capacity {
            // The key does not fit beside the partition: stream it through two chunk buffers.
            let longest = job.key.longest_query();
            let chunk = key_chunk_points(capacity.saturating_sub(plan), longest).ok_or(Error::PlanExceedsDevice {
                device: pipeline.ordinal,
                needed_bytes: plan + key_chunk_bytes(MIN_KEY_CHUNK_POINTS),
                capacity_bytes: capacity,
            })?;
            let bytes = plan + key_chunk_bytes(chunk);
            pipeline.evict_idle_keys_for(bytes);
            tracing::debug!(plan_bytes = plan, chunk, "the key streams: waiting for the partition's grant");
            job.key_chunk_points = Some(chunk);
            job.grant = Some(pipeline.budget.request(bytes)?.wait_unless(&cancelled).ok_or(Error::Cancelled)?);
            job.admission = Some(pipeline.line.admit());
            return Ok(());
        }
        let resident = match resident {
            Some(resident) => resident,
            None => {
                pipeline.evict_idle_keys_for(plan + key_bytes);
                let grant = pipeline.budget.request(key_bytes)?.wait_unless(&cancelled).ok_or(Error::Cancelled)?;
                pipeline.make_resident(&job.key, grant)?
            }
        };
        job.resident_key = Some(resident);
        tracing::debug!(plan_bytes = plan, key_bytes, "waiting for the partition's grant");
        job.grant = Some(pipeline.budget.request(plan)?.wait_unless(&cancelled).ok_or(Error::Cancelled)?);
        job.admission = Some(pipeline.line.admit());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_chunk_is_as_large_as_the_room_allows_within_its_bounds() {
        let room = |points: usize| key_chunk_bytes(points);
        assert_eq!(key_chunk_points(room(1000), 1 << 20), Some(1000));
        assert_eq!(key_chunk_points(room(1000) + 383, 1 << 20), Some(1000), "a partial point is no room");
        assert_eq!(key_chunk_points(room(1 << 30), 1 << 30), Some(MAX_KEY_CHUNK_POINTS));
        assert_eq!(key_chunk_points(room(1 << 20), 300), Some(300), "no larger than the longest vector");
        assert_eq!(key_chunk_points(room(1 << 20), 10), Some(MIN_KEY_CHUNK_POINTS));
        assert_eq!(key_chunk_points(room(MIN_KEY_CHUNK_POINTS), 1 << 20), Some(MIN_KEY_CHUNK_POINTS));
        assert_eq!(key_chunk_points(room(MIN_KEY_CHUNK_POINTS) - 1, 1 << 20), None);
        assert_eq!(key_chunk_points(0, 1 << 20), None);
    }
}
