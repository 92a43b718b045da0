#!/bin/bash
# Batch-affine bucket accumulation against the production XYZZ bucket loop, G1 and G2 (issue 21
# §3): builds lab/harness/batch_affine_harness.cu with nvcc and runs it on the GPU.
#
#   lab/harness/batch_affine.sh [max_log=24] [big_windows=13] [seed] [--curve=g1|g2|both] [--g2-log=22]
#       build (into $BUILD, default a fresh temporary folder) and run; --curve (or $BA_CURVE)
#       picks the curves, both by default; --g2-log (or $BA_G2_LOG) G2's largest size, by default
#       min(22, max_log)
#   lab/harness/batch_affine.sh build DIR
#       build only, here where nvcc is: DIR/batch_affine, DIR/ptxas.txt (registers and spills)
#       and copies of this script and nvcc_harness.sh; then run DIR/batch_affine.sh on the GPU machine, which uses
#       the binary beside it (carry DIR there)
#
# nvcc_harness.sh (beside this script) builds and runs it: nvcc is $NVCC, else the repository's
# .cuda venv (CUDA 13), else /usr/local/cuda/bin/nvcc.
# Output: stdout, and $OUT/batch-affine.txt when OUT is set (with $OUT/batch-affine-ptxas.txt
# when this run built the binary). Exit status: the harness's (1 on a mismatch, 2 on a CUDA error).
set -euo pipefail
# shellcheck source=nvcc_harness.sh
source "$(dirname "$0")/nvcc_harness.sh"
harness_main batch_affine batch_affine_harness.cu BATCH_AFFINE_HARNESS batch-affine "" "$@"
