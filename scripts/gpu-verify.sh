#!/usr/bin/env bash
# A short device call after a change to the CUDA backend: the GPU pipeline tests, the CUDA soak,
# and verified (setup-key) proofs at 2^20 on one GPU and on all of them, in the same run.
# Build first with ../shared/tools/gpu-bundle.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
log=$out/verify.log
for t in .gpu/tests/cuda_pipeline-*; do
  echo "== $t" >>"$log"
  timeout 200 "$t" --nocapture --test-threads=1 >>"$log" 2>&1 || echo "TEST FAILED: $t" >>"$log"
done
bench() {
  local name=$1; shift
  timeout "${LIMIT:-150}" .gpu/snarkpipe bench "$@" --json >"$out/$name.json" 2>>"$log" || echo "BENCH FAILED: $name" >>"$log"
}
SNARKPIPE_LOG=error bench soak --backend cuda --devices 0 --partitions 300 --log-n 10 --workers 2 --inject-faults 0.1 --seed 7
bench one20 --backend cuda --devices 0 --partitions 16 --log-n 20 --keys setup
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  bench all20 --backend cuda --devices all --partitions 16 --log-n 20 --keys setup --timeline "$out/all20.svg"
fi
grep -E "test result|FAILED|critical:" "$log"
