// Pippenger multi-scalar multiplication for G1 and G2 of BLS12-381.
//
//  1. msm_prepare_scalars: Montgomery -> canonical integers; with the 0/1 fast path on,
//     a scalar equal to 1 is flagged (its point goes to a plain batch sum) and zeroed.
//  2. msm_digit_histogram: signed c-bit digits (d in [-2^(c-1), 2^(c-1)]); counts per
//     (window, |d|) bucket. Zero digits are skipped.
//  3. msm_scan_*: exclusive prefix sum of the counts -> bucket offsets.
//  4. msm_scatter: point indices (sign in bit 31) grouped by bucket (a counting sort).
//  5. msm_gX_buckets: one thread per bucket adds its points (mixed additions).
//  6. msm_gX_window_segments + msm_gX_reduce: per window, Σ b·bucket_b with running sums over
//     segments, then tree reductions; the window sums (and the 0/1 batch sum) go to the host,
//     which combines them (ΣW 2^(c·w) S_w) with blstrs.
// Launch geometry and the choice of c are in src/backend/cuda/msm.rs.
#include "../ec/jacobian.cuh"

#define GRID_STRIDE(i, n) for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)

extern "C" __global__ void msm_prepare_scalars(const fr_t* in, fr_t* out, u32* is_one, u32 n, u32 skip_ones,
                                               u32* rest_count) {
    GRID_STRIDE(i, n) {
        fr_t s = in[i].from_mont();
        bool one = false;
        if (skip_ones) {
            u32 acc = s.l[0] ^ 1;
            for (int k = 1; k < 8; k++) acc |= s.l[k];
            one = acc == 0;
        }
        is_one[i] = one ? 1 : 0;
        if (one) s = fr_t::zero();
        if (!s.is_zero()) atomicAdd(rest_count, 1u);
        out[i] = s;
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

// Calls f(window, bucket (0-based), negative) for every nonzero signed digit of s.
template <class Fn>
__device__ __forceinline__ void for_each_digit(const fr_t& s, u32 c, u32 windows, Fn f) {
    if (s.is_zero()) return;
    const u32 half = 1u << (c - 1);
    u32 carry = 0;
    for (u32 w = 0; w < windows; w++) {
        u32 d = scalar_bits(s, w * c, c) + carry;
        bool neg = false;
        if (d > half) { d = (1u << c) - d; neg = true; carry = 1; } else { carry = 0; }
        if (d) f(w, d - 1, neg);
    }
}

extern "C" __global__ void msm_digit_histogram(const fr_t* scalars, u32 n, u32 c, u32 windows, u32* counts) {
    const u32 buckets = 1u << (c - 1);
    GRID_STRIDE(i, n) {
        fr_t s = scalars[i];
        for_each_digit(s, c, windows, [&](u32 w, u32 b, bool) { atomicAdd(&counts[w * buckets + b], 1u); });
    }
}

extern "C" __global__ void msm_scatter(const fr_t* scalars, u32 n, u32 c, u32 windows, u32* cursor, u32* entries) {
    const u32 buckets = 1u << (c - 1);
    GRID_STRIDE(i, n) {
        fr_t s = scalars[i];
        for_each_digit(s, c, windows, [&](u32 w, u32 b, bool neg) {
            u32 pos = atomicAdd(&cursor[w * buckets + b], 1u);
            entries[pos] = i | (neg ? 0x80000000u : 0u);
        });
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

// One block of SCAN_THREADS: exclusive scan of nb block totals, each thread a contiguous run.
extern "C" __global__ void msm_scan_totals(u32* sums, u32 nb) {
    __shared__ u32 vals[SCAN_THREADS];
    u32 per = (nb + SCAN_THREADS - 1) / SCAN_THREADS;
    u32 lo = threadIdx.x * per, hi = min(lo + per, nb);
    u32 sum = 0;
    for (u32 k = lo; k < hi; k++) sum += sums[k];
    vals[threadIdx.x] = sum;
    block_exclusive_scan(vals);
    u32 run = vals[threadIdx.x];
    for (u32 k = lo; k < hi; k++) { u32 t = sums[k]; sums[k] = run; run += t; }
}

extern "C" __global__ void msm_scan_add(u32* data, u32 m, const u32* block_sums) {
    GRID_STRIDE(i, m) data[i] += block_sums[i / SCAN_TILE];
}

// ---- per-curve kernels ----
template <class F>
__device__ __forceinline__ void bucket_sum(const affine_t<F>* bases, const u32* entries, const u32* starts,
                                           const u32* ends, u32 total, jacobian_t<F>* out) {
    GRID_STRIDE(k, total) {
        jacobian_t<F> acc = jacobian_t<F>::inf();
        for (u32 e = starts[k]; e < ends[k]; e++) {
            u32 ent = entries[e];
            affine_t<F> p = bases[ent & 0x7fffffffu];
            if (ent >> 31) p = p.neg();
            acc = acc.add_affine(p);
        }
        out[k] = acc;
    }
}

// Thread (w, j) of windows × segs: Σ (b+1)·bucket[w][b] over b in [j·L, (j+1)·L), L = buckets / segs.
template <class F>
__device__ __forceinline__ void window_segments(const jacobian_t<F>* buckets, u32 log_buckets, u32 log_segs,
                                                u32 windows, jacobian_t<F>* partials) {
    const u32 segs = 1u << log_segs, log_len = log_buckets - log_segs, len = 1u << log_len;
    GRID_STRIDE(t, windows * segs) {
        u32 w = t >> log_segs, j = t & (segs - 1);
        const jacobian_t<F>* b = buckets + ((size_t)w << log_buckets) + ((size_t)j << log_len);
        jacobian_t<F> acc = jacobian_t<F>::inf(), sum = jacobian_t<F>::inf();
        for (int i = (int)len - 1; i >= 0; i--) {
            acc = acc.add(b[i]);
            sum = sum.add(acc);
        }
        // sum = Σ (i+1)·b[i]; add the segment's offset j·L times the plain sum acc.
        u32 off = j << log_len;
        if (off && !acc.is_inf()) {
            jacobian_t<F> m = jacobian_t<F>::inf();
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
__device__ __forceinline__ void reduce_groups(const jacobian_t<F>* in, jacobian_t<F>* out, jacobian_t<F>* tile) {
    tile[threadIdx.x] = in[(size_t)blockIdx.x * blockDim.x + threadIdx.x];
    __syncthreads();
    for (u32 half = blockDim.x >> 1; half; half >>= 1) {
        if (threadIdx.x < half) tile[threadIdx.x] = tile[threadIdx.x].add(tile[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

// Each block sums the points whose flag is set, over a grid-strided share; one partial per thread
// is folded by reduce_groups into out[blockIdx.x].
template <class F>
__device__ __forceinline__ void sum_flagged(const affine_t<F>* bases, const u32* flags, u32 n, jacobian_t<F>* out,
                                            jacobian_t<F>* tile) {
    jacobian_t<F> acc = jacobian_t<F>::inf();
    GRID_STRIDE(i, n) if (flags[i]) acc = acc.add_affine(bases[i]);
    tile[threadIdx.x] = acc;
    __syncthreads();
    for (u32 half = blockDim.x >> 1; half; half >>= 1) {
        if (threadIdx.x < half) tile[threadIdx.x] = tile[threadIdx.x].add(tile[threadIdx.x + half]);
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = tile[0];
}

#define REDUCE_THREADS 128

#define MSM_CURVE(G, F)                                                                                          \
    extern "C" __global__ void msm_##G##_buckets(const affine_t<F>* bases, const u32* entries, const u32* starts, \
                                                 const u32* ends, u32 total, jacobian_t<F>* out) {                \
        bucket_sum<F>(bases, entries, starts, ends, total, out);                                                  \
    }                                                                                                             \
    extern "C" __global__ void msm_##G##_window_segments(const jacobian_t<F>* buckets, u32 log_buckets,           \
                                                         u32 log_segs, u32 windows, jacobian_t<F>* partials) {    \
        window_segments<F>(buckets, log_buckets, log_segs, windows, partials);                                    \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)                                                  \
        msm_##G##_reduce(const jacobian_t<F>* in, jacobian_t<F>* out) {                                           \
        __shared__ jacobian_t<F> tile[REDUCE_THREADS];                                                            \
        reduce_groups<F>(in, out, tile);                                                                          \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(REDUCE_THREADS)                                                  \
        msm_##G##_sum_flagged(const affine_t<F>* bases, const u32* flags, u32 n, jacobian_t<F>* out) {            \
        __shared__ jacobian_t<F> tile[REDUCE_THREADS];                                                            \
        sum_flagged<F>(bases, flags, n, out, tile);                                                               \
    }

MSM_CURVE(g1, fp_t)
MSM_CURVE(g2, fp2_t)
