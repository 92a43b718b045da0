#!/usr/bin/env bash
# One device call on the two-GPU kind that gathers the figures BENCHMARKS.md reports, inside a
# time budget (BUDGET seconds, default 560). STEPS picks what runs, in order (default
# "tests s24 s26"):
#   tests  the CUDA tests (TESTS, default all four): kernels against the CPU, PTX/NVRTC loads,
#          the GPU setup, the pipeline
#   s24    issue 6's --scaling run at 2^24 with verified proofs (P24 partitions, default 96)
#   s26    the same at 2^26 (P26 partitions, default 12, IN26 in flight, default 3)
#   s27    issue 4's 2^27 partition: bits witness, random key resident, two workers, one GPU
#   soak   issue 5's soak on the GPUs: 300 partitions of 2^10, a tenth of them faulted
#   sweep  whole partitions at 2^20..2^25 on GPU 0 (SWEEP sizes), verified
#   kernels the kernel bench with its floors, up to 2^26 (KMAX; SNARKPIPE_BENCH_PARTS and _MIN_LOG pass through)
# STAGING (copy or in-place) picks the bench's staging (STAGING27 at 2^27); EXTRA is appended to
# every bench's flags, EXTRA27 to the s27 step's (e.g. --prepin-witnesses); SCALING="" drops --scaling (one GPU).
# PHASES27=1 (PHASES26=1) makes the s27 (s26) step print every MSM's device time by phase
# (SNARKPIPE_MSM_PHASES), with its passes and window. Each step gets what is left of the
# budget up to its own cap, so the call always returns with what it has.
# Build first: ../shared/tools/gpu-bundle, plus .gpu/cuda_kernels_bench: the executable cargo names
# in `cargo bench --bench cuda_kernels --no-run` ("Executable benches/cuda_kernels.rs (PATH)"), not
# the newest target/release/deps/cuda_kernels-*, which may be the test of the same name.
# The CUDA test executables and binaries together pass the 64 MiB a device call carries; pack
# them (tar czf .gpu-z/b.tgz .gpu: about 16 MB), carry .gpu-z and unpack first (tar xzf .gpu-z/b.tgz).
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
log=$out/final.log
deadline=$((SECONDS + ${BUDGET:-560}))
staging=${STAGING:-copy}
cap() { local left=$((deadline - SECONDS - 5)); [ "$1" -lt "$left" ] && echo "$1" || echo "$left"; }
step() {  # step NAME CAP_SECONDS COMMAND...
  local name=$1 limit; limit=$(cap "$2"); shift 2
  if [ "$limit" -lt 15 ]; then echo "SKIPPED (out of time): $name" >>"$log"; return; fi
  echo "== $name (limit ${limit}s, $(date -u +%T)): $*" >>"$log"
  local start=$SECONDS
  timeout "$limit" "$@" || echo "FAILED or timed out: $name rc=$?" >>"$log"
  echo "   $name took $((SECONDS - start)) s" >>"$log"
}
bench() {  # bench NAME CAP ARGS...
  local name=$1 c=$2; shift 2
  step "bench $name" "$c" env SNARKPIPE_MSM_PHASES="${bench_phases:-0}" .gpu/snarkpipe bench --backend cuda --json --staging "$staging" \
    --timeline "$out/$name.svg" "$@" ${EXTRA:-} >"$out/$name.json" 2>>"$log"
}
{ date -u; nvidia-smi --query-gpu=index,name,memory.total,clocks.max.sm --format=csv; nproc; free -g; } >>"$log" 2>&1
for s in ${STEPS:-tests s24 s26}; do
  case $s in
    tests)
      for t in ${TESTS:-cuda_kernels cuda_nvrtc cuda_setup cuda_pipeline}; do
        exe=$(ls .gpu/tests/$t-* 2>/dev/null | head -1)
        [ -n "$exe" ] && step "test $t" 150 "$exe" --nocapture --test-threads=1 >>"$log" 2>&1
      done ;;
    s24) bench s24 200 --devices all ${SCALING---scaling} --keys setup --log-n 24 --partitions "${P24:-96}" --workers 3 \
           --in-flight 6 --trace "$out/s24.trace.json" ;;
    s26) (bench_phases=${PHASES26:-0}; bench s26 400 --devices all ${SCALING---scaling} --keys setup --log-n 26 \
           --partitions "${P26:-12}" --in-flight "${IN26:-3}" --trace "$out/s26.trace.json") ;;
    s27) # In place by default: a 2^27 key (64 GB) and its witnesses (19 GB each) leave no room for
         # pooled copies on a 128 GB host; two witnesses (W27) shared by the stream.
         (staging=${STAGING27:-in-place}; bench_phases=${PHASES27:-0}; bench s27 300 --devices 0 --keys random --witness bits --log-n 27 \
           --partitions "${P27:-6}" --workers 2 --in-flight "${IN27:-2}" --witnesses "${W27:-2}" \
           --trace "$out/s27.trace.json" ${EXTRA27:-}) ;;
    soak) bench soak 120 --devices all --partitions 300 --log-n 10 --workers 2 --inject-faults 0.1 --seed 7 ;;
    sweep) # whole partitions at 2^20..2^25 on GPU 0, verified (SWEEP: the sizes)
      for k in ${SWEEP:-20 21 22 23 25}; do
        p=$(( k <= 22 ? 48 : (k <= 23 ? 24 : 12) ))
        bench "p$k" 120 --devices 0 --keys setup --log-n "$k" --partitions "$p" --workers 2 --in-flight 3
      done ;;
    kernels) SNARKPIPE_MSM_PHASES=${PHASES:-0} SNARKPIPE_BENCH_MAX_LOG=${KMAX:-26} step "kernel bench" "${KCAP:-240}" .gpu/cuda_kernels_bench >"$out/bench.log" 2>&1 ;;
  esac
done
grep -E "test result|FAILED|SKIPPED|took" "$log"
for f in "$out"/s2?.json "$out"/p2?.json "$out"/soak.json; do
  [ -s "$f" ] && python3 - "$f" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r.get("scaling") or {}
print(sys.argv[1], r.get("staging"), "key", round(r["seconds_key"], 1), "warm", round(r["seconds_warm_up"], 1),
      "verified", r["verified"], "/", r["partitions"], "failed", r["failed"],
      "s/part", round(r["seconds_per_partition"], 3), "steady", round(r["steady_state"]["seconds_per_partition"], 3),
      "one", round(s.get("single_device_seconds_per_partition", 0), 3),
      "one-steady", round(s.get("single_device_steady_seconds_per_partition", 0), 3),
      "one-verified", s.get("single_device_verified"),
      "speedup", round(s.get("speedup", 0), 2), "steady-speedup", round(s.get("steady_speedup", 0), 2),
      "busy", r["busy_fraction"], "floors", r.get("host_floors"), "device floor", r.get("device_floor"),
      "stages", {k: round(v["seconds"], 2) for k, v in r["stages"].items()},
      "steady-devices", r["steady_state"].get("devices"), "errors", r["errors"][:2], r.get("warm_up_error"))
PY
done
tail -3 "$out/bench.log" 2>/dev/null || true
