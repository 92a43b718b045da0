#!/usr/bin/env bash
# The device call for device-side constraint evaluation in the pipeline (issue 20): the GPU
# test of circuits evaluated from resident matrices, then a synthetic stream at each 2^LOG_NS
# (default "22 24") proven twice in one process each: from witnesses made before the clock,
# and from circuits the synthesis stage synthesizes (--synthesize; witness-only after the
# first partition, a, b and c evaluated on the GPU), every proof verified.
# Build first, here (a worktree of the commit, so edits do not leak into the build):
#   SNARKPIPE_REQUIRE_NVCC=1 cargo build --release --bin snarkpipe
#   SNARKPIPE_REQUIRE_NVCC=1 cargo test --release --no-run --test cuda_pipeline
# copy the binary and the test executable into .gpu/ and .gpu/tests/, strip, pack
# (tar czf .gpu-z/b.tgz .gpu), carry .gpu-z and unpack first.
# Writes under $OUT: tests.log, s$K-witnesses.json, s$K-circuits.json, s$K-circuits.svg.
set -u
out=${OUT:-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
for t in .gpu/tests/cuda_pipeline*; do
  SNARKPIPE_REQUIRE_GPU=1 timeout "${TEST_CAP:-120}" "$t" --test-threads 1 >>"$out/tests.log" 2>&1
  echo "$(basename "$t") rc=$?" >>"$out/tests.log"
done
tail -3 "$out/tests.log"
for k in ${LOG_NS:-22 24}; do
  K=$k SYNTHETIC_CAP=${SYNTHETIC_CAP:-90} bash "$(dirname "$0")/synthetic-stream.sh"
done
