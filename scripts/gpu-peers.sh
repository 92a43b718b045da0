#!/usr/bin/env bash
# One device call that races snarkpipe against its peer, supraseal C2 (peers/supraseal-c2, see
# docs/peers.md), on one H200: the carried binary makes a real key per size, writes it for
# supraseal, and proves the same witnesses with the same r and s on both provers, alternating
# in one process; every proof of both is verified with bellperson's verify_proof. Then, in a
# second process of the same call, sppark's own G1 MSM and forward NTT against snarkpipe's on
# the same resident data (--kernels), unless KERNELS=0.
#
# Build on the development machine first (the device machine has no Rust; this one no GPU):
#   peers/supraseal-c2/build-here.sh             # release build; binary in
#                                                # peers/supraseal-c2/target/release/ (or $CARGO_TARGET_DIR/release/)
#   mkdir -p .gpu && cp peers/supraseal-c2/target/release/snarkpipe-vs-supraseal .gpu/ \
#     && strip .gpu/snarkpipe-vs-supraseal
#   .gpu/snarkpipe-vs-supraseal --check-only     # passes without a GPU
# .gpu/ is git-ignored: name it in the device call's carry (in the checkout the call sends),
# and run `bash scripts/gpu-peers.sh` there. The binary links CUDA's runtime statically; the
# driver there is enough.
#
# Env: LOG_NS (comma-separated, default 20,22,24), PARTITIONS (timed proofs per size and
# prover, default 4), BATCH_ROUNDS (default 2), RACE_CAP (seconds, default 390), EXTRA (more
# flags for the proof race); KERNELS (1: run the kernel race, default), KERNEL_LOG_NS (default
# 20,21,22,23,24,25,26,27), KERNEL_CAP (seconds, default 150). One call may run 600 s.
# 2^26 in a call of its own, with less host memory held (the key is 32 GB in memory and 32 GB
# again in supraseal's pinned copy, each witness about 10 GB):
#   LOG_NS=26 KERNELS=0 RACE_CAP=540 BATCH_ROUNDS=1 EXTRA="--witnesses 2 --in-flight 2 --params-writer parallel" \
#     bash scripts/gpu-peers.sh
# Writes under $OUT: gpu.txt (nvidia-smi, first), race-$TAG.json (the report, rewritten after
# each size), race-$TAG.txt (the summary lines), race-$TAG.log (stderr: progress and errors),
# with TAG the sizes joined by '-'; kernels.json, kernels.txt and kernels.log likewise. Exits
# nonzero if either run did (a proof of either prover that did not verify, a size that did not
# finish, kernel results that differ, a run cut off by its cap).
set -u
out=${OUT:-out}; mkdir -p "$out"
{ date -u; nvidia-smi; nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version --format=csv; } >"$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
bin=.gpu/snarkpipe-vs-supraseal
if [ ! -x "$bin" ]; then
  echo "no $bin: build it here (peers/supraseal-c2/build-here.sh), copy it into .gpu/ and carry .gpu" >&2
  exit 1
fi
export SNARKPIPE_REQUIRE_GPU=1
export SNARKPIPE_LOG=${SNARKPIPE_LOG:-warn}
log_ns=${LOG_NS:-20,22,24}
tag=${log_ns//,/-}
# The parameter files (8 GB at 2^24, 32 GB at 2^26) stay off $OUT, which comes back.
params=/tmp/snarkpipe-peers
mkdir -p "$params"
df -h /tmp | tail -1
free -g | head -2
# shellcheck disable=SC2086
timeout "${RACE_CAP:-390}" "$bin" --log-n "$log_ns" --partitions "${PARTITIONS:-4}" \
  --batch-rounds "${BATCH_ROUNDS:-2}" --params-dir "$params" --out "$out/race-$tag.json" ${EXTRA:-} \
  >"$out/race-$tag.txt" 2>"$out/race-$tag.log"
rc=$?
rm -rf "$params"
echo "== race 2^{$log_ns}: rc=$rc (124: cut off by RACE_CAP)"
cat "$out/race-$tag.txt"
grep -E "^(error|failed)" "$out/race-$tag.log" | head -20
tail -5 "$out/race-$tag.log"
krc=0
if [ "${KERNELS:-1}" = 1 ]; then
  timeout "${KERNEL_CAP:-150}" "$bin" --kernels --kernel-log-n "${KERNEL_LOG_NS:-20,21,22,23,24,25,26,27}" \
    --out "$out/kernels.json" >"$out/kernels.txt" 2>"$out/kernels.log"
  krc=$?
  echo "== kernels: rc=$krc (124: cut off by KERNEL_CAP)"
  cat "$out/kernels.txt"
  grep -E "^(error|failed)" "$out/kernels.log" | head -20
fi
[ $rc -eq 0 ] && [ $krc -eq 0 ]
