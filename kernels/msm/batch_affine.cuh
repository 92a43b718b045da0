// Batch-affine bucket accumulation: the bucket phase of msm.cu (step 5) with affine additions
// whose divisions share one inversion per round (Montgomery's trick), for the MSMs where it
// beats the XYZZ loop of buckets.cuh (src/backend/cuda/msm.rs, `bucket_method_for`, says which).
//
// The sorted entries of a pass are taken in *slices* of at most `slice_entries` consecutive
// entries, so that the scratch is bounded by a slice, whatever the bucket sizes. Within a slice
// every bucket is clipped to the slice. A *round* halves every clipped bucket: its points P0,
// P1, P2, ... become P0+P1, P2+P3, ... (an odd last one is carried over), written compacted, in
// bucket order, to a new array whose bucket ends are the inclusive scan of ceil(m/2). All the
// additions of a round are independent, so they share one inversion:
//   1. forward (msm_gX_affine_fwd_*): thread t takes K consecutive outputs, forms each
//      division's denominator (x2 − x1, or 2y for a doubling) and stores their running products
//      at prefix[k·T + t] (coalesced); its whole product goes to prod[t];
//   2. prod is inverted in place by the same trick as a tree (msm_gX_affine_tree_*: groups of
//      `g` values a thread up, one inversion of the last ≤ g values on one thread, back down);
//   3. backward (msm_gX_affine_bwd_*): thread t walks its outputs backwards, peeling each
//      division's inverse off its product with the stored prefixes, and writes the sums.
// An addition then costs 5M + 1S of the curve's field (madd-2008-s: 8M + 2S), plus about 3/K
// multiplications for the tree, plus a fixed latency a round (the tree's levels and the one
// inversion). Rounds continue until no clipped bucket holds more than a few points; then
// msm_gX_affine_finish_* sums each bucket's remaining points in XYZZ, one thread a bucket.
//
// The finish writes a bucket whose first entry lies in the slice to pass[b] and the partial sum
// of a bucket begun in an earlier slice (only the slice's first bucket can be one) to
// spills[slice]: the layout msm_gX_bucket_fixup expects from chunks of `slice_entries` entries,
// so the production fix-up completes the buckets that cross slices, and accumulates a later
// pass, unchanged.
//
// Special cases are decided from the inputs, the same way in the forward and backward passes:
// no partner (the odd one out) → copied; P1 or P2 the identity, stored as (0, 0) (x = 0 is not
// the abscissa of a point of either group: (0, y) would have order 3, and r is prime) → the
// other; x1 ≠ x2 → addition; x1 = x2 and y1 = y2 ≠ 0 → doubling, λ = 3x²/2y, whose denominator
// joins the batch; otherwise P1 = −P2 → the identity. Only additions and doublings divide.
//
// lab/harness/batch_affine_harness.cu is the measured prototype these kernels come from
// (its "grid" mode with the hybrid finish); it also checks the operation counts on the host.
#pragma once
#include "buckets.cuh"

// 16-byte loads and stores of field elements. Invariant: every array they touch starts
// 16-byte aligned (device allocations are; the bases are a whole allocation) and its elements
// are 48 (Fp) or 96 (Fp2) bytes.
__device__ __forceinline__ fp_t ld_field(const fp_t* p) {
    const uint4* q = reinterpret_cast<const uint4*>(p);
    fp_t r;
#pragma unroll
    for (int i = 0; i < 3; i++) {
        const uint4 v = q[i];
        r.l[4 * i] = v.x; r.l[4 * i + 1] = v.y; r.l[4 * i + 2] = v.z; r.l[4 * i + 3] = v.w;
    }
    return r;
}
__device__ __forceinline__ void st_field(fp_t* p, const fp_t& v) {
    uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int i = 0; i < 3; i++) q[i] = make_uint4(v.l[4 * i], v.l[4 * i + 1], v.l[4 * i + 2], v.l[4 * i + 3]);
}
__device__ __forceinline__ fp2_t ld_field(const fp2_t* p) { fp2_t r; r.c0 = ld_field(&p->c0); r.c1 = ld_field(&p->c1); return r; }
__device__ __forceinline__ void st_field(fp2_t* p, const fp2_t& v) { st_field(&p->c0, v.c0); st_field(&p->c1, v.c1); }

// Nibble n (0 = lowest) of the exponent p − 2 (p's low limb is 0xffffaaab: no borrow).
__device__ __forceinline__ u32 inverse_exponent_nibble(int n) {
    u32 limb = fp_modulus()[n >> 3];
    if (n < 8) limb -= 2;
    return (limb >> (4 * (n & 7))) & 15;
}
// 1/a = a^(p−2), in Montgomery form as a is, by a 4-bit window; 0 for 0. Only the one
// inversion of each round's tree runs it, on one thread.
__device__ __noinline__ fp_t fp_inverse(const fp_t& a) {
    fp_t tbl[16];
    tbl[0] = fp_one();
    tbl[1] = a;
    for (int i = 2; i < 16; i++) tbl[i] = tbl[i - 1] * a;
    fp_t r = tbl[inverse_exponent_nibble(95)];
    for (int n = 94; n >= 0; n--) {
        r = r.sqr().sqr().sqr().sqr();
        const u32 e = inverse_exponent_nibble(n);
        if (e) r = r * tbl[e];
    }
    return r;
}
// In Fp2 = Fp[u]/(u² + 1): 1/(c0 + c1·u) = (c0 − c1·u)/(c0² + c1²). The norm of a nonzero
// element is nonzero (−1 is not a square mod p).
__device__ __forceinline__ fp_t field_inverse(const fp_t& a) { return fp_inverse(a); }
__device__ __forceinline__ fp2_t field_inverse(const fp2_t& a) {
    const fp_t s = fp_inverse(a.c0.sqr() + a.c1.sqr());
    fp2_t r;
    r.c0 = a.c0 * s;
    r.c1 = -(a.c1 * s);
    return r;
}

// ---- how one output is formed ----
enum : u32 { PAIR_FIRST = 0, PAIR_SECOND = 1, PAIR_IDENTITY = 2, PAIR_EQUAL_X = 3, PAIR_ADD = 4, PAIR_DOUBLE = 5 };

// From the abscissas alone; PAIR_EQUAL_X means "decide by y" (pair_kind_equal_x).
template <class F>
__device__ __forceinline__ u32 pair_kind_by_x(const F& x1, const F& x2) {
    if (x1.is_zero()) return PAIR_SECOND;  // P1 is the identity (0, 0)
    if (x2.is_zero()) return PAIR_FIRST;
    return x1 != x2 ? PAIR_ADD : PAIR_EQUAL_X;
}
template <class F>
__device__ __forceinline__ u32 pair_kind_equal_x(const F& y1, const F& y2) {
    return (y1 == y2 && !y1.is_zero()) ? PAIR_DOUBLE : PAIR_IDENTITY;
}

// ---- where a round reads its points ----
// Round 0: the sorted entries of the slice over the bases (sign in bit 31).
template <class F_>
struct entry_points {
    typedef F_ F;
    const affine_t<F>* bases;
    const u32* entries;
    __device__ __forceinline__ F x(u32 i) const { return ld_field(&bases[entries[i] & 0x7fffffffu].x); }
    __device__ __forceinline__ F y(u32 i) const {
        const u32 e = entries[i];
        const F y = ld_field(&bases[e & 0x7fffffffu].y);
        return (e >> 31) ? -y : y;
    }
};
// Later rounds: the previous round's output, coordinates in separate arrays.
template <class F_>
struct round_points {
    typedef F_ F;
    const F* X;
    const F* Y;
    __device__ __forceinline__ F x(u32 i) const { return ld_field(X + i); }
    __device__ __forceinline__ F y(u32 i) const { return ld_field(Y + i); }
};

template <class Src>
struct affine_round {
    typedef typename Src::F F;
    Src src;
    const u32* ends_in;   // the round's clipped buckets: inclusive ends of their points
    const u32* ends_out;  // its outputs: inclusive scan of ceil(m / 2)
    u32 nb;               // buckets of the slice
    u32 items;            // outputs (ends_out[nb − 1])
    u32 K;                // outputs a thread
    u32 T;                // threads: ceil(items / K)
    F* prefix;            // [K − 1][T]: running products of a thread's denominators
    F* prod;              // [T]: a thread's product, then its inverse
};

// Thread t's outputs [t·K, min((t+1)·K, items)): the running product of their denominators,
// stored after each output but the last; returns the product (one if nothing divides).
template <class Src>
__device__ __forceinline__ typename Src::F affine_forward(u32 t, const affine_round<Src>& a) {
    typedef typename Src::F F;
    const u32 lo = t * a.K, hi = min(lo + a.K, a.items);
    u32 b = bucket_of_entry(a.ends_out, a.nb, lo);
    u32 out_start = b ? a.ends_out[b - 1] : 0, out_end = a.ends_out[b];
    u32 in_start = b ? a.ends_in[b - 1] : 0, in_end = a.ends_in[b];
    F acc = one_of(F());
    for (u32 j = lo; j < hi; j++) {
        while (j >= out_end && b + 1 < a.nb) {  // the next bucket with outputs
            b++;
            out_start = out_end; out_end = a.ends_out[b];
            in_start = in_end; in_end = a.ends_in[b];
        }
        const u32 i1 = in_start + 2 * (j - out_start);
        if (i1 + 1 < in_end) {
            const F x1 = a.src.x(i1), x2 = a.src.x(i1 + 1);
            u32 kind = pair_kind_by_x(x1, x2);
            if (kind == PAIR_ADD) {
                acc = acc * (x2 - x1);
            } else if (kind == PAIR_EQUAL_X) {
                const F y1 = a.src.y(i1);
                if (pair_kind_equal_x(y1, a.src.y(i1 + 1)) == PAIR_DOUBLE) acc = acc * y1.dbl();
            }
        }
        if (j + 1 < hi) st_field(a.prefix + (size_t)(j - lo) * a.T + t, acc);
    }
    return acc;
}

// Output j (partner at i1 + 1), backwards, with inv = 1/(the product of the denominators of
// the thread's outputs up to j). Ordered so that few field values are live across the
// outlined multiplications (what is live across a call adds to the callee's registers, and past
// the launch bounds it spills): the denominator is formed and the abscissas dropped before the
// inverses, and coordinates are read again (L1) where they are needed rather than kept.
template <class Src>
__device__ __forceinline__ void pair_backward(const affine_round<Src>& a, u32 t, u32 lo, u32 j, u32 i1,
                                              typename Src::F& inv, typename Src::F* X, typename Src::F* Y) {
    typedef typename Src::F F;
    F den;
    u32 kind;
    {
        const F x1 = a.src.x(i1), x2 = a.src.x(i1 + 1);
        kind = pair_kind_by_x(x1, x2);
        if (kind == PAIR_EQUAL_X) kind = pair_kind_equal_x(a.src.y(i1), a.src.y(i1 + 1));
        if (kind < PAIR_ADD) {
            F xo = F::zero(), yo = F::zero();
            if (kind == PAIR_FIRST) { xo = x1; yo = a.src.y(i1); }
            if (kind == PAIR_SECOND) { xo = x2; yo = a.src.y(i1 + 1); }
            st_field(X + j, xo);
            st_field(Y + j, yo);
            return;
        }
        den = kind == PAIR_ADD ? x2 - x1 : a.src.y(i1).dbl();
    }
    F inv_d = inv;
    if (j > lo) inv_d = inv * ld_field(a.prefix + (size_t)(j - lo - 1) * a.T + t);
    inv = inv * den;
    F num;
    if (kind == PAIR_ADD) {
        num = a.src.y(i1 + 1) - a.src.y(i1);
    } else {
        const F xx = a.src.x(i1).sqr();
        num = xx.dbl() + xx;
    }
    const F lambda = num * inv_d;
    const F xo = lambda.sqr() - a.src.x(i1) - a.src.x(i1 + 1);
    st_field(X + j, xo);
    st_field(Y + j, lambda * (a.src.x(i1) - xo) - a.src.y(i1));
}

// Thread t's outputs backwards, given inv = 1/(its product): writes every output to (X, Y).
template <class Src>
__device__ __forceinline__ void affine_backward(u32 t, const affine_round<Src>& a, typename Src::F inv,
                                                typename Src::F* X, typename Src::F* Y) {
    const u32 lo = t * a.K, hi = min(lo + a.K, a.items);
    u32 b = bucket_of_entry(a.ends_out, a.nb, hi - 1);
    u32 out_start = b ? a.ends_out[b - 1] : 0;
    u32 in_start = b ? a.ends_in[b - 1] : 0, in_end = a.ends_in[b];
    for (u32 j = hi; j-- > lo;) {
        while (j < out_start && b > 0) {  // the previous bucket with outputs
            b--;
            in_end = in_start;
            in_start = b ? a.ends_in[b - 1] : 0;
            out_start = b ? a.ends_out[b - 1] : 0;
        }
        const u32 i1 = in_start + 2 * (j - out_start);
        if (i1 + 1 < in_end) {
            pair_backward(a, t, lo, j, i1, inv, X, Y);
        } else {
            st_field(X + j, a.src.x(i1));
            st_field(Y + j, a.src.y(i1));
        }
    }
}

// Bucket k of the slice: its remaining points summed in XYZZ; to pass[b_lo + k], or to *spill
// for the slice's first bucket when it began before the slice (entry e0). Empty: not written.
template <class Src>
__device__ __forceinline__ void affine_finish(const Src& src, const u32* ends, u32 nb, const u32* bucket_ends,
                                              u32 b_lo, u32 e0, xyzz_t<typename Src::F>* pass,
                                              xyzz_t<typename Src::F>* spill) {
    typedef typename Src::F F;
    GRID_STRIDE(k, nb) {
        const u32 start = k ? ends[k - 1] : 0, end = ends[k];
        if (start == end) continue;
        affine_t<F> p;
        p.x = src.x(start);
        p.y = src.y(start);
        xyzz_t<F> acc = xyzz_t<F>::from_affine(p);
        for (u32 i = start + 1; i < end; i++) {
            p.x = src.x(i);
            p.y = src.y(i);
            acc = acc.add_affine(p);
        }
        const bool begun_before = k == 0 && (b_lo ? bucket_ends[b_lo - 1] : 0) < e0;
        if (begun_before) *spill = acc; else pass[b_lo + k] = acc;
    }
}

// ---- the inversion tree: v[i] ← 1/v[i] for i < n, groups of g values a thread ----
// up[u] = the product of group u (the next level's values); pre[i] = v[lo] ⋯ v[i] within i's
// group, for i below the group's last.
template <class F>
__device__ __forceinline__ void tree_forward(u32 u, F* v, u32 n, u32 g, F* pre, F* up) {
    const u32 lo = u * g, hi = min(lo + g, n);
    F acc = ld_field(v + lo);
    for (u32 i = lo + 1; i < hi; i++) {
        st_field(pre + i - 1, acc);
        acc = acc * ld_field(v + i);
    }
    st_field(up + u, acc);
}
// up[u] holds 1/(group u's product); the group's values become their inverses.
template <class F>
__device__ __forceinline__ void tree_backward(u32 u, F* v, u32 n, u32 g, const F* pre, const F* up) {
    const u32 lo = u * g, hi = min(lo + g, n);
    F inv = ld_field(up + u);
    for (u32 i = hi - 1; i > lo; i--) {
        const F vi = ld_field(v + i);
        st_field(v + i, inv * ld_field(pre + i - 1));
        inv = inv * vi;
    }
    st_field(v + lo, inv);
}

// Blocks of 128 threads an SM the round kernels are held to, as the XYZZ bucket kernels are:
// four for G1, three for G2 (MSM_G2_BUCKET_BOUNDS).
#define AFFINE_ROUND_KERNELS(G, F, MIN_BLOCKS)                                                                     \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) msm_##G##_affine_fwd_entries(                    \
        const affine_t<F>* bases, const u32* entries, const u32* ends_in, const u32* ends_out, u32 nb, u32 items,  \
        u32 K, u32 T, F* prefix, F* prod) {                                                                        \
        const affine_round<entry_points<F>> a{{bases, entries}, ends_in, ends_out, nb, items, K, T, prefix, prod}; \
        GRID_STRIDE(t, T) st_field(prod + t, affine_forward(t, a));                                                \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) msm_##G##_affine_fwd_points(                     \
        const F* X, const F* Y, const u32* ends_in, const u32* ends_out, u32 nb, u32 items, u32 K, u32 T,          \
        F* prefix, F* prod) {                                                                                      \
        const affine_round<round_points<F>> a{{X, Y}, ends_in, ends_out, nb, items, K, T, prefix, prod};           \
        GRID_STRIDE(t, T) st_field(prod + t, affine_forward(t, a));                                                \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) msm_##G##_affine_bwd_entries(                    \
        const affine_t<F>* bases, const u32* entries, const u32* ends_in, const u32* ends_out, u32 nb, u32 items,  \
        u32 K, u32 T, F* prefix, F* prod, F* X_out, F* Y_out) {                                                    \
        const affine_round<entry_points<F>> a{{bases, entries}, ends_in, ends_out, nb, items, K, T, prefix, prod}; \
        GRID_STRIDE(t, T) affine_backward(t, a, ld_field(prod + t), X_out, Y_out);                                 \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) msm_##G##_affine_bwd_points(                     \
        const F* X, const F* Y, const u32* ends_in, const u32* ends_out, u32 nb, u32 items, u32 K, u32 T,          \
        F* prefix, F* prod, F* X_out, F* Y_out) {                                                                  \
        const affine_round<round_points<F>> a{{X, Y}, ends_in, ends_out, nb, items, K, T, prefix, prod};           \
        GRID_STRIDE(t, T) affine_backward(t, a, ld_field(prod + t), X_out, Y_out);                                 \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) msm_##G##_affine_finish_entries(                 \
        const affine_t<F>* bases, const u32* entries, const u32* ends, u32 nb, const u32* bucket_ends, u32 b_lo,   \
        u32 e0, xyzz_t<F>* pass, xyzz_t<F>* spill) {                                                               \
        affine_finish(entry_points<F>{bases, entries}, ends, nb, bucket_ends, b_lo, e0, pass, spill);              \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) msm_##G##_affine_finish_points(                  \
        const F* X, const F* Y, const u32* ends, u32 nb, const u32* bucket_ends, u32 b_lo, u32 e0,                 \
        xyzz_t<F>* pass, xyzz_t<F>* spill) {                                                                       \
        affine_finish(round_points<F>{X, Y}, ends, nb, bucket_ends, b_lo, e0, pass, spill);                        \
    }                                                                                                              \
    extern "C" __global__ void msm_##G##_affine_tree_up(F* v, u32 n, u32 g, F* pre, F* up) {                       \
        GRID_STRIDE(u, (n + g - 1) / g) tree_forward(u, v, n, g, pre, up);                                         \
    }                                                                                                              \
    extern "C" __global__ void msm_##G##_affine_tree_down(F* v, u32 n, u32 g, const F* pre, const F* up) {         \
        GRID_STRIDE(u, (n + g - 1) / g) tree_backward(u, v, n, g, pre, up);                                        \
    }                                                                                                              \
    /* the last level (n <= g) on one thread: its product, the one inversion, back down */                         \
    extern "C" __global__ void msm_##G##_affine_tree_top(F* v, u32 n, u32 g, F* pre, F* up) {                      \
        if (blockIdx.x == 0 && threadIdx.x == 0) {                                                                 \
            tree_forward(0, v, n, g, pre, up);                                                                     \
            st_field(up, field_inverse(ld_field(up)));                                                             \
            tree_backward(0, v, n, g, pre, up);                                                                    \
        }                                                                                                          \
    }

// ---- curve-independent steps ----
// out[2s], out[2s + 1]: the first and the last bucket holding entries of slice s, entries
// [s·slice_entries, min((s + 1)·slice_entries, total)).
extern "C" __global__ void msm_affine_slice_buckets(const u32* ends, u32 nb, u32 total, u32 slice_entries, u32 slices,
                                                    u32* out) {
    GRID_STRIDE(s, slices) {
        const u32 e0 = s * slice_entries, e1 = min(e0 + slice_entries, total);
        out[2 * s] = bucket_of_entry(ends, nb, e0);
        out[2 * s + 1] = bucket_of_entry(ends, nb, e1 - 1);
    }
}

// Slice [e0, e1) over its buckets b_lo .. b_lo + nb − 1: each bucket clipped to the slice,
// ends0[k] its inclusive end relative to e0, half[k] = ceil(m / 2) of its m entries there, and
// the largest m to *most (which must start at 0).
extern "C" __global__ void msm_affine_clip(const u32* bucket_ends, u32 b_lo, u32 nb, u32 e0, u32 e1, u32* ends0,
                                           u32* half, u32* most) {
    GRID_STRIDE(k, nb) {
        const u32 b = b_lo + k;
        const u32 start = max(b ? bucket_ends[b - 1] : 0, e0), end = min(bucket_ends[b], e1);
        const u32 m = end > start ? end - start : 0;
        ends0[k] = max(end, e0) - e0;
        half[k] = (m + 1) >> 1;
        atomicMax(most, m);
    }
}

// half[k] = ceil(m_k / 2), m_k the points of bucket k under `ends`.
extern "C" __global__ void msm_affine_halve(const u32* ends, u32 nb, u32* half) {
    GRID_STRIDE(k, nb) half[k] = (ends[k] - (k ? ends[k - 1] : 0) + 1) >> 1;
}

// After the exclusive scan of the halves in `out`: out[k] += ceil(m_k / 2), the inclusive ends.
extern "C" __global__ void msm_affine_ends(const u32* ends, u32 nb, u32* out) {
    GRID_STRIDE(k, nb) out[k] += (ends[k] - (k ? ends[k - 1] : 0) + 1) >> 1;
}
