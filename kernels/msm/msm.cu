// Pippenger multi-scalar multiplication for G1 and G2 of BLS12-381.
//
//  1. msm_prepare_compact: Montgomery -> canonical integers, appended with their points' indices
//     to a list of the scalars neither 0 nor 1; with the 0/1 fast path on, the indices of the
//     scalars equal to 1 go to another list, whose points msm_gX_sum_points adds in equal chunks
//     per thread (then msm_gX_reduce).
//  2. msm_digit_histogram: signed c-bit digits (d in [-2^(c-1), 2^(c-1)]); counts per
//     (window, |d|) bucket. Zero digits are skipped.
//  3. msm_scan_*: exclusive prefix sum of the counts -> bucket offsets.
//  4. The scatter: point indices (sign in bit 31) grouped by bucket (a counting sort); it leaves
//     each bucket's end offset in the counts array ("ends"). Either msm_scatter_indexed (a
//     returning global atomic per entry, several windows a launch) or the binned scatter
//     (msm_bin_cursors, then msm_bin_scatter and msm_bin_place per window: coarse bins of
//     buckets first, then the buckets within each bin by shared-memory cursors, staged in shared
//     memory and written out coalesced). The host takes the direct one by default; the staged
//     binned one is selectable until a GPU has measured it in production.
//  5. msm_gX_buckets: the sorted entries are cut into equal chunks, one thread per chunk, so every
//     thread does the same number of mixed additions whatever the bucket sizes. A thread writes
//     each bucket that starts inside its chunk to the bucket array, and the partial sum of a bucket
//     that started in an earlier chunk to its spill slot; msm_gX_bucket_fixup (one thread per
//     bucket) then adds the spills into the buckets that run across chunk ends. Accumulators are
//     XYZZ (ec/xyzz.cuh).
//  6. msm_gX_window_segments + msm_gX_reduce: per window, Σ b·bucket_b with running sums over
//     segments, then tree reductions; msm_gX_to_jacobian converts the window sums (and the 0/1
//     batch sum), which go to the host, which combines them (ΣW 2^(c·w) S_w) with blstrs.
// An MSM longer than a pass (src/backend/cuda/msm.rs, MSM_PASS_POINTS) runs step 1 once per pass
// of points and steps 2-5 once per filled list, then step 6 once: its scratch is bounded by the
// pass, not the MSM. Lists after the first sum into a scratch bucket array that their fix-up adds
// into the MSM's buckets.
// Launch geometry and the choice of c are in src/backend/cuda/msm.rs.
#include "buckets.cuh"

// The scalars' preparation, for an MSM whose passes fill shared lists: the scalars of points [start, start + n)
// out of Montgomery form; those neither 0 nor 1 are appended to (canon, index), with their
// point's index, and (with skip_ones) the indices of those equal to 1 to ones_list. *dense and
// *ones count every scalar appended since the MSM began; a list emptied by the host restarts
// at its base (the count when it was emptied), and the caller leaves room for n more entries in
// each. Appended in any order: the MSM's sum does not depend on it.
extern "C" __global__ void msm_prepare_compact(const fr_t* in, u32 n, u32 start, u32 skip_ones, u32 dense_base,
                                               u32 ones_base, fr_t* canon, u32* index, u32* ones_list, u32* dense,
                                               u32* ones) {
    GRID_STRIDE(i, n) {
        const fr_t s = in[i].from_mont();
        if (s.is_zero()) continue;
        u32 acc = s.l[0] ^ 1;
        for (int k = 1; k < 8; k++) acc |= s.l[k];
        if (skip_ones && acc == 0) {
            ones_list[atomicAdd(ones, 1u) - ones_base] = start + i;
        } else {
            const u32 at = atomicAdd(dense, 1u) - dense_base;
            canon[at] = s;
            index[at] = start + i;
        }
    }
}

// Bits [pos, pos + c) of a 256-bit integer (c <= 24).
__device__ __forceinline__ u32 scalar_bits(const fr_t& s, u32 pos, u32 c) {
    if (pos >= 256) return 0;
    u32 limb = pos >> 5, shift = pos & 31;
    u64 w = s.l[limb];
    if (limb + 1 < 8) w |= (u64)s.l[limb + 1] << 32;
    return (u32)(w >> shift) & ((1u << c) - 1);
}

// Window w's signed digit of s, |d| in [0, 2^(c-1)], given the carry out of window w - 1;
// leaves the carry out of window w in `carry`. The one definition of the digits: the histogram
// and both scatters must agree on every entry, or the scan's offsets leave holes.
__device__ __forceinline__ u32 signed_digit(const fr_t& s, u32 c, u32 w, u32& carry, bool& neg) {
    const u32 half = 1u << (c - 1);
    u32 d = scalar_bits(s, w * c, c) + carry;
    neg = false;
    if (d > half) { d = (1u << c) - d; neg = true; carry = 1; } else { carry = 0; }
    return d;
}

// Calls f(window, bucket (0-based), negative) for every nonzero signed digit of s.
template <class Fn>
__device__ __forceinline__ void for_each_digit(const fr_t& s, u32 c, u32 windows, Fn f) {
    if (s.is_zero()) return;
    u32 carry = 0;
    for (u32 w = 0; w < windows; w++) {
        bool neg;
        const u32 d = signed_digit(s, c, w, carry, neg);
        if (d) f(w, d - 1, neg);
    }
}

// |digit| of window `target` alone (0: no entry), as for_each_digit computes it: the carries
// of the windows below it run through the same recurrence.
__device__ __forceinline__ u32 window_digit(const fr_t& s, u32 c, u32 target, bool& neg) {
    u32 carry = 0, d = 0;
    neg = false;
    for (u32 w = 0; w <= target; w++) d = signed_digit(s, c, w, carry, neg);
    return d;
}

extern "C" __global__ void msm_digit_histogram(const fr_t* scalars, u32 n, u32 c, u32 windows, u32* counts) {
    const u32 buckets = 1u << (c - 1);
    GRID_STRIDE(i, n) {
        fr_t s = scalars[i];
        for_each_digit(s, c, windows, [&](u32 w, u32 b, bool) { atomicAdd(&counts[w * buckets + b], 1u); });
    }
}

// A canonical scalar read once, without keeping it in L2 (ld.global.cs).
__device__ __forceinline__ fr_t load_streaming(const fr_t* p) {
    fr_t s;
    const uint4 lo = __ldcs(reinterpret_cast<const uint4*>(p)), hi = __ldcs(reinterpret_cast<const uint4*>(p) + 1);
    s.l[0] = lo.x; s.l[1] = lo.y; s.l[2] = lo.z; s.l[3] = lo.w;
    s.l[4] = hi.x; s.l[5] = hi.y; s.l[6] = hi.z; s.l[7] = hi.w;
    return s;
}

// Scalar i, of point index[i] (msm_prepare_compact), into the buckets of windows [w_lo, w_hi)
// only: the host runs the windows in groups, so the cursors being advanced (2^(c-1) per window,
// 2 MiB at c = 20) stay in L2 while the entries, written once at random, stream past it
// (st.global.cs).
extern "C" __global__ void msm_scatter_indexed(const fr_t* scalars, const u32* index, u32 n, u32 c, u32 windows,
                                               u32 w_lo, u32 w_hi, u32* cursor, u32* entries) {
    const u32 buckets = 1u << (c - 1);
    GRID_STRIDE(i, n) {
        fr_t s = load_streaming(scalars + i);
        const u32 point = __ldcs(index + i);
        for_each_digit(s, c, windows, [&](u32 w, u32 b, bool neg) {
            if (w < w_lo || w >= w_hi) return;
            u32 pos = atomicAdd(&cursor[w * buckets + b], 1u);
            __stcs(entries + pos, point | (neg ? 0x80000000u : 0u));
        });
    }
}

// ---- the binned scatter: a two-level counting sort, one window at a time ----
// msm_scatter_indexed waits on a returning global atomic for every entry. The binned scatter
// sorts a window in two passes over its entries instead, whose per-entry atomics are on shared
// memory: window w's bucket b belongs to the coarse bin b >> shift, of 2^log_bins bins of
// 2^shift buckets each (window_bins below; the host mirrors it, window_bin_geometry in
// src/backend/cuda/msm.rs). The bins cover the buckets the window can use: 2^(c-1), except in
// the top window, which has fewer bits of a canonical scalar (at c = 20 fifteen: buckets below
// 2^15), so that its entries still spread over all bins instead of a sixteenth of them.
//  A. msm_bin_scatter (a block per tile of BIN_TILE scalars): each entry takes its rank within its
//     tile's bin from a shared counter; one returning global atomic per non-empty (tile, bin) on
//     the bin's cursor reserves the run; the entry goes to temp[run + rank] with its bucket.
//  B. msm_bin_place (a block per bin), staged: the bin's buckets' offsets, loaded into shared
//     memory, are its cursors; each of the bin's entries in temp takes a slot from its bucket's
//     cursor in a shared-memory copy of the bin's part of the entries (the stage), which then
//     goes out coalesced, and the cursors, now the buckets' ends, go back to counts. A bin larger
//     than the stage writes each entry straight to its slot in the entries instead.
// Its output is msm_scatter_indexed's: entries grouped by bucket, counts turned into ends (the
// order within a bucket differs, which no sum depends on).
//
// Sizes. 2^11 bins a window at most (BIN_LOG_MAX): phase A's per-bin counters take 8 KiB of
// shared memory and its tiles of 4096 scalars average 2 entries a bin when all bins are in use.
// The bins are that many so that a bin of a 2^25-point pass (2^14 entries on average) fits a
// block's stage (64 KiB and a margin); lab/harness/scatter_harness.cu measured 2^9..2^11 and
// 2^11 was the fastest. The bins' width follows: at c = 20 (2^19 buckets a window, the widest the
// host picks) 256 buckets, phase B's 1 KiB of shared cursors (BIN_LOG_WIDTH_MAX).
//
// Invariants. temp holds one window's entries at positions relative to the window's first
// offset counts[w·2^(c-1)] (a window has at most one entry per scalar, so fewer than n); the bin
// cursors are relative the same way. Phase A must compute exactly the digits msm_digit_histogram
// counted (window_digit and for_each_digit share signed_digit), or runs would overlap or leave
// holes; bounds checks keep a broken invariant from writing outside temp, entries or shared
// memory. The scalars are canonical (msm_prepare_compact), below r < 2^255: the top window's
// bins rely on it (window_bins).
#define BIN_LOG_MAX 11
#define BIN_LOG_WIDTH_MAX 8
#define BIN_THREADS 256
#define BIN_PER_THREAD 16
#define BIN_TILE (BIN_THREADS * BIN_PER_THREAD)
// Phase A's slot word until an entry's run is known: sign << 31 | bucket << BIN_RANK_BITS | rank
// within its tile's bin. The bucket takes BIN_BUCKET_BITS (c <= 20). BIN_NO_SLOT never is a slot:
// it would be a negative digit of |d| = 2^(c-1), and signed_digit makes a digit negative only
// when |d| < 2^(c-1).
#define BIN_RANK_BITS 12
#define BIN_BUCKET_BITS 19
#define BIN_NO_SLOT 0xffffffffu
#define PLACE_THREADS 512
// A block's dynamic shared memory as an array of u32. The host builds (kernels/check/host_shims.h)
// define their own: plain C++ has no unsized extern array to give it, and they never run
// msm_bin_place.
#ifndef DYNAMIC_SHARED_U32
#define DYNAMIC_SHARED_U32(name) extern __shared__ u32 name[]
#endif
// Entries a phase-B thread loads before it places them, so that several loads are in flight.
#define PLACE_BATCH 8
static_assert(BIN_TILE <= (1 << BIN_RANK_BITS), "a rank within a tile's bin must fit BIN_RANK_BITS");
static_assert(1 + BIN_BUCKET_BITS + BIN_RANK_BITS <= 32, "sign, bucket and rank must share a word");
static_assert(BIN_LOG_MAX + BIN_LOG_WIDTH_MAX == BIN_BUCKET_BITS, "the widest window's bins: 2^19 buckets");

// Window w's bins for c-bit windows, at most 2^max_log_bins of them: its digits have
// used = min(c - 1, 255 - w·c) bits of bucket index, split into 2^log_bins bins of 2^shift.
// A canonical scalar is below r < 2^255, so window w has at most 255 - w·c of its bits; in the
// top window (w·c <= 255 < (w + 1)·c) that and the carry make a digit of at most 2^(255 - w·c),
// never negative (255 - w·c < c), so a bucket below 2^(255 - w·c); every lower window has c
// bits and buckets below 2^(c-1). At c = 20 the top window takes 15 bits where all 256 would
// take 16, half of whose bins would stay empty and the other half hold twice a bin's share,
// over the stage sized for the other windows. Needs w·c <= 255, which every window of ⌈256/c⌉
// meets (w·c = 255 leaves one bin of one bucket: the carry).
__device__ __forceinline__ void window_bins(u32 c, u32 w, u32 max_log_bins, u32& log_bins, u32& shift) {
    const u32 used = min(c - 1, 255 - w * c);
    log_bins = min(used, max_log_bins);
    shift = used - log_bins;
}

// Thread t of windows · 2^max_log_bins (a window's stride in bin_cursor): bin k of window w
// starts at the offset of its first bucket; relative to the window's first offset, that is the
// bin's cursor before phase A. Runs once after the scan, before any phase B has turned offsets
// into ends.
extern "C" __global__ void msm_bin_cursors(const u32* offsets, u32 c, u32 max_log_bins, u32 windows,
                                           u32* bin_cursor) {
    GRID_STRIDE(t, windows << max_log_bins) {
        const u32 w = t >> max_log_bins, k = t & ((1u << max_log_bins) - 1);
        u32 log_bins, shift;
        window_bins(c, w, max_log_bins, log_bins, shift);
        if (k >= (1u << log_bins)) continue;  // past this window's bins: never read
        const u32* window = offsets + (w << (c - 1));
        bin_cursor[t] = window[k << shift] - window[0];
    }
}

// Phase A for window w: block g takes scalars [g·BIN_TILE, (g+1)·BIN_TILE) ∩ [0, n), which
// thread t reads at g·BIN_TILE + j·BIN_THREADS + t (coalesced). A thread keeps one word a
// scalar (the slot) and reads the point's index only once the runs are known, which leaves
// fewer registers live. Launched with BIN_THREADS threads. After it, bin_cursor[w][k] is bin k's
// end (relative), which is where bin k + 1 starts.
extern "C" __global__ void __launch_bounds__(BIN_THREADS)
    msm_bin_scatter(const fr_t* scalars, const u32* index, u32 n, u32 c, u32 w, u32 max_log_bins, u32* bin_cursor,
                    u64* temp) {
    __shared__ u32 tile[1 << BIN_LOG_MAX];  // the bins' counts in this tile, then their runs' bases
    u32 log_bins, shift;
    window_bins(c, w, max_log_bins, log_bins, shift);
    if (max_log_bins > BIN_LOG_MAX || shift > BIN_LOG_WIDTH_MAX || c < 2 || c - 1 > BIN_BUCKET_BITS)
        return;  // not a geometry the host makes
    const u32 bins = 1u << log_bins;
    u32* cursor = bin_cursor + (w << max_log_bins);
    for (u32 k = threadIdx.x; k < bins; k += BIN_THREADS) tile[k] = 0;
    __syncthreads();
    const u32 first = blockIdx.x * BIN_TILE;
    u32 slot[BIN_PER_THREAD];  // BIN_NO_SLOT: past n, or a zero digit (no entry)
#pragma unroll
    for (int j = 0; j < BIN_PER_THREAD; j++) {
        const u32 i = first + j * BIN_THREADS + threadIdx.x;
        slot[j] = BIN_NO_SLOT;
        if (i >= n) continue;
        bool neg;
        const u32 d = window_digit(load_streaming(scalars + i), c, w, neg);
        // d - 1 < 2^(log_bins + shift) for a canonical scalar (window_bins), so b >> shift is
        // one of the bins
        if (d && ((d - 1) >> shift) < bins) {
            const u32 b = d - 1;
            slot[j] = (neg ? 0x80000000u : 0u) | (b << BIN_RANK_BITS) | atomicAdd(&tile[b >> shift], 1u);
        }
    }
    __syncthreads();
    for (u32 k = threadIdx.x; k < bins; k += BIN_THREADS) {
        const u32 m = tile[k];
        tile[k] = m ? atomicAdd(&cursor[k], m) : 0;
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < BIN_PER_THREAD; j++) {
        if (slot[j] == BIN_NO_SLOT) continue;
        const u32 i = first + j * BIN_THREADS + threadIdx.x;
        const u32 b = (slot[j] >> BIN_RANK_BITS) & ((1u << BIN_BUCKET_BITS) - 1);
        const u32 at = tile[b >> shift] + (slot[j] & ((1u << BIN_RANK_BITS) - 1));
        if (at < n) temp[at] = ((u64)b << 32) | __ldcs(index + i) | (slot[j] & 0x80000000u);
    }
}

// Phase B for window w: block k takes bin k's entries temp[lo, hi) (from the bin cursors phase A
// advanced). Its buckets occupy entries[base, base + m), base = its first bucket's offset and
// m = hi - lo (the bin's buckets are consecutive and their counts sum to m: phase A placed
// exactly the entries the histogram counted). Each entry takes a slot from its bucket's shared
// cursor, relative to base, and is written to stage[slot] in shared memory; after a barrier the
// block copies stage[0, m) to entries[base, base + m) with consecutive threads on consecutive
// words, and writes its buckets' ends (cursor + base) to counts. A bin of more than stage_cap
// entries (equal scalars put all of them in one bucket) keeps absolute cursors instead and
// writes each entry straight to entries[cursor++]: any distribution sorts, the large bins only
// without the coalescing.
// Dynamic shared memory: 4·(2^shift + stage_cap) bytes, the window's bin width (window_bins)
// then the stage; stage_cap 0 makes every block write directly. Launched with PLACE_THREADS
// threads and a block per bin of the window; each block reads and writes only its own buckets'
// counts, so blocks need no order among themselves.
extern "C" __global__ void __launch_bounds__(PLACE_THREADS)
    msm_bin_place(const u64* temp, u32 n, const u32* bin_cursor, u32 c, u32 w, u32 max_log_bins, u32 stage_cap,
                  u32* counts, u32 entries_len, u32* entries) {
    DYNAMIC_SHARED_U32(bin_place_shared);
    u32 log_bins, shift;
    window_bins(c, w, max_log_bins, log_bins, shift);
    const u32 k = blockIdx.x, width = 1u << shift;
    if (max_log_bins > BIN_LOG_MAX || shift > BIN_LOG_WIDTH_MAX || k >= (1u << log_bins)) return;
    u32* cursor = bin_place_shared;
    u32* stage = bin_place_shared + width;
    const u32 first_bucket = k << shift;
    u32* offsets = counts + (w << (c - 1)) + first_bucket;
    const u32* ends = bin_cursor + (w << max_log_bins);
    const u32 lo = k ? ends[k - 1] : 0, hi = min(ends[k], n);
    const u32 m = hi > lo ? hi - lo : 0;
    const bool staged = m <= stage_cap;  // the same for every thread of the block
    const u32 base = offsets[0];         // read by all before the barrier, after which counts change
    for (u32 j = threadIdx.x; j < width; j += PLACE_THREADS) cursor[j] = staged ? offsets[j] - base : offsets[j];
    __syncthreads();
    for (u32 i0 = lo + threadIdx.x; i0 < hi; i0 += PLACE_BATCH * PLACE_THREADS) {
        u64 e[PLACE_BATCH];
#pragma unroll
        for (int u = 0; u < PLACE_BATCH; u++) {
            const u32 i = i0 + u * PLACE_THREADS;
            e[u] = i < hi ? __ldcs(temp + i) : 0;
        }
#pragma unroll
        for (int u = 0; u < PLACE_BATCH; u++) {
            const u32 local = (u32)(e[u] >> 32) - first_bucket;
            if (i0 + u * PLACE_THREADS < hi && local < width) {
                const u32 at = atomicAdd(&cursor[local], 1u);
                if (staged) {
                    if (at < m) stage[at] = (u32)e[u];
                } else if (at < entries_len) {
                    entries[at] = (u32)e[u];
                }
            }
        }
    }
    __syncthreads();
    if (staged) {
        for (u32 i = threadIdx.x; i < m; i += PLACE_THREADS)
            if (base + i < entries_len) __stcs(entries + base + i, stage[i]);
        for (u32 j = threadIdx.x; j < width; j += PLACE_THREADS) offsets[j] = cursor[j] + base;
    } else {
        for (u32 j = threadIdx.x; j < width; j += PLACE_THREADS) offsets[j] = cursor[j];
    }
}

// ---- exclusive prefix sum over u32 (three launches: blocks, block totals, add back) ----
#define SCAN_THREADS 256
#define SCAN_PER_THREAD 4
#define SCAN_TILE (SCAN_THREADS * SCAN_PER_THREAD)

// Exclusive scan of the block's values in shared memory (Hillis-Steele); returns the block total.
__device__ u32 block_exclusive_scan(u32* vals /* blockDim.x, shared */) {
    __syncthreads();
    const u32 own = vals[threadIdx.x];
    for (u32 off = 1; off < blockDim.x; off <<= 1) {
        u32 t = threadIdx.x >= off ? vals[threadIdx.x - off] : 0;
        __syncthreads();
        vals[threadIdx.x] += t;
        __syncthreads();
    }
    const u32 total = vals[blockDim.x - 1];
    const u32 excl = vals[threadIdx.x] - own;
    __syncthreads();
    vals[threadIdx.x] = excl;
    __syncthreads();
    return total;
}

// Each block: exclusive scan of its SCAN_TILE elements in place; its total to block_sums.
extern "C" __global__ void msm_scan_tiles(u32* data, u32 m, u32* block_sums) {
    __shared__ u32 vals[SCAN_THREADS];
    u32 base = blockIdx.x * SCAN_TILE + threadIdx.x * SCAN_PER_THREAD;
    u32 v[SCAN_PER_THREAD], sum = 0;
    for (int k = 0; k < SCAN_PER_THREAD; k++) { v[k] = base + k < m ? data[base + k] : 0; sum += v[k]; }
    vals[threadIdx.x] = sum;
    u32 total = block_exclusive_scan(vals);
    u32 run = vals[threadIdx.x];
    for (int k = 0; k < SCAN_PER_THREAD; k++) { if (base + k < m) data[base + k] = run; run += v[k]; }
    if (threadIdx.x == 0) block_sums[blockIdx.x] = total;
}

// One block of SCAN_THREADS: exclusive scan of nb block totals, each thread a contiguous run;
// the sum of everything to *grand_total (the number of bucket entries).
extern "C" __global__ void msm_scan_totals(u32* sums, u32 nb, u32* grand_total) {
    __shared__ u32 vals[SCAN_THREADS];
    u32 per = (nb + SCAN_THREADS - 1) / SCAN_THREADS;
    u32 lo = threadIdx.x * per, hi = min(lo + per, nb);
    u32 sum = 0;
    for (u32 k = lo; k < hi; k++) sum += sums[k];
    vals[threadIdx.x] = sum;
    u32 total = block_exclusive_scan(vals);
    if (threadIdx.x == 0) *grand_total = total;
    u32 run = vals[threadIdx.x];
    for (u32 k = lo; k < hi; k++) { u32 t = sums[k]; sums[k] = run; run += t; }
}

extern "C" __global__ void msm_scan_add(u32* data, u32 m, const u32* block_sums) {
    GRID_STRIDE(i, m) data[i] += block_sums[i / SCAN_TILE];
}

// ---- per-curve kernels ----
// Thread b: if bucket b spans chunks f..l (f < l), add the spills of chunks f+1..l into it
// (chunk f, which holds its first entry, wrote the rest to pass[b]). With `accumulate` (a pass
// after the first) every bucket this pass touched is then added to what the earlier passes left
// in buckets[b]; otherwise pass and buckets are the same array. One thread per bucket keeps the
// warps busy: random buckets have about the same chain length.
template <class F>
__device__ __forceinline__ void bucket_fixup(const u32* ends, u32 nb, u32 chunk, u32 accumulate,
                                             const xyzz_t<F>* pass, xyzz_t<F>* buckets, const xyzz_t<F>* spills) {
    GRID_STRIDE(b, nb) {
        const u32 start = b ? ends[b - 1] : 0, end = ends[b];
        if (end == start) continue;
        const u32 first = start / chunk, last = (end - 1) / chunk;
        if (first == last && !accumulate) continue;
        xyzz_t<F> acc = pass[b];
        for (u32 u = first + 1; u <= last; u++) acc = acc.add(spills[u]);
        if (accumulate) acc = acc.add(buckets[b]);
        buckets[b] = acc;
    }
}

// Thread (w, j) of windows × segs: Σ (b+1)·bucket[w][b] over b in [j·L, (j+1)·L), L = buckets / segs.
template <class F>
__device__ __forceinline__ void window_segments(const xyzz_t<F>* buckets, u32 log_buckets, u32 log_segs,
                                                u32 windows, xyzz_t<F>* partials) {
    const u32 segs = 1u << log_segs, log_len = log_buckets - log_segs, len = 1u << log_len;
    GRID_STRIDE(t, windows * segs) {
        u32 w = t >> log_segs, j = t & (segs - 1);
        const xyzz_t<F>* b = buckets + ((size_t)w << log_buckets) + ((size_t)j << log_len);
        xyzz_t<F> acc = xyzz_t<F>::inf(), sum = xyzz_t<F>::inf();
        for (int i = (int)len - 1; i >= 0; i--) {
            acc = acc.add(b[i]);
            sum = sum.add(acc);
        }
        // sum = Σ (i+1)·b[i]; add the segment's offset j·L times the plain sum acc.
        u32 off = j << log_len;
        if (off && !acc.is_inf()) {
            xyzz_t<F> m = xyzz_t<F>::inf();
            for (int bit = 31 - __clz(off); bit >= 0; bit--) {
                m = m.dbl();
                if ((off >> bit) & 1) m = m.add(acc);
            }
            sum = sum.add(m);
        }
        partials[t] = sum;
    }
}

// Block g sums in[g·blockDim .. (g+1)·blockDim) (a tree in shared memory) into out[g].
template <class F>
__device__ __forceinline__ void reduce_groups(const xyzz_t<F>* in, xyzz_t<F>* out, xyzz_t<F>* tile) {
    tile[threadIdx.x] = in[(size_t)blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    for (u32 half = blockDim.x >> 1; half; half >>= 1) {
        if (threadIdx.x < half) tile[threadIdx.x] = tile[threadIdx.x].add(tile[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

// Thread t of `threads` (grid-strided) sums the points list[t·per .. (t+1)·per) ∩ [0, count)
// into out[t] (infinity when empty), every thread the same number of additions.
template <class F>
__device__ __forceinline__ void sum_points(const affine_t<F>* bases, const u32* list, u32 count, u32 per, u32 threads,
                                           xyzz_t<F>* out) {
    GRID_STRIDE(t, threads) {
        xyzz_t<F> acc = xyzz_t<F>::inf();
        const u32 lo = min(t * per, count), hi = min(lo + per, count);
        for (u32 k = lo; k < hi; k++) acc = acc.add_affine(bases[list[k]]);
        out[t] = acc;
    }
}

// 64 G2 XYZZ points are 24 KiB of shared memory.
#define REDUCE_THREADS 64

// MIN_BLOCKS: blocks of 128 threads per SM that the registers of msm_gX_sum_points and
// msm_gX_bucket_fixup must allow. Unbounded, msm_g1_sum_points takes 132 registers and fits only
// 3 blocks an SM, so its 2^17 threads run in a wave and a third instead of two full ones
// (kernels/NOTES.md has the timing); msm_g1_bucket_fixup takes 142.
#define MSM_CURVE(G, F, MIN_BLOCKS)                                                                              \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS)                                                 \
        msm_##G##_bucket_fixup(const u32* ends, u32 nb, u32 chunk, u32 accumulate, const xyzz_t<F>* pass,         \
                               xyzz_t<F>* buckets, const xyzz_t<F>* spills) {                                     \
        bucket_fixup<F>(ends, nb, chunk, accumulate, pass, buckets, spills);                                      \
    }                                                                                                             \
    extern "C" __global__ void msm_##G##_window_segments(const xyzz_t<F>* buckets, u32 log_buckets, u32 log_segs, \
                                                         u32 windows, xyzz_t<F>* partials) {                      \
        window_segments<F>(buckets, log_buckets, log_segs, windows, partials);                                    \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)                                                  \
        msm_##G##_reduce(const xyzz_t<F>* in, xyzz_t<F>* out) {                                                   \
        __shared__ xyzz_t<F> tile[REDUCE_THREADS];                                                                \
        reduce_groups<F>(in, out, tile);                                                                          \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS)                                                 \
        msm_##G##_sum_points(const affine_t<F>* bases, const u32* list, u32 count, u32 per, u32 threads,          \
                             xyzz_t<F>* out) {                                                                    \
        sum_points<F>(bases, list, count, per, threads, out);                                                     \
    }                                                                                                             \
    extern "C" __global__ void msm_##G##_to_jacobian(const xyzz_t<F>* in, u32 n, jacobian_t<F>* out) {            \
        GRID_STRIDE(i, n) out[i] = in[i].to_jacobian();                                                           \
    }

MSM_CURVE(g1, fp_t, 4)
MSM_CURVE(g2, fp2_t, 2)
// msm_g1_buckets and msm_g2_buckets (buckets.cuh; its variant modules add suffixed ones)
MSM_BUCKET_KERNELS()

// The batch-affine bucket phase (batch_affine.cuh), launch bounds as the XYZZ bucket kernels'.
#include "batch_affine.cuh"
AFFINE_ROUND_KERNELS(g1, fp_t, 4)
AFFINE_ROUND_KERNELS(g2, fp2_t, 3)
