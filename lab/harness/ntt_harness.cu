// Standalone correctness harness and benchmark for the field arithmetic and the Fr NTT kernels
// (kernels/ff, kernels/ntt), built with nvcc alone: no Rust, no cudarc.
//
//   nvcc -arch=sm_90 -O3 -DNTT_HARNESS -o ntt_harness lab/harness/ntt_harness.cu
//   ./ntt_harness [max_log=27 (0: checks only)] [check_max_log=22] [field_log=24]
// lab/harness/run.sh builds it and runs checks, benchmarks and compute-sanitizer on a GPU machine.
//
// Checks (fresh random inputs every run: the seed comes from the clock and is printed):
//  * PTX field arithmetic (mont_ptx.cuh) against the portable C++ CIOS for Fr and Fp: mul, add,
//    sub on millions of random pairs plus every pair of edge values (0, 1, 2, P-1, P-2, ...).
//  * The NTT as src/backend/cuda/ntt.rs drives it (bit reversal + ntt_dit_pass passes, same plan)
//    against a reference: naive bit reversal + one global radix-2 stage per launch with the portable
//    multiplication and a twiddle table built on the host, for 2^1..2^22; that reference itself
//    against an O(n^2) DFT up to 2^11; inverse(forward(x)) == x; coset forward against scale +
//    reference forward; coset inverse(coset forward(x)) == x.
// Then times (cudaEvent, median of 5): Fr/Fp multiplication rate (PTX and portable), the forward
// NTT 2^20..2^max_log (default 27) with a per-kernel breakdown, the inverse, and a device copy.
// Exit status 1 on any mismatch or CUDA error.
//
// Everything sits under NTT_HARNESS: without the macro this file compiles to nothing (it lies
// outside kernels/, which build.rs compiles into the crate).
#ifdef NTT_HARNESS
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../../kernels/ntt/ntt.cu"

#define CK(x)                                                                                   \
    do {                                                                                        \
        cudaError_t e_ = (x);                                                                   \
        if (e_ != cudaSuccess) {                                                                \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__,     \
                    __LINE__, cudaGetErrorString(e_));                                          \
            exit(2);                                                                            \
        }                                                                                       \
    } while (0)
#define CKL() CK(cudaGetLastError())

static int g_failures = 0;
static void expect(bool ok, const char* what, int log_n = -1) {
    if (!ok) {
        g_failures++;
        printf("FAIL %s", what);
        if (log_n >= 0) printf(" at 2^%d", log_n);
        printf("\n");
    }
}

// ---- host Fr helpers (portable arithmetic) --------------------------------------------------
static fr_t fr_from(const u32 (&l)[8]) { fr_t r; for (int i = 0; i < 8; i++) r.l[i] = l[i]; return r; }
// 2^32-th root of unity 7^((r-1)/2^32) and the generator 7, Montgomery form (bellperson's choice)
static const u32 ROOT32[8] = {0x5f0e466a, 0xb9b58d8c, 0x1819d7ec, 0x5b1b4c80, 0x52a31e64, 0x0af53ae3, 0x19e9b27b, 0x5bf3adda};
static const u32 SEVEN[8] = {0xfffffff1, 0x0000000e, 0x00189c0f, 0x17e363d3, 0x6f8457b0, 0xff9c5787, 0x8fc5a8c4, 0x35133220};
static fr_t h_pow(fr_t b, const u32* e, int limbs) {
    fr_t r = fr_one();
    for (int i = limbs * 32 - 1; i >= 0; i--) {
        r = r * r;
        if ((e[i / 32] >> (i % 32)) & 1) r = r * b;
    }
    return r;
}
static fr_t h_inv(fr_t x) {
    u32 e[8];
    for (int i = 0; i < 8; i++) e[i] = FR_MODULUS[i];
    // r - 2: r's low limb is 1, so the subtraction borrows from limb 1 (which is nonzero)
    e[0] = FR_MODULUS[0] - 2;
    e[1] = FR_MODULUS[1] - 1;
    return h_pow(x, e, 8);
}
static fr_t h_from_u64(u64 v) {  // v · R mod r: Montgomery form of a small integer
    fr_t a = fr_t::zero();
    a.l[0] = (u32)v; a.l[1] = (u32)(v >> 32);
    static const u32 R2[8] = {0xf3f29c6d, 0xc999e990, 0x87925c23, 0x2b6cedcb, 0x7254398f, 0x05d31496, 0x9f59ff11, 0x0748d9d9};
    return a * fr_from(R2);
}
static fr_t domain_root(int log_n) {
    fr_t w = fr_from(ROOT32);
    for (int i = log_n; i < 32; i++) w = w * w;
    return w;
}

// ---- device random inputs ---------------------------------------------------------------------
__device__ __forceinline__ u64 splitmix(u64& s) {
    u64 z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// Uniform-ish field elements: random limbs, the top limb below the modulus's top limb.
template <class F, int N>
__global__ void fill_random(F* out, size_t count, u64 seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        u64 s = seed ^ (i * 0xD1B54A32D192ED03ull);
        F x;
        for (int j = 0; j < N; j += 2) {
            u64 v = splitmix(s);
            x.l[j] = (u32)v;
            if (j + 1 < N) x.l[j + 1] = (u32)(v >> 32);
        }
        const u32* p = F::modulus().l;
        x.l[N - 1] = (u32)(((u64)x.l[N - 1] * p[N - 1]) >> 32);
        out[i] = x;
    }
}

// The generated multiplications by name, for fields of N limbs (8: Fr, 12: Fp).
template <int N> struct mul_variants;
template <> struct mul_variants<8> {
    static __device__ __forceinline__ void rows(u32* r, const u32* a, const u32* b) { fr_mul_rows(r, a, b); }
    static __device__ __forceinline__ void eo(u32* r, const u32* a, const u32* b) { fr_mul_eo(r, a, b); }
    static __device__ __forceinline__ void eo_cc(u32* r, const u32* a, const u32* b) { fr_mul_eo_cc(r, a, b); }
};
template <> struct mul_variants<12> {
    static __device__ __forceinline__ void rows(u32* r, const u32* a, const u32* b) { fp_mul_rows(r, a, b); }
    static __device__ __forceinline__ void eo(u32* r, const u32* a, const u32* b) { fp_mul_eo(r, a, b); }
    static __device__ __forceinline__ void eo_cc(u32* r, const u32* a, const u32* b) { fp_mul_eo_cc(r, a, b); }
};

// a[i] op b[i] through PTX (the operators, and every generated multiplication) and portable
// code; counts mismatches.
template <class F, int N>
__global__ void compare_arith(const F* a, const F* b, size_t count, unsigned long long* bad) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count; i += (size_t)gridDim.x * blockDim.x) {
        F x = a[i], y = b[i];
        F want = F::mul_inline(x, y), r1, r2, r3;
        mul_variants<N>::rows(r1.l, x.l, y.l);
        mul_variants<N>::eo(r2.l, x.l, y.l);
        mul_variants<N>::eo_cc(r3.l, x.l, y.l);
        bool ok = (x * y) == want && r1 == want && r2 == want && r3 == want;
        ok &= (x + y) == F::add_portable(x, y);
        ok &= (x - y) == F::sub_portable(x, y);
        if (!ok) atomicAdd(bad, 1ull);
    }
}

// Multiplication throughput: 4 independent chains per thread of `iters` dependent products.
// variant: 0 portable, 1 rows, 2 eo, 3 eo_cc.
template <class F, int N, int V>
__global__ void mul_rate(F* data, u32 iters) {
    u32 i = blockIdx.x * blockDim.x + threadIdx.x;
    F x[4], y = data[4 * i + 3];
    for (int c = 0; c < 4; c++) x[c] = data[4 * i + c];
    for (u32 k = 0; k < iters; k++) {
#pragma unroll
        for (int c = 0; c < 4; c++) {
            F r;
            if (V == 0) r = F::mul_inline(x[c], y);
            if (V == 1) mul_variants<N>::rows(r.l, x[c].l, y.l);
            if (V == 2) mul_variants<N>::eo(r.l, x[c].l, y.l);
            if (V == 3) mul_variants<N>::eo_cc(r.l, x[c].l, y.l);
            x[c] = r;
        }
    }
    for (int c = 0; c < 4; c++) data[4 * i + c] = x[c];
}

// ---- reference NTT (portable arithmetic, one stage per launch) --------------------------------
__global__ void ref_bit_reverse(fr_t* d, u32 log_n) {
    u32 n = 1u << log_n;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        u32 j = brev(i, log_n);
        if (i < j) { fr_t t = d[i]; d[i] = d[j]; d[j] = t; }
    }
}
__global__ void ref_stage(fr_t* d, const fr_t* w, u32 log_n, u32 t) {
    u32 half = 1u << (log_n - 1);
    for (u32 p = blockIdx.x * blockDim.x + threadIdx.x; p < half; p += gridDim.x * blockDim.x) {
        u32 j = p & ((1u << t) - 1);
        u32 i0 = ((p >> t) << (t + 1)) | j, i1 = i0 | (1u << t);
        fr_t v = fr_t::mul_inline(d[i1], w[(size_t)j << (log_n - 1 - t)]);
        fr_t u = d[i0];
        d[i0] = fr_t::add_portable(u, v);
        d[i1] = fr_t::sub_portable(u, v);
    }
}
// out[k] = sum_i x[i] ω^(ik): ω^e = W[e] for e < n/2, -W[e - n/2] above.
__global__ void naive_dft(const fr_t* x, fr_t* out, const fr_t* w, u32 log_n) {
    u32 n = 1u << log_n, half = n >> 1;
    for (u32 k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        fr_t acc = fr_t::zero();
        for (u32 i = 0; i < n; i++) {
            u32 e = (u32)(((u64)i * k) & (n - 1));
            fr_t wi = e < half ? w[e] : fr_t::sub_portable(fr_t::zero(), w[e - half]);
            acc = fr_t::add_portable(acc, fr_t::mul_inline(x[i], wi));
        }
        out[k] = acc;
    }
}
__global__ void ref_scale(fr_t* d, const fr_t* powers, u32 n) {
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        d[i] = fr_t::mul_inline(d[i], powers[i]);
}
__global__ void count_diff(const fr_t* a, const fr_t* b, size_t n, unsigned long long* bad) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        if (a[i] != b[i]) atomicAdd(bad, 1ull);
}
static unsigned long long* g_bad;
static unsigned long long diff(const fr_t* a, const fr_t* b, size_t n) {
    CK(cudaMemset(g_bad, 0, 8));
    count_diff<<<1024, 256>>>(a, b, n, g_bad);
    CKL();
    unsigned long long h;
    CK(cudaMemcpy(&h, g_bad, 8, cudaMemcpyDeviceToHost));
    return h;
}
static u32 grid_for(size_t n) { return (u32)std::min<size_t>(std::max<size_t>((n + 255) / 256, 1), 65535 * 4); }

// ---- the production path, mirroring src/backend/cuda/ntt.rs -----------------------------------
struct Tables {
    int log_n;
    fr_t* twiddles;  // ω^e, e < n/2 (device-built, as in ntt.rs)
    fr_t *coset_hi, *coset_lo, *coset_inv_hi, *coset_inv_lo;
    u32 log_lo;
    fr_t *n_inv;
};
static fr_t* upload(const std::vector<fr_t>& v) {
    fr_t* d;
    CK(cudaMalloc(&d, std::max<size_t>(v.size(), 1) * sizeof(fr_t)));
    CK(cudaMemcpy(d, v.data(), v.size() * sizeof(fr_t), cudaMemcpyHostToDevice));
    return d;
}
static void split_powers(fr_t base, int log_count, fr_t** hi, fr_t** lo, u32* log_lo) {
    u32 ll = (log_count + 1) / 2;
    std::vector<fr_t> L, H;
    fr_t acc = fr_one();
    for (u32 i = 0; i < (1u << ll); i++) { L.push_back(acc); acc = acc * base; }
    fr_t step = acc;
    acc = fr_one();
    for (u32 i = 0; i < (1u << (log_count - std::min<u32>(ll, log_count))); i++) { H.push_back(acc); acc = acc * step; }
    *hi = upload(H); *lo = upload(L); *log_lo = ll;
}
static Tables build_tables(int log_n) {
    Tables t;
    t.log_n = log_n;
    size_t n = (size_t)1 << log_n, half = std::max<size_t>(n / 2, 1);
    fr_t *hi, *lo; u32 ll;
    int log_half = 0; while (((size_t)1 << log_half) < half) log_half++;
    split_powers(domain_root(log_n), log_half, &hi, &lo, &ll);
    CK(cudaMalloc(&t.twiddles, half * sizeof(fr_t)));
    ntt_expand_powers<<<grid_for(half), 256>>>(t.twiddles, hi, lo, ll, (u32)half);
    CKL();
    CK(cudaDeviceSynchronize());
    CK(cudaFree(hi)); CK(cudaFree(lo));
    fr_t g = fr_from(SEVEN);
    split_powers(g, log_n, &t.coset_hi, &t.coset_lo, &t.log_lo);
    u32 ll2;
    split_powers(h_inv(g), log_n, &t.coset_inv_hi, &t.coset_inv_lo, &ll2);
    t.n_inv = upload({h_inv(h_from_u64(n))});
    return t;
}
static void free_tables(Tables& t) {
    for (fr_t* p : {t.twiddles, t.coset_hi, t.coset_lo, t.coset_inv_hi, t.coset_inv_lo, t.n_inv}) CK(cudaFree(p));
}
static std::vector<std::pair<u32, u32>> pass_plan(u32 log_n) {  // = ntt.rs pass_plan
    u32 first = std::min<u32>(log_n, 10);
    std::vector<std::pair<u32, u32>> plan{{0, first}};
    u32 rest = log_n - first;
    if (rest > 0) {
        u32 passes = (rest + 9) / 10, s = first;
        for (u32 i = 0; i < passes; i++) {
            u32 k = rest / passes + (i < rest % passes ? 1 : 0);
            plan.push_back({s, k});
            s += k;
        }
    }
    return plan;
}
static void forward(fr_t* d, const Tables& t, cudaEvent_t* marks = nullptr) {
    u32 log_n = t.log_n;
    size_t n = (size_t)1 << log_n;
    u32 rgrid = log_n >= 8 ? (u32)(n >> 8) : grid_for(n);
    ntt_bit_reverse<<<rgrid, 256>>>(d, log_n);
    CKL();
    if (marks) CK(cudaEventRecord(marks[0]));
    if (log_n < 3) {
        ntt_dit_stages<<<1, 1u << (log_n - 1)>>>(d, t.twiddles, log_n, 0, log_n, log_n);
        CKL();
        return;
    }
    u32 log_tile = std::min<u32>(log_n, 10);
    int m = 1;
    for (auto [s, k] : pass_plan(log_n)) {
        ntt_dit_pass<<<(u32)(n >> log_tile), 1u << (log_tile - NTT_ROUND_BITS)>>>(d, t.twiddles, log_n, s, k, log_tile);
        CKL();
        if (marks) CK(cudaEventRecord(marks[m++]));
    }
}
// The previous forward path (naive bit reversal, radix-2 ntt_dit_stages in groups of 10), for
// the before/after column of the timing table.
static void old_forward(fr_t* d, const Tables& t) {
    u32 log_n = t.log_n;
    size_t n = (size_t)1 << log_n;
    ref_bit_reverse<<<grid_for(n), 256>>>(d, log_n);
    u32 log_block = std::min<u32>(log_n, 10);
    for (u32 s = 0; s < log_n;) {
        u32 k = std::min(log_block, log_n - s);
        ntt_dit_stages<<<(u32)(n >> log_block), 1u << (log_block - 1)>>>(d, t.twiddles, log_n, s, k, log_block);
        s += k;
    }
    CKL();
}
static void inverse(fr_t* d, const Tables& t) {
    forward(d, t);
    size_t n = (size_t)1 << t.log_n;
    ntt_reverse_and_scale<<<grid_for(n / 2 + 1), 256>>>(d, t.n_inv, (u32)n);
    CKL();
}
static void coset_forward(fr_t* d, const Tables& t) {
    size_t n = (size_t)1 << t.log_n;
    ntt_scale_by_powers<<<grid_for(n), 256>>>(d, t.coset_hi, t.coset_lo, t.log_lo, (u32)n);
    CKL();
    forward(d, t);
}
static void coset_inverse(fr_t* d, const Tables& t) {
    size_t n = (size_t)1 << t.log_n;
    inverse(d, t);
    ntt_scale_by_powers<<<grid_for(n), 256>>>(d, t.coset_inv_hi, t.coset_inv_lo, t.log_lo, (u32)n);
    CKL();
}

// ---- checks -----------------------------------------------------------------------------------
template <class F, int N>
static void check_field(const char* name, size_t count, u64 seed) {
    F *a, *b;
    CK(cudaMalloc(&a, count * sizeof(F)));
    CK(cudaMalloc(&b, count * sizeof(F)));
    fill_random<F, N><<<1024, 256>>>(a, count, seed);
    fill_random<F, N><<<1024, 256>>>(b, count, seed ^ 0x5555);
    CKL();
    // edge values, all pairs, at the front
    std::vector<F> edge;
    F p = F::modulus(), one = F::zero(), two = F::zero();
    one.l[0] = 1; two.l[0] = 2;
    F pm1 = F::sub_portable(F::zero(), one), pm2 = F::sub_portable(F::zero(), two);
    F big = pm1; big.l[0] = 0;  // p - 1 with its low limb cleared
    F top = F::zero(); top.l[N - 1] = p.l[N - 1] - 1; for (int i = 0; i < N - 1; i++) top.l[i] = 0xffffffffu;
    F lowones = F::zero(); for (int i = 0; i < N - 1; i++) lowones.l[i] = 0xffffffffu;
    F r1 = F::zero(); for (int i = 0; i < N; i++) r1.l[i] = (N == 8 ? FR_ONE : FP_ONE)[i];
    edge = {F::zero(), one, two, pm1, pm2, big, top, lowones, r1};
    std::vector<F> ea, eb;
    for (auto& x : edge) for (auto& y : edge) { ea.push_back(x); eb.push_back(y); }
    CK(cudaMemcpy(a, ea.data(), ea.size() * sizeof(F), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(b, eb.data(), eb.size() * sizeof(F), cudaMemcpyHostToDevice));
    CK(cudaMemset(g_bad, 0, 8));
    compare_arith<F, N><<<1024, 256>>>(a, b, count, g_bad);
    CKL();
    unsigned long long bad;
    CK(cudaMemcpy(&bad, g_bad, 8, cudaMemcpyDeviceToHost));
    printf("check %s mul (operator, rows, eo, eo_cc)/add/sub PTX vs portable: %zu pairs (%zu edge pairs), %llu mismatches\n", name, count,
           ea.size(), bad);
    expect(bad == 0, name);
    CK(cudaFree(a)); CK(cudaFree(b));
}

static void reference_forward(fr_t* d, const fr_t* w, u32 log_n) {
    ref_bit_reverse<<<grid_for((size_t)1 << log_n), 256>>>(d, log_n);
    for (u32 t = 0; t < log_n; t++) ref_stage<<<grid_for((size_t)1 << (log_n - 1)), 256>>>(d, w, log_n, t);
    CKL();
}

static void check_ntt(int log_n, u64 seed) {
    size_t n = (size_t)1 << log_n, half = std::max<size_t>(n / 2, 1);
    Tables t = build_tables(log_n);
    // host twiddles for the reference
    std::vector<fr_t> hw(half);
    fr_t w = domain_root(log_n), acc = fr_one();
    for (size_t e = 0; e < half; e++) { hw[e] = acc; acc = acc * w; }
    fr_t* dw = upload(hw);
    // the device-built table equals the host one
    expect(diff(dw, t.twiddles, half) == 0, "twiddle table", log_n);
    fr_t *x, *y, *r;
    CK(cudaMalloc(&x, n * sizeof(fr_t))); CK(cudaMalloc(&y, n * sizeof(fr_t))); CK(cudaMalloc(&r, n * sizeof(fr_t)));
    fill_random<fr_t, 8><<<1024, 256>>>(x, n, seed + log_n);
    CKL();
    // reference vs naive DFT (small sizes)
    CK(cudaMemcpy(r, x, n * sizeof(fr_t), cudaMemcpyDeviceToDevice));
    reference_forward(r, dw, log_n);
    if (log_n <= 11) {
        naive_dft<<<grid_for(n), 256>>>(x, y, dw, log_n);
        CKL();
        expect(diff(y, r, n) == 0, "reference NTT vs naive DFT", log_n);
    }
    // forward vs reference
    CK(cudaMemcpy(y, x, n * sizeof(fr_t), cudaMemcpyDeviceToDevice));
    forward(y, t);
    unsigned long long bf = diff(y, r, n);
    expect(bf == 0, "forward vs reference", log_n);
    if (log_n >= 3) {  // the old path (timed below) computes the same transform
        CK(cudaMemcpy(y, x, n * sizeof(fr_t), cudaMemcpyDeviceToDevice));
        old_forward(y, t);
        expect(diff(y, r, n) == 0, "old forward path vs reference", log_n);
        CK(cudaMemcpy(y, x, n * sizeof(fr_t), cudaMemcpyDeviceToDevice));
        forward(y, t);
    }
    // inverse(forward(x)) == x
    inverse(y, t);
    unsigned long long bi = diff(y, x, n);
    expect(bi == 0, "inverse(forward(x)) == x", log_n);
    // coset forward vs scale-by-g^i + reference forward
    std::vector<fr_t> gp(n);
    fr_t g = fr_from(SEVEN);
    acc = fr_one();
    for (size_t i = 0; i < n; i++) { gp[i] = acc; acc = acc * g; }
    fr_t* dgp = upload(gp);
    CK(cudaMemcpy(r, x, n * sizeof(fr_t), cudaMemcpyDeviceToDevice));
    ref_scale<<<grid_for(n), 256>>>(r, dgp, (u32)n);
    reference_forward(r, dw, log_n);
    CK(cudaMemcpy(y, x, n * sizeof(fr_t), cudaMemcpyDeviceToDevice));
    coset_forward(y, t);
    unsigned long long bc = diff(y, r, n);
    expect(bc == 0, "coset forward vs reference", log_n);
    coset_inverse(y, t);
    unsigned long long bci = diff(y, x, n);
    expect(bci == 0, "coset inverse(coset forward(x)) == x", log_n);
    CK(cudaDeviceSynchronize());
    printf("check NTT 2^%-2d forward %llu, inverse∘forward %llu, coset %llu, coset inverse∘forward %llu mismatches\n",
           log_n, bf, bi, bc, bci);
    for (fr_t* p : {x, y, r, dw, dgp}) CK(cudaFree(p));
    free_tables(t);
}

// ---- timing -----------------------------------------------------------------------------------
template <class Fn>
static float median_ms(Fn&& fn, int reps = 5) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    fn();  // warm-up
    CK(cudaDeviceSynchronize());
    std::vector<float> ts;
    for (int i = 0; i < reps; i++) {
        CK(cudaEventRecord(a));
        fn();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        ts.push_back(ms);
    }
    std::sort(ts.begin(), ts.end());
    CK(cudaEventDestroy(a)); CK(cudaEventDestroy(b));
    return ts[reps / 2];
}

int main(int argc, char** argv) {
    int max_log = argc > 1 ? atoi(argv[1]) : 27;
    int check_max = argc > 2 ? atoi(argv[2]) : 22;
    int field_log = argc > 3 ? atoi(argv[3]) : 24;
    u64 seed = (u64)std::chrono::system_clock::now().time_since_epoch().count();
    printf("seed %llu\n", (unsigned long long)seed);
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
    CK(cudaMalloc(&g_bad, 8));

    // (a) field arithmetic
    check_field<fr_t, 8>("Fr", (size_t)1 << field_log, seed);
    check_field<fp_t, 12>("Fp", (size_t)1 << (field_log - 1), seed ^ 0xabcdef);
    // (b) NTT
    for (int log_n = 1; log_n <= check_max; log_n++) check_ntt(log_n, seed);
    printf("checks done: %d failures\n", g_failures);
    fflush(stdout);

    if (max_log <= 0) {  // checks only (e.g. under compute-sanitizer)
        printf("\nRESULT %s: %d failures (seed %llu)\n", g_failures ? "FAIL" : "PASS", g_failures, (unsigned long long)seed);
        return g_failures ? 1 : 0;
    }
    // timing: multiplication rates
    {
        const u32 threads = 256, blocks = prop.multiProcessorCount * 8, iters = 2000;
        size_t count = (size_t)threads * blocks * 4;
        fr_t* d;
        CK(cudaMalloc(&d, count * sizeof(fp_t)));
        fill_random<fr_t, 8><<<1024, 256>>>(d, count, seed);
        float ms = median_ms([&] { ff_fr_mul_rate<<<blocks, threads>>>(d, iters); });
        double fr_rate = (double)threads * blocks * iters * 4 / (ms * 1e-3) / 1e9;
        fp_t* dp = reinterpret_cast<fp_t*>(d);
        fill_random<fp_t, 12><<<1024, 256>>>(dp, (size_t)threads * blocks * 2, seed);
        float msf = median_ms([&] { ff_fp_mul_rate<<<blocks, threads>>>(dp, iters / 2); });
        double fp_rate = (double)threads * blocks * (iters / 2) * 2 / (msf * 1e-3) / 1e9;
        CKL();
        printf("rate production kernels (ff_*_mul_rate): Fr %.1f G/s (inline), Fp %.1f G/s (outlined call)\n", fr_rate, fp_rate);
        // every variant inline, 4 chains per thread
        const char* names[4] = {"portable", "rows", "eo", "eo_cc"};
        double fr_r[4], fp_r[4];
        fill_random<fr_t, 8><<<1024, 256>>>(d, count, seed);
        fr_r[0] = median_ms([&] { mul_rate<fr_t, 8, 0><<<blocks, threads>>>(d, iters); });
        fr_r[1] = median_ms([&] { mul_rate<fr_t, 8, 1><<<blocks, threads>>>(d, iters); });
        fr_r[2] = median_ms([&] { mul_rate<fr_t, 8, 2><<<blocks, threads>>>(d, iters); });
        fr_r[3] = median_ms([&] { mul_rate<fr_t, 8, 3><<<blocks, threads>>>(d, iters); });
        fill_random<fp_t, 12><<<1024, 256>>>(dp, count, seed);
        fp_r[0] = median_ms([&] { mul_rate<fp_t, 12, 0><<<blocks, threads>>>(dp, iters / 2); });
        fp_r[1] = median_ms([&] { mul_rate<fp_t, 12, 1><<<blocks, threads>>>(dp, iters / 2); });
        fp_r[2] = median_ms([&] { mul_rate<fp_t, 12, 2><<<blocks, threads>>>(dp, iters / 2); });
        fp_r[3] = median_ms([&] { mul_rate<fp_t, 12, 3><<<blocks, threads>>>(dp, iters / 2); });
        CKL();
        for (int v = 0; v < 4; v++)
            printf("rate inline %-8s Fr %.1f G/s, Fp %.1f G/s\n", names[v],
                   (double)threads * blocks * iters * 4 / (fr_r[v] * 1e-3) / 1e9,
                   (double)threads * blocks * (iters / 2) * 4 / (fp_r[v] * 1e-3) / 1e9);
        CK(cudaFree(d));
    }
    // timing: NTT sizes
    size_t nmax = (size_t)1 << max_log;
    fr_t* data;
    CK(cudaMalloc(&data, nmax * sizeof(fr_t)));
    {
        fr_t* other;
        CK(cudaMalloc(&other, nmax / 2 * sizeof(fr_t)));
        float ms = median_ms([&] { CK(cudaMemcpy(other, data, nmax / 2 * sizeof(fr_t), cudaMemcpyDeviceToDevice)); });
        printf("rate DtoD copy %.0f GB/s (read+write)\n", 2.0 * nmax / 2 * sizeof(fr_t) / (ms * 1e-3) / 1e9);
        CK(cudaFree(other));
    }
    printf("\n| log n | forward ms | inverse ms | old forward ms | bitrev ms | pass stages:ms |\n|---|---|---|---|---|---|\n");
    for (int log_n = 20; log_n <= max_log; log_n++) {
        size_t n = (size_t)1 << log_n;
        Tables t = build_tables(log_n);
        fill_random<fr_t, 8><<<1024, 256>>>(data, n, seed + 77 * log_n);
        CKL();
        float fwd = median_ms([&] { forward(data, t); });
        float inv = median_ms([&] { inverse(data, t); });
        float old = median_ms([&] { old_forward(data, t); });
        // per-kernel breakdown (one run)
        cudaEvent_t marks[8], start;
        for (auto& m : marks) CK(cudaEventCreate(&m));
        CK(cudaEventCreate(&start));
        CK(cudaEventRecord(start));
        forward(data, t, marks);
        CK(cudaDeviceSynchronize());
        float br;
        CK(cudaEventElapsedTime(&br, start, marks[0]));
        printf("| %d | %.3f | %.3f | %.3f | %.3f |", log_n, fwd, inv, old, br);
        auto plan = pass_plan(log_n);
        for (size_t i = 0; i < plan.size(); i++) {
            float pm;
            CK(cudaEventElapsedTime(&pm, marks[i], marks[i + 1]));
            printf(" %u:%.3f", plan[i].second, pm);
        }
        printf(" |\n");
        for (auto& m : marks) CK(cudaEventDestroy(m));
        CK(cudaEventDestroy(start));
        free_tables(t);
        fflush(stdout);
    }
    CK(cudaFree(data));
    printf("\nRESULT %s: %d failures (seed %llu)\n", g_failures ? "FAIL" : "PASS", g_failures, (unsigned long long)seed);
    return g_failures ? 1 : 0;
}
#endif  // NTT_HARNESS
