// The fields of BLS12-381: Fr (scalars, 8 limbs), Fp (base field, 12 limbs) and Fp2 = Fp[u]/(u²+1).
// Constants: modulus limbs; -P^-1 mod 2^32. Montgomery R = 2^256 (Fr) and 2^384 (Fp), as in blst.
#pragma once
#include "mont.cuh"

#if defined(__CUDA_ARCH__)
#define FF_CONST __device__ __constant__
#else
#define FF_CONST static const
#endif

FF_CONST u32 FR_MODULUS[8] = {0x00000001, 0xffffffff, 0xfffe5bfe, 0x53bda402,
                              0x09a1d805, 0x3339d808, 0x299d7d48, 0x73eda753};
FF_CONST u32 FP_MODULUS[12] = {0xffffaaab, 0xb9feffff, 0xb153ffff, 0x1eabfffe, 0xf6b0f624, 0x6730d2a0,
                               0xf38512bf, 0x64774b84, 0x434bacd7, 0x4b1ba7b6, 0x397fe69a, 0x1a0111ea};
// R mod P: the Montgomery form of one.
FF_CONST u32 FR_ONE[8] = {0xfffffffe, 0x00000001, 0x00034802, 0x5884b7fa,
                          0xecbc4ff5, 0x998c4fef, 0xacc5056f, 0x1824b159};
FF_CONST u32 FP_ONE[12] = {0x0002fffd, 0x76090000, 0xc40c0002, 0xebf4000b, 0x53c758ba, 0x5f489857,
                           0x70525745, 0x77ce5853, 0xa256ec6d, 0x5c071a97, 0xfa80e493, 0x15f65ec3};

HD const u32* fr_modulus() { return FR_MODULUS; }
HD const u32* fp_modulus() { return FP_MODULUS; }

typedef mont_t<8, fr_modulus, 0xffffffffu> fr_t;
typedef mont_t<12, fp_modulus, 0xfffcfffdu> fp_t;

HD fr_t fr_one() { fr_t r; for (int i = 0; i < 8; i++) r.l[i] = FR_ONE[i]; return r; }
HD fp_t fp_one() { fp_t r; for (int i = 0; i < 12; i++) r.l[i] = FP_ONE[i]; return r; }

// Fp2 = Fp[u]/(u² + 1), laid out {c0, c1} like blst_fp2.
struct fp2_t {
    fp_t c0, c1;
    static HD fp2_t zero() { fp2_t r; r.c0 = fp_t::zero(); r.c1 = fp_t::zero(); return r; }
    HD bool is_zero() const { return c0.is_zero() && c1.is_zero(); }
    HD bool operator==(const fp2_t& o) const { return c0 == o.c0 && c1 == o.c1; }
    HD bool operator!=(const fp2_t& o) const { return !(*this == o); }
    friend HD fp2_t operator+(const fp2_t& a, const fp2_t& b) { fp2_t r; r.c0 = a.c0 + b.c0; r.c1 = a.c1 + b.c1; return r; }
    friend HD fp2_t operator-(const fp2_t& a, const fp2_t& b) { fp2_t r; r.c0 = a.c0 - b.c0; r.c1 = a.c1 - b.c1; return r; }
    HD fp2_t operator-() const { fp2_t r; r.c0 = -c0; r.c1 = -c1; return r; }
    HD fp2_t dbl() const { return *this + *this; }
    // Karatsuba: 3 Fp multiplications.
    friend HD fp2_t operator*(const fp2_t& a, const fp2_t& b) {
        fp_t v0 = a.c0 * b.c0, v1 = a.c1 * b.c1;
        fp2_t r;
        r.c0 = v0 - v1;
        r.c1 = (a.c0 + a.c1) * (b.c0 + b.c1) - v0 - v1;
        return r;
    }
    // (c0 + c1 u)² = (c0 + c1)(c0 - c1) + 2 c0 c1 u: 2 Fp multiplications.
    HD fp2_t sqr() const {
        fp2_t r;
        r.c0 = (c0 + c1) * (c0 - c1);
        r.c1 = (c0 * c1).dbl();
        return r;
    }
    HD fp2_t& operator*=(const fp2_t& b) { *this = *this * b; return *this; }
    HD fp2_t& operator+=(const fp2_t& b) { *this = *this + b; return *this; }
    HD fp2_t& operator-=(const fp2_t& b) { *this = *this - b; return *this; }
};

// The multiplicative identity in Montgomery form, picked by argument type.
HD fp_t one_of(const fp_t&) { return fp_one(); }
HD fp2_t one_of(const fp2_t&) { fp2_t r; r.c0 = fp_one(); r.c1 = fp_t::zero(); return r; }
