#!/usr/bin/env bash
# The first proof of a process (issue 21): a fresh `snarkpipe bench` process per way of
# loading the kernels, each timed from exec to exit, with the report's own phases (prover
# start: per GPU its context and its kernels, then key, warm-up and the two partitions).
# Kernels come from the build's sm_90 cubin, its PTX (the driver compiles it), and NVRTC
# (SNARKPIPE_KERNELS forces each): NVRTC with the kernel cache off, then twice with an empty
# cache (the second process reads the cubin the first compiled). `--no-floors`: the bench's
# microbenchmarks are not part of a user's first proof; "first proof" is exec to that proof.
# The driver's own JIT cache is off
# (CUDA_CACHE_DISABLE=1), so each run pays what a fresh machine pays.
# Build first, here: SNARKPIPE_REQUIRE_NVCC=1 cargo build --release --bin snarkpipe; copy the
# binary to .gpu/snarkpipe, strip it, carry .gpu.
# Writes under $OUT: gpu.txt, first-proof.txt (one line per run), and each run's JSON report.
set -u
out=${OUT:-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
bin=.gpu/snarkpipe
[ -x "$bin" ] || { echo "no $bin: build it here and carry .gpu" >&2; exit 1; }
export SNARKPIPE_REQUIRE_GPU=1 SNARKPIPE_LOG=${SNARKPIPE_LOG:-warn}
cache=$(mktemp -d)
run() { # name, then environment assignments
  local name=$1; shift
  local start end
  start=$(date +%s.%N)
  env CUDA_CACHE_DISABLE=1 "$@" timeout "${RUN_CAP:-120}" "$bin" bench --backend cuda --log-n 10 --partitions 2 --no-floors --json \
    >"$out/$name.json" 2>"$out/$name.log"
  local rc=$?
  end=$(date +%s.%N)
  python3 - "$name" "$rc" "$start" "$end" "$out/$name.json" <<'PY' | tee -a "$out/first-proof.txt"
import json, sys
name, rc, start, end, path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
try:
    r = json.load(open(path))
except Exception as e:
    print(f"{name}: rc={rc} wall {end - start:.2f} s, no report ({e})"); sys.exit()
gpus = "; ".join(f"context {d['context_seconds']:.2f} s, kernels {d['kernels_seconds']:.2f} s from {d['kernels_from']}"
                 for d in r.get("device_startup", []))
first = r.get("seconds_to_first_proof")
first = f"{first:.2f} s" if first is not None else "-"
print(f"{name}: rc={rc} wall {end - start:.2f} s; first proof {first} after exec; prover start {r['seconds_prover_start']:.2f} s ({gpus}); "
      f"key {r['seconds_key']:.2f} s; warm-up {r['seconds_warm_up']:.2f} s; stream {r['seconds_total']:.2f} s; "
      f"verified {r['verified']}/{r['partitions']}")
PY
}
run cubin SNARKPIPE_KERNELS=cubin SNARKPIPE_KERNEL_CACHE=off
run ptx SNARKPIPE_KERNELS=ptx SNARKPIPE_KERNEL_CACHE=off
run nvrtc-uncached SNARKPIPE_KERNELS=nvrtc SNARKPIPE_KERNEL_CACHE=off
run nvrtc-cache-cold SNARKPIPE_KERNELS=nvrtc SNARKPIPE_KERNEL_CACHE="$cache"
run nvrtc-cache-warm SNARKPIPE_KERNELS=nvrtc SNARKPIPE_KERNEL_CACHE="$cache"
rm -rf "$cache"
