#!/usr/bin/env bash
# Creates bench/.venv with torch from PyPI, the optional anchor of gemm_bench (torch.matmul) and
# attention_bench (scaled_dot_product_attention). Bench-only: the build and the tests never need
# it, and the benches skip the torch column when it is absent. PyPI's Linux x86_64 torch wheel is
# the CUDA build: it pulls the NVIDIA libraries although the benches use the CPU only (torch
# 2.15.0+cu132: 5.4 GB installed, ~10 min here); download.pytorch.org's CPU-only index is not
# reachable from these machines.
# Usage: bash bench/torch_venv.sh [python3]   (idempotent: does nothing when torch imports)
set -euo pipefail
cd "$(dirname "$0")"
PY=${1:-python3}
if [ -x .venv/bin/python ] && .venv/bin/python -c 'import torch' 2>/dev/null; then
  echo "torch_venv: bench/.venv has torch $(.venv/bin/python -c 'import torch; print(torch.__version__)')"
  exit 0
fi
"$PY" -m venv .venv
.venv/bin/pip install --upgrade pip >/dev/null
.venv/bin/pip install torch numpy
.venv/bin/python -c 'import torch; print("torch_venv: torch", torch.__version__, "CPU threads", torch.get_num_threads())'
