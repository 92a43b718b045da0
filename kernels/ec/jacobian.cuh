// Short-Weierstrass points on y² = x³ + b (a = 0), over Fp (G1) or Fp2 (G2).
// Layouts match blst: affine {x, y} with the point at infinity as x = y = 0;
// Jacobian {X, Y, Z} with x = X/Z², y = Y/Z³ and infinity as Z = 0.
// Formulas: dbl-2009-l, madd-2007-bl, add-2007-bl (hyperelliptic.org EFD), with the
// exceptional cases (identity, P + P, P + (−P)) handled explicitly since buckets hit them.
#pragma once
#include "../ff/bls12_381.cuh"

// Point operations are calls on the device, so that each kernel stays small for ptxas.
#if defined(__CUDA_ARCH__)
#define EC_FN __device__ __noinline__
#else
#define EC_FN inline
#endif

template <class F>
struct affine_t {
    F x, y;
    HD bool is_inf() const { return x.is_zero() && y.is_zero(); }
    HD affine_t neg() const { affine_t r; r.x = x; r.y = -y; return r; }
};

template <class F>
struct jacobian_t {
    F x, y, z;

    static HD jacobian_t inf() { jacobian_t r; r.x = one_of(F()); r.y = one_of(F()); r.z = F::zero(); return r; }
    HD bool is_inf() const { return z.is_zero(); }

    static HD jacobian_t from_affine(const affine_t<F>& a) {
        if (a.is_inf()) return inf();
        jacobian_t r; r.x = a.x; r.y = a.y; r.z = one_of(F()); return r;
    }

    HD jacobian_t neg() const { jacobian_t r = *this; r.y = -y; return r; }

    // dbl-2009-l: 2M + 5S.
    EC_FN jacobian_t dbl() const {
        F A = x.sqr(), B = y.sqr(), C = B.sqr();
        F D = ((x + B).sqr() - A - C).dbl();
        F E = A.dbl() + A, Fq = E.sqr();
        jacobian_t r;
        r.z = (y * z).dbl();
        r.x = Fq - D.dbl();
        F C8 = C.dbl().dbl().dbl();
        r.y = E * (D - r.x) - C8;
        return r;
    }

    // this + a (affine), madd-2007-bl: 7M + 4S.
    EC_FN jacobian_t add_affine(const affine_t<F>& a) const {
        if (a.is_inf()) return *this;
        if (is_inf()) return from_affine(a);
        F Z1Z1 = z.sqr();
        F U2 = a.x * Z1Z1;
        F S2 = a.y * z * Z1Z1;
        F H = U2 - x;
        F r = (S2 - y).dbl();
        if (H.is_zero()) {
            if (r.is_zero()) return dbl();
            return inf();
        }
        F HH = H.sqr();
        F I = HH.dbl().dbl();
        F J = H * I;
        F V = x * I;
        jacobian_t o;
        o.x = r.sqr() - J - V.dbl();
        o.y = r * (V - o.x) - (y * J).dbl();
        o.z = (z + H).sqr() - Z1Z1 - HH;
        return o;
    }

    // this + q, add-2007-bl: 11M + 5S.
    EC_FN jacobian_t add(const jacobian_t& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        F Z1Z1 = z.sqr(), Z2Z2 = q.z.sqr();
        F U1 = x * Z2Z2, U2 = q.x * Z1Z1;
        F S1 = y * q.z * Z2Z2, S2 = q.y * z * Z1Z1;
        F H = U2 - U1;
        F r = (S2 - S1).dbl();
        if (H.is_zero()) {
            if (r.is_zero()) return dbl();
            return inf();
        }
        F I = H.dbl().sqr();
        F J = H * I;
        F V = U1 * I;
        jacobian_t o;
        o.x = r.sqr() - J - V.dbl();
        o.y = r * (V - o.x) - (S1 * J).dbl();
        o.z = ((z + q.z).sqr() - Z1Z1 - Z2Z2) * H;
        return o;
    }
};

typedef affine_t<fp_t> g1_affine_t;
typedef jacobian_t<fp_t> g1_jacobian_t;
typedef affine_t<fp2_t> g2_affine_t;
typedef jacobian_t<fp2_t> g2_jacobian_t;
