// The bucket-phase kernels with G2's held to three blocks of 128 threads an SM (168 registers,
// 44 bytes of spills) instead of two (204 registers): Nsight Compute showed the G2 bucket phase
// at two warps a scheduler and 77% SM busy, against 92% for G1 at four. The kernel bench times
// it against the default on the same MSM, and tests/cuda_kernels.rs checks it against blstrs.
#define MSM_G2_BUCKET_BOUNDS __launch_bounds__(128, 3)
#include "buckets.cuh"

MSM_BUCKET_KERNELS(_g2_three_blocks)
