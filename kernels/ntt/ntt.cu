// Number-theoretic transforms over Fr (BLS12-381 scalars, Montgomery form, blst layout).
//
// Forward NTT, natural order in and out: an in-place bit reversal (ntt_bit_reverse, 16×16 tiles
// through shared memory so that global accesses stay contiguous), then radix-2 decimation-in-time
// stages in a few passes (ntt_dit_pass). A pass runs up to 10 consecutive stages on tiles of 2^10
// elements: 2^k rows (the stage bits) × 2^(10-k) neighbouring columns. Each thread keeps 4 elements
// in registers and does two stages (a radix-4 step, 4 butterflies) between shared-memory
// exchanges, so a 10-stage pass needs 5 rounds, the first reading global memory directly and the
// last writing it. (Radix 8, 8 elements a thread, 3 stages a round, needs 124 registers: 16 warps
// an SM, latency-bound; radix 4 at 64 registers runs 32 and is 6-10% faster: kernels/NOTES.md.)
// Twiddles ω^e (e < n/2) come from one table built on the device.
// The inverse is the forward transform followed by i -> n-i and a scale by 1/n; cosets scale
// element i by g^i before (forward) or by g^-i after (inverse).
// Launch geometry is chosen in src/backend/cuda/ntt.rs (and mirrored in lab/harness).
#include "../ff/bls12_381.cuh"

#define NTT_LOG_BLOCK 10

__device__ __forceinline__ u32 brev(u32 i, u32 log_n) { return log_n ? __brev(i) >> (32 - log_n) : 0; }

// 32-byte elements as two 16-byte accesses (fr_t alone is only 4-byte aligned, which makes the
// compiler split it into eight 4-byte accesses). Device buffers are 256-byte aligned.
__device__ __forceinline__ fr_t load_fr(const fr_t* p) {
    const uint4* v = reinterpret_cast<const uint4*>(p);
    uint4 a = v[0], b = v[1];
    fr_t r;
    r.l[0] = a.x; r.l[1] = a.y; r.l[2] = a.z; r.l[3] = a.w;
    r.l[4] = b.x; r.l[5] = b.y; r.l[6] = b.z; r.l[7] = b.w;
    return r;
}
__device__ __forceinline__ void store_fr(fr_t* p, const fr_t& x) {
    uint4* v = reinterpret_cast<uint4*>(p);
    v[0] = make_uint4(x.l[0], x.l[1], x.l[2], x.l[3]);
    v[1] = make_uint4(x.l[4], x.l[5], x.l[6], x.l[7]);
}


#define NTT_BR_BITS 4  // bit-reversal tiles of 2^4 × 2^4 elements

// In place: data[i] <-> data[brev(i)]. For log_n >= 8 the index is [hi:4 | mid | lo:4] and
// brev maps tile `mid` (16 rows hi of 16 contiguous lo) onto tile brev(mid) transposed and
// bit-reversed, so one block of 256 threads swaps the pair of tiles (mid <= brev(mid); the other
// half of the blocks exit) with contiguous 512-byte row accesses. Grid: 2^(log_n-8) blocks.
// Smaller sizes: one thread per index, any grid.
extern "C" __global__ void ntt_bit_reverse(fr_t* data, u32 log_n) {
    const u32 n = 1u << log_n;
    if (log_n < 2 * NTT_BR_BITS) {
        for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
            u32 j = brev(i, log_n);
            if (i < j) { fr_t t = data[i]; data[i] = data[j]; data[j] = t; }
        }
        return;
    }
    // word-major, rows padded to 17 so that transposed reads spread over the banks
    __shared__ u32 tile[2][8][16 * 17];
    const u32 mid_bits = log_n - 2 * NTT_BR_BITS;
    const u32 m = blockIdx.x, m_rev = brev(m, mid_bits);
    if (m_rev < m) return;
    const u32 row = threadIdx.x >> 4, col = threadIdx.x & 15;
    const size_t row_stride = (size_t)1 << (log_n - NTT_BR_BITS);
    const size_t at0 = row * row_stride + ((size_t)m << NTT_BR_BITS) + col;
    const size_t at1 = row * row_stride + ((size_t)m_rev << NTT_BR_BITS) + col;
    fr_t a = load_fr(data + at0), b = load_fr(data + at1);
#pragma unroll
    for (int w = 0; w < 8; w++) { tile[0][w][row * 17 + col] = a.l[w]; tile[1][w][row * 17 + col] = b.l[w]; }
    __syncthreads();
    // position (row, m, col) takes the element from (brev col, m_rev, brev row)
    const u32 src = (__brev(col) >> 28) * 17 + (__brev(row) >> 28);
#pragma unroll
    for (int w = 0; w < 8; w++) { a.l[w] = tile[1][w][src]; b.l[w] = tile[0][w][src]; }
    store_fr(data + at0, a);
    if (m_rev != m) store_fr(data + at1, b);
}

// out[k] = hi[k >> log_lo] * lo[k & (2^log_lo - 1)] for k < count: powers of one root from
// the two halves of the exponent.
extern "C" __global__ void ntt_expand_powers(fr_t* out, const fr_t* hi, const fr_t* lo, u32 log_lo, u32 count) {
    u32 mask = (1u << log_lo) - 1;
    for (u32 k = blockIdx.x * blockDim.x + threadIdx.x; k < count; k += gridDim.x * blockDim.x)
        store_fr(out + k, load_fr(hi + (k >> log_lo)) * load_fr(lo + (k & mask)));
}

// data[i] *= hi[i >> log_lo] * lo[i & mask]: multiplies element i by g^i (coset shift).
extern "C" __global__ void ntt_scale_by_powers(fr_t* data, const fr_t* hi, const fr_t* lo, u32 log_lo, u32 n) {
    u32 mask = (1u << log_lo) - 1;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        store_fr(data + i, load_fr(data + i) * (load_fr(hi + (i >> log_lo)) * load_fr(lo + (i & mask))));
}

// The inverse transform's last step fused with a scale by powers: for 0 <= i <= n/2, element i
// takes the value at n-i (mod n) times s_i = hi[i >> log_lo]·lo[i & mask], and element n-i the
// value at i times s_(n-i). With s_i = g^i/n this is the inverse followed by the coset shift in
// one pass over the data instead of two (the quotient's three interpolations and its last one).
extern "C" __global__ void ntt_reverse_and_scale_by_powers(fr_t* data, const fr_t* hi, const fr_t* lo, u32 log_lo,
                                                           u32 n) {
    const u32 mask = (1u << log_lo) - 1, half = n >> 1;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i <= half; i += gridDim.x * blockDim.x) {
        const fr_t si = load_fr(hi + (i >> log_lo)) * load_fr(lo + (i & mask));
        if (i == 0 || i == half) {
            store_fr(data + i, load_fr(data + i) * si);
        } else {
            const u32 j = n - i;
            const fr_t sj = load_fr(hi + (j >> log_lo)) * load_fr(lo + (j & mask));
            fr_t a = load_fr(data + i), b = load_fr(data + j);
            store_fr(data + i, b * si);
            store_fr(data + j, a * sj);
        }
    }
}

// Turns a forward transform into an inverse one: swaps i and n-i (0 < i < n/2) and scales
// every element by *scale (1/n). One thread per i in [0, n/2].
extern "C" __global__ void ntt_reverse_and_scale(fr_t* data, const fr_t* scale, u32 n) {
    fr_t s = *scale;
    u32 half = n >> 1;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i <= half; i += gridDim.x * blockDim.x) {
        if (i == 0 || i == half) {
            store_fr(data + i, load_fr(data + i) * s);
        } else {
            fr_t a = load_fr(data + i), b = load_fr(data + n - i);
            store_fr(data + i, b * s);
            store_fr(data + n - i, a * s);
        }
    }
}

// Radix-2, one butterfly per thread per stage: kept for domains of 2 and 4 elements, under
// ntt_dit_pass's 8-element minimum tile.
// Runs DIT stages first_stage .. first_stage+num_stages-1 (stage t joins pairs 2^t apart).
// Block: 2^(log_block-1) threads over 2^log_block elements: 2^num_stages rows ("mid" bits
// at first_stage) × 2^(log_block-num_stages) columns (low bits), needing
// log_block - num_stages <= first_stage. twiddles[e] = ω^e, e < n/2.
extern "C" __global__ void ntt_dit_stages(fr_t* data, const fr_t* twiddles, u32 log_n, u32 first_stage,
                                          u32 num_stages, u32 log_block) {
    __shared__ fr_t tile[1 << NTT_LOG_BLOCK];
    const u32 s = first_stage, k = num_stages;
    const u32 log_cols = log_block - k;
    const u32 col_mask = (1u << log_cols) - 1;
    // block -> (hi, column group)
    const u32 col_groups = (1u << s) >> log_cols;
    const u32 hi = blockIdx.x / col_groups;
    const u32 lo0 = (blockIdx.x % col_groups) << log_cols;
    const size_t base = ((size_t)hi << (s + k)) + lo0;

    const u32 elems = 1u << log_block;
    for (u32 L = threadIdx.x; L < elems; L += blockDim.x) {
        u32 col = L & col_mask, mid = L >> log_cols;
        tile[L] = data[base + ((size_t)mid << s) + col];
    }
    __syncthreads();

    const u32 T = threadIdx.x;  // one butterfly per thread per stage
    const u32 col = T & col_mask;
    const u32 p = T >> log_cols;  // pair index among 2^(k-1)
    for (u32 r = 0; r < k; r++) {
        u32 low = p & ((1u << r) - 1), high = p >> r;
        u32 mid0 = (high << (r + 1)) | low, mid1 = mid0 | (1u << r);
        u32 i0 = (mid0 << log_cols) | col, i1 = (mid1 << log_cols) | col;
        // exponent of ω: (position inside the half block) · n / 2^(t+1), t = s + r
        size_t j = ((size_t)low << s) + lo0 + col;
        fr_t w = twiddles[j << (log_n - (s + r + 1))];
        fr_t u = tile[i0], v = tile[i1] * w;
        tile[i0] = u + v;
        tile[i1] = u - v;
        __syncthreads();
    }

    for (u32 L = threadIdx.x; L < elems; L += blockDim.x) {
        u32 c = L & col_mask, mid = L >> log_cols;
        data[base + ((size_t)mid << s) + c] = tile[L];
    }
}

#define NTT_LOG_TILE 10
#ifndef NTT_ROUND_BITS
#define NTT_ROUND_BITS 2  // stages per shared-memory exchange in ntt_dit_pass (LOG_PER_THREAD in ntt.rs)
#endif
#define NTT_PER_THREAD (1 << NTT_ROUND_BITS)  // elements per thread in ntt_dit_pass
#ifndef NTT_MIN_BLOCKS
#define NTT_MIN_BLOCKS 4  // blocks per SM (of 256 threads at radix 4) that ntt_dit_pass's registers must allow
#endif

// Tile element L's word w lives at tile[w][swizzle(L)]: the xor spreads a warp's 32 accesses
// over the banks for every stage pattern (at most 4-way, mostly conflict-free).
__device__ __forceinline__ u32 tile_swizzle(u32 L) { return L ^ ((L >> 5) & 31); }

// The tile indices of thread T's 2^R elements in a round whose q (<= R) stages start at tile bit
// p0: element i sits at L0 | off[i], i's low q bits on the stage bits p0 .. p0+q-1 and its other
// bits on the lowest free tile bits; the thread index fills the remaining bits in increasing
// order. ntt_dit_pass and ntt_dif_inverse_pass share it.
__device__ __forceinline__ void round_layout(u32 p0, u32 q, u32 log_tile, u32 T, u32& L0, u32 (&off)[NTT_PER_THREAD]) {
    u32 e_pos[NTT_ROUND_BITS], used = ((1u << q) - 1) << p0;
#pragma unroll
    for (int c = 0; c < NTT_ROUND_BITS; c++) {
        if ((u32)c < q) {
            e_pos[c] = p0 + c;
        } else {
            u32 p = __ffs(~used) - 1;
            e_pos[c] = p;
            used |= 1u << p;
        }
    }
    L0 = 0;
    for (u32 p = 0, tb = 0; p < log_tile; p++) {
        if (!((used >> p) & 1)) { L0 |= ((T >> tb) & 1) << p; tb++; }
    }
#pragma unroll
    for (int i = 0; i < NTT_PER_THREAD; i++) {
        off[i] = 0;
#pragma unroll
        for (int c = 0; c < NTT_ROUND_BITS; c++) off[i] |= ((i >> c) & 1) << e_pos[c];
    }
}

// The twiddle index j of a butterfly at stage b + u of a pass starting at stage s (ω^(j·n/2^(t+1)),
// j = the element's global index mod 2^t): from its tile index L, the tile's first column lo0,
// and mid_mask = 2^(b+u) - 1 over the stage bits below it.
__device__ __forceinline__ u32 twiddle_index(u32 L, u32 log_cols, u32 col_mask, u32 mid_mask, u32 s, u32 lo0) {
    return (((L >> log_cols) & mid_mask) << s) + lo0 + (L & col_mask);
}

// A round's elements from / to the shared tile (word-major, swizzled), at tile indices L0 | off[i].
__device__ __forceinline__ void tile_load(fr_t (&x)[NTT_PER_THREAD], const u32 (*tile)[1 << NTT_LOG_TILE], u32 L0,
                                          const u32 (&off)[NTT_PER_THREAD]) {
#pragma unroll
    for (int i = 0; i < NTT_PER_THREAD; i++) {
        u32 at = tile_swizzle(L0 | off[i]);
#pragma unroll
        for (int w = 0; w < 8; w++) x[i].l[w] = tile[w][at];
    }
}
__device__ __forceinline__ void tile_store(const fr_t (&x)[NTT_PER_THREAD], u32 (*tile)[1 << NTT_LOG_TILE], u32 L0,
                                           const u32 (&off)[NTT_PER_THREAD]) {
#pragma unroll
    for (int i = 0; i < NTT_PER_THREAD; i++) {
        u32 at = tile_swizzle(L0 | off[i]);
#pragma unroll
        for (int w = 0; w < 8; w++) tile[w][at] = x[i].l[w];
    }
}

// Runs DIT stages first_stage .. first_stage+num_stages-1 (stage t joins pairs 2^t apart, with
// twiddle ω^(j·n/2^(t+1)) for j = index mod 2^t) on the bit-reversed data.
// Tile: 2^log_tile elements = 2^k rows ("mid" bits at first_stage) × 2^(log_tile-k) columns (the
// low bits), needing log_tile - k <= first_stage, 3 <= log_tile <= 10. Block: 2^(log_tile-R)
// threads, R = NTT_ROUND_BITS; grid: n >> log_tile blocks. twiddles[e] = ω^e, e < n/2.
// Round r handles stages b = R·r .. b+q-1 (q <= R): a thread's 2^R elements are the tile indices
// L0 | off[i], where i's low q bits sit on those stage bits and its other bits on the lowest free
// tile bits; the thread index fills the remaining bits.
extern "C" __global__ void __launch_bounds__(1 << (NTT_LOG_TILE - NTT_ROUND_BITS), NTT_MIN_BLOCKS)
ntt_dit_pass(fr_t* data, const fr_t* twiddles, u32 log_n, u32 first_stage, u32 num_stages, u32 log_tile) {
    __shared__ u32 tile[8][1 << NTT_LOG_TILE];
    const u32 s = first_stage, k = num_stages;
    const u32 log_cols = log_tile - k;
    const u32 col_mask = (1u << log_cols) - 1;
    // block -> (hi: the bits above the pass, lo0: first column)
    const u32 log_col_groups = s - log_cols;
    const u32 hi = blockIdx.x >> log_col_groups;
    const u32 lo0 = (blockIdx.x & ((1u << log_col_groups) - 1)) << log_cols;
    fr_t* base = data + ((size_t)hi << (s + k)) + lo0;
    const u32 T = threadIdx.x;

    fr_t x[NTT_PER_THREAD];
    for (u32 b = 0; b < k; b += NTT_ROUND_BITS) {
        const u32 q = min((u32)NTT_ROUND_BITS, k - b);
        u32 L0, off[NTT_PER_THREAD];
        round_layout(log_cols + b, q, log_tile, T, L0, off);

        if (b == 0) {
#pragma unroll
            for (int i = 0; i < NTT_PER_THREAD; i++) {
                u32 L = L0 | off[i];
                x[i] = load_fr(base + ((size_t)(L >> log_cols) << s) + (L & col_mask));
            }
        } else {
            tile_load(x, tile, L0, off);
        }

        if (q == NTT_ROUND_BITS) {
            // A full round: the element bits are the R stage bits, and a butterfly's twiddle
            // depends only on the element bits below its stage. Stage u's 2^(R-1) butterflies
            // need 2^u distinct twiddles (at radix 8, 7 a round instead of 12): each is loaded
            // once, for the butterflies i0 = key | hi << (u + 1) that share it.
#pragma unroll
            for (int u = 0; u < NTT_ROUND_BITS; u++) {
                const u32 t = s + b + u;  // global stage
                const u32 mid_mask = (1u << (b + u)) - 1;
                const u32 shift = log_n - 1 - t;
#pragma unroll
                for (int key = 0; key < (1 << u); key++) {
                    const u32 L = L0 | off[key];
                    const u32 j = twiddle_index(L, log_cols, col_mask, mid_mask, s, lo0);
                    // ω^0 = 1: all of stage 0, half of stage 1, ... (warp-uniform in the first round)
                    const bool twiddled = j != 0;
                    fr_t w;
                    if (twiddled) w = load_fr(twiddles + ((size_t)j << shift));
#pragma unroll
                    for (int hi = 0; hi < ((NTT_PER_THREAD / 2) >> u); hi++) {
                        const int i0 = key | (hi << (u + 1)), i1 = i0 | (1 << u);
                        fr_t v = x[i1];
                        if (twiddled) v = v * w;
                        x[i1] = x[i0] - v;
                        x[i0] = x[i0] + v;
                    }
                }
            }
        } else {
            // The last round of a pass whose stages R does not divide: free tile bits carry the
            // other element bits, and they can change the twiddle, so each butterfly loads its own.
#pragma unroll
            for (int u = 0; u < NTT_ROUND_BITS - 1; u++) {
                if ((u32)u >= q) break;
                const u32 t = s + b + u;  // global stage
                const u32 mid_mask = (1u << (b + u)) - 1;
                const u32 shift = log_n - 1 - t;
#pragma unroll
                for (int i0 = 0; i0 < NTT_PER_THREAD; i0++) {
                    if (i0 & (1 << u)) continue;
                    const int i1 = i0 | (1 << u);
                    fr_t v = x[i1];
                    u32 L = L0 | off[i0];
                    u32 j = twiddle_index(L, log_cols, col_mask, mid_mask, s, lo0);
                    if (j != 0) v = v * load_fr(twiddles + ((size_t)j << shift));
                    x[i1] = x[i0] - v;
                    x[i0] = x[i0] + v;
                }
            }
        }

        if (b + q == k) {
#pragma unroll
            for (int i = 0; i < NTT_PER_THREAD; i++) {
                u32 L = L0 | off[i];
                store_fr(base + ((size_t)(L >> log_cols) << s) + (L & col_mask), x[i]);
            }
        } else {
            tile_store(x, tile, L0, off);
            __syncthreads();
        }
    }
}

// The inverse transform by decimation in frequency, natural order in, bit-reversed order out:
// runs stages first_stage+num_stages-1 down to first_stage (stage t joins pairs 2^t apart, j =
// index mod 2^t) as (u, v) -> (u + v, (u - v)·ω^(-j·n/2^(t+1))), each the inverse of
// ntt_dit_pass's butterfly for stage t times two. Run over every stage (passes from the top), it
// leaves n·c[brev(p)] at position p, c the inverse transform: ready for ntt_dit_pass without a
// bit reversal. ω^-e = -ω^(n/2-e) for 0 < e < n/2, so the twiddle table serves both directions.
// Same tile, rounds and launch geometry as ntt_dit_pass, the rounds in reverse order. With
// SCALED, the pass over stage 0 multiplies position p by hi[r >> log_lo]·lo[r & mask], r = brev(p)
// (the quotient's g^r/n), as it stores.
template <bool SCALED>
__device__ __forceinline__ void dif_inverse_pass(fr_t* data, const fr_t* twiddles, u32 log_n, u32 first_stage,
                                                 u32 num_stages, u32 log_tile, const fr_t* scale_hi,
                                                 const fr_t* scale_lo, u32 scale_log_lo) {
    __shared__ u32 tile[8][1 << NTT_LOG_TILE];
    const u32 s = first_stage, k = num_stages;
    const u32 log_cols = log_tile - k;
    const u32 col_mask = (1u << log_cols) - 1;
    const u32 log_col_groups = s - log_cols;
    const u32 hi = blockIdx.x >> log_col_groups;
    const u32 lo0 = (blockIdx.x & ((1u << log_col_groups) - 1)) << log_cols;
    const size_t base_at = ((size_t)hi << (s + k)) + lo0;
    fr_t* base = data + base_at;
    const u32 T = threadIdx.x;
    const size_t half = (size_t)1 << (log_n - 1);

    fr_t x[NTT_PER_THREAD];
    const u32 rounds = (k + NTT_ROUND_BITS - 1) / NTT_ROUND_BITS;
    for (u32 r = rounds; r-- > 0;) {
        const u32 b = r * NTT_ROUND_BITS;
        const u32 q = min((u32)NTT_ROUND_BITS, k - b);
        u32 L0, off[NTT_PER_THREAD];
        round_layout(log_cols + b, q, log_tile, T, L0, off);

        if (r + 1 == rounds) {
#pragma unroll
            for (int i = 0; i < NTT_PER_THREAD; i++) {
                u32 L = L0 | off[i];
                x[i] = load_fr(base + ((size_t)(L >> log_cols) << s) + (L & col_mask));
            }
        } else {
            tile_load(x, tile, L0, off);
        }

        // Stages from the round's top down; a butterfly's twiddle depends on the element bits
        // below its stage (and, in a partial round, on the free tile bits), so each loads its own.
#pragma unroll
        for (int u = NTT_ROUND_BITS - 1; u >= 0; u--) {
            if ((u32)u >= q) continue;
            const u32 t = s + b + u;  // global stage
            const u32 mid_mask = (1u << (b + u)) - 1;
            const u32 shift = log_n - 1 - t;
#pragma unroll
            for (int i0 = 0; i0 < NTT_PER_THREAD; i0++) {
                if (i0 & (1 << u)) continue;
                const int i1 = i0 | (1 << u);
                const u32 L = L0 | off[i0];
                const u32 j = twiddle_index(L, log_cols, col_mask, mid_mask, s, lo0);
                const fr_t sum = x[i0] + x[i1];
                if (j != 0) {
                    // (u - v)·ω^-e = (v - u)·ω^(n/2 - e)
                    x[i1] = (x[i1] - x[i0]) * load_fr(twiddles + (half - ((size_t)j << shift)));
                } else {
                    x[i1] = x[i0] - x[i1];
                }
                x[i0] = sum;
            }
        }

        if (r == 0) {
#pragma unroll
            for (int i = 0; i < NTT_PER_THREAD; i++) {
                u32 L = L0 | off[i];
                const size_t at = ((size_t)(L >> log_cols) << s) + (L & col_mask);
                if (SCALED) {
                    const u32 rev = brev((u32)(base_at + at), log_n);
                    const u32 mask = (1u << scale_log_lo) - 1;
                    x[i] = x[i] * (load_fr(scale_hi + (rev >> scale_log_lo)) * load_fr(scale_lo + (rev & mask)));
                }
                store_fr(base + at, x[i]);
            }
        } else {
            tile_store(x, tile, L0, off);
            __syncthreads();
        }
    }
}

// The two builds of dif_inverse_pass (same parameters; the plain one ignores the scale tables).
extern "C" __global__ void __launch_bounds__(1 << (NTT_LOG_TILE - NTT_ROUND_BITS), NTT_MIN_BLOCKS)
ntt_dif_inverse_pass(fr_t* data, const fr_t* twiddles, u32 log_n, u32 first_stage, u32 num_stages, u32 log_tile,
                     const fr_t* scale_hi, const fr_t* scale_lo, u32 scale_log_lo) {
    dif_inverse_pass<false>(data, twiddles, log_n, first_stage, num_stages, log_tile, scale_hi, scale_lo,
                            scale_log_lo);
}
extern "C" __global__ void __launch_bounds__(1 << (NTT_LOG_TILE - NTT_ROUND_BITS), NTT_MIN_BLOCKS)
ntt_dif_inverse_pass_scaled(fr_t* data, const fr_t* twiddles, u32 log_n, u32 first_stage, u32 num_stages,
                            u32 log_tile, const fr_t* scale_hi, const fr_t* scale_lo, u32 scale_log_lo) {
    dif_inverse_pass<true>(data, twiddles, log_n, first_stage, num_stages, log_tile, scale_hi, scale_lo,
                           scale_log_lo);
}

// The quotient's pointwise step on the coset: a = (a·b − c) · z_inv, z_inv = 1/(g^n − 1).
extern "C" __global__ void ntt_quotient_pointwise(fr_t* a, const fr_t* b, const fr_t* c, const fr_t* z_inv, u32 n) {
    fr_t zi = *z_inv;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        store_fr(a + i, (load_fr(a + i) * load_fr(b + i) - load_fr(c + i)) * zi);
}

// Throughput microkernels for the bench's floor: `iters` dependent multiplications per thread
// over 4 independent chains.
extern "C" __global__ void ff_fr_mul_rate(fr_t* data, u32 iters) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    fr_t x0 = data[4 * i], x1 = data[4 * i + 1], x2 = data[4 * i + 2], x3 = data[4 * i + 3];
    fr_t y = x0 + x3;
    for (u32 k = 0; k < iters; k++) { x0 = x0 * y; x1 = x1 * y; x2 = x2 * y; x3 = x3 * y; }
    data[4 * i] = x0; data[4 * i + 1] = x1; data[4 * i + 2] = x2; data[4 * i + 3] = x3;
}

extern "C" __global__ void ff_fp_mul_rate(fp_t* data, u32 iters) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    fp_t x0 = data[2 * i], x1 = data[2 * i + 1];
    fp_t y = x0 + x1;
    for (u32 k = 0; k < iters; k++) { x0 = x0 * y; x1 = x1 * y; }
    data[2 * i] = x0; data[2 * i + 1] = x1;
}

extern "C" __global__ void ff_fp_sqr_rate(fp_t* data, u32 iters) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    fp_t x0 = data[2 * i], x1 = data[2 * i + 1];
    for (u32 k = 0; k < iters; k++) { x0 = x0.sqr(); x1 = x1.sqr(); }
    data[2 * i] = x0; data[2 * i + 1] = x1;
}
