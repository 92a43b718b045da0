// Standalone check and benchmark of the MSM kernels (kernels/msm/msm.cu) on one GPU.
//
//   nvcc -arch=sm_90 -O3 -std=c++17 -o msm_harness kernels/harness/msm_harness.cu
//   ./msm_harness [seed] [max_log_g1] [max_log_g2]
//
// The host code below drives the kernels in the same order, with the same geometry and the same
// window/chunk choices, as src/backend/cuda/msm.rs (keep the two in step). Inputs are fresh each
// run (the seed is printed): points k·G + j·G made on the device, scalars uniform below 2^254 in
// Montgomery form, or the 'bits' profile (40% zero, 50% one, 10% random).
// References:
//  * small n: a naive MSM on the device, one double-and-add per point in Jacobian coordinates (no
//    buckets, no XYZZ) and a tree sum; edge cases (0, 1, r−1, identity points, P and −P in one
//    bucket, repeated points, s and −s on one point, n = 1, 2, 3, 7, non-powers of two, all-equal
//    scalars, every window size 2..20);
//  * large n: the previous MSM kernels (msm_old.cuh), also timed as the "old" column.
// Points are compared on the host after normalising (cross-multiplied Jacobian equality).
// Exits 1 on any mismatch.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "../msm/msm.cu"
#include "msm_old.cuh"

#define CK(x)                                                                                            \
    do {                                                                                                 \
        cudaError_t e_ = (x);                                                                            \
        if (e_ != cudaSuccess) {                                                                         \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", #x, __FILE__, __LINE__, cudaGetErrorString(e_)); \
            exit(2);                                                                                     \
        }                                                                                                \
    } while (0)
#define CKL() CK(cudaGetLastError())

static int g_failures = 0;
static unsigned g_chunk_override = 0;  // sweeps only: entries per thread instead of chunk_for

// ---------------- device: inputs and the naive reference ----------------
__device__ __constant__ u32 G1X[12] = {0xfd530c16, 0x5cb38790, 0x9976fff5, 0x7817fc67, 0x143ba1c1, 0x154f95c7, 0xf3d0e747, 0xf0ae6acd, 0x21dbf440, 0xedce6ecc, 0x9e0bfb75, 0x12017741};
__device__ __constant__ u32 G1Y[12] = {0x0ce72271, 0xbaac93d5, 0x7918fd8e, 0x8c22631a, 0x570725ce, 0xdd595f13, 0x50405194, 0x51ac5829, 0xad0059c0, 0x0e1c8c3f, 0x5008a26a, 0x0bbc3efc};
__device__ __constant__ u32 G2X0[12] = {0x02940a10, 0xf5f28fa2, 0x87b4961a, 0xb3f5fb26, 0x3e2ae580, 0xa1a893b5, 0x1a3caee9, 0x9894999d, 0x1863366b, 0x6f67b763, 0x4350bcd7, 0x05819192};
__device__ __constant__ u32 G2X1[12] = {0x9e23f606, 0xa5a9c075, 0xbccd60c3, 0xaaa0c59d, 0xe2867806, 0x3bb17e18, 0x8541b367, 0x1b1ab6cc, 0xf2158547, 0xc2b6ed0e, 0x7360edf3, 0x11922a09};
__device__ __constant__ u32 G2Y0[12] = {0x60494c4a, 0x4c730af8, 0x5e369c5a, 0x597cfa1f, 0xaa0a635a, 0xe7e6856c, 0x6e0d495f, 0xbbefb5e9, 0xf0ef25a2, 0x07d3a975, 0x7e80dae5, 0x0083fd8e};
__device__ __constant__ u32 G2Y1[12] = {0xdf64b05d, 0xadc0fc92, 0x2b1461dc, 0x18aa270a, 0x3be4eba0, 0x86adac6a, 0xc93da33a, 0x79495c4e, 0xa43ccaed, 0xe7175850, 0x63de1bf2, 0x0b2bc2a1};

__device__ fp_t load_fp(const u32* c) { fp_t r; for (int i = 0; i < 12; i++) r.l[i] = c[i]; return r; }
__device__ affine_t<fp_t> generator_of(const fp_t&) { affine_t<fp_t> g; g.x = load_fp(G1X); g.y = load_fp(G1Y); return g; }
__device__ affine_t<fp2_t> generator_of(const fp2_t&) {
    affine_t<fp2_t> g;
    g.x.c0 = load_fp(G2X0); g.x.c1 = load_fp(G2X1); g.y.c0 = load_fp(G2Y0); g.y.c1 = load_fp(G2Y1);
    return g;
}

// a^(p-2)
__device__ fp_t inverse(const fp_t& a) {
    fp_t r = fp_one();
    for (int i = 11; i >= 0; i--) {
        u32 e = FP_MODULUS[i] - (i == 0 ? 2u : 0u);
        for (int b = 31; b >= 0; b--) {
            r = r.sqr();
            if ((e >> b) & 1) r = r * a;
        }
    }
    return r;
}
__device__ fp2_t inverse(const fp2_t& a) {
    fp_t ni = inverse(a.c0.sqr() + a.c1.sqr());
    fp2_t r; r.c0 = a.c0 * ni; r.c1 = -(a.c1 * ni);
    return r;
}

__host__ __device__ inline u64 mix64(u64 x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

#define GEN_BATCH 64
// Thread t: points [t·B, t·B + B) = (k_t + j)·G for a random 64-bit k_t, made in Jacobian and
// brought to affine with one inversion per thread (Montgomery's trick through zs/pre).
template <class F>
__global__ void gen_points(affine_t<F>* out, F* zs, F* pre, u32 n, u64 seed) {
    GRID_STRIDE(t, (n + GEN_BATCH - 1) / GEN_BATCH) {
        const u32 lo = t * GEN_BATCH, hi = min(lo + GEN_BATCH, n);
        const affine_t<F> g = generator_of(F());
        u64 k = mix64(seed ^ mix64(t)) | 1;
        jacobian_t<F> q = jacobian_t<F>::inf();
        for (int b = 63; b >= 0; b--) {
            q = q.dbl();
            if ((k >> b) & 1) q = q.add_affine(g);
        }
        F acc = one_of(F());
        for (u32 i = lo; i < hi; i++) {
            out[i].x = q.x; out[i].y = q.y; zs[i] = q.z;
            acc = acc * q.z;
            pre[i] = acc;
            q = q.add_affine(g);
        }
        F inv = inverse(acc);
        for (u32 i = hi; i-- > lo;) {
            F zinv = i > lo ? inv * pre[i - 1] : inv;
            inv = inv * zs[i];
            F z2 = zinv.sqr();
            out[i].x = out[i].x * z2;
            out[i].y = out[i].y * z2 * zinv;
        }
    }
}

// profile 0: uniform below 2^254 (as Montgomery limbs); 1: 40% zero, 50% one, 10% uniform.
__global__ void gen_scalars(fr_t* out, u32 n, u64 seed, u32 profile) {
    GRID_STRIDE(i, n) {
        u64 h = mix64(seed ^ mix64(0x5ca1a75ull + i));
        fr_t s;
        for (int k = 0; k < 8; k++) s.l[k] = (u32)mix64(h + k);
        s.l[7] &= 0x3fffffffu;
        if (profile == 1) {
            u32 r = (u32)(mix64(h ^ 0xb175ull) % 10);
            if (r <= 3) s = fr_t::zero();
            else if (r <= 8) s = fr_one();
        }
        out[i] = s;
    }
}

// out[i] = s_i·P_i by double-and-add on the canonical scalar (Jacobian); out[i] = ∞ for i >= n.
template <class F>
__global__ void naive_terms(const affine_t<F>* bases, const fr_t* scalars, u32 n, u32 padded, jacobian_t<F>* out) {
    GRID_STRIDE(i, padded) {
        jacobian_t<F> q = jacobian_t<F>::inf();
        if (i < n) {
            fr_t s = scalars[i].from_mont();
            const affine_t<F> p = bases[i];
            for (int b = 255; b >= 0; b--) {
                q = q.dbl();
                if ((s.l[b >> 5] >> (b & 31)) & 1) q = q.add_affine(p);
            }
        }
        out[i] = q;
    }
}

// ---------------- host ----------------
template <class F> struct CurveOf;
template <> struct CurveOf<fp_t> {
    static constexpr const char* name = "G1";
    static constexpr auto buckets = msm_g1_buckets;
    static constexpr auto fixup = msm_g1_bucket_fixup;
    static constexpr auto segments = msm_g1_window_segments;
    static constexpr auto reduce = msm_g1_reduce;
    static constexpr auto sum_points = msm_g1_sum_points;
    static constexpr auto to_jacobian = msm_g1_to_jacobian;
    static constexpr auto old_buckets = old_msm_g1_buckets;
    static constexpr auto old_segments = old_msm_g1_window_segments;
    static constexpr auto old_reduce = old_msm_g1_reduce;
    static constexpr auto old_sum_flagged = old_msm_g1_sum_flagged;
};
template <> struct CurveOf<fp2_t> {
    static constexpr const char* name = "G2";
    static constexpr auto buckets = msm_g2_buckets;
    static constexpr auto fixup = msm_g2_bucket_fixup;
    static constexpr auto segments = msm_g2_window_segments;
    static constexpr auto reduce = msm_g2_reduce;
    static constexpr auto sum_points = msm_g2_sum_points;
    static constexpr auto to_jacobian = msm_g2_to_jacobian;
    static constexpr auto old_buckets = old_msm_g2_buckets;
    static constexpr auto old_segments = old_msm_g2_window_segments;
    static constexpr auto old_reduce = old_msm_g2_reduce;
    static constexpr auto old_sum_flagged = old_msm_g2_sum_flagged;
};

template <class T> T* dalloc(size_t n) { T* p; CK(cudaMallocAsync(&p, std::max<size_t>(n, 1) * sizeof(T), 0)); return p; }
template <class T> void dfree(T* p) { CK(cudaFreeAsync(p, 0)); }
static u32 grid_for(size_t n, u32 threads) { return (u32)std::min<size_t>(std::max<size_t>((n + threads - 1) / threads, 1), 1u << 20); }

// ---- constants and choices, as in src/backend/cuda/msm.rs ----
static const u32 THREADS = 256, CURVE_THREADS = 128, REDUCE_GROUP = 64, SCAN_TILE_H = 1024;
// Points of the 0/1 fast path per thread, and the (power of two) number of threads.
static void ones_split(u32 count, u32* per, u32* threads) {
    *per = std::max<u32>(8, (count + (1u << 16) - 1) >> 16);
    u32 need = (count + *per - 1) / *per, t = 1;
    while (t < need) t <<= 1;
    *threads = t;
}
static u32 chunk_for(size_t entries) { return (u32)std::min<size_t>(std::max<size_t>(entries >> 19, 8), 64); }
static u32 window_bits_for(size_t n) {
    u32 best = 16; unsigned __int128 best_cost = ~(unsigned __int128)0;
    for (u32 c = 4; c <= 20; c++) {
        u64 windows = (256 + c - 1) / c;
        long long top_bits = 255 - (long long)c * (long long)(windows - 1);
        u64 top_load = top_bits <= 0 ? n : (n >> std::min<long long>(top_bits, c - 1));
        u64 chain = top_load / chunk_for(windows * n);
        unsigned __int128 cost = (unsigned __int128)windows * n + (unsigned __int128)3 * windows * (1ull << (c - 1)) +
                                 (unsigned __int128)chain * (3ull << 13);
        if (cost < best_cost) { best_cost = cost; best = c; }
    }
    return best;
}
static u32 log_segments_for(u32 windows, u32 log_buckets) {
    u32 lw = 0;
    while ((1u << lw) < windows) lw++;
    u32 target = lw >= 17 ? 0 : 17 - lw;
    return std::min(target, log_buckets >= 4 ? log_buckets - 4 : 0u);
}
static u32 old_window_bits_for(size_t n) {
    u32 best = 16; unsigned __int128 best_cost = ~(unsigned __int128)0;
    for (u32 c = 4; c <= 20; c++) {
        u64 windows = (256 + c - 1) / c;
        long long top_bits = 255 - (long long)c * (long long)(windows - 1);
        u64 chain = top_bits <= 0 ? n : (n >> std::min<long long>(top_bits, 63));
        unsigned __int128 cost = (unsigned __int128)windows * (n + (1ull << c)) + (unsigned __int128)chain * (1 << 14);
        if (cost < best_cost) { best_cost = cost; best = c; }
    }
    return best;
}

// Exclusive scan in place of counts[0..m) (three launches, as msm.rs).
static void scan(u32* counts, u32 m, bool old, u32* grand_total = nullptr) {
    u32 tiles = (m + SCAN_TILE_H - 1) / SCAN_TILE_H;
    u32* sums = dalloc<u32>(tiles);
    if (old) {
        old_msm_scan_tiles<<<tiles, 256>>>(counts, m, sums); CKL();
        old_msm_scan_totals<<<1, 256>>>(sums, tiles); CKL();
        old_msm_scan_add<<<grid_for(m, THREADS), THREADS>>>(counts, m, sums); CKL();
    } else {
        msm_scan_tiles<<<tiles, 256>>>(counts, m, sums); CKL();
        msm_scan_totals<<<1, 256>>>(sums, tiles, grand_total); CKL();
        msm_scan_add<<<grid_for(m, THREADS), THREADS>>>(counts, m, sums); CKL();
    }
    dfree(sums);
}

template <class F>
static jacobian_t<F> host_sum(const std::vector<jacobian_t<F>>& v) {
    jacobian_t<F> acc = jacobian_t<F>::inf();
    for (auto& p : v) acc = acc.add(p);
    return acc;
}
// Σ_w 2^(c·w) S_w, highest window first.
template <class F>
static jacobian_t<F> horner(const std::vector<jacobian_t<F>>& sums, u32 c) {
    jacobian_t<F> acc = jacobian_t<F>::inf();
    for (size_t w = sums.size(); w-- > 0;) {
        for (u32 i = 0; i < c; i++) acc = acc.dbl();
        acc = acc.add(sums[w]);
    }
    return acc;
}

struct Phases { std::vector<std::pair<const char*, cudaEvent_t>> marks; bool on = false;
    void mark(const char* n) { if (!on) return; cudaEvent_t e; CK(cudaEventCreate(&e)); CK(cudaEventRecord(e, 0)); marks.push_back({n, e}); }
    std::string report() { std::string s; for (size_t i = 1; i < marks.size(); i++) { float ms; CK(cudaEventElapsedTime(&ms, marks[i-1].second, marks[i].second)); char b[64]; snprintf(b, 64, "%s %.2f, ", marks[i].first, ms); s += b; } for (auto& m : marks) cudaEventDestroy(m.second); marks.clear(); return s; }
};

// XYZZ points reduced in groups of REDUCE_GROUP until one per group is left, then to Jacobian.
template <class F>
static std::vector<jacobian_t<F>> reduce_to_host(xyzz_t<F>* pts, size_t groups, size_t per_group) {
    using C = CurveOf<F>;
    while (per_group > 1) {
        size_t g = std::min<size_t>(per_group, REDUCE_GROUP);
        size_t blocks = groups * per_group / g;
        xyzz_t<F>* out = dalloc<xyzz_t<F>>(blocks);
        C::reduce<<<(u32)blocks, (u32)g>>>(pts, out); CKL();
        dfree(pts);
        pts = out;
        per_group /= g;
    }
    jacobian_t<F>* jac = dalloc<jacobian_t<F>>(groups);
    C::to_jacobian<<<grid_for(groups, CURVE_THREADS), CURVE_THREADS>>>(pts, (u32)groups, jac); CKL();
    std::vector<jacobian_t<F>> h(groups);
    CK(cudaMemcpy(h.data(), jac, groups * sizeof(jacobian_t<F>), cudaMemcpyDeviceToHost));
    dfree(jac);
    dfree(pts);
    return h;
}

// The new MSM, launch for launch as msm.rs.
template <class F>
static jacobian_t<F> msm_new(const affine_t<F>* bases, const fr_t* scalars, u32 len, u32 c_opt, bool fast, Phases* ph = nullptr) {
    using C = CurveOf<F>;
    Phases dummy; Phases& P = ph ? *ph : dummy;
    P.mark("start");
    fr_t* canon = dalloc<fr_t>(len);
    u32* ones_list = dalloc<u32>(len);
    u32* counts_d = dalloc<u32>(2);
    CK(cudaMemsetAsync(counts_d, 0, 8, 0));
    msm_prepare_scalars<<<grid_for(len, THREADS), THREADS>>>(scalars, canon, ones_list, len, fast ? 1 : 0, counts_d); CKL();
    u32 counts_h[2];
    CK(cudaMemcpy(counts_h, counts_d, 8, cudaMemcpyDeviceToHost));
    u32 rest = counts_h[0], ones = counts_h[1];
    P.mark("prepare");
    jacobian_t<F> total = jacobian_t<F>::inf();
    if (ones > 0) {
        u32 per, threads;
        ones_split(ones, &per, &threads);
        xyzz_t<F>* partials = dalloc<xyzz_t<F>>(threads);
        C::sum_points<<<grid_for(threads, CURVE_THREADS), CURVE_THREADS>>>(bases, ones_list, ones, per, threads, partials); CKL();
        total = reduce_to_host<F>(partials, 1, threads)[0];
        P.mark("ones");
    }
    if (rest > 0) {
        u32 c = c_opt ? c_opt : window_bits_for(rest);
        c = std::min(std::max(c, 2u), 20u);
        u32 windows = (256 + c - 1) / c;
        size_t buckets_per_window = (size_t)1 << (c - 1), nb = windows * buckets_per_window;
        u32* counts = dalloc<u32>(nb);
        CK(cudaMemsetAsync(counts, 0, nb * 4, 0));
        msm_digit_histogram<<<grid_for(len, THREADS), THREADS>>>(canon, len, c, windows, counts); CKL();
        u32* grand = dalloc<u32>(1);
        scan(counts, (u32)nb, false, grand);
        size_t max_entries = (size_t)rest * windows;
        u32* entries = dalloc<u32>(max_entries);
        msm_scatter<<<grid_for(len, THREADS), THREADS>>>(canon, len, c, windows, 0u, windows, counts, entries); CKL();
        u32 total_entries;
        CK(cudaMemcpy(&total_entries, grand, 4, cudaMemcpyDeviceToHost));
        dfree(grand);
        P.mark("sort");
        u32 chunk = g_chunk_override ? g_chunk_override : chunk_for(total_entries), chunks = (total_entries + chunk - 1) / chunk;
        xyzz_t<F>* buckets = dalloc<xyzz_t<F>>(nb);
        CK(cudaMemsetAsync(buckets, 0, nb * sizeof(xyzz_t<F>), 0));
        xyzz_t<F>* spills = dalloc<xyzz_t<F>>(chunks);
        if (total_entries) {
            C::buckets<<<grid_for(chunks, CURVE_THREADS), CURVE_THREADS>>>(bases, entries, counts, (u32)nb, total_entries, chunk, buckets, spills); CKL();
            P.mark("buckets");
            C::fixup<<<grid_for(nb, CURVE_THREADS), CURVE_THREADS>>>(counts, (u32)nb, chunk, 0u, buckets, buckets, spills); CKL();
            P.mark("fixup");
        }
        u32 log_buckets = c - 1, log_segs = log_segments_for(windows, log_buckets);
        size_t segs = (size_t)1 << log_segs;
        xyzz_t<F>* partials = dalloc<xyzz_t<F>>(windows * segs);
        C::segments<<<grid_for(windows * segs, CURVE_THREADS), CURVE_THREADS>>>(buckets, log_buckets, log_segs, windows, partials); CKL();
        P.mark("segments");
        auto sums = reduce_to_host<F>(partials, windows, segs);
        P.mark("reduce");
        dfree(counts); dfree(entries); dfree(buckets); dfree(spills);
        total = total.add(horner(sums, c));
    }
    dfree(canon); dfree(ones_list); dfree(counts_d);
    return total;
}

// The old MSM, launch for launch as msm.rs at main 716f247.
template <class F>
static std::vector<jacobian_t<F>> old_reduce_to_host(jacobian_t<F>* pts, size_t groups, size_t per_group) {
    using C = CurveOf<F>;
    while (per_group > 1) {
        size_t g = std::min<size_t>(per_group, 128);
        size_t blocks = groups * per_group / g;
        jacobian_t<F>* out = dalloc<jacobian_t<F>>(blocks);
        C::old_reduce<<<(u32)blocks, (u32)g>>>(pts, out); CKL();
        dfree(pts);
        pts = out;
        per_group /= g;
    }
    std::vector<jacobian_t<F>> h(groups);
    CK(cudaMemcpy(h.data(), pts, groups * sizeof(jacobian_t<F>), cudaMemcpyDeviceToHost));
    dfree(pts);
    return h;
}
template <class F>
static jacobian_t<F> msm_old(const affine_t<F>* bases, const fr_t* scalars, u32 len, bool fast) {
    using C = CurveOf<F>;
    fr_t* canon = dalloc<fr_t>(len);
    u32* is_one = dalloc<u32>(len);
    u32* rest_d = dalloc<u32>(1);
    CK(cudaMemsetAsync(rest_d, 0, 4, 0));
    old_msm_prepare_scalars<<<grid_for(len, THREADS), THREADS>>>(scalars, canon, is_one, len, fast ? 1 : 0, rest_d); CKL();
    u32 rest;
    CK(cudaMemcpy(&rest, rest_d, 4, cudaMemcpyDeviceToHost));
    jacobian_t<F> total = jacobian_t<F>::inf();
    if (fast) {
        size_t blocks = 1;
        while (blocks < (len + 127) / 128 && blocks < 1024) blocks <<= 1;
        jacobian_t<F>* partials = dalloc<jacobian_t<F>>(blocks);
        C::old_sum_flagged<<<(u32)blocks, 128>>>(bases, is_one, len, partials); CKL();
        total = old_reduce_to_host<F>(partials, 1, blocks)[0];
    }
    if (rest > 0) {
        u32 c = old_window_bits_for(rest);
        u32 windows = (256 + c - 1) / c;
        size_t nb = windows * ((size_t)1 << (c - 1));
        u32* counts = dalloc<u32>(nb);
        CK(cudaMemsetAsync(counts, 0, nb * 4, 0));
        old_msm_digit_histogram<<<grid_for(len, THREADS), THREADS>>>(canon, len, c, windows, counts); CKL();
        scan(counts, (u32)nb, true);
        u32* ends = dalloc<u32>(nb);
        CK(cudaMemcpyAsync(ends, counts, nb * 4, cudaMemcpyDeviceToDevice, 0));
        u32* entries = dalloc<u32>((size_t)len * windows);
        old_msm_scatter<<<grid_for(len, THREADS), THREADS>>>(canon, len, c, windows, ends, entries); CKL();
        jacobian_t<F>* buckets = dalloc<jacobian_t<F>>(nb);
        C::old_buckets<<<grid_for(nb, 128), 128>>>(bases, entries, counts, ends, (u32)nb, buckets); CKL();
        u32 log_buckets = c - 1, log_segs = log_buckets - std::min(4u, log_buckets);
        size_t segs = (size_t)1 << log_segs;
        jacobian_t<F>* partials = dalloc<jacobian_t<F>>(windows * segs);
        C::old_segments<<<grid_for(windows * segs, 128), 128>>>(buckets, log_buckets, log_segs, windows, partials); CKL();
        auto sums = old_reduce_to_host<F>(partials, windows, segs);
        dfree(counts); dfree(ends); dfree(entries); dfree(buckets);
        total = total.add(horner(sums, c));
    }
    dfree(canon); dfree(is_one); dfree(rest_d);
    return total;
}

template <class F>
static jacobian_t<F> msm_naive(const affine_t<F>* bases, const fr_t* scalars, u32 n) {
    size_t padded = 1;
    while (padded < n) padded <<= 1;
    jacobian_t<F>* terms = dalloc<jacobian_t<F>>(padded);
    naive_terms<F><<<grid_for(padded, 128), 128>>>(bases, scalars, n, (u32)padded, terms); CKL();
    return old_reduce_to_host<F>(terms, 1, padded)[0];
}

template <class F>
static bool same_point(const jacobian_t<F>& a, const jacobian_t<F>& b) {
    if (a.is_inf() || b.is_inf()) return a.is_inf() && b.is_inf();
    F za2 = a.z.sqr(), zb2 = b.z.sqr();
    if (a.x * zb2 != b.x * za2) return false;
    return a.y * zb2 * b.z == b.y * za2 * a.z;
}

static void report(bool ok, const std::string& what) {
    printf("%s %s\n", ok ? "PASS" : "FAIL", what.c_str());
    fflush(stdout);
    if (!ok) g_failures++;
}

template <class F>
struct Inputs {
    affine_t<F>* bases = nullptr;
    fr_t* scalars = nullptr;
    u32 n = 0;
    void make(u32 n_, u64 seed, u32 profile) {
        n = n_;
        CK(cudaMalloc(&bases, (size_t)n * sizeof(affine_t<F>)));
        CK(cudaMalloc(&scalars, (size_t)n * sizeof(fr_t)));
        F *zs, *pre;
        CK(cudaMalloc(&zs, (size_t)n * sizeof(F)));
        CK(cudaMalloc(&pre, (size_t)n * sizeof(F)));
        gen_points<F><<<grid_for((n + GEN_BATCH - 1) / GEN_BATCH, 128), 128>>>(bases, zs, pre, n, seed); CKL();
        gen_scalars<<<grid_for(n, 256), 256>>>(scalars, n, seed * 31 + 7, profile); CKL();
        CK(cudaDeviceSynchronize());
        CK(cudaFree(zs)); CK(cudaFree(pre));
    }
    void rescalar(u64 seed, u32 profile) { gen_scalars<<<grid_for(n, 256), 256>>>(scalars, n, seed, profile); CKL(); }
    void free_all() { CK(cudaFree(bases)); CK(cudaFree(scalars)); }
};

// Edge cases on a host copy: 0, 1, r−1, identity points, P/−P with equal scalars, repeats, s/−s.
template <class F>
static void apply_edges(Inputs<F>& in) {
    std::vector<affine_t<F>> b(in.n);
    std::vector<fr_t> s(in.n);
    CK(cudaMemcpy(b.data(), in.bases, in.n * sizeof(affine_t<F>), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(s.data(), in.scalars, in.n * sizeof(fr_t), cudaMemcpyDeviceToHost));
    for (u32 i = 0; i < in.n; i++) {
        switch (i % 12) {
            case 0: s[i] = fr_t::zero(); break;
            case 1: s[i] = fr_one(); break;
            case 2: s[i] = -fr_one(); break;
            case 3: b[i].x = F::zero(); b[i].y = F::zero(); break;
            case 5: if (i >= 1) { b[i] = b[i - 1].neg(); s[i] = s[i - 1]; } break;      // P, −P: one bucket
            case 7: if (i >= 1) { b[i] = b[i - 1]; s[i] = s[i - 1]; } break;            // P, P: a doubling
            case 9: if (i >= 1) { b[i] = b[i - 1]; s[i] = -s[i - 1]; } break;           // s·P − s·P
            case 10: s[i] = fr_one(); b[i] = b[i - 9]; break;                           // 1 on a repeated point
            default: break;
        }
    }
    CK(cudaMemcpy(in.bases, b.data(), in.n * sizeof(affine_t<F>), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(in.scalars, s.data(), in.n * sizeof(fr_t), cudaMemcpyHostToDevice));
}

template <class F>
static void check_small(u64 seed) {
    const char* G = CurveOf<F>::name;
    Inputs<F> in;
    in.make(1 << 16, seed, 0);
    char buf[160];
    for (u32 n : {1u, 2u, 3u, 7u, 100u, 1000u, 4099u, 1u << 16}) {
        jacobian_t<F> want = msm_naive<F>(in.bases, in.scalars, n);
        for (bool fast : {false, true}) {
            bool ok = same_point(msm_new<F>(in.bases, in.scalars, n, 0, fast), want);
            snprintf(buf, sizeof buf, "%s random n=%u fast=%d vs naive", G, n, fast);
            report(ok, buf);
        }
    }
    {   // every window size on one input
        u32 n = 3000;
        jacobian_t<F> want = msm_naive<F>(in.bases, in.scalars, n);
        bool all = true;
        for (u32 c = 2; c <= 20; c++) {
            bool ok = same_point(msm_new<F>(in.bases, in.scalars, n, c, false), want);
            if (!ok) { snprintf(buf, sizeof buf, "%s window c=%u n=%u", G, c, n); report(false, buf); }
            all = all && ok;
        }
        snprintf(buf, sizeof buf, "%s windows c=2..20 n=3000 vs naive", G);
        report(all, buf);
        // a wrong scalar must be noticed
        fr_t one = fr_one(), s17;
        CK(cudaMemcpy(&s17, in.scalars + 17, sizeof s17, cudaMemcpyDeviceToHost));
        fr_t bumped = s17 + one;
        CK(cudaMemcpy(in.scalars + 17, &bumped, sizeof s17, cudaMemcpyHostToDevice));
        report(!same_point(msm_new<F>(in.bases, in.scalars, n, 0, false), want), std::string(G) + " negative twin differs");
        CK(cudaMemcpy(in.scalars + 17, &s17, sizeof s17, cudaMemcpyHostToDevice));
    }
    {   // all-equal scalars: every point in the same buckets
        u32 n = 777;
        fr_t s7;
        CK(cudaMemcpy(&s7, in.scalars + 7, sizeof s7, cudaMemcpyDeviceToHost));
        std::vector<fr_t> same(n, s7);
        fr_t* d = dalloc<fr_t>(n);
        CK(cudaMemcpy(d, same.data(), n * sizeof(fr_t), cudaMemcpyHostToDevice));
        report(same_point(msm_new<F>(in.bases, d, n, 0, false), msm_naive<F>(in.bases, d, n)), std::string(G) + " equal scalars n=777");
        std::vector<fr_t> zeros(n, fr_t::zero()), ones(n, fr_one());
        CK(cudaMemcpy(d, zeros.data(), n * sizeof(fr_t), cudaMemcpyHostToDevice));
        report(msm_new<F>(in.bases, d, n, 0, false).is_inf() && msm_new<F>(in.bases, d, n, 0, true).is_inf(), std::string(G) + " all zeros is the identity");
        CK(cudaMemcpy(d, ones.data(), n * sizeof(fr_t), cudaMemcpyHostToDevice));
        jacobian_t<F> want = msm_naive<F>(in.bases, d, n);
        report(same_point(msm_new<F>(in.bases, d, n, 0, true), want) && same_point(msm_new<F>(in.bases, d, n, 0, false), want),
               std::string(G) + " all ones (fast path on/off)");
        dfree(d);
    }
    apply_edges(in);
    for (u32 n : {5000u, 1u << 16}) {
        jacobian_t<F> want = msm_naive<F>(in.bases, in.scalars, n);
        for (bool fast : {false, true}) {
            snprintf(buf, sizeof buf, "%s edge cases n=%u fast=%d vs naive", G, n, fast);
            report(same_point(msm_new<F>(in.bases, in.scalars, n, 0, fast), want), buf);
        }
        snprintf(buf, sizeof buf, "%s edge cases n=%u c=20 (sparse buckets) vs naive", G, n);
        report(same_point(msm_new<F>(in.bases, in.scalars, n, 20, false), want), buf);
    }
    in.rescalar(seed ^ 0xb175, 1);
    for (u32 n : {10u, 1000u, 1u << 16}) {
        jacobian_t<F> want = msm_naive<F>(in.bases, in.scalars, n);
        for (bool fast : {false, true}) {
            snprintf(buf, sizeof buf, "%s bits profile n=%u fast=%d vs naive", G, n, fast);
            report(same_point(msm_new<F>(in.bases, in.scalars, n, 0, fast), want), buf);
        }
    }
    in.free_all();
}

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

template <class F>
static float time_ms(int reps, const std::function<void()>& f) {
    std::vector<float> t;
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a, 0));
        f();
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    cudaEventDestroy(a); cudaEventDestroy(b);
    return median(t);
}

struct Row { std::string curve; u32 log_n; const char* profile; float ms_new, ms_old; u32 c; std::string phases; };
static std::vector<Row> g_rows;

template <class F>
static void bench(u64 seed, u32 min_log, u32 max_log, u32 old_max_log) {
    const char* G = CurveOf<F>::name;
    Inputs<F> in;
    in.make(1u << max_log, seed ^ 0xbe4c, 0);
    for (u32 lg = min_log; lg <= max_log; lg += 2) {
        u32 n = 1u << lg;
        for (u32 profile : {0u, 1u}) {
            in.rescalar(seed ^ (lg * 1000 + profile), profile);
            bool fast = profile == 1;
            jacobian_t<F> got = msm_new<F>(in.bases, in.scalars, n, 0, fast);  // warm-up and result
            float ms_old = -1;
            if (lg <= old_max_log) {
                jacobian_t<F> ref = msm_old<F>(in.bases, in.scalars, n, fast);
                char buf[128];
                snprintf(buf, sizeof buf, "%s 2^%u %s new vs old kernels", G, lg, profile ? "bits" : "random");
                report(same_point(got, ref), buf);
                ms_old = time_ms<F>(3, [&] { msm_old<F>(in.bases, in.scalars, n, fast); });
            }
            float ms_new = time_ms<F>(5, [&] { msm_new<F>(in.bases, in.scalars, n, 0, fast); });
            Phases ph; ph.on = true;
            msm_new<F>(in.bases, in.scalars, n, 0, fast, &ph);
            CK(cudaDeviceSynchronize());
            std::string phases = ph.report();
            u32 c = window_bits_for(profile ? n / 10 : n);
            g_rows.push_back({G, lg, profile ? "bits" : "random", ms_new, ms_old, c, phases});
            printf("%s 2^%u %s: new %.2f ms, old %.2f ms (c~%u) phases: %s\n", G, lg, profile ? "bits" : "random", ms_new, ms_old, c, phases.c_str());
            fflush(stdout);
        }
    }
    in.free_all();
}

// Window size × chunk size at one n (random scalars), each checked against the automatic choice.
template <class F>
static void sweep(u64 seed, u32 lg, std::vector<u32> cs, std::vector<u32> chunks) {
    const char* G = CurveOf<F>::name;
    Inputs<F> in;
    in.make(1u << lg, seed ^ 0x5eef, 0);
    u32 n = 1u << lg;
    jacobian_t<F> ref = msm_new<F>(in.bases, in.scalars, n, 0, false);
    for (u32 c : cs) {
        for (u32 ch : chunks) {
            g_chunk_override = ch;
            jacobian_t<F> got = msm_new<F>(in.bases, in.scalars, n, c, false);
            float ms = time_ms<F>(3, [&] { msm_new<F>(in.bases, in.scalars, n, c, false); });
            Phases ph; ph.on = true;
            msm_new<F>(in.bases, in.scalars, n, c, false, &ph);
            CK(cudaDeviceSynchronize());
            std::string phases = ph.report();
            g_chunk_override = 0;
            char buf[160];
            snprintf(buf, sizeof buf, "%s sweep 2^%u c=%u chunk=%u agrees", G, lg, c, ch);
            report(same_point(got, ref), buf);
            printf("SWEEP %s 2^%u c=%u chunk=%u: %.2f ms  %s\n", G, lg, c, ch, ms, phases.c_str());
            fflush(stdout);
        }
    }
    in.free_all();
}

int main(int argc, char** argv) {
    u64 seed = argc > 1 ? strtoull(argv[1], 0, 0) : (u64)std::chrono::high_resolution_clock::now().time_since_epoch().count();
    u32 max_g1 = argc > 2 ? atoi(argv[2]) : 26, max_g2 = argc > 3 ? atoi(argv[3]) : 24;
    printf("seed %llu\n", (unsigned long long)seed);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs\n", prop.name, prop.multiProcessorCount);
    cudaMemPool_t pool;
    CK(cudaDeviceGetDefaultMemPool(&pool, 0));
    u64 threshold = ~0ull;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold));
    fflush(stdout);

    check_small<fp_t>(seed);
    check_small<fp2_t>(seed ^ 0x2222);
    printf("small checks done: %d failures\n", g_failures);
    fflush(stdout);
    bench<fp_t>(seed, 16, max_g1, 26);
    bench<fp2_t>(seed, 16, max_g2, 24);
    if (argc > 4 && atoi(argv[4])) {
        sweep<fp_t>(seed, 24, {16, 20}, {32, 64, 128});
        sweep<fp_t>(seed, 20, {13, 16}, {16, 32});
        sweep<fp2_t>(seed, 22, {16, 20}, {64});
    }

    printf("\n| curve | n | profile | new ms | old ms | speedup | c | phases (new, ms) |\n|---|---|---|---|---|---|---|---|\n");
    for (auto& r : g_rows)
        printf("| %s | 2^%u | %s | %.2f | %.2f | %.2fx | %u | %s |\n", r.curve.c_str(), r.log_n, r.profile, r.ms_new, r.ms_old,
               r.ms_old > 0 ? r.ms_old / r.ms_new : 0.0, r.c, r.phases.c_str());
    printf("\n%s: %d failures\n", g_failures ? "FAILED" : "ALL PASSED", g_failures);
    return g_failures ? 1 : 0;
}
