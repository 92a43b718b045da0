# Shared by the standalone nvcc harnesses' scripts (batch_affine.sh, scatter.sh), which source
# it and call harness_main. Not run on its own.
#
#   harness_main NAME SOURCE MACRO REPORT "EXTRA_NVCC_FLAGS" [build DIR | harness args...]
#
# NAME: the binary's name; SOURCE: the .cu beside the script; MACRO: the define that turns the
# source on; REPORT: the file under $OUT the run's output goes to (REPORT.txt, with
# REPORT-ptxas.txt). `build DIR` builds only, here where nvcc is: DIR/NAME, DIR/ptxas.txt
# (registers and spills), and copies of the calling script and this file, so that DIR/script
# runs on the GPU machine with the binary beside it (carry DIR there). Otherwise it builds into
# $BUILD (default a fresh temporary folder) unless a binary is beside the script, and runs it
# with the remaining arguments. nvcc: $NVCC, else the repository's .cuda venv (CUDA 13), else
# /usr/local/cuda/bin/nvcc. Exit status: the harness's.

harness_find_nvcc() {
    if [ -n "${NVCC:-}" ]; then echo "$NVCC"; return; fi
    local root c
    root=$(cd "$harness_here/../.." 2>/dev/null && pwd || true)
    for c in "$root"/.cuda/lib/python3*/site-packages/nvidia/cu13/bin/nvcc \
             /usr/local/cuda/bin/nvcc; do
        if [ -x "$c" ]; then echo "$c"; return; fi
    done
    command -v nvcc || { echo "$harness_script: no nvcc found (set NVCC)" >&2; exit 2; }
}

harness_build() {  # harness_build DIR
    local dir=$1 nvcc lib
    nvcc=$(harness_find_nvcc)
    lib=$(dirname "$(dirname "$nvcc")")/lib
    mkdir -p "$dir"
    echo "building with $nvcc" >&2
    # shellcheck disable=SC2086
    if ! "$nvcc" -arch=sm_90 -O3 -std=c++17 -D"$harness_macro" -L"$lib" -Xptxas -v $harness_flags \
            -o "$dir/$harness_name" "$harness_here/$harness_source" 2> "$dir/ptxas.txt"; then
        cat "$dir/ptxas.txt" >&2
        exit 2
    fi
    grep -i "warning" "$dir/ptxas.txt" >&2 || true
}

harness_main() {
    harness_name=$1 harness_source=$2 harness_macro=$3 harness_report=$4 harness_flags=$5
    shift 5
    harness_here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
    harness_script=$(basename "${BASH_SOURCE[1]}")
    if [ "${1:-}" = build ]; then
        local dir=${2:?usage: $harness_script build DIR}
        harness_build "$dir"
        cp "$harness_here/$harness_script" "$harness_here/nvcc_harness.sh" "$dir/"
        chmod +x "$dir/$harness_script"
        echo "built $dir/$harness_name" >&2
        exit 0
    fi
    local bin ptxas dir log=/dev/null
    if [ -x "$harness_here/$harness_name" ]; then
        bin="$harness_here/$harness_name"
        ptxas="$harness_here/ptxas.txt"
    else
        dir=${BUILD:-$(mktemp -d "/tmp/$harness_name.XXXXXX")}
        harness_build "$dir"
        bin="$dir/$harness_name"
        ptxas="$dir/ptxas.txt"
    fi
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT"
        log="$OUT/$harness_report.txt"
        [ -f "$ptxas" ] && cp "$ptxas" "$OUT/$harness_report-ptxas.txt"
    fi
    {
        nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used --format=csv 2>&1 || true
        set +e
        "$bin" "$@"
        local rc=$?
        set -e
        echo "harness rc $rc"
        exit $rc
    } 2>&1 | tee "$log"
    exit "${PIPESTATUS[0]}"
}
