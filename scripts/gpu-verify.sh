#!/usr/bin/env bash
# A short device call after a change to the CUDA backend: the GPU pipeline tests, one verified
# bench with a trace, and the CUDA soak. Build first with ../shared/tools/gpu-bundle.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
log=$out/verify.log
for t in .gpu/tests/cuda_pipeline-* .gpu/tests/cuda_kernels-*; do
  echo "== $t" >>"$log"
  timeout 200 "$t" --nocapture --test-threads=1 >>"$log" 2>&1 || echo "TEST FAILED: $t" >>"$log"
done
.gpu/snarkpipe bench --backend cuda --devices 0 --partitions 8 --log-n 16 --keys setup --json --trace "$out/trace16.json" >"$out/cuda16.json" 2>>"$log" || echo "BENCH FAILED: cuda16" >>"$log"
SNARKPIPE_LOG=error .gpu/snarkpipe bench --backend cuda --devices 0 --partitions 300 --log-n 10 --workers 2 --inject-faults 0.1 --seed 7 --json >"$out/soak.json" 2>>"$log" || echo "BENCH FAILED: soak" >>"$log"
grep -E "test result|FAILED" "$log"
