// Counts the Fp multiplications and squarings of the point formulas the MSM kernels use
// (kernels/ec/xyzz.cuh), run on the host on generic points (no exceptional case), through the
// kernels' own field code with its host-only counter (SNARKPIPE_COUNT_FP_OPS, kernels/ff/mont.cuh).
// tests/floor_counts.rs builds and runs it and pins the bench's floor (src/bench/floor.rs) to
// what it prints, one line per formula: "<group> <formula> muls=<n> sqrs=<n>".
//   g++ -O1 -std=c++17 -o /tmp/op_count lab/harness/op_count.cpp && /tmp/op_count
#define SNARKPIPE_COUNT_FP_OPS 1
#include "../../kernels/check/generators.h"
#include <cstdio>

// Runs `op` once and prints the Fp operations it performed.
template <class Op> static void count(const char* group, const char* formula, Op op) {
    fp_op_counter() = fp_op_counts{0, 0};
    op();
    printf("%s %s muls=%lu sqrs=%lu\n", group, formula, fp_op_counter().muls, fp_op_counter().sqrs);
}

// Generic operands: an accumulator of 3G (ZZ, ZZZ not one) and the affine G, and 5G.
template <class F> static void formulas(const affine_t<F>& g, const char* group) {
    xyzz_t<F> three = xyzz_t<F>::from_affine(g).add_affine(g).add_affine(g);
    xyzz_t<F> five = three.add_affine(g).add_affine(g);
    volatile bool sink = false;
    count(group, "madd", [&] { sink = three.add_affine(g).is_inf(); });
    count(group, "add", [&] { sink = three.add(five).is_inf(); });
    count(group, "dbl", [&] { sink = three.dbl().is_inf(); });
    // The Jacobian mixed addition (madd-2007-bl, kernels/ec/jacobian.cuh), which the buckets
    // do not use: a formula of other counts, so the counter is seen to tell formulas apart.
    jacobian_t<F> j3 = jacobian_t<F>::from_affine(g).add_affine(g).add_affine(g);
    count(group, "jacobian-madd", [&] { sink = j3.add_affine(g).is_inf(); });
    (void)sink;
}

int main() {
    affine_t<fp_t> g1; g1.x = generator_limbs(G1X); g1.y = generator_limbs(G1Y);
    affine_t<fp2_t> g2; g2.x.c0 = generator_limbs(G2X0); g2.x.c1 = generator_limbs(G2X1); g2.y.c0 = generator_limbs(G2Y0); g2.y.c1 = generator_limbs(G2Y1);
    formulas(g1, "g1");
    formulas(g2, "g2");
    return 0;
}
