// A G1 bucket-phase variant with the Fp multiplications inlined into the (still called) point
// operations, for the kernel bench to compare with msm_g1_buckets: one call per addition
// instead of ten.
#define SNARKPIPE_INLINE_FP_MUL
#include "buckets.cuh"

MSM_BUCKETS_KERNEL(msm_g1_buckets_inline_mul, fp_t, )
