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
K=${LOG_N:-22} LOG=filecoin.log bash "$(dirname "$0")/synthetic-stream.sh"
