#!/usr/bin/env bash
# Owns filling the Secrets that secrets.template.yaml names, without a secret in a file, in a
# command line or in a log: values go from this shell to kubectl through pipes.
#   make-secrets.sh store [URL]        before the first `kubectl apply -k`: tessera-store with a
#                                      random password (in-cluster PostgreSQL); with URL (a managed
#                                      PostgreSQL, no password in it) the password is read from the
#                                      terminal instead
#   make-secrets.sh tls CERT KEY       tessera-tls: the front's certificate chain and key (PEM)
#   make-secrets.sh tokens             once the serve replicas are ready: a worker token for the GPU
#                                      workers (tessera-worker-token) and a write token for the
#                                      tune-all Job (tessera-tuner-token), made by
#                                      `tessera serve token add` inside a serve pod
#   make-secrets.sh token NAME SCOPE   a token for a person or a machine outside the cluster
#                                      (read|write|admin|worker), printed once on this terminal
# NAMESPACE (default tessera) and KUBECTL (default kubectl) may be set. Needs the namespace
# (kubectl apply -f namespace.yaml).
set -euo pipefail
NS=${NAMESPACE:-tessera}
KUBECTL=${KUBECTL:-kubectl}
IN_CLUSTER_URL="postgresql://tessera@tessera-postgres.$NS.svc.cluster.local:5432/tessera?sslmode=disable"

die() { echo "make-secrets: $*" >&2; exit 1; }

# kubectl create ... --dry-run | apply: creates or updates, reading the values from stdin.
apply_secret() { "$KUBECTL" -n "$NS" create secret "$@" --dry-run=client -o yaml | "$KUBECTL" -n "$NS" apply -f - >/dev/null; }

# A token made by the store itself (only its hash is stored); the secret is printed once, to stdout.
new_token() {
  "$KUBECTL" -n "$NS" exec deploy/tessera-serve -c serve -- \
    sh -c 'exec tessera serve token add "$1" --scope "$2" --store "$TESSERA_STORE"' sh "$1" "$2"
}

case ${1:-} in
  store)
    if "$KUBECTL" -n "$NS" get secret tessera-store >/dev/null 2>&1; then
      # PostgreSQL takes POSTGRES_PASSWORD at its first start only: a new one here would lock the
      # replicas out. Change it with ALTER ROLE first, then delete this Secret and run again.
      die "secret tessera-store exists; not replacing it (see the comment in this script)"
    fi
    URL=${2:-$IN_CLUSTER_URL}
    case $URL in postgresql://*:*@*|postgres://*:*@*) die "the URL must not hold the password (it goes to PGPASSWORD)";; esac
    if [ $# -ge 2 ]; then
      read -rsp "password of the database user in $URL: " PW; echo
    else
      PW=$(head -c 32 /dev/urandom | base64 | tr -d '/+=\n')
    fi
    [ -n "$PW" ] || die "empty password"
    printf '%s' "$PW" | apply_secret generic tessera-store --from-literal=url="$URL" --from-file=password=/dev/stdin
    echo "secret tessera-store: url=$URL, password set"
    ;;
  tls)
    [ $# -eq 3 ] || die "usage: $0 tls CERT KEY"
    apply_secret tls tessera-tls --cert="$2" --key="$3"
    echo "secret tessera-tls set"
    ;;
  tokens)
    "$KUBECTL" -n "$NS" rollout status deploy/tessera-serve --timeout=300s >/dev/null
    for spec in "gpu-farm worker tessera-worker-token" "tune-all write tessera-tuner-token"; do
      set -- $spec
      TOKEN=$(new_token "$1" "$2") || die "tessera serve token add $1 failed (a token of that name exists? revoke it first)"
      case $TOKEN in tsk_*) ;; *) die "unexpected answer from tessera serve token add";; esac
      printf '%s' "$TOKEN" | apply_secret generic "$3" --from-file=token=/dev/stdin
      echo "secret $3: token '$1' (scope $2)"
    done
    ;;
  token)
    [ $# -eq 3 ] || die "usage: $0 token NAME read|write|admin|worker"
    new_token "$2" "$3"
    ;;
  *)
    sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
