#!/usr/bin/env bash
# Device call for issue 36: keys on the cards providers own. On one GPU (the H100 80 GB is the
# card to show it on), with the release binary at .gpu/snarkpipe:
#   verify  2^20, setup keys, every proof checked with the pairing: the key wholly resident, and
#           under caps that keep it partly resident and stream it whole (correctness of the mixed
#           resident/streamed MSMs on the GPU).
#   s26     2^26, random keys: wholly resident (the baseline, same call) against caps of 48, 32
#           and 24 GiB (partly resident or streamed), and 16 GiB (refused at once).
#   s27     2^27, random keys, the command that hung on the H100 (warm-up on, two workers), then
#           one worker (the key partly resident beside one partition), then a 48 GiB cap.
# Each run's JSON report says how the key was held (residency[].plans), the longest admission
# wait and the host peak; nvidia-smi samples the device's memory every 200 ms beside each run.
#
# Build first, here, from a worktree of the commit (see ../shared/GPU.md), .cuda linked in:
#   SNARKPIPE_REQUIRE_NVCC=1 CARGO_TARGET_DIR=<dir> cargo build --release --bin snarkpipe
#   mkdir -p .gpu && cp <dir>/release/snarkpipe .gpu/ && strip .gpu/snarkpipe
# Env: STEPS (default "verify s26 s27"), CAP_S (seconds per run, default 240), S26_CAPS (default
# "none 48GiB 32GiB 24GiB 16GiB"), H100_CAP (on a larger card, e.g. an H200, the cap that
# emulates an 80 GB H100 in the s27 runs: 79GiB, the free memory of an H100 at start), S27_RUNS
# (default "hung-before one-worker 48GiB"; 48GiB takes no H100_CAP).
# Writes $OUT/results.tgz (every run's .json, .log and memory samples) and $OUT/summary.txt.
set -u
out=${OUT:-out}; mkdir -p "$out/runs"
bin=${BIN:-.gpu/snarkpipe}
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; nproc; free -g | head -2; } \
  >"$out/summary.txt" 2>&1
export SNARKPIPE_REQUIRE_GPU=1
status=0

# run NAME ARGS...: one bench run, with the device's memory sampled beside it.
run() {
  local name=$1; shift
  echo "== $name $(date -u +%H:%M:%S): $*" | tee -a "$out/summary.txt"
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 >"$out/runs/$name.mem" 2>/dev/null &
  local sampler=$!
  local started=$SECONDS
  timeout "${CAP_S:-240}" "$bin" bench --backend cuda --devices 0 --json "$@" >"$out/runs/$name.json" 2>"$out/runs/$name.log"
  local rc=$?
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
  local peak; peak=$(sort -n "$out/runs/$name.mem" | tail -1)
  python3 - "$out/runs/$name.json" "$rc" "$((SECONDS - started))" "${peak:-?}" >>"$out/summary.txt" <<'PY'
import json, sys
path, rc, wall, peak = sys.argv[1:5]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"   rc={rc} wall={wall}s device-peak={peak}MiB: no report ({e})"); sys.exit()
plans = [p for d in r.get("residency", []) for p in d.get("plans", [])]
held = "; ".join(f"resident {','.join(p['resident']) or '-'} ({p['resident_bytes']/1e9:.1f} GB), streamed {','.join(p['streamed']) or '-'}"
                 f" chunk {p['chunk_points']}, room for {p['partitions']}" for p in plans) or "no key resident"
waits = max((d.get("longest_admission_wait_s", 0) for d in r.get("residency", [])), default=0)
budget = max((d.get("budget_bytes", 0) for d in r.get("residency", [])), default=0)
print(f"   rc={rc} wall={wall}s: {r['partitions']} partitions, {r['seconds_per_partition']:.3f} s each, steady "
      f"{r['steady_state']['seconds_per_partition']:.3f} s; verified {r['verified']}, failed {r['failed']}; "
      f"budget {budget/1e9:.1f} GB, budget peak {r['budget']['peak_bytes']/1e9:.1f} GB, device peak {peak} MiB, "
      f"host peak {(r.get('host_peak_bytes') or 0)/2**30:.1f} GiB; longest admission wait {waits:.3f} s; key: {held}; "
      f"warm-up error: {r.get('warm_up_error')}; errors: {r['errors'][:2]}")
PY
  [ "$rc" -eq 0 ] || { echo "   (rc $rc)" >>"$out/summary.txt"; }
  return $rc
}

for step in ${STEPS:-verify s26 s27}; do
  case $step in
    verify)
      # 2^20: key 0.50 GB, a partition 0.99 GB. Wholly resident; partly resident beside two
      # partitions (2.2 GB), wholly resident beside one (1.6 GB), streamed whole (1.2 GB).
      for cap in none 2200000000 1600000000 1200000000; do
        capflag=(); [ "$cap" = none ] || capflag=(--device-memory "$cap")
        run "verify-20-$cap" --keys setup --witness bits --log-n 20 --partitions 8 --workers 2 --in-flight 3 \
          --no-floors "${capflag[@]}" || status=1
      done ;;
    s26)
      for cap in ${S26_CAPS:-none 48GiB 32GiB 24GiB 16GiB}; do
        capflag=(); [ "$cap" = none ] || capflag=(--device-memory "$cap")
        # 16 GiB is below a 2^26 partition's plan (25.2 GB): the run must end at once, refused.
        run "s26-$cap" --staging in-place --keys random --witness bits --log-n 26 --partitions 4 --workers 2 \
          --in-flight 2 --witnesses 2 --prepin-witnesses --no-floors "${capflag[@]}" || [ "$cap" = 16GiB ] || status=1
      done ;;
    s27)
      common=(--staging in-place --keys random --witness bits --log-n 27 --partitions 4 --in-flight 2 --witnesses 2 --prepin-witnesses)
      [ -n "${H100_CAP:-}" ] && common+=(--device-memory "$H100_CAP")
      for r in ${S27_RUNS:-hung-before one-worker 48GiB}; do
        case $r in
          hung-before) run s27-hung-before "${common[@]}" --workers 2 || status=1 ;;
          one-worker) run s27-one-worker "${common[@]}" --workers 1 --no-floors || status=1 ;;
          # (not with H100_CAP: one cap a run)
          48GiB) run s27-48GiB "${common[@]}" --workers 2 --no-floors --device-memory 48GiB || status=1 ;;
        esac
      done ;;
  esac
done
tar czf "$out/results.tgz" -C "$out" runs
cat "$out/summary.txt"
exit $status
