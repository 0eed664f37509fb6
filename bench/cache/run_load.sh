#!/usr/bin/env bash
# Runs the cache-service load benchmark end to end on loopback: builds the tessera CLI, the
# anchor server (bench/cache/anchor_httplib_sqlite_lookup.cpp) and the seeder; fills both stores
# with the same records; then, in one run, measures with wrk the anchor's /hello and keyed lookup
# and Tessera's lookup at 1, 16 and 64 connections, and writes at 1 and 16 connections, printing
# Tessera's figures as ratios to the anchor's. wrk and both servers share the machine's cores, so
# only the ratios are meaningful.
#
# Env: BUILD_DIR (default build-cache), RECORDS (100000), DURATION (seconds per point, 5),
#      SERVER_THREADS (96, as in the anchor's README), SYNC (full|normal, Tessera's --sync).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-cache}
RECORDS=${RECORDS:-100000}
DURATION=${DURATION:-5}
THREADS=${SERVER_THREADS:-96}
SYNC=${SYNC:-full}
HERE=$ROOT/bench/cache
# shellcheck source=bench/cache/load_util.sh
. "$ROOT/bench/cache/load_util.sh"

command -v wrk >/dev/null || { echo "run_load.sh: wrk not found (apt-get install wrk)" >&2; exit 1; }
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTESSERA_WITH_MLIR=OFF >/dev/null
fi
ninja -C "$BUILD" -j2 tessera anchor_srv cache_bench_seed >/dev/null

TESSERA=$BUILD/cli/tessera
ANCHOR=$BUILD/bench/cache/anchor_srv
SEED=$BUILD/bench/cache/cache_bench_seed
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  # `|| true`: a killed child's non-zero status must not abort the cleanup under set -e.
  for p in "${PIDS[@]:-}"; do
    if [ -n "$p" ]; then kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "== seeding $RECORDS records"
"$SEED" "$RECORDS" "$WORK/tessera.db" "$WORK/anchor.db" "$WORK/keys.txt"
TOKEN=$("$TESSERA" serve token add bench --scope write --db "$WORK/tessera.db" 2>/dev/null)

APORT=$(free_port)
"$ANCHOR" "$WORK/anchor.db" "$APORT" "$THREADS" &
PIDS+=($!)
"$TESSERA" serve --db "$WORK/tessera.db" --port 0 --port-file "$WORK/port" --threads "$THREADS" \
  --sync "$SYNC" >"$WORK/serve.log" 2>&1 &
PIDS+=($!)
wait_http "http://127.0.0.1:$APORT/hello"
for _ in $(seq 1 100); do [ -f "$WORK/port" ] && break; sleep 0.1; done
TPORT=$(cat "$WORK/port")
wait_http "http://127.0.0.1:$TPORT/healthz"

# run LABEL CONNS URL [ENV...] -> sets RPS P50 P99 (and warns on non-2xx answers)
run() {
  local label=$1 conns=$2 url=$3
  shift 3
  local threads=$((conns < 2 ? 1 : 2))
  local out
  out=$(env "$@" wrk -t"$threads" -c"$conns" -d"${DURATION}s" --latency "${WRK_ARGS[@]}" "$url")
  RPS=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  P50=$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
  P99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
  local bad
  bad=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
  local errs
  errs=$(awk '/Socket errors:/' <<<"$out")
  if [ -n "$bad" ] || [ -n "$errs" ]; then
    echo "   warning: $label c=$conns: non-2xx=${bad:-0} ${errs}" >&2
  fi
}

echo "== lookups (random known key per request; $DURATION s per point; server threads $THREADS)"
printf "%-6s | %-22s | %-22s | %-22s | %-9s %-9s\n" conns "anchor /hello" "anchor lookup" "tessera lookup" "vs hello" "vs lookup"
printf "%-6s | %-22s | %-22s | %-22s |\n" "" "req/s  p50  p99 (ms)" "req/s  p50  p99 (ms)" "req/s  p50  p99 (ms)"
SUMMARY=()
for c in 1 16 64; do
  WRK_ARGS=()
  run "anchor /hello" "$c" "http://127.0.0.1:$APORT/hello"
  H=($RPS $P50 $P99)
  WRK_ARGS=(-s "$HERE/lookup.lua")
  run "anchor lookup" "$c" "http://127.0.0.1:$APORT" KEYS_FILE="$WORK/keys.txt"
  A=($RPS $P50 $P99)
  run "tessera lookup" "$c" "http://127.0.0.1:$TPORT" KEYS_FILE="$WORK/keys.txt" TOKEN="$TOKEN"
  T=($RPS $P50 $P99)
  printf "%-6s | %8.0f %6.2f %6.2f | %8.0f %6.2f %6.2f | %8.0f %6.2f %6.2f | %-9s %-9s\n" "$c" \
    "${H[0]}" "${H[1]}" "${H[2]}" "${A[0]}" "${A[1]}" "${A[2]}" "${T[0]}" "${T[1]}" "${T[2]}" \
    "$(ratio "${T[0]}" "${H[0]}")x" "$(ratio "${T[0]}" "${A[0]}")x"
  SUMMARY+=("c=$c lookups ${T[0]}/s = $(ratio "${T[0]}" "${H[0]}")x anchor /hello, $(ratio "${T[0]}" "${A[0]}")x anchor lookup; p50 ${T[1]} ms, p99 ${T[2]} ms (anchor lookup p99 ${A[2]} ms)")
  if [ "$c" = 64 ]; then LAST_RATIO=$(ratio "${T[0]}" "${H[0]}"); LAST_P99=${T[2]}; fi
done

echo "== writes (one new record per request, each acknowledged; Tessera --sync $SYNC, anchor synchronous=FULL)"
printf "%-6s | %-22s | %-22s | %-9s\n" conns "anchor bare insert" "tessera POST /v1/records" "ratio"
for c in 1 16; do
  WRK_ARGS=(-s "$HERE/write.lua")
  run "anchor insert" "$c" "http://127.0.0.1:$APORT" MODE=anchor
  A=($RPS $P50 $P99)
  run "tessera write" "$c" "http://127.0.0.1:$TPORT" MODE=tessera TOKEN="$TOKEN"
  T=($RPS $P50 $P99)
  printf "%-6s | %8.0f w/s p99 %6.2f | %8.0f w/s p99 %6.2f | %-9s\n" "$c" "${A[0]}" "${A[2]}" "${T[0]}" "${T[2]}" \
    "$(ratio "${T[0]}" "${A[0]}")x"
  SUMMARY+=("c=$c writes ${T[0]}/s = $(ratio "${T[0]}" "${A[0]}")x anchor bare insert (p99 ${T[2]} ms)")
done

echo "== summary"
for s in "${SUMMARY[@]}"; do echo "  $s"; done
awk -v r="$LAST_RATIO" -v p="$LAST_P99" 'BEGIN {
  ok = (r >= 0.9 && p <= 5.0)
  printf "  target at 64 connections (lookups >= 0.9x anchor /hello, p99 <= 5 ms): %s\n", ok ? "met" : "NOT met" }'
