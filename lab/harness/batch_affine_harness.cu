// Batch-affine bucket accumulation for the MSM's bucket phase, on G1 and on G2 (issue 21 §3): a
// measured prototype against the production XYZZ bucket loop (kernels/msm/buckets.cuh
// `bucket_chunks`, as msm_g1_buckets / msm_g2_buckets, + msm.cu's fix-up), in one standalone
// harness. Built with nvcc alone (no Rust, no cudarc):
//
//   nvcc -arch=sm_90 -O3 -DBATCH_AFFINE_HARNESS -o batch_affine lab/harness/batch_affine_harness.cu
//   ./batch_affine [max_log_points=24] [big_windows=13 (0: skip the whole-MSM sizes)] [seed]
//                  [--curve=g1|g2|both] [--g2-log=N]
//
// --curve picks the curves (default $BA_CURVE, else both: G1, then G2); --g2-log sets G2's
// largest size 2^N (default $BA_G2_LOG, else min(22, max_log_points)). Options may stand anywhere
// among the positional arguments. lab/harness/batch_affine.sh builds and runs it. The same
// file also builds for the host with g++, where every kernel body runs on the CPU one "thread"
// after another over small inputs (the production bucket kernels too, through a few shims), and
// where the Fp operations are counted (SNARKPIPE_COUNT_FP_OPS, kernels/ff/mont.cuh) to check the
// counts printed for the GPU, for both curves:
//
//   g++ -O2 -std=c++17 -x c++ -DBATCH_AFFINE_HARNESS -o /tmp/bah lab/harness/batch_affine_harness.cu && /tmp/bah
//
// Everything sits under BATCH_AFFINE_HARNESS: without the macro this file compiles to nothing
// (it lies outside kernels/, which build.rs compiles).
//
// ---- The algorithm ----------------------------------------------------------------------------
// Entries are sorted by bucket (`ends[b]` = end offset of bucket b, as buckets.cuh takes them).
// A *round* halves every bucket: its points P0, P1, P2, ... become P0+P1, P2+P3, ... (an odd
// last one is carried over), written compacted to a new array with new ends (a scan of
// ceil(m_b/2)). Every addition of a round is independent of the others, so all of them share
// Montgomery's trick. An affine addition is λ = (y2−y1)/(x2−x1), x3 = λ² − x1 − x2,
// y3 = λ(x1 − x3) − y1; with the trick's 3 multiplications a division that is 5M + 1S an
// addition, against madd-2008-s's 8M + 2S, plus the inversions, amortised.
//
// What the inversion costs decides the design. A Fermat inversion here is 381 S + 104 M
// (~485 multiplications), so ONE inversion per thread per round over K additions (the issue's
// first sketch) adds 485/K multiplications an addition: +7.6 at K = 64, which already loses to
// XYZZ's 10, and K large enough to win (≥ 256) leaves too few threads for the later rounds and
// ~12 KiB of prefix products a thread. So the default ("grid" mode) shares ONE inversion among
// ALL the additions of a round:
//   1. round_fwd_k: thread t takes K consecutive outputs of the round (K = 4..32, ~2^19
//      threads), computes each division's denominator (x2 − x1, or 2y for a doubling) and their
//      running product; the prefix products go to global scratch laid out [k][t] (coalesced),
//      the thread's product to prod[t].
//   2. batch_invert(prod): the same trick over the T thread products, as a tree of levels
//      (groups of g = 16 values a thread, level_fwd_k up, one thread inverts the last ≤ g values
//      (level_top_k, binary extended Euclid: its latency is what a round waits on), level_bwd_k
//      down). Afterwards prod[t] = 1/(thread t's product).
//   3. round_bwd_k: thread t walks its outputs backwards, peeling each division's inverse off
//      with the stored prefixes, and writes the affine sums (SoA: X[], Y[]).
// A round therefore costs 5M + 1S an addition, plus ~3/K for the thread products' tree, plus a
// fixed latency (the tree's levels and one inversion) that does not shrink with the round's size.
// The rounds' sizes (outputs, threads) come from the bucket counts, here on the host before the
// clock; in production one small reduction over the histogram and one download would give them.
// The *hybrid* stops the rounds once every bucket holds at most S points and finishes each bucket
// with XYZZ mixed additions (finish_k, one thread a bucket; it also writes the empty buckets as
// infinity, so the output is the production's xyzz bucket array). `groups` > 1 splits the buckets
// into independent ranges run on their own streams, so that one range's inversion latency overlaps
// another's arithmetic. "thread" mode is the issue's sketch (one Fermat inversion per thread per
// round, K fixed), kept to measure the argument above.
//
// Special cases are decided from the inputs, identically in the forward and backward passes:
// no partner (odd one out) → copy; P1 or P2 the identity (stored as (0, 0); x = 0 is never the
// abscissa of a point of either group, since (0, y) on a curve y² = x³ + b has order 3, and r is
// prime) → the other; x1 ≠ x2 → addition; x1 = x2 and y1 = y2 ≠ 0 → doubling, λ = 3x²/2y, whose
// denominator 2y joins the batch like any other; else P1 = −P2 → the identity. Only additions and
// doublings take part in the trick.
//
// *G2* runs the same code over Fp2: the kernels and the host driver are templates over the base
// field F (fp_t: G1; fp2_t: G2, points on the twist y² = x³ + 4(1 + u)). The denominators, the
// prefix products and the inversion tree hold Fp2 values; the tree's one inversion at the top is
// 1/(c0 + c1·u) = (c0 − c1·u)/(c0² + c1²), one Fp inversion of the norm plus 2 S and 2 M. An Fp2
// multiplication is 3 Fp multiplications (Karatsuba) and a squaring 2 (kernels/ff/bls12_381.cuh),
// so an affine addition is 17 Fp M against madd-2008-s's 28, about the share G1 saves (6 of 10);
// but an addition does ~2.8 times G1's arithmetic for twice its bytes, so the gathers that hold
// G1 back weigh less, and a Fermat inversion per thread weighs less against the dearer additions.
// The baseline is production's G2 loop and fix-up, as production launches them. G2's round kernels are held to three blocks an SM, as
// MSM_G2_BUCKET_BOUNDS holds production's.
//
// The rounds' forward and backward steps and the inversion tree's levels are production's
// (kernels/msm/batch_affine.cuh: affine_forward, affine_backward, tree_forward, tree_backward),
// so the harness times the production code in its variants. Until 2026-12-04 they were the
// harness's own, and G1 used a backward step that kept more values live across the outlined
// multiplications (the runs of 2026-12-04b measured that build on G1).
//
// *Coalesced* variants copy the entries' points into bucket order once before round 0
// (sort_copy_k: X[i], Y[i] = entry i's point, negated for a negative digit, SoA), so that round
// 0's forward and backward passes read consecutive points instead of gathering both points of
// every addition by index twice; every later round already reads the previous round's SoA output.
// The copy is one gather, as XYZZ's loop makes, and its time is part of the variant's. It lands
// in the group's second round buffer (X[1], Y[1], grown to the group's entries), which round 0
// reads and round 1 is the first to overwrite, so it costs 3/4 of an entry's SoA point more
// memory rather than a whole one. Invariant: the copy holds exactly what entry_src returns (same
// sign rule; the identity stays (0, 0)), so round 0 computes the same outputs and the plan, the
// operation counts and the buckets are those of the same variant uncoalesced.
//
// ---- What the harness does --------------------------------------------------------------------
// For each curve selected (G1 first, then G2, each on its own points, freed in between):
//  * Self-checks: Fermat and binary inversions in Fp or Fp2 (a·a⁻¹ = 1, the two agree, edge
//    values, host vs device), the tree trick against per-element inversion, one affine addition
//    (all special cases) against XYZZ madd; the generator on the curve and of order r; R³ mod p
//    recomputed on the host (once).
//  * Points: random points k·G, k a random 256-bit integer (2^max_log on G1, 2^g2_log on G2),
//    from a byte-window table (32 × 255 affine multiples of G, built on the host), summed in XYZZ
//    and normalised with the tree trick; all checked on the curve, the first few of order r.
//  * A collision stress instance (8 distinct points and the identity, ± signs, handcrafted
//    doublings and cancellations, random buckets of 0..70 entries): production and every
//    variant (coalesced ones included) against a host reference (Jacobian sums) for every bucket.
//  * Sizes (points, window c, windows): G1 (2^20, 16, 1), (2^24, 16, 1), (2^24, 20, 1) and the
//    whole 2^24 MSM at c = 20 (13 windows); G2 (2^20, 16, 1), (2^22, 16, 1), (2^22, 20, 1) and the
//    whole 2^22 MSM at c = 20 (13 windows); all buckets of all windows at once, as production
//    launches them. Random bucket keys and signs, counting sort on the host. Production XYZZ
//    (memset + msm_gX_buckets + msm_gX_bucket_fixup, msm.rs's chunk_for and geometry) and every
//    variant; every bucket compared (x·ZZ and y·ZZZ cross products), a sample against the host.
//    A size whose estimated memory passes 90% of the free device memory is skipped.
//  * Timing: cudaEvent, one warm-up then the median of 5; the Fp operations per bucket addition
//    each variant performs (counted from the plan, Fp2 operations as the Fp M and S they are made
//    of, as src/math/bucket.rs counts them; the host build checks the count), the floor at the
//    measured Fp multiplication/squaring rates, and a per-round breakdown (with the copy).
// Exit status 1 on any mismatch, 2 on a CUDA error or a bad option.
#ifdef BATCH_AFFINE_HARNESS

#if !defined(__CUDACC__)
// The host build counts Fp operations (kernels/ff/mont.cuh).
#define SNARKPIPE_COUNT_FP_OPS 1
#endif

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#include <cub/device/device_scan.cuh>
#include "../../kernels/msm/msm.cu"
#define BA_GPU 1
#include "cuda_check.h"
#else
#include "../../kernels/check/host_shims.h"
#include "../../kernels/msm/msm.cu"
#define BA_GPU 0
#endif
#include "../../kernels/check/generators.h"

typedef unsigned char u8;
#define BA_DEV __device__ __forceinline__

// ================================================================================================
// Field helpers
// ================================================================================================

// R³ mod p (R = 2^384): turns the plain inverse of a Montgomery value into its Montgomery inverse.
// Recomputed on the host at start-up (check_constants).
FF_CONST u32 BA_FP_R3[12] = {0xd94ca1e0, 0xed48ac6b, 0x03a7adf8, 0x315f831e, 0x615e29dd, 0x9a53352a,
                             0x921e1761, 0x34c04e5e, 0x65724728, 0x2512d435, 0x91755d4d, 0x0aa63460};
HD fp_t fp_r3() { fp_t r; for (int i = 0; i < 12; i++) r.l[i] = BA_FP_R3[i]; return r; }

// 16-byte loads and stores of field elements (every array here is 16-byte aligned: cudaMalloc,
// and 48-, 96- or 192-byte elements).
HD fp_t ld_fp(const fp_t* p) {
#if defined(__CUDA_ARCH__)
    const uint4* q = reinterpret_cast<const uint4*>(p);
    fp_t r;
#pragma unroll
    for (int i = 0; i < 3; i++) {
        const uint4 v = q[i];
        r.l[4 * i] = v.x; r.l[4 * i + 1] = v.y; r.l[4 * i + 2] = v.z; r.l[4 * i + 3] = v.w;
    }
    return r;
#else
    return *p;
#endif
}
HD void st_fp(fp_t* p, const fp_t& v) {
#if defined(__CUDA_ARCH__)
    uint4* q = reinterpret_cast<uint4*>(p);
#pragma unroll
    for (int i = 0; i < 3; i++) q[i] = make_uint4(v.l[4 * i], v.l[4 * i + 1], v.l[4 * i + 2], v.l[4 * i + 3]);
#else
    *p = v;
#endif
}
// Fp2 elements: their two Fp halves, the same way.
HD fp2_t ld_fp(const fp2_t* p) { fp2_t r; r.c0 = ld_fp(&p->c0); r.c1 = ld_fp(&p->c1); return r; }
HD void st_fp(fp2_t* p, const fp2_t& v) { st_fp(&p->c0, v.c0); st_fp(&p->c1, v.c1); }

// Nibble n (0 = lowest) of the exponent p − 2 (p's low limb is 0xffffaaab: no borrow).
HD u32 fermat_nibble(int n) {
    u32 limb = fp_modulus()[n >> 3];
    if (n < 8) limb -= 2;
    return (limb >> (4 * (n & 7))) & 15;
}
// The exponent's nonzero nibbles below the top one: the window's multiplications.
static int fermat_window_muls() {
    int k = 0;
    for (int n = 0; n < 95; n++) k += fermat_nibble(n) != 0;
    return k;
}
// 1/a = a^(p−2) by a fixed 4-bit window over the fixed exponent: a table of a^0..a^15 (1 S + 13 M),
// then 95 × (4 S + 1 M if the nibble is nonzero): 381 S + 104 M in all. 0 for 0.
HD fp_t fp_inverse_fermat(const fp_t& a) {
    fp_t tbl[16];
    tbl[0] = fp_one();
    tbl[1] = a;
    tbl[2] = a.sqr();
    for (int i = 3; i < 16; i++) tbl[i] = tbl[i - 1] * a;
    fp_t r = tbl[fermat_nibble(95)];
    for (int n = 94; n >= 0; n--) {
        r = r.sqr();
        r = r.sqr();
        r = r.sqr();
        r = r.sqr();
        const u32 e = fermat_nibble(n);
        if (e) r = r * tbl[e];
    }
    return r;
}

HD bool limbs_is_one(const u32* x) {
    u32 acc = x[0] ^ 1u;
    for (int i = 1; i < 12; i++) acc |= x[i];
    return acc == 0;
}
HD bool limbs_geq(const u32* a, const u32* b) {
    for (int i = 11; i >= 0; i--)
        if (a[i] != b[i]) return a[i] > b[i];
    return true;
}
HD void limbs_shr1(u32* x, u32 top) {
    for (int i = 0; i < 11; i++) x[i] = (x[i] >> 1) | (x[i + 1] << 31);
    x[11] = (x[11] >> 1) | (top << 31);
}
// x/2 mod p for x < p: (x + p)/2 when x is odd (x + p < 2^382, no carry out of 12 limbs).
HD void halve_mod_p(fp_t& x) {
    u32 carry = 0;
    if (x.l[0] & 1) carry = fp_t::add_raw(x.l, x.l, fp_modulus());
    limbs_shr1(x.l, carry);
}
// 1/a by the binary extended Euclidean algorithm on the integer A (a's Montgomery limbs):
// x1·A ≡ u and x2·A ≡ v (mod p) throughout; when u or v reaches 1 its x is A⁻¹ = a⁻¹R⁻¹, and a
// Montgomery multiplication by R³ gives a⁻¹R, a⁻¹ in Montgomery form. Variable time, which is
// fine here, and about 760 steps of 12-limb shifts and subtractions: a shorter dependent chain
// than Fermat's 485 multiplications, which matters for the one inversion a round waits on.
// 0 for 0, and 0 (never a hang) for an input that is not a reduced nonzero element.
HD fp_t fp_inverse_binary(const fp_t& a) {
    if (a.is_zero()) return a;
    u32 u[12], v[12];
    const u32* p = fp_modulus();
    for (int i = 0; i < 12; i++) { u[i] = a.l[i]; v[i] = p[i]; }
    fp_t x1 = fp_t::zero(), x2 = fp_t::zero();
    x1.l[0] = 1;
    for (int steps = 0; !limbs_is_one(u) && !limbs_is_one(v); steps++) {
        u32 nz = 0;
        for (int i = 0; i < 12; i++) nz |= u[i];
        if (!nz || steps > 1000) return fp_t::zero();  // u = 0: the input was p (unreduced zero)
        while (!(u[0] & 1)) { limbs_shr1(u, 0); halve_mod_p(x1); }
        while (!(v[0] & 1)) { limbs_shr1(v, 0); halve_mod_p(x2); }
        if (limbs_geq(u, v)) {
            fp_t::sub_raw(u, u, v);
            x1 = x1 - x2;
        } else {
            fp_t::sub_raw(v, v, u);
            x2 = x2 - x1;
        }
    }
    return (limbs_is_one(u) ? x1 : x2) * fp_r3();
}

// Inversion in either field, by either method (picked by argument type). In Fp2 = Fp[u]/(u² + 1),
// 1/(c0 + c1·u) = (c0 − c1·u)/(c0² + c1²): one Fp inversion of the norm, 2 S before and 2 M
// after. The norm of a nonzero element is nonzero (−1 is not a square mod p); 0 for 0.
HD fp_t inverse_fermat(const fp_t& a) { return fp_inverse_fermat(a); }
HD fp_t inverse_binary(const fp_t& a) { return fp_inverse_binary(a); }
HD fp_t fp2_norm(const fp2_t& a) { return a.c0.sqr() + a.c1.sqr(); }
HD fp2_t fp2_conj_scaled(const fp2_t& a, const fp_t& s) {
    fp2_t r;
    r.c0 = a.c0 * s;
    r.c1 = -(a.c1 * s);
    return r;
}
HD fp2_t inverse_fermat(const fp2_t& a) { return fp2_conj_scaled(a, fp_inverse_fermat(fp2_norm(a))); }
HD fp2_t inverse_binary(const fp2_t& a) { return fp2_conj_scaled(a, fp_inverse_binary(fp2_norm(a))); }

HD u64 splitmix(u64& s) {
    u64 z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// A field element below p from a random stream: random limbs, the top limb scaled below p's.
HD fp_t random_fp(u64& s) {
    fp_t x;
    for (int j = 0; j < 12; j += 2) {
        const u64 r = splitmix(s);
        x.l[j] = (u32)r;
        x.l[j + 1] = (u32)(r >> 32);
    }
    x.l[11] = (u32)(((u64)x.l[11] * fp_modulus()[11]) >> 32);
    return x;
}
HD void random_elem(u64& s, fp_t& x) { x = random_fp(s); }
HD void random_elem(u64& s, fp2_t& x) { x.c0 = random_fp(s); x.c1 = random_fp(s); }

// The curve's b: 4 for G1 (y² = x³ + 4), 4(1 + u) for G2 (the twist y² = x³ + 4(1 + u)).
HD fp_t curve_b(const fp_t&) { return fp_one().dbl().dbl(); }
HD fp2_t curve_b(const fp2_t&) { fp2_t b; b.c0 = fp_one().dbl().dbl(); b.c1 = b.c0; return b; }

// ================================================================================================
// One output of a round: how P1 + P2 is formed (shared by the forward and backward passes and
// the self-check, so that both passes classify an output the same way). F: fp_t (G1), fp2_t (G2).
// ================================================================================================
enum : u32 { OUT_P1 = 0, OUT_P2 = 1, OUT_INF = 2, OUT_EQUAL_X = 3, OUT_ADD = 4, OUT_DBL = 5 };

// From the abscissas alone; OUT_EQUAL_X means "look at y" (kind_equal_x).
template <class F>
HD u32 kind_by_x(const F& x1, const F& x2) {
    if (x1.is_zero()) return OUT_P2;  // P1 is the identity (0, 0)
    if (x2.is_zero()) return OUT_P1;
    return x1 != x2 ? OUT_ADD : OUT_EQUAL_X;
}
template <class F>
HD u32 kind_equal_x(const F& y1, const F& y2) { return (y1 == y2 && !y1.is_zero()) ? OUT_DBL : OUT_INF; }
// The division's denominator (OUT_ADD, OUT_DBL).
template <class F>
HD F pair_denominator(u32 kind, const F& x1, const F& y1, const F& x2) {
    return kind == OUT_ADD ? x2 - x1 : y1.dbl();
}
// P1 + P2 of a known kind; inv_d = 1/denominator for OUT_ADD and OUT_DBL.
template <class F>
HD void pair_sum(u32 kind, const F& x1, const F& y1, const F& x2, const F& y2, const F& inv_d, F& xo, F& yo) {
    if (kind == OUT_ADD || kind == OUT_DBL) {
        F num;
        if (kind == OUT_ADD) {
            num = y2 - y1;
        } else {
            const F xx = x1.sqr();
            num = xx.dbl() + xx;
        }
        const F lambda = num * inv_d;
        xo = lambda.sqr() - x1 - x2;
        yo = lambda * (x1 - xo) - y1;
    } else if (kind == OUT_P1) {
        xo = x1; yo = y1;
    } else if (kind == OUT_P2) {
        xo = x2; yo = y2;
    } else {
        xo = F::zero(); yo = F::zero();
    }
}

// ================================================================================================
// Point sources of a round: the sorted entries over the bases (round 0), or a SoA copy in bucket
// order (the previous round's output, or for the coalesced variants the entries' points copied
// once before round 0 by sort_copy_k).
// ================================================================================================
template <class F_>
struct entry_src {
    typedef F_ F;
    const affine_t<F>* bases;
    const u32* entries;
    HD F x(u32 i) const { return ld_fp(&bases[entries[i] & 0x7fffffffu].x); }
    HD F y(u32 i) const {
        const u32 e = entries[i];
        const F y = ld_fp(&bases[e & 0x7fffffffu].y);
        return (e >> 31) ? -y : y;
    }
    BA_DEV affine_t<F> point(u32 i) const { return load_entry(bases, entries[i]); }
};
template <class F_>
struct soa_src {
    typedef F_ F;
    const F* X;
    const F* Y;
    HD F x(u32 i) const { return ld_fp(X + i); }
    HD F y(u32 i) const { return ld_fp(Y + i); }
    BA_DEV affine_t<F> point(u32 i) const { affine_t<F> p; p.x = ld_fp(X + i); p.y = ld_fp(Y + i); return p; }
};

// ================================================================================================
// The round kernels
// ================================================================================================
// A round's arguments: production's (kernels/msm/batch_affine.cuh, whose forward and backward
// steps the round kernels here run) and where the outputs go.
template <class Src>
struct round_args : affine_round<Src> {
    typename Src::F* X;
    typename Src::F* Y;
};

// Blocks of 128 an SM the round kernels are held to, as the production bucket kernels: four for
// G1 (msm_g1_buckets), three for G2 (MSM_G2_BUCKET_BOUNDS). -D'ROUND_BOUNDS(F)=' unbounds them.
template <class F> struct round_blocks { enum { value = 4 }; };
template <> struct round_blocks<fp2_t> { enum { value = 3 }; };
#ifndef ROUND_BOUNDS
#define ROUND_BOUNDS(F) __launch_bounds__(128, round_blocks<F>::value)
#endif
template <class Src>
__global__ void ROUND_BOUNDS(typename Src::F) round_fwd_k(round_args<Src> a, u32 n) {
    GRID_STRIDE(t, n) st_fp(a.prod + t, affine_forward(t, a));
}
template <class Src>
__global__ void ROUND_BOUNDS(typename Src::F) round_bwd_k(round_args<Src> a, u32 n) {
    GRID_STRIDE(t, n) affine_backward(t, a, ld_fp(a.prod + t), a.X, a.Y);
}
// The issue's sketch: one Fermat inversion per thread per round.
template <class Src>
__global__ void ROUND_BOUNDS(typename Src::F) round_fused_k(round_args<Src> a, u32 n) {
    GRID_STRIDE(t, n) affine_backward(t, a, inverse_fermat(affine_forward(t, a)), a.X, a.Y);
}

// half[b] = ceil(m_b / 2), m_b the size of bucket b under `ends`.
__global__ void half_counts_k(const u32* ends, u32* half, u32 n) {
    GRID_STRIDE(b, n) {
        const u32 m = ends[b] - (b ? ends[b - 1] : 0);
        half[b] = (m + 1) >> 1;
    }
}

// The coalesced variants' copy before round 0: entry i's point (negated for a negative digit)
// to X[i], Y[i], so that round 0 reads consecutive points instead of gathering them twice.
template <class F>
__global__ void sort_copy_k(const affine_t<F>* bases, const u32* entries, F* X, F* Y, u32 n) {
    GRID_STRIDE(i, n) {
        const u32 e = entries[i];
        const affine_t<F>* q = bases + (e & 0x7fffffffu);
        st_fp(X + i, ld_fp(&q->x));
        const F y = ld_fp(&q->y);
        st_fp(Y + i, (e >> 31) ? -y : y);
    }
}

// Bucket b's remaining points summed with XYZZ mixed additions into out[b] (infinity if empty).
template <class Src>
__global__ void ROUND_BOUNDS(typename Src::F) finish_k(Src src, const u32* ends, xyzz_t<typename Src::F>* out, u32 n) {
    typedef typename Src::F F;
    GRID_STRIDE(b, n) {
        const u32 start = b ? ends[b - 1] : 0, end = ends[b];
        xyzz_t<F> acc = xyzz_t<F>::inf();
        for (u32 i = start; i < end; i++) acc = acc.add_affine(src.point(i));
        out[b] = acc;
    }
}

// ================================================================================================
// Batch inversion of an array in place, as a tree of levels (Montgomery's trick at each level)
// ================================================================================================
template <class F>
struct level_args {
    F* v;    // the level's values (inverted in place by level_bwd_k)
    u32 n;   // how many
    u32 g;   // values a thread
    F* pre;  // pre[i] = v[lo] ⋯ v[i] of i's group (i below the group's last)
    F* up;   // up[u] = product of group u: the next level's values
};
template <class F>
__global__ void level_fwd_k(level_args<F> a, u32 n) { GRID_STRIDE(u, n) tree_forward(u, a.v, a.n, a.g, a.pre, a.up); }
template <class F>
__global__ void level_bwd_k(level_args<F> a, u32 n) { GRID_STRIDE(u, n) tree_backward(u, a.v, a.n, a.g, a.pre, a.up); }
// The last level (a.n <= a.g) on one thread: product, one inversion, back down.
template <class F>
__global__ void level_top_k(level_args<F> a, u32 fermat, u32 n) {
    GRID_STRIDE(u, n) {
        tree_forward(0, a.v, a.n, a.g, a.pre, a.up);
        const F p = ld_fp(a.up);
        st_fp(a.up, fermat ? inverse_fermat(p) : inverse_binary(p));
        tree_backward(0, a.v, a.n, a.g, a.pre, a.up);
    }
}

// ================================================================================================
// Point generation, checks
// ================================================================================================
// Point i = k·G for a random 256-bit k: the sum of table[j][byte_j(k) − 1] = byte·256^j·G.
template <class F>
__global__ void ROUND_BOUNDS(F) gen_points_k(const affine_t<F>* table, u64 seed, xyzz_t<F>* out, u32 n) {
    GRID_STRIDE(i, n) {
        u64 s = seed ^ ((u64)i * 0xD1B54A32D192ED03ull);
        xyzz_t<F> acc = xyzz_t<F>::inf();
        for (int w = 0; w < 4; w++) {
            const u64 r = splitmix(s);
            for (int k = 0; k < 8; k++) {
                const u32 v = (u32)(r >> (8 * k)) & 255u;
                if (v) acc = acc.add_affine(table[(w * 8 + k) * 255 + v - 1]);
            }
        }
        out[i] = acc;
    }
}
template <class F>
__global__ void zzz_of_k(const xyzz_t<F>* pts, F* out, u32 n) {
    GRID_STRIDE(i, n) st_fp(out + i, pts[i].is_inf() ? one_of(F()) : pts[i].zzz);
}
// inv_zzz[i] = 1/ZZZ: x = X·(ZZ/ZZZ)², y = Y/ZZZ (ZZ³ = ZZZ²).
template <class F>
__global__ void xyzz_to_affine_k(const xyzz_t<F>* pts, const F* inv_zzz, affine_t<F>* out, u32 n) {
    GRID_STRIDE(i, n) {
        const xyzz_t<F> p = pts[i];
        affine_t<F> r;
        if (p.is_inf()) {
            r.x = F::zero(); r.y = F::zero();
        } else {
            const F iz3 = ld_fp(inv_zzz + i), iz = p.zz * iz3;
            r.x = p.x * iz.sqr();
            r.y = p.y * iz3;
        }
        out[i] = r;
    }
}
template <class F>
__global__ void on_curve_k(const affine_t<F>* pts, u32* bad, u32 n) {
    GRID_STRIDE(i, n) {
        const F x = pts[i].x, y = pts[i].y;
        if (x.is_zero() || y.sqr() != x.sqr() * x + curve_b(F())) atomicAdd(bad, 1u);
    }
}
template <class F>
__global__ void fill_random_k(F* out, u64 seed, u32 n) {
    GRID_STRIDE(i, n) {
        u64 s = seed ^ ((u64)i * 0xD1B54A32D192ED03ull);
        F x;
        random_elem(s, x);
        if (x.is_zero()) x = one_of(F());
        st_fp(out + i, x);
    }
}
// Both inversions of v[i]: a·a⁻¹ = 1 and the two agree; Fermat's result kept.
template <class F>
__global__ void inv_check_k(const F* v, F* inv, u32* bad, u32 n) {
    GRID_STRIDE(i, n) {
        const F a = ld_fp(v + i), f = inverse_fermat(a), b = inverse_binary(a);
        if (f * a != one_of(F()) || f != b) atomicAdd(bad, 1u);
        st_fp(inv + i, f);
    }
}
template <class F>
__global__ void count_neq_k(const F* a, const F* b, u32* bad, u32 n) {
    GRID_STRIDE(i, n) if (ld_fp(a + i) != ld_fp(b + i)) atomicAdd(bad, 1u);
}
// One affine addition (pair_sum with a direct inversion) against XYZZ madd, case c = i % 5:
// 0 P + Q, 1 P + P, 2 P + (−P), 3 O + Q, 4 P + O. kinds[kind] counts what was exercised.
template <class F>
__global__ void add_check_k(const affine_t<F>* pts, u32 npts, u32* bad, u32* kinds, u32 n) {
    GRID_STRIDE(i, n) {
        affine_t<F> p = pts[i % npts], q = pts[(i * 7 + 3) % npts];
        const u32 c = i % 5;
        if (c == 1) q = p;
        if (c == 2) q = p.neg();
        if (c == 3) { p.x = F::zero(); p.y = F::zero(); }
        if (c == 4) { q.x = F::zero(); q.y = F::zero(); }
        u32 kind = kind_by_x(p.x, q.x);
        if (kind == OUT_EQUAL_X) kind = kind_equal_x(p.y, q.y);
        F inv_d = F::zero(), xo, yo;
        if (kind >= OUT_ADD) inv_d = inverse_fermat(pair_denominator(kind, p.x, p.y, q.x));
        pair_sum(kind, p.x, p.y, q.x, q.y, inv_d, xo, yo);
        const xyzz_t<F> r = xyzz_t<F>::from_affine(p).add_affine(q);
        bool ok;
        if (r.is_inf()) ok = xo.is_zero() && yo.is_zero();
        else ok = !xo.is_zero() && xo * r.zz == r.x && yo * r.zzz == r.y;
        if (!ok) atomicAdd(bad, 1u);
        atomicAdd(kinds + kind, 1u);
    }
}
// flags[b] = 1 where two xyzz bucket arrays differ as points.
template <class F>
HD bool same_xyzz(const xyzz_t<F>& a, const xyzz_t<F>& b) {
    if (a.is_inf() || b.is_inf()) return a.is_inf() && b.is_inf();
    return a.x * b.zz == b.x * a.zz && a.y * b.zzz == b.y * a.zzz;
}
template <class F>
__global__ void compare_k(const xyzz_t<F>* a, const xyzz_t<F>* b, u8* flags, u32 n) {
    GRID_STRIDE(i, n) flags[i] = same_xyzz(a[i], b[i]) ? 0 : 1;
}
template <class F>
__global__ void gather_k(const affine_t<F>* bases, const u32* idx, affine_t<F>* out, u32 n) {
    GRID_STRIDE(i, n) out[i] = bases[idx[i]];
}

#if BA_GPU
// Fp multiplication (OP 0) / squaring (OP 1) throughput: 4 independent chains a thread.
template <int OP>
__global__ void fp_rate_k(fp_t* data, u32 iters) {
    const u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    fp_t x[4];
    const fp_t y = data[4 * i + 3];
    for (int c = 0; c < 4; c++) x[c] = data[4 * i + c];
    for (u32 k = 0; k < iters; k++) {
#pragma unroll
        for (int c = 0; c < 4; c++) x[c] = OP ? x[c].sqr() : x[c] * y;
    }
    for (int c = 0; c < 4; c++) data[4 * i + c] = x[c];
}
#endif

// ================================================================================================
// Host side: memory, launches
// ================================================================================================
#if BA_GPU
static u32 blocks_for(u32 n, u32 block) { return std::max(1u, std::min((n + block - 1) / block, 1u << 20)); }
#define LAUNCH(kern, n, block, stream, ...)                                               \
    do {                                                                                  \
        const u32 n_ = (n);                                                               \
        if (n_) {                                                                         \
            kern<<<blocks_for(n_, (block)), (block), 0, (stream)>>>(__VA_ARGS__, n_);     \
            CK(cudaGetLastError());                                                       \
        }                                                                                 \
    } while (0)
#else
#define LAUNCH(kern, n, block, stream, ...) \
    do {                                    \
        const u32 n_ = (n);                 \
        (void)(stream);                     \
        if (n_) kern(__VA_ARGS__, n_);      \
    } while (0)
#endif
#define CURVE_THREADS 128u

template <class T>
static T* dalloc(size_t n) {
#if BA_GPU
    void* p = nullptr;
    CK(cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)));
    CK(cudaMemset(p, 0, std::max<size_t>(n, 1) * sizeof(T)));  // zeroed, as calloc on the host
    return static_cast<T*>(p);
#else
    void* p = calloc(std::max<size_t>(n, 1), sizeof(T));
    if (!p) { fprintf(stderr, "out of host memory\n"); exit(2); }
    return static_cast<T*>(p);
#endif
}
static void dfree(void* p) {
#if BA_GPU
    if (p) CK(cudaFree(p));
#else
    free(p);
#endif
}
static void h2d(void* d, const void* h, size_t bytes) {
#if BA_GPU
    CK(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
#else
    memcpy(d, h, bytes);
#endif
}
static void d2h(void* h, const void* d, size_t bytes) {
#if BA_GPU
    CK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
#else
    memcpy(h, d, bytes);
#endif
}
static void d2d(void* d, const void* s, size_t bytes) {
#if BA_GPU
    CK(cudaMemcpy(d, s, bytes, cudaMemcpyDeviceToDevice));
#else
    memcpy(d, s, bytes);
#endif
}
static void dzero(void* d, size_t bytes, cudaStream_t stream) {
#if BA_GPU
    CK(cudaMemsetAsync(d, 0, bytes, stream));
#else
    (void)stream;
    memset(d, 0, bytes);
#endif
}
static void dsync() {
#if BA_GPU
    CK(cudaDeviceSynchronize());
#endif
}
template <class T>
static T* upload(const std::vector<T>& v) {
    T* d = dalloc<T>(v.size());
    if (!v.empty()) h2d(d, v.data(), v.size() * sizeof(T));
    return d;
}
template <class T>
static std::vector<T> download(const T* d, size_t n) {
    std::vector<T> v(n);
    if (n) d2h(v.data(), d, n * sizeof(T));
    return v;
}
static u32 read_counter(const u32* d) { u32 h = 0; d2h(&h, d, 4); return h; }

// Inclusive scan (cub on the device; its temporary storage per caller).
static void scan_inclusive(const u32* in, u32* out, u32 n, void* tmp, size_t tmp_bytes, cudaStream_t stream) {
#if BA_GPU
    CK(cub::DeviceScan::InclusiveSum(tmp, tmp_bytes, in, out, (int)n, stream));
#else
    (void)tmp; (void)tmp_bytes; (void)stream;
    std::vector<u32> h(in, in + n);
    u32 run = 0;
    for (u32 i = 0; i < n; i++) { run += h[i]; out[i] = run; }
#endif
}
static size_t scan_temp_bytes(u32 n) {
#if BA_GPU
    size_t bytes = 0;
    CK(cub::DeviceScan::InclusiveSum(nullptr, bytes, (const u32*)nullptr, (u32*)nullptr, (int)n));
    return bytes;
#else
    (void)n;
    return 1;
#endif
}

// ---- phase marks (the breakdown), device only ----
struct Marks {
#if BA_GPU
    std::vector<cudaEvent_t> ev;
#endif
    std::vector<std::string> label;
    void mark(const std::string& what, cudaStream_t stream) {
#if BA_GPU
        cudaEvent_t e;
        CK(cudaEventCreate(&e));
        CK(cudaEventRecord(e, stream));
        ev.push_back(e);
#else
        (void)stream;
#endif
        label.push_back(what);
    }
    // Milliseconds between consecutive marks (mark 0 is the start).
    std::vector<float> spans() {
        std::vector<float> r;
#if BA_GPU
        for (size_t i = 1; i < ev.size(); i++) {
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, ev[i - 1], ev[i]));
            r.push_back(ms);
        }
        for (auto e : ev) CK(cudaEventDestroy(e));
        ev.clear();
#endif
        return r;
    }
};

// ---- operation counts ----
// Fp operations, the way the floor counts them: Fp multiplications and squarings; an Fp2
// multiplication is 3 Fp multiplications (Karatsuba), an Fp2 squaring 2 (complex squaring), as
// kernels/ff/bls12_381.cuh computes them and src/math/bucket.rs counts them.
struct OpTally {
    double muls = 0, sqrs = 0, fermat = 0, binary = 0;
    void add(const OpTally& o) { muls += o.muls; sqrs += o.sqrs; fermat += o.fermat; binary += o.binary; }
};
template <class F> struct field_cost;
template <> struct field_cost<fp_t> {
    static constexpr double mul_m = 1, sqr_m = 0, sqr_s = 1, inv_m = 0, inv_s = 0;
    static const char* curve() { return "G1"; }
    static const char* field() { return "Fp"; }
};
template <> struct field_cost<fp2_t> {
    static constexpr double mul_m = 3, sqr_m = 2, sqr_s = 0, inv_m = 2, inv_s = 2;  // inv: the norm's 2 S, then 2 M
    static const char* curve() { return "G2"; }
    static const char* field() { return "Fp2"; }
};
// n multiplications / squarings / inversions of F (an inversion: one Fp inversion, Fermat's or
// the binary one with its multiplication by R³, and for Fp2 the norm's operations).
template <class F> static void tally_mul(OpTally& t, double n) { t.muls += n * field_cost<F>::mul_m; }
template <class F> static void tally_sqr(OpTally& t, double n) {
    t.muls += n * field_cost<F>::sqr_m;
    t.sqrs += n * field_cost<F>::sqr_s;
}
template <class F> static void tally_inv(OpTally& t, double n, bool fermat) {
    if (fermat) t.fermat += n;
    else { t.binary += n; t.muls += n; }  // its multiplication by R³; the rest is shifts and subtractions
    t.muls += n * field_cost<F>::inv_m;
    t.sqrs += n * field_cost<F>::inv_s;
}

// ---- batch inversion driver ----
template <class F> struct InvScratch { F* up; F* pre; };
// Scratch elements batch_invert needs for n values in groups of g.
static void inv_scratch_sizes(u32 n, u32 g, size_t& up, size_t& pre) {
    up = 1; pre = 1;
    while (n > g) { pre += n; n = (n + g - 1) / g; up += n; }
    pre += n;
}
template <class F>
static InvScratch<F> inv_alloc(u32 n, u32 g) {
    size_t up, pre;
    inv_scratch_sizes(n, g, up, pre);
    return InvScratch<F>{dalloc<F>(up), dalloc<F>(pre)};
}
template <class F>
static void inv_free(InvScratch<F>& s) { dfree(s.up); dfree(s.pre); s.up = s.pre = nullptr; }
// Fp operations batch_invert performs (for the printed counts).
template <class F>
static OpTally batch_invert_ops(u32 n, u32 g, bool fermat) {
    OpTally t;
    if (!n) return t;
    double muls = 0;
    while (n > g) { u32 m = (n + g - 1) / g; muls += 3.0 * (n - m); n = m; }
    muls += 3.0 * (n - 1);
    tally_mul<F>(t, muls);
    tally_inv<F>(t, 1, fermat);
    return t;
}
// v[i] ← 1/v[i] for i < n (no zero), on `stream`.
template <class F>
static void batch_invert(F* v, u32 n, u32 g, const InvScratch<F>& s, bool fermat, cudaStream_t stream) {
    if (!n) return;
    std::vector<level_args<F>> levels;
    size_t up_off = 0, pre_off = 0;
    F* cur = v;
    while (n > g) {
        const u32 m = (n + g - 1) / g;
        level_args<F> a{cur, n, g, s.pre + pre_off, s.up + up_off};
        LAUNCH(level_fwd_k<F>, m, CURVE_THREADS, stream, a);
        levels.push_back(a);
        pre_off += n; up_off += m;
        cur = a.up; n = m;
    }
    level_args<F> top{cur, n, g, s.pre + pre_off, s.up + up_off};
    LAUNCH(level_top_k<F>, 1, 32, stream, top, fermat ? 1u : 0u);
    for (size_t i = levels.size(); i-- > 0;) LAUNCH(level_bwd_k<F>, (levels[i].n + g - 1) / g, CURVE_THREADS, stream, levels[i]);
}

// ================================================================================================
// Problems, plans, runs
// ================================================================================================
template <class F>
struct Problem {
    std::string name;
    u32 nb = 0, total = 0, windows = 1;
    const affine_t<F>* bases = nullptr;  // device
    u32* entries = nullptr;              // device, sorted by bucket
    u32* ends = nullptr;                 // device
    std::vector<u32> h_entries, h_ends;
    std::vector<u32> counts() const {
        std::vector<u32> m(nb);
        for (u32 b = 0; b < nb; b++) m[b] = h_ends[b] - (b ? h_ends[b - 1] : 0);
        return m;
    }
};
template <class F>
static Problem<F> make_problem(const std::string& name, const affine_t<F>* bases, std::vector<u32> entries, std::vector<u32> ends) {
    Problem<F> p;
    p.name = name;
    p.nb = (u32)ends.size();
    p.total = p.nb ? ends.back() : 0;
    p.bases = bases;
    p.entries = upload(entries);
    p.ends = upload(ends);
    p.h_entries = std::move(entries);
    p.h_ends = std::move(ends);
    return p;
}
template <class F>
static void free_problem(Problem<F>& p) { dfree(p.entries); dfree(p.ends); p.entries = p.ends = nullptr; }

// ---- production XYZZ ----
static u32 chunk_for(u32 entries) { return std::min(64u, std::max(8u, entries >> 19)); }  // msm.rs
// The curve's production bucket kernel and fix-up (msm.cu), with msm.rs's geometry.
template <class F> struct ProductionKernels;
template <> struct ProductionKernels<fp_t> {
    static constexpr auto buckets = msm_g1_buckets;
    static constexpr auto fixup = msm_g1_bucket_fixup;
};
template <> struct ProductionKernels<fp2_t> {
    static constexpr auto buckets = msm_g2_buckets;
    static constexpr auto fixup = msm_g2_bucket_fixup;
};
template <class F>
static void prod_buckets(const Problem<F>& p, u32 chunk, xyzz_t<F>* buckets, xyzz_t<F>* spills) {
    const auto bucket_kernel = ProductionKernels<F>::buckets;
    const auto fixup_kernel = ProductionKernels<F>::fixup;
#if BA_GPU
    const u32 chunks = (p.total + chunk - 1) / chunk;
    bucket_kernel<<<blocks_for(chunks, CURVE_THREADS), CURVE_THREADS>>>(p.bases, p.entries, p.ends, p.nb, p.total, chunk, buckets, spills);
    CK(cudaGetLastError());
    fixup_kernel<<<blocks_for(p.nb, CURVE_THREADS), CURVE_THREADS>>>(p.ends, p.nb, chunk, 0, buckets, buckets, spills);
    CK(cudaGetLastError());
#else
    bucket_kernel(p.bases, p.entries, p.ends, p.nb, p.total, chunk, buckets, spills);
    fixup_kernel(p.ends, p.nb, chunk, 0, buckets, buckets, spills);
#endif
}
template <class F>
static void xyzz_run(const Problem<F>& p, xyzz_t<F>* buckets, xyzz_t<F>* spills) {
    dzero(buckets, (size_t)p.nb * sizeof(xyzz_t<F>), 0);
    if (!p.total) return;
    prod_buckets(p, chunk_for(p.total), buckets, spills);
}
// The production's Fp operations: a madd per entry that neither starts a chunk nor a bucket
// (8 M + 2 S of the base field), an XYZZ addition per chunk end a bucket crosses (12 M + 2 S).
template <class F>
static OpTally xyzz_ops(const Problem<F>& p) {
    OpTally t;
    if (!p.total) return t;
    const u32 chunk = chunk_for(p.total);
    double starts = 0, crossings = 0;
    for (u32 b = 0; b < p.nb; b++) {
        const u32 s = b ? p.h_ends[b - 1] : 0, e = p.h_ends[b];
        if (e == s) continue;
        if (s % chunk) starts++;
        crossings += (e - 1) / chunk - s / chunk;
    }
    const double chunks = (p.total + chunk - 1) / chunk;
    const double madds = p.total - chunks - starts;
    tally_mul<F>(t, madds * 8 + crossings * 12);
    tally_sqr<F>(t, madds * 2 + crossings * 2);
    return t;
}

// ---- batch-affine ----
struct Tuning {
    u32 target_threads = 1u << 19;  // grid mode: K = clamp(items / target, kmin, kmax)
    u32 kmin = 4, kmax = 32;
    u32 g = 16;                     // batch_invert's values a thread
};
struct Cfg {
    std::string name;
    int mode = 0;            // 0: one inversion per round (grid); 1: one Fermat per thread per round
    u32 S = 1;               // rounds until every bucket holds at most S points, XYZZ for the rest
    u32 groups = 1;          // bucket ranges on their own streams
    u32 kfix = 64;           // mode 1: outputs a thread
    bool top_fermat = false;
    bool coalesced = false;  // copy the points into bucket order (SoA) before round 0
};
// One round of a group: outputs, additions (outputs with a partner), outputs a thread, threads,
// and the threads whose first output is an addition (its inverse needs no prefix: one
// multiplication less).
struct RoundPlan { u32 items, adds, K, T, first_div; };

template <class F>
struct GroupRun {
    u32 b0 = 0, nb = 0, total = 0;
    const u32* entries = nullptr;
    u32* ends = nullptr;
    bool own_ends = false;
    xyzz_t<F>* out = nullptr;
    std::vector<RoundPlan> plan;
    std::vector<u32> final_counts;
    u32* half = nullptr;
    u32* ends_buf[2] = {nullptr, nullptr};
    // Round r writes X[r & 1], Y[r & 1]. Coalesced: X[1], Y[1] first hold the copy in bucket
    // order (total points), which round 0 reads and round 1 overwrites.
    F* X[2] = {nullptr, nullptr};
    F* Y[2] = {nullptr, nullptr};
    F* prefix = nullptr;
    F* prod = nullptr;
    InvScratch<F> inv{nullptr, nullptr};
    void* cub_tmp = nullptr;
    size_t cub_bytes = 0;
    cudaStream_t stream = 0;
};

static std::vector<RoundPlan> plan_rounds(std::vector<u32> m, const Cfg& cfg, const Tuning& tu, std::vector<u32>& final_counts) {
    std::vector<RoundPlan> plan;
    u32 mx = 0;
    for (u32 x : m) mx = std::max(mx, x);
    const u32 S = std::max(cfg.S, 1u);
    std::vector<u32> ends_out(m.size());
    while (mx > S) {
        u64 items = 0, adds = 0;
        for (size_t b = 0; b < m.size(); b++) { items += (m[b] + 1) / 2; adds += m[b] / 2; ends_out[b] = (u32)items; }
        RoundPlan r;
        r.items = (u32)items;
        r.adds = (u32)adds;
        r.K = cfg.mode == 0 ? std::min(tu.kmax, std::max(tu.kmin, (u32)(items / tu.target_threads))) : cfg.kfix;
        r.T = (u32)((items + r.K - 1) / r.K);
        r.first_div = 0;
        for (size_t b = 0; b < m.size(); b++) {  // the thread starts (multiples of K) inside bucket b
            const u32 os = b ? ends_out[b - 1] : 0, oe = ends_out[b];
            for (u32 lo = (os + r.K - 1) / r.K * r.K; lo < oe; lo += r.K) r.first_div += 2 * (lo - os) + 1 < m[b];
        }
        plan.push_back(r);
        for (u32& x : m) x = (x + 1) / 2;
        mx = (mx + 1) / 2;
    }
    final_counts = m;
    return plan;
}

template <class F>
struct BaRun {
    Cfg cfg;
    Tuning tu;
    std::vector<GroupRun<F>> groups;
    OpTally ops;
    u32 rounds = 0;
};

template <class F>
static BaRun<F> ba_prepare(const Problem<F>& p, const Cfg& cfg, const Tuning& tu, xyzz_t<F>* out) {
    BaRun<F> r;
    r.cfg = cfg;
    r.tu = tu;
    const u32 G = std::max(1u, std::min(cfg.groups, p.nb));
    const std::vector<u32> m = p.counts();
    for (u32 gi = 0; gi < G; gi++) {
        GroupRun<F> g;
        g.b0 = (u32)((u64)p.nb * gi / G);
        const u32 b1 = (u32)((u64)p.nb * (gi + 1) / G);
        g.nb = b1 - g.b0;
        const u32 e0 = g.b0 ? p.h_ends[g.b0 - 1] : 0;
        g.total = p.h_ends[b1 - 1] - e0;
        g.entries = p.entries + e0;
        g.out = out + g.b0;
        if (G == 1) {
            g.ends = p.ends;
        } else {
            std::vector<u32> rel(g.nb);
            for (u32 b = 0; b < g.nb; b++) rel[b] = p.h_ends[g.b0 + b] - e0;
            g.ends = upload(rel);
            g.own_ends = true;
#if BA_GPU
            // blocking streams: the legacy default stream (the timing events) waits for them
            CK(cudaStreamCreate(&g.stream));
#endif
        }
        g.plan = plan_rounds(std::vector<u32>(m.begin() + g.b0, m.begin() + b1), cfg, tu, g.final_counts);
        size_t cap[2] = {1, 1}, prefix = 1, prodn = 1;
        for (size_t i = 0; i < g.plan.size(); i++) {
            cap[i & 1] = std::max<size_t>(cap[i & 1], g.plan[i].items);
            prefix = std::max<size_t>(prefix, (size_t)g.plan[i].K * g.plan[i].T);
            prodn = std::max<size_t>(prodn, g.plan[i].T);
        }
        if (cfg.coalesced) cap[1] = std::max<size_t>(cap[1], g.total);  // the copy
        if (!g.plan.empty()) {
            g.half = dalloc<u32>(g.nb);
            g.ends_buf[0] = dalloc<u32>(g.nb);
            g.ends_buf[1] = dalloc<u32>(g.nb);
            for (int k = 0; k < 2; k++) { g.X[k] = dalloc<F>(cap[k]); g.Y[k] = dalloc<F>(cap[k]); }
            g.prefix = dalloc<F>(prefix);
            g.prod = dalloc<F>(prodn);
            if (cfg.mode == 0) g.inv = inv_alloc<F>((u32)prodn, tu.g);
            g.cub_bytes = scan_temp_bytes(g.nb);
            g.cub_tmp = dalloc<u8>(g.cub_bytes);
        }
        // operation count: 5 M + 1 S of F an addition, less a multiplication for each thread
        // whose first output is a division; the inversions; XYZZ madds for what is left
        for (const RoundPlan& rp : g.plan) {
            tally_mul<F>(r.ops, 5.0 * rp.adds - rp.first_div);
            tally_sqr<F>(r.ops, 1.0 * rp.adds);
            if (cfg.mode == 0) {
                r.ops.add(batch_invert_ops<F>(rp.T, tu.g, cfg.top_fermat));
            } else {
                tally_inv<F>(r.ops, rp.T, true);
            }
        }
        for (u32 x : g.final_counts)
            if (x > 1) { tally_mul<F>(r.ops, 8.0 * (x - 1)); tally_sqr<F>(r.ops, 2.0 * (x - 1)); }
        r.rounds = std::max<u32>(r.rounds, (u32)g.plan.size());
        r.groups.push_back(g);
    }
    return r;
}
template <class F>
static void ba_release(BaRun<F>& r) {
    for (GroupRun<F>& g : r.groups) {
        if (g.own_ends) dfree(g.ends);
        dfree(g.half); dfree(g.ends_buf[0]); dfree(g.ends_buf[1]);
        for (int k = 0; k < 2; k++) { dfree(g.X[k]); dfree(g.Y[k]); }
        dfree(g.prefix); dfree(g.prod); dfree(g.cub_tmp);
        if (g.inv.up) inv_free(g.inv);
#if BA_GPU
        if (g.stream) CK(cudaStreamDestroy(g.stream));
#endif
    }
    r.groups.clear();
}

template <class F, class Src>
static void ba_round(GroupRun<F>& g, const BaRun<F>& r, u32 ri, Src src, const u32* ends_in, Marks* mk) {
    const RoundPlan& rp = g.plan[ri];
    u32* ends_out = g.ends_buf[ri & 1];
    LAUNCH(half_counts_k, g.nb, 256u, g.stream, ends_in, g.half);
    scan_inclusive(g.half, ends_out, g.nb, g.cub_tmp, g.cub_bytes, g.stream);
    if (mk) mk->mark("scan", g.stream);
    round_args<Src> a{{src, ends_in, ends_out, g.nb, rp.items, rp.K, rp.T, g.prefix, g.prod}, g.X[ri & 1], g.Y[ri & 1]};
    if (r.cfg.mode == 0) {
        LAUNCH(round_fwd_k<Src>, rp.T, CURVE_THREADS, g.stream, a);
        if (mk) mk->mark("fwd", g.stream);
        batch_invert(g.prod, rp.T, r.tu.g, g.inv, r.cfg.top_fermat, g.stream);
        if (mk) mk->mark("invert", g.stream);
        LAUNCH(round_bwd_k<Src>, rp.T, CURVE_THREADS, g.stream, a);
        if (mk) mk->mark("bwd", g.stream);
    } else {
        LAUNCH(round_fused_k<Src>, rp.T, CURVE_THREADS, g.stream, a);
        if (mk) mk->mark("fused", g.stream);
    }
}
// All groups, round by round interleaved (so that the streams overlap).
template <class F>
static void ba_exec(BaRun<F>& r, const Problem<F>& p, Marks* mk) {
    for (u32 ri = 0; ri <= r.rounds; ri++) {
        for (GroupRun<F>& g : r.groups) {
            const u32 R = (u32)g.plan.size();
            if (ri > R) continue;
            const entry_src<F> es{p.bases, g.entries};
            const u32* ends_in = ri == 0 ? g.ends : g.ends_buf[(ri - 1) & 1];
            if (ri < R) {
                if (ri == 0 && r.cfg.coalesced) {
                    LAUNCH(sort_copy_k<F>, g.total, 256u, g.stream, p.bases, g.entries, g.X[1], g.Y[1]);
                    if (mk) mk->mark("copy", g.stream);
                    const soa_src<F> sorted{g.X[1], g.Y[1]};
                    ba_round(g, r, ri, sorted, ends_in, mk);
                } else if (ri == 0) {
                    ba_round(g, r, ri, es, ends_in, mk);
                } else {
                    const soa_src<F> prev{g.X[(ri - 1) & 1], g.Y[(ri - 1) & 1]};
                    ba_round(g, r, ri, prev, ends_in, mk);
                }
            } else {
                const soa_src<F> last{g.X[(R + 1) & 1], g.Y[(R + 1) & 1]};  // round R − 1's output
                if (R == 0) LAUNCH(finish_k<entry_src<F>>, g.nb, CURVE_THREADS, g.stream, es, ends_in, g.out);
                else LAUNCH(finish_k<soa_src<F>>, g.nb, CURVE_THREADS, g.stream, last, ends_in, g.out);
                if (mk) mk->mark("finish", g.stream);
            }
        }
    }
}

// ================================================================================================
// Host references
// ================================================================================================
template <class F>
static F host_inverse(const F& a) { return inverse_fermat(a); }
template <class F>
static void host_batch_invert(std::vector<F>& v) {
    if (v.empty()) return;
    std::vector<F> pre(v.size());
    F acc = one_of(F());
    for (size_t i = 0; i < v.size(); i++) { pre[i] = acc; acc = acc * v[i]; }
    F inv = host_inverse(acc);
    for (size_t i = v.size(); i-- > 0;) { const F vi = v[i]; v[i] = inv * pre[i]; inv = inv * vi; }
}
static void generator_of(g1_affine_t& g) { g.x = generator_limbs(G1X); g.y = generator_limbs(G1Y); }
static void generator_of(g2_affine_t& g) {
    g.x.c0 = generator_limbs(G2X0); g.x.c1 = generator_limbs(G2X1);
    g.y.c0 = generator_limbs(G2Y0); g.y.c1 = generator_limbs(G2Y1);
}
template <class F>
static affine_t<F> generator() { affine_t<F> g; generator_of(g); return g; }
template <class F>
static bool same_jx(const jacobian_t<F>& j, const xyzz_t<F>& q) {
    if (j.is_inf() || q.is_inf()) return j.is_inf() && q.is_inf();
    const F z2 = j.z.sqr(), z3 = z2 * j.z;
    return j.x * q.zz == q.x * z2 && j.y * q.zzz == q.y * z3;
}
template <class F>
static bool on_curve(const affine_t<F>& p) { return p.y.sqr() == p.x.sqr() * p.x + curve_b(F()); }
// r·P = O, r the group order (Fr's modulus), by double-and-add over its 255 bits.
template <class F>
static bool killed_by_r(const affine_t<F>& p) {
    jacobian_t<F> acc = jacobian_t<F>::inf();
    for (int bit = 254; bit >= 0; bit--) {
        acc = acc.dbl();
        if ((FR_MODULUS[bit >> 5] >> (bit & 31)) & 1) acc = acc.add_affine(p);
    }
    return acc.is_inf();
}
// table[j·255 + v − 1] = v·256^j·G, affine.
template <class F>
static std::vector<affine_t<F>> build_table(int& bad) {
    const affine_t<F> gen = generator<F>();
    std::vector<jacobian_t<F>> J(32 * 255);
    jacobian_t<F> base = jacobian_t<F>::from_affine(gen);
    for (int j = 0; j < 32; j++) {
        if (j) for (int k = 0; k < 8; k++) base = base.dbl();
        J[j * 255] = base;
        for (int v = 2; v <= 255; v++) J[j * 255 + v - 1] = J[j * 255 + v - 2].add(base);
    }
    std::vector<F> z(J.size());
    for (size_t i = 0; i < J.size(); i++) z[i] = J[i].z;
    host_batch_invert(z);
    std::vector<affine_t<F>> t(J.size());
    for (size_t i = 0; i < J.size(); i++) {
        const F z2 = z[i].sqr();
        t[i].x = J[i].x * z2;
        t[i].y = J[i].y * z2 * z[i];
        if (!on_curve(t[i])) bad++;
    }
    // 10·G by additions against the table's entry, and 256·G against row 1's first
    jacobian_t<F> s = jacobian_t<F>::inf();
    for (int k = 0; k < 256; k++) {
        s = s.add_affine(gen);
        if (k == 9 && !same_jx(s, xyzz_t<F>::from_affine(t[9]))) bad++;
    }
    if (!same_jx(s, xyzz_t<F>::from_affine(t[255]))) bad++;
    return t;
}
static std::string hex(const fp_t& a) {
    const fp_t c = a.from_mont();
    std::string s;
    char buf[16];
    for (int i = 11; i >= 0; i--) { snprintf(buf, sizeof buf, "%08x", c.l[i]); s += buf; }
    return s;
}
static std::string hex(const fp2_t& a) { return hex(a.c0) + "+" + hex(a.c1) + "*u"; }
template <class F>
static std::string show_xyzz(const xyzz_t<F>& q) {
    if (q.is_inf()) return "infinity";
    const F iz3 = host_inverse(q.zzz), iz = q.zz * iz3;
    return "x=" + hex(q.x * iz.sqr()) + " y=" + hex(q.y * iz3);
}

// Host Jacobian sums of buckets `which` (the points fetched from the device).
template <class F>
static std::vector<jacobian_t<F>> host_bucket_sums(const Problem<F>& p, const std::vector<u32>& which) {
    std::vector<u32> idx;
    for (u32 b : which)
        for (u32 i = b ? p.h_ends[b - 1] : 0; i < p.h_ends[b]; i++) idx.push_back(p.h_entries[i] & 0x7fffffffu);
    std::vector<affine_t<F>> pts;
    if (!idx.empty()) {
        u32* d_idx = upload(idx);
        affine_t<F>* d_pts = dalloc<affine_t<F>>(idx.size());
        LAUNCH(gather_k<F>, (u32)idx.size(), 256u, (cudaStream_t)0, p.bases, d_idx, d_pts);
        pts = download(d_pts, idx.size());
        dfree(d_idx); dfree(d_pts);
    }
    std::vector<jacobian_t<F>> sums;
    size_t k = 0;
    for (u32 b : which) {
        jacobian_t<F> acc = jacobian_t<F>::inf();
        for (u32 i = b ? p.h_ends[b - 1] : 0; i < p.h_ends[b]; i++, k++) {
            affine_t<F> q = pts[k];
            if (p.h_entries[i] >> 31) q = q.neg();
            acc = acc.add_affine(q);
        }
        sums.push_back(acc);
    }
    return sums;
}

// ================================================================================================
// Checks and reporting
// ================================================================================================
static int g_failures = 0;
#if !BA_GPU
static int g_counted = 0;  // host build: variants whose counted operations were checked
#endif
static void expect(bool ok, const std::string& what) {
    if (!ok) { g_failures++; printf("FAIL %s\n", what.c_str()); }
}
static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Compares two bucket arrays on the device; prints the first difference. Returns the count.
template <class F>
static u32 compare_buckets(const Problem<F>& p, const xyzz_t<F>* a, const xyzz_t<F>* b, const std::string& what) {
    u8* flags = dalloc<u8>(p.nb);
    LAUNCH(compare_k<F>, p.nb, 256u, (cudaStream_t)0, a, b, flags);
    const std::vector<u8> f = download(flags, p.nb);
    dfree(flags);
    u32 bad = 0, first = 0;
    for (u32 i = 0; i < p.nb; i++)
        if (f[i]) { if (!bad) first = i; bad++; }
    if (bad) {
        const u32 m = p.h_ends[first] - (first ? p.h_ends[first - 1] : 0);
        xyzz_t<F> qa, qb;
        d2h(&qa, a + first, sizeof qa);
        d2h(&qb, b + first, sizeof qb);
        printf("FAIL %s: %u of %u buckets differ; first: bucket %u (%u entries)\n  production: %s\n  this:       %s\n",
               what.c_str(), bad, p.nb, first, m, show_xyzz(qa).c_str(), show_xyzz(qb).c_str());
        g_failures++;
    }
    return bad;
}
// Buckets `which` of `dev` against host sums.
template <class F>
static u32 check_against_host(const Problem<F>& p, const xyzz_t<F>* dev, const std::vector<u32>& which, const std::string& what) {
    const std::vector<jacobian_t<F>> ref = host_bucket_sums(p, which);
    u32 bad = 0;
    for (size_t k = 0; k < which.size(); k++) {
        xyzz_t<F> q;
        d2h(&q, dev + which[k], sizeof q);
        if (!same_jx(ref[k], q)) {
            if (!bad) printf("FAIL %s: bucket %u differs from the host's sum (%s)\n", what.c_str(), which[k], show_xyzz(q).c_str());
            bad++;
        }
    }
    if (bad) g_failures++;
    return bad;
}

template <class Fn>
static double time_ms(Fn fn, int reps) {
#if BA_GPU
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a, 0));
        fn();
        CK(cudaEventRecord(b, 0));
        CK(cudaEventSynchronize(b));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
#else
    for (int r = 0; r < reps; r++) fn();
    return 0;
#endif
}

struct Rates { double mul = 0, sqr = 0; };  // Fp operations a second
static Rates g_rates;
static const double FERMAT_SQRS = 381;
static double fermat_muls() { return 13 + fermat_window_muls(); }
static double mul_equiv(const OpTally& t) { return t.muls + t.sqrs + t.fermat * (FERMAT_SQRS + fermat_muls()); }
static double floor_ms(const OpTally& t) {
    if (g_rates.mul <= 0) return 0;
    return 1e3 * ((t.muls + t.fermat * fermat_muls()) / g_rates.mul + (t.sqrs + t.fermat * FERMAT_SQRS) / g_rates.sqr);
}


// The variants. G1: the first measurement's, then the coalesced ones. G2: the grid variants,
// one Fermat per thread (an inversion weighs less against G2's dearer additions), then the
// coalesced ones.
static std::vector<Cfg> default_cfgs(bool g2) {
    std::vector<Cfg> v;
    auto add = [&](const char* name, int mode, u32 S, u32 groups, u32 kfix, bool fermat, bool coalesced) {
        Cfg c; c.name = name; c.mode = mode; c.S = S; c.groups = groups; c.kfix = kfix; c.top_fermat = fermat;
        c.coalesced = coalesced;
        v.push_back(c);
    };
    add("grid S=1 (full tree)", 0, 1, 1, 0, false, false);
    add("grid S=2", 0, 2, 1, 0, false, false);
    add("grid S=4", 0, 4, 1, 0, false, false);
    add("grid S=8", 0, 8, 1, 0, false, false);
    if (!g2) {
        add("grid S=4, Fermat top", 0, 4, 1, 0, true, false);
        add("grid S=4, 4 streams", 0, 4, 4, 0, false, false);
        add("grid S=2, 8 streams", 0, 2, 8, 0, false, false);
        add("thread K=64 S=4 (Fermat/thread)", 1, 4, 1, 64, false, false);
        add("thread K=32 S=8 (Fermat/thread)", 1, 8, 1, 32, false, false);
    } else {
        add("grid S=4, 4 streams", 0, 4, 4, 0, false, false);
        add("thread K=64 S=4 (Fermat/thread)", 1, 4, 1, 64, false, false);
    }
    add("coalesced grid S=4", 0, 4, 1, 0, false, true);
    add("coalesced grid S=8", 0, 8, 1, 0, false, true);
    add("coalesced grid S=4, 4 streams", 0, 4, 4, 0, false, true);
    return v;
}

// Runs production and every variant on p; checks each against production (all buckets), and
// production against the host (`sample` buckets). Prints a table; with `timing`, medians.
template <class F>
static void run_problem(const Problem<F>& p, const std::vector<Cfg>& cfgs, const Tuning& tu, bool timing,
                        const std::vector<u32>& sample, bool breakdown) {
    const std::vector<u32> m = p.counts();
    u32 mx = 0, nonempty = 0;
    for (u32 x : m) { mx = std::max(mx, x); nonempty += x > 0; }
    const double adds = (double)p.total - nonempty;
    printf("\n== %s: %u entries over %u buckets (%u window%s; mean %.1f, max %u, %u empty), %.0f bucket additions\n", p.name.c_str(),
           p.total, p.nb, p.windows, p.windows > 1 ? "s" : "", (double)p.total / p.nb, mx, p.nb - nonempty, adds);
    xyzz_t<F>* ref = dalloc<xyzz_t<F>>(p.nb);
    xyzz_t<F>* out = dalloc<xyzz_t<F>>(p.nb);
    const u32 chunk = chunk_for(p.total);
    xyzz_t<F>* spills = dalloc<xyzz_t<F>>(p.total / chunk + 2);
    const int reps = timing ? 5 : 1;

#if !BA_GPU
    fp_op_counter() = fp_op_counts{0, 0};
#endif
    xyzz_run(p, ref, spills);
    dsync();
#if !BA_GPU
    const fp_op_counts xc = fp_op_counter();
#endif
    const OpTally xo = xyzz_ops(p);
    const double t_x = timing ? time_ms([&] { xyzz_run(p, ref, spills); }, reps) : 0;
    dsync();
    const u32 host_bad = check_against_host(p, ref, sample, p.name + " production vs host");
    printf("production XYZZ vs host Jacobian sums: %zu buckets, %u differ\n", sample.size(), host_bad);
#if !BA_GPU
    expect((double)xc.muls == xo.muls && (double)xc.sqrs == xo.sqrs,
           p.name + " production op count " + std::to_string(xc.muls) + "M+" + std::to_string(xc.sqrs) + "S vs the formula's " +
               std::to_string((u64)xo.muls) + "M+" + std::to_string((u64)xo.sqrs) + "S");
#endif
    printf("| variant | rounds | ms | XYZZ ms / this | Fp ops an addition (M + S, inversions) | floor ms | check |\n");
    printf("| --- | --- | --- | --- | --- | --- | --- |\n");
    printf("| XYZZ production (chunk %u) | - | %.3f | 1.00 | %.2f (%.2f M + %.2f S) | %.3f | host sample ok: %s |\n", chunk, t_x,
           mul_equiv(xo) / adds, xo.muls / adds, xo.sqrs / adds, floor_ms(xo), host_bad ? "NO" : "yes");
    for (const Cfg& c : cfgs) {
        BaRun<F> r = ba_prepare(p, c, tu, out);
        dzero(out, (size_t)p.nb * sizeof(xyzz_t<F>), 0);
#if !BA_GPU
        fp_op_counter() = fp_op_counts{0, 0};
#endif
        ba_exec(r, p, nullptr);
        dsync();
#if !BA_GPU
        // The operations the host counted against the plan's count (random buckets: no special case).
        {
            const fp_op_counts bc = fp_op_counter();
            const double want_m = r.ops.muls + r.ops.fermat * fermat_muls(), want_s = r.ops.sqrs + r.ops.fermat * FERMAT_SQRS;
            expect((double)bc.muls == want_m && (double)bc.sqrs == want_s,
                   p.name + " / " + c.name + " op count: counted " + std::to_string(bc.muls) + "M+" + std::to_string(bc.sqrs) +
                       "S, planned " + std::to_string((u64)want_m) + "M+" + std::to_string((u64)want_s) + "S");
            g_counted++;
        }
#endif
        u32 bad = compare_buckets(p, ref, out, p.name + " / " + c.name);
        double t = 0;
        if (timing) {
            t = time_ms([&] { ba_exec(r, p, nullptr); }, reps);
            dsync();
            bad += compare_buckets(p, ref, out, p.name + " / " + c.name + " (after timing)");
        }
        const double pe = mul_equiv(r.ops) / adds;
        char inv[96];
        snprintf(inv, sizeof inv, "%.0f Fermat, %.0f binary", r.ops.fermat, r.ops.binary);
        printf("| %s | %u | %.3f | %.2f | %.2f (%.2f M + %.2f S, %s) | %.3f | %s |\n", c.name.c_str(), r.rounds, t,
               t > 0 ? t_x / t : 0.0, pe, r.ops.muls / adds, r.ops.sqrs / adds, inv, floor_ms(r.ops), bad ? "FAIL" : "PASS");
        if (breakdown && timing && c.mode == 0 && c.groups == 1 && (c.S == 1 || c.S == 4) && !c.top_fermat) {
            Marks mk;
            mk.mark("start", 0);
            ba_exec(r, p, &mk);
            dsync();
            const std::vector<float> sp = mk.spans();
            printf("  breakdown (%s, one run, ms):", c.name.c_str());
            size_t k = 0;
            if (k < sp.size() && mk.label[k + 1] == "copy") {
                printf("\n    copy into bucket order (%u points): %.3f", p.total, sp[k]);
                k++;
            }
            for (size_t ri = 0; ri < r.groups[0].plan.size(); ri++) {
                const RoundPlan& rp = r.groups[0].plan[ri];
                printf("\n    round %zu: %u outputs, %u additions, K %u, %u threads:", ri, rp.items, rp.adds, rp.K, rp.T);
                for (int q = 0; q < 4 && k < sp.size(); q++, k++) printf(" %s %.3f", mk.label[k + 1].c_str(), sp[k]);
            }
            if (k < sp.size()) printf("\n    finish (XYZZ, %u buckets): %.3f", p.nb, sp[k]);
            printf("\n");
        }
        ba_release(r);
    }
    dfree(ref); dfree(out); dfree(spills);
}

// Random bucket keys (and signs) for every point in every window, counting-sorted by bucket.
template <class F>
static Problem<F> make_random_problem(const std::string& name, const affine_t<F>* bases, u32 points, u32 c, u32 windows, u64& rng) {
    const u32 B = 1u << (c - 1), nb = B * windows;
    const size_t total = (size_t)points * windows;
    std::vector<u32> key(total);
    std::vector<u32> ends(nb, 0);
    for (u32 w = 0; w < windows; w++)
        for (u32 i = 0; i < points; i++) {
            const u64 r = splitmix(rng);
            const u32 k = w * B + (u32)(((r & 0xffffffffull) * B) >> 32);
            key[(size_t)w * points + i] = k | (u32)(r >> 63) << 31;
            ends[k]++;
        }
    std::vector<u32> cursor(nb);
    u32 run = 0;
    for (u32 b = 0; b < nb; b++) { cursor[b] = run; run += ends[b]; ends[b] = run; }
    std::vector<u32> entries(total);
    for (size_t e = 0; e < total; e++) {
        const u32 k = key[e] & 0x7fffffffu;
        entries[cursor[k]++] = (u32)(e % points) | (key[e] & 0x80000000u);
    }
    Problem<F> p = make_problem(name, bases, std::move(entries), std::move(ends));
    p.windows = windows;
    return p;
}
// A few nonempty buckets (random ones and the largest) for the host reference.
template <class F>
static std::vector<u32> sample_buckets(const Problem<F>& p, u32 count, u64& rng) {
    std::vector<u32> s;
    const std::vector<u32> m = p.counts();
    u32 big = 0;
    for (u32 b = 0; b < p.nb; b++) if (m[b] > m[big]) big = b;
    s.push_back(big);
    for (u32 k = 0; k < 64 && s.size() < count; k++) {
        const u32 b = (u32)(splitmix(rng) % p.nb);
        if (m[b]) s.push_back(b);
    }
    return s;
}

// The collision stress instance: bases[0..7] distinct points, bases[8] the identity.
template <class F>
static Problem<F> make_stress(const affine_t<F>* bases9, u64& rng) {
    const u32 N = 0x80000000u, O = 8;
    std::vector<std::vector<u32>> B = {
        {0, 0},                                   // doubling
        {0, 0 | N},                               // cancellation
        {0, 0 | N, 1, 2},                         // O + (P1 + P2)
        {1, 2, 1, 2},                             // doubling of a sum
        {0, 1, 0 | N, 1 | N},                     // a sum and its negation
        {3},                                      // one entry
        {},                                       // empty
        {0, 0, 0},                                // 2P + P
        {4, 4, 4, 4, 4, 4, 4, 4, 4},              // 9P
        {O, O},                                   // O + O
        {O, 5},                                   // O + P
        {5, O},                                   // P + O
        {O},                                      // O alone
        {6, 6 | N, 6, 6 | N, 7},                  // cancellations then a carry
        {7, 7, 7 | N, 7 | N},                     // 2P and −2P
        {0 | N, 0},                               // cancellation, negative first
        {2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},  // 16P by doublings only
        {1, 1 | N, 1, 1 | N, 1, 1 | N, 1},        // cancellations, one left
    };
    for (int k = 0; k < 300; k++) {
        const u32 len = (u32)(splitmix(rng) % 71);
        std::vector<u32> e;
        for (u32 i = 0; i < len; i++) {
            const u64 r = splitmix(rng);
            e.push_back((u32)(r % 9) | ((r >> 40) & 1 ? N : 0));
        }
        B.push_back(e);
    }
    std::vector<u32> entries, ends;
    for (auto& b : B) { entries.insert(entries.end(), b.begin(), b.end()); ends.push_back((u32)entries.size()); }
    return make_problem(std::string(field_cost<F>::curve()) + " collision stress (8 points and the identity)", bases9,
                        std::move(entries), std::move(ends));
}
// The stress instance against the host for every bucket, production and every variant.
template <class F>
static void run_stress(const Problem<F>& p, const std::vector<Cfg>& cfgs, const std::vector<Tuning>& tunings) {
    std::vector<u32> all(p.nb);
    for (u32 b = 0; b < p.nb; b++) all[b] = b;
    const std::vector<jacobian_t<F>> ref = host_bucket_sums(p, all);
    xyzz_t<F>* out = dalloc<xyzz_t<F>>(p.nb);
    xyzz_t<F>* spills = dalloc<xyzz_t<F>>(p.total / 8 + 2);
    auto check = [&](const std::string& what) {
        const std::vector<xyzz_t<F>> got = download(out, p.nb);
        u32 bad = 0, infs = 0;
        for (u32 b = 0; b < p.nb; b++) {
            infs += ref[b].is_inf();
            if (!same_jx(ref[b], got[b])) {
                if (!bad) printf("FAIL %s / %s: bucket %u differs from the host's sum (%s)\n", p.name.c_str(), what.c_str(), b,
                                 show_xyzz(got[b]).c_str());
                bad++;
            }
        }
        if (bad) g_failures++;
        return std::make_pair(bad, infs);
    };
    xyzz_run(p, out, spills);
    dsync();
    auto pr = check("production XYZZ");
    printf("%s: %u buckets, %u entries, %u sums are the identity; production XYZZ: %u differ from the host\n", p.name.c_str(), p.nb,
           p.total, pr.second, pr.first);
    u32 runs = 0, bad = 0;
    for (const Tuning& tu : tunings)
        for (const Cfg& c : cfgs) {
            BaRun<F> r = ba_prepare(p, c, tu, out);
            dzero(out, (size_t)p.nb * sizeof(xyzz_t<F>), 0);
            ba_exec(r, p, nullptr);
            dsync();
            const std::string what = c.name + " (K " + std::to_string(tu.kmin) + ".." + std::to_string(tu.kmax) + ", g " +
                                     std::to_string(tu.g) + ")";
            bad += check(what).first;
            runs++;
            ba_release(r);
        }
    printf("%s: %u batch-affine runs (variants x tunings), %u bucket mismatches in all\n", p.name.c_str(), runs, bad);
    dfree(out); dfree(spills);
}

// ---- self-checks ----
static void check_constants() {
    // R³ mod p by doublings of R mod p (FP_ONE): 768 modular doublings.
    fp_t r = fp_one();
    for (int i = 0; i < 768; i++) r = fp_t::add_portable(r, r);
    expect(r == fp_r3(), "R^3 mod p constant");
    int nz = fermat_window_muls();
    printf("Fermat inversion: %d squarings + %d multiplications (exponent p-2, 4-bit window)\n", (int)FERMAT_SQRS, 13 + nz);
#if !BA_GPU
    // The host counts what the Fermat inversion really does, in Fp and in Fp2.
    fp_op_counter() = fp_op_counts{0, 0};
    fp_t a = fp_one().dbl();
    const fp_t ia = fp_inverse_fermat(a);
    fp_op_counts c = fp_op_counter();
    expect(c.sqrs == FERMAT_SQRS && (double)c.muls == fermat_muls(), "Fermat op count");
    expect(ia * a == fp_one(), "host Fermat 1/2");
    fp2_t a2;
    a2.c0 = a;
    a2.c1 = fp_one();
    fp_op_counter() = fp_op_counts{0, 0};
    const fp2_t ia2 = inverse_fermat(a2);
    c = fp_op_counter();
    expect(c.sqrs == FERMAT_SQRS + field_cost<fp2_t>::inv_s && (double)c.muls == fermat_muls() + field_cost<fp2_t>::inv_m,
           "Fp2 Fermat op count");
    expect(ia2 * a2 == one_of(fp2_t()), "host Fp2 Fermat 1/(2 + u)");
#endif
}
// Edge values at the front of the inversion check. Fp: 1, 2, p − 1, p − 2, R⁻¹-ish (limb 1),
// the top limb set. Fp2: each of those as c0 alone, c1 alone, and beside the next.
static std::vector<fp_t> edge_values(const fp_t&) {
    std::vector<fp_t> edge;
    fp_t one_int = fp_t::zero(); one_int.l[0] = 1;
    fp_t two_int = fp_t::zero(); two_int.l[0] = 2;
    edge.push_back(fp_one());
    edge.push_back(one_int);
    edge.push_back(two_int);
    edge.push_back(fp_t::zero() - fp_one());
    edge.push_back(fp_t::zero() - one_int);
    edge.push_back(fp_t::zero() - two_int);
    fp_t top = fp_t::zero(); top.l[11] = fp_modulus()[11] - 1; edge.push_back(top);
    return edge;
}
static std::vector<fp2_t> edge_values(const fp2_t&) {
    const std::vector<fp_t> e = edge_values(fp_t());
    std::vector<fp2_t> edge;
    for (size_t i = 0; i < e.size(); i++) {
        fp2_t a;
        a.c0 = e[i]; a.c1 = fp_t::zero(); edge.push_back(a);
        a.c0 = fp_t::zero(); a.c1 = e[i]; edge.push_back(a);
        a.c0 = e[i]; a.c1 = e[(i + 1) % e.size()]; edge.push_back(a);
    }
    return edge;
}
template <class F>
static void check_inversion(u32 n, u64 seed) {
    F* v = dalloc<F>(n);
    F* inv = dalloc<F>(n);
    F* w = dalloc<F>(n);
    u32* bad = dalloc<u32>(1);
    LAUNCH(fill_random_k<F>, n, 256u, (cudaStream_t)0, v, seed);
    const std::vector<F> edge = edge_values(F());
    h2d(v, edge.data(), std::min<size_t>(edge.size(), n) * sizeof(F));
    LAUNCH(inv_check_k<F>, n, CURVE_THREADS, (cudaStream_t)0, v, inv, bad);
    const u32 b1 = read_counter(bad);
    // host: the first 64 with the portable arithmetic
    const std::vector<F> hv = download(v, std::min<u32>(n, 64)), hi = download(inv, std::min<u32>(n, 64));
    u32 hb = 0;
    for (size_t i = 0; i < hv.size(); i++)
        if (hv[i] * hi[i] != one_of(F()) || host_inverse(hv[i]) != hi[i] || inverse_binary(hv[i]) != hi[i]) hb++;
    // the tree trick against the direct inversions, two level widths
    u32 b2 = 0;
    for (u32 g : {4u, 16u}) {
        d2d(w, v, (size_t)n * sizeof(F));
        InvScratch<F> s = inv_alloc<F>(n, g);
        batch_invert(w, n, g, s, g == 4, 0);
        dzero(bad, 4, 0);
        LAUNCH(count_neq_k<F>, n, 256u, (cudaStream_t)0, w, inv, bad);
        b2 += read_counter(bad);
        inv_free(s);
    }
    printf("check inversion in %s (Fermat and binary, %u values, %zu edge): %u device mismatches, %u host mismatches; tree trick (g 4 and 16): %u mismatches\n",
           field_cost<F>::field(), n, edge.size(), b1, hb, b2);
    expect(b1 == 0 && hb == 0, std::string(field_cost<F>::field()) + " inversion");
    expect(b2 == 0, std::string(field_cost<F>::field()) + " Montgomery's trick (tree) vs direct inversion");
    dfree(v); dfree(inv); dfree(w); dfree(bad);
}
template <class F>
static void check_affine_add(const affine_t<F>* bases, u32 npts, u32 n) {
    u32* bad = dalloc<u32>(1);
    u32* kinds = dalloc<u32>(8);
    LAUNCH(add_check_k<F>, n, CURVE_THREADS, (cudaStream_t)0, bases, npts, bad, kinds);
    const u32 b = read_counter(bad);
    const std::vector<u32> k = download(kinds, 8);
    printf("check %s affine addition vs XYZZ madd: %u pairs (add %u, dbl %u, inf %u, P1 %u, P2 %u), %u mismatches\n",
           field_cost<F>::curve(), n, k[OUT_ADD], k[OUT_DBL], k[OUT_INF], k[OUT_P1], k[OUT_P2], b);
    expect(b == 0 && k[OUT_ADD] && k[OUT_DBL] && k[OUT_INF] && k[OUT_P1] && k[OUT_P2], std::string(field_cost<F>::curve()) + " affine addition");
    dfree(bad); dfree(kinds);
}
template <class F>
static affine_t<F>* generate_bases(u32 n, u64 seed) {
    const std::string curve = field_cost<F>::curve();
    int tbad = 0;
    const double t0 = now_s();
    const affine_t<F> gen = generator<F>();
    expect(on_curve(gen) && killed_by_r(gen), curve + " generator on the curve, of order r");
    const std::vector<affine_t<F>> table = build_table<F>(tbad);
    expect(tbad == 0, "host table of multiples of " + curve + "'s generator");
    affine_t<F>* d_table = upload(table);
    xyzz_t<F>* tmp = dalloc<xyzz_t<F>>(n);
    LAUNCH(gen_points_k<F>, n, CURVE_THREADS, (cudaStream_t)0, d_table, seed, tmp);
    F* v = dalloc<F>(n);
    LAUNCH(zzz_of_k<F>, n, 256u, (cudaStream_t)0, tmp, v);
    InvScratch<F> s = inv_alloc<F>(n, 16);
    batch_invert(v, n, 16, s, false, 0);
    affine_t<F>* bases = dalloc<affine_t<F>>(n);
    LAUNCH(xyzz_to_affine_k<F>, n, 256u, (cudaStream_t)0, tmp, v, bases);
    u32* bad = dalloc<u32>(1);
    LAUNCH(on_curve_k<F>, n, 256u, (cudaStream_t)0, bases, bad);
    const u32 b = read_counter(bad);
    // distinct (the first few thousand, on the host), and the first few of order r
    const u32 k = std::min<u32>(n, 4096);
    std::vector<affine_t<F>> h = download(bases, k);
    std::vector<std::string> xs;
    for (auto& q : h) xs.push_back(std::string((const char*)&q.x, sizeof q.x));
    std::sort(xs.begin(), xs.end());
    u32 order_bad = 0;
    for (u32 i = 0; i < std::min<u32>(k, 4); i++) order_bad += !killed_by_r(h[i]);
    printf("points: %u random k*%s (256-bit k), %u not on the curve, %u of the first 4 not of order r (table: %d bad), %.2f s\n", n,
           curve.c_str(), b, order_bad, tbad, now_s() - t0);
    expect(b == 0 && order_bad == 0, "generated " + curve + " points on the curve, of order r");
    expect(std::unique(xs.begin(), xs.end()) == xs.end(), "generated " + curve + " points distinct");
    inv_free(s);
    dfree(d_table); dfree(tmp); dfree(v); dfree(bad);
    return bases;
}

#if BA_GPU
static void measure_rates() {
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const u32 threads = (u32)prop.multiProcessorCount * 2048, iters = 256;
    fp_t* d = dalloc<fp_t>((size_t)threads * 4);
    LAUNCH(fill_random_k<fp_t>, threads * 4, 256u, (cudaStream_t)0, d, 7);
    dsync();
    double ms[2];
    for (int op = 0; op < 2; op++) {
        auto fn = [&] {
            if (op == 0) fp_rate_k<0><<<threads / 256, 256>>>(d, iters);
            else fp_rate_k<1><<<threads / 256, 256>>>(d, iters);
            CK(cudaGetLastError());
        };
        fn();
        ms[op] = time_ms(fn, 3);
    }
    const double ops = (double)threads * 4 * iters;
    g_rates.mul = ops / (ms[0] * 1e-3);
    g_rates.sqr = ops / (ms[1] * 1e-3);
    printf("rate: Fp multiplication %.1f G/s, squaring %.1f G/s (microkernel, %u threads x 4 chains x %u)\n", g_rates.mul / 1e9,
           g_rates.sqr / 1e9, threads, iters);
    dfree(d);
}
#endif

struct Size { u32 log_points, c, windows; };
// Device memory a size needs beyond the points: entries and ends, the two round buffers (3/4 of
// an SoA point an entry; 3/2 with the coalesced copy), the prefixes, four bucket arrays' worth.
template <class F>
static double need_bytes(const Size& s, bool coalesced) {
    const double entries = (double)(1ull << s.log_points) * s.windows, pt = 2.0 * sizeof(F);
    return entries * (8 + pt * (coalesced ? 1.5 : 0.75) + sizeof(F) * 0.55) + 4.0 * (1u << (s.c - 1)) * s.windows * sizeof(xyzz_t<F>);
}

// One curve: its self-checks, 2^log_points random points, the stress instance, the sizes.
// False (sizes skipped) when a self-check failed.
template <class F>
static bool run_curve(u32 log_points, const std::vector<Size>& sizes, const Tuning& tu, const std::vector<Tuning>& stress_tunings,
                      bool timing, u32 inv_n, u32 add_n, u64& rng) {
    typedef field_cost<F> fc;
    const double t0 = now_s();
    printf("\n==== %s over %s: an affine addition is 5 M + 1 S of %s = %.0f M + %.0f S of Fp a bucket addition, plus the "
           "inversions; madd-2008-s 8 M + 2 S = %.0f M + %.0f S\n",
           fc::curve(), fc::field(), fc::field(), 5 * fc::mul_m + fc::sqr_m, fc::sqr_s, 8 * fc::mul_m + 2 * fc::sqr_m, 2 * fc::sqr_s);
    const int failures_before = g_failures;
    check_inversion<F>(inv_n, splitmix(rng));
    const u32 npts = 1u << log_points;
    affine_t<F>* bases = generate_bases<F>(npts, splitmix(rng));
    check_affine_add<F>(bases, npts, add_n);
    if (g_failures > failures_before) {
        dfree(bases);
        return false;
    }
    const std::vector<Cfg> cfgs = default_cfgs(fc::mul_m > 1);
    bool any_coalesced = false;
    for (const Cfg& c : cfgs) any_coalesced |= c.coalesced;
    {
        affine_t<F>* b9 = dalloc<affine_t<F>>(9);
        d2d(b9, bases, 8 * sizeof(affine_t<F>));
        Problem<F> st = make_stress<F>(b9, rng);
        run_stress(st, cfgs, stress_tunings);
        free_problem(st);
        dfree(b9);
    }
    for (const Size& s : sizes) {
        char name[112];
        snprintf(name, sizeof name, "%s, 2^%u points, c = %u, %u window%s", fc::curve(), s.log_points, s.c, s.windows, s.windows > 1 ? "s" : "");
        if (s.log_points > log_points) {
            printf("\n== %s: skipped (only 2^%u points)\n", name, log_points);
            continue;
        }
#if BA_GPU
        const double need = need_bytes<F>(s, any_coalesced);
        size_t free_b = 0, total_b = 0;
        CK(cudaMemGetInfo(&free_b, &total_b));
        if (need > 0.9 * free_b) {
            printf("\n== %s: skipped (needs ~%.1f GB, %.1f GB free)\n", name, need / 1e9, free_b / 1e9);
            continue;
        }
#else
        (void)any_coalesced;
#endif
        const double ts = now_s();
        Problem<F> p = make_random_problem<F>(name, bases, 1u << s.log_points, s.c, s.windows, rng);
        printf("\n(sorted %u entries on the host in %.2f s)", p.total, now_s() - ts);
        run_problem(p, cfgs, tu, timing, sample_buckets(p, BA_GPU ? 6 : 40, rng), BA_GPU != 0);
        free_problem(p);
    }
    dfree(bases);
    printf("\n%s done in %.1f s\n", fc::curve(), now_s() - t0);
    return true;
}

int main(int argc, char** argv) {
    setvbuf(stdout, nullptr, _IOLBF, 0);
    // Options, anywhere among the arguments: --curve=g1|g2|both (default $BA_CURVE, else both) and
    // --g2-log=N (G2's points, default $BA_G2_LOG, else 22 or max_log if smaller); then positional.
    std::string curve = getenv("BA_CURVE") ? getenv("BA_CURVE") : "both";
    u32 g2_log = getenv("BA_G2_LOG") ? (u32)atoi(getenv("BA_G2_LOG")) : 0;
    std::vector<const char*> pos;
    for (int i = 1; i < argc; i++) {
        const std::string a = argv[i];
        if (a.compare(0, 8, "--curve=") == 0) curve = a.substr(8);
        else if (a == "--curve" && i + 1 < argc) curve = argv[++i];
        else if (a.compare(0, 9, "--g2-log=") == 0) g2_log = (u32)atoi(a.c_str() + 9);
        else if (a.compare(0, 2, "--") == 0) { fprintf(stderr, "batch_affine: unknown option %s\n", a.c_str()); return 2; }
        else pos.push_back(argv[i]);
    }
    for (char& ch : curve) ch = (char)tolower((unsigned char)ch);
    const bool do_g1 = curve == "g1" || curve == "both", do_g2 = curve == "g2" || curve == "both";
    if (!do_g1 && !do_g2) {
        fprintf(stderr, "batch_affine: --curve (BA_CURVE) must be g1, g2 or both, not %s\n", curve.c_str());
        return 2;
    }
    const u64 seed = pos.size() > 2 ? strtoull(pos[2], nullptr, 0) : (u64)std::chrono::steady_clock::now().time_since_epoch().count();
    u64 rng = seed;
    printf("seed %llu, curves: %s\n", (unsigned long long)seed, do_g1 && do_g2 ? "G1 and G2" : do_g1 ? "G1" : "G2");
    std::vector<Size> g1_sizes, g2_sizes;
#if BA_GPU
    const u32 max_log = pos.size() > 0 ? (u32)atoi(pos[0]) : 24;
    const u32 big_windows = pos.size() > 1 ? (u32)atoi(pos[1]) : 13;
    if (!g2_log) g2_log = std::min(22u, max_log);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs, %.1f GB\n", prop.name, prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
    const u32 inv_n = 1u << 16, add_n = 1u << 16;
    Tuning small;
    small.target_threads = 16; small.kmin = 1; small.kmax = 8; small.g = 4;
    const std::vector<Tuning> stress_tunings = {small, Tuning()};
    g1_sizes.push_back({std::min(20u, max_log), 16, 1});
    g1_sizes.push_back({max_log, 16, 1});
    g1_sizes.push_back({max_log, 20, 1});
    if (big_windows) g1_sizes.push_back({max_log, 20, big_windows});
    g2_sizes.push_back({std::min(20u, g2_log), 16, 1});
    g2_sizes.push_back({g2_log, 16, 1});
    g2_sizes.push_back({g2_log, 20, 1});
    if (big_windows) g2_sizes.push_back({g2_log, 20, big_windows});
    const bool timing = true;
    const Tuning tu;
#else
    const u32 max_log = 13;
    const u32 big_windows = 3;
    if (!g2_log) g2_log = 11;
    printf("host build: every kernel runs on the CPU, small sizes, no timing\n");
    const u32 inv_n = 300, add_n = 200;
    Tuning small;
    small.target_threads = 16; small.kmin = 1; small.kmax = 8; small.g = 4;
    Tuning odd;
    odd.target_threads = 5; odd.kmin = 3; odd.kmax = 64; odd.g = 3;
    const std::vector<Tuning> stress_tunings = {small, odd, Tuning()};
    g1_sizes.push_back({12, 5, 1});
    g1_sizes.push_back({13, 11, 1});
    g1_sizes.push_back({12, 9, big_windows});
    g1_sizes.push_back({13, 14, 1});
    g2_sizes.push_back({g2_log, 5, 1});
    g2_sizes.push_back({g2_log, 9, 1});
    g2_sizes.push_back({g2_log - 1, 8, big_windows});
    g2_sizes.push_back({g2_log, 12, 1});
    const bool timing = false;
    Tuning tu = small;
#endif
    const double t0 = now_s();
    check_constants();
    if (g_failures) {
        printf("RESULT FAIL (self-checks), %d failures\n", g_failures);
        return 1;
    }
#if BA_GPU
    measure_rates();
#endif
    bool ok = true;
    if (do_g1) ok = run_curve<fp_t>(max_log, g1_sizes, tu, stress_tunings, timing, inv_n, add_n, rng);
    if (ok && do_g2) ok = run_curve<fp2_t>(g2_log, g2_sizes, tu, stress_tunings, timing, inv_n, add_n, rng);
    if (!ok) {
        printf("RESULT FAIL (self-checks), %d failures\n", g_failures);
        return 1;
    }
#if !BA_GPU
    printf("\nhost: %d variant runs had their Fp operations counted, each equal to the plan's count unless a FAIL says otherwise\n", g_counted);
#endif
    printf("\nRESULT %s (%d failures), %.1f s\n", g_failures ? "FAIL" : "PASS", g_failures, now_s() - t0);
    return g_failures ? 1 : 0;
}

#endif  // BATCH_AFFINE_HARNESS
