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

/// Device bytes one partition needs beside its proving key with its MSMs in the device's
/// shortest passes ([`Device::min_msm_pass_points`]): the most it can be planned with.
pub fn partition_plan_bytes(device: &dyn Device, shape: &WitnessShape, log_n: u32) -> u64 {
    partition_plan_bytes_with_pass(device, shape, log_n, device.min_msm_pass_points())
}

/// The points of the partition's largest MSM (h, l, a or b).
fn largest_msm(shape: &WitnessShape, log_n: u32) -> usize {
    ((1usize << log_n) - 1).max(shape.num_aux).max(shape.a_query_len()).max(shape.b_query_len())
}

/// Device bytes one partition needs beside its proving key, its MSMs run in passes of
/// `msm_pass_points`: the a, b, c evaluations over the domain (h is computed in place of a), the
/// scalars of the l, a and b MSMs, the packed densities the a and b scalars are selected with,
/// scratch, results.
pub fn partition_plan_bytes_with_pass(
    device: &dyn Device,
    shape: &WitnessShape,
    log_n: u32,
    msm_pass_points: usize,
) -> u64 {
    3 * scalar_bytes(1usize << log_n)
        + scalar_bytes(shape.num_aux.max(1))
        + scalar_bytes(shape.a_query_len().max(1))
        + scalar_bytes(shape.b_query_len().max(1))
        + 2 * PackedDensity::device_bytes(shape.num_aux).max(8)
        + device.workspace_bytes(log_n, largest_msm(shape, log_n), msm_pass_points)
        + MSM_RESULTS_BYTES
}

/// The points per MSM pass a partition is planned with: the longest of one pass over its
/// largest MSM and its halvings down to the device's shortest pass
/// ([`Device::min_msm_pass_points`]) with which `in_flight` such partitions fit in `room` bytes
/// (the device's capacity less its resident key); the shortest when none does. Every pass after
/// the first pays a fix-up over all the buckets, so a 2^26 partition on an H200 runs its MSMs in
/// one pass, while two 2^27 partitions fit beside their 64 GB key only with the shortest.
pub fn msm_pass_points(device: &dyn Device, shape: &WitnessShape, log_n: u32, in_flight: usize, room: u64) -> usize {
    let shortest = device.min_msm_pass_points().max(1);
    let mut pass = largest_msm(shape, log_n).max(1).next_power_of_two();
    while pass > shortest {
        let plan = partition_plan_bytes_with_pass(device, shape, log_n, pass);
        if plan.saturating_mul(in_flight.max(1) as u64) <= room {
            return pass;
        }
        pass /= 2;
    }
    shortest
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
        let device = pipeline.device.as_ref();
        let shape = job.witness.shape();
        let plan = partition_plan_bytes(device, &shape, job.log_n);
        job.msm_pass_points = device.min_msm_pass_points();
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
        // The key stays resident: longer MSM passes where the room beside it allows.
        let room = capacity.saturating_sub(job.key.device_bytes());
        job.msm_pass_points = msm_pass_points(device, &shape, job.log_n, pipeline.max_in_flight(), room);
        let plan = partition_plan_bytes_with_pass(device, &shape, job.log_n, job.msm_pass_points);
        let resident = match resident {
            Some(resident) => resident,
            None => {
                pipeline.evict_idle_keys_for(plan + key_bytes);
                let grant = pipeline.budget.request(key_bytes)?.wait_unless(&cancelled).ok_or(Error::Cancelled)?;
                pipeline.make_resident(&job.key, grant)?
            }
        };
        job.resident_key = Some(resident);
        tracing::debug!(
            plan_bytes = plan,
            key_bytes,
            msm_pass_points = job.msm_pass_points,
            "waiting for the partition's grant"
        );
        job.grant = Some(pipeline.budget.request(plan)?.wait_unless(&cancelled).ok_or(Error::Cancelled)?);
        job.admission = Some(pipeline.line.admit());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cpu::CpuDevice;
    use crate::backend::cuda::{self, MSM_PASS_POINTS};
    use crate::backend::{DeviceBuffer, DeviceInfo, DeviceStream, HostRange, PinOutcome};
    use crate::synthetic::{SyntheticSpec, WitnessProfile};
    use crate::timeline::TimelineRecorder;
    use std::sync::Arc;

    /// The CPU device planning its scratch as the CUDA device does (`cuda::workspace_bytes`),
    /// so that the pass choice can be checked without a GPU.
    struct PlansLikeCuda(CpuDevice);

    impl Device for PlansLikeCuda {
        fn info(&self) -> DeviceInfo {
            self.0.info()
        }
        fn allocated_bytes(&self) -> u64 {
            self.0.allocated_bytes()
        }
        fn free_bytes(&self) -> Option<u64> {
            self.0.free_bytes()
        }
        fn allocate(&self, bytes: u64) -> Result<DeviceBuffer> {
            self.0.allocate(bytes)
        }
        fn pin_host(&self, range: HostRange) -> Result<PinOutcome> {
            self.0.pin_host(range)
        }
        fn unpin_host(&self, range: HostRange) -> Result<()> {
            self.0.unpin_host(range)
        }
        fn new_stream(&self, name: &str, timeline: TimelineRecorder) -> Result<Arc<dyn DeviceStream>> {
            self.0.new_stream(name, timeline)
        }
        fn workspace_bytes(&self, log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64 {
            cuda::workspace_bytes(log_n, max_msm_len, msm_pass_points)
        }
        fn min_msm_pass_points(&self) -> usize {
            MSM_PASS_POINTS
        }
    }

    /// The bits-profile synthetic partition of 2^log_n constraints, and its key's device bytes.
    fn partition(log_n: u32) -> (WitnessShape, u64) {
        let spec = SyntheticSpec { log_n, profile: WitnessProfile::Bits, ..SyntheticSpec::default() };
        let shape = spec.shape().expect("a valid spec");
        let b = shape.b_query_len() as u64;
        let g1 = (1u64 << log_n) + shape.num_aux as u64 + shape.a_query_len() as u64 + b;
        (shape, g1 * 96 + b * 192)
    }

    /// What the H200 runs had: 149.0 GB granted by the budget, the key resident.
    const H200_BUDGET: u64 = 149_036_138_496;

    #[test]
    fn partitions_take_one_msm_pass_where_the_budget_has_room_for_it() {
        let device = PlansLikeCuda(CpuDevice::new(0, H200_BUDGET));
        // 2^26, three in flight: one pass over the largest MSM (the l query, 1.5 · 2^26 points)
        let (shape, key) = partition(26);
        let pass = msm_pass_points(&device, &shape, 26, 3, H200_BUDGET - key);
        assert!(pass >= largest_msm(&shape, 26), "2^26: passes of {pass}");
        let one_pass = partition_plan_bytes_with_pass(&device, &shape, 26, pass);
        assert!(3 * one_pass + key <= H200_BUDGET);
        assert!(one_pass > partition_plan_bytes(&device, &shape, 26), "one pass holds more than the shortest");
        // 2^27, two in flight beside the 64 GB key: only the shortest pass lets both fit
        let (shape, key) = partition(27);
        assert_eq!(msm_pass_points(&device, &shape, 27, 2, H200_BUDGET - key), MSM_PASS_POINTS);
        let shortest = partition_plan_bytes(&device, &shape, 27);
        assert!(2 * shortest + key <= H200_BUDGET, "two 2^27 partitions fit with the shortest pass");
        let longer = partition_plan_bytes_with_pass(&device, &shape, 27, 2 * MSM_PASS_POINTS);
        assert!(2 * longer + key > H200_BUDGET, "and not with twice that");
        // one 2^27 partition at a time has room for a longer pass
        assert!(msm_pass_points(&device, &shape, 27, 1, H200_BUDGET - key) > MSM_PASS_POINTS);
    }

    #[test]
    fn a_tight_budget_keeps_the_shortest_msm_pass() {
        let device = PlansLikeCuda(CpuDevice::new(0, H200_BUDGET));
        let (shape, _) = partition(26);
        let shortest = partition_plan_bytes(&device, &shape, 26);
        // room for three shortest-pass plans only, or for none at all
        for room in [3 * shortest, shortest / 2, 0] {
            assert_eq!(msm_pass_points(&device, &shape, 26, 3, room), MSM_PASS_POINTS, "room {room}");
        }
        // partitions smaller than the shortest pass: their plan does not depend on it
        let (small, _) = partition(20);
        assert_eq!(msm_pass_points(&device, &small, 20, 4, 0), MSM_PASS_POINTS);
        assert_eq!(
            partition_plan_bytes_with_pass(&device, &small, 20, MSM_PASS_POINTS),
            partition_plan_bytes_with_pass(&device, &small, 20, 1 << 22)
        );
        // the CPU runs every MSM in one pass whatever the room
        assert_eq!(msm_pass_points(&CpuDevice::new(0, 0), &shape, 26, 3, 0), usize::MAX);
    }

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
