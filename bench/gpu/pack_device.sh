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
# PYTHON_PACK=1: what bench/gpu/device_torch.sh needs to build tessera._tessera there for that
# machine's Python (its version differs from this one's, and it has no LLVM): the project's static
# libraries and compiler-rt's builtins, in link order, and nanobind's sources, in .dev/py.tar.xz.
if [ "${PYTHON_PACK:-0}" = 1 ]; then
  PY=$(bash scripts/python_env.sh "$B")
  cmake -S . -B "$B" -DPython_EXECUTABLE="$PY" >> "$B/configure.log"
  cmake --build "$B" -j"$(nproc)" --target _tessera
  S=$(mktemp -d)
  mkdir -p "$S/py/lib"
  cp -r "$("$PY" -c 'import nanobind, os; print(os.path.dirname(nanobind.__file__))')" "$S/py/nanobind"
  rm -rf "$S/py/nanobind/__pycache__"
  n=0
  for a in $(grep -o '[^ ]*\.a' "$B/python/CMakeFiles/_tessera.dir/link.txt" | grep -v nanobind); do
    n=$((n + 1))
    case $a in /*) f=$a ;; *) f=$B/python/$a ;; esac
    cp "$f" "$S/py/lib/$(printf %02d $n)_$(basename "$f")"  # the order is the link order (repeats kept)
  done
  tar -C "$S" -cf - py | xz -T"$(nproc)" -9 > .dev/py.tar.xz
  rm -rf "$S"
  ls -la .dev/py.tar.xz
fi
