//! The memory plan (`snarkpipe::plan`) at the sizes a GPU runs: MSM pass lengths against the
//! room beside a resident key, and the chunks a streamed key passes through.

use snarkpipe::backend::cpu::CpuDevice;
use snarkpipe::backend::cuda::{self, MSM_PASS_POINTS};
use snarkpipe::circuit::WitnessShape;
use snarkpipe::plan::{
    key_chunk_bytes, key_chunk_points, largest_msm, msm_pass_points, partition_plan_bytes,
    partition_plan_bytes_with_pass, Workspace, MAX_KEY_CHUNK_POINTS, MIN_KEY_CHUNK_POINTS,
};
use snarkpipe::synthetic::DEFAULT_NUM_INPUTS;

mod common;
use common::spec;

/// A device planning its scratch as the CUDA device does, so that the pass choice can be
/// checked without a GPU.
struct PlansLikeCuda;

impl Workspace for PlansLikeCuda {
    fn workspace_bytes(&self, log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64 {
        cuda::workspace_bytes(log_n, max_msm_len, msm_pass_points)
    }
    fn min_msm_pass_points(&self) -> usize {
        MSM_PASS_POINTS
    }
}

/// The bits-profile synthetic partition of 2^log_n constraints, and its key's device bytes.
fn partition(log_n: u32) -> (WitnessShape, u64) {
    let spec = spec(log_n, DEFAULT_NUM_INPUTS, 0);
    let shape = spec.shape().expect("a valid spec");
    let b = shape.b_query_len() as u64;
    let g1 = (1u64 << log_n) + shape.num_aux as u64 + shape.a_query_len() as u64 + b;
    (shape, g1 * 96 + b * 192)
}

/// The bytes a budget on a 141 GB GPU grants with the default reserve, the key resident.
const LARGE_GPU_BUDGET: u64 = 149_036_138_496;

#[test]
fn partitions_take_one_msm_pass_where_the_budget_has_room_for_it() {
    let device = PlansLikeCuda;
    // 2^26, three in flight: one pass over the largest MSM (the l query, 1.5 · 2^26 points)
    let (shape, key) = partition(26);
    let pass = msm_pass_points(&device, &shape, 26, 3, LARGE_GPU_BUDGET - key);
    assert!(pass >= largest_msm(&shape, 26), "2^26: passes of {pass}");
    let one_pass = partition_plan_bytes_with_pass(&device, &shape, 26, pass);
    assert!(3 * one_pass + key <= LARGE_GPU_BUDGET);
    assert!(one_pass > partition_plan_bytes(&device, &shape, 26), "one pass holds more than the shortest");
    // 2^27, two in flight beside the 64 GB key: only the shortest pass lets both fit
    let (shape, key) = partition(27);
    assert_eq!(msm_pass_points(&device, &shape, 27, 2, LARGE_GPU_BUDGET - key), MSM_PASS_POINTS);
    let shortest = partition_plan_bytes(&device, &shape, 27);
    assert!(2 * shortest + key <= LARGE_GPU_BUDGET, "two 2^27 partitions fit with the shortest pass");
    let longer = partition_plan_bytes_with_pass(&device, &shape, 27, 2 * MSM_PASS_POINTS);
    assert!(2 * longer + key > LARGE_GPU_BUDGET, "and not with twice that");
    // one 2^27 partition at a time has room for a longer pass
    assert!(msm_pass_points(&device, &shape, 27, 1, LARGE_GPU_BUDGET - key) > MSM_PASS_POINTS);
}

#[test]
fn a_tight_budget_keeps_the_shortest_msm_pass() {
    let device = PlansLikeCuda;
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
    let room = key_chunk_bytes;
    assert_eq!(key_chunk_points(room(1000), 1 << 20), Some(1000));
    assert_eq!(key_chunk_points(room(1000) + 383, 1 << 20), Some(1000), "a partial point is no room");
    assert_eq!(key_chunk_points(room(1 << 30), 1 << 30), Some(MAX_KEY_CHUNK_POINTS));
    assert_eq!(key_chunk_points(room(1 << 20), 300), Some(300), "no larger than the longest vector");
    assert_eq!(key_chunk_points(room(1 << 20), 10), Some(MIN_KEY_CHUNK_POINTS));
    assert_eq!(key_chunk_points(room(MIN_KEY_CHUNK_POINTS), 1 << 20), Some(MIN_KEY_CHUNK_POINTS));
    assert_eq!(key_chunk_points(room(MIN_KEY_CHUNK_POINTS) - 1, 1 << 20), None);
    assert_eq!(key_chunk_points(0, 1 << 20), None);
}

/// The key's plan for 2^27 partitions on the cards providers own, as the CUDA device plans
/// them: on an H200 the key stays whole beside two partitions; on an 80 GB H100 (and under a
/// 48 GB cap) the key does not fit beside a partition and a plan is found that streams what it
/// must; below one partition's working set the plan is refused, naming the bytes it needs.
#[test]
fn a_2_27_key_is_planned_on_every_card_or_refused_at_once() {
    use snarkpipe::plan::{plan_key, KeyVectors};
    let device = PlansLikeCuda;
    let (shape, _) = partition(27);
    let partition_bytes = partition_plan_bytes(&device, &shape, 27);
    let b = shape.b_query_len();
    let key = KeyVectors { points: [(1 << 27) - 1, shape.num_aux, shape.a_query_len(), b, b] };
    let h200 = plan_key(LARGE_GPU_BUDGET, &key, partition_bytes, 2).unwrap();
    assert!(h200.resident.is_all() && h200.partitions == 2, "{h200:?}");
    // An H100's budget: 80 GiB less what the driver keeps and the 1 GiB reserve.
    for budget in [84_000_000_000u64, 48 << 30] {
        let plan = plan_key(budget, &key, partition_bytes, 2).unwrap();
        assert!(!plan.resident.is_all(), "{budget}: {plan:?}");
        let used = plan.resident_bytes(&key) + plan.partitions as u64 * plan.partition_bytes(partition_bytes);
        assert!(used <= budget, "{budget}: {plan:?} takes {used}");
        // One partition at a time keeps much of the key resident.
        let one = plan_key(budget, &key, partition_bytes, 1).unwrap();
        assert!(one.resident_bytes(&key) + one.partition_bytes(partition_bytes) <= budget, "{one:?}");
    }
    for cap in [32u64 << 30, 24 << 30, 16 << 30] {
        let refused = plan_key(cap, &key, partition_bytes, 2).unwrap_err();
        assert!(refused.needed_bytes > cap && refused.needed_bytes >= partition_bytes, "{refused:?}");
    }
}
