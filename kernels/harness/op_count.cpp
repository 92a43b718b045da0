// Counts the Fp multiplications and squarings of the point formulas the MSM kernels use
// (kernels/ec/xyzz.cuh), run on the host on generic points (no exceptional case), through the
// kernels' own field code with its host-only counter (SNARKPIPE_COUNT_FP_OPS, kernels/ff/mont.cuh).
// tests/floor_counts.rs builds and runs it and pins the bench's floor (src/bench/floor.rs) to
// what it prints, one line per formula: "<group> <formula> muls=<n> sqrs=<n>".
//   g++ -O1 -std=c++17 -o /tmp/op_count kernels/harness/op_count.cpp && /tmp/op_count
#define SNARKPIPE_COUNT_FP_OPS 1
#include "../ec/xyzz.cuh"
#include <cstdio>

// The generators of G1 and G2 (affine, Montgomery form, little-endian 32-bit limbs).
static const u32 G1X[12] = {0xfd530c16, 0x5cb38790, 0x9976fff5, 0x7817fc67, 0x143ba1c1, 0x154f95c7, 0xf3d0e747, 0xf0ae6acd, 0x21dbf440, 0xedce6ecc, 0x9e0bfb75, 0x12017741};
static const u32 G1Y[12] = {0x0ce72271, 0xbaac93d5, 0x7918fd8e, 0x8c22631a, 0x570725ce, 0xdd595f13, 0x50405194, 0x51ac5829, 0xad0059c0, 0x0e1c8c3f, 0x5008a26a, 0x0bbc3efc};
static const u32 G2X0[12] = {0x02940a10, 0xf5f28fa2, 0x87b4961a, 0xb3f5fb26, 0x3e2ae580, 0xa1a893b5, 0x1a3caee9, 0x9894999d, 0x1863366b, 0x6f67b763, 0x4350bcd7, 0x05819192};
static const u32 G2X1[12] = {0x9e23f606, 0xa5a9c075, 0xbccd60c3, 0xaaa0c59d, 0xe2867806, 0x3bb17e18, 0x8541b367, 0x1b1ab6cc, 0xf2158547, 0xc2b6ed0e, 0x7360edf3, 0x11922a09};
static const u32 G2Y0[12] = {0x60494c4a, 0x4c730af8, 0x5e369c5a, 0x597cfa1f, 0xaa0a635a, 0xe7e6856c, 0x6e0d495f, 0xbbefb5e9, 0xf0ef25a2, 0x07d3a975, 0x7e80dae5, 0x0083fd8e};
static const u32 G2Y1[12] = {0xdf64b05d, 0xadc0fc92, 0x2b1461dc, 0x18aa270a, 0x3be4eba0, 0x86adac6a, 0xc93da33a, 0x79495c4e, 0xa43ccaed, 0xe7175850, 0x63de1bf2, 0x0b2bc2a1};

static fp_t limbs(const u32* c) { fp_t r; for (int i = 0; i < 12; i++) r.l[i] = c[i]; return r; }

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
    affine_t<fp_t> g1; g1.x = limbs(G1X); g1.y = limbs(G1Y);
    affine_t<fp2_t> g2; g2.x.c0 = limbs(G2X0); g2.x.c1 = limbs(G2X1); g2.y.c0 = limbs(G2Y0); g2.y.c1 = limbs(G2Y1);
    formulas(g1, "g1");
    formulas(g2, "g2");
    return 0;
}
