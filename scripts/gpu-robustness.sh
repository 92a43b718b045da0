#!/usr/bin/env bash
# The device call for the robustness issue: the driver probe of which context replacement
# clears a sticky error (scripts/probes/sticky-context.sh), then the CUDA test suite with
# SNARKPIPE_REQUIRE_GPU=1 (a test that finds no GPU fails), which includes the trapping kernel
# that breaks GPU 0's context for real and the restart that brings it back
# (tests/cuda_sticky.rs; the CPU-model recovery tests run in CI) and the robustness tests;
# then whole verified partitions at 2^20 and 2^24 on GPU 0 (SWEEP), to check the watchdog, the fault scopes and the swappable CUDA
# context cost nothing against BENCHMARKS.md's current table. Build first (here):
#   SNARKPIPE_REQUIRE_NVCC=1 ../shared/tools/gpu-bundle --no-default-features \
#     --test cuda_kernels --test cuda_nvrtc --test cuda_setup --test cuda_pipeline --test cuda_sticky \
#     --test robustness
# and carry .gpu. Writes under $OUT (final.log, p20.json ...).
set -u
export SNARKPIPE_REQUIRE_GPU=1
OUT=${OUT:-out} bash "$(dirname "$0")/probes/sticky-context.sh"
STEPS="tests sweep" SWEEP="${SWEEP:-20 24}" \
  TESTS="cuda_sticky cuda_pipeline cuda_kernels cuda_nvrtc cuda_setup robustness" \
  BUDGET="${BUDGET:-540}" bash "$(dirname "$0")/gpu-final.sh"
