#!/usr/bin/env bash
# One device call for issue 37 on the 16-core, 128 GiB device machine: a sparse sector (a PoRep
# C1 output made without sealing) proven end to end with a test setup of its real circuit
# (`snarkpipe prove --test-setup`: the key made on the GPU with fresh toxic waste and held in
# memory, only its .vk and .meta written), every proof judged by filecoin-proofs' verify_seal.
#
# Build first, here: a release binary built with nvcc into .gpu/snarkpipe (carry .gpu). The
# satisfy and test-key steps need test executables (../shared/tools/gpu-bundle).
# Steps, in order (STEPS picks some, default "small sector prove"):
#   small    a sparse 2 KiB sector proven with --test-setup: the whole path in seconds
#   sector   snarkpipe sparse-sector --sector-size $SIZE (default 32g): the job file and C1
#            output in $WORK/jobs, checked by storage-proofs' vanilla verifier (seconds)
#   prove    snarkpipe prove --kind porep --test-setup on that job: the test setup of the real
#            circuit (about 130 M constraints at 32 GiB) and its matrices, then 10 partitions,
#            synthesis included, verified by verify_seal. DEVICE_MEMORY caps the device budget;
#            SYNTHESIS_MEMORY (default 24GiB) bounds the witnesses in flight.
#   satisfy  the ignored test a_sparse_32gib_partition_satisfies_the_circuit (minutes)
#   test-key the ignored test a_test_key_of_the_real_circuit_judges_a_sparse_sector
# Each step runs under `timeout` and GNU time (peak resident memory), logged; a failed step is
# logged and the next one runs. BUDGET (default 570 s) bounds the whole script.
# $OUT gets sparse.log (every step's stderr, times and peaks), sector.json, small.json,
# prove.json (the report: timings, setup, host peak, each device's key residency),
# nvidia-smi.txt and gpu-samples.csv (memory and utilisation every 2 s).
set -u
out=${OUT:-out}
mkdir -p "$out" || exit 1
work=${WORK:-/tmp/snarkpipe-sparse}
bin=${BIN:-.gpu/snarkpipe}
params=${PARAMS:-$work/params}
log=$out/sparse.log
deadline=$((SECONDS + ${BUDGET:-570}))
mkdir -p "$work/jobs" "$params" || exit 1
export RAYON_NUM_THREADS=${RAYON_NUM_THREADS:-$(nproc)}

cap() {  # cap SECONDS: the step's cap, or what is left of the budget if that is less
  local left=$((deadline - SECONDS - 5))
  if [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}
step() {  # step NAME CAP STDOUT_FILE COMMAND...: COMMAND under timeout (and GNU time), stdout to the file
  local name=$1 limit file=$3 start rc timed=()
  limit=$(cap "$2"); shift 3
  if [ "$limit" -lt 15 ]; then echo "SKIPPED (out of time): $name" >>"$log"; return 1; fi
  [ -x /usr/bin/time ] && timed=(/usr/bin/time -f "   $name: %e s wall, %U s user, %S s sys, peak RSS %M KiB")
  echo "== $name (limit ${limit}s, $(date -u +%T)): $*" >>"$log"
  start=$SECONDS
  timeout "$limit" "${timed[@]}" "$@" >"$file" 2>>"$log"
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "   ok: $name took $((SECONDS - start)) s" >>"$log"
  elif [ "$rc" -eq 124 ]; then
    echo "TIMED OUT: $name after $((SECONDS - start)) s" >>"$log"
  else
    echo "FAILED: $name rc=$rc after $((SECONDS - start)) s" >>"$log"
  fi
  nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >>"$out/nvidia-smi.txt" 2>&1
  return "$rc"
}

{ date -u; nproc; free -g; df -h "$work"; } >>"$log" 2>&1
[ -x "$bin" ] || echo "MISSING: $bin (build a release binary into .gpu and carry .gpu)" >>"$log"
nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -l 2 >"$out/gpu-samples.csv" 2>/dev/null &
sampler=$!
size=${SIZE:-32g}
job=$work/jobs/porep-${size}-sparse.json
keys=$work/keys-$size-test-setup-known-toxic-waste
# The test key (about 62 GB of points at 32 GiB) and its matrices (about 13 GB) are held
# outside the prover's host shares: the witnesses get what is left of the 128 GiB host.
cap_args=(--synthesis-memory "${SYNTHESIS_MEMORY:-24GiB}")
[ -n "${DEVICE_MEMORY:-}" ] && cap_args+=(--device-memory "$DEVICE_MEMORY")
export SNARKPIPE_LOG=${SNARKPIPE_LOG:-info,snarkpipe::groth16::setup=debug} NO_COLOR=1
for s in ${STEPS:-small sector prove}; do
  case $s in
    small)
      mkdir -p "$work/small"
      step small-sector 60 "$out/small-sector.json" "$bin" sparse-sector --sector-size 2KiB --out "$work/small" \
        && step small 240 "$out/small.json" "$bin" prove --kind porep --backend cuda --json --test-setup \
          --vanilla "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$out/small-sector.json")" \
          --params-dir "$work/small/keys-2k-test-setup-known-toxic-waste" ;;
    sector)
      step sector 120 "$out/sector.json" "$bin" sparse-sector --sector-size "$size" --out "$work/jobs" --seed "${SEED:-$RANDOM}"
      made=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$out/sector.json" 2>/dev/null)
      [ -n "$made" ] && cp "$made" "$job"
      ls -l "$work/jobs" >>"$log" 2>&1 ;;
    prove)
      [ -f "$job" ] || { echo "SKIPPED prove: no sparse job ($job)" >>"$log"; continue; }
      step prove 560 "$out/prove.json" "$bin" prove --kind porep --backend cuda --json --test-setup "${cap_args[@]}" \
        --vanilla "$job" --params-dir "$keys" ;;
    satisfy)
      exe=$(ls .gpu/tests/filecoin_sparse_sector-* 2>/dev/null | head -1)
      if [ -z "$exe" ]; then echo "MISSING: .gpu/tests/filecoin_sparse_sector-*" >>"$log"; continue; fi
      step satisfy 540 /dev/null "$exe" --ignored --exact a_sparse_32gib_partition_satisfies_the_circuit --nocapture ;;
    test-key)
      exe=$(ls .gpu/tests/filecoin_sparse_sector-* 2>/dev/null | head -1)
      if [ -z "$exe" ]; then echo "MISSING: .gpu/tests/filecoin_sparse_sector-*" >>"$log"; continue; fi
      step test-key 300 /dev/null "$exe" --ignored --exact a_test_key_of_the_real_circuit_judges_a_sparse_sector --nocapture ;;
    *) echo "UNKNOWN STEP: $s" >>"$log" ;;
  esac
done
kill "$sampler" 2>/dev/null
echo "== done $(date -u +%T)" >>"$log"
