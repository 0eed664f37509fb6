#!/usr/bin/env bash
# The README's test command (and what .ci/run calls): install what is missing, build everything,
# run every test with ctest, then the bounded fuzz run of the cache service's record decoder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
# One test process per core; tests that need a GPU carry the label `gpu` and skip without one.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 900
if [ -f scripts/fuzz_cache.sh ]; then
  bash scripts/fuzz_cache.sh "${TESSERA_FUZZ_SECONDS:-30}"
fi
echo "all tests passed"
