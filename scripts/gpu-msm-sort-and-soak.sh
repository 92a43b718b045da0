#!/usr/bin/env bash
# Device calls for issues 21 and 19: the MSM's binned scatter checked and timed against the
# direct scatter it replaces (both in one process), the MSM phases in isolation, sppark's G1 MSM
# against snarkpipe's in one process, batch-affine buckets for G1 and G2 against the production
# XYZZ loop (the harness), the production batch-affine bucket phase in the bench (its variants)
# and in a partition stream, and the soak on the machine's 16 cores on the binary's allocator.
#
# Build first, here (a worktree of the commit, .cuda linked in; see ../shared/GPU.md):
#   SNARKPIPE_REQUIRE_NVCC=1 cargo test --release --no-run --test cuda_kernels --test soak
#   SNARKPIPE_REQUIRE_NVCC=1 cargo bench --no-run --bench cuda_kernels
#   peers/supraseal-c2/build-here.sh
#   lab/harness/batch_affine.sh build .gpu/batch-affine
# then copy into .gpu/: tests/cuda_kernels-*, tests/soak-*, cuda_kernels_bench (the bench
# executable), snarkpipe-vs-supraseal; strip; pack (tar czf .gpu-z/b.tgz .gpu), carry .gpu-z and
# unpack first (tar xzf .gpu-z/b.tgz).
# Env: STEPS (default "tests bench race affine soak"; also "partition": PART_LOG, PART_N, PART_BINS
# (binaries under .gpu/, default snarkpipe), PART_ROUNDS), SOAK (partitions, default 10000),
# BENCH_LOGS (MSM sizes of the kernel bench, default "24 26"), BENCH_PARTS (default g1,g2),
# RACE_LOGS (default 24,26,27), BA_CURVE and BA_G2_LOG (the batch-affine harness's curves and
# largest G2 size, lab/harness/batch_affine_harness.cu),
# and a cap in seconds per step: TEST_CAP, BENCH_CAP, RACE_CAP, AFFINE_CAP, SOAK_CAP.
# Writes under $OUT: gpu.txt, tests.log, bench-*.log (with bench-*.md), race.txt/race.json/
# race.log, batch-affine.txt, partition-BIN-ROUND.json/.log, soak.log, packed at the end into $OUT/results.tgz. Exits nonzero
# if a step failed.
set -u
out=${OUT:-out}; mkdir -p "$out"
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader; nproc; } \
  >"$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
export SNARKPIPE_REQUIRE_GPU=1
status=0
step_done() { echo "$1 rc=$2"; [ "$2" -eq 0 ] || status=1; }
for step in ${STEPS:-tests bench race affine soak}; do
  echo "== $step $(date -u +%H:%M:%S)"
  case $step in
    tests) # every MSM check against blstrs, with both scatters
      rc=0
      for t in .gpu/tests/cuda_kernels-*; do
        timeout "${TEST_CAP:-150}" "$t" --test-threads 1 >>"$out/tests.log" 2>&1 || rc=$?
      done
      tail -4 "$out/tests.log"; step_done tests $rc ;;
    bench) # direct against binned scatter in one process, with each MSM's phases
      for k in ${BENCH_LOGS:-24 26}; do
        OUT=$out/bench-$k SNARKPIPE_MSM_PHASES=1 SNARKPIPE_BENCH_PARTS=${BENCH_PARTS:-g1,g2} SNARKPIPE_BENCH_MIN_LOG=$k \
          SNARKPIPE_BENCH_MAX_LOG=$k timeout "${BENCH_CAP:-150}" .gpu/cuda_kernels_bench >"$out/bench-$k.log" 2>&1
        rc=$?
        [ -f "$out/bench-$k/bench.md" ] && mv "$out/bench-$k/bench.md" "$out/bench-$k.md" && rmdir "$out/bench-$k"
        grep -E '^\| (G1|G2)' "$out/bench-$k.log" | head -20; step_done "bench 2^$k" $rc
      done ;;
    race) # sppark's G1 MSM and NTT against snarkpipe's, same resident data, one process
      timeout "${RACE_CAP:-150}" .gpu/snarkpipe-vs-supraseal --kernels --kernel-log-n "${RACE_LOGS:-24,26,27}" \
        --out "$out/race.json" >"$out/race.txt" 2>"$out/race.log"
      rc=$?; cat "$out/race.txt"; step_done race $rc ;;
    affine) # batch-affine against XYZZ, G1 and G2, every bucket checked against production's
      OUT=$out timeout "${AFFINE_CAP:-200}" .gpu/batch-affine/batch_affine.sh >/dev/null 2>&1
      rc=$?; grep -E '^(==|\| XYZZ|\| grid|\| coalesced|check|stress)' "$out/batch-affine.txt" | head -60
      step_done affine $rc ;;
    partition) # a stream of partitions with a random witness (G2's B MSM at c = 20 from 2^23
      # points), every proof verified; each binary of PART_BINS in turn (variants of one commit
      # built with different defaults), PART_ROUNDS times, alternating
      for round in $(seq "${PART_ROUNDS:-1}"); do
        for bin in ${PART_BINS:-snarkpipe}; do
          tag=$bin-$round
          SNARKPIPE_MSM_PHASES=1 timeout "${PART_CAP:-240}" ".gpu/$bin" bench --backend cuda --json --staging copy \
            --devices 0 --keys setup --witness random --log-n "${PART_LOG:-24}" --partitions "${PART_N:-12}" \
            --workers 2 --in-flight 3 >"$out/partition-$tag.json" 2>"$out/partition-$tag.log"
          rc=$?; echo "-- $tag"; grep "msm phases" "$out/partition-$tag.log" | grep "c=20" | tail -2
          python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print({k: d[k] for k in ("seconds_per_partition","steady_state","verified","failed") if k in d})' \
            "$out/partition-$tag.json" 2>/dev/null || tail -c 400 "$out/partition-$tag.json"; echo
          step_done "partition $tag" $rc
        done
      done ;;
    soak) # the CPU backend on 16 cores; the test re-runs itself with mimalloc's purge delay at 0
      SNARKPIPE_SOAK_PARTITIONS=${SOAK:-10000} timeout "${SOAK_CAP:-240}" .gpu/tests/soak-* --nocapture \
        >"$out/soak.log" 2>&1
      rc=$?; grep -E "^  (partitions|proved|failed|cancelled|unexplained|RSS|live|wall)" "$out/soak.log"
      step_done soak $rc ;;
  esac
done
echo "== end $(date -u +%H:%M:%S) status=$status"
# A device call brings back a few files: everything goes back as one archive.
tar czf "$out.tgz" -C "$out" . && rm -rf "${out:?}"/* && mv "$out.tgz" "$out/results.tgz"
exit $status
