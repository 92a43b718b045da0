#!/usr/bin/env bash
# One device call for issue 37 on the 16-core, 128 GiB device machine: a sparse 32 GiB sector
# (a PoRep C1 output made without sealing), the real 32 GiB circuit checked on its witness,
# and, where a 32 GiB PoRep key is in PARAMS, a 10-partition proof that verify_seal judges.
#
# Build first, here: ../shared/tools/gpu-bundle (the binaries land in .gpu/; carry .gpu).
# Steps, in order (STEPS picks some, default "sector satisfy test-key prove"):
#   sector   snarkpipe sparse-sector --sector-size 32g: the job file and C1 output in $WORK/jobs,
#            checked by storage-proofs' vanilla verifier (seconds; tens of MB)
#   satisfy  the ignored test a_sparse_32gib_partition_satisfies_the_circuit: one random
#            partition's circuit (about 130 M constraints) synthesized with every constraint
#            checked, and its twin with a flipped tree-R-last sibling refused (minutes; about
#            20 GiB of host memory)
#   test-key the ignored test a_test_key_of_the_real_circuit_judges_a_sparse_sector: a test setup
#            of the 2 KiB PoRep circuit with known toxic waste (sparse::test_key), its .vk by
#            name judging a bellperson proof of a sparse sector through verify_seal (a minute)
#   prove    snarkpipe prove --kind porep --backend cuda --json on the sparse job, 10
#            partitions, verified by filecoin-proofs' verify_seal; skipped unless PARAMS holds
#            the 32 GiB PoRep .vk and .params (a .params does not fit this disk: a 32 GiB test
#            key held in memory needs the engine to prove with an in-memory key, not there yet)
# Each step runs under `timeout` and GNU time (peak resident memory), logged; a failed step is
# logged and the next one runs. BUDGET (default 570 s) bounds the whole script.
# $OUT gets sparse.log (every step's stderr, times and peaks), sector.json (what sparse-sector
# wrote), prove.json and nvidia-smi.txt.
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
[ -x "$bin" ] || echo "MISSING: $bin (run ../shared/tools/gpu-bundle and carry .gpu)" >>"$log"
job=$work/jobs/porep-32gib-sparse.json
for s in ${STEPS:-sector satisfy test-key prove}; do
  case $s in
    sector)
      step sector 120 "$out/sector.json" "$bin" sparse-sector --sector-size 32g --out "$work/jobs" --seed "${SEED:-$RANDOM}"
      ls -l "$work/jobs" >>"$log" 2>&1 ;;
    satisfy)
      exe=$(ls .gpu/tests/filecoin_sparse_sector-* 2>/dev/null | head -1)
      if [ -z "$exe" ]; then echo "MISSING: .gpu/tests/filecoin_sparse_sector-*" >>"$log"; continue; fi
      step satisfy 540 /dev/null "$exe" --ignored --exact a_sparse_32gib_partition_satisfies_the_circuit --nocapture ;;
    test-key)
      exe=$(ls .gpu/tests/filecoin_sparse_sector-* 2>/dev/null | head -1)
      if [ -z "$exe" ]; then echo "MISSING: .gpu/tests/filecoin_sparse_sector-*" >>"$log"; continue; fi
      step test-key 300 /dev/null "$exe" --ignored --exact a_test_key_of_the_real_circuit_judges_a_sparse_sector --nocapture ;;
    prove)
      if ! ls "$params"/v28-stacked-proof-of-replication-merkletree-poseidon_hasher-8-8-0-sha256_hasher-*.vk >/dev/null 2>&1; then
        echo "SKIPPED prove: no 32 GiB PoRep key in $params (a 32 GiB test key lives in memory only; snarkpipe prove reads keys from .params files)" >>"$log"
        continue
      fi
      [ -f "$job" ] || { echo "SKIPPED prove: no sparse job ($job)" >>"$log"; continue; }
      step prove 540 "$out/prove.json" "$bin" prove --kind porep --backend cuda --json --vanilla "$job" --params-dir "$params" ;;
    *) echo "UNKNOWN STEP: $s" >>"$log" ;;
  esac
done
echo "== done $(date -u +%T)" >>"$log"
