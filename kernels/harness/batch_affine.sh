#!/bin/bash
# Batch-affine bucket accumulation against the production XYZZ bucket loop, G1 and G2 (issue 21
# §3): builds kernels/harness/batch_affine_harness.cu with nvcc and runs it on the GPU.
#
#   kernels/harness/batch_affine.sh [max_log=24] [big_windows=13] [seed] [--curve=g1|g2|both] [--g2-log=22]
#       build (into $BUILD, default a fresh temporary folder) and run; --curve (or $BA_CURVE)
#       picks the curves, both by default; --g2-log (or $BA_G2_LOG) G2's largest size, by default
#       min(22, max_log)
#   kernels/harness/batch_affine.sh build DIR
#       build only, here where nvcc is: DIR/batch_affine, DIR/ptxas.txt (registers and spills)
#       and a copy of this script; then run DIR/batch_affine.sh on the GPU machine, which uses
#       the binary beside it (carry DIR there)
#
# nvcc: $NVCC, else the repository's .cuda venv (CUDA 13), else /usr/local/cuda/bin/nvcc.
# Output: stdout, and $OUT/batch-affine.txt when OUT is set (with $OUT/batch-affine-ptxas.txt
# when this run built the binary). Exit status: the harness's (1 on a mismatch, 2 on a CUDA error).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

find_nvcc() {
    if [ -n "${NVCC:-}" ]; then echo "$NVCC"; return; fi
    local root c
    root=$(cd "$here/../.." 2>/dev/null && pwd || true)
    for c in "$root"/.cuda/lib/python3*/site-packages/nvidia/cu13/bin/nvcc \
             /usr/local/cuda/bin/nvcc; do
        if [ -x "$c" ]; then echo "$c"; return; fi
    done
    command -v nvcc || { echo "batch_affine.sh: no nvcc found (set NVCC)" >&2; exit 2; }
}

build() {
    local dir=$1 nvcc lib src
    nvcc=$(find_nvcc)
    lib=$(dirname "$(dirname "$nvcc")")/lib
    src="$here/batch_affine_harness.cu"
    mkdir -p "$dir"
    echo "building with $nvcc" >&2
    if ! "$nvcc" -arch=sm_90 -O3 -std=c++17 -DBATCH_AFFINE_HARNESS -L"$lib" -Xptxas -v \
            -o "$dir/batch_affine" "$src" 2> "$dir/ptxas.txt"; then
        cat "$dir/ptxas.txt" >&2
        exit 2
    fi
    grep -i "warning" "$dir/ptxas.txt" >&2 || true
}

if [ "${1:-}" = build ]; then
    dir=${2:?usage: batch_affine.sh build DIR}
    build "$dir"
    cp "$0" "$dir/batch_affine.sh"
    chmod +x "$dir/batch_affine.sh"
    echo "built $dir/batch_affine" >&2
    exit 0
fi

if [ -x "$here/batch_affine" ]; then
    bin="$here/batch_affine"
    ptxas="$here/ptxas.txt"
else
    dir=${BUILD:-$(mktemp -d /tmp/batch_affine.XXXXXX)}
    build "$dir"
    bin="$dir/batch_affine"
    ptxas="$dir/ptxas.txt"
fi

log=/dev/null
if [ -n "${OUT:-}" ]; then
    mkdir -p "$OUT"
    log="$OUT/batch-affine.txt"
    [ -f "$ptxas" ] && cp "$ptxas" "$OUT/batch-affine-ptxas.txt"
fi
{
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used --format=csv 2>&1 || true
    set +e
    "$bin" "$@"
    rc=$?
    set -e
    echo "harness rc $rc"
    exit $rc
} 2>&1 | tee "$log"
exit "${PIPESTATUS[0]}"
