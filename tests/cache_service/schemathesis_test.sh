#!/usr/bin/env bash
# Checks that service/openapi.yaml matches the real server: schemathesis (from PyPI, in a
# venv this script creates and keeps under the build dir, so re-runs are quick) runs every check
# against `tessera serve` on a loopback port, with a bounded number of examples and a fixed seed,
# and must report zero failures. Usage: schemathesis_test.sh TESSERA_BIN BUILD_DIR [MAX_EXAMPLES [PG_DIR]]
# With PG_DIR the service runs on a fresh database of the tests' PostgreSQL server
# (scripts/pg_server.sh in PG_DIR), dropped afterwards; without it, on a SQLite file.
set -euo pipefail
TESSERA=$1
BUILD=$2
EXAMPLES=${3:-20}
PG_DIR=${4:-}
PHASES=examples,coverage,fuzzing,stateful
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=$BUILD/schemathesis-venv
VERSION=4.32.5
if ! "$VENV/bin/st" --version 2>/dev/null | grep -q "$VERSION"; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$VERSION"
fi

WORK=$(mktemp -d /tmp/tessera-schemathesis-XXXXXX)
SERVER=""
PG_ADMIN=""
PG_NAME=""
# A revocation of the token schemathesis itself sends (its name is listed at /v1/admin/tokens)
# would turn every later answer into a 401; tests/cache_service/dashboard_test.cpp covers the route.
EXCLUDE=(--exclude-path /v1/admin/tokens/revoke)
cleanup() {
  if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; fi
  if [ -n "$PG_NAME" ]; then psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS $PG_NAME WITH (FORCE)" >/dev/null 2>&1 || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
DB=$WORK/st.db
if [ -n "$PG_DIR" ]; then
  PG_ADMIN=$(flock -o "$PG_DIR.lock" bash "$HERE/../../scripts/pg_server.sh" start "$PG_DIR")
  export PGPASSFILE=$PG_DIR/pgpass  # the URL holds no password; psql and tessera read it here
  PG_NAME=st_$(python3 -c 'import secrets; print(secrets.token_hex(6))')
  psql -q "$PG_ADMIN" -c "CREATE DATABASE $PG_NAME"
  DB=${PG_ADMIN%/*}/$PG_NAME
  # A PostgreSQL store's backups are pg_dump's: the route answers 409 to every valid request
  # (PgStore.BackupNamesPostgresOwnTools checks that), which schemathesis's positive checks refuse.
  EXCLUDE+=(--exclude-path /v1/admin/backup)
  # The coverage phase (boundary values of every parameter, 60 % of the run) tests what the API
  # layer validates before any store is asked, the same code on both engines: the SQLite run has
  # it; here the examples, fuzzing and stateful phases reach the PostgreSQL engine.
  PHASES=examples,fuzzing,stateful
fi
ADMIN=$("$TESSERA" serve token add st-admin --scope admin --db "$DB" 2>/dev/null)
WRITER=$("$TESSERA" serve token add st-writer --scope write --db "$DB" 2>/dev/null)
mkdir -p "$WORK/backups"
# --searches-per-minute 0: the run's examples are one client's; the bound is tested on its own
# (Round4.SearchesAndListsAreBoundedPerTokenAndHealthzStillAnswers).
"$TESSERA" serve --db "$DB" --port 0 --port-file "$WORK/port" --sync normal --backup-dir "$WORK/backups" \
  --searches-per-minute 0 > "$WORK/serve.log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do [ -s "$WORK/port" ] && break; sleep 0.1; done
PORT=$(cat "$WORK/port")
URL=http://127.0.0.1:$PORT

# One record, so that lookups can also find something.
cat > "$WORK/seed.json" <<JSON
{"key":{"family":"gemm","workload":"00c0ffee","shape":[64,64,64],"dtype":"f32","layout":"row","target":"host",
"arch":"x86-64-v4","units":2},"provenance":{"tessera_version":"0.1.0","llvm_version":"22","created_at":"2025-01-01T00:00:00Z"},
"config":{"MC":64},"status":"ok","result":{"n":10,"median_us":50,"p20_us":49,"p80_us":51}}
JSON
TESSERA_CACHE_URL=$URL TESSERA_TOKEN=$WRITER "$TESSERA" cache put "$WORK/seed.json" > /dev/null

cd "$WORK"
# The kernel page's long poll may hold a request up to 25 s (wait=, openapi.yaml): the timeout is above it.
set +e
"$VENV/bin/st" --config-file "$HERE/schemathesis.toml" run "$URL/openapi.yaml" \
  -H "Authorization: Bearer $ADMIN" "${EXCLUDE[@]}" --checks all --phases "$PHASES" --max-examples "$EXAMPLES" --seed 20251124 --request-timeout 40 \
  --no-color > "$WORK/st.out" 2>&1
rc=$?
set -e
tail -n 25 "$WORK/st.out"
if [ $rc -ne 0 ]; then
  echo "schemathesis_test: failures (exit $rc); full report:" >&2
  cat "$WORK/st.out" >&2
  exit 1
fi
kill -0 "$SERVER"  # still alive after every request
echo "schemathesis_test: the OpenAPI document and the server agree"
