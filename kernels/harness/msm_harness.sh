#!/bin/bash
# Builds the MSM harness on a machine without a GPU and stages it for the H200:
#   kernels/harness/msm_harness.sh [DEST]     (DEST defaults to .gpu-msm in the repository root)
# then, on the GPU machine, `bash DEST/run.sh` runs it (logs under $OUT, a table at the end).
# nvcc: $NVCC, else the pinned CUDA 13.0 venv of /work/main/.cuda or ./.cuda (see shared/GPU.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest=${1:-$root/.gpu-msm}
nvcc=${NVCC:-}
for venv in "$root/.cuda" /work/main/.cuda; do
    [ -z "$nvcc" ] && [ -x "$venv/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc" ] &&
        nvcc=$venv/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc
done
[ -n "$nvcc" ] || { echo "nvcc not found; set NVCC" >&2; exit 1; }
lib=$(dirname "$(dirname "$nvcc")")/lib
mkdir -p "$dest"
obj=$(mktemp --suffix=.o)
# about 2-4 minutes: the old and new kernels for both curves
"$nvcc" -arch=sm_90 -O3 -std=c++17 -c -o "$obj" "$root/kernels/harness/msm_harness.cu"
"$nvcc" -arch=sm_90 -o "$dest/msm_harness" "$obj" -L"$lib"
rm -f "$obj"
cat > "$dest/run.sh" <<'RUN'
#!/bin/bash
# MSM harness: correctness checks, then timings (new vs old kernels). Args: seed max_log_g1 max_log_g2 sweep.
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$OUT/smi.txt" 2>&1
timeout 168 ./msm_harness "${SEED:-$(date +%s%N)}" "${MAX_G1:-26}" "${MAX_G2:-24}" "${SWEEP:-0}" > "$OUT/harness.log" 2>&1
rc=$?
grep -E "^(FAIL|seed|device|small)" "$OUT/harness.log" | head -40
grep -vE "^(PASS|FAIL)" "$OUT/harness.log" | tail -60
echo "harness rc=$rc"
exit $rc
RUN
chmod +x "$dest/run.sh"
echo "staged $dest/msm_harness and $dest/run.sh"
