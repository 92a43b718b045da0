// G1 bucket-phase variants with the Fp multiplications and the point operations inlined (msm.cu
// calls both), for the kernel bench to compare with msm_g1_buckets: ptxas gives the inlined loop
// 187 registers and no stack, against 108 registers and a 960-byte stack frame of call arguments.
// _b3 caps it at three 128-thread blocks per SM (170 registers).
#define SNARKPIPE_INLINE_FP_MUL
#define SNARKPIPE_INLINE_POINT_OPS
#include "buckets.cuh"

MSM_BUCKETS_KERNEL(msm_g1_buckets_inline, fp_t, )
MSM_BUCKETS_KERNEL(msm_g1_buckets_inline_b3, fp_t, __launch_bounds__(128, 3))
