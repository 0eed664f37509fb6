#!/usr/bin/env bash
# The GPU session of issue 45, inside 8 minutes of a lent H100/H200's time: unpacks the programs
# bench/gpu/pack_device.sh packed here (.dev/pack.tar.xz, carried with the call), prints the card,
# then, each step under its own time limit so that a slow one cannot eat the others':
#   1. the `gpu`-labelled tests, one process each (TESTS_S, default 100 s);
#   2. every goal row with torch in the same run, each of our rows checked against the reference
#      before its time counts, and the analytic model's estimate of each row's winner
#      (bench/gpu/vendor_rows.py; ROWS_S, default 230 s);
#   3. a short random sample of the new wgmma knobs' space (split-K with the parallel reduction at
#      1024x1024x16384, small tiles at 1000^3) into a store, exported as $OUT/device_sample_DATE.jsonl.gz
#      (SAMPLE_S, default 70 s; append it to bench/data/device_<gpu>.jsonl.gz here, then run
#      bench/gpu/defaults_table.py);
#   4. one Nsight Compute read of the worst row against its goal (NCU_S, default 45 s);
# and writes one dated table, $OUT/device_rows_DATE.md (the rows, then the tests' verdicts and the
# ncu read). Unpacking and the card take ~20 s: 7.8 min at most. Back here, the rows' checked runs
# become device-table records (bench/gpu/rows_to_table.py ... $OUT/vendor_rows.json), then
# bench/gpu/defaults_table.py regenerates the defaults from them; $OUT/gpu_rows.json, copied to
# docs/results/gpu_rows.json, is docs/results.md's GPU section (python3 bench/results_page.py docs/results).
# Usage (device tool, carry .dev): bash bench/gpu/device_rows.sh
#        (the tree and the pack are over a call's 64 MiB: bench/gpu/lighten_tree.sh on before the
#        call, off after it)
#        here, without a GPU:       bash bench/gpu/device_rows.sh --dry-run
# The dry run uses this checkout's build (TESSERA_BIN, default build/cli/tessera; the tests'
# binary build/tests/gpu/gpu_device_tests when built): it lists the tests, estimates each row's
# default for $GPU (default H200) through ptxas and the model (and, with ESTIMATE_TRIALS=N, the best of
# `tune --estimate` over N configs: the model's winner), estimates a few configs of the sample
# (tune --estimate), prints the ncu command, and writes the same table with the estimates only.
set -uo pipefail
cd "$(dirname "$0")/../.."
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
OUT=${OUT:-out}
mkdir -p "$OUT"
STAMP=$(date -u +%Y-%m-%d)
TABLE=$OUT/device_rows_$STAMP.md
export PYTHONUNBUFFERED=1
t0=$SECONDS
step() { echo "== $1 (at $((SECONDS - t0)) s)"; }
if [ "$DRY" = 1 ]; then
  T=${TESSERA_BIN:-build/cli/tessera}
  export TESSERA_GPU_TESTS=${TESSERA_GPU_TESTS:-build/tests/gpu/gpu_device_tests}
  [ -x "$T" ] || { echo "device_rows: no $T (build the tessera target or set TESSERA_BIN)" >&2; exit 2; }
  GPU=${GPU:-H200}
else
  . bench/gpu/device_common.sh
  unpack_pack
  T=$D/bin/tessera
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee "$OUT/card.txt"
  GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
fi

step "1. gpu-labelled tests (${TESTS_S:-100} s)"
if [ "$DRY" = 1 ]; then
  if [ -x "$TESSERA_GPU_TESTS" ]; then
    n=$("$TESSERA_GPU_TESTS" --gtest_list_tests | grep -c '^  ')
    echo "dry run: $n tests of $TESSERA_GPU_TESTS would run, one process each" | tee "$OUT/gpu_tests.txt"
  else
    echo "dry run: $TESSERA_GPU_TESTS not built: skipped" | tee "$OUT/gpu_tests.txt"
  fi
else
  gpu_tests_each "${TESTS_S:-100}" "$OUT/gpu_tests.txt"
fi

step "2. goal rows, torch in the same run (${ROWS_S:-230} s)"
timeout $((${ROWS_S:-230} + 40)) python3 bench/gpu/vendor_rows.py --tessera "$T" --gpu "$GPU" --out "$OUT" \
  --budget "${ROWS_S:-230}" --table "$TABLE" $([ "$DRY" = 1 ] && echo --dry-run --estimate-trials "${ESTIMATE_TRIALS:-0}") 2>&1 |
  tee "$OUT/rows.log"

step "3. a random sample of the new wgmma knobs (${SAMPLE_S:-70} s)"
sample() {  # name, seconds, kernel flags...
  local name=$1 secs=$2
  shift 2
  if [ "$DRY" = 1 ]; then  # the model ranks a few configs through ptxas: the path a device run takes, minus the GPU
    timeout 300 "$T" tune --target sm_90a --gpu "$GPU" --estimate --strategy random --trials 4 --force --no-warm-start \
      --no-transfer --db "$OUT/sample.db" --json "$@" > "$OUT/$name.json" 2> "$OUT/$name.err"
  else
    timeout $((secs + 30)) "$T" tune --target sm_90a --strategy random --trials 100000000 --time-budget "$secs" --top-k 0 \
      --force --no-warm-start --no-transfer --db "$OUT/sample.db" --json "$@" > "$OUT/$name.json" 2> "$OUT/$name.err"
  fi
  echo "$name: rc $?"
  python3 -c "import json,sys; j=json.load(open(sys.argv[1])); b=j['best']; print(' ', j.get('measured_on'), j['trials'], 'trials, best', round(b['median_us'], 1), 'us', b['config'])" "$OUT/$name.json" 2>/dev/null ||
    tail -2 "$OUT/$name.err"
}
S=${SAMPLE_S:-70}
sample gemm_f16_1024x1024x16384 $((S / 2)) gemm --m 1024 --n 1024 --k 16384 --dtype f16
sample gemm_f16_1000 $((S / 2 - 5)) gemm --m 1000 --n 1000 --k 1000 --dtype f16
if [ "$DRY" = 0 ]; then
  TESSERA_BIN=$T timeout 30 bash scripts/export_table.sh "$OUT/sample.db" "$OUT/device_sample_$STAMP.jsonl.gz"
fi

step "4. ncu: the worst row (${NCU_S:-45} s)"
NCU_CMD=$(python3 - "$OUT/worst_row.json" "$T" <<'PY'
import json, shlex, sys
try:
    w = json.load(open(sys.argv[1]))
except OSError:
    sys.exit(0)
cmd = [sys.argv[2], "run", "--target", w["target"], "--min-runs", "1", "--min-time", "0"] + \
      (["--config", w["config"]] if w["config"] else []) + w["flags"]
print(w["row"] + "\t" + shlex.join(cmd))
PY
)
NCU_ROW=${NCU_CMD%%$'\t'*}
NCU_RUN=${NCU_CMD#*$'\t'}
METRICS=sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
if [ -z "$NCU_CMD" ]; then
  echo "no worst row (the rows step wrote none)" | tee "$OUT/ncu.log"
elif [ "$DRY" = 1 ] || ! command -v ncu > /dev/null; then
  echo "ncu not run ($([ "$DRY" = 1 ] && echo "dry run" || echo "ncu not on PATH")): $NCU_ROW: ncu --metrics ... $NCU_RUN" | tee "$OUT/ncu.log"
else
  eval "timeout ${NCU_S:-45} ncu --clock-control none --target-processes all -k regex:kernel -c 1 --metrics $METRICS $NCU_RUN" > "$OUT/ncu.log" 2>&1
  grep -E "sm__|l1tex__|gpu__|dram__|==PROF==|error" "$OUT/ncu.log" | tail -8
fi

{
  echo
  echo "## gpu-labelled tests"
  echo
  sed 's/^/    /' "$OUT/gpu_tests.txt"
  echo
  echo "## ncu: ${NCU_ROW:-no row}"
  echo
  grep -E "sm__|l1tex__|gpu__|dram__|not run|no worst" "$OUT/ncu.log" | sed 's/^ */    /'
  echo
  echo "Steps took $((SECONDS - t0)) s in all$([ "$DRY" = 1 ] && echo " (dry run, no GPU: nothing was timed on a device)")."
} >> "$TABLE"
step "done: $TABLE"
