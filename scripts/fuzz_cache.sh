#!/usr/bin/env bash
# Builds the libFuzzer target for the record JSON decoder (store/fuzz/) with clang-22 and
# -fsanitize=fuzzer,address,undefined in its own build dir (build-fuzz/), then fuzzes it for a
# bounded time. Usage: scripts/fuzz_cache.sh [SECONDS=30]. Exits non-zero on a crash, a leak, a
# sanitizer report or a broken round-trip invariant; the reproducer is left in build-fuzz/.
set -euo pipefail

SECONDS_TO_RUN=${1:-30}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build-fuzz
CC_BIN=${CC_BIN:-clang-22}
CXX_BIN=${CXX_BIN:-clang++-22}
command -v "$CXX_BIN" >/dev/null || { echo "fuzz_cache.sh: $CXX_BIN not found (apt-get install clang-22 libclang-rt-22-dev)" >&2; exit 2; }

# Everything the target links (support, nlohmann) is instrumented too; the fuzzer runtime itself is
# linked only into the fuzz executable (its CMakeLists adds -fsanitize=fuzzer there).
SAN="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fsanitize=fuzzer-no-link -fno-omit-frame-pointer -g -O1"
cmake -S "$ROOT" -B "$BUILD" -G Ninja \
  -DCMAKE_C_COMPILER="$CC_BIN" -DCMAKE_CXX_COMPILER="$CXX_BIN" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="$SAN" -DCMAKE_C_FLAGS="$SAN" \
  -DTESSERA_WITH_MLIR=OFF -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF -DTESSERA_BUILD_FUZZERS=ON >/dev/null
ninja -C "$BUILD" -j2 record_decoder_fuzz

# The checked-in seeds stay read-only; new inputs go to a scratch corpus that persists between runs.
CORPUS=$BUILD/corpus/record_decoder
mkdir -p "$CORPUS"
cd "$BUILD"
"$BUILD/store/fuzz/record_decoder_fuzz" \
  -max_total_time="$SECONDS_TO_RUN" -max_len=8192 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  -dict="$ROOT/store/fuzz/record.dict" \
  "$CORPUS" "$ROOT/store/fuzz/corpus"
