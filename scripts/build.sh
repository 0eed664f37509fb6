#!/usr/bin/env bash
# Configures and builds Tessera into build/ (Ninja, Release, all cores). Extra args go to ninja
# (e.g. a target name). Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
ninja -C "$BUILD_DIR" -j"$(nproc)" "$@"
