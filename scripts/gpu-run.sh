#!/usr/bin/env bash
# One device call: the GPU pipeline tests, then whole-partition benches on one GPU and on all,
# the CUDA soak with injected faults, and the CPU backend's figure in the same run. Logs and
# traces go to $OUT (at most 8 files come back). Build first with ../shared/tools/gpu-bundle.
set -uo pipefail
out=${OUT:-out}; mkdir -p "$out"
bin=.gpu/snarkpipe
log=$out/run.log
{ date -u; nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv; nproc; } >"$log" 2>&1
for t in .gpu/tests/cuda_pipeline-*; do
  echo "== $t" >>"$log"
  timeout 240 "$t" --nocapture --test-threads=1 >>"$log" 2>&1 || echo "TEST FAILED: $t" >>"$log"
done
bench() {
  local name=$1; shift
  echo "== $name: snarkpipe bench $*" >>"$log"
  local start=$(date +%s)
  timeout "${LIMIT:-150}" "$bin" bench "$@" --json >"$out/$name.json" 2>>"$log" || echo "BENCH FAILED: $name rc=$?" >>"$log"
  echo "   took $(( $(date +%s) - start )) s wall (key and witness generation included)" >>"$log"
}
bench cpu16 --backend cpu --partitions 2 --log-n 16 --keys setup
bench cuda16 --backend cuda --devices 0 --partitions 8 --log-n 16 --keys setup --trace "$out/trace16.json"
bench soak --backend cuda --devices 0 --partitions 300 --log-n 10 --workers 2 --inject-faults 0.1 --seed 7
bench cuda22 --backend cuda --devices 0 --partitions 8 --log-n 22 --keys random
bench cuda20 --backend cuda --devices 0 --partitions 8 --log-n 20 --keys random
bench cuda24 --backend cuda --devices 0 --partitions 12 --log-n 24 --keys random --timeline "$out/timeline24.svg"
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  bench cuda24x2 --backend cuda --devices all --partitions 12 --log-n 24 --keys random --timeline "$out/timeline24x2.svg"
fi
LIMIT=220 bench cuda26 --backend cuda --devices 0 --partitions 4 --log-n 26 --keys random --in-flight 2
# Fold the small JSON reports into one file, to stay under the 8-file limit.
for f in "$out"/*.json; do
  case "$f" in *trace16.json) continue;; esac
  echo "$(basename "$f" .json) $(cat "$f")" >>"$out/bench.jsonl"; rm -f "$f"
done
tail -5 "$log"
