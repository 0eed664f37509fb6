#!/usr/bin/env bash
# The tessera.torch tests (ctest python_torch_tests): makes or reuses the torch venv
# (tests/torch/torch_venv.sh; ~5 min and 2.1 GB the first time, instant after), then runs these
# pytest files against the build tree's package. Exit 77 (skipped) when no torch venv can be made
# here (no network for PyPI): the line says so.
#   bash tests/torch/run.sh PYTHON BUILD_DIR [pytest args]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=$1
BUILD=$(cd "$2" && pwd)
shift 2
if ! TPY=$(bash "$HERE/torch_venv.sh" "$PY"); then
  echo "python_torch_tests: skipped: no torch venv could be made (tests/torch/torch_venv.sh failed)"
  exit 77
fi
export LD_LIBRARY_PATH="${CUDA_LIB:-/usr/local/cuda/lib64}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONPATH="$BUILD/python"
# The stand-in CUDA driver test_cuda.py drives the CUDA path with (built with the bundle tests).
export TESSERA_FAKE_CUDA="${TESSERA_FAKE_CUDA:-$BUILD/tests/bundle/libtessera_fake_cuda.so}"
cd "$HERE"
exec "$TPY" -m pytest -q -p no:cacheprovider "$@" "$HERE"
