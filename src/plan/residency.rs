//! Which of a proving key's vectors stay resident on a device and which stream through chunk
//! buffers, so that the partitions of the key always fit beside what it keeps.
//!
//! The invariant every caller relies on: a key is made resident (by a preload, a warm-up or
//! a partition's admission) only with a [`KeyPlan`] from [`plan_key`], whose resident vectors
//! leave room for at least one partition of the key, its chunk buffers included. A partition
//! of a resident key then never waits for memory that only its own key holds.

use super::{g1_bytes, g2_bytes, key_chunk_bytes, key_chunk_points, MAX_KEY_CHUNK_POINTS, MIN_KEY_CHUNK_POINTS};

/// The five query vectors of a proving key, in the order the MSM stage runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyVector {
    H,
    L,
    A,
    BG1,
    BG2,
}

impl KeyVector {
    pub const ALL: [KeyVector; 5] = [KeyVector::H, KeyVector::L, KeyVector::A, KeyVector::BG1, KeyVector::BG2];

    /// The name reports and status use (`h`, `l`, `a`, `b_g1`, `b_g2`).
    pub fn name(self) -> &'static str {
        match self {
            KeyVector::H => "h",
            KeyVector::L => "l",
            KeyVector::A => "a",
            KeyVector::BG1 => "b_g1",
            KeyVector::BG2 => "b_g2",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of key vectors.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
pub struct VectorSet(u8);

impl VectorSet {
    pub const NONE: VectorSet = VectorSet(0);
    pub const ALL: VectorSet = VectorSet(0b1_1111);

    pub fn contains(self, vector: KeyVector) -> bool {
        self.0 & vector.bit() != 0
    }

    pub fn with(self, vector: KeyVector) -> VectorSet {
        VectorSet(self.0 | vector.bit())
    }

    /// The vectors not in this set.
    pub fn complement(self) -> VectorSet {
        VectorSet(!self.0 & VectorSet::ALL.0)
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    pub fn is_all(self) -> bool {
        self == VectorSet::ALL
    }

    pub fn iter(self) -> impl Iterator<Item = KeyVector> {
        KeyVector::ALL.into_iter().filter(move |v| self.contains(*v))
    }

    /// The names of its vectors, in MSM order.
    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(KeyVector::name).collect()
    }
}

impl std::fmt::Debug for VectorSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}

/// The points of each of a key's vectors: what the plan needs to know of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyVectors {
    /// Points per vector, indexed by `KeyVector as usize`.
    pub points: [usize; 5],
}

impl KeyVectors {
    /// Device bytes of one vector: 96 a G1 point, 192 a G2 point.
    pub fn bytes(&self, vector: KeyVector) -> u64 {
        let points = self.points[vector as usize];
        match vector {
            KeyVector::BG2 => g2_bytes(points),
            _ => g1_bytes(points),
        }
    }

    /// Device bytes of the vectors in `set`.
    pub fn set_bytes(&self, set: VectorSet) -> u64 {
        set.iter().map(|v| self.bytes(v)).sum()
    }

    /// The longest vector in `set`, in points (0 for none): what its chunks must cover.
    pub fn longest_in(&self, set: VectorSet) -> usize {
        set.iter().map(|v| self.points[v as usize]).max().unwrap_or(0)
    }
}

/// How a key is held on a device while its partitions prove.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyPlan {
    /// The vectors kept on the device; the rest stream for every partition.
    pub resident: VectorSet,
    /// Points per chunk buffer of the streamed vectors; `None` when every vector is resident.
    pub chunk_points: Option<usize>,
    /// Partitions of the key the plan leaves room for at once, beside the resident vectors.
    pub partitions: usize,
}

impl KeyPlan {
    /// Device bytes one partition takes beside the resident vectors: its own plan and, when
    /// some vector streams, its two chunk buffers.
    pub fn partition_bytes(&self, partition_plan: u64) -> u64 {
        partition_plan + self.chunk_points.map_or(0, key_chunk_bytes)
    }

    /// Device bytes of the resident vectors.
    pub fn resident_bytes(&self, key: &KeyVectors) -> u64 {
        key.set_bytes(self.resident)
    }
}

/// No plan fits: the bytes the smallest one needs (a partition with the smallest chunks and
/// nothing resident), against the device's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoPlanFits {
    pub needed_bytes: u64,
    pub capacity_bytes: u64,
}

/// Plans `key` on a device of `capacity` bytes whose partitions of the key need
/// `partition_plan` bytes each (with the device's shortest MSM pass), for up to `partitions`
/// of them at once (the device's workers).
///
/// The plan keeps the most of the key resident that fits beside at least one partition: the
/// whole key where it fits, else the subset of vectors with the most bytes that fits beside the
/// partitions' working sets and their chunk buffers. Only then does it take more partitions at
/// once, as ties allow (the whole key beside every worker's partition, when that fits). On an
/// H100 one 2^26 or 2^27 partition with part of the key resident proved faster than two with
/// the key streamed whole (BENCHMARKS.md, keys on the cards providers own): each streamed byte
/// crosses PCIe once per partition. Among subsets of equal bytes, G1 vectors stay before the G2
/// one, whose longer MSM hides its chunks' copies better; then the longest chunks win. With
/// nothing resident the chunks shrink to what fits, down to [`MIN_KEY_CHUNK_POINTS`]; below
/// that no plan fits.
pub fn plan_key(capacity: u64, key: &KeyVectors, partition_plan: u64, partitions: usize) -> Result<KeyPlan, NoPlanFits> {
    // Best first: most resident bytes, then most partitions, then the fewest G2 bytes
    // resident, then the longest chunks.
    let mut best: Option<((u64, u64, bool, usize), KeyPlan)> = None;
    let mut consider = |score: (u64, u64, bool, usize), plan: KeyPlan| {
        if best.as_ref().is_none_or(|(best_score, _)| score > *best_score) {
            best = Some((score, plan));
        }
    };
    for n in 1..=partitions.max(1) as u64 {
        let whole = key.set_bytes(VectorSet::ALL);
        if whole.saturating_add(n.saturating_mul(partition_plan)) <= capacity {
            consider((whole, n, true, usize::MAX), KeyPlan { resident: VectorSet::ALL, chunk_points: None, partitions: n as usize });
            continue;
        }
        for mask in 0..VectorSet::ALL.0 {
            let resident = VectorSet(mask);
            let Some(chunk) = chunk_beside(capacity, key, resident, partition_plan, n) else { continue };
            let score = (key.set_bytes(resident), n, !resident.contains(KeyVector::BG2), chunk);
            consider(score, KeyPlan { resident, chunk_points: Some(chunk), partitions: n as usize });
        }
    }
    if let Some((_, plan)) = best {
        return Ok(plan);
    }
    // Nothing resident and chunks shorter than an eighth of a vector: one partition.
    match key_chunk_points(capacity.saturating_sub(partition_plan), key.longest_in(VectorSet::ALL)) {
        Some(chunk) => Ok(KeyPlan { resident: VectorSet::NONE, chunk_points: Some(chunk), partitions: 1 }),
        None => Err(NoPlanFits {
            needed_bytes: partition_plan + key_chunk_bytes(MIN_KEY_CHUNK_POINTS),
            capacity_bytes: capacity,
        }),
    }
}

/// The chunks a key's streamed vectors pass through: up to the longest of them (within
/// [`MIN_KEY_CHUNK_POINTS`]..=[`MAX_KEY_CHUNK_POINTS`]), and no shorter than an eighth of it
/// (so that a vector streams in a few long MSMs, not in many short ones).
pub fn chunk_range(key: &KeyVectors, streamed: VectorSet) -> (usize, usize) {
    let longest = key.longest_in(streamed);
    let upper = longest.clamp(MIN_KEY_CHUNK_POINTS, MAX_KEY_CHUNK_POINTS);
    let lower = (longest / 8).clamp(MIN_KEY_CHUNK_POINTS, MAX_KEY_CHUNK_POINTS).min(upper);
    (lower, upper)
}

/// The longest chunk in [`chunk_range`] with which `partitions` partitions of
/// `partition_plan` bytes, each with two chunk buffers, fit in `capacity` beside `resident`;
/// `None` when even the shortest does not.
fn chunk_beside(capacity: u64, key: &KeyVectors, resident: VectorSet, partition_plan: u64, partitions: u64) -> Option<usize> {
    let (lower, upper) = chunk_range(key, resident.complement());
    let share = capacity.checked_sub(key.set_bytes(resident))? / partitions;
    let room = share.checked_sub(partition_plan)?;
    let chunk = usize::try_from(room / key_chunk_bytes(1)).unwrap_or(usize::MAX).min(upper);
    (chunk >= lower).then_some(chunk)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(points: [usize; 5]) -> KeyVectors {
        KeyVectors { points }
    }

    #[test]
    fn a_key_that_fits_beside_its_partitions_is_wholly_resident() {
        let k = key([1000, 900, 800, 700, 700]);
        let total = k.set_bytes(VectorSet::ALL);
        let plan = plan_key(total + 2 * 5000, &k, 5000, 2).unwrap();
        assert_eq!(plan, KeyPlan { resident: VectorSet::ALL, chunk_points: None, partitions: 2 });
        // The twin one byte short keeps the whole key resident, beside one partition.
        let plan = plan_key(total + 2 * 5000 - 1, &k, 5000, 2).unwrap();
        assert_eq!(plan, KeyPlan { resident: VectorSet::ALL, chunk_points: None, partitions: 1 });
        // Short of room for the key beside even one partition, the smallest vector that frees
        // enough room streams, not the whole key.
        let plan = plan_key(total + 5000 - 1, &k, 5000, 2).unwrap();
        assert!(!plan.resident.is_all() && !plan.resident.is_empty(), "{plan:?}");
    }

    #[test]
    fn every_plan_leaves_room_for_its_partitions_and_keeps_the_most_it_can() {
        let k = key([4096, 3000, 2500, 2000, 2000]);
        let total = k.set_bytes(VectorSet::ALL);
        let partition = 100_000;
        let mut refused = 0;
        for capacity in (0..=total + 3 * partition).step_by(997) {
            for partitions in 1..=3 {
                let Ok(plan) = plan_key(capacity, &k, partition, partitions) else {
                    refused += 1;
                    assert!(capacity < partition + key_chunk_bytes(MIN_KEY_CHUNK_POINTS));
                    continue;
                };
                let used = plan.resident_bytes(&k) + plan.partitions as u64 * plan.partition_bytes(partition);
                assert!(used <= capacity, "{plan:?} takes {used} of {capacity}");
                assert!((1..=partitions).contains(&plan.partitions));
                // The same resident vectors did not fit beside one more partition, even with
                // the shortest chunks.
                if plan.partitions < partitions {
                    let chunks = match plan.resident.is_all() {
                        true => 0,
                        false => key_chunk_bytes(chunk_range(&k, plan.resident.complement()).0),
                    };
                    let more = plan.resident_bytes(&k) + (plan.partitions as u64 + 1) * (partition + chunks);
                    assert!(more > capacity, "{plan:?}: one more partition would fit in {capacity}");
                }
                assert_eq!(plan.chunk_points.is_none(), plan.resident.is_all());
                // No larger set (one more vector) would have fitted beside one partition with
                // the shortest chunk buffers that set may stream with.
                for v in plan.resident.complement().iter() {
                    let more = plan.resident.with(v);
                    let chunks = match more.is_all() {
                        true => 0,
                        false => key_chunk_bytes(chunk_range(&k, more.complement()).0),
                    };
                    let bytes = k.set_bytes(more) + partition + chunks;
                    assert!(bytes > capacity, "{plan:?}: {v:?} would fit too in {capacity}");
                }
            }
        }
        assert!(refused > 0, "no capacity was too small: the refusal went untested");
    }

    #[test]
    fn nothing_fits_below_one_partition_and_the_smallest_chunks() {
        let k = key([1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20]);
        let needed = 7777 + key_chunk_bytes(MIN_KEY_CHUNK_POINTS);
        assert_eq!(
            plan_key(needed - 1, &k, 7777, 2),
            Err(NoPlanFits { needed_bytes: needed, capacity_bytes: needed - 1 })
        );
        let plan = plan_key(needed, &k, 7777, 2).unwrap();
        assert_eq!(plan, KeyPlan { resident: VectorSet::NONE, chunk_points: Some(MIN_KEY_CHUNK_POINTS), partitions: 1 });
    }

    #[test]
    fn equal_bytes_keep_g1_resident_and_stream_g2() {
        // b_g2 of 500 points is as many bytes as h of 1000.
        let k = key([1000, 100, 100, 100, 500]);
        let partition = 1000;
        let chunk = key_chunk_bytes(chunk_range(&k, VectorSet::NONE.with(KeyVector::H)).0);
        let capacity = k.set_bytes(VectorSet::ALL) - g1_bytes(1000) + partition + chunk;
        let plan = plan_key(capacity, &k, partition, 1).unwrap();
        assert!(plan.resident.contains(KeyVector::H) && !plan.resident.contains(KeyVector::BG2), "{plan:?}");
        assert_eq!(plan.resident.complement(), VectorSet::NONE.with(KeyVector::BG2), "{plan:?}");
    }
}
