#!/usr/bin/env bash
# Measures what measuring through workers costs on loopback, as ratios from one run: the same
# tune (same kernel, seed, trials and batch) run locally (the anchor) and with --workers through
# a `tessera serve` on a SQLite file with 1 and with W host workers, each REPEAT times, printing
# wall times and the ratio to the local tune's median. On a machine with fewer cores than workers
# the workers share the cores, so the ratio shows the protocol's overhead (job submission,
# polling, leases, reports), not a speed-up; on several machines each worker brings its own.
#
# Usage: bench/workers/run_overhead.sh [TESSERA_BIN]
# Env: TRIALS (24), BATCH (8), WORKERS (3), REPEAT (3), MIN_TIME (0.01)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TESSERA=${1:-$ROOT/build/cli/tessera}
TRIALS=${TRIALS:-24}
BATCH=${BATCH:-8}
NWORKERS=${WORKERS:-3}
REPEAT=${REPEAT:-3}
MIN_TIME=${MIN_TIME:-0.01}
KERNEL=(gemm --m 96 --n 80 --k 64)
WORK=$(mktemp -d /tmp/tessera-workers-bench-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

DB=$WORK/service.db
TUNER=$("$TESSERA" serve token add tuner --scope write --db "$DB" 2>/dev/null)
WORKER=$("$TESSERA" serve token add box --scope worker --db "$DB" 2>/dev/null)
"$TESSERA" serve --db "$DB" --port 0 --port-file "$WORK/port" --sync normal > "$WORK/serve.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
URL=http://127.0.0.1:$(cat "$WORK/port")

# Seconds of one tune; $1: extra flags ("" = local). Each run tunes into a fresh local store, and
# --force makes it search again whatever the service already holds.
tune_seconds() {
  local db=$WORK/tune-$RANDOM$RANDOM.db
  local t0 t1
  t0=$(date +%s.%N)
  TESSERA_CACHE_URL=$URL TESSERA_TOKEN=$TUNER "$TESSERA" tune $1 --force --trials "$TRIALS" --batch "$BATCH" \
    --min-time "$MIN_TIME" --top-k 2 --seed 11 --db "$db" "${KERNEL[@]}" > "$WORK/tune.log" 2>&1 ||
    { cat "$WORK/tune.log" >&2; exit 1; }
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f\n", b - a}' 
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

run_series() {  # $1: label, $2: flags
  local times=()
  for _ in $(seq "$REPEAT"); do times+=("$(tune_seconds "$2")"); done
  printf '%s\n' "${times[@]}" | median
}

start_workers() {  # $1: how many
  for i in $(seq "$1"); do
    TESSERA_CACHE_URL=$URL TESSERA_TOKEN=$WORKER "$TESSERA" worker --poll 0.05 --quiet > "$WORK/worker$i.log" 2>&1 &
    PIDS+=($!)
  done
  sleep 1
}

echo "host: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; kernel ${KERNEL[*]}; $TRIALS trials, batch $BATCH, x$REPEAT"
LOCAL=$(run_series local "")
printf '%-28s %8.2f s  1.00x\n' "local tune (anchor)" "$LOCAL"
start_workers 1
ONE=$(run_series one "--workers")
printf '%-28s %8.2f s  %.2fx\n' "--workers, 1 worker" "$ONE" "$(awk -v a="$ONE" -v b="$LOCAL" 'BEGIN {print a / b}')"
start_workers $((NWORKERS - 1))
MANY=$(run_series many "--workers")
printf '%-28s %8.2f s  %.2fx\n' "--workers, $NWORKERS workers" "$MANY" "$(awk -v a="$MANY" -v b="$LOCAL" 'BEGIN {print a / b}')"
