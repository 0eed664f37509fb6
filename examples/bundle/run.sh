#!/usr/bin/env bash
# From tuning to deployment, end to end (also the `bundle_example` test): tune a GEMM and an
# attention kernel into a store, bundle their winners for the host and two GPUs, build the bundle
# and demo.c with a plain `cc` (no LLVM, MLIR or Tessera library on the link line), run it, and
# check a nearest-shape bundle and the runtime's clean failures.
#   bash examples/bundle/run.sh [path/to/tessera] [work dir]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh" bundle "$@"

step "tune (small budgets: this is a test, not a benchmark)"
"$T" tune gemm --m 256 --n 256 --k 256 --trials 8 --min-time 0.01 --top-k 2 --db tessera.db | tail -6
"$T" tune attention --heads 2 --seq 256 --head-dim 64 --trials 4 --min-time 0.01 --top-k 2 --db tessera.db | tail -6

step "bundle for host, sm_90 and gfx942"
# No GPU here: its entries ship the untuned defaults, asked for (bundle refuses them otherwise).
"$T" bundle --kernels "$HERE/kernels.txt" --db tessera.db --targets host,sm_90,gfx942 --missing default --out bundle

step "build the bundle and the demo with $CC"
# link.flags: -ldl -lpthread -lm, plus the system's OpenMP runtime (libomp.so.5) when a host kernel is threaded.
build_demo bundle demo.c demo strict
# Each tool's answer is read once and then matched: `ldd … | grep -q` under pipefail fails at random
# when grep's early exit meets ldd's next write (SIGPIPE).
libs=$(ldd ./demo)
if grep -Eiq 'libLLVM|libMLIR|tessera' <<< "$libs"; then die "demo links LLVM/MLIR/Tessera libraries"; fi
if grep -q 'libomp' <<< "$libs" && ! grep -q -- 'libomp' bundle/link.flags; then die "libomp linked but not asked for"; fi
# The runtime without its GPU half compiles too.
"$CC" -std=c11 -Wall -Wextra -Werror -DTESSERA_BUNDLE_NO_GPU -c bundle/tessera_runtime.c bundle/tessera_runtime_gpu.c

step "a threaded entry takes OpenMP from the system, not from LLVM's folder"
# A two-thread 512^3 GEMM's default is threaded on every host; the deployment machine has no LLVM, so
# neither the program's RPATH/RUNPATH nor the loader's answer may name it. An empty store: the
# tuned 256^3 key above would lend its config (one thread may have won there) as the nearest shape.
printf 'gemm --m 512 --n 512 --k 512 --threads 2\nattention --heads 2 --seq 256 --head-dim 64 --threads 2\n' > threaded.txt
"$T" bundle --kernels threaded.txt --db threaded.db --targets host --missing default --out threaded > /dev/null
grep -q 'libomp' threaded/link.flags || die "the two-thread entry did not ask for OpenMP: $(cat threaded/link.flags)"
build_demo threaded demo.c demo_threaded
paths=$(readelf -d ./demo_threaded | grep -E 'RPATH|RUNPATH' || true)
if grep -q '/llvm' <<< "$paths"; then die "demo_threaded finds a library through LLVM's folder: $paths"; fi
libs=$(ldd ./demo_threaded)
if grep -E 'libomp|libLLVM|libMLIR' <<< "$libs" | grep '/llvm' > /dev/null; then die "demo_threaded loads from LLVM's folder: $(grep libomp <<< "$libs")"; fi
grep -q 'libomp.so.5 => /' <<< "$libs" || die "libomp.so.5 is not found on the system's path: $(grep libomp <<< "$libs")"
./demo_threaded --gemm 512x512x512 > threaded.txt || die "demo_threaded failed: $(cat threaded.txt)"
grep -q "demo: all checks passed" threaded.txt || die "demo_threaded failed"
# And it runs with LLVM's folder (the one link.flags names for this build machine) hidden under an
# empty tmpfs, in a mount namespace of its own, where `unshare` may make one. (Debian's libomp5
# package keeps its file in its own LLVM's folder, e.g. /usr/lib/llvm-19, linked from the system's
# library path: that one is the system's, not the toolchain's.)
llvm_lib=$(grep -o -- '-L[^ ]*' threaded/link.flags | head -1 | cut -c3-)
if [ -z "$llvm_lib" ]; then
  echo "no LLVM folder in link.flags: nothing to hide"
elif ! unshare -rm true 2> /dev/null; then
  echo "LLVM's folder not hidden: this machine gives no mount namespace (unshare -rm)"
else
  llvm_dir=$(dirname "$llvm_lib")
  unshare -rm sh -c 'mount -t tmpfs none "$1" && [ -z "$(ls -A "$1")" ] && exec ./demo_threaded --gemm 512x512x512' _ "$llvm_dir" \
    > hidden.txt 2>&1 || die "demo_threaded failed with $llvm_dir hidden: $(cat hidden.txt)"
  grep -q "demo: all checks passed" hidden.txt || die "demo_threaded failed with $llvm_dir hidden"
  echo "demo_threaded ran with $llvm_dir hidden"
fi

step "run"
./demo | tee demo.txt
grep -q "demo: all checks passed" demo.txt || die "demo failed"
[ "$(grep -c 'config tuned at this shape' demo.txt)" = 2 ] || die "expected both kernels tuned at their shape"
grep -Eq "^gpu: .*(unsupported here|: ok)" demo.txt || die "the GPU launch did not answer cleanly"
grep -q "^missing shape: no gemm f32 kernel for shape 3x5x7" demo.txt || die "a missing shape was not reported"

step "a shape nobody tuned: the nearest tuned shape's config, checked against the space rules"
printf 'gemm --m 250 --n 256 --k 256\nattention --heads 2 --seq 256 --head-dim 64\n' > near.txt
"$T" bundle --kernels near.txt --db tessera.db --targets host --out near
build_demo near demo.c demo_near
./demo_near --gemm 250x256x256 | tee near.txt
grep -q "demo: all checks passed" near.txt || die "the nearest-shape bundle failed"
grep -q "config tuned at 256x256x256 (nearest tuned shape" near.txt || die "nearest shape not used"
echo "run.sh: ok"
