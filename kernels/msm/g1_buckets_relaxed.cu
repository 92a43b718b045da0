// A G1 bucket-phase variant with relaxed Fp (values in [0, 2p), multiplications without their
// final subtraction: mont.cuh), for the kernel bench to compare with msm_g1_buckets; the buckets
// it stores are canonical.
#define SNARKPIPE_FP_RELAXED
#include "buckets.cuh"

MSM_BUCKETS_KERNEL(msm_g1_buckets_relaxed, fp_t, )
