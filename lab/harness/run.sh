#!/bin/bash
# Builds the NTT/field harness (here, where nvcc is) into a folder, with a script that runs it on
# the GPU machine: checks + benchmarks, a variant built with the eo_cc multiplications, and
# compute-sanitizer runs.
#   lab/harness/run.sh build DIR     # then run DIR/run.sh there (logs under $OUT or DIR/out)
set -e
if [ "$1" = build ]; then
    dir=${2:?build DIR}
    root=$(cd "$(dirname "$0")/../.." && pwd)
    NVCC=${NVCC:-$(ls "$root"/.cuda/lib/python3*/site-packages/nvidia/cu13/bin/nvcc /work/main/.cuda/lib/python3*/site-packages/nvidia/cu13/bin/nvcc 2>/dev/null | head -1)}
    lib=$(dirname "$(dirname "$NVCC")")/lib
    mkdir -p "$dir"
    "$NVCC" -arch=sm_90 -O3 -DNTT_HARNESS -L"$lib" -o "$dir/ntt_harness" "$root/lab/harness/ntt_harness.cu"
    "$NVCC" -arch=sm_90 -O3 -DNTT_HARNESS -L"$lib" -DFR_MUL_PTX=fr_mul_eo_cc -DFP_MUL_PTX=fp_mul_eo_cc -o "$dir/ntt_harness_cc" "$root/lab/harness/ntt_harness.cu"
    cp "$0" "$dir/run.sh"
    exit 0
fi
cd "$(dirname "$0")"
out=${OUT:-$PWD/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,utilization.gpu --format=csv > "$out/smi.txt" 2>&1 || true
set +e
./ntt_harness 27 22 24 > "$out/harness.log" 2>&1; rc=$?
./ntt_harness_cc 27 16 20 > "$out/harness_cc.log" 2>&1; rc5=$?
san=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$san" ]; then
    timeout 90 "$san" --tool racecheck ./ntt_harness 0 12 10 > "$out/racecheck.log" 2>&1; echo "racecheck rc $?" >> "$out/racecheck.log"
    timeout 60 "$san" --tool memcheck ./ntt_harness 0 12 10 > "$out/memcheck.log" 2>&1; echo "memcheck rc $?" >> "$out/memcheck.log"
fi
cat "$out/smi.txt"
grep -E "^(seed|device|check (Fr|Fp|NTT 2\^(2|8|16) )|checks|FAIL|rate|RESULT)" "$out/harness.log"
grep -E "^\|" "$out/harness.log"
echo "harness rc $rc"
echo "--- eo_cc build (rc $rc5)"; grep -E "^(FAIL|RESULT|rate production)|^\| 2[0-9]" "$out/harness_cc.log"
for f in racecheck memcheck; do echo "--- $f"; tail -4 "$out/$f.log" 2>/dev/null; done
