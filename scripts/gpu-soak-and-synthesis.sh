#!/usr/bin/env bash
# One device call for issues 19 and 20: the soak on the H200 machine's 16 cores (the CPU
# backend; the test executable runs on the daemon's allocator and counts the live heap), then
# the GPU tests of device-side evaluation and the synthetic streams proven from witnesses and
# from circuits (--synthesize: witness-only synthesis, a, b and c evaluated on the GPU) at 2^24
# and 2^26, every proof verified.
# Build first, here (a worktree of the commit, .cuda linked in):
#   SNARKPIPE_REQUIRE_NVCC=1 cargo build --release --bin snarkpipe
#   SNARKPIPE_REQUIRE_NVCC=1 cargo test --release --no-run --test soak --test cuda_pipeline
# copy the binary into .gpu/ and the two test executables into .gpu/tests/, strip, pack
# (tar czf .gpu-z/b.tgz .gpu), carry .gpu-z and unpack first.
# Env: SOAK (partitions, default 10000), S24_IN_FLIGHT (default 12), S26_PARTITIONS (default 8),
# S26_IN_FLIGHT (default 6), STEPS (default "soak tests s24 s26"; "two" adds issue 22's
# gpu-final.sh s24 step on this one GPU, into $OUT/two).
# Writes under $OUT: gpu.txt, soak.log, tests.log, s24-*.json, s26-*.json, the circuits' SVGs.
set -u
out=${OUT:-out}; mkdir -p "$out"; here=$(dirname "$0")
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
nproc >>"$out/gpu.txt"
for step in ${STEPS:-soak tests s24 s26}; do
  echo "== $step $(date -u +%H:%M:%S)"
  case $step in
    soak)
      SNARKPIPE_SOAK_PARTITIONS=${SOAK:-10000} timeout "${SOAK_CAP:-240}" .gpu/tests/soak* --nocapture \
        >"$out/soak.log" 2>&1
      echo "soak rc=$?"; grep -E "^  (partitions|proved|failed|cancelled|unexplained|RSS|live|wall)" "$out/soak.log" ;;
    tests)
      for t in .gpu/tests/cuda_pipeline*; do
        SNARKPIPE_REQUIRE_GPU=1 timeout "${TEST_CAP:-120}" "$t" --test-threads 1 >>"$out/tests.log" 2>&1
        echo "$(basename "$t") rc=$?" >>"$out/tests.log"
      done
      tail -3 "$out/tests.log" ;;
    s24) K=24 PARTITIONS=16 IN_FLIGHT=${S24_IN_FLIGHT:-12} SYNTHETIC_CAP=${SYNTHETIC_CAP:-100} bash "$here/synthetic-stream.sh" ;;
    two) # issue 22's prepared two-GPU run, here on the one GPU this kind has (no --scaling)
      OUT=$out/two STEPS=s24 P24=${P24:-96} SCALING="" BUDGET=${TWO_CAP:-120} bash "$here/gpu-final.sh"
      tail -5 "$out/two/final.log" ;;
    s26) K=26 PARTITIONS=${S26_PARTITIONS:-8} IN_FLIGHT=${S26_IN_FLIGHT:-6} SYNTHETIC_CAP=${SYNTHETIC_CAP:-150} \
      bash "$here/synthetic-stream.sh" ;;
  esac
done
echo "== end $(date -u +%H:%M:%S)"
