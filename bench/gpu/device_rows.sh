#!/usr/bin/env bash
# The vendor-speed session of a lent GPU machine, inside one call's time: unpacks the programs
# bench/gpu/pack_device.sh packed here (.dev/pack.tar.xz, carried with the call), prints the card,
# runs bench/gpu/vendor_rows.py (Tessera's kernels against torch in the same run), then the
# `gpu`-labelled tests one process each, then one Nsight Compute read of the attention default
# (tensor-pipe activity, shared-memory bank conflicts, achieved occupancy). Each step has its own
# time limit so that a slow one cannot eat the others'; everything lands under $OUT.
# Usage (device tool, carry .dev): bash bench/gpu/device_rows.sh [target] [rows seconds] [tests seconds] [ncu seconds]
set -uo pipefail
cd "$(dirname "$0")/../.."
TARGET=${1:-sm_90}
OUT=${OUT:-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
. bench/gpu/device_common.sh
unpack_pack
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$OUT/card.txt"
T=$D/bin/tessera
timeout "${2:-300}" python3 bench/gpu/vendor_rows.py --tessera "$T" --target "$TARGET" --out "$OUT" --timeout 60 2>&1 |
  tee "$OUT/rows.log"
echo "== gpu-labelled tests"
gpu_tests_each "${3:-120}" "$OUT/gpu_tests.txt"
echo "== ncu: attention f16 H16 S4096 D128 causal, default config"
if command -v ncu >/dev/null; then
  timeout "${4:-90}" ncu --target-processes all -k regex:kernel -c 1 --metrics \
    sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,smsp__inst_executed.sum \
    "$T" run --target "$TARGET" --min-runs 1 --min-time 0 attention --heads 16 --seq 4096 --head-dim 128 --causal --dtype f16 \
    > "$OUT/ncu.log" 2>&1
  grep -E "sm__|l1tex__|gpu__|smsp__|==PROF==|error" "$OUT/ncu.log" | tail -12
else
  echo "ncu not on PATH"
fi
