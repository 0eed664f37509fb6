#!/usr/bin/env bash
# Runs the replicas benchmark of issue 16 end to end on loopback: lookups and writes per second,
# p50 and p99, through nginx (the shipped deploy/nginx front, plain HTTP) in front of
#   sqlite1  one `tessera serve` on a SQLite file (the embedded default),
#   pg1      one `tessera serve` on a throw-away PostgreSQL server (scripts/pg_server.sh),
#   pg2      two such replicas on the same database,
#   sqlite2  two `tessera serve` on one SQLite file (same machine only; SQLITE2=0 skips it),
# all in ONE run: each (load, connections) point is taken for sqlite1, pg1 and pg2 back to back;
# sqlite2 comes last, in a pass of its own, because its write points stall (each replica reloads
# its whole winners index after the other one's commit) and would leave a backlog behind. Prints
# the table, the ratios pg2/pg1, pg1/sqlite1, pg2/sqlite1 and sqlite2/sqlite1, the CPU share of
# each party per point, and the store size per million records of both engines after seeding.
#
# Seeding goes through cache::openStore (bench/cache/cache_bench_seed.cpp, 1000 records per
# transaction), not through the HTTP API: both stores get exactly the same N records (fixed seed)
# in seconds, and the seeding does not depend on the HTTP limits the bench measures; the write
# points then go through the API like any client. After seeding, PostgreSQL gets VACUUM ANALYZE
# and CHECKPOINT and the kernel a sync (what follows a bulk load anyway), so autovacuum and
# writeback do not land in the first points.
#
# Loads (bench/cache/lookup.lua, write.lua, as in run_load.sh): lookups are GET /v1/best/<key> of a
# random seeded key per request (spread over all N keys); writes are POST /v1/records of a new
# record per request (keys from a pool of 1000, so outcomes mix inserted/improved/kept), each
# acknowledged durable (SQLite --sync full; PostgreSQL fsync and synchronous_commit on). A setup's
# second replica runs only during that setup's points (started before, stopped after), so a
# one-replica point never pays for an idle replica.
#
# nginx: the shipped file once per setup (own upstream, own port) with TLS removed (plain HTTP on
# loopback: TLS would cost every setup the same and dilute the ratios) and access_log off; every
# limit kept (limit_conn 64 per address = the largest wrk point, keepalive_requests 1000, upstream
# keepalive 32: 64 measured no different here). NGINX_WORKERS (default 1) worker processes.
#
# Everything (servers, PostgreSQL, nginx, wrk) shares this machine's cores, so the absolute
# figures are a floor and only the ratios mean anything.
#
# Env: BUILD_DIR (default build-cache), RECORDS (100000), DURATION (seconds per point, 5),
#      WARMUP (seconds of the same load before each point, 2), CONNS ("16 64"),
#      SERVER_THREADS (96), SYNC (full|normal, serve's --sync, SQLite; default full),
#      SQLITE2 (1), PG (auto: skipped with a message where the engine is not built; 0: skip),
#      KINDS ("lookup write"), NGINX_WORKERS (1), UPSTREAM_KEEPALIVE (the shipped 32),
#      STORE_CONNECTIONS (serve's --store-connections for the PostgreSQL replicas; its default 16),
#      PG_LOG_SLOW_MS (diagnosis: count PostgreSQL statements slower than this),
#      KEEP (1: keep the work folder).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-cache}
RECORDS=${RECORDS:-100000}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-16 64}
KINDS=${KINDS:-lookup write}
THREADS=${SERVER_THREADS:-96}
SYNC=${SYNC:-full}
SQLITE2=${SQLITE2:-1}
PG=${PG:-auto}
NGINX_WORKERS=${NGINX_WORKERS:-1}
HERE=$ROOT/bench/cache
# shellcheck source=bench/cache/load_util.sh
. "$ROOT/bench/cache/load_util.sh"
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

command -v wrk >/dev/null || { echo "replicas_bench.sh: wrk not found (apt-get install wrk)" >&2; exit 1; }
[ -x "$NGINX" ] || { echo "replicas_bench.sh: nginx not found (apt-get install nginx-light)" >&2; exit 1; }
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DTESSERA_WITH_MLIR=OFF >/dev/null
fi
nice -n 10 ninja -C "$BUILD" -j2 tessera cache_bench_seed >/dev/null
TESSERA=$BUILD/cli/tessera
SEED=$BUILD/bench/cache/cache_bench_seed
# Older builds name the store --db only (the PostgreSQL engine brought --store).
STORE_FLAG=--db
if "$TESSERA" serve --help 2>&1 | grep -q -- '--store'; then STORE_FLAG=--store; fi

# Under the build folder, not /tmp: PostgreSQL runs as `nobody` when we are root and needs to
# reach its folder; SQLite and PostgreSQL files then also sit on the same file system.
WORK=$(mktemp -d "$BUILD/replicas-bench.XXXXXX")
chmod 755 "$WORK"
declare -A PID=() PORT=()
PIDS_NGINX=
PG_DIR=
cleanup() {
  # `|| true`: a killed child's non-zero status must not abort the cleanup under set -e.
  for p in "${PID[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  if [ -n "$PIDS_NGINX" ]; then kill "$PIDS_NGINX" 2>/dev/null || true; wait "$PIDS_NGINX" 2>/dev/null || true; fi
  if [ -n "$PG_DIR" ]; then bash "$ROOT/scripts/pg_server.sh" destroy "$PG_DIR" || true; fi
  if [ "${KEEP:-0}" = 1 ]; then echo "work folder kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# start_serve NAME STORE: one replica on its fixed port (nginx's upstreams name the ports).
start_serve() {
  local name=$1 store=$2 extra=()
  if [ -n "${STORE_CONNECTIONS:-}" ] && [[ $name == pg_* ]]; then extra=(--store-connections "$STORE_CONNECTIONS"); fi
  "$TESSERA" serve "$STORE_FLAG" "$store" --port "${PORT[$name]}" --threads "$THREADS" --sync "$SYNC" \
    --max-connections-per-client 0 "${extra[@]}" >>"$WORK/$name.log" 2>&1 &
  PID[$name]=$!
  wait_http "http://127.0.0.1:${PORT[$name]}/healthz"
}
stop_serve() {
  kill "${PID[$1]}" 2>/dev/null || true
  wait "${PID[$1]}" 2>/dev/null || true
  unset "PID[$1]"
}

add_token() {  # STORE -> the secret of a new write token (stderr shown only when it fails)
  "$TESSERA" serve token add bench --scope write "$STORE_FLAG" "$1" 2>"$WORK/token.err" ||
    { cat "$WORK/token.err" >&2; exit 1; }
}

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== host: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores; load average at start $LOAD0"

# ---- stores
declare -A STORE=() TOKEN=() BYTES0=() REPLICAS=()
SETUPS=(sqlite1)
STORE[sqlite]=$WORK/cache.db
echo "== seeding $RECORDS records into SQLite ($STORE_FLAG ${STORE[sqlite]})"
t0=$(date +%s.%N)
out=$("$SEED" "$RECORDS" "${STORE[sqlite]}" - "$WORK/keys.txt")
echo "   $(head -1 <<<"$out"); $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f s", b-a}')"
BYTES0[sqlite]=$(sed -n 's/.*store_bytes_before=\([0-9]*\).*/\1/p' <<<"$out")
TOKEN[sqlite]=$(add_token "${STORE[sqlite]}")
REPLICAS[sqlite1]="sqlite_a"
REPLICAS[sqlite2]="sqlite_a sqlite_b"

if [ "$PG" != 0 ]; then
  PG_DIR=$WORK/pg
  STORE[pg]=$(bash "$ROOT/scripts/pg_server.sh" start "$PG_DIR")
  # The URL holds no password (tessera refuses one on its command line): libpq reads it here.
  export PGPASSFILE=$PG_DIR/pgpass
  if msg=$("$SEED" 0 "${STORE[pg]}" - - 2>&1); then
    echo "== seeding $RECORDS records into a fresh PostgreSQL database ($(basename "$(ls -d /usr/lib/postgresql/*/ | sort -V | tail -1)"), fsync on)"
    t0=$(date +%s.%N)
    out=$("$SEED" "$RECORDS" "${STORE[pg]}" - -)
    echo "   $(head -1 <<<"$out"); $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f s", b-a}')"
    BYTES0[pg]=$(sed -n 's/.*store_bytes_before=\([0-9]*\).*/\1/p' <<<"$out")
    TOKEN[pg]=$(add_token "${STORE[pg]}")
    SETUPS+=(pg1 pg2)
    REPLICAS[pg1]="pg_a"
    REPLICAS[pg2]="pg_a pg_b"
  else
    echo "== PostgreSQL skipped: $msg"
    bash "$ROOT/scripts/pg_server.sh" stop "$PG_DIR"
    PG_DIR=
    unset 'STORE[pg]'
  fi
fi
[ "$SQLITE2" = 1 ] && SETUPS+=(sqlite2)
store_of() { case $1 in sqlite*) echo sqlite ;; *) echo pg ;; esac; }

# A bulk load leaves work behind: PostgreSQL's autovacuum visits a table after that many inserts
# (visibility map, hint bits: it reads and rewrites it) and both engines' pages wait for the kernel's
# writeback. Done now, as an operator would after a bulk load, so it does not land in the first
# measured points.
if [ -n "${STORE[pg]:-}" ] && command -v psql >/dev/null; then
  psql "${STORE[pg]}" -qc "VACUUM ANALYZE" -c "CHECKPOINT"
  if [ -n "${PG_LOG_SLOW_MS:-}" ]; then  # diagnosis: does a slow answer come from PostgreSQL itself?
    psql "${STORE[pg]}" -qc "ALTER SYSTEM SET log_min_duration_statement = ${PG_LOG_SLOW_MS}" \
      -c "SELECT pg_reload_conf()" >/dev/null
  fi
fi
sync

for r in sqlite_a sqlite_b pg_a pg_b; do PORT[$r]=$(free_port); done
declare -A FRONT=()
for s in "${SETUPS[@]}"; do FRONT[$s]=$(free_port); done

# ---- nginx: the shipped site file once per setup (own upstream and port), TLS lines removed.
SPEC=""
for s in "${SETUPS[@]}"; do
  ports=""
  for r in ${REPLICAS[$s]}; do ports+="${PORT[$r]},"; done
  SPEC+="$s:${FRONT[$s]}:${ports%,} "
done
UPSTREAM_KEEPALIVE=${UPSTREAM_KEEPALIVE:-} python3 - "$ROOT/deploy/nginx/tessera-cache.conf" "$WORK/site.conf" $SPEC <<'EOF'
import os, re, sys
src, dst, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
site = open(src).read()
zone = "limit_conn_zone $binary_remote_addr zone=tessera_per_client:10m;"
assert zone in site, zone
body = site.replace(zone, "")
out = [zone]
for spec in specs:
    name, front, ports = spec.split(":")
    b = body
    servers = "\n".join(f"    server 127.0.0.1:{p};" for p in ports.split(","))
    for old, new in [("upstream tessera_cache {", f"upstream tessera_{name} {{"),
                     ("proxy_pass http://tessera_cache;", f"proxy_pass http://tessera_{name};"),
                     ("listen 443 ssl;", f"listen 127.0.0.1:{front};")]:
        assert old in b, old
        b = b.replace(old, new)
    if os.environ["UPSTREAM_KEEPALIVE"]:
        b = re.sub(r"keepalive 32;", f"keepalive {os.environ['UPSTREAM_KEEPALIVE']};", b, count=1)
    b = re.sub(r"^\s*server 127\.0\.0\.1:8787;.*$", servers, b, count=1, flags=re.M)
    b = re.sub(r"^\s*ssl_\w+ .*$\n", "", b, flags=re.M)
    assert "ssl" not in b.replace("tessera_tls", ""), "TLS lines left"
    out.append(b)
open(dst, "w").write("\n".join(out))
EOF
mkdir -p "$WORK/nginx/logs"
cat >"$WORK/nginx/nginx.conf" <<EOF
$( [ "$(id -u)" -eq 0 ] && echo "user root;" )
worker_processes $NGINX_WORKERS;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  fastcgi_temp_path $WORK/nginx/fastcgi;
  uwsgi_temp_path $WORK/nginx/uwsgi;
  scgi_temp_path $WORK/nginx/scgi;
  include $WORK/site.conf;
}
EOF
"$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -g "daemon off;" 2>>"$WORK/nginx/logs/stderr" &
PIDS_NGINX=$!

# ---- first replicas of each store (the second ones run only during their setup's points)
start_serve sqlite_a "${STORE[sqlite]}"
[ -n "${STORE[pg]:-}" ] && start_serve pg_a "${STORE[pg]}"
for s in "${SETUPS[@]}"; do wait_http "http://127.0.0.1:${FRONT[$s]}/healthz"; done

# ---- store size after seeding, as each engine reports it (GET /status db_bytes) and on disk
echo "== store size after seeding (and VACUUM ANALYZE on PostgreSQL): GET /status db_bytes through the first replica (SQLite: file + WAL;"
echo "   PostgreSQL: pg_total_relation_size of tessera's tables, i.e. with indexes and TOAST);"
echo "   per million records = (seeded - empty schema) / $RECORDS * 1e6"
declare -A PER_M=()
for st in sqlite pg; do
  [ -n "${STORE[$st]:-}" ] || continue
  r=${st}_a
  b=$(curl -s -H "Authorization: Bearer ${TOKEN[$st]}" "http://127.0.0.1:${PORT[$r]}/status" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["db_bytes"])')
  PER_M[$st]=$(awk -v b="$b" -v e="${BYTES0[$st]}" -v n="$RECORDS" 'BEGIN { printf "%.0f", (b - e) / n * 1e6 }')
  extra=""
  if [ "$st" = sqlite ]; then
    extra="files on disk $(du -cb "${STORE[sqlite]}"* | tail -1 | cut -f1) B"
  elif command -v psql >/dev/null; then
    dbs=$(psql "${STORE[pg]}" -Atc "select pg_database_size(current_database())")
    extra="pg_database_size $dbs B (with the system catalogs; WAL not counted)"
  fi
  printf "   %-6s db_bytes %s B (empty %s B) -> %s MB per million records; %s\n" "$st" "$b" "${BYTES0[$st]}" \
    "$(awk -v p="${PER_M[$st]}" 'BEGIN { printf "%.0f", p / 1e6 }')" "$extra"
done

# ---- load
# CPU ticks used so far by processes, all their threads (utime + stime of /proc/PID/stat).
ticks() {
  local sum=0 p
  for p in "$@"; do
    [ -r "/proc/$p/stat" ] || continue
    sum=$((sum + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$p/stat")))
  done
  echo "$sum"
}
pg_pids() {
  [ -n "$PG_DIR" ] || return 0
  local pm
  pm=$(head -1 "$PG_DIR/data/postmaster.pid" 2>/dev/null) || return 0
  echo "$pm" $(pgrep -P "$pm" || true)
}
nginx_pids() { echo "$PIDS_NGINX" $(pgrep -P "$PIDS_NGINX" || true); }
HZ=$(getconf CLK_TCK)
NCPU=$(nproc)

declare -A RES=() CPU=() PERREQ=()
# point SETUP KIND CONNS: warm-up, then one measured wrk run through the setup's front.
point() {
  local s=$1 kind=$2 c=$3 st
  st=$(store_of "$s")
  local args=(-s "$HERE/$kind.lua")
  local envs=(TOKEN="${TOKEN[$st]}" KEYS_FILE="$WORK/keys.txt" MODE=tessera)
  local url="http://127.0.0.1:${FRONT[$s]}"
  env "${envs[@]}" wrk -t2 -c"$c" -d"${WARMUP}s" "${args[@]}" "$url" >/dev/null
  local serve_p=() r
  for r in ${REPLICAS[$s]}; do serve_p+=("${PID[$r]}"); done
  local pgp ngp t_s t_n t_p t0 out
  pgp=$(pg_pids); ngp=$(nginx_pids)
  t_s=$(ticks "${serve_p[@]}"); t_n=$(ticks $ngp); t_p=$(ticks $pgp); t0=$(date +%s.%N)
  out=$(env "${envs[@]}" wrk -t2 -c"$c" -d"${DURATION}s" --latency "${args[@]}" "$url" 2>&1)
  echo "$out" >"$WORK/wrk-$s-$kind-$c.txt"
  local wall
  wall=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')
  t_s=$(($(ticks "${serve_p[@]}") - t_s)); t_n=$(($(ticks $ngp) - t_n)); t_p=$(($(ticks $pgp) - t_p))
  local rps p50 p99 bad errs flag=""
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  p50=$(to_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
  p99=$(to_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
  bad=$(awk '/Non-2xx or 3xx responses:/ {print $5}' <<<"$out")
  errs=$(awk '/Socket errors:/' <<<"$out")
  local done_n
  done_n=$(awk '/ requests in / {print $1}' <<<"$out")
  if [ -n "$bad" ] || [ -n "$errs" ] || [ "${done_n:-0}" = 0 ]; then
    flag="!"
    echo "   warning: $s $kind c=$c: ${done_n:-0} answers, non-2xx=${bad:-0} ${errs}" >&2
  fi
  RES[$s:$kind:$c]="$rps $p50 $p99 $flag"
  # CPU time per answered request: steadier than req/s on a shared machine, and what capacity
  # per core is computed from.
  PERREQ[$s:$kind:$c]=$(awk -v s="$t_s" -v n="$t_n" -v p="$t_p" -v hz="$HZ" -v d="${done_n:-0}" 'BEGIN {
    if (d > 0) printf "%5.0f %5.0f %5.0f", s/hz*1e6/d, n/hz*1e6/d, p/hz*1e6/d; else printf "%5s %5s %5s", "-", "-", "-" }')
  CPU[$s:$kind:$c]=$(awk -v s="$t_s" -v n="$t_n" -v p="$t_p" -v hz="$HZ" -v w="$wall" -v nc="$NCPU" 'BEGIN {
    tot = w * hz * nc; r = tot - s - n - p; if (r < 0) r = 0
    printf "%3.0f%% %3.0f%% %3.0f%% %3.0f%%", 100*s/tot, 100*n/tot, 100*p/tot, 100*r/tot }')
}
# with_second SETUP CMD...: start the setup's second replica (if any) around CMD.
with_second() {
  local s=$1 second=""
  shift
  case $s in sqlite2) second=sqlite_b ;; pg2) second=pg_b ;; esac
  [ -n "$second" ] && start_serve "$second" "${STORE[$(store_of "$s")]}"
  "$@"
  [ -n "$second" ] && stop_serve "$second"
  return 0
}

echo "== load through nginx: ${DURATION} s per point after ${WARMUP} s warm-up; server threads $THREADS;"
echo "   SQLite --sync $SYNC, PostgreSQL fsync on and synchronous_commit on (every write acknowledged durable)"
echo "   ($NCPU cores shared by every server, PostgreSQL, nginx and wrk: absolute figures are a floor,"
echo "    only the ratios mean anything)"
for kind in $KINDS; do
  for c in $CONNS; do
    for s in "${SETUPS[@]}"; do
      [ "$s" = sqlite2 ] || with_second "$s" point "$s" "$kind" "$c"
    done
  done
done
# Last, in a pass of its own: two replicas on one SQLite file reload their whole winners index
# whenever the other one committed, so their write points can leave a backlog that would load the
# points after them.
if [ "$SQLITE2" = 1 ]; then
  for kind in $KINDS; do
    for c in $CONNS; do with_second sqlite2 point sqlite2 "$kind" "$c"; done
  done
fi

# ---- report
fmt() { awk -v r="$1" -v a="$2" -v b="$3" -v f="$4" 'BEGIN { printf "%8.0f %6.2f %7.2f%-1s", r, a, b, f }'; }
echo
echo "== results (req/s, p50 ms, p99 ms; ! = some answers were not 2xx or had socket errors)"
printf "%-7s %-5s" kind conns
for s in "${SETUPS[@]}"; do printf " | %-24s" "$s"; done
echo
for kind in $KINDS; do
  for c in $CONNS; do
    printf "%-7s %-5s" "$kind" "$c"
    for s in "${SETUPS[@]}"; do printf " | %s" "$(fmt ${RES[$s:$kind:$c]} "")"; done
    echo
  done
done

PAIRS=()
[ -n "${STORE[pg]:-}" ] && PAIRS+=(pg2/pg1 pg1/sqlite1 pg2/sqlite1)
[ "$SQLITE2" = 1 ] && PAIRS+=(sqlite2/sqlite1)
if [ "${#PAIRS[@]}" -gt 0 ]; then
  echo
  echo "== ratios (req/s: higher is better for the first; p50/p99: lower is better for the first)"
  printf "%-7s %-5s" kind conns
  for p in "${PAIRS[@]}"; do printf " | %-20s" "$p rps p50 p99"; done
  echo
  for kind in $KINDS; do
    for c in $CONNS; do
      printf "%-7s %-5s" "$kind" "$c"
      for p in "${PAIRS[@]}"; do
        read -r ar a50 a99 _ <<<"${RES[${p%/*}:$kind:$c]}"
        read -r br b50 b99 _ <<<"${RES[${p#*/}:$kind:$c]}"
        printf " | %5sx %5sx %5sx " "$(ratio "$ar" "$br")" "$(ratio "$a50" "$b50")" "$(ratio "$a99" "$b99")"
      done
      echo
    done
  done
fi

echo
# print_table TITLE HEADER_SUFFIX WIDTH ARRAY: one row per (kind, conns), one column per setup.
print_table() {
  local -n cells=$4
  echo "$1"
  printf "%-7s %-5s" kind conns
  for s in "${SETUPS[@]}"; do printf " | %-${3}s" "$s $2"; done
  echo
  for kind in $KINDS; do
    for c in $CONNS; do
      printf "%-7s %-5s" "$kind" "$c"
      for s in "${SETUPS[@]}"; do printf " | %s" "${cells[$s:$kind:$c]}"; done
      echo
    done
  done
}
print_table "== CPU share during each point (% of $NCPU cores: tessera serve replicas, nginx, PostgreSQL, rest = wrk + anything else on the machine)" \
  "srv ngx pg rest" 19 CPU
echo
print_table "== CPU microseconds per answered request (tessera serve replicas together, nginx, PostgreSQL)" "srv ngx pg" 17 PERREQ

if [ -n "${PG_LOG_SLOW_MS:-}" ] && [ -n "$PG_DIR" ]; then
  echo
  echo "== PostgreSQL statements over ${PG_LOG_SLOW_MS} ms during the run: $(grep -c 'duration:' "$PG_DIR/server.log" || true)"
  grep 'duration:' "$PG_DIR/server.log" | sort -t: -k5 -rn | head -5 | cut -c1-200 || true
fi

echo
echo "== capacity inputs (this run, this machine)"
for st in sqlite pg; do
  [ -n "${PER_M[$st]:-}" ] && echo "   $st store: $(awk -v p="${PER_M[$st]}" 'BEGIN { printf "%.0f", p / 1e6 }') MB per million records"
done
for s in sqlite1 pg1; do
  [ -n "${RES[$s:lookup:64]:-}" ] || continue
  read -r lr _ lp99 _ <<<"${RES[$s:lookup:64]}"
  read -r wr _ wp99 _ <<<"${RES[$s:write:64]:-0 0 0}"
  echo "   $s (one replica, c=64): $(printf %.0f "$lr") lookups/s (p99 $lp99 ms), $(printf %.0f "$wr") writes/s (p99 $wp99 ms)"
done
# Per core of each party, from the CPU time per request at c=16 (1e6 / microseconds).
for s in sqlite1 pg1; do
  for kind in lookup write; do
    [ -n "${PERREQ[$s:$kind:16]:-}" ] || continue
    read -r us un up <<<"${PERREQ[$s:$kind:16]}"
    awk -v s="$s" -v k="$kind" -v a="$us" -v b="$un" -v c="$up" 'BEGIN {
      printf "   %s %ss per busy core (c=16): serve %s, nginx %s%s\n", s, k, (a > 0 ? sprintf("%.0f", 1e6/a) : "-"),
        (b > 0 ? sprintf("%.0f", 1e6/b) : "-"), (s ~ /^pg/ && c > 0 ? sprintf(", PostgreSQL %.0f", 1e6/c) : "") }'
  done
done
echo "   load average at start $LOAD0, at the end $(cut -d' ' -f1-3 /proc/loadavg) (this bench's own processes included; the rest column above shows others' work)"
