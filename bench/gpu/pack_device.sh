#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run `tessera` and the `gpu`-labelled tests: that machine has
# CUDA but neither LLVM 22 nor Debian's libraries, and only 64 MiB travel with a call. A build with
# MLIR/LLVM reduced to one shared object (TESSERA_STATIC_LLVM, cmake/StaticLLVM.cmake: 177 MB
# instead of 257 MB of libLLVM + libMLIR), the other non-system libraries, xz-compressed into
# .dev/pack.tar.xz (~40 MB; .dev/ is excluded from git). bench/gpu/run_on_device.sh unpacks it there.
# Usage: bash bench/gpu/pack_device.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${TESSERA_DEV_BUILD_DIR:-build-dev}
mkdir -p "$B"
cmake -S . -B "$B" -DTESSERA_STATIC_LLVM=ON -DTESSERA_WITH_POSTGRES=OFF -DTESSERA_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Release > "$B/configure.log"
cmake --build "$B" -j"$(nproc)" --target tessera tessera-measure gpu_device_tests
S=$(mktemp -d)
mkdir -p "$S/bin" "$S/lib" .dev
grep -qx '/.dev/' .git/info/exclude 2>/dev/null || { mkdir -p .git/info; echo '/.dev/' >> .git/info/exclude; }
# tessera-measure: the helper every tune runs its candidates in (next to tessera).
cp "$B/cli/tessera" "$B/cli/tessera-measure" "$B/tests/gpu/gpu_device_tests" "$S/bin/"
# The C and C++ runtimes stay the target machine's own (newer there); everything else travels.
for f in $(ldd "$S"/bin/* | awk '/=> \//{print $3}' | sort -u); do
  case $(basename "$f") in
    libc.so*|libm.so*|libstdc++*|libgcc_s*|libpthread*|libdl.so*|librt.so*|ld-linux*) ;;
    *) cp -L "$f" "$S/lib/" ;;
  esac
done
# Symbols stay out: only 64 MiB travel with a call, the checkout's tracked files included.
strip --strip-unneeded "$S"/bin/* 2>/dev/null || true
tar -C "$S" -cf - bin lib | xz -T"$(nproc)" -9 > .dev/pack.tar.xz
rm -rf "$S"
ls -la .dev/pack.tar.xz
