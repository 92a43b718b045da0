// The bucket-phase kernels with the mixed addition called with both points by value
// (madd_by_value in kernels/ec/xyzz.cuh), for the kernel bench to compare with the default's
// call through the stack on the same MSM, and for tests/cuda_kernels.rs to check against blstrs.
#define BUCKET_ADD_AFFINE(acc, p) madd_by_value(acc, p)
#include "buckets.cuh"

MSM_BUCKET_KERNELS(_points_by_value)
