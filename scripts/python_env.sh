#!/usr/bin/env bash
# Makes (once) the venv the Python package is built and tested with: BUILD_DIR/pyenv with the
# packages of python/requirements-test.txt from PyPI. Re-runs are instant: the installed
# requirements are remembered in a stamp file. Prints the venv's python on stdout.
#   bash scripts/python_env.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-${TESSERA_BUILD_DIR:-build}}
VENV=$BUILD_DIR/pyenv
REQ=python/requirements-test.txt
STAMP=$VENV/.tessera-requirements
# Debian's interpreter when there is one (its headers come from python3-dev), else python3.
PY=/usr/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
mkdir -p "$BUILD_DIR"
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV" >&2
fi
if ! cmp -s "$REQ" "$STAMP"; then
  "$VENV/bin/python" -m pip install --disable-pip-version-check -q -r "$REQ" >&2
  cp "$REQ" "$STAMP"
fi
echo "$(cd "$VENV/bin" && pwd)/python"
