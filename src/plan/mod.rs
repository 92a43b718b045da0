//! The memory plan of a partition: how many device bytes it needs, how long its MSM passes
//! are, and how a key too large to stay resident streams through chunk buffers.
//!
//! Plain policy over plain data: it depends on the witness's shape and on a device's
//! [`Workspace`] model only, so that backends, actors and tests can all use it without
//! depending on each other. The admission actor applies it; the budget grants what it says.

use serde::Serialize;

use crate::circuit::{PackedDensity, WitnessShape};

pub mod residency;
pub mod size;
pub use residency::{plan_key, KeyPlan, KeyVector, KeyVectors, NoPlanFits, VectorSet};
pub use size::parse_bytes;

/// How a partition's large host vectors become page-locked for their upload.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum StagingMode {
    /// Copy them into page-locked buffers kept in a pool: one parallel memory copy per
    /// vector, no driver call once the pool is warm. The default: a parallel copy costs less
    /// than locking and unlocking in place (BENCHMARKS.md, staging).
    #[default]
    Copy,
    /// Page-lock the witness's own vectors for the duration of the partition: no host copy and
    /// no pooled memory, at the price of a page-locking call per vector and partition. For
    /// hosts short of memory, or whose copies are slow.
    InPlace,
}

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

/// Host bytes of a partition synthesized witness-only for the device to evaluate: its inputs
/// (ONE included) and aux values; the densities and matrices are its key's, held once.
pub const fn assignment_host_bytes(inputs: usize, aux: usize) -> u64 {
    scalar_bytes(inputs + aux)
}

/// Alignment of each section of resident constraint matrices: the allocator's, so that every
/// section starts where a kernel may load 16 bytes at a time.
pub const MATRICES_SECTION_ALIGN: u64 = 256;

/// Where one of A, B and C lies in the resident matrices' buffer: byte offsets of its row
/// starts (`num_rows + 1` u64), columns and coefficient indices (`terms` u32 each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatrixSections {
    pub row_starts: u64,
    pub columns: u64,
    pub coefficients: u64,
    pub terms: usize,
}

/// The layout of a circuit shape's constraint matrices in one device buffer: the coefficient
/// table first, then A, B and C, each section aligned to [`MATRICES_SECTION_ALIGN`]. One
/// buffer, so that the budget grants and frees them as one resident thing, as it does a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatricesLayout {
    pub num_constraints: usize,
    pub num_inputs: usize,
    pub num_aux: usize,
    /// Entries of the coefficient table, at offset 0.
    pub table_len: usize,
    /// A, B and C.
    pub matrices: [MatrixSections; 3],
    /// Bytes of the whole buffer.
    pub bytes: u64,
}

impl MatricesLayout {
    /// The layout of `matrices`.
    pub fn of(matrices: &crate::circuit::ConstraintMatrices) -> MatricesLayout {
        let align = |at: u64| at.div_ceil(MATRICES_SECTION_ALIGN) * MATRICES_SECTION_ALIGN;
        let rows = matrices.num_constraints();
        let table_len = matrices.coefficient_table().len();
        let mut at = align(scalar_bytes(table_len));
        let mut section = |terms: usize| {
            let row_starts = at;
            let columns = align(row_starts + 8 * (rows as u64 + 1));
            let coefficients = align(columns + 4 * terms as u64);
            at = align(coefficients + 4 * terms as u64);
            MatrixSections { row_starts, columns, coefficients, terms }
        };
        let sections =
            [section(matrices.a().num_terms()), section(matrices.b().num_terms()), section(matrices.c().num_terms())];
        MatricesLayout {
            num_constraints: rows,
            num_inputs: matrices.num_inputs(),
            num_aux: matrices.num_aux(),
            table_len,
            matrices: sections,
            bytes: at,
        }
    }

    /// Terms of A, B and C together.
    pub fn terms(&self) -> usize {
        self.matrices.iter().map(|m| m.terms).sum()
    }

    /// Bytes one evaluation of A, B and C must read at least: every row start, column and
    /// coefficient index once, and the assignment once (a value used by several terms may come
    /// from a cache; the table is small and stays in one). The bandwidth floor's numerator.
    pub fn evaluation_read_bytes(&self) -> u64 {
        let index_bytes: u64 =
            self.matrices.iter().map(|m| 8 * (self.num_constraints as u64 + 1) + 8 * m.terms as u64).sum();
        index_bytes + scalar_bytes(self.num_inputs + self.num_aux)
    }
}

/// Device bytes of a circuit shape's constraint matrices made resident ([`MatricesLayout`]):
/// held once per shape and device, beside the proving key, not per partition.
pub fn resident_matrices_bytes(matrices: &crate::circuit::ConstraintMatrices) -> u64 {
    MatricesLayout::of(matrices).bytes
}

/// Device bytes of one partition's assignment for evaluating resident matrices: its inputs
/// (ONE included) in one buffer and its aux variables in another (the aux buffer the
/// partition already holds for its MSMs).
pub fn assignment_bytes(shape: &WitnessShape) -> u64 {
    scalar_bytes(shape.num_inputs.max(1)) + scalar_bytes(shape.num_aux.max(1))
}

/// Host bytes one partition copies to its device for a, b, c and the assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StagedBytes {
    /// As the pipeline stages today: a, b and c evaluated on the host (one scalar a
    /// constraint each) and the aux assignment.
    pub host_evaluated: u64,
    /// With the matrices resident and evaluated on the device: the inputs and aux only.
    pub device_evaluated: u64,
}

/// What evaluating the constraint matrices on the device saves in host-to-device copies, per
/// partition of `shape`. (The query scalars, the same either way, are not counted.)
pub fn staged_bytes_per_partition(shape: &WitnessShape) -> StagedBytes {
    StagedBytes {
        host_evaluated: 3 * scalar_bytes(shape.num_constraints) + scalar_bytes(shape.num_aux),
        device_evaluated: scalar_bytes(shape.num_inputs) + scalar_bytes(shape.num_aux),
    }
}
