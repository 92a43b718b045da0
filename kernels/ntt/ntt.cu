// Number-theoretic transforms over Fr (BLS12-381 scalars, Montgomery form, blst layout).
//
// Forward NTT, natural order in and out: bit-reverse, then radix-2 decimation-in-time stages.
// The stages run in groups of up to 10 inside shared memory (one block holds 2^10 elements:
// for a group starting at stage s, the elements whose index differs only in bits s..s+k-1,
// times 2^(10-k) neighbouring columns so that global accesses stay contiguous).
// The inverse is the forward transform followed by i -> n-i and a scale by 1/n; cosets scale
// element i by g^i before (forward) or by g^-i after (inverse). Twiddles ω^e for e < n/2 sit
// in one table built on the device from two small tables uploaded by the host.
// Launch geometry is chosen in src/backend/cuda/ntt.rs.
#include "../ff/bls12_381.cuh"

#define NTT_LOG_BLOCK 10

__device__ __forceinline__ u32 brev(u32 i, u32 log_n) { return log_n ? __brev(i) >> (32 - log_n) : 0; }

extern "C" __global__ void ntt_bit_reverse(fr_t* data, u32 log_n) {
    u32 n = 1u << log_n;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        u32 j = brev(i, log_n);
        if (i < j) { fr_t t = data[i]; data[i] = data[j]; data[j] = t; }
    }
}

// out[k] = hi[k >> log_lo] * lo[k & (2^log_lo - 1)] for k < count: powers of one root from
// the two halves of the exponent.
extern "C" __global__ void ntt_expand_powers(fr_t* out, const fr_t* hi, const fr_t* lo, u32 log_lo, u32 count) {
    u32 mask = (1u << log_lo) - 1;
    for (u32 k = blockIdx.x * blockDim.x + threadIdx.x; k < count; k += gridDim.x * blockDim.x)
        out[k] = hi[k >> log_lo] * lo[k & mask];
}

// data[i] *= hi[i >> log_lo] * lo[i & mask]: multiplies element i by g^i (coset shift).
extern "C" __global__ void ntt_scale_by_powers(fr_t* data, const fr_t* hi, const fr_t* lo, u32 log_lo, u32 n) {
    u32 mask = (1u << log_lo) - 1;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        data[i] = data[i] * (hi[i >> log_lo] * lo[i & mask]);
}

// Turns a forward transform into an inverse one: swaps i and n-i (0 < i < n/2) and scales
// every element by *scale (1/n). One thread per i in [0, n/2].
extern "C" __global__ void ntt_reverse_and_scale(fr_t* data, const fr_t* scale, u32 n) {
    fr_t s = *scale;
    u32 half = n >> 1;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i <= half; i += gridDim.x * blockDim.x) {
        if (i == 0 || i == half) {
            data[i] = data[i] * s;
        } else {
            fr_t a = data[i], b = data[n - i];
            data[i] = b * s;
            data[n - i] = a * s;
        }
    }
}

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

// The quotient's pointwise step on the coset: a = (a·b − c) · z_inv, z_inv = 1/(g^n − 1).
extern "C" __global__ void ntt_quotient_pointwise(fr_t* a, const fr_t* b, const fr_t* c, const fr_t* z_inv, u32 n) {
    fr_t zi = *z_inv;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        a[i] = (a[i] * b[i] - c[i]) * zi;
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
