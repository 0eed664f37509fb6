#!/usr/bin/env bash
# Configures and builds Tessera into build/ (Ninja, Release, all cores). Extra args go to ninja
# (e.g. a target name). Idempotent: a second run only rebuilds what changed. With
# TESSERA_PYTHON_EXE set (scripts/test.sh sets it to its venv's python), the Python package is
# built too, from the same objects.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
ARGS=()
if [ -n "${TESSERA_PYTHON_EXE:-}" ]; then ARGS+=("-DPython_EXECUTABLE=$TESSERA_PYTHON_EXE"); fi
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${ARGS[@]}"
elif [ -n "${TESSERA_PYTHON_EXE:-}" ] && ! grep -qx "Python_EXECUTABLE:FILEPATH=$TESSERA_PYTHON_EXE" "$BUILD_DIR/CMakeCache.txt"; then
  cmake -S . -B "$BUILD_DIR" "${ARGS[@]}"
fi
ninja -C "$BUILD_DIR" -j"$(nproc)" "$@"
