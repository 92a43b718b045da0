// The bucket-phase kernels with the mixed addition inlined into the loop (its Fp multiplications
// stay calls), for the kernel bench to compare with the default's call on the same MSM, and for
// tests/cuda_kernels.rs to check against blstrs.
#define BUCKET_ADD_AFFINE(acc, p) decltype(acc)::madd(acc, p)
#include "buckets.cuh"

MSM_BUCKET_KERNELS(_inline_madd)
