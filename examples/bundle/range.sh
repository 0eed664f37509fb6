#!/usr/bin/env bash
# Shape-generic kernels end to end (also the `bundle_range_example` test): tune a GEMM over a range
# of M into a dispatch rule, bundle its shape-generic kernels, build the bundle and range_demo.c with
# a plain `cc`, and check every M of the range (odd ones included) against plain C loops, the
# bucket that answered, and the clean misses outside the range; then a two-bucket rule written by
# hand, and bad ranges and rules refused in one line with exit code 2.
#   bash examples/bundle/range.sh [path/to/tessera] [work dir]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
T=${1:-$HERE/../../build/cli/tessera}
WORK=${2:-$HERE/../../build/examples/bundle_range}
T=$(cd "$(dirname "$T")" && pwd)/$(basename "$T")
CC=${CC:-cc}
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"
step() { echo "== $*"; }
die() { echo "range.sh: $*" >&2; exit 1; }

step "bad ranges: one line, exit code 2"
for m in 0..5 9..3 1..99999999999 1..2000000 "1,,3" "a..b" 1...4 "1,x" ","; do
  set +e
  "$T" tune gemm --m "$m" --n 33 --k 20 --trials 2 --db bad.db > out.txt 2> err.txt
  rc=$?
  set -e
  [ "$rc" = 2 ] || die "--m $m: exit $rc, expected 2"
  [ "$(wc -l < err.txt)" = 1 ] || die "--m $m: expected one line on stderr, got: $(cat err.txt)"
done
# Flags a range cannot take.
for extra in --estimate --trans-a "--batch 2" "--strategy random"; do
  set +e
  "$T" tune gemm --m 1..8 --n 33 --k 20 --trials 2 --db bad.db $extra > out.txt 2> err.txt
  rc=$?
  set -e
  [ "$rc" = 2 ] || die "--m 1..8 $extra: exit $rc, expected 2"
  [ "$(wc -l < err.txt)" = 1 ] || die "--m 1..8 $extra: expected one line on stderr, got: $(cat err.txt)"
done
# A range whose top is too large a kernel for the element limit.
set +e
"$T" tune gemm --m 1..1048576 --n 4096 --k 4096 --trials 2 --db bad.db > out.txt 2> err.txt
rc=$?
set -e
[ "$rc" = 2 ] || die "a huge range: exit $rc, expected 2"
[ ! -e bad.db ] || [ ! -s bad.db ] || true

step "tune over M 1..96 (small budgets: this is a test, not a benchmark)"
"$T" tune gemm --m 1..96 --n 33 --k 20 --trials 4 --points 4 --min-time 0.002 --top-k 1 --db tessera.db \
  --dispatch-out rule.json | tail -14
grep -q '"format": "tessera-dispatch-1"' rule.json || die "no rule written"

step "bundle the rule, build it and the demo with $CC"
"$T" bundle --dispatch rule.json --db tessera.db --out bundle | tail -4
make -s -C bundle CC="$CC" CFLAGS="-O2 -Wall -Wextra -Werror"
"$CC" -std=c11 -O2 -Wall -Wextra -Werror "$HERE/range_demo.c" -Ibundle bundle/libtessera_bundle.a $(cat bundle/link.flags) -lm -o range_demo
./range_demo 33 20 1 96 | tee demo.txt | tail -5
grep -q "range demo: all checks passed" demo.txt || die "range demo failed"

step "a two-bucket rule: M 1..9 and 10..96 answered by different kernels"
ARCH=$(grep -o '"arch": "[^"]*"' rule.json | head -1 | sed 's/.*: "//; s/"$//')
cat > two.json <<JSON
{"format": "tessera-dispatch-1", "kernel": "gemm_96x33x20_f32", "arch": "$ARCH", "threads": 1,
 "kernel_ir": "kernel gemm_96x33x20_f32 : gemm {\n  in A: f32[96, 20]\n  in B: f32[20, 33]\n  out C: f32[96, 33]\n  C[i, j] = sum(k < 20: A[i, k] * B[k, j])\n}\n",
 "dim": "M", "lo": 1, "hi": 96,
 "configs": ["KC=8,KU=1,MC=16,MR=1,NC=32,NR=16,ORDER=ij,THREADS=1,schedule=blis",
             "KC=16,KU=2,MC=32,MR=6,NC=64,NR=16,ORDER=ji,THREADS=1,schedule=blis"],
 "buckets": [{"lo": 1, "hi": 9, "config": 0}, {"lo": 10, "hi": 96, "config": 1}]}
JSON
"$T" bundle --dispatch two.json --db tessera.db --out two | tail -3
make -s -C two CC="$CC"
"$CC" -std=c11 -O2 "$HERE/range_demo.c" -Itwo two/libtessera_bundle.a $(cat two/link.flags) -lm -o range_demo_two
./range_demo_two 33 20 1 96 2 | tee two.txt | tail -4
grep -q "range demo: all checks passed" two.txt || die "two-bucket demo failed"
grep -q "bucket 1 of 2 (M 10..96)" two.txt || die "bucket 1 did not answer M=10"

step "bad rules: one line, exit code 2"
sed 's/"hi": 9,/"hi": 8,/' two.json > gap.json
printf 'not json' > junk.json
for rule in gap.json junk.json missing.json; do
  set +e
  "$T" bundle --dispatch "$rule" --db tessera.db --out never > out.txt 2> err.txt
  rc=$?
  set -e
  [ "$rc" = 2 ] || die "$rule: exit $rc, expected 2 ($(cat err.txt))"
  [ "$(wc -l < err.txt)" = 1 ] || die "$rule: expected one line on stderr, got: $(cat err.txt)"
done
[ ! -e never ] || die "a bad rule left a bundle folder"
echo "range.sh: ok"
