#!/usr/bin/env bash
# The device call for the witness check of issue 38 §3: every partition's a·b = c, checked on
# the GPU before its quotient (sparse_first_unsatisfied, DeviceStream::check_satisfied).
#  1. The kernel against the CPU model's first failing index (cuda_kernels, with every other
#     kernel check), and the check behind the device seam on the GPU, in the pipeline tests of
#     device_evaluation (a witness with one value changed fails with UnsatisfiedWitness naming
#     its constraint, unretried, the device unmarked; satisfied witnesses prove).
#  2. Its cost at 2^LOG_NS (default "24 26 27"), ROUNDS rounds each (default 7), beside the
#     quotient it precedes: witness_check_cost prints the median, min and max per size.
# Build first, here (a worktree of the commit, so edits do not leak into the build):
#   SNARKPIPE_REQUIRE_NVCC=1 cargo test --release --no-run --test cuda_kernels --test device_evaluation
# copy the two test executables into .gpu/tests/, strip, pack (tar czf .gpu-z/b.tgz .gpu), carry
# .gpu-z and unpack first.
# Writes under $OUT: gpu.txt, tests.log, cost.log.
set -u
out=${OUT:-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
# The Filecoin test of device_evaluation is skipped: it proves on the CPU model, and would
# generate the 2 KiB parameters first on a fresh machine (minutes).
for t in .gpu/tests/cuda_kernels* .gpu/tests/device_evaluation*; do
  SNARKPIPE_REQUIRE_GPU=1 timeout "${TEST_CAP:-300}" "$t" --test-threads 1 --skip a_vanilla_proof \
    >>"$out/tests.log" 2>&1
  echo "$(basename "$t") rc=$?" >>"$out/tests.log"
done
tail -3 "$out/tests.log"
for t in .gpu/tests/cuda_kernels*; do
  LOG_NS=${LOG_NS:-24 26 27} ROUNDS=${ROUNDS:-7} SNARKPIPE_REQUIRE_GPU=1 timeout "${COST_CAP:-300}" \
    "$t" --ignored --exact witness_check_cost --nocapture >>"$out/cost.log" 2>&1
  echo "$(basename "$t") witness_check_cost rc=$?" >>"$out/cost.log"
done
grep -E "witness check|rc=" "$out/cost.log"
