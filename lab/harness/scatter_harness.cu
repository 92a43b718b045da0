// The MSM's bucket sort (kernels/msm/msm.cu step 4, kernels/NOTES.md "MSM" step 3) in variants,
// timed on the same data and checked against each other, in one standalone harness. Built with
// nvcc alone (no Rust, no cudarc):
//
//   nvcc -arch=sm_90 -O3 -std=c++17 -DSCATTER_HARNESS -o scatter lab/harness/scatter_harness.cu
//   ./scatter [--logs=24,25] [--equal=24] [--seed=S] [--reps=5] [--full-window=W] [--samples=K]
//
// --logs: the sizes 2^N of the random profile; --equal: the size of the equal-scalars profile
// (0: none); --full-window: the window whose every bucket the host compares exactly (default the
// top window); --samples: buckets, over all windows, the host compares exactly.
// lab/harness/scatter.sh builds and runs it. Everything sits under SCATTER_HARNESS: without
// the macro this file compiles to nothing (it lies outside kernels/, which build.rs compiles).
//
// ---- What is sorted ---------------------------------------------------------------------------
// n canonical scalars below 2^255 (random 256-bit words with the top bit cleared; the
// "equal" profile sets a sixteenth of them to one value, so that every window has one bucket of
// n/16 entries, far over any bin's staging capacity), point indices 0..n-1, c = 20 and
// ⌈256/c⌉ = 13 windows, as production sorts a random MSM of 2^23 points and more. The histogram
// and the scan are production's kernels (msm_digit_histogram, msm_scan_*) with msm.rs's launch
// geometry (add_to_buckets), run once; their offsets are kept, and every run of every variant
// starts from a copy of them, since a sort turns the offsets into the buckets' ends.
//
// ---- The variants -----------------------------------------------------------------------------
//  direct   production msm_scatter_indexed, one window a launch (scatter_windows_for(20) = 1).
//  binned   production msm_bin_cursors, then per window msm_bin_scatter (phase A, a block of
//           BIN_THREADS per BIN_TILE scalars) and msm_bin_place (phase B, a block of
//           PLACE_THREADS per bin), at production's geometry (scatter_binned in msm.rs: 2^11
//           bins a window, the top window over 255 bits) with this file's stage capacity. Until
//           the port to production it was unstaged at 2^9 bins (the first BENCHMARKS.md rows).
//  staged/L phase A of this file (sh_bin_scatter: production's, with 2^L bins, L up to 11, one
//           register array instead of two, and the top window's bins over the buckets a scalar
//           below 2^255 reaches: sh_window_bins), then a phase B that stages its bin
//           (sh_place_staged): the bin's entries are placed by shared cursors into a
//           shared-memory copy of the bin's part of `entries`, which then goes out with
//           consecutive threads writing consecutive words. A bin longer than the staging
//           capacity takes production's direct-write loop in that block.
//  digits/L the digits of all windows computed once (sh_digits: a u32 word per window and
//           scalar), then per window the phase A above reading those 4-byte words instead of
//           32-byte scalars, and the staged phase B.
// Each variant's time is the whole sort of all 13 windows (its set-up kernels included: the bin
// cursors, the digits), CUDA events around it, one warm-up then the median of --reps runs; one
// more run with an event between every two kernels gives the breakdown (set-up, phase A, phase B).
//
// ---- The checks (every variant, on a run of its own into entries poisoned with 0xff) -----------
//  1. The ends: every bucket's end equals the next bucket's scanned offset (the last the scan's
//     total), and equals the direct variant's end exactly.
//  2. Device, every window: each entry of the window is looked up in the window's expected word
//     per point ((bucket << 1) | sign, from production's window_digit of the point's scalar), its
//     bucket found from the ends (binary search); every entry must match it, and every point with
//     a nonzero digit must be seen exactly once. With 1., that is exact: same buckets, same
//     multisets, nothing lost or doubled, no hole left.
//  3. Device, every bucket: a sum and a xor of a 64-bit hash of its entries, compared with the
//     direct variant's.
//  4. Host, every bucket of the full window: the entries sorted per bucket, compared with the
//     direct variant's; the direct variant's are checked there against the digits the host
//     computes itself (its own signed-digit code, not production's).
//  5. Host, --samples buckets over all windows: sorted, against the direct variant's, and every
//     entry against the host's digits.
// A mismatch prints MISMATCH and the harness exits 1 (2 on a CUDA error or a bad option).
// Invariant the host checks rely on: index[i] = i (the generator writes it so), so an entry's
// point is its scalar's position.
#ifdef SCATTER_HARNESS

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../../kernels/msm/msm.cu"

#include "cuda_check.h"

// ================================================================================================
// Harness kernels: the variants
// ================================================================================================

// Bins a window at most in this file's phase A (its shared counters: 8 KiB) and buckets a bin
// at most in its phase B (its shared cursors), for c = 20: 2^19 buckets in 2^9..2^11 bins.
#define SH_LOG_BINS_MAX 11
#define SH_LOG_WIDTH_MAX 10
// Entries a staged phase-B thread loads before it places them (loads in flight).
#define SH_PLACE_BATCH 8
#define SH_NONE 0xffffffffu
// Phase A's slot word: sign << 31 | bucket << BIN_RANK_BITS | rank within the tile's bin. The
// bucket takes 19 bits (c <= 20). SH_NONE never is a slot: it would be a negative digit of
// |d| = 2^(c-1) (bucket 2^19 − 1), and signed_digit makes a digit negative only when
// |d| < 2^(c-1).
#define SH_BUCKET_BITS 19
static_assert(1 + SH_BUCKET_BITS + BIN_RANK_BITS <= 32, "sign, bucket and rank must share a word");

// Window w's bins in this file's variants: window_bins, with the scalars' width a parameter.
// used = min(c − 1, bits − w·c) bits of bucket index, 2^log_bins bins of 2^shift buckets. With
// bits = 256 it is production's window_bins. Canonical scalars are below r < 2^255, so
// bits = 255 also covers every digit: the top window (w·c < 255 <= (w + 1)·c) has at most
// 255 − w·c bits plus a carry, a digit of at most 2^(255 − w·c), never negative (255 − w·c < c),
// so a bucket below 2^(255 − w·c). At c = 20 that is 15 bits where production's geometry takes 16,
// whose upper half of the top window's bins then stays empty and its lower half holds twice a
// bin's share, over the staging capacity sized for the other windows. Needs w·c < bits.
__host__ __device__ __forceinline__ void sh_window_bins(u32 c, u32 w, u32 max_log_bins, u32 bits, u32& log_bins,
                                                        u32& shift) {
    const u32 used = min(c - 1, bits - w * c);
    log_bins = min(used, max_log_bins);
    shift = used - log_bins;
}

// msm_bin_cursors with sh_window_bins' geometry: thread t of windows · 2^max_log_bins sets bin k
// of window w to its first bucket's offset, relative to the window's first offset. Runs while
// counts still holds the scanned offsets.
__global__ void sh_bin_cursors(const u32* offsets, u32 c, u32 max_log_bins, u32 bits, u32 windows, u32* bin_cursor) {
    GRID_STRIDE(t, windows << max_log_bins) {
        const u32 w = t >> max_log_bins, k = t & ((1u << max_log_bins) - 1);
        u32 log_bins, shift;
        sh_window_bins(c, w, max_log_bins, bits, log_bins, shift);
        if (k >= (1u << log_bins)) continue;  // past this window's bins: never read
        const u32* window = offsets + (w << (c - 1));
        bin_cursor[t] = window[k << shift] - window[0];
    }
}

// The MSM's scalars: random 256-bit words below 2^255 (top bit cleared), never 0 (production
// compacts zeros away, msm_prepare_compact); with equal_mask, the scalars whose position's hash
// has its low bits clear (1 in equal_mask + 1 of them) all take one value instead. index[i] = i.
__host__ __device__ __forceinline__ u64 sh_mix(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
__host__ __device__ __forceinline__ void sh_scalar(u64 seed, u64 i, u32* l) {
    for (int j = 0; j < 4; j++) {
        const u64 r = sh_mix(seed * 0xD1B54A32D192ED03ull + i * 4 + j);
        l[2 * j] = (u32)r;
        l[2 * j + 1] = (u32)(r >> 32);
    }
    l[7] &= 0x7fffffffu;
    u32 acc = 0;
    for (int j = 0; j < 8; j++) acc |= l[j];
    if (!acc) l[0] = 1;
}
__global__ void sh_gen(fr_t* scalars, u32* index, u32 n, u64 seed, u32 equal_mask) {
    GRID_STRIDE(i, n) {
        fr_t s;
        if (equal_mask && (sh_mix(seed ^ ((u64)i << 20) ^ 0x5bd1e995ull) & equal_mask) == 0)
            sh_scalar(seed + 1, 0xffffffffull, s.l);  // position 2^32 − 1 of another stream
        else
            sh_scalar(seed, i, s.l);
        scalars[i] = s;
        index[i] = i;
    }
}

// Every window's digit of every scalar, once: digits[w·n + i] = |d| << 1 | sign, 0 for none
// (|d| <= 2^(c-1), so the word is nonzero exactly when there is an entry). The same recurrence
// as for_each_digit (signed_digit), so the same entries the histogram counted.
__global__ void sh_digits(const fr_t* scalars, u32 n, u32 c, u32 windows, u32* digits) {
    GRID_STRIDE(i, n) {
        const fr_t s = load_streaming(scalars + i);
        u32 carry = 0;
        for (u32 w = 0; w < windows; w++) {
            bool neg;
            const u32 d = signed_digit(s, c, w, carry, neg);
            __stcs(digits + (size_t)w * n + i, d ? (d << 1) | (neg ? 1u : 0u) : 0u);
        }
    }
}

// Phase A for window w with up to 2^SH_LOG_BINS_MAX bins (sh_window_bins with max_log_bins):
// production's msm_bin_scatter, except that a thread keeps one word per scalar (the slot, with
// the sign in it) and reads the point's index after the run bases are known, which leaves fewer
// registers live; FROM_DIGITS reads sh_digits' words instead of the scalars. Same layout of
// bin_cursor (stride 2^max_log_bins a window, positions relative to the window's first offset)
// and temp ((bucket << 32) | entry) as production's, so either phase B takes its output.
// Launched with BIN_THREADS threads, a block per BIN_TILE scalars.
template <bool FROM_DIGITS, int MIN_BLOCKS>
__global__ void __launch_bounds__(BIN_THREADS, MIN_BLOCKS)
    sh_bin_scatter(const fr_t* scalars, const u32* digits, const u32* index, u32 n, u32 c, u32 w, u32 max_log_bins,
                   u32 bits, u32* bin_cursor, u64* temp) {
    __shared__ u32 tile[1 << SH_LOG_BINS_MAX];  // counts, then the runs' bases
    u32 log_bins, shift;
    sh_window_bins(c, w, max_log_bins, bits, log_bins, shift);
    if (max_log_bins > SH_LOG_BINS_MAX || c < 2 || c - 1 > SH_BUCKET_BITS) return;  // not a geometry the host makes
    const u32 bins = 1u << log_bins;
    u32* cursor = bin_cursor + (w << max_log_bins);
    for (u32 k = threadIdx.x; k < bins; k += BIN_THREADS) tile[k] = 0;
    __syncthreads();
    const u32 first = blockIdx.x * BIN_TILE;
    u32 slot[BIN_PER_THREAD];
#pragma unroll
    for (int j = 0; j < BIN_PER_THREAD; j++) {
        const u32 i = first + j * BIN_THREADS + threadIdx.x;
        slot[j] = SH_NONE;
        if (i >= n) continue;
        u32 d;
        bool neg;
        if (FROM_DIGITS) {
            const u32 word = __ldcs(digits + (size_t)w * n + i);
            d = word >> 1;
            neg = word & 1;
        } else {
            d = window_digit(load_streaming(scalars + i), c, w, neg);
        }
        // d − 1 < 2^(log_bins + shift) (sh_window_bins), so b >> shift is one of the bins
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
        if (slot[j] == SH_NONE) continue;
        const u32 i = first + j * BIN_THREADS + threadIdx.x;
        const u32 b = (slot[j] >> BIN_RANK_BITS) & ((1u << SH_BUCKET_BITS) - 1);
        const u32 at = tile[b >> shift] + (slot[j] & ((1u << BIN_RANK_BITS) - 1));
        if (at < n) temp[at] = ((u64)b << 32) | __ldcs(index + i) | (slot[j] & 0x80000000u);
    }
}

// Phase B for window w, staged: block k takes bin k's entries temp[lo, hi) (from the bin cursors
// phase A advanced). Its buckets occupy entries[base, base + m), base = its first bucket's
// offset and m = hi − lo (the bin's buckets are consecutive and their counts sum to m: phase A
// placed exactly the entries the histogram counted). Each entry takes a slot from its bucket's
// shared cursor, relative to base, and is written to stage[slot] in shared memory; after a
// barrier the block copies stage[0, m) to entries[base, base + m) with consecutive threads on
// consecutive words, and writes its buckets' ends (cursor + base) to counts. A bin of more than
// stage_cap entries runs production's msm_bin_place loop instead (absolute cursors, each entry
// written where it goes) and counts itself in *fallbacks.
// Dynamic shared memory: 4·(2^shift + stage_cap) bytes, the window's bin width (sh_window_bins)
// then the stage. Launched with PLACE_THREADS threads and a block per bin of the window; each
// block reads and writes only its own buckets' counts, as production's.
template <int BATCH>
__global__ void __launch_bounds__(PLACE_THREADS)
    sh_place_staged(const u64* temp, u32 n, const u32* bin_cursor, u32 c, u32 w, u32 max_log_bins, u32 bits,
                    u32 stage_cap, u32* counts, u32 entries_len, u32* entries, u32* fallbacks) {
    extern __shared__ u32 sh_smem[];
    u32 log_bins, shift;
    sh_window_bins(c, w, max_log_bins, bits, log_bins, shift);
    const u32 k = blockIdx.x, width = 1u << shift;
    if (max_log_bins > SH_LOG_BINS_MAX || shift > SH_LOG_WIDTH_MAX || k >= (1u << log_bins)) return;
    u32* cursor = sh_smem;
    u32* stage = sh_smem + width;
    const u32 first_bucket = k << shift;
    u32* offsets = counts + (w << (c - 1)) + first_bucket;
    const u32* ends = bin_cursor + (w << max_log_bins);
    const u32 lo = k ? ends[k - 1] : 0, hi = min(ends[k], n);
    const u32 m = hi > lo ? hi - lo : 0;
    const bool staged = m <= stage_cap;  // the same for every thread of the block
    const u32 base = offsets[0];         // read by all before any thread writes counts (after the barriers)
    for (u32 j = threadIdx.x; j < width; j += PLACE_THREADS) cursor[j] = staged ? offsets[j] - base : offsets[j];
    if (!staged && threadIdx.x == 0) atomicAdd(fallbacks, 1u);
    __syncthreads();
    for (u32 i0 = lo + threadIdx.x; i0 < hi; i0 += BATCH * PLACE_THREADS) {
        u64 e[BATCH];
#pragma unroll
        for (int u = 0; u < BATCH; u++) {
            const u32 i = i0 + u * PLACE_THREADS;
            e[u] = i < hi ? __ldcs(temp + i) : 0;
        }
#pragma unroll
        for (int u = 0; u < BATCH; u++) {
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

// ================================================================================================
// Harness kernels: the checks
// ================================================================================================

// bad[0]: mismatches; bad[1..3]: what the first one (roughly: racing threads) saw.
__device__ __forceinline__ void sh_report(u32* bad, u32 where, u32 value, u32 why) {
    if (atomicAdd(bad, 1u) == 0) {
        bad[1] = where;
        bad[2] = value;
        bad[3] = why;
    }
}

// expect[index[i]] = window w's (bucket << 1 | sign) of scalar i by production's window_digit,
// SH_NONE for a zero digit.
__global__ void sh_expect(const fr_t* scalars, const u32* index, u32 n, u32 c, u32 w, u32* expect) {
    GRID_STRIDE(i, n) {
        bool neg;
        const u32 d = window_digit(scalars[i], c, w, neg);
        expect[index[i]] = d ? ((d - 1) << 1) | (neg ? 1u : 0u) : SH_NONE;
    }
}

// The bucket (of nb, ends non-decreasing) that holds entry e: the first whose end is past e.
__device__ __forceinline__ u32 sh_bucket_at(const u32* ends, u32 nb, u32 e) {
    u32 lo = 0, hi = nb - 1;
    while (lo < hi) {
        const u32 mid = (lo + hi) >> 1;
        if (ends[mid] > e) hi = mid; else lo = mid + 1;
    }
    return lo;
}

// Window w's entries, [offsets[w·B], ends[w·B + B − 1]): each must be a point below n whose
// expected word is its bucket's and its sign; seen counts the points. Needs the ends checked to
// partition the window (the host does, before).
__global__ void sh_check_window(const u32* entries, const u32* offsets, const u32* ends, u32 c, u32 w, u32 n,
                                const u32* expect, u32* seen, u32* bad) {
    const u32 nb = 1u << (c - 1);
    const u32* ends_w = ends + (size_t)w * nb;
    const u32 lo_w = offsets[(size_t)w * nb], hi_w = ends_w[nb - 1];
    const u32 count = hi_w > lo_w ? hi_w - lo_w : 0;
    if (count > n && blockIdx.x == 0 && threadIdx.x == 0) sh_report(bad, lo_w, hi_w, 1);
    GRID_STRIDE(t, min(count, n)) {
        const u32 e = lo_w + t;
        const u32 b = sh_bucket_at(ends_w, nb, e);
        const u32 v = entries[e], p = v & 0x7fffffffu;
        if (p >= n || expect[p] != ((b << 1) | (v >> 31))) sh_report(bad, e, v, 2);
        else atomicAdd(&seen[p], 1u);
    }
}

// Every point with an entry in the window seen once, every other never.
__global__ void sh_check_seen(const u32* expect, const u32* seen, u32 n, u32* bad) {
    GRID_STRIDE(p, n) {
        const u32 want = expect[p] != SH_NONE ? 1u : 0u;
        if (seen[p] != want) sh_report(bad, p, seen[p], 3);
    }
}

__device__ __forceinline__ u64 sh_entry_hash(u32 v) { return sh_mix(0x243F6A8885A308D3ull ^ v); }

// Per bucket (of nb over all windows), the sum and the xor of its entries' hashes: the same for
// any order within the bucket. sum and xr start at zero.
__global__ void sh_bucket_hash(const u32* entries, const u32* ends, u32 nb, u32 total, u64* sum, u64* xr) {
    GRID_STRIDE(e, total) {
        const u32 b = sh_bucket_at(ends, nb, e);
        const u64 h = sh_entry_hash(entries[e]);
        atomicAdd((unsigned long long*)&sum[b], (unsigned long long)h);
        atomicXor((unsigned long long*)&xr[b], (unsigned long long)h);
    }
}

__global__ void sh_compare_u64(const u64* a, const u64* b, u32 m, u32* bad) {
    GRID_STRIDE(i, m) if (a[i] != b[i]) sh_report(bad, i, (u32)a[i], 4);
}

// ================================================================================================
// Host
// ================================================================================================
static u32 grid_for(size_t n, u32 threads) {
    return (u32)std::max<size_t>(1, std::min<size_t>((n + threads - 1) / threads, 1u << 20));
}
static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// f(lo, hi) over [0, n) in contiguous parts on up to 16 threads (f writes disjoint data).
template <class F>
static void parallel_for(size_t n, F f) {
    unsigned t = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
    if (n < 4096) t = 1;
    const size_t per = (n + t - 1) / t;
    std::vector<std::thread> th;
    for (unsigned k = 0; k < t; k++) {
        const size_t lo = k * per, hi = std::min(n, lo + per);
        if (lo >= hi) break;
        th.emplace_back([=] { f(lo, hi); });
    }
    for (auto& x : th) x.join();
}

// The host's own signed digits (written apart from msm.cu's signed_digit, to check it): window
// `target`'s (bucket << 1 | sign) of the 256-bit integer l, SH_NONE for a zero digit. Window w's
// value is bits [w·c, w·c + c) plus the carry out of window w − 1; above 2^(c-1) it becomes
// 2^c minus itself, negative, and carries 1 into the next window.
static u32 host_bits(const u32* l, u32 pos, u32 c) {
    u32 v = 0;
    for (u32 k = 0; k < c; k++) {
        const u32 bit = pos + k;
        if (bit < 256) v |= ((l[bit >> 5] >> (bit & 31)) & 1u) << k;
    }
    return v;
}
static u32 host_window_word(const u32* l, u32 c, u32 target) {
    const u32 half = 1u << (c - 1);
    u32 carry = 0, mag = 0;
    bool neg = false;
    for (u32 w = 0; w <= target; w++) {
        const u32 v = host_bits(l, w * c, c) + carry;
        neg = v > half;
        mag = neg ? (1u << c) - v : v;
        carry = neg ? 1u : 0u;
    }
    return mag ? ((mag - 1) << 1) | (neg ? 1u : 0u) : SH_NONE;
}

enum Kind { K_DIRECT, K_BINNED, K_STAGED, K_DIGITS };
struct Variant {
    std::string name;
    Kind kind;
    u32 log_bins;  // bins a window at most (max_log_bins); unused by direct
    u32 bits;      // sh_window_bins' scalar width: 256 is production's geometry; unused by direct and binned
    int a_blocks;  // staged: phase A's blocks an SM by __launch_bounds__ (4: unbounded registers allow that)
};

struct Ctx {
    u32 n, c, windows, nb, total, grand;
    fr_t* scalars;
    u32 *index, *counts, *offsets, *entries, *entries_ref, *bin_cursor, *digits, *fallbacks;
    u64* temp;
    size_t entries_len;
    u32 stage_cap;     // of the variant being run
    size_t stage_max;  // the most words a block's dynamic shared memory holds
    cudaStream_t s;
};

// The staging capacity for 2^log_bins bins: a bin's mean (n entries a window at most, over its
// bins) with a margin far beyond the spread of random bins (a sixteenth, and 512), rounded to
// 256, within what a block may hold beside the widest window's cursors.
static u32 stage_cap_for(const Ctx& x, u32 log_bins, u32 bits, u32& width_max) {
    width_max = 1;
    for (u32 w = 0; w < x.windows; w++) {
        u32 lb, sh;
        sh_window_bins(x.c, w, log_bins, bits, lb, sh);
        width_max = std::max(width_max, 1u << sh);
    }
    const size_t mean = (size_t)x.n >> log_bins;
    size_t cap = (mean + mean / 16 + 512 + 255) / 256 * 256;
    cap = std::min(cap, x.stage_max > width_max ? x.stage_max - width_max : 0);
    return (u32)cap;
}

// Queues variant v's whole sort (counts must hold the scanned offsets). With marks, records an
// event after the set-up and after each window's phase A and phase B (2 + 2·windows events;
// marks[0] is recorded first).
static void enqueue(const Ctx& x, const Variant& v, cudaEvent_t* marks) {
    const u32 c = x.c, n = x.n;
    if (marks) CK(cudaEventRecord(marks[0], x.s));
    if (v.kind == K_DIGITS) sh_digits<<<grid_for(n, 256), 256, 0, x.s>>>(x.scalars, n, c, x.windows, x.digits);
    if (v.kind == K_BINNED)
        msm_bin_cursors<<<grid_for((size_t)x.windows << v.log_bins, 256), 256, 0, x.s>>>(x.counts, c, v.log_bins,
                                                                                          x.windows, x.bin_cursor);
    if (v.kind == K_STAGED || v.kind == K_DIGITS)
        sh_bin_cursors<<<grid_for((size_t)x.windows << v.log_bins, 256), 256, 0, x.s>>>(x.counts, c, v.log_bins, v.bits,
                                                                                         x.windows, x.bin_cursor);
    if (marks) CK(cudaEventRecord(marks[1], x.s));
    const u32 tiles = (n + BIN_TILE - 1) / BIN_TILE;
    for (u32 w = 0; w < x.windows; w++) {
        // production's geometry for binned (bits 256), the variant's for the others
        u32 wlb, shift;
        sh_window_bins(c, w, v.log_bins, v.bits, wlb, shift);
        switch (v.kind) {
            case K_DIRECT:
                msm_scatter_indexed<<<grid_for(n, 256), 256, 0, x.s>>>(x.scalars, x.index, n, c, x.windows, w, w + 1,
                                                                       x.counts, x.entries);
                break;
            case K_BINNED:
                msm_bin_scatter<<<tiles, BIN_THREADS, 0, x.s>>>(x.scalars, x.index, n, c, w, v.log_bins, x.bin_cursor,
                                                                x.temp);
                break;
            case K_STAGED:
                if (v.a_blocks == 6)
                    sh_bin_scatter<false, 6><<<tiles, BIN_THREADS, 0, x.s>>>(x.scalars, nullptr, x.index, n, c, w,
                                                                             v.log_bins, v.bits, x.bin_cursor, x.temp);
                else
                    sh_bin_scatter<false, 4><<<tiles, BIN_THREADS, 0, x.s>>>(x.scalars, nullptr, x.index, n, c, w,
                                                                             v.log_bins, v.bits, x.bin_cursor, x.temp);
                break;
            case K_DIGITS:
                sh_bin_scatter<true, 4><<<tiles, BIN_THREADS, 0, x.s>>>(nullptr, x.digits, x.index, n, c, w, v.log_bins,
                                                                        v.bits, x.bin_cursor, x.temp);
                break;
        }
        if (marks) CK(cudaEventRecord(marks[2 + 2 * w], x.s));
        switch (v.kind) {
            case K_DIRECT: break;
            case K_BINNED:
                msm_bin_place<<<1u << wlb, PLACE_THREADS, 4 * ((size_t)(1u << shift) + x.stage_cap), x.s>>>(
                    x.temp, n, x.bin_cursor, c, w, v.log_bins, x.stage_cap, x.counts, (u32)x.entries_len, x.entries);
                break;
            case K_STAGED:
            case K_DIGITS: {
                const size_t smem = 4 * ((size_t)(1u << shift) + x.stage_cap);
                sh_place_staged<SH_PLACE_BATCH><<<1u << wlb, PLACE_THREADS, smem, x.s>>>(
                    x.temp, n, x.bin_cursor, c, w, v.log_bins, v.bits, x.stage_cap, x.counts, (u32)x.entries_len,
                    x.entries, x.fallbacks);
                break;
            }
        }
        if (marks) CK(cudaEventRecord(marks[3 + 2 * w], x.s));
    }
    CK(cudaGetLastError());
}

// The counts back to the scanned offsets, before a run.
static void restore(const Ctx& x) {
    CK(cudaMemcpyAsync(x.counts, x.offsets, (size_t)x.total * 4, cudaMemcpyDeviceToDevice, x.s));
}

static int g_failures = 0;
#define FAIL(...)                      \
    do {                               \
        printf("MISMATCH: " __VA_ARGS__); \
        printf("\n");                  \
        g_failures++;                  \
    } while (0)

// What the check of the direct variant leaves for the others'.
struct Reference {
    std::vector<u32> ends;        // every bucket's end
    std::vector<u32> full_sorted; // the full window's entries, sorted within each bucket
    u64 *hsum = nullptr, *hxor = nullptr;
    std::vector<u32> samples;     // the sampled buckets (indices over all windows)
};

static std::vector<u32> download_u32(const u32* d, size_t lo, size_t hi) {
    std::vector<u32> v(hi > lo ? hi - lo : 0);
    if (!v.empty()) CK(cudaMemcpy(v.data(), d + lo, v.size() * 4, cudaMemcpyDeviceToHost));
    return v;
}

static void sort_buckets(std::vector<u32>& win, const u32* starts, const u32* ends, u32 nb, u32 base) {
    parallel_for(nb, [&](size_t lo, size_t hi) {
        for (size_t b = lo; b < hi; b++) std::sort(win.begin() + (starts[b] - base), win.begin() + (ends[b] - base));
    });
}

// Checks 1–5 above on the variant's output (counts holding its ends, entries its entries); the
// direct variant (is_ref) fills ref. Returns whether it passed.
static bool check_variant(const Ctx& x, const char* name, bool is_ref, const std::vector<u32>& offsets_h,
                          const std::vector<u32>& scalars_h, const std::vector<u32>& expect_full, u32 full_w,
                          u32 samples, u64 seed, Reference& ref, u32* dbad, u32* dexpect, u32* dseen, u64* hs,
                          u64* hx) {
    const int before = g_failures;
    const u32 nb = x.nb, n = x.n;
    // 1. the ends
    std::vector<u32> ends = download_u32(x.counts, 0, x.total);
    for (u32 k = 0; k < x.total; k++) {
        const u32 want = k + 1 < x.total ? offsets_h[k + 1] : x.grand;
        if (ends[k] != want) {
            FAIL("%s: bucket %u (window %u) ends at %u, the next offset is %u", name, k, k / nb, ends[k], want);
            return false;  // the later checks need the ends to partition the entries
        }
    }
    if (!is_ref && ends != ref.ends) {
        FAIL("%s: ends differ from direct's", name);
        return false;
    }
    // 2. device, every window, exact
    u32 hbad[4];
    for (u32 w = 0; w < x.windows; w++) {
        CK(cudaMemsetAsync(dbad, 0, 16, x.s));
        CK(cudaMemsetAsync(dseen, 0, (size_t)n * 4, x.s));
        sh_expect<<<grid_for(n, 256), 256, 0, x.s>>>(x.scalars, x.index, n, x.c, w, dexpect);
        sh_check_window<<<grid_for(n, 256), 256, 0, x.s>>>(x.entries, x.offsets, x.counts, x.c, w, n, dexpect, dseen,
                                                          dbad);
        sh_check_seen<<<grid_for(n, 256), 256, 0, x.s>>>(dexpect, dseen, n, dbad);
        CK(cudaMemcpyAsync(hbad, dbad, 16, cudaMemcpyDeviceToHost, x.s));
        CK(cudaStreamSynchronize(x.s));
        if (hbad[0])
            FAIL("%s: window %u: %u entries or points wrong on the device (first: kind %u at %u, value %#x)", name, w,
                 hbad[0], hbad[3], hbad[1], hbad[2]);
    }
    // 3. device, every bucket, hashes against direct's
    CK(cudaMemsetAsync(hs, 0, (size_t)x.total * 8, x.s));
    CK(cudaMemsetAsync(hx, 0, (size_t)x.total * 8, x.s));
    sh_bucket_hash<<<grid_for(x.grand, 256), 256, 0, x.s>>>(x.entries, x.counts, x.total, x.grand, hs, hx);
    if (is_ref) {
        CK(cudaMemcpyAsync(ref.hsum, hs, (size_t)x.total * 8, cudaMemcpyDeviceToDevice, x.s));
        CK(cudaMemcpyAsync(ref.hxor, hx, (size_t)x.total * 8, cudaMemcpyDeviceToDevice, x.s));
    } else {
        CK(cudaMemsetAsync(dbad, 0, 16, x.s));
        sh_compare_u64<<<grid_for(x.total, 256), 256, 0, x.s>>>(hs, ref.hsum, x.total, dbad);
        sh_compare_u64<<<grid_for(x.total, 256), 256, 0, x.s>>>(hx, ref.hxor, x.total, dbad);
        CK(cudaMemcpyAsync(hbad, dbad, 16, cudaMemcpyDeviceToHost, x.s));
        CK(cudaStreamSynchronize(x.s));
        if (hbad[0]) FAIL("%s: %u bucket hashes differ from direct's (first: bucket %u)", name, hbad[0], hbad[1]);
    }
    CK(cudaStreamSynchronize(x.s));
    // 4. host, the full window
    const u32* starts_w = offsets_h.data() + (size_t)full_w * nb;
    const u32* ends_w = ends.data() + (size_t)full_w * nb;
    const u32 base = starts_w[0];
    std::vector<u32> win = download_u32(x.entries, base, ends_w[nb - 1]);
    if (is_ref) {
        // against the host's digits: every entry its point's bucket and sign, every point once
        std::vector<unsigned char> seen(n, 0);
        u32 bad = 0;
        for (u32 b = 0; b < nb; b++) {
            for (u32 e = starts_w[b]; e < ends_w[b]; e++) {
                const u32 v = win[e - base], p = v & 0x7fffffffu;
                if (p >= n || expect_full[p] != ((b << 1) | (v >> 31)) || seen[p]) {
                    if (!bad++)
                        printf("  first: window %u bucket %u entry %u value %#x (host expects %#x)\n", full_w, b, e, v,
                               p < n ? expect_full[p] : 0);
                    continue;
                }
                seen[p] = 1;
            }
        }
        for (u32 p = 0; p < n; p++) bad += (expect_full[p] != SH_NONE) != (seen[p] != 0);
        if (bad) FAIL("%s: window %u: %u entries or points differ from the host's digits", name, full_w, bad);
        sort_buckets(win, starts_w, ends_w, nb, base);
        ref.full_sorted.swap(win);
    } else {
        sort_buckets(win, starts_w, ends_w, nb, base);
        if (win != ref.full_sorted) {
            size_t i = 0;
            while (i < win.size() && win[i] == ref.full_sorted[i]) i++;
            FAIL("%s: window %u: the sorted entries differ from direct's (first at entry %zu)", name, full_w,
                 (size_t)base + i);
        }
    }
    // 5. host, sampled buckets over all windows
    if (is_ref) {
        ref.samples.clear();
        u64 st = seed ^ 0x7F4A7C159E3779B9ull;
        for (u32 k = 0; k < samples; k++) ref.samples.push_back((u32)(sh_mix(st + k) % x.total));
    }
    u32 bad = 0, checked = 0;
    for (u32 k : ref.samples) {
        const u32 w = k / nb, b = k % nb, lo = offsets_h[k], hi = ends[k];
        std::vector<u32> got = download_u32(x.entries, lo, hi);
        for (u32 v : got) {
            const u32 p = v & 0x7fffffffu;
            if (p >= n || host_window_word(&scalars_h[(size_t)p * 8], x.c, w) != ((b << 1) | (v >> 31))) {
                if (!bad++) printf("  first: window %u bucket %u value %#x\n", w, b, v);
            }
        }
        checked += (u32)got.size();
        if (!is_ref) {
            std::vector<u32> want = download_u32(x.entries_ref, lo, hi);
            std::sort(got.begin(), got.end());
            std::sort(want.begin(), want.end());
            if (got != want && !bad++) printf("  first: window %u bucket %u differs from direct's\n", w, b);
        }
    }
    if (bad) FAIL("%s: %u sampled entries or buckets wrong (of %u buckets)", name, bad, (u32)ref.samples.size());
    if (is_ref) {
        ref.ends.swap(ends);
        CK(cudaMemcpy(x.entries_ref, x.entries, x.entries_len * 4, cudaMemcpyDeviceToDevice));
    }
    printf("  %s: checked (%u sampled entries)%s\n", name, checked, g_failures == before ? "" : ": MISMATCH");
    return g_failures == before;
}

struct Row {
    std::string name, geometry, check;
    double ms = 0, pre = 0, a = 0, b = 0;
};

static float elapsed(cudaEvent_t a, cudaEvent_t b) {
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

// One profile at one size: data, histogram and scan, then every variant timed and checked.
static bool run_config(u32 log_n, bool equal, u64 seed, int reps, int full_window, u32 samples) {
    const u32 c = 20, windows = (256 + c - 1) / c, nb = 1u << (c - 1);
    Ctx x{};
    x.n = 1u << log_n;
    x.c = c;
    x.windows = windows;
    x.nb = nb;
    x.total = windows * nb;
    x.entries_len = (size_t)x.n * windows;
    const u32 n = x.n;
    const u32 full_w = full_window < 0 ? windows - 1 : std::min((u32)full_window, windows - 1);
    const char* profile = equal ? "equal (1/16 of the scalars one value)" : "random";
    printf("\n## The sort of 2^%u scalars, %s, c = %u, %u windows\n\n", log_n, profile, c, windows);

    // device memory: scalars, index, counts/offsets, entries ×2, temp, digits, checks
    const size_t need = (size_t)n * (32 + 4) + (size_t)x.total * 4 * 2 + x.entries_len * 4 * 3 + (size_t)n * 8 +
                        (size_t)n * 4 * 2 + (size_t)x.total * 8 * 4 + ((size_t)windows << SH_LOG_BINS_MAX) * 4 +
                        (64u << 20);
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    printf("device memory: %.2f GB needed, %.2f GB free\n", need / 1e9, free_b / 1e9);
    if (need > free_b / 10 * 9) {
        printf("skipped: more than 90%% of the free device memory\n");
        return true;
    }
    CK(cudaStreamCreate(&x.s));
    u32 *sums, *grand_d, *dbad, *dexpect, *dseen;
    u64 *hs, *hx;
    Reference ref;
    const u32 tiles = (x.total + SCAN_TILE - 1) / SCAN_TILE;
    CK(cudaMalloc(&x.scalars, (size_t)n * 32));
    CK(cudaMalloc(&x.index, (size_t)n * 4));
    CK(cudaMalloc(&x.counts, (size_t)x.total * 4));
    CK(cudaMalloc(&x.offsets, (size_t)x.total * 4));
    CK(cudaMalloc(&x.entries, x.entries_len * 4));
    CK(cudaMalloc(&x.entries_ref, x.entries_len * 4));
    CK(cudaMalloc(&x.digits, x.entries_len * 4));
    CK(cudaMalloc(&x.temp, (size_t)n * 8));
    CK(cudaMalloc(&x.bin_cursor, ((size_t)windows << SH_LOG_BINS_MAX) * 4));
    CK(cudaMalloc(&x.fallbacks, 4));
    CK(cudaMalloc(&sums, (size_t)tiles * 4));
    CK(cudaMalloc(&grand_d, 4));
    CK(cudaMalloc(&dbad, 16));
    CK(cudaMalloc(&dexpect, (size_t)n * 4));
    CK(cudaMalloc(&dseen, (size_t)n * 4));
    CK(cudaMalloc(&hs, (size_t)x.total * 8));
    CK(cudaMalloc(&hx, (size_t)x.total * 8));
    CK(cudaMalloc(&ref.hsum, (size_t)x.total * 8));
    CK(cudaMalloc(&ref.hxor, (size_t)x.total * 8));

    // data, histogram and scan (production's kernels, add_to_buckets' geometry)
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    sh_gen<<<grid_for(n, 256), 256, 0, x.s>>>(x.scalars, x.index, n, seed, equal ? 15u : 0u);
    CK(cudaMemsetAsync(x.counts, 0, (size_t)x.total * 4, x.s));
    CK(cudaEventRecord(e0, x.s));
    msm_digit_histogram<<<grid_for(n, 256), 256, 0, x.s>>>(x.scalars, n, c, windows, x.counts);
    msm_scan_tiles<<<tiles, 256, 0, x.s>>>(x.counts, x.total, sums);
    msm_scan_totals<<<1, 256, 0, x.s>>>(sums, tiles, grand_d);
    msm_scan_add<<<grid_for(x.total, 256), 256, 0, x.s>>>(x.counts, x.total, sums);
    CK(cudaEventRecord(e1, x.s));
    CK(cudaGetLastError());
    CK(cudaStreamSynchronize(x.s));
    const float hist_ms = elapsed(e0, e1);
    CK(cudaMemcpy(x.offsets, x.counts, (size_t)x.total * 4, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpy(&x.grand, grand_d, 4, cudaMemcpyDeviceToHost));
    std::vector<u32> offsets_h = download_u32(x.offsets, 0, x.total);
    std::vector<u32> scalars_h = download_u32(reinterpret_cast<const u32*>(x.scalars), 0, (size_t)n * 8);
    printf("histogram + scan (once, not part of any variant): %.3f ms; %u entries (%.2f a scalar)\n", hist_ms, x.grand,
           (double)x.grand / n);
    // the scan's sanity: offsets non-decreasing from 0, the total within n per window
    bool scan_ok = offsets_h[0] == 0 && x.grand <= x.entries_len;
    for (u32 k = 1; k < x.total && scan_ok; k++) scan_ok = offsets_h[k] >= offsets_h[k - 1] && offsets_h[k] <= x.grand;
    if (!scan_ok) {
        FAIL("the scan's offsets are not a partition of %u entries", x.grand);
        return false;
    }
    // the host's digits of the full window, for the direct variant's check
    std::vector<u32> expect_full(n);
    parallel_for(n, [&](size_t lo, size_t hi) {
        for (size_t p = lo; p < hi; p++) expect_full[p] = host_window_word(&scalars_h[p * 8], c, full_w);
    });

    int optin = 0, dev = 0;
    CK(cudaGetDevice(&dev));
    CK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    x.stage_max = (size_t)optin / 4;
    CK(cudaFuncSetAttribute(sh_place_staged<SH_PLACE_BATCH>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));
    CK(cudaFuncSetAttribute(msm_bin_place, cudaFuncAttributeMaxDynamicSharedMemorySize, optin));

    // staged and digits take 255-bit geometry (sh_window_bins); one staged run takes production's
    // 256, to show what the top window's bins do to the staging
    // and one bounds its phase A to 6 blocks of 256 an SM (40 registers) instead of 4
    const std::vector<Variant> variants = {
        {"direct", K_DIRECT, 0, 0, 4},
        {"binned (production, staged, L=11)", K_BINNED, BIN_LOG_MAX, 255, 4},
        {"staged L=9", K_STAGED, 9, 255, 4},
        {"staged L=10", K_STAGED, 10, 255, 4},
        {"staged L=11", K_STAGED, 11, 255, 4},
        {"staged L=11, top window over 2^16 buckets", K_STAGED, 11, 256, 4},
        {"staged L=11, phase A 6 blocks/SM", K_STAGED, 11, 255, 6},
        {"digits + staged L=10", K_DIGITS, 10, 255, 4},
        {"digits + staged L=11", K_DIGITS, 11, 255, 4},
    };
    std::vector<cudaEvent_t> marks(2 + 2 * windows);
    for (auto& e : marks) CK(cudaEventCreate(&e));
    std::vector<Row> rows;
    bool ok = true;
    double direct_ms = 0;
    for (const Variant& v : variants) {
        Row row;
        row.name = v.name;
        if (v.kind == K_STAGED || v.kind == K_DIGITS) {
            u32 width_max;
            x.stage_cap = stage_cap_for(x, v.log_bins, v.bits, width_max);
            const u32 mean = n >> v.log_bins;
            char g[160];
            snprintf(g, sizeof g, "2^%u bins, stage %u entries (%zu KiB a block)", v.log_bins, x.stage_cap,
                     (4 * ((size_t)width_max + x.stage_cap) + 1023) / 1024);
            row.geometry = g;
            if (x.stage_cap < mean) {
                // every bin of random scalars would take the fallback: production's binned, no staging
                printf("  %s: skipped, a bin's mean (%u entries) is over the staging capacity (%u)\n", v.name.c_str(),
                       mean, x.stage_cap);
                row.check = "skipped: a bin's mean over the staging capacity";
                row.ms = 0;
                rows.push_back(row);
                continue;
            }
        } else if (v.kind == K_BINNED) {
            u32 width_max;
            x.stage_cap = stage_cap_for(x, v.log_bins, v.bits, width_max);
            row.geometry = "2^11 bins, stage " + std::to_string(x.stage_cap) + " entries";
        } else {
            row.geometry = "a window a launch";
        }
        // timing: a warm-up, then reps runs from restored offsets
        std::vector<double> t;
        for (int r = 0; r <= reps; r++) {
            restore(x);
            CK(cudaEventRecord(e0, x.s));
            enqueue(x, v, nullptr);
            CK(cudaEventRecord(e1, x.s));
            CK(cudaStreamSynchronize(x.s));
            if (r) t.push_back(elapsed(e0, e1));
        }
        std::sort(t.begin(), t.end());
        row.ms = t[t.size() / 2];
        // the breakdown: one run with an event between every two phases
        restore(x);
        enqueue(x, v, marks.data());
        CK(cudaStreamSynchronize(x.s));
        row.pre = elapsed(marks[0], marks[1]);
        for (u32 w = 0; w < windows; w++) {
            row.a += elapsed(marks[1 + 2 * w], marks[2 + 2 * w]);
            row.b += elapsed(marks[2 + 2 * w], marks[3 + 2 * w]);
        }
        // the checked run, into poisoned entries
        restore(x);
        CK(cudaMemsetAsync(x.entries, 0xff, x.entries_len * 4, x.s));
        CK(cudaMemsetAsync(x.fallbacks, 0, 4, x.s));
        enqueue(x, v, nullptr);
        CK(cudaStreamSynchronize(x.s));
        if (v.kind == K_STAGED || v.kind == K_DIGITS) {
            u32 fb = 0;
            CK(cudaMemcpy(&fb, x.fallbacks, 4, cudaMemcpyDeviceToHost));
            row.geometry += ", " + std::to_string(fb) + " bins fell back";
        }
        const bool pass = check_variant(x, v.name.c_str(), v.kind == K_DIRECT, offsets_h, scalars_h, expect_full, full_w,
                                        samples, seed, ref, dbad, dexpect, dseen, hs, hx);
        if (v.kind == K_DIRECT) {
            direct_ms = row.ms;
            if (!pass) {
                printf("  the direct variant failed its checks: the reference is wrong, the other variants are not compared\n");
                ok = false;
                rows.push_back(row);
                rows.back().check = "MISMATCH";
                break;
            }
        }
        row.check = pass ? "ok" : "MISMATCH";
        ok = ok && pass;
        rows.push_back(row);
    }
    char head[256];
    snprintf(head, sizeof head, "\n2^%u scalars, %s, c = %u, %u windows (ms: median of %d; set-up / A / B: one run)\n\n",
             log_n, equal ? "equal" : "random", c, windows, reps);
    std::string out = head;
    out += "| variant | ms per MSM | ms per window | ÷ direct | set-up / A / B ms | geometry | check |\n";
    out += "| --- | --- | --- | --- | --- | --- | --- |\n";
    for (const Row& r : rows) {
        char line[512];
        if (r.ms == 0) {  // skipped
            snprintf(line, sizeof line, "| %s | – | – | – | – | %s | %s |\n", r.name.c_str(), r.geometry.c_str(),
                     r.check.c_str());
            out += line;
            continue;
        }
        snprintf(line, sizeof line, "| %s | %.3f | %.3f | %.2f | %.2f / %.2f / %.2f | %s | %s |\n", r.name.c_str(), r.ms,
                 r.ms / windows, direct_ms > 0 ? r.ms / direct_ms : 0.0, r.pre, r.a, r.b, r.geometry.c_str(),
                 r.check.c_str());
        out += line;
    }
    fputs(out.c_str(), stdout);  // the script tees stdout to $OUT/scatter.txt

    for (auto& e : marks) CK(cudaEventDestroy(e));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    void* bufs[] = {x.scalars, x.index, x.counts, x.offsets, x.entries, x.entries_ref, x.digits, x.temp,
                    x.bin_cursor, x.fallbacks, sums, grand_d, dbad, dexpect, dseen, hs, hx, ref.hsum, ref.hxor};
    for (void* p : bufs) CK(cudaFree(p));
    CK(cudaStreamDestroy(x.s));
    return ok;
}

static bool parse_list(const char* s, std::vector<u32>& out) {
    out.clear();
    while (*s) {
        char* end;
        const unsigned long v = strtoul(s, &end, 10);
        if (end == s) return false;
        out.push_back((u32)v);
        s = end;
        if (*s == ',') s++;
        else if (*s) return false;
    }
    return true;
}

int main(int argc, char** argv) {
    std::vector<u32> logs = {24, 25};
    u32 equal_log = 24, samples = 2048;
    u64 seed = 0x5ca7e4;
    int reps = 5, full_window = -1;
    for (int i = 1; i < argc; i++) {
        const char* a = argv[i];
        bool good = true;
        if (!strncmp(a, "--logs=", 7)) good = parse_list(a + 7, logs);
        else if (!strncmp(a, "--equal=", 8)) equal_log = (u32)strtoul(a + 8, nullptr, 10);
        else if (!strncmp(a, "--seed=", 7)) seed = strtoull(a + 7, nullptr, 0);
        else if (!strncmp(a, "--reps=", 7)) reps = std::max(1, atoi(a + 7));
        else if (!strncmp(a, "--full-window=", 14)) full_window = atoi(a + 14);
        else if (!strncmp(a, "--samples=", 10)) samples = (u32)strtoul(a + 10, nullptr, 10);
        else good = false;
        for (u32 l : logs) good = good && l >= 12 && l <= 26;
        good = good && (equal_log == 0 || (equal_log >= 12 && equal_log <= 26));
        if (!good) {
            fprintf(stderr,
                    "usage: scatter [--logs=24,25] [--equal=24 (0: none)] [--seed=S] [--reps=5] [--full-window=W] "
                    "[--samples=2048]\n(sizes 2^12..2^26)\n");
            return 2;
        }
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, %zu KiB shared memory a block at most (opt-in), L2 %d MiB\n", prop.name,
           prop.multiProcessorCount, prop.sharedMemPerBlockOptin / 1024, prop.l2CacheSize >> 20);
    printf("seed %#llx, reps %d, samples %u\n", (unsigned long long)seed, reps, samples);
    const double t0 = now_s();
    bool ok = true;
    for (u32 l : logs) ok = run_config(l, false, seed, reps, full_window, samples) && ok;
    if (equal_log) ok = run_config(equal_log, true, seed + 17, reps, full_window, samples) && ok;
    printf("\nRESULT %s (%d mismatches), %.1f s\n", ok && !g_failures ? "PASS" : "FAIL", g_failures, now_s() - t0);
    return ok && !g_failures ? 0 : 1;
}

#endif  // SCATTER_HARNESS
