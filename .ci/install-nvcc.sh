#!/usr/bin/env bash
# Installs CUDA 13.0's compiler (no GPU needed) into .cuda/, a git-ignored virtual environment
# that build.rs finds. Every part is pinned to 13.0: a newer nvvm makes ptxas reject the PTX.
# Idempotent: does nothing when .cuda already has a working nvcc.
set -euo pipefail
cd "$(dirname "$0")/.."
nvcc() { ls .cuda/lib/python3*/site-packages/nvidia/cu13/bin/nvcc 2>/dev/null | head -1; }
if [ -n "$(nvcc)" ] && "$(nvcc)" --version >/dev/null 2>&1; then
  echo "nvcc already installed: $(nvcc)"
  exit 0
fi
python3 -m venv .cuda
.cuda/bin/pip install -q "nvidia-cuda-nvcc==13.0.*" "nvidia-cuda-runtime==13.0.*" "nvidia-nvvm==13.0.*" \
  "nvidia-cuda-crt==13.0.*" "nvidia-cuda-cccl==13.0.*"
"$(nvcc)" --version | tail -1
