#!/usr/bin/env bash
# The device call after the architecture move: the CUDA test suite (SNARKPIPE_REQUIRE_GPU=1, so a
# test that finds no GPU fails) and whole verified partitions at 2^20, 2^22 and 2^24 on GPU 0,
# to compare with BENCHMARKS.md's current table. Build first (here):
#   SNARKPIPE_REQUIRE_NVCC=1 ../shared/tools/gpu-bundle --no-default-features \
#     --test cuda_kernels --test cuda_nvrtc --test cuda_setup --test cuda_pipeline --test robustness
# and carry .gpu. Writes under $OUT (final.log, p20.json ...).
set -u
export SNARKPIPE_REQUIRE_GPU=1
STEPS="tests sweep" SWEEP="${SWEEP:-20 22 24}" \
  TESTS="cuda_kernels cuda_nvrtc cuda_setup cuda_pipeline robustness" \
  BUDGET="${BUDGET:-480}" bash "$(dirname "$0")/gpu-final.sh"
