// The bucket-phase kernels with the called Fp multiplications and squarings taking their operands
// by reference, through the stack, as before 2026-12-01, for the kernel bench to show what passing
// them by value (the default) gains on the same MSM and for tests/cuda_kernels.rs to check.
#define MONT_OPERANDS_BY_REFERENCE
#include "buckets.cuh"

MSM_BUCKET_KERNELS(_by_reference)
