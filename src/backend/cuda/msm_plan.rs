//! The MSM's plan: how an MSM is run and sized, with no device in sight. The options and the
//! bucket and scatter methods, the window size (a cost model), the pass and slice lengths, the
//! binned scatter's geometry, and the device scratch each choice holds (which the memory plan
//! reserves before an MSM runs). The constants that mirror kernels/msm/msm.cu's live here too.
//! `msm.rs` launches what this plans; the curve table (`msm_curves.rs`) gives the G2 sizes the
//! plan reserves for.

use super::msm_curves::{MsmCurve, G2};

/// Elements a block of `msm_scan_tiles` scans (SCAN_TILE in msm.cu).
pub(super) const SCAN_TILE: usize = 1024;

/// Sorted bucket entries per thread in the bucket phase: enough threads to fill the GPU a few
/// times over (2^19), at least 8 so that a bucket crosses few chunk ends, at most 64.
pub fn chunk_for(entries: usize) -> u32 {
    (entries >> 19).clamp(8, 64) as u32
}

/// log2 of the window-reduction segments per window: about 2^17 threads over all windows, but
/// at least 16 buckets a segment (each segment pays a multiplication by its offset).
pub(super) fn log_segments_for(windows: usize, log_buckets: u32) -> u32 {
    let lw = windows.next_power_of_two().trailing_zeros();
    17u32.saturating_sub(lw).min(log_buckets.saturating_sub(4))
}

/// The shortest pass an MSM runs in, and the default. A longer MSM runs in passes into the
/// same buckets and reduces them once, so its scratch is bounded by a pass (about 166 bytes per
/// point at c = 20, plus the buckets) whatever its length: at 2^27 this is what lets two
/// partitions fit beside a resident key on a 141 GB GPU. Where the budget has room, a partition's
/// plan takes longer passes ([`crate::plan::msm_pass_points`]): every pass after
/// the first pays a fix-up over all the buckets.
pub const MSM_PASS_POINTS: usize = 1 << 25;

/// How an MSM runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct MsmOptions {
    /// Window size in bits (2..=20); `None` picks one from the number of scalars.
    pub window_bits: Option<u32>,
    /// Adds the points whose scalar is 1 in a plain batch sum and runs Pippenger over the
    /// rest (zeros are always skipped). Pays off when most scalars are bits.
    pub ones_fast_path: bool,
    /// Points per pass; `None` means [`MSM_PASS_POINTS`]. The pipeline passes the pass its
    /// memory plan was sized for; tests set it small to run many passes over few points.
    pub pass_points: Option<usize>,
    /// Windows whose bucket entries one launch of the direct scatter writes; `None` means
    /// [`scatter_windows_for`] the window size. The binned scatter sorts one window at a time.
    pub scatter_windows: Option<usize>,
    /// How the entries are sorted into buckets; `None` means [`scatter_kind_for`] the window
    /// size. Either kind works for every window size.
    pub scatter: Option<ScatterKind>,
    /// How the sorted entries are summed into buckets; `None` means [`bucket_method_for`] the
    /// curve, window and entries. Either method works for every MSM.
    pub bucket_method: Option<BucketMethod>,
    /// Entries a slice of the batch-affine bucket phase; `None` means
    /// [`AFFINE_SLICE_ENTRIES`]. Tests set it small, so that buckets cross many slices.
    pub affine_slice_entries: Option<usize>,
    /// Fail instead of falling back to XYZZ when a batch-affine slice's buckets are too sparse
    /// for its round buffers, so that tests know which method summed their buckets.
    pub affine_without_fallback: bool,
}

/// How a pass sums its sorted entries into buckets (both leave the same bucket sums).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BucketMethod {
    /// `msm_gX_buckets`: equal chunks of entries a thread, XYZZ accumulators (madd-2008-s,
    /// 8M + 2S of the curve's field an addition), and the fix-up for buckets crossing chunks.
    Xyzz,
    /// kernels/msm/batch_affine.cuh: rounds of affine additions of pairs within each bucket,
    /// all of a round's divisions sharing one inversion (5M + 1S an addition, plus a fixed
    /// latency a round), in slices of [`AFFINE_SLICE_ENTRIES`] entries; XYZZ for the last few
    /// points of each bucket.
    BatchAffine,
}

/// Entries a slice of the batch-affine bucket phase holds: its scratch
/// ([`affine_scratch_bytes`]) is bounded by a slice, whatever the bucket sizes. Every slice
/// pays a round's fixed latency (a few launches, a download and one inversion) per round, so
/// slices should be long; at 2^23 a slice's scratch on G2 fits within the chunk spills that the
/// XYZZ bucket phase of a 2^25-point pass would hold instead.
pub const AFFINE_SLICE_ENTRIES: usize = 1 << 23;

/// The batch-affine rounds stop once no bucket of a slice holds more than this many points;
/// the rest are summed in XYZZ, one thread a bucket. Every round pays a fixed latency whatever
/// its size, so once the buckets hold only a few points their last additions cost less in XYZZ
/// than in another round.
pub const AFFINE_FINISH_POINTS: u32 = 4;

/// Values a thread of the batch-affine inversion tree multiplies (each level divides the
/// values by this).
pub const AFFINE_TREE_GROUP: usize = 16;

/// The bucket method a pass of `entries` sorted entries over `buckets` buckets of `c`-bit
/// windows takes on a curve where batch-affine additions can win (`batch_affine_wins`, G2):
/// batch-affine for 20-bit windows with enough entries to hide each round's fixed latency and
/// at least 8 a bucket; XYZZ otherwise. The operation count alone favours batch-affine
/// everywhere, but each round's fixed latency and the Fp2 field's larger saving decide: the
/// rule follows the timings in docs/history/BENCHMARKS-2026-12-07.md ("Batch-affine buckets
/// against XYZZ"), where batch-affine won only on G2 with wide, full windows, and lost on G1
/// and with few large buckets (c = 16, one window).
pub fn bucket_method_for(batch_affine_wins: bool, c: u32, entries: usize, buckets: usize) -> BucketMethod {
    if batch_affine_wins && c >= 20 && entries >= 1 << 22 && entries >= 8 * buckets {
        BucketMethod::BatchAffine
    } else {
        BucketMethod::Xyzz
    }
}

/// Outputs the batch-affine buffers of a slice of `slice` entries hold: (rounds 0, 2, 4, ...,
/// rounds 1, 3, ...). A round of a slice whose buckets average at least 4 entries fits: it
/// writes Σ ceil(m/2) ≤ slice/2 + nonempty/2 outputs, at most 5/8 of the slice, and the next
/// round Σ ceil(m/4) ≤ slice/4 + 3/4 of the nonempty buckets, at most 7/16. A slice of
/// sparser buckets does not fit, and its pass falls back to XYZZ.
pub fn affine_round_capacities(slice: usize) -> (usize, usize) {
    (slice / 8 * 5 + 8, slice / 16 * 7 + 8)
}

/// Outputs a thread of a batch-affine round of `items` outputs takes: enough threads to fill
/// the GPU (about 2^19), at least 4 so that the tree stays small, at most 32.
pub fn affine_outputs_per_thread(items: usize) -> usize {
    (items >> 19).clamp(4, 32)
}

/// One level of the batch-affine inversion tree over `n` values: `count` values in groups of
/// [`AFFINE_TREE_GROUP`], whose running products go to prefixes [pre_at, pre_at + count) and
/// whose group products, the next level's values, to products [up_at, up_at + groups).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TreeLevel {
    pub count: usize,
    pub pre_at: usize,
    pub up_at: usize,
}

/// The levels of the inversion tree of `n` values, bottom first; the last is the top, at most
/// [`AFFINE_TREE_GROUP`] values, which one thread multiplies, inverts and walks back down.
pub fn affine_tree_levels(n: usize) -> Vec<TreeLevel> {
    let mut levels = Vec::new();
    let (mut count, mut pre_at, mut up_at) = (n, 0, 0);
    loop {
        levels.push(TreeLevel { count, pre_at, up_at });
        if count <= AFFINE_TREE_GROUP {
            return levels;
        }
        let groups = count.div_ceil(AFFINE_TREE_GROUP);
        (count, pre_at, up_at) = (groups, pre_at + count, up_at + groups);
    }
}

/// Elements the inversion tree of `n` values needs over all its levels: (prefixes, products).
pub fn affine_tree_elements(n: usize) -> (usize, usize) {
    let top = *affine_tree_levels(n).last().expect("a tree has a top level");
    (top.pre_at + top.count, top.up_at + 1)
}

/// The device memory the batch-affine bucket phase holds for slices of `slice` entries over
/// at most `buckets` buckets a slice, with field elements of `field_bytes` bytes (48: G1, 96:
/// G2), in bytes: the coordinates of both round buffers, the running products, the threads'
/// products and their tree, the two bucket-end arrays, the scan's tile sums and a counter,
/// and a spilled XYZZ point per slice of `entries`. Exactly what `GpuStream::affine_buckets`
/// allocates.
pub fn affine_scratch_bytes(field_bytes: usize, slice: usize, buckets: usize, entries: usize) -> u64 {
    let (even, odd) = affine_round_capacities(slice);
    let prefix = even + 32;
    let products = even / 4 + 1;
    let (pre, up) = affine_tree_elements(products);
    let elements = 2 * even + 2 * odd + prefix + products + pre + up;
    let words = 2 * buckets + buckets.div_ceil(SCAN_TILE) + 1;
    let spills = entries.div_ceil(slice.max(1)) * 4 * field_bytes;
    (field_bytes * elements + 4 * words + spills) as u64
}

/// How an MSM sorts its signed digits' entries into buckets after the histogram and scan (both
/// leave the same entries and bucket ends for the bucket kernels; only the order within a
/// bucket differs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScatterKind {
    /// `msm_scatter_indexed`: every entry claims its slot with a returning global atomic on its
    /// bucket's cursor, [`MsmOptions::scatter_windows`] windows a launch.
    Direct,
    /// A two-level counting sort, one window at a time (`msm_bin_scatter`, `msm_bin_place`):
    /// entries go to coarse bins of buckets (`bin_geometry`), reserving their runs with one
    /// global atomic per tile of scalars and bin, and are then placed within their bin by
    /// shared-memory cursors into a shared-memory stage of the bin's part of the entries, which
    /// is written out coalesced (a bin larger than the stage, `bin_stage_words`, writes each entry
    /// directly). Needs a temporary array of 8 bytes per scalar.
    Binned,
}

/// log2 of the most coarse bins a window of the binned scatter has (BIN_LOG_MAX in msm.cu):
/// enough that a bin of a 2^25-point pass fits phase B's stage (`bin_stage_words`).
pub(super) const BIN_LOG_MAX: u32 = 11;
/// log2 of the most buckets a coarse bin may hold (BIN_LOG_WIDTH_MAX in msm.cu): phase B's
/// shared cursors. 2^19 buckets (c = 20, the widest window) in 2^11 bins.
pub(super) const BIN_LOG_WIDTH_MAX: u32 = 8;
/// Scalars per block of the binned scatter's phase A (BIN_TILE in msm.cu) and its threads.
pub(super) const BIN_TILE: usize = 4096;
pub(super) const BIN_THREADS: u32 = 256;
/// Threads per block (one block per bin) of its phase B (PLACE_THREADS in msm.cu).
pub(super) const PLACE_THREADS: u32 = 512;

/// The binned scatter's geometry for `c`-bit windows (2..=20): (log2 of the coarse bins a
/// window, log2 of the buckets a bin). Window w's bucket b goes to bin b >> shift. At most 2^11
/// bins: phase A's per-bin counters take 8 KiB of a block's shared memory and its tiles still
/// fill two entries a bin, while a bin of a 2^25-point pass fits phase B's stage; the rest of
/// the window's 2^(c-1) buckets divide among them.
pub(super) fn bin_geometry(c: u32) -> (u32, u32) {
    let log_buckets = c - 1;
    let log_bins = log_buckets.min(BIN_LOG_MAX);
    (log_bins, log_buckets - log_bins)
}

/// Window `w`'s bins for `c`-bit windows (window_bins in msm.cu): (log2 of its bins, log2 of
/// the buckets a bin). They cover the buckets the window can use, min(c − 1, 255 − w·c) bits of
/// them: the scalars are canonical (`msm_prepare_compact`), below r < 2^255, so a top window
/// of k < c of their bits has digits of at most 2^k, never negative. The window's bin cursors
/// still sit at a stride of [`bin_geometry`]'s bins.
pub(super) fn window_bin_geometry(c: u32, w: u32) -> (u32, u32) {
    let used = (c - 1).min(255 - w * c);
    let log_bins = used.min(BIN_LOG_MAX);
    (log_bins, used - log_bins)
}

/// The scatter an MSM with `c`-bit windows takes by default: the direct one, at every window
/// size, until production has timed the binned sort built to replace it. Its unstaged form
/// (each entry written to a random place within its bin) lost to the direct scatter
/// (BENCHMARKS.md, "MSM sorting"); its phase B now stages each bin in shared memory, as the
/// scatter harness did, and only the harness has timed that. It stays selectable
/// ([`MsmOptions::scatter`]) so that the kernel bench times the two side by side and the GPU
/// tests keep it correct (kernels/NOTES.md, "Sort").
pub fn scatter_kind_for(_c: u32) -> ScatterKind {
    ScatterKind::Direct
}

/// The device memory the binned scatter holds beside the entries, in bytes, for `n` scalars and
/// `c`-bit windows: its temporary entries (one u64 per scalar: a window has at most one entry a
/// scalar, and the array is reused window after window) and its bin cursors (a u32 per bin and
/// window). Exactly what `GpuStream::msm` allocates for it.
pub(super) fn binned_scatter_bytes(c: u32, n: u64) -> u64 {
    let windows = 256u64.div_ceil(c as u64);
    let (log_bins, _) = bin_geometry(c);
    8 * n + 4 * (windows << log_bins)
}

/// Words of the binned scatter's phase-B stage (`msm_bin_place`'s shared copy of a bin's part of
/// the entries) for `n` scalars and `c`-bit windows, within `max_shared_bytes` of dynamic shared
/// memory a block: a bin's mean share of a window's at most `n` entries (`n` over
/// [`bin_geometry`]'s bins) and a margin far beyond the spread of random bins (a sixteenth and
/// 512), rounded up to 256 words, beside the widest window's shared cursors. 0 (every block
/// writes its entries directly) where even that does not fit: a stage most bins overflow would
/// only cost occupancy. The kernel takes any value: a bin over the stage (equal scalars, the
/// few bins of a narrow top window) writes directly in its own block, so the value decides
/// speed, never correctness.
pub(super) fn bin_stage_words(c: u32, n: u64, max_shared_bytes: u32) -> u32 {
    let (log_bins, log_width) = bin_geometry(c);
    let mean = n >> log_bins;
    let wanted = (mean + mean / 16 + 512).div_ceil(256) * 256;
    let room = (max_shared_bytes as u64 / 4).saturating_sub(1 << log_width);
    if wanted <= room {
        wanted as u32
    } else {
        0
    }
}

/// The bucket cursors one scatter launch advances at most, in bytes: the cursors must stay in
/// L2 while the entries are written (msm_scatter_indexed in kernels/msm/msm.cu), or every
/// returning atomic goes to memory. One window's cursors at c = 20 (2 MiB) fill it, while a
/// narrow window's (c = 16: 128 KiB) are grouped, so that a bits-profile MSM does not read its
/// scalars once per window. The kernel bench's scatter variants time the choice (kernels/NOTES.md).
pub const SCATTER_CURSOR_BYTES: usize = 2 << 20;

/// Windows per scatter launch for `c`-bit windows: as many as keep the cursors being advanced
/// (4 bytes for each of a window's 2^(c-1) buckets) within [`SCATTER_CURSOR_BYTES`]. Each
/// launch reads every scalar of the pass, so small windows go in few launches: one window a
/// launch at c = 20, sixteen at c = 16 (a bits-profile MSM's window).
pub fn scatter_windows_for(c: u32) -> usize {
    (SCATTER_CURSOR_BYTES >> (c + 1)).max(1)
}

/// The scratch one MSM of `len` points in passes of `pass_points` allocates on the device at
/// most, in bytes: what a pass of `pass_points` (or fewer) points holds with the window of `len`
/// scalars ([`pass_scratch_bytes`]), every scalar of the pass left for the buckets.
pub fn msm_scratch_bytes(len: usize, pass_points: usize) -> u64 {
    let pass_points = pass_points.max(1);
    let pass = len.min(pass_points) as u64;
    pass_scratch_bytes(window_bits_for(len.max(2)), pass, pass, len > pass_points)
}

/// The scratch of one pass of `pass` points, `rest` of whose scalars are neither 0 nor 1, with
/// `c`-bit windows, in bytes: per point its canonical scalar, its point's index and a 0/1 index
/// (the compacted lists of `GpuStream::msm`); per remaining
/// scalar one bucket entry per window, the binned scatter's temporary entry and bin cursors
/// where the default takes it ([`scatter_kind_for`], [`binned_scatter_bytes`]; the pipeline
/// never forces a kind), and the chunk spills (6 bytes
/// per entry at 64 entries a chunk, G2-sized, or at most 2^19 chunks of 384 bytes below that:
/// `chunk_for`) or, where G2 may take it ([`bucket_method_for`]), the larger scratch of the
/// batch-affine bucket phase, which holds its own instead ([`affine_scratch_bytes`]); then the
/// buckets and their counts (G2-sized, the larger curve), the scratch
/// buckets of an MSM in several passes, and 128 MiB for the window reduction's partial sums
/// and the 0/1 batch sum.
fn pass_scratch_bytes(c: u32, pass: u64, rest: u64, several_passes: bool) -> u64 {
    let windows = 256u64.div_ceil(c as u64);
    let buckets = windows << (c - 1);
    let spills = (6 * windows * rest).max(384 << 19);
    // G2-sized, as the buckets: the batch-affine phase holds its scratch instead of the spills
    let entries = windows * rest;
    let affine = match bucket_method_for(G2::BATCH_AFFINE_WINS, c, entries as usize, buckets as usize) {
        BucketMethod::BatchAffine => {
            let slice = (AFFINE_SLICE_ENTRIES as u64).min(entries) as usize;
            affine_scratch_bytes(G2::FIELD_BYTES, slice, buckets as usize, entries as usize)
        }
        BucketMethod::Xyzz => 0,
    };
    let scratch = if several_passes { buckets * 4 * 96 } else { 0 };
    pass * (32 + 4 + 4)
        + rest * 4 * windows
        + if scatter_kind_for(c) == ScatterKind::Binned { binned_scatter_bytes(c, rest) } else { 0 }
        + spills.max(affine)
        + buckets * (4 + 4 * 96)
        + scratch
        + (128 << 20)
}

/// The window size for a single-pass MSM of `n` nonzero scalars: [`window_bits_for_passes`]
/// with one pass of `n` points. `msm_scratch_bytes` sizes the buckets with it.
pub fn window_bits_for(n: usize) -> u32 {
    window_bits_for_passes(n, n, 1)
}

/// The window size minimising the modelled device time of an MSM in `passes` passes of
/// `pass_len` points, `rest` of whose scalars (over all passes) are neither 0 nor 1. In units of
/// one mixed addition of the bucket phase, the model counts:
/// - ⌈256/c⌉·rest additions;
/// - the window reduction, about three additions' worth per bucket (2^(c-1) buckets a window);
/// - the fix-up after every pass but the first, about three additions per bucket as well;
/// - the scatter's reading of all of a pass's scalars once per launch ([`scatter_windows_for`]),
///   about a twentieth of an addition per scalar;
/// - a penalty for the top window: scalars are < 2^255, so when few of its c bits lie below bit
///   255 its points crowd into a few buckets, and the fix-up adds a crowded bucket's chunk sums
///   serially (one serial addition costs about as much as 2^14 parallel ones).
///
/// The per-pass terms are what make a bits-profile MSM pick small windows: with a tenth of its
/// scalars random, a pass's fix-up and scatter cost as much as its bucket additions (the profile
/// of the 2^27 partition's L query is in kernels/NOTES.md).
pub fn window_bits_for_passes(rest: usize, pass_len: usize, passes: usize) -> u32 {
    let cost = |c: u32| {
        let (n, pass_len, passes) = (rest as u128, pass_len as u128, passes.max(1) as u128);
        let windows = 256u128.div_ceil(c as u128);
        let buckets = windows << (c - 1);
        let launches = windows.div_ceil(scatter_windows_for(c) as u128);
        let top_bits = 255i64 - (c as i64) * (windows as i64 - 1);
        let top_load = if top_bits <= 0 { n } else { n >> top_bits.min(c as i64 - 1) };
        let chain = top_load / chunk_for((windows * n) as usize) as u128;
        windows * n + 3 * buckets * passes + launches * pass_len * passes / 20 + chain * (3 << 13)
    };
    (4..=20u32).min_by_key(|&c| cost(c)).unwrap_or(16)
}

/// The window an MSM of `len` points in passes of `pass_len` takes once a pass with scalars
/// left for the buckets suggests `expected_rest` of them over the whole MSM: the model's best
/// ([`window_bits_for_passes`]), but never wider than the window
/// [`msm_scratch_bytes`]`(len, pass_len)` sized the buckets for, and never so narrow that a
/// later pass, every scalar of it left for the buckets (more entries a scalar), would hold more
/// than that plan. A first pass of bits followed by random passes would otherwise run the device
/// out of memory mid-MSM.
///
/// The model counts what a compacted MSM pays: its scatter reads only the scalars left for the
/// buckets, and its buckets take one round of sorting and fix-up per list of `pass_len` such
/// scalars, not per pass of points.
pub fn window_bits_within_plan(expected_rest: usize, len: usize, pass_len: usize) -> u32 {
    let pass_len = pass_len.clamp(1, len.max(1));
    let passes = len.div_ceil(pass_len);
    let planned = window_bits_for(len.max(2));
    let plan = msm_scratch_bytes(len, pass_len);
    // one pass: its count is the estimate; several: a later pass (or list) may leave every scalar
    let worst_rest = if passes == 1 { expected_rest } else { pass_len };
    let held = |c: u32| pass_scratch_bytes(c, pass_len as u64, worst_rest as u64, passes > 1);
    let modelled = window_bits_for_passes(
        expected_rest,
        expected_rest.clamp(1, pass_len),
        expected_rest.div_ceil(pass_len).max(1),
    );
    let mut c = modelled.min(planned);
    while c < planned && held(c) > plan {
        c += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn batch_affine_takes_g2_s_wide_windows_with_full_buckets_only() {
        let buckets = 13usize << 19;
        // a random G2 MSM of 2^24 points at c = 20: 13 entries a point, 32 a bucket
        assert_eq!(bucket_method_for(true, 20, 13 << 24, buckets), BucketMethod::BatchAffine);
        assert_eq!(bucket_method_for(true, 20, 13 << 22, buckets), BucketMethod::BatchAffine, "8 a bucket");
        // G1: the curve never takes batch-affine
        assert_eq!(bucket_method_for(false, 20, 13 << 24, buckets), BucketMethod::Xyzz);
        // sparse buckets, too few entries, narrower windows
        assert_eq!(bucket_method_for(true, 20, 13 << 21, buckets), BucketMethod::Xyzz, "4 a bucket");
        assert_eq!(bucket_method_for(true, 20, (1 << 22) - 1, 1), BucketMethod::Xyzz);
        assert_eq!(bucket_method_for(true, 16, 16 << 24, 16 << 15), BucketMethod::Xyzz);
    }

    /// The outputs of each round of a slice whose clipped buckets hold `m` entries each.
    fn round_outputs(mut m: Vec<u64>) -> Vec<u64> {
        let mut rounds = Vec::new();
        while m.iter().any(|&x| x > AFFINE_FINISH_POINTS as u64) {
            m.iter_mut().for_each(|x| *x = x.div_ceil(2));
            rounds.push(m.iter().sum());
        }
        rounds
    }

    #[test]
    fn the_round_buffers_hold_every_round_of_buckets_averaging_four_or_more() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(rand::random());
        for slice in [200usize, 1000, 1 << 16, 1 << 20] {
            let (even, odd) = affine_round_capacities(slice);
            for trial in 0..40 {
                // nonempty buckets at most a quarter of the entries, sizes random or skewed
                let buckets = (slice / 4).max(1) >> (trial % 4);
                let mut m = vec![1u64; buckets];
                for _ in buckets..slice {
                    let b = if trial % 3 == 0 { rng.gen_range(0..buckets.min(3)) } else { rng.gen_range(0..buckets) };
                    m[b] += 1;
                }
                assert_eq!(m.iter().sum::<u64>(), slice as u64);
                for (r, items) in round_outputs(m).into_iter().enumerate() {
                    let cap = if r % 2 == 0 { even } else { odd };
                    assert!(items as usize <= cap, "slice {slice}, round {r}: {items} outputs > {cap}");
                }
            }
            // the twin: half the entries alone in their buckets, the rest in one: round 0 outgrows
            let mut sparse = vec![1u64; slice / 2];
            sparse.push((slice - slice / 2) as u64);
            let first = round_outputs(sparse)[0] as usize;
            assert!(first > even, "slice {slice}: sparse buckets must not fit ({first} outputs, room {even})");
        }
    }

    #[test]
    fn the_inversion_tree_s_levels_tile_their_scratch() {
        for n in (1..300).chain([4095, 4096, 4097, 1 << 18, (1 << 20) + 3]) {
            let levels = affine_tree_levels(n);
            let (pre, up) = affine_tree_elements(n);
            assert_eq!(levels[0], TreeLevel { count: n, pre_at: 0, up_at: 0 });
            for pair in levels.windows(2) {
                let (low, high) = (pair[0], pair[1]);
                // a level's values are the group products of the level below, nothing overlaps
                assert_eq!(high.count, low.count.div_ceil(AFFINE_TREE_GROUP));
                assert_eq!(high.pre_at, low.pre_at + low.count);
                assert_eq!(high.up_at, low.up_at + high.count);
                assert!(low.count > AFFINE_TREE_GROUP);
            }
            let top = *levels.last().unwrap();
            assert!(top.count <= AFFINE_TREE_GROUP && top.count >= 1);
            assert_eq!((pre, up), (top.pre_at + top.count, top.up_at + 1), "n = {n}");
        }
    }

    #[test]
    fn a_scatter_launch_advances_at_most_its_cursor_budget() {
        assert_eq!(scatter_windows_for(20), 1, "c = 20: 2 MiB of cursors a window");
        assert_eq!(scatter_windows_for(16), 16);
        for c in 2..=20u32 {
            let group = scatter_windows_for(c);
            let cursors = group << (c - 1);
            assert!(group == 1 || 4 * cursors <= SCATTER_CURSOR_BYTES, "c = {c}: {group} windows");
            assert!(4 * (cursors << 1) > SCATTER_CURSOR_BYTES, "c = {c}: twice {group} windows would fit too");
        }
    }

    /// `msm_scratch_bytes(len, _)` sizes the buckets with the window of `len` scalars, while an
    /// MSM picks its window from the nonzero scalars it finds (at most `len`): that is only a
    /// bound if the window never shrinks as the count grows.
    #[test]
    fn the_window_never_shrinks_as_the_scalars_grow() {
        let mut n = 1usize;
        let mut last = window_bits_for(n);
        while n < 1 << 31 {
            n = (n + 1).max(n + n / 64);
            let c = window_bits_for(n);
            assert!(c >= last, "window {c} for {n} scalars, below {last} for fewer");
            last = c;
        }
    }

    /// Passes make the per-bucket work (fix-ups) and the scatter's reads of every pass's scalars
    /// recur, which matters when few scalars are left for the buckets: the bits profile's MSMs
    /// in passes take narrower windows. A random MSM keeps its single-pass window at every size.
    #[test]
    fn passes_narrow_the_window_of_sparse_msms_only() {
        for log_n in 26..=31 {
            let n = 1usize << log_n;
            let passes = n.div_ceil(MSM_PASS_POINTS);
            assert_eq!(window_bits_for_passes(n, MSM_PASS_POINTS, passes), window_bits_for(n), "random 2^{log_n}");
            assert_eq!(window_bits_for(n), 20);
            // a tenth of the scalars random, the rest bits (the 0/1 fast path takes those)
            let sparse = window_bits_for_passes(n / 10, MSM_PASS_POINTS, passes);
            assert_eq!(sparse, 16, "2^{log_n}, a tenth random: sixteen windows in one scatter launch");
            if log_n >= 27 {
                // the same count of random scalars in one pass of their own keeps the wide window
                assert_eq!(window_bits_for(n / 10), 20, "2^{log_n} / 10 random scalars in one pass");
            }
        }
        // one pass: no fix-ups, so the window is the single-pass one
        assert_eq!(window_bits_for_passes(1 << 22, 1 << 25, 1), window_bits_for(1 << 22));
    }

    /// The window an MSM picks from its first pass can be narrower than the one the memory plan
    /// sized (`msm_scratch_bytes(len, pass)`), which means more entries a scalar; and a later
    /// pass may leave every scalar for the buckets. The fewer buckets must pay for that: whatever
    /// the share of 0/1 scalars the first pass finds, no pass may hold more than the plan, for
    /// the shortest pass, longer ones the admission may plan, and one pass over the whole MSM.
    #[test]
    fn no_pass_outgrows_the_planned_scratch() {
        let mut len = 2usize;
        while len < 1 << 31 {
            for pass_points in [MSM_PASS_POINTS, MSM_PASS_POINTS << 1, MSM_PASS_POINTS << 2, len] {
                let pass = len.min(pass_points);
                let passes = len.div_ceil(pass);
                let plan = msm_scratch_bytes(len, pass_points);
                for percent in [100usize, 90, 75, 50, 25, 10, 5, 1, 0] {
                    let expected_rest = (len * percent / 100).max(1);
                    {
                        let c = window_bits_within_plan(expected_rest, len, pass);
                        // one pass: its count is the estimate; several: a later pass may be all random
                        let rest = if passes == 1 { expected_rest } else { pass };
                        let held = pass_scratch_bytes(c, pass as u64, rest as u64, passes > 1);
                        assert!(
                        held <= plan,
                        "{len} points in passes of {pass}, {percent}% random: window {c} holds {held} > plan {plan}"
                    );
                    }
                }
            }
            len = (len + 1).max(len + len / 16);
        }
    }

    #[test]
    fn an_msm_s_scratch_stops_growing_past_one_pass() {
        let per_pass = msm_scratch_bytes(MSM_PASS_POINTS + 1, MSM_PASS_POINTS);
        // Longer MSMs add no per-point scratch: only the window (at most 20 bits) could grow.
        assert_eq!(msm_scratch_bytes(1 << 30, MSM_PASS_POINTS), per_pass);
        assert!(
            msm_scratch_bytes(MSM_PASS_POINTS, MSM_PASS_POINTS) < per_pass,
            "a single pass needs no scratch buckets"
        );
        assert!(msm_scratch_bytes(1 << 20, MSM_PASS_POINTS) < msm_scratch_bytes(1 << 24, MSM_PASS_POINTS));
        // a longer pass holds more per point; one pass over 2^26 points: no scratch buckets, but
        // twice the entries of a 2^25 pass
        let (two_passes, one_pass) = (msm_scratch_bytes(1 << 26, 1 << 25), msm_scratch_bytes(1 << 26, 1 << 26));
        assert!(one_pass > two_passes, "{one_pass} vs {two_passes}");
        assert!(one_pass - two_passes < 4 << 30, "one pass at 2^26 costs {} more", one_pass - two_passes);
    }

    /// The binned scatter's geometry fits the kernels' shared arrays (BIN_LOG_MAX bins, bins
    /// of at most 2^BIN_LOG_WIDTH_MAX buckets) and covers every bucket of every window size the
    /// MSM takes; the default is the direct scatter, until production has measured the staged
    /// binned one.
    #[test]
    fn the_bins_cover_every_window_within_the_kernels_arrays() {
        for c in 2..=20u32 {
            let (log_bins, log_width) = bin_geometry(c);
            assert_eq!(log_bins + log_width, c - 1, "c = {c}: the bins must cover the window's buckets");
            assert!(log_bins <= BIN_LOG_MAX && log_width <= BIN_LOG_WIDTH_MAX, "c = {c}: ({log_bins}, {log_width})");
            assert_eq!(log_bins, (c - 1).min(11), "c = {c}: as many bins as allowed, up to 2048");
            assert_eq!(
                scatter_kind_for(c),
                ScatterKind::Direct,
                "c = {c}: the default until the staged one is measured"
            );
        }
        assert_eq!(bin_geometry(20), (11, 8), "c = 20: 2048 bins of 256 buckets");
        assert_eq!(bin_geometry(16), (11, 4));
        assert_eq!(bin_geometry(2), (1, 0), "c = 2: two buckets, a bin each");
        assert_eq!(BIN_TILE, 16 * BIN_THREADS as usize, "BIN_TILE = BIN_THREADS · BIN_PER_THREAD in msm.cu");
    }

    /// Every window's bins hold every bucket its signed digits reach, for any integer below
    /// 2^255 (canonical scalars are below r; the digits' recurrence of msm.cu, run here on
    /// limbs), within the window's stride of bin cursors; and the top window at c = 20 spreads
    /// over all 2048 bins, not the 128 that 2^15 buckets of 256 a bin would fill.
    #[test]
    fn each_window_s_bins_hold_every_bucket_its_digits_reach() {
        use rand::{Rng, SeedableRng};
        fn bits(limbs: &[u64; 4], pos: u32, c: u32) -> u64 {
            (0..c)
                .filter(|i| pos + i < 256)
                .map(|i| ((limbs[((pos + i) / 64) as usize] >> ((pos + i) % 64)) & 1) << i)
                .sum()
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(rand::random());
        let mut scalars: Vec<[u64; 4]> =
            (0..2000).map(|_| [rng.gen(), rng.gen(), rng.gen(), rng.gen::<u64>() >> 1]).collect();
        // 2^255 - 1, r - 1 and 2^254
        let r_minus_1 = [0xffff_ffff_0000_0000, 0x53bd_a402_fffe_5bfe, 0x3339_d808_09a1_d805, 0x73ed_a753_299d_7d48];
        scalars.extend([[u64::MAX, u64::MAX, u64::MAX, u64::MAX >> 1], r_minus_1, [0, 0, 0, 1 << 62]]);
        for c in 2..=20u32 {
            let windows = 256u32.div_ceil(c);
            let (stride, _) = bin_geometry(c);
            let mut reach = vec![0u64; windows as usize];
            for s in &scalars {
                let mut carry = 0;
                for w in 0..windows {
                    let mut d = bits(s, w * c, c) + carry;
                    (d, carry) = if d > 1 << (c - 1) { ((1 << c) - d, 1) } else { (d, 0) };
                    reach[w as usize] = reach[w as usize].max(d);
                }
            }
            for w in 0..windows {
                let (log_bins, shift) = window_bin_geometry(c, w);
                assert!(log_bins <= stride && shift <= BIN_LOG_WIDTH_MAX, "c = {c}, w = {w}: ({log_bins}, {shift})");
                let covered = 1u64 << (log_bins + shift);
                assert!(reach[w as usize] <= covered, "c = {c}, w = {w}: digit {} past {covered}", reach[w as usize]);
            }
        }
        assert_eq!(window_bin_geometry(20, 12), (11, 4), "c = 20's top window: 2^15 buckets in 2048 bins");
        assert_eq!(window_bin_geometry(20, 11), bin_geometry(20));
        assert_eq!(window_bin_geometry(17, 15), (0, 0), "15·17 = 255: only the carry, bucket 0");
    }

    /// Phase B's stage holds a bin of a 2^25-point pass at c = 20 with the margin, and the
    /// window's cursors beside it, within an sm_90 block's opt-in shared memory; it is 0 (every
    /// block writes directly) where a bin's mean does not fit, and never more than the room.
    #[test]
    fn the_stage_holds_a_bin_s_share_within_a_block_s_shared_memory() {
        const SM90_OPTIN: u32 = 227 << 10;
        let stage = bin_stage_words(20, 1 << 25, SM90_OPTIN);
        assert_eq!(stage, 17920, "2^14 entries a bin on average, a sixteenth and 512 more");
        assert!(4 * (stage + (1 << 8)) <= SM90_OPTIN);
        assert_eq!(bin_stage_words(20, 1 << 25, 48 << 10), 0, "a 2^25 pass's bins do not fit 48 KiB");
        assert_eq!(bin_stage_words(20, 1 << 28, SM90_OPTIN), 0, "2^17 entries a bin fit no block");
        assert_eq!(bin_stage_words(20, 1000, SM90_OPTIN), 512, "fewer scalars than bins: the margin alone");
        for c in 2..=20u32 {
            let (log_bins, log_width) = bin_geometry(c);
            for log_n in 0..=28u32 {
                for max in [48 << 10, SM90_OPTIN] {
                    let stage = bin_stage_words(c, 1 << log_n, max) as u64;
                    assert!(4 * (stage + (1 << log_width)) <= max as u64 || stage == 0, "c = {c}, 2^{log_n}");
                    assert!(stage == 0 || stage >= (1u64 << log_n) >> log_bins, "c = {c}, 2^{log_n}: under the mean");
                }
            }
        }
    }

    /// What one list of `n` scalars allocates at once in the worst case (every scalar of the pass
    /// left for the buckets, every digit nonzero), buffer by buffer as `msm_compacted`,
    /// `add_to_buckets`, `scatter_binned` and `window_sums` allocate them, G2-sized: the plan
    /// ([`pass_scratch_bytes`]) must hold it, with the binned scatter's temporary entries and bin
    /// cursors where the default takes that scatter.
    #[test]
    fn the_planned_scratch_holds_what_a_pass_allocates() {
        let xyzz = (4 * G2::XYZZ_WORDS) as u64;
        for c in 2..=20u32 {
            let windows = 256u64.div_ceil(c as u64);
            let buckets = windows << (c - 1);
            let (log_bins, _) = bin_geometry(c);
            let mut sizes = vec![1u64, 1000, 4097, 1 << 16, 1 << 20, (1 << 22) + 5, 1 << 25];
            // lists whose entry counts give the most chunks for their size (chunk_for rounds down)
            sizes.extend((8..=64u64).map(|k| (((k + 1) << 19) - 1) / windows));
            for n in sizes {
                for several_passes in [false, true] {
                    let lists = n * (32 + 4 + 4) + 8;
                    let bucket_arrays = buckets * xyzz * if several_passes { 2 } else { 1 };
                    let scan = 4 * buckets + 4 * buckets.div_ceil(SCAN_TILE as u64) + 4;
                    let entries = 4 * n * windows;
                    // what the default scatter allocates beside the entries
                    let binned = match scatter_kind_for(c) {
                        ScatterKind::Binned => 8 * n + 4 * (windows << log_bins),
                        ScatterKind::Direct => 0,
                    };
                    let total_entries = n * windows;
                    let xyzz_spills = total_entries.div_ceil(chunk_for(total_entries as usize) as u64) * xyzz;
                    // the default bucket method on G2 holds its scratch instead of the spills
                    let te = total_entries as usize;
                    let spills = match bucket_method_for(G2::BATCH_AFFINE_WINS, c, te, buckets as usize) {
                        BucketMethod::BatchAffine => {
                            let slice = AFFINE_SLICE_ENTRIES.min(te);
                            xyzz_spills.max(affine_scratch_bytes(G2::FIELD_BYTES, slice, buckets as usize, te))
                        }
                        BucketMethod::Xyzz => xyzz_spills,
                    };
                    let segs = 1u64 << log_segments_for(windows as usize, c - 1);
                    let reduction = 2 * windows * segs * xyzz;
                    let held = lists + bucket_arrays + scan + entries + binned + spills + reduction;
                    let plan = pass_scratch_bytes(c, n, n, several_passes);
                    assert!(held <= plan, "c = {c}, n = {n}: {held} allocated > {plan} planned");
                }
            }
        }
    }
}
