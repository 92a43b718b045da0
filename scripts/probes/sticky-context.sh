#!/usr/bin/env bash
# Device call: which way of replacing a context recovers a process from a sticky error.
# Builds the probe with the machine's nvcc and runs each way in a fresh process.
set -uo pipefail
cd "$(dirname "$0")"
out=${OUT:-/tmp}
nvcc=/usr/local/cuda/bin/nvcc
$nvcc -arch=sm_90 -cubin -o "$out/sticky.cubin" sticky_context.cu || exit 1
$nvcc -arch=sm_90 -o "$out/sticky" sticky_context.cu -lcuda || exit 1
for way in none release-retain primary-reset own-context; do
  "$out/sticky" "$out/sticky.cubin" "$way"
  echo "  exit $?"
done 2>&1 | tee "$out/sticky-context.log"
rm -f "$out/sticky" "$out/sticky.cubin"
