# Owns the helpers the cache-service load benches share (run_load.sh, replicas_bench.sh): a free
# loopback port, waiting for a URL to answer, wrk's latency text in milliseconds, a ratio. Sourced.

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
    echo $((20000 + RANDOM % 20000))
}

# wait_http URL [TRIES]: every 0.1 s until it answers (default 30 s); exits the bench when it never does.
wait_http() {
  for _ in $(seq 1 "${2:-300}"); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "$(basename "$0"): $1 did not come up" >&2
  exit 1
}

# Converts wrk's latency text (870.00us, 1.23ms, 1.02s) to milliseconds.
to_ms() {
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
    else printf "nan" }'
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
