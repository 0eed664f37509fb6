#!/usr/bin/env bash
# Makes (once) the venv the tessera.torch tests run in and prints its python on stdout: torch 2.15.0
# from PyPI for the CPU, kept outside the clone (~/.cache/tessera/torch-venv-2.15.0-pyX.Y, or
# $TESSERA_TORCH_VENV) so CI runs on the same machine reuse it; re-runs are instant (a stamp file).
# PyPI's torch is the CUDA build; its 5.4 GB of NVIDIA wheels are mostly not needed for the CPU:
# torch itself without dependencies plus the four NVIDIA libraries the CUDA 13 toolkit lacks
# (2.1 GB, ~5 min here) imports when LD_LIBRARY_PATH names the toolkit's lib64 (cuBLAS, cuDNN,
# cudart: /usr/local/cuda/lib64). When that slim venv does not import (no toolkit there), the full
# `pip install torch==2.15.0` (5.4 GB, ~10 min) is made instead. Measured on a 2-core machine loaded
# by other jobs (load 14): the slim venv took 11 min. Usage: bash tests/torch/torch_venv.sh [python3]
# (the python the Tessera extension was built for). Exit 1 with one line when neither works.
set -euo pipefail
PY=${1:-python3}
VER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
VENV=${TESSERA_TORCH_VENV:-$HOME/.cache/tessera/torch-venv-2.15.0-py$VER}
CUDA_LIB=${CUDA_LIB:-/usr/local/cuda/lib64}
STAMP=$VENV/.tessera-torch
# One maker at a time: ctest runs the torch tests and the docs test's torch blocks side by side,
# and two makers of one venv would each remove what the other installs.
mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
imports() { LD_LIBRARY_PATH="$CUDA_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$VENV/bin/python" -c 'import torch, numpy, pytest' 2>/dev/null; }
if [ -f "$STAMP" ] && imports; then
  echo "$VENV/bin/python"
  exit 0
fi
# Each pip step is bounded (TESSERA_TORCH_PIP_TIMEOUT seconds, 20 min by default): a stalled
# download fails this script, and tests/torch/run.sh then skips instead of hanging CI.
pip_() { timeout "${TESSERA_TORCH_PIP_TIMEOUT:-1200}" "$VENV/bin/python" -m pip install --disable-pip-version-check -q "$@" >&2; }
mkdir -p "$(dirname "$VENV")"
if [ -e "$VENV" ] && [ ! -f "$VENV/pyvenv.cfg" ]; then
  echo "torch_venv: $VENV exists and is not a venv; remove it or set TESSERA_TORCH_VENV" >&2
  exit 1
fi
rm -rf "$VENV"
"$PY" -m venv "$VENV" >&2
echo "torch_venv: slim torch 2.15.0 (CPU use) into $VENV" >&2
pip_ numpy==2.4.6 pytest==9.2.0 typing-extensions filelock sympy networkx jinja2 fsspec
pip_ --no-deps torch==2.15.0 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 "nvidia-cufile==1.17.1.22.*" \
  nvidia-nccl-cu13==2.30.7
if ! imports; then
  echo "torch_venv: the slim torch does not import here (no CUDA 13 toolkit in $CUDA_LIB?): the full install" >&2
  pip_ torch==2.15.0
fi
if ! imports; then
  echo "torch_venv: torch 2.15.0 does not import in $VENV" >&2
  exit 1
fi
touch "$STAMP"
echo "$VENV/bin/python"
