#!/usr/bin/env bash
# Owns the throw-away PostgreSQL server that tests and benchmarks run against: initdb in a folder of
# its own, a random loopback port, a random password (scram-sha-256), no system service.
#
#   pg_server.sh start DIR    -> create the server (first time), start it, print its connection URL
#                                (also in DIR/url); idempotent while it runs; a restarted server
#                                keeps its port (so its URL) while the port is free. The URL holds
#                                no password (process lists and logs would show it): the password is
#                                in DIR/pgpass (mode 0600), for PGPASSFILE=DIR/pgpass
#   pg_server.sh stop DIR     -> stop it (fast shutdown); its data stays for the next start
#   pg_server.sh destroy DIR  -> stop it and remove its data
#
# DIR is a handle (the build's test-tmp/pg, a bench's work folder): it holds the URL and the path of
# the server's home. The home (data, socket, log, password) is a folder of its own under /tmp:
# PostgreSQL refuses to run as root, so as root the server runs as `nobody`, which must be able to
# reach its files wherever the checkout lives (a clone under /root or a mktemp -d is not searchable
# by other users).
set -euo pipefail

cmd=${1:-}
dir=${2:-}
usage() {
  echo "usage: pg_server.sh start|stop|destroy DIR" >&2
  exit 2
}
if [ -z "$cmd" ] || [ -z "$dir" ]; then usage; fi
if [ "$cmd" = start ]; then mkdir -p "$dir"; fi
if [ -d "$dir" ]; then dir=$(cd "$dir" && pwd); fi
# The server's tools run as nobody, who may not be allowed into the caller's working folder (they
# would say so on stderr, which callers read with the URL).
cd /
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

port_is_free() {
  python3 -c 'import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",int(sys.argv[1])))' "$1" 2>/dev/null
}

home=""
if [ -f "$dir/home" ]; then home=$(cat "$dir/home"); fi

case "$cmd" in
start)
  mkdir -p "$dir"
  if [ -n "$home" ] && [ -f "$dir/url" ] && as_owner "$PGBIN/pg_ctl" -D "$home/data" status >/dev/null 2>&1; then
    if [ ! -f "$dir/pgpass" ]; then
      # Started by an older version of this script, whose URL held the password: the same server,
      # named without it.
      port=$(sed -E 's#.*@[^:/]+:([0-9]+)/.*#\1#' "$dir/url")
      (umask 077 && echo "127.0.0.1:$port:*:tessera:$(cat "$home/password")" >"$dir/pgpass")
      (umask 077 && echo "postgresql://tessera@127.0.0.1:$port/postgres" >"$dir/url")
    fi
    cat "$dir/url"
    exit 0
  fi
  if [ -z "$home" ] || [ ! -f "$home/data/PG_VERSION" ]; then
    [ -n "$home" ] && rm -rf "$home"
    home=$(mktemp -d /tmp/tessera-pg-XXXXXX)
    chmod 755 "$home"
    mkdir -p "$home/run"
    (umask 077 && python3 -c 'import secrets; print(secrets.token_hex(16))' >"$home/password")
    [ "$(id -u)" -eq 0 ] && chown -R nobody:nogroup "$home"
    as_owner "$PGBIN/initdb" -D "$home/data" -U tessera --auth=scram-sha-256 --pwfile="$home/password" \
      -E UTF8 --locale=C.UTF-8 >"$home/initdb.log" 2>&1 ||
      { echo "pg_server.sh: initdb failed:" >&2; cat "$home/initdb.log" >&2; rm -rf "$home"; exit 1; }
    echo "$home" >"$dir/home"
    rm -f "$dir/url"
  fi
  port=""
  if [ -f "$dir/url" ]; then
    old=$(sed -E 's#.*@[^:/]+:([0-9]+)/.*#\1#' "$dir/url")
    if [ -n "$old" ] && port_is_free "$old"; then port=$old; fi
  fi
  [ -n "$port" ] || port=$(free_port)
  # fsync stays on (the durability tests mean it); small shared_buffers suit a 2-core CI machine.
  as_owner "$PGBIN/pg_ctl" -D "$home/data" -l "$home/server.log" -w -t 60 \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$home/run -c max_connections=300 -c shared_buffers=128MB" \
    start >/dev/null ||
    { echo "pg_server.sh: the server did not start:" >&2; tail -20 "$home/server.log" >&2; exit 1; }
  url="postgresql://tessera@127.0.0.1:$port/postgres"
  (umask 077 && echo "127.0.0.1:$port:*:tessera:$(cat "$home/password")" >"$dir/pgpass.tmp" && mv "$dir/pgpass.tmp" "$dir/pgpass")
  (umask 077 && echo "$url" >"$dir/url")
  echo "$url"
  ;;
stop | destroy)
  if [ -n "$home" ] && [ -d "$home/data" ]; then
    as_owner "$PGBIN/pg_ctl" -D "$home/data" -m fast -w stop >/dev/null 2>&1 || true
  fi
  if [ "$cmd" = destroy ]; then
    # Only ever a folder this script made.
    case "$home" in /tmp/tessera-pg-*) rm -rf "$home" ;; esac
    rm -f "$dir/home" "$dir/url" "$dir/pgpass"
  fi
  ;;
*)
  usage
  ;;
esac
