//! The memory plan of a partition: how many device bytes it needs, how long its MSM passes
//! are, and how a key too large to stay resident streams through chunk buffers.
//!
//! Plain policy over plain data: it depends on the witness's shape and on a device's
//! [`Workspace`] model only, so that backends, actors and tests can all use it without
//! depending on each other. The admission actor applies it; the budget grants what it says.

use crate::circuit::{PackedDensity, WitnessShape};

/// Bytes of `n` scalars on a device.
pub const fn scalar_bytes(n: usize) -> u64 {
    (n as u64) * 32
}

/// Bytes of `n` G1 affine points on a device.
pub const fn g1_bytes(n: usize) -> u64 {
    (n as u64) * 96
}

/// Bytes of `n` G2 affine points on a device.
pub const fn g2_bytes(n: usize) -> u64 {
    (n as u64) * 192
}

/// Bytes of the MSM results on a device: four G1 points and one G2 point in Jacobian form.
pub const MSM_RESULTS_BYTES: u64 = 4 * 144 + 288;

/// What the plan needs to know of a device: the scratch its kernels use. Every
/// [`crate::backend::Device`] is one.
pub trait Workspace {
    /// Scratch bytes a partition needs beside its inputs: NTT twiddles and MSM buckets for the
    /// largest MSM of `max_msm_len` points, run in passes of `msm_pass_points` points.
    fn workspace_bytes(&self, log_n: u32, max_msm_len: usize, msm_pass_points: usize) -> u64;

    /// The shortest MSM pass the device runs: the one that bounds an MSM's scratch whatever
    /// its length (`usize::MAX` where the scratch does not depend on the pass).
    fn min_msm_pass_points(&self) -> usize;
}

/// Device bytes one partition needs beside its proving key with its MSMs in the device's
/// shortest passes ([`Workspace::min_msm_pass_points`]): the most it can be planned with.
pub fn partition_plan_bytes<D: Workspace + ?Sized>(device: &D, shape: &WitnessShape, log_n: u32) -> u64 {
    partition_plan_bytes_with_pass(device, shape, log_n, device.min_msm_pass_points())
}

/// The points of the partition's largest MSM (h, l, a or b).
pub fn largest_msm(shape: &WitnessShape, log_n: u32) -> usize {
    ((1usize << log_n) - 1).max(shape.num_aux).max(shape.a_query_len()).max(shape.b_query_len())
}

/// Device bytes one partition needs beside its proving key, its MSMs run in passes of
/// `msm_pass_points`: the a, b, c evaluations over the domain (h is computed in place of a), the
/// scalars of the l, a and b MSMs, the packed densities the a and b scalars are selected with,
/// scratch, results.
pub fn partition_plan_bytes_with_pass<D: Workspace + ?Sized>(
    device: &D,
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
/// largest MSM and its halvings down to the device's shortest pass with which `in_flight`
/// such partitions fit in `room` bytes (the device's capacity less its resident key); the
/// shortest when none does. Every pass after the first pays a fix-up over all the buckets, so
/// the longest pass that fits wins.
pub fn msm_pass_points<D: Workspace + ?Sized>(
    device: &D,
    shape: &WitnessShape,
    log_n: u32,
    in_flight: usize,
    room: u64,
) -> usize {
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

/// Host bytes of a synthesized witness of a circuit whose key has a domain of `domain`
/// points, `inputs` inputs (ONE included) and `aux` aux variables: a, b and c (at most one
/// evaluation per point of the domain), both assignments, and a byte per variable for each of
/// the three densities. What the host-memory budget grants a partition before it synthesizes.
pub const fn witness_host_bytes(domain: usize, inputs: usize, aux: usize) -> u64 {
    scalar_bytes(3 * domain + inputs + aux) + (inputs + 2 * aux) as u64
}
