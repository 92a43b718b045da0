// The bucket-phase kernels with the called Fp multiplications and squarings taking their operands
// by value, in registers, instead of by reference through the stack (24 generic loads a call), for
// the kernel bench to compare with msm_gX_buckets and tests/cuda_kernels.rs to check against blstrs.
#define MONT_OPERANDS_BY_VALUE
#include "buckets.cuh"

MSM_BUCKET_KERNELS(_by_value)
