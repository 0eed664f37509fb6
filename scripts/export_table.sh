#!/usr/bin/env bash
# Exports a store's records as a replay table for bench/search_efficiency and estimator_validation:
# gzip'd JSON lines of records, read through a loopback `tessera serve` of the store (the cache's
# own export path). scripts/record_host_table.sh fills a store on the host, bench/gpu/device_tables.sh
# on a lent GPU machine.
# Usage: scripts/export_table.sh DB OUT.jsonl.gz
# Environment: TESSERA_BIN (default build/cli/tessera).
set -euo pipefail
if [ $# -ne 2 ]; then
  sed -n '2,7p' "$0" >&2
  exit 2
fi
db=$1 out=$2
[ -f "$db" ] || { echo "export_table: no store at $db" >&2; exit 2; }
T=${TESSERA_BIN:-build/cli/tessera}
work=$(mktemp -d)
trap 'kill "${server:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
"$T" serve --db "$db" --port 0 --port-file "$work/port" --allow-anonymous-reads >"$work/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.1; done
[ -s "$work/port" ] || { echo "export_table: the server did not start: $(tail -1 "$work/serve.log")" >&2; exit 1; }
"$T" cache export --cache "http://127.0.0.1:$(cat "$work/port")" -o "$work/records.jsonl"
gzip -9 -c "$work/records.jsonl" >"$out"
echo "wrote $(wc -l <"$work/records.jsonl") records to $out"
