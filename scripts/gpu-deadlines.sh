#!/usr/bin/env bash
# Issue 40's GPU figure, in one device call: Winning PoSt latency while a stream of PoReps keeps
# the GPU busy, through `snarkpipe serve --backend cuda` at its default concurrency.
#
# Build first, here: ../shared/tools/gpu-bundle (the binaries land in .gpu/; carry .gpu). The
# client is the ignored test `winning_post_latency_under_a_porep_stream` of tests/deadlines.rs.
# Steps:
#   fixtures  snarkpipe fixtures for winning-post and porep (2 KiB) into $WORK (the PoRep's
#             parameters take minutes to generate; skipped when $WORK has the jobs already)
#   2kib      the daemon on GPU 0 with the 2 KiB PoRep stream (DEPTH PoReps submitted at all
#             times) and ROUNDS Winning PoSts alone, then under the stream
#   big       the same with PoReps of BIG_POREP (a job file: the sparse 2^27 sector's PoRep, made
#             by `snarkpipe sparse-sector`); skipped when BIG_POREP is unset
# STEPS picks some (default "fixtures 2kib big"). BUDGET (default 570 s) bounds the whole call.
# $OUT gets: deadlines.log (every step's stderr), STEP.daemon.log (the daemon's log),
# STEP.txt (the measurements: one line each, then the summary line) and summary.txt.
set -u
out=${OUT:-out}
mkdir -p "$out" || exit 1
work=${WORK:-/tmp/snarkpipe-deadlines}
bin=${BIN:-.gpu/snarkpipe}
client=$(ls .gpu/tests/deadlines-* 2>/dev/null | head -1)
log=$out/deadlines.log
deadline=$((SECONDS + ${BUDGET:-570}))
export ROUNDS=${ROUNDS:-5} DEPTH=${DEPTH:-4}
mkdir -p "$work/params" "$work/jobs" || exit 1
for need in "$bin" "$client"; do
  [ -n "$need" ] && [ -e "$need" ] || { echo "missing ${need:-.gpu/tests/deadlines-*}: build with gpu-bundle" | tee -a "$log"; exit 1; }
done
left() { echo $((deadline - SECONDS)); }
job_of() { find "$work/jobs" -name "$1.json" | head -1; }

measure() {  # measure NAME POREP_JOB: one daemon, the client against it
  local name=$1 porep=$2 sock=/tmp/snarkpipe-deadlines-$1.sock pid waited=0
  rm -f "$sock"
  SNARKPIPE_LOG=info NO_COLOR=1 "$bin" serve --listen "unix:$sock" --params-dir "$work/params" \
    --backend cuda --devices 0 >"$out/$name.stdout" 2>"$out/$name.daemon.log" &
  pid=$!
  until grep -q 'listening on' "$out/$name.stdout" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { echo "$name: the daemon exited before serving" | tee -a "$out/summary.txt"; return 1; }
    [ "$waited" -lt 120 ] || { echo "$name: no ready line in 120 s" | tee -a "$out/summary.txt"; kill "$pid"; return 1; }
    sleep 1; waited=$((waited + 1))
  done
  SNARKPIPE_DEADLINES_SOCKET=$sock SNARKPIPE_DEADLINES_WINNING=$(job_of winning-post) \
    SNARKPIPE_DEADLINES_POREP=$porep SNARKPIPE_DEADLINES_ROUNDS=$ROUNDS SNARKPIPE_DEADLINES_DEPTH=$DEPTH \
    timeout "$(left)" "$client" --ignored --exact winning_post_latency_under_a_porep_stream --nocapture \
    2>>"$log" | grep '^deadlines-gpu' | tee "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  kill -TERM "$pid"; wait "$pid"
  echo "$name: client exit $rc, daemon exit $? ($(grep -c . "$out/$name.txt") lines)" | tee -a "$out/summary.txt"
  grep summary "$out/$name.txt" | sed "s/^/$name: /" >>"$out/summary.txt"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >>"$out/summary.txt" 2>&1
for step in ${STEPS:-fixtures 2kib big}; do
  [ "$(left)" -gt 30 ] || { echo "$step: no time left" | tee -a "$out/summary.txt"; continue; }
  case $step in
    fixtures)
      for kind in winning-post porep; do
        [ -n "$(job_of "$kind")" ] && continue
        timeout "$(left)" "$bin" fixtures --params-dir "$work/params" --out "$work/jobs" --kinds "$kind" \
          >>"$log" 2>&1 || echo "fixtures $kind: failed (see deadlines.log)" | tee -a "$out/summary.txt"
      done ;;
    2kib) measure 2kib "$(job_of porep)" ;;
    big)
      if [ -n "${BIG_POREP:-}" ]; then measure big "$BIG_POREP"; else echo "big: BIG_POREP unset, skipped" >>"$out/summary.txt"; fi ;;
    *) echo "unknown step $step" | tee -a "$out/summary.txt" ;;
  esac
done
cat "$out/summary.txt"
