#!/usr/bin/env bash
# Builds snarkpipe-vs-supraseal in release mode on a machine without a GPU, with CUDA 13.0's
# compiler from the pip virtual environment that .ci/install-nvcc.sh makes (.cuda/ in the
# repository root; in a git worktree without one, the main checkout's is used).
#
#   peers/supraseal-c2/build-here.sh            # cargo build --release -j 1
#   JOBS=2 peers/supraseal-c2/build-here.sh     # more cargo jobs
#   CUDA_VENV=/path/to/.cuda peers/supraseal-c2/build-here.sh
#
# What it sets up:
# - NVCC: nvcc-sm90 beside this script, a wrapper that makes sppark's and supraseal-c2's
#   kernels sm_90 SASS only (see the wrapper); it runs REAL_NVCC, the venv's nvcc 13.0.
#   snarkpipe's own build script finds nvcc through NVCC too (SNARKPIPE_REQUIRE_NVCC=1: its
#   kernels become sm_90 cubins, as in CI).
# - CUDA_PATH/CUDA_HOME and PATH point at the venv's CUDA tree (headers are found by nvcc
#   itself through its nvcc.profile).
# - CUDA_LIB_DIR: where libcudart_static.a is; this crate's build.rs adds it to the link search
#   path (the cc crate looks in <nvcc>/../targets/x86_64-linux/lib, which the pip layout lacks).
# - LIBRARY_PATH: the same directory for the host linker when nvcc links a program itself
#   (sppark's build script links and runs a small GPU probe; nvcc.profile of the pip package
#   names lib64, which it does not have, so without this the link fails: cannot find
#   -lcudart_static).
# The binary lands in $CARGO_TARGET_DIR/release/snarkpipe-vs-supraseal (default target dir:
# peers/supraseal-c2/target).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
if [ -z "${CUDA_VENV:-}" ]; then
  CUDA_VENV=$root/.cuda
  if [ ! -d "$CUDA_VENV" ]; then
    # A worktree shares its git directory with the main checkout, which holds the venv.
    common=$(cd "$root" && git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
    [ -n "$common" ] && CUDA_VENV=$(dirname "$common")/.cuda
  fi
fi
cu13=$(ls -d "$CUDA_VENV"/lib/python3*/site-packages/nvidia/cu13 2>/dev/null | head -1 || true)
if [ -z "$cu13" ] || [ ! -x "$cu13/bin/nvcc" ]; then
  echo "no CUDA 13.0 nvcc under ${CUDA_VENV}: run .ci/install-nvcc.sh in the repository root first, or set CUDA_VENV" >&2
  exit 1
fi
if [ ! -f "$cu13/lib/libcudart_static.a" ]; then
  echo "$cu13/lib has no libcudart_static.a: install nvidia-cuda-runtime==13.0.* into $CUDA_VENV" >&2
  exit 1
fi
export REAL_NVCC=$cu13/bin/nvcc
export NVCC=$here/nvcc-sm90
export CUDA_PATH=$cu13 CUDA_HOME=$cu13
export CUDA_LIB_DIR=$cu13/lib
export LIBRARY_PATH=$cu13/lib${LIBRARY_PATH:+:$LIBRARY_PATH}
export PATH=$cu13/bin:$PATH
export SNARKPIPE_REQUIRE_NVCC=1
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/target}
"$REAL_NVCC" --version | tail -1
cd "$here"
exec cargo build --release -j "${JOBS:-1}" "$@"
