// The bucket-phase kernels with G2's unbounded (204 registers, two blocks of 128 threads an SM),
// as before 2026-12-01, when the default became three blocks an SM (buckets.cuh): for the
// kernel bench to time against the default, and tests/cuda_kernels.rs to check against blstrs.
#define MSM_G2_BUCKET_BOUNDS
#include "buckets.cuh"

MSM_BUCKET_KERNELS(_g2_two_blocks)
