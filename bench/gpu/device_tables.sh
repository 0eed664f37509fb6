#!/usr/bin/env bash
# Records replay tables of Tessera's own GPU kernels on a lent GPU machine, inside one call's time
# (issue 29: a GPU space measured on silicon for search_efficiency, estimator_validation and
# model_vs_device.py). Unpacks the programs bench/gpu/pack_device.sh packed here (.dev/pack.tar.xz,
# carried with the call), prints the card, runs the `gpu`-labelled tests one process each, then
# `tessera tune --strategy random` (random order without replacement: drift spreads over the space
# instead of following the knob order) on the attached device for each space below, each under its
# own time budget, into one store ($OUT/device.db; a budget cut leaves every finished record).
# Last, two checks of GPUs by name with a device attached: the device's own row keys the records,
# and a --gpu naming another product is refused in one line.
# Usage (device tool, carry .dev): bash bench/gpu/device_tables.sh [tests s] [attention s] [gemm s] [elementwise s]
# Here afterwards: scripts/export_table.sh DB OUT.jsonl.gz writes one table per store
# (bench/data/device_h200.jsonl.gz came from two such runs on 2026-11-27, device_h100.jsonl.gz from one,
# bench/data/README.md).
# Everything in one call: a lent machine left idle for about 30 s goes back, and the next call may
# start a fresh one of another kind (on 2026-11-27 a second call meant for the H100 ran on an H200).
# Size: the checkout's tracked files (~29 MB) and the pack (~38 MB) exceed the 64 MiB a call
# carries; that run moved bench/data/gemm_RTX_*.json.gz (14 MB, not needed there) out of the
# checkout for the call and back after it.
# The tunes draw in random order with the same seed: a second run over the same space measures the
# same configs first (its repeats agreed with the first run within 0.2 % at q10-q90, 2 % at worst).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
. bench/gpu/device_common.sh
unpack_pack
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$OUT/card.txt"
T=$D/bin/tessera
echo "== gpu-labelled tests"
gpu_tests_each "${1:-90}" "$OUT/gpu_tests.txt"
DB=$OUT/device.db
table() {  # name, seconds, target, kernel flags...
  local name=$1 secs=$2 target=$3; shift 3
  echo "== $name ($target, ${secs} s)"
  local t0=$SECONDS
  timeout $((secs + 60)) "$T" tune --target "$target" --strategy random --trials 100000000 --time-budget "$secs" \
    --top-k 0 --force --no-warm-start --no-transfer --db "$DB" --json "$@" > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "rc $? in $((SECONDS - t0)) s"; tail -3 "$OUT/$name.err"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j['best']; print(j.get('measured_on'), j['trials'], 'trials, best', b['median_us'], 'us', b['config'])" "$OUT/$name.json" || true
}
table attention_f16_h16_s4096_d128_causal "${2:-80}" sm_90 attention --heads 16 --seq 4096 --head-dim 128 --causal --dtype f16
table gemm_f16_4096 "${3:-130}" sm_90a gemm --m 4096 --n 4096 --k 4096 --dtype f16
table bias_gelu_f16_8192 "${4:-90}" sm_90 elementwise --expr 'y = gelu(x + b)' --shape 8192x8192 --shape b=8192 --dtype f16
echo "== GPUs by name with the device attached"
"$T" tune --target sm_90 --trials 2 --top-k 0 --force --no-warm-start --no-transfer --db "$OUT/name.db" --json \
  elementwise --expr 'y = x * 2' --shape 4096x4096 --dtype f32 2>&1 | python3 -c "import json,sys; print('measured_on:', json.load(sys.stdin).get('measured_on'))"
"$T" tune --gpu "RTX 4090" --trials 2 --db "$OUT/name.db" elementwise --expr 'y = x * 2' --shape 4096x4096 --dtype f32 2>&1 | tail -2
echo "rc ${PIPESTATUS[0]}"
ls -la "$OUT"
