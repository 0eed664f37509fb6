#!/usr/bin/env bash
# Installs what Tessera needs to build, test and benchmark on Debian 12; idempotent (does nothing
# when everything is present). Uses sudo when not root. Packages come from Debian's archive only
# (LLVM/MLIR 22 from bookworm-security). nginx and openssl run the TLS front of the cache service
# in its test (deploy/nginx/; never as a system service); python3-venv holds schemathesis (PyPI),
# which tests/cache_service/schemathesis_test.sh installs into the build dir. libpqxx-dev and
# postgresql-15 are the PostgreSQL store engine and the throw-away server its tests start
# (scripts/pg_server.sh: initdb in a folder of its own; no system cluster is created).
# libjs-chart.js is the dashboard's charting library (built into the binary, never from a CDN);
# chromium, chromium-driver and python3-selenium run the dashboard's tests in a real browser
# (tests/ui/browser_test.py, headless). llvm-22-tools has FileCheck, which the golden lowering tests
# run (tests/codegen/golden/).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools lld-22
  clang-22 libclang-rt-22-dev libomp-22-dev
  libsqlite3-dev sqlite3 libpqxx-dev postgresql-15 libxgboost-dev libcpp-httplib-dev nlohmann-json3-dev libcli11-dev
  libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
  libopenblas-dev wrk
  nginx openssl python3 python3-venv python3-dev
  libjs-chart.js chromium chromium-driver python3-selenium
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PKGS[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# The tests start their own PostgreSQL; on a fresh install postgresql-common would otherwise create
# and start a system cluster ("main" on port 5432) that nothing here uses. A drop-in, not the
# package's conffile, so dpkg never asks about it.
if [ ! -e /etc/postgresql-common/createcluster.d/tessera.conf ] &&
  ! dpkg-query -W -f='${Status}' postgresql-common 2>/dev/null | grep -q "install ok installed"; then
  $SUDO mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" | $SUDO tee /etc/postgresql-common/createcluster.d/tessera.conf >/dev/null
fi
# Try without refreshing the lists first (fast on machines with warm lists), then refresh.
if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
fi
