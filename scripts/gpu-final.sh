#!/usr/bin/env bash
# One device call on the two-GPU kind that gathers every figure BENCHMARKS.md reports, inside a
# time budget (BUDGET seconds, default 560): the CUDA tests (kernels against the CPU reference,
# the GPU setup, the pipeline), issue 6's --scaling runs with verified proofs at 2^24 and 2^26,
# and the kernel bench (floors measured in the same run). Each step gets what is left of the
# budget, up to its own cap, so the call always returns with what it has.
# Build first: ../shared/tools/gpu-bundle, plus .gpu/cuda_kernels_bench (cargo bench --no-run).
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
log=$out/final.log
deadline=$((SECONDS + ${BUDGET:-560}))
cap() { local left=$((deadline - SECONDS - 5)); [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }
step() {  # step NAME CAP_SECONDS COMMAND...
  local name=$1 limit; limit=$(cap "$2"); shift 2
  if [ "$limit" -lt 15 ]; then echo "SKIPPED (out of time): $name" >>"$log"; return; fi
  echo "== $name (limit ${limit}s, $(date -u +%T)): $*" >>"$log"
  local start=$SECONDS
  timeout "$limit" "$@" || echo "FAILED or timed out: $name rc=$?" >>"$log"
  echo "   $name took $((SECONDS - start)) s" >>"$log"
}
{ date -u; nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv; nproc; free -g; } >>"$log" 2>&1
for t in cuda_kernels cuda_setup cuda_pipeline; do
  exe=$(ls .gpu/tests/$t-* 2>/dev/null | head -1)
  [ -n "$exe" ] && step "test $t" 150 "$exe" --nocapture --test-threads=1 >>"$log" 2>&1
done
scaling() {  # scaling NAME CAP ARGS...
  local name=$1 c=$2; shift 2
  step "scaling $name" "$c" .gpu/snarkpipe bench --backend cuda --devices all --scaling --keys setup --json \
    --timeline "$out/$name.svg" "$@" >"$out/$name.json" 2>>"$log"
}
scaling s24 170 --log-n 24 --partitions "${P24:-48}" --trace "$out/s24.trace.json"
SNARKPIPE_BENCH_MAX_LOG=26 step "kernel bench" 150 .gpu/cuda_kernels_bench >"$out/bench.log" 2>&1
scaling s26 400 --log-n 26 --partitions "${P26:-12}" --in-flight 2
grep -E "test result|FAILED|SKIPPED|took" "$log"
for f in "$out"/s2*.json; do
  [ -s "$f" ] && python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("scaling") or {}
print(sys.argv[1], "key", round(r["seconds_key"], 1), "warm", round(r["seconds_warm_up"], 1),
      "verified", r["verified"], "/", r["partitions"], "failed", r["failed"],
      "s/part", round(r["seconds_per_partition"], 3), "steady", round(r["steady_state"]["seconds_per_partition"], 3),
      "one", round(s.get("single_device_seconds_per_partition", 0), 3),
      "one-steady", round(s.get("single_device_steady_seconds_per_partition", 0), 3),
      "one-verified", s.get("single_device_verified"),
      "speedup", round(s.get("speedup", 0), 2), "steady-speedup", round(s.get("steady_speedup", 0), 2),
      "busy", r["busy_fraction"], "errors", r["errors"][:2], r.get("warm_up_error"))
PY
done
tail -3 "$out/bench.log" 2>/dev/null
