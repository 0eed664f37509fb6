#!/usr/bin/env bash
# Runs the device session on a lent GPU machine from the pack that bench/gpu/pack_device.sh made here
# (.dev/pack.tar.xz, carried with the call): unpacks it with Python's lzma (the machine may lack xz),
# points the loader at its libraries and ptxas at the machine's CUDA, prints what the machine is,
# then bench/gpu/device_session.sh with the packed programs. Usage (device tool, carry .dev):
#   STEPS=gemm,attention bash bench/gpu/run_on_device.sh [target]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/gpu/device_common.sh
unpack_pack
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv || true
/usr/local/cuda/bin/ptxas --version | tail -1
ldd "$D/bin/tessera" | grep "not found" && { echo "missing libraries on this machine"; exit 1; }
export TESSERA_BIN=$D/bin/tessera TESSERA_GPU_TESTS=$D/bin/gpu_device_tests
bash bench/gpu/device_session.sh "$@"
