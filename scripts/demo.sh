#!/usr/bin/env bash
# The README's main job: install what is missing, build, and compile + run + check a default
# GEMM, fused elementwise chain and attention kernel on this CPU (`tessera demo`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh tessera
exec "${TESSERA_BUILD_DIR:-build}/cli/tessera" demo "$@"
