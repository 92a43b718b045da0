#!/usr/bin/env bash
# The device call for the synthesis issue: each Filecoin kind's real 2 KiB job benched with its
# synthesis measured four ways on the same circuit and cores (scripts/gpu-filecoin.sh's
# fixtures and bench steps), then a synthetic stream at 2^LOG_N (default 22) proven twice in
# one process each: from witnesses made before the clock, and from circuits the pipeline's
# synthesis stage synthesizes (--synthesize), every proof verified.
# Build first, here: SNARKPIPE_REQUIRE_NVCC=1 cargo build --release --bins, copy
# target/release/snarkpipe into .gpu/, pack it (tar czf .gpu-z/b.tgz .gpu), carry .gpu-z and
# unpack first. Writes under $OUT: the filecoin script's five files, s$LOG_N-witnesses.json,
# s$LOG_N-circuits.json and s$LOG_N-circuits.svg.
set -u
out=${OUT:-out}; mkdir -p "$out"
STEPS="fixtures bench" KINDS="${KINDS:-winning-post window-post snap porep}" REPS=3 BUDGET="${FILECOIN_BUDGET:-420}" \
  bash "$(dirname "$0")/gpu-filecoin.sh"
k=${LOG_N:-22}; p=${PARTITIONS:-16}
for mode in witnesses circuits; do
  flag=""; [ "$mode" = circuits ] && flag="--synthesize --timeline $out/s$k-circuits.svg"
  timeout "${SYNTHETIC_CAP:-120}" .gpu/snarkpipe bench --backend cuda --json --devices 0 --keys setup --log-n "$k" \
    --partitions "$p" --workers 2 --in-flight 6 $flag >"$out/s$k-$mode.json" 2>>"$out/filecoin.log" \
    || echo "FAILED or timed out: synthetic $mode rc=$?" >>"$out/filecoin.log"
  python3 - "$out/s$k-$mode.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[1], "NO REPORT", e); sys.exit()
waited = [l for l in r["timeline_summary"].splitlines() if "synthesis" in l]
print(sys.argv[1], "verified", r["verified"], "/", r["partitions"], "failed", r["failed"],
      "s/part", round(r["seconds_per_partition"], 3), "steady", round(r["steady_state"]["seconds_per_partition"], 3),
      "busy", r["busy_fraction"], "stages", {k: round(v["seconds"], 2) for k, v in r["stages"].items()}, waited,
      "errors", r["errors"][:2])
PY
done
