#!/usr/bin/env bash
# A device call carries the checkout's tracked files (30 MB) and the carried pack (.dev: ~41 MB with
# PYTHON_PACK=1), over the 64 MiB a call takes. `on` takes the public brute-force tuning files of
# bench/data (Kernel Tuner's GEMM and convolution tables, ~21 MB, used by the search benches only,
# never on the device) out of git's index and ignores them, so the call leaves them behind; the
# files stay in the working tree. `off` puts them back in the index (run it right after the call;
# nothing is committed either way). `status` prints what a call would carry.
#   bash bench/gpu/lighten_tree.sh on|off|status
set -euo pipefail
cd "$(dirname "$0")/../.."
EX=.git/info/exclude
files() { git ls-files -- 'bench/data/gemm_RTX_*.json.gz' 'bench/data/convolution_*.json.gz'; }
size() { { git ls-files; git ls-files -o --exclude-standard; } | sort -u | tr '\n' '\0' | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1; }
case ${1:-status} in
  on)
    f=$(files)
    [ -n "$f" ] || { echo "lighten_tree: already light"; exit 0; }
    # shellcheck disable=SC2086
    git rm -q --cached $f
    for x in $f; do echo "/$x" >> "$EX"; done
    ;;
  off)
    sed -i '\#^/bench/data/\(gemm_RTX_\|convolution_\)#d' "$EX"
    git reset -q -- bench/data
    ;;
  status) ;;
  *) echo "usage: bash bench/gpu/lighten_tree.sh on|off|status" >&2; exit 2 ;;
esac
t=$(size) d=$(du -cb .dev 2>/dev/null | tail -1 | cut -f1 || echo 0)
echo "a call carries $((t / 1048576)) MiB of the tree + $((${d:-0} / 1048576)) MiB of .dev (limit 64 MiB)"
