#!/usr/bin/env bash
# tessera.torch on a lent GPU machine (issue 52): that machine's Python (3.12 when last seen) is not
# this one's and it has no LLVM, so the extension tessera._tessera is compiled there, against its
# Python's headers and the nanobind sources packed here, and linked with the project's static
# libraries packed here (bench/gpu/pack_device.sh with PYTHON_PACK=1: .dev/py.tar.xz) and the
# pack's libraries (bench/gpu/device_common.sh's unpack_pack, already run: $D). Then, within $1
# seconds in all (default 150): the `gpu`-marked tessera.torch tests, and bench/torch_model_bench.py's
# CUDA section (the GPT block tuned for the device's chip, against eager torch and torch.compile in
# the same run). Writes $OUT/torch_gpu_tests.txt and $OUT/torch_model_bench.txt.
#   build only:  bash bench/gpu/device_torch.sh build      (in the background while the GPU is busy)
#   run:         bash bench/gpu/device_torch.sh run|bench [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
PYB=/tmp/tessera-py
D=${D:-/tmp/tessera-dev}  # where unpack_pack put the pack
LOG=$OUT/torch_build.log
mode=${1:-run}

build() {
  local inc suffix src=/tmp/tessera-py-src
  inc=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['include'])")
  suffix=$(python3 -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
  [ -f "$inc/Python.h" ] || { echo "no Python.h under $inc: tessera._tessera cannot be built here"; return 1; }
  rm -rf "$src" "$PYB"; mkdir -p "$src" "$PYB/tessera"
  python3 -c "import lzma, tarfile, sys; tarfile.open(fileobj=lzma.open('.dev/py.tar.xz')).extractall(sys.argv[1])" "$src" || return 1
  local nb=$src/py/nanobind common="-std=c++20 -O2 -g0 -fPIC -fvisibility=hidden -ffunction-sections -fdata-sections -fno-stack-protector"
  # nanobind's library (its CMake build's flags) and the module's three sources, in parallel.
  { for f in "$nb"/src/{common,error,implicit,nb_datetime,nb_enum,nb_func,nb_internals,nb_ndarray,nb_static_property,nb_type,trampoline}.cpp; do
      echo "-DNB_BUILD -DNB_COMPACT_ASSERTIONS -fno-strict-aliasing -I$nb/include -isystem $nb/ext/robin_map/include -I$inc $f -o $src/$(basename "$f").o"
    done
    for f in python/src/module.cpp python/src/kernels.cpp python/src/sessions.cpp; do
      echo "'-DTESSERA_VERSION=\"0.1.0\"' -I. -I$inc -I$nb/include $f -o $src/$(basename "$f").o"
    done; } | xargs -d '\n' -P "$(nproc)" -I{} sh -c "nice c++ $common -c {}" || return 1
  # Link order as the build's own link line (pack_device.sh numbered the archives).
  c++ -shared -Wl,--gc-sections -Wl,-s -o "$PYB/tessera/_tessera$suffix" "$src"/module.cpp.o "$src"/kernels.cpp.o \
    "$src"/sessions.cpp.o "$src"/nb_*.o "$src"/common.cpp.o "$src"/error.cpp.o "$src"/implicit.cpp.o "$src"/trampoline.cpp.o \
    "$src"/py/lib/*.a "$D"/lib/libtessera_llvm.so "$D"/lib/libsqlite3.so.0 "$D"/lib/libcpp-httplib.so.0.11 \
    "$D"/lib/libxgboost.so.0 "$D"/lib/libz.so.1 -Wl,-rpath,"$D/lib" || return 1
  cp python/tessera/*.py python/tessera/py.typed "$D/bin/tessera-measure" "$PYB/tessera/"
  PYTHONPATH=$PYB python3 -c "import tessera; print('tessera', tessera.__version__, 'built for', __import__('sys').version.split()[0])"
}

if [ "$mode" = build ]; then
  mkdir -p "$OUT"
  t0=$SECONDS
  if build > "$LOG" 2>&1; then echo "built in $((SECONDS - t0)) s" >> "$LOG"; else echo "BUILD FAILED" >> "$LOG"; fi
  exit 0
fi

secs=${2:-150}
end=$((SECONDS + secs))
grep -q "^built in" "$LOG" 2>/dev/null || { echo "tessera.torch: the extension did not build here:"; tail -5 "$LOG"; exit 1; }
export PYTHONPATH=$PYB TESSERA_BIN=$D/bin/tessera PYTHONUNBUFFERED=1
left=$((end - SECONDS))
[ "$mode" = bench ] ||  # bench: the benchmark alone
(cd tests/torch && timeout $((left / 3)) python3 -m pytest -q -p no:cacheprovider -m gpu -x test_cuda_device.py) 2>&1 |
  tail -15 | tee "$OUT/torch_gpu_tests.txt"
left=$((end - SECONDS))
[ "$left" -gt 20 ] || { echo "torch_model_bench: not run (time)"; exit 0; }
timeout "$left" python3 bench/torch_model_bench.py --threads none --trials "${TORCH_TRIALS:-8}" --seconds 1 \
  --out /tmp/torch_model 2>&1 | tail -20 | tee "$OUT/torch_model_bench.txt"
