#!/usr/bin/env bash
# Records a full host replay table for bench/search_efficiency: every legal config of a kernel's
# tuning space measured by `tessera tune` (random order without replacement until the space runs
# dry, so drift and background load spread over the space instead of following the knob order),
# then exported as gzip'd JSON lines of records.
#
# Usage: scripts/record_host_table.sh OUT.jsonl.gz KERNEL ARGS...   e.g.
#        scripts/record_host_table.sh bench/data/host_gemm_128.jsonl.gz gemm --m 128 --n 128 --k 128
# Environment: TESSERA_BIN (default build/cli/tessera), TABLE_DB (keep the store there).
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,10p' "$0" >&2
  exit 2
fi
out=$1
shift
T=${TESSERA_BIN:-build/cli/tessera}
work=$(mktemp -d)
db=${TABLE_DB:-$work/table.db}
trap 'kill "${server:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
"$T" tune --strategy random --trials 100000000 --top-k 0 --force --no-warm-start --db "$db" "$@"
"$T" serve --db "$db" --port 0 --port-file "$work/port" --allow-anonymous-reads >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
"$T" cache export --cache "http://127.0.0.1:$(cat "$work/port")" -o "$work/records.jsonl"
gzip -9 -c "$work/records.jsonl" >"$out"
echo "wrote $(wc -l <"$work/records.jsonl") records to $out"
