// The bucket-phase kernels with Fp squarings done as multiplications (as before the dedicated
// squaring, fp_sqr_sos), for the kernel bench to show what the squaring gains on the same MSM
// and for tests/cuda_kernels.rs to check against blstrs.
#define FP_SQR_PTX(r, a) FP_MUL_PTX(r, a, a)
#include "buckets.cuh"

MSM_BUCKET_KERNELS(_sqr_by_mul)
