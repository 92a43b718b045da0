#!/usr/bin/env bash
# Issue 6's device call on the two-GPU kind: the GPU setup and pipeline tests, then
# `snarkpipe bench --scaling` (the same stream on GPU 0 alone, then on every GPU, in one
# process) with setup keys, so every proof is verified, at 2^24 and 2^26.
# Build first with ../shared/tools/gpu-bundle. Logs and JSON go to $OUT (or ./out).
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
log=$out/scaling.log
nvidia-smi --query-gpu=name,memory.total,clocks.sm --format=csv >>"$log" 2>&1
nproc >>"$log"; free -g >>"$log"
for t in .gpu/tests/cuda_kernels-* .gpu/tests/cuda_setup-* .gpu/tests/cuda_pipeline-*; do
  [ -e "$t" ] || continue
  echo "== $t" >>"$log"
  timeout "${TEST_LIMIT:-150}" "$t" --nocapture --test-threads=1 >>"$log" 2>&1 || echo "TEST FAILED: $t" >>"$log"
done
scaling() {
  local name=$1 limit=$2; shift 2
  echo "== bench $name: $*" >>"$log"
  /usr/bin/time -v timeout "$limit" .gpu/snarkpipe bench --backend cuda --devices all --scaling --keys setup \
    --json --timeline "$out/$name.svg" --trace "$out/$name.trace.json" "$@" >"$out/$name.json" 2>>"$log" \
    || echo "BENCH FAILED: $name" >>"$log"
}
[ -n "${SKIP24:-}" ] || scaling s24 "${LIMIT24:-200}" --log-n 24 --partitions "${P24:-16}"
[ -n "${SKIP26:-}" ] || scaling s26 "${LIMIT26:-330}" --log-n 26 --partitions "${P26:-6}" --in-flight 2
grep -E "test result|FAILED|Maximum resident" "$log"
for f in "$out"/s2*.json; do
  [ -s "$f" ] && python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("scaling") or {}
print(sys.argv[1], "key", round(r["seconds_key"], 1), "warm", round(r["seconds_warm_up"], 1),
      "verified", r["verified"], "/", r["partitions"], "failed", r["failed"],
      "s/part", round(r["seconds_per_partition"], 3), "steady", round(r["steady_state"]["seconds_per_partition"], 3),
      "one", round(s.get("single_device_seconds_per_partition", 0), 3), "one-verified", s.get("single_device_verified"),
      "speedup", round(s.get("speedup", 0), 2), "steady-speedup", round(s.get("steady_speedup", 0), 2),
      "busy", r["busy_fraction"], "errors", r["errors"][:2], r.get("warm_up_error"))
PY
done
