#!/usr/bin/env bash
# The first of the session's device calls: the GPU test suite against the CPU reference
# (SNARKPIPE_REQUIRE_GPU=1: a test that finds no GPU fails), then real 2 KiB Filecoin inputs
# made on the machine and proven by `snarkpipe prove` on the GPU (scripts/gpu-filecoin.sh,
# steps fixtures and prove). The second call, made while the machine is still warm, runs
# `STEPS="bench compat" scripts/gpu-filecoin.sh` on the same $WORK.
set -u
out=${OUT:-out}; mkdir -p "$out"
log=$out/tests.log
export SNARKPIPE_REQUIRE_GPU=1
{ date -u; nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv; } >"$log" 2>&1
for t in .gpu/tests/*; do
  echo "== $t" >>"$log"
  timeout 150 "$t" --test-threads=1 >>"$log" 2>&1 || echo "TEST FAILED: $t rc=$?" >>"$log"
done
grep -E "^test result|TEST FAILED|^== " "$log" | tail -20
BUDGET=${BUDGET:-380} STEPS="fixtures prove" bash scripts/gpu-filecoin.sh
