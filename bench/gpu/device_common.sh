# Sourced by the scripts that run on a lent GPU machine from the pack bench/gpu/pack_device.sh made
# here (.dev/pack.tar.xz, carried with the call): that machine has CUDA but neither LLVM 22 nor
# Debian's libraries.

# Unpacks the pack into $D (/tmp/tessera-dev) with Python's lzma (the machine may lack xz), points
# the loader at its libraries, and /usr/local/cuda at the machine's CUDA when ptxas is elsewhere
# (Tessera calls /usr/local/cuda/bin/ptxas, codegen/nvidia/gpu_backend_nvidia.cpp).
unpack_pack() {
  D=/tmp/tessera-dev
  if [ "${TESSERA_UNPACKED:-0}" != 1 ]; then  # set by a caller that unpacked it already in this call
    rm -rf "$D"; mkdir -p "$D"
    python3 -c "import lzma, tarfile, sys; tarfile.open(fileobj=lzma.open('.dev/pack.tar.xz')).extractall(sys.argv[1])" "$D"
  fi
  export LD_LIBRARY_PATH=$D/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if [ ! -x /usr/local/cuda/bin/ptxas ] && command -v ptxas >/dev/null; then
    ln -sfn "$(dirname "$(dirname "$(command -v ptxas)")")" /usr/local/cuda
  fi
}

# The `gpu`-labelled tests of the pack ($TESSERA_GPU_TESTS when set), one process each (the device measurer forks children, which
# cannot use CUDA once their parent has), within $1 seconds in all; the verdicts go to $2 too.
gpu_tests_each() {
  local end=$((SECONDS + $1)) log=$2 t left bin=${TESSERA_GPU_TESTS:-$D/bin/gpu_device_tests}
  : > "$log"
  for t in $("$bin" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
    left=$((end - SECONDS)); [ "$left" -gt 5 ] || { echo "$t: not run (time)" | tee -a "$log"; continue; }
    timeout "$left" "$bin" --gtest_filter="$t" 2>&1 |
      grep -E "^\[ *(OK|FAILED|SKIPPED) |Skipped|Failure|error" | tee -a "$log"
  done
}
