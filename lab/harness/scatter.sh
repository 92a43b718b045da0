#!/bin/bash
# The MSM's bucket sort in variants (direct, production binned, staged phase B, digits once),
# timed on the same data and checked against each other (kernels/NOTES.md "MSM" step 3): builds
# lab/harness/scatter_harness.cu with nvcc and runs it on the GPU.
#
#   lab/harness/scatter.sh [--logs=24,25] [--equal=24] [--seed=S] [--reps=5] [--full-window=W] [--samples=K]
#       build (into $BUILD, default a fresh temporary folder) and run; the options go to the
#       harness (its header says what they do)
#   lab/harness/scatter.sh build DIR
#       build only, here where nvcc is: DIR/scatter, DIR/ptxas.txt (registers and spills) and a
#       copy of this script and nvcc_harness.sh; then run DIR/scatter.sh on the GPU machine, which uses the binary
#       beside it (carry DIR there)
#
# nvcc_harness.sh (beside this script) builds and runs it: nvcc is $NVCC, else the repository's
# .cuda venv (CUDA 13), else /usr/local/cuda/bin/nvcc.
# Output: stdout, and $OUT/scatter.txt when OUT is set (with $OUT/scatter-ptxas.txt when the
# ptxas report is beside the binary). Exit status: the harness's (1 on a mismatch, 2 on a CUDA
# error or a bad option).
set -euo pipefail
# shellcheck source=nvcc_harness.sh
source "$(dirname "$0")/nvcc_harness.sh"
harness_main scatter scatter_harness.cu SCATTER_HARNESS scatter "-lpthread" "$@"
