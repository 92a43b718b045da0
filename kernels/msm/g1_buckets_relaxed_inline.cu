// The relaxed-Fp G1 bucket phase (g1_buckets_relaxed.cu) with the Fp multiplications and point
// operations inlined (g1_buckets_inline.cu), for the kernel bench's comparison.
#define SNARKPIPE_FP_RELAXED
#define SNARKPIPE_INLINE_FP_MUL
#define SNARKPIPE_INLINE_POINT_OPS
#include "buckets.cuh"

MSM_BUCKETS_KERNEL(msm_g1_buckets_relaxed_inline, fp_t, )
