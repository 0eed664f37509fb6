#!/usr/bin/env bash
# A GPU worker on a real device (issue 16 on a lent GPU machine): a loopback `tessera serve`, one
# `tessera worker --target TARGET --device 0`, then the same GEMM tune through the worker
# (`tune --workers`) and locally on the same device, same seed: trials, statuses, winner and time
# of each, and what `tessera workers` reported of the worker's hardware.
# Usage: TESSERA_BIN=... bash bench/gpu/workers_on_device.sh [target]   (default sm_90)
set -euo pipefail
TARGET=${1:-sm_90}
T=${TESSERA_BIN:-$(cd "$(dirname "$0")/../.." && pwd)/build/cli/tessera}
OUT=${OUT:-out}
mkdir -p "$OUT"
W=$(mktemp -d)
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
DB=$W/service.db
TUNER=$("$T" serve token add tuner --scope write --db "$DB" 2>/dev/null)
WORKER=$("$T" serve token add gpu --scope worker --db "$DB" 2>/dev/null)
"$T" serve --db "$DB" --port 0 --port-file "$W/port" > "$W/serve.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$W/port" ] && break; sleep 0.1; done
URL=http://127.0.0.1:$(cat "$W/port")
TESSERA_CACHE_URL=$URL TESSERA_TOKEN=$WORKER "$T" worker --target "$TARGET" $([ "$TARGET" = host ] || echo --device 0) > "$OUT/worker.log" 2>&1 &
PIDS+=($!)
sleep 3
TESSERA_CACHE_URL=$URL TESSERA_TOKEN=$TUNER "$T" workers | tee "$OUT/workers.txt"
K=(gemm --m ${SIZE:-2048} --n ${SIZE:-2048} --k ${SIZE:-2048} --dtype f16)
for mode in workers local; do
  flags=(); [ "$mode" = workers ] && flags=(--workers)
  t0=$(date +%s)
  if [ "$mode" = workers ]; then
    TESSERA_CACHE_URL=$URL TESSERA_TOKEN=$TUNER "$T" tune "${flags[@]}" --force --target "$TARGET" --trials 24 --seed 7 \
      --db "$W/$mode.db" --json "${K[@]}" > "$OUT/tune_$mode.json"
  else
    "$T" tune --target "$TARGET" --trials 24 --seed 7 --db "$W/$mode.db" --json "${K[@]}" > "$OUT/tune_$mode.json"
  fi
  echo "$mode: $(( $(date +%s) - t0 )) s"
done
python3 - "$OUT" <<'PY'
import json, sys, os
for mode in ("workers", "local"):
    d = json.load(open(os.path.join(sys.argv[1], f"tune_{mode}.json")))
    b = d["best"]
    print(f"{mode:8} trials {d['trials']}, statuses {d['statuses']}, best {b['median_us']:.1f} us "
          f"{b['config']} on {d['measured_on']}")
PY
