#!/usr/bin/env bash
# Owns the throw-away PostgreSQL server that tests and benchmarks run against: initdb in a folder
# of their own, a random loopback port, a random password (scram-sha-256), no system service.
#
#   pg_server.sh start DIR   -> initdb DIR/data (first time), start it, print the connection URL
#                               (also written to DIR/url); idempotent while it runs
#   pg_server.sh stop DIR    -> stop it (fast shutdown); the data stays until DIR is removed
#
# PostgreSQL refuses to run as root, so as root the server runs as `nobody` (DIR is handed to it).
# Its socket directory is DIR/run, so nothing outside DIR is touched.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
if [ -z "$cmd" ] || [ -z "$dir" ]; then
  echo "usage: pg_server.sh start|stop DIR" >&2
  exit 2
fi
# The server outlives this script: it must not inherit a caller's descriptors (a lock file held by
# `flock`, the pipe of a test's popen), or whoever waits on them waits for the server's exit.
for fd in $(seq 3 63); do eval "exec $fd>&-" 2>/dev/null || true; done
PGBIN=${PGBIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
if [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ]; then
  echo "pg_server.sh: PostgreSQL server binaries not found (apt-get install postgresql-15; scripts/setup.sh does)" >&2
  exit 1
fi

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- env PATH="$PGBIN:/usr/bin:/bin" "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

case "$cmd" in
start)
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [ -f "$dir/url" ] && as_owner "$PGBIN/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
    cat "$dir/url"
    exit 0
  fi
  mkdir -p "$dir/run"
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    rm -rf "$dir/data"
    umask 077
    python3 -c 'import secrets; print(secrets.token_hex(16))' >"$dir/password"
    if [ "$(id -u)" -eq 0 ]; then
      chown -R nobody:nogroup "$dir"
      as_owner test -r "$dir/password" || {
        echo "pg_server.sh: user nobody cannot reach $dir (a parent folder is not searchable); choose another DIR" >&2
        exit 1
      }
    fi
    as_owner "$PGBIN/initdb" -D "$dir/data" -U tessera --auth=scram-sha-256 --pwfile="$dir/password" \
      -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
      { echo "pg_server.sh: initdb failed:" >&2; cat "$dir/initdb.log" >&2; exit 1; }
  fi
  # A restarted server keeps its URL (clients reconnect to the same address) while its port is free.
  port=""
  if [ -f "$dir/url" ]; then
    old=$(sed -E 's#.*@[^:/]+:([0-9]+)/.*#\1#' "$dir/url")
    if [ -n "$old" ] && python3 -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",int(sys.argv[1])))' "$old" 2>/dev/null; then
      port=$old
    fi
  fi
  [ -n "$port" ] || port=$(free_port)
  # fsync stays on (the durability tests mean it); small shared_buffers suit a 2-core CI machine.
  as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$dir/run -c max_connections=300 -c shared_buffers=128MB" \
    start >/dev/null ||
    { echo "pg_server.sh: the server did not start:" >&2; tail -20 "$dir/server.log" >&2; exit 1; }
  url="postgresql://tessera:$(cat "$dir/password")@127.0.0.1:$port/postgres"
  (umask 077 && echo "$url" >"$dir/url")
  [ "$(id -u)" -eq 0 ] && chown nobody:nogroup "$dir/url"
  echo "$url"
  ;;
stop)
  [ -d "$dir/data" ] || exit 0
  as_owner "$PGBIN/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
  ;;
*)
  echo "usage: pg_server.sh start|stop DIR" >&2
  exit 2
  ;;
esac
