#!/usr/bin/env bash
# The README's test command (and what .ci/run calls): install what is missing, build everything,
# run every test with ctest (the Python package's pytest suite and the C bundle example included),
# then the bounded fuzz run of the cache service's record decoder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
BUILD_DIR=${TESSERA_BUILD_DIR:-build}
# The venv (numpy, pytest, nanobind, scikit-build-core from PyPI) is made once and kept in the
# build folder; the Python extension is then built with everything else, not a second time.
TESSERA_PYTHON_EXE=$(bash scripts/python_env.sh "$BUILD_DIR")
export TESSERA_PYTHON_EXE
bash scripts/build.sh
# A fresh build has no record of how long each test takes, so ctest would start the long ones
# wherever they fall in its list and a 100 s test could begin last; seed its cost file (names it
# no longer knows are ignored; the file is rewritten by every run).
COSTS="$BUILD_DIR/Testing/Temporary/CTestCostData.txt"
if [ ! -s "$COSTS" ]; then
  mkdir -p "$(dirname "$COSTS")"
  cp tests/ctest_costs.txt "$COSTS"
fi
# One test process per core; tests that need a GPU carry the label `gpu` and skip without one.
ctest --test-dir "$BUILD_DIR" --output-on-failure -j"$(nproc)" --timeout 900
if [ -f scripts/fuzz_cache.sh ]; then
  bash scripts/fuzz_cache.sh "${TESSERA_FUZZ_SECONDS:-30}"
fi
echo "all tests passed"
