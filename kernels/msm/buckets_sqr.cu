// The bucket-phase kernels with a dedicated Fp squaring (fp_sqr_sos: 78 partial products
// instead of 144, in the two squarings of every mixed addition); the multiplication is the
// default's. For the kernel bench and tests/cuda_kernels.rs to compare with msm_gX_buckets.
#define FP_SQR_PTX fp_sqr_sos
#include "buckets.cuh"

MSM_BUCKET_KERNELS(_sqr)
