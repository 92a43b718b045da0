#!/usr/bin/env bash
# One synthetic stream at 2^K (env K; PARTITIONS, default 16; IN_FLIGHT, default 6: partitions
# in flight, which is also how many synthesize at once; MODES, default "witnesses circuits") proven twice on GPU 0 by the
# bundled .gpu/snarkpipe, each way in a process of its own: from witnesses made before the
# clock, and from circuits the synthesis stage synthesizes (--synthesize). Writes
# $OUT/s$K-witnesses.json, s$K-circuits.json and s$K-circuits.svg, appends failures to
# $OUT/$LOG (default bench.log) and prints one summary line a run. Called by
# scripts/gpu-synthesis.sh and scripts/gpu-device-eval.sh.
set -u
out=${OUT:-out}; log="$out/${LOG:-bench.log}"; k=${K:?K is the log2 of the domain}; p=${PARTITIONS:-16}; f=${IN_FLIGHT:-6}
for mode in ${MODES:-witnesses circuits}; do
  flag=""; [ "$mode" = circuits ] && flag="--synthesize --timeline $out/s$k-circuits.svg"
  timeout "${SYNTHETIC_CAP:-120}" .gpu/snarkpipe bench --backend cuda --json --devices 0 --keys setup --log-n "$k" \
    --partitions "$p" --workers 2 --in-flight "$f" $flag >"$out/s$k-$mode.json" 2>>"$log" \
    || echo "FAILED or timed out: 2^$k $mode rc=$?" >>"$log"
  python3 - "$out/s$k-$mode.json" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as e:
    print(sys.argv[1], "NO REPORT", e); sys.exit()
waited = [l for l in r["timeline_summary"].splitlines() if "synthesis" in l]
print(sys.argv[1], "verified", r["verified"], "/", r["partitions"], "failed", r["failed"],
      "s/part", round(r["seconds_per_partition"], 3), "steady", round(r["steady_state"]["seconds_per_partition"], 3),
      "busy", r["busy_fraction"], "stages", {k: round(v["seconds"], 3) for k, v in r["stages"].items()}, waited,
      "errors", r["errors"][:2])
PY
done
