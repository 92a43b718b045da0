// Extended Jacobian ("XYZZ") points for MSM bucket accumulation: (X, Y, ZZ, ZZZ) stands for the
// affine point (X/ZZ, Y/ZZZ) with ZZ³ = ZZZ². Formulas from the EFD (a = 0 curves):
//   madd-2008-s (XYZZ + affine): 8M + 2S, vs 7M + 4S for Jacobian madd-2007-bl, with fewer
//   additions; add-2008-s (XYZZ + XYZZ): 12M + 2S; dbl-2008-s-1: 6M + 3S.
// The point at infinity is ZZ = ZZZ = 0, and all-zero bytes are infinity, so a zero-filled
// buffer is a buffer of identities. Exceptional cases (identity, P + P, P + (−P)) are explicit.
#pragma once
#include "jacobian.cuh"

template <class F>
struct xyzz_t {
    F x, y, zz, zzz;

    static HD xyzz_t inf() { xyzz_t r; r.x = F::zero(); r.y = F::zero(); r.zz = F::zero(); r.zzz = F::zero(); return r; }
    HD bool is_inf() const { return zz.is_zero(); }

    static HD xyzz_t from_affine(const affine_t<F>& a) {
        if (a.is_inf()) return inf();
        xyzz_t r; r.x = a.x; r.y = a.y; r.zz = one_of(F()); r.zzz = one_of(F()); return r;
    }


    // dbl-2008-s-1 (a = 0); reached from the additions on P + P and in the window reduction.
    EC_FN xyzz_t dbl() const {
        if (is_inf() || y.is_zero()) return inf();
        F U = y.dbl();
        F V = U.sqr();
        F W = U * V;
        F S = x * V;
        F X2 = x.sqr();
        F M = X2.dbl() + X2;
        xyzz_t r;
        r.x = M.sqr() - S.dbl();
        r.y = M * (S - r.x) - W * y;
        r.zz = V * zz;
        r.zzz = W * zzz;
        return r;
    }

    // this + a (affine), madd-2008-s.
    EC_FN xyzz_t add_affine(const affine_t<F>& a) const {
        if (a.is_inf()) return *this;
        if (is_inf()) return from_affine(a);
        F P = a.x * zz - x;
        F R = a.y * zzz - y;
        if (P.is_zero()) {
            if (R.is_zero()) return from_affine(a).dbl();
            return inf();
        }
        F PP = P.sqr();
        F PPP = P * PP;
        F Q = x * PP;
        xyzz_t o;
        o.x = R.sqr() - PPP - Q.dbl();
        o.y = R * (Q - o.x) - y * PPP;
        o.zz = zz * PP;
        o.zzz = zzz * PPP;
        return o;
    }

    // this + q, add-2008-s.
    EC_FN xyzz_t add(const xyzz_t& q) const {
        if (q.is_inf()) return *this;
        if (is_inf()) return q;
        F U1 = x * q.zz, U2 = q.x * zz;
        F S1 = y * q.zzz, S2 = q.y * zzz;
        F P = U2 - U1;
        F R = S2 - S1;
        if (P.is_zero()) {
            if (R.is_zero()) return dbl();
            return inf();
        }
        F PP = P.sqr();
        F PPP = P * PP;
        F Q = U1 * PP;
        xyzz_t o;
        o.x = R.sqr() - PPP - Q.dbl();
        o.y = R * (Q - o.x) - S1 * PPP;
        o.zz = zz * q.zz * PP;
        o.zzz = zzz * q.zzz * PPP;
        return o;
    }

    // Jacobian (X', Y', Z') with Z' = ZZ·ZZZ: X' = X·ZZ·ZZZ², Y' = Y·ZZZ⁴ (uses ZZ³ = ZZZ²).
    EC_FN jacobian_t<F> to_jacobian() const {
        if (is_inf()) return jacobian_t<F>::inf();
        F t = zzz.sqr();
        jacobian_t<F> r;
        r.x = x * zz * t;
        r.y = y * t.sqr();
        r.z = zz * zzz;
        return r;
    }
};

typedef xyzz_t<fp_t> g1_xyzz_t;
typedef xyzz_t<fp2_t> g2_xyzz_t;
