// Montgomery arithmetic over an N×32-bit-limb prime field, little-endian limbs.
// The limbs are the same bytes as blst's [u64; N/2] (little-endian machine), so device
// buffers are reinterpreted host values. Portable C++ (also compiles for the host) so that
// the arithmetic can be checked on a machine without a GPU: see kernels/check/host_check.cpp.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define HD __host__ __device__ __forceinline__
#else
#define HD inline
#define __host__
#define __device__
#endif

// Fp multiplications are called, not inlined, on the device: inlining them into G2 formulas
// makes ptxas run for many minutes. Fr multiplications stay inline (the NTT's hot loop).
#if defined(__CUDA_ARCH__)
#define MUL_OUTLINED __device__ __noinline__
#else
#define MUL_OUTLINED inline
#endif

// How the called Fp operations take their operands: by value, in registers. By reference they
// would go through the stack (24 generic loads a multiplication), which the MSM's bucket phase
// waits on (kernels/NOTES.md has the comparison).
#define MONT_OPERAND mont_t

// Host-only counts of the multiplications and squarings of the outlined (12-limb: Fp) field,
// for the bench's floor: lab/harness/op_count.cpp defines SNARKPIPE_COUNT_FP_OPS and runs
// the point formulas on the host, and tests/floor_counts.rs pins the floor's counts to what it
// prints. Nothing is counted on the device or in any other build.
#if defined(SNARKPIPE_COUNT_FP_OPS) && !defined(__CUDA_ARCH__)
struct fp_op_counts { unsigned long muls, sqrs; };
inline fp_op_counts& fp_op_counter() { static fp_op_counts counts{0, 0}; return counts; }
#define COUNT_FP_OP(kind) (fp_op_counter().kind++)
#else
#define COUNT_FP_OP(kind) ((void)0)
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
// Device arithmetic as PTX carry chains (generated and checked by gen_mont_ptx.py), picked by
// limb count: the two fields used here are Fr (8 limbs) and Fp (12 limbs). Device functions only;
// the operators below use them under __CUDA_ARCH__ and the portable code elsewhere.
#include "mont_ptx.cuh"
// Which generated multiplication the fields use (the others stay for the harness's comparison).
#ifndef FR_MUL_PTX
#define FR_MUL_PTX fr_mul_eo
#endif
#ifndef FP_MUL_PTX
#define FP_MUL_PTX fp_mul_eo
#endif
// Fp squaring: the cross products once, doubled (fp_sqr_sos: 78 partial products against 144).
#ifndef FP_SQR_PTX
#define FP_SQR_PTX fp_sqr_sos
#endif
template <int N> struct ptx_field;
template <> struct ptx_field<8> {
    static __device__ __forceinline__ void mul(u32* r, const u32* a, const u32* b) { FR_MUL_PTX(r, a, b); }
    static __device__ __forceinline__ void sqr(u32* r, const u32* a) { FR_MUL_PTX(r, a, a); }
    static __device__ __forceinline__ void add(u32* r, const u32* a, const u32* b) { fr_add_ptx(r, a, b); }
    static __device__ __forceinline__ void sub(u32* r, const u32* a, const u32* b) { fr_sub_ptx(r, a, b); }
};
template <> struct ptx_field<12> {
    static __device__ __forceinline__ void mul(u32* r, const u32* a, const u32* b) { FP_MUL_PTX(r, a, b); }
    static __device__ __forceinline__ void sqr(u32* r, const u32* a) { FP_SQR_PTX(r, a); }
    static __device__ __forceinline__ void add(u32* r, const u32* a, const u32* b) { fp_add_ptx(r, a, b); }
    static __device__ __forceinline__ void sub(u32* r, const u32* a, const u32* b) { fp_sub_ptx(r, a, b); }
};
#endif

// P: modulus, ONE: R mod P, R2: R^2 mod P, INV: -P^-1 mod 2^32.
template <int N, const u32* (*P)(), u32 INV>
struct mont_t {
    u32 l[N];

    static HD mont_t zero() { mont_t r; for (int i = 0; i < N; i++) r.l[i] = 0; return r; }
    static HD mont_t modulus() { mont_t r; const u32* p = P(); for (int i = 0; i < N; i++) r.l[i] = p[i]; return r; }

    HD bool is_zero() const { u32 acc = 0; for (int i = 0; i < N; i++) acc |= l[i]; return acc == 0; }
    HD bool operator==(const mont_t& o) const { u32 acc = 0; for (int i = 0; i < N; i++) acc |= l[i] ^ o.l[i]; return acc == 0; }
    HD bool operator!=(const mont_t& o) const { return !(*this == o); }

    // r = a - b over N limbs, returns the borrow.
    static HD u32 sub_raw(u32* r, const u32* a, const u32* b) {
        u64 borrow = 0;
        for (int i = 0; i < N; i++) {
            u64 d = (u64)a[i] - b[i] - borrow;
            r[i] = (u32)d;
            borrow = (d >> 32) & 1;
        }
        return (u32)borrow;
    }
    static HD u32 add_raw(u32* r, const u32* a, const u32* b) {
        u64 carry = 0;
        for (int i = 0; i < N; i++) {
            u64 s = (u64)a[i] + b[i] + carry;
            r[i] = (u32)s;
            carry = s >> 32;
        }
        return (u32)carry;
    }
    // Subtracts P once if x >= P (x < 2P, possibly with a carry limb `hi`).
    static HD void reduce_once(u32* x, u32 hi) {
        u32 t[N];
        u32 borrow = sub_raw(t, x, P());
        // keep t when x >= P, i.e. when the subtraction did not borrow (or x overflowed N limbs)
        bool take = hi || !borrow;
        for (int i = 0; i < N; i++) x[i] = take ? t[i] : x[i];
    }

    friend HD mont_t operator+(const mont_t& a, const mont_t& b) {
#if defined(__CUDA_ARCH__)
        mont_t r;
        ptx_field<N>::add(r.l, a.l, b.l);
        return r;
#else
        return add_portable(a, b);
#endif
    }
    friend HD mont_t operator-(const mont_t& a, const mont_t& b) {
#if defined(__CUDA_ARCH__)
        mont_t r;
        ptx_field<N>::sub(r.l, a.l, b.l);
        return r;
#else
        return sub_portable(a, b);
#endif
    }
    // The portable versions (the host's, and the device reference in the harness).
    static HD mont_t add_portable(mont_t a, const mont_t& b) {
        u32 c = add_raw(a.l, a.l, b.l);
        reduce_once(a.l, c);
        return a;
    }
    static HD mont_t sub_portable(mont_t a, const mont_t& b) {
        u32 borrow = sub_raw(a.l, a.l, b.l);
        if (borrow) add_raw(a.l, a.l, P());
        return a;
    }
    HD mont_t operator-() const {
        if (is_zero()) return *this;
        mont_t r;
        sub_raw(r.l, P(), l);
        return r;
    }
    HD mont_t dbl() const { return *this + *this; }

    friend HD mont_t operator*(const mont_t& a, const mont_t& b) {
        if (N > 8) return mul_outlined(a, b);
        return mul_fast(a, b);
    }
    static MUL_OUTLINED mont_t mul_outlined(MONT_OPERAND a, MONT_OPERAND b) {
        COUNT_FP_OP(muls);
        return mul_fast(a, b);
    }
    static HD mont_t mul_fast(const mont_t& a, const mont_t& b) {
#if defined(__CUDA_ARCH__)
        mont_t r;
        ptx_field<N>::mul(r.l, a.l, b.l);
        return r;
#else
        return mul_inline(a, b);
#endif
    }

    // Portable CIOS Montgomery multiplication: a·b·R^-1 mod P, inputs and output < P. The host's
    // multiplication, and the device reference the harness compares the PTX version with.
    static HD mont_t mul_inline(const mont_t& a, const mont_t& b) {
        const u32* p = P();
        u32 t[N + 2];
        for (int i = 0; i < N + 2; i++) t[i] = 0;
#pragma unroll
        for (int i = 0; i < N; i++) {
            u64 c = 0;
#pragma unroll
            for (int j = 0; j < N; j++) {
                u64 s = (u64)a.l[j] * b.l[i] + t[j] + c;
                t[j] = (u32)s;
                c = s >> 32;
            }
            u64 s = (u64)t[N] + c;
            t[N] = (u32)s;
            t[N + 1] = (u32)(s >> 32);
            u32 m = t[0] * INV;
            s = (u64)m * p[0] + t[0];
            c = s >> 32;
#pragma unroll
            for (int j = 1; j < N; j++) {
                s = (u64)m * p[j] + t[j] + c;
                t[j - 1] = (u32)s;
                c = s >> 32;
            }
            s = (u64)t[N] + c;
            t[N - 1] = (u32)s;
            t[N] = t[N + 1] + (u32)(s >> 32);
        }
        mont_t r;
        for (int i = 0; i < N; i++) r.l[i] = t[i];
        reduce_once(r.l, t[N]);
        return r;
    }
    HD mont_t sqr() const {
        if (N > 8) return sqr_outlined(*this);
        return mul_fast(*this, *this);
    }
    static MUL_OUTLINED mont_t sqr_outlined(MONT_OPERAND a) {
#if defined(__CUDA_ARCH__)
        mont_t r;
        ptx_field<N>::sqr(r.l, a.l);
        return r;
#else
        COUNT_FP_OP(sqrs);
        return mul_inline(a, a);
#endif
    }
    HD mont_t& operator*=(const mont_t& b) { *this = *this * b; return *this; }
    HD mont_t& operator+=(const mont_t& b) { *this = *this + b; return *this; }
    HD mont_t& operator-=(const mont_t& b) { *this = *this - b; return *this; }

    // Montgomery form -> canonical integer (multiply by 1).
    HD mont_t from_mont() const {
        mont_t one = zero();
        one.l[0] = 1;
        return *this * one;
    }
};
