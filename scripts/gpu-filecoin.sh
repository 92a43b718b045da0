#!/usr/bin/env bash
# One device call on the H200 machine: real 2 KiB Filecoin inputs made there with
# filecoin-proofs, each kind proven by `snarkpipe prove` on the GPU, each kind benched against
# bellperson on the same circuits, and the bellperson drop-in against the native path at 2^24.
#
# Build first, here: ../shared/tools/gpu-bundle (the binaries land in .gpu/; carry .gpu).
# Steps, in order (STEPS picks some, default "fixtures prove bench compat"):
#   fixtures  snarkpipe fixtures for KINDS into $WORK/params and $WORK/jobs (all cores; the
#             PoRep and SnapDeals parameters take minutes to generate)
#   prove     snarkpipe prove --backend cuda --json on each kind's job
#   bench     snarkpipe bench --backend cuda --circuit KIND --job ... --partitions REPS (3), with
#             partition 0's synthesis measured four ways (full, recording, witness-only, evaluation)
#   compat    snarkpipe bench --backend cuda --api compat --log-n 24 --keys setup --partitions 6
#             (COMPAT_PARTITIONS, COMPAT_LOG_N; COMPAT_BATCH circuits a call, default the bench's:
#             as many as the prover keeps in flight, at most half, so 3 here: two calls)
# Each step is logged and bounded by `timeout`; a failed or timed-out step is logged and the
# next one runs. BUDGET (default 570 s) bounds the whole script: each step gets what is left,
# up to its own cap, so the call returns with what it has.
# $OUT gets at most 8 files (what a device call brings back): filecoin.log (every step's
# stderr and timing), nvidia-smi.txt (the GPU before and after each step), fixtures.jsonl,
# prove.jsonl and bench.jsonl (one "NAME JSON" line per run) and summary.txt.
# WORK (default /tmp/snarkpipe-filecoin) holds parameters, sectors, jobs, proofs and the compat
# bench's temporary parameter file (gigabytes at 2^24; TMPDIR points there).
set -u
out=${OUT:-out}
mkdir -p "$out" || exit 1
work=${WORK:-/tmp/snarkpipe-filecoin}
bin=${BIN:-.gpu/snarkpipe}
log=$out/filecoin.log
smi=$out/nvidia-smi.txt
kinds=${KINDS:-window-post winning-post snap porep}
reps=${REPS:-3}
deadline=$((SECONDS + ${BUDGET:-570}))
mkdir -p "$work/params" "$work/jobs" "$work/tmp" || exit 1
export TMPDIR=$work/tmp
export SNARKPIPE_REQUIRE_GPU=1
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-$(nproc)}

gpu_state() {  # gpu_state LABEL: one snapshot of the GPU, for the step it follows
  { echo "== $1 ($(date -u +%T))"
    nvidia-smi --query-gpu=index,name,memory.used,memory.total,utilization.gpu,temperature.gpu,clocks.sm --format=csv 2>&1
  } >>"$smi"
}
cap() {  # cap SECONDS: the step's cap, or what is left of the budget if that is less
  local left=$((deadline - SECONDS - 5))
  if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}
step() {  # step NAME CAP STDOUT_FILE COMMAND...: runs COMMAND under timeout, stdout to the file
  local name=$1 limit file=$3 start rc
  limit=$(cap "$2"); shift 3
  if [ "$limit" -lt 15 ]; then echo "SKIPPED (out of time): $name" >>"$log"; return 1; fi
  echo "== $name (limit ${limit}s, $(date -u +%T)): $*" >>"$log"
  start=$SECONDS
  timeout "$limit" "$@" >"$file" 2>>"$log"
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "   ok: $name took $((SECONDS - start)) s" >>"$log"
  elif [ "$rc" -eq 124 ]; then
    echo "TIMED OUT: $name after $((SECONDS - start)) s" >>"$log"
  else
    echo "FAILED: $name rc=$rc after $((SECONDS - start)) s" >>"$log"
  fi
  gpu_state "$name"
  return "$rc"
}
fold() {  # fold NAME FILE JSONL: appends "NAME <the file's one line>" to JSONL
  # fixtures prints a pretty list over several lines: one line of JSON is the same JSON.
  if [ -s "$2" ]; then echo "$1 $(tr -d '\n' <"$2")" >>"$3"; else echo "$1 null" >>"$3"; fi
  rm -f "$2"
}
job_of() {  # job_of KIND: the job file fixtures wrote for KIND
  case $1 in
    porep) echo "$work/jobs/porep-1.json" ;;
    *) echo "$work/jobs/$1.json" ;;
  esac
}

{ date -u; nvidia-smi 2>&1; nproc; free -g; df -h "$work"; } >>"$log" 2>&1
gpu_state start
[ -x "$bin" ] || echo "MISSING: $bin (run ../shared/tools/gpu-bundle and carry .gpu)" >>"$log"

for s in ${STEPS:-fixtures prove bench compat}; do
  case $s in
    fixtures)
      # One kind at a time, the quick ones first, so a slow parameter generation costs only its
      # own kind. Each call seals its sector afresh; the jobs already written hold their
      # vanilla proofs and need no sector.
      for k in $(for q in window-post winning-post snap porep; do case " $kinds " in *" $q "*) echo "$q";; esac; done); do
        step "fixtures $k" "${FIXTURES_CAP:-300}" "$out/fixtures-$k.json" \
          "$bin" fixtures --params-dir "$work/params" --out "$work/jobs" --kinds "$k"
        fold "$k" "$out/fixtures-$k.json" "$out/fixtures.jsonl"
      done ;;
    prove)
      for k in $kinds; do
        job=$(job_of "$k")
        if [ ! -s "$job" ]; then echo "SKIPPED (no job file $job): prove $k" >>"$log"; continue; fi
        step "prove $k" "${PROVE_CAP:-90}" "$out/prove-$k.json" \
          "$bin" prove --backend cuda --json --kind "$k" --vanilla "$job" --params-dir "$work/params" \
          --out "$work/jobs/$k.proof"
        fold "$k" "$out/prove-$k.json" "$out/prove.jsonl"
      done ;;
    bench)
      for k in $kinds; do
        job=$(job_of "$k")
        if [ ! -s "$job" ]; then echo "SKIPPED (no job file $job): bench $k" >>"$log"; continue; fi
        step "bench $k" "${BENCH_CAP:-150}" "$out/bench-$k.json" \
          "$bin" bench --backend cuda --json --circuit "$k" --job "$job" --params-dir "$work/params" \
          --partitions "$reps"
        fold "$k" "$out/bench-$k.json" "$out/bench.jsonl"
      done ;;
    compat)
      step "bench compat" "${COMPAT_CAP:-300}" "$out/bench-compat.json" \
        "$bin" bench --backend cuda --json --api compat --log-n "${COMPAT_LOG_N:-24}" --keys setup \
        --partitions "${COMPAT_PARTITIONS:-6}" ${COMPAT_BATCH:+--compat-batch "$COMPAT_BATCH"}
      fold compat "$out/bench-compat.json" "$out/bench.jsonl" ;;
    *) echo "UNKNOWN STEP: $s" >>"$log" ;;
  esac
done
rm -rf "$work/tmp"

# The figures that matter, one line a run; a run without a report says so.
python3 - "$out" >"$out/summary.txt" 2>&1 <<'PY'
import json, os, sys
out = sys.argv[1]
def lines(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return
    for line in open(path):
        name, _, text = line.strip().partition(" ")
        try:
            yield name, json.loads(text)
        except ValueError as e:
            yield name, {"unreadable": str(e)}
def r3(x):
    return None if x is None else round(x, 3)
for kind, r in lines("prove.jsonl"):
    if not r or "unreadable" in r:
        print("prove", kind, "NO REPORT", r); continue
    t = r["seconds"]
    print("prove", kind, r["backend"], "partitions", r["partitions"], "constraints", r["constraints_per_partition"],
          "verified", r["verified"], "key", r3(t["key_load"]), "synthesis", r3(t["synthesis"]), "queue", r3(t["queue"]),
          "gpu", r3(t["gpu"]), "verify", r3(t["verify"]), "total", r3(t["total"]))
for name, r in lines("bench.jsonl"):
    if not r or "unreadable" in r:
        print("bench", name, "NO REPORT", r); continue
    c, f = r.get("compat"), r.get("filecoin")
    if c:
        print("bench compat 2^%d" % r["log_n"], r["backend"], "batch", c["batch"], "calls", len(c["calls"]),
              "verified", c["verified"], "failed", c["failed"], "misses", c["key_misses"],
              "first-call", r3(c["first_call_seconds"]), "(first-call misses %d)" % c["first_call_key_misses"],
              "steady/part", r3(c["steady_seconds_per_partition"]),
              "native/part", r3(c["native_seconds_per_partition"]),
              "native-synthesis/part", r3(c["native_synthesis_seconds_per_partition"]),
              "native-proving/part", r3(c["native_proving_seconds_per_partition"]),
              "ratio", r3(c["ratio"]), "ratio-to-proving", r3(c["ratio_to_native_proving"]),
              "native verified", r["verified"] - c["verified"], "key", r3(r["seconds_key"]),
              "write", r3(c["seconds_write_params"]), "errors", r["errors"][:2])
    elif f:
        print("bench", name, r["backend"], "partitions/proof", f["partitions_per_proof"],
              "constraints", f["constraints_per_partition"], "reps", f["repetitions"],
              "verified", f["verified"], "failed", f["failed"], "first-key", r3(f["first_key_load_seconds"]),
              "misses", f["key_misses"], "synthesis/part", r3(f["synthesis_seconds_per_partition"]),
              "queue/part", r3(f["queue_seconds_per_partition"]), "gpu/part", r3(f["gpu_seconds_per_partition"]),
              "snarkpipe/part", r3(f["snarkpipe_total_seconds_per_partition"]),
              "bellperson/part", r3(f["bellperson_total_seconds_per_partition"]),
              "speedup", r3(f["speedup_over_bellperson"]), "errors", r["errors"][:2])
        y = f.get("synthesis")
        if y:
            print("synthesis", name, "constraints", y["constraints"], "threads", y["threads"],
                  "full", r3(y["full_seconds"]), "record", r3(y["record_seconds"]),
                  "witness-only", r3(y["witness_only_seconds"]), "evaluate", r3(y["evaluate_seconds"]),
                  "per-proof", r3(y["per_proof_seconds"]), "speedup", r3(y["speedup"]),
                  "equal", y["witnesses_equal"], "terms", y["terms"], "matrices-bytes", y["matrices_bytes"],
                  "staged host/device", y["staged_bytes_host_evaluated"], y["staged_bytes_device_evaluated"],
                  "witness-host-bytes", y["witness_host_bytes"])
        waited = [l for l in (r.get("timeline_summary") or "").splitlines() if "synthesis" in l]
        print("timeline", name, waited, "busy", r.get("busy_fraction"))
    else:
        print("bench", name, "verified", r.get("verified"), "failed", r.get("failed"))
PY
grep -E "ok:|FAILED|TIMED OUT|SKIPPED|MISSING|UNKNOWN" "$log"
cat "$out/summary.txt"
