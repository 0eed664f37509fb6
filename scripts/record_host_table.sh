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
trap 'rm -rf "$work"' EXIT
"$T" tune --strategy random --trials 100000000 --top-k 0 --force --no-warm-start --db "$db" "$@"
TESSERA_BIN=$T bash "$(dirname "$0")/export_table.sh" "$db" "$out"
