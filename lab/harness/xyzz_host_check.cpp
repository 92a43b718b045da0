// XYZZ formulas (kernels/ec/xyzz.cuh) against the Jacobian ones on the host, no GPU needed:
//   g++ -O2 -std=c++17 -o /tmp/xc lab/harness/xyzz_host_check.cpp && /tmp/xc
#include "../../kernels/check/generators.h"
#include <cstdio>
fp_t ld(const u32* c) { return generator_limbs(c); }
template <class F> bool same(const jacobian_t<F>& a, const jacobian_t<F>& b) {
    if (a.is_inf() || b.is_inf()) return a.is_inf() && b.is_inf();
    F za2 = a.z.sqr(), zb2 = b.z.sqr();
    return a.x * zb2 == b.x * za2 && a.y * zb2 * b.z == b.y * za2 * a.z;
}
template <class F> int run(affine_t<F> g, const char* name) {
    int bad = 0;
    // affine multiples via Jacobian, normalised by... we keep Jacobian refs and affine bases from the chain
    jacobian_t<F> J = jacobian_t<F>::from_affine(g);
    xyzz_t<F> X = xyzz_t<F>::from_affine(g);
    // k·G by repeated mixed addition, both forms
    for (int k = 2; k <= 20; k++) {
        J = J.add_affine(g);
        X = X.add_affine(g);
        if (!same(J, X.to_jacobian())) { printf("%s madd k=%d differs\n", name, k); bad++; }
    }
    // XYZZ + XYZZ, doubling, P + (-P), identity
    xyzz_t<F> X2 = X.add(X);            // 40G via add (doubling path)
    xyzz_t<F> X3 = X.dbl();             // 40G
    jacobian_t<F> J40 = J.dbl();
    if (!same(X2.to_jacobian(), J40) || !same(X3.to_jacobian(), J40)) { printf("%s dbl differs\n", name); bad++; }
    xyzz_t<F> Y = xyzz_t<F>::from_affine(g).add_affine(g).add_affine(g); // 3G
    if (!same(X.add(Y).to_jacobian(), J.add(jacobian_t<F>::from_affine(g).add_affine(g).add_affine(g)))) { printf("%s add differs\n", name); bad++; }
    xyzz_t<F> negX = X; negX.y = -negX.y;
    if (!X.add(negX).is_inf()) { printf("%s P-P not inf\n", name); bad++; }
    xyzz_t<F> one = xyzz_t<F>::from_affine(g);
    if (!one.add_affine(g.neg()).is_inf()) { printf("%s madd P-P not inf\n", name); bad++; }
    if (!same(one.add_affine(g).to_jacobian(), jacobian_t<F>::from_affine(g).dbl())) { printf("%s madd P+P\n", name); bad++; }
    affine_t<F> inf_a; inf_a.x = F::zero(); inf_a.y = F::zero();
    if (!same(X.add_affine(inf_a).to_jacobian(), J)) { printf("%s +inf\n", name); bad++; }
    if (!same(xyzz_t<F>::inf().add(X).to_jacobian(), J) || !same(X.add(xyzz_t<F>::inf()).to_jacobian(), J)) { printf("%s inf+X\n", name); bad++; }
    if (!xyzz_t<F>::inf().to_jacobian().is_inf()) { printf("%s inf conv\n", name); bad++; }
    // madd into a non-trivial accumulator where the affine point equals the accumulator (20G + 20G)
    printf("%s: %s\n", name, bad ? "BAD" : "ok");
    return bad;
}
int main() {
    affine_t<fp_t> g1; g1.x = ld(G1X); g1.y = ld(G1Y);
    affine_t<fp2_t> g2; g2.x.c0 = ld(G2X0); g2.x.c1 = ld(G2X1); g2.y.c0 = ld(G2Y0); g2.y.c1 = ld(G2Y1);
    return run(g1, "G1") + run(g2, "G2");
}
