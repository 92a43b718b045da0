#!/usr/bin/env bash
# Installs CUDA 13.0's compiler and NVRTC (no GPU needed) into .cuda/, a git-ignored virtual
# environment: build.rs finds nvcc there, and tests/cuda_nvrtc.rs compiles every kernel with
# NVRTC through .cuda/nvrtc/libnvrtc.so (put .cuda/nvrtc on LD_LIBRARY_PATH, as .ci/run does).
# Every part is pinned to 13.0: a newer nvvm makes ptxas reject the PTX.
# Idempotent: does nothing when .cuda already has a working nvcc and NVRTC.
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc() { ls .cuda/lib/python3*/site-packages/nvidia/cu13/bin/nvcc 2>/dev/null | head -1; }
nvrtc() { ls .cuda/lib/python3*/site-packages/nvidia/cu13/lib/libnvrtc.so.13 2>/dev/null | head -1; }
if [ -n "$(nvcc)" ] && "$(nvcc)" --version >/dev/null 2>&1 && [ -n "$(nvrtc)" ] && [ -e .cuda/nvrtc/libnvrtc.so ]; then
  echo "nvcc and NVRTC already installed: $(nvcc)"
  exit 0
fi
[ -x .cuda/bin/pip ] || python3 -m venv .cuda
.cuda/bin/pip install -q "nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-nvvm==13.0.*" \
  "nvidia-cuda-crt==13.0.*" "nvidia-cuda-cccl==13.0.*" "nvidia-cuda-nvrtc==13.0.*"
# cudarc looks for libnvrtc.so; the wheel ships libnvrtc.so.13 (and the builtins beside it).
lib=$(cd "$(dirname "$(nvrtc)")" && pwd)
mkdir -p .cuda/nvrtc
for f in "$lib"/libnvrtc*.so*; do ln -sf "$f" .cuda/nvrtc/; done
ln -sf "$lib/libnvrtc.so.13" .cuda/nvrtc/libnvrtc.so
"$(nvcc)" --version | tail -1
