// The bucket-phase kernels with the Karatsuba Fp multiplication (fp_mul_kara: 108 partial
// products instead of 144 before the reduction) and the dedicated squaring. For the kernel bench
// and tests/cuda_kernels.rs to compare with msm_gX_buckets.
#define FP_MUL_PTX fp_mul_kara
#define FP_SQR_PTX fp_sqr_sos
#include "buckets.cuh"

MSM_BUCKET_KERNELS(_kara)
