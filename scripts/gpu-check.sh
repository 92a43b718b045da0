#!/usr/bin/env bash
# On the GPU machine, from the repository root, after ../shared/tools/gpu-bundle --features ""
# and `cargo bench --no-run` copies (see below): runs the CUDA kernel tests, then the bench,
# logging to $OUT (or ./out). The bench binary is expected at .gpu/cuda_kernels_bench.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.sm --format=csv 2>&1 | tee "$out/gpu.txt"
status=0
t=$(ls .gpu/tests/cuda_kernels-* 2>/dev/null | head -1)
if [ -n "$t" ]; then
  timeout "${TEST_TIMEOUT:-300}" "$t" --nocapture --test-threads=1 2>&1 | tee "$out/tests.log" || status=1
else
  echo "no cuda_kernels test executable in .gpu/tests" | tee "$out/tests.log"; status=1
fi
if [ -x .gpu/cuda_kernels_bench ]; then
  timeout "${BENCH_TIMEOUT:-240}" .gpu/cuda_kernels_bench 2>&1 | tee "$out/bench.log" || status=1
fi
exit $status
