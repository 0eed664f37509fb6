#!/usr/bin/env bash
# Shape-generic kernels end to end (also the `bundle_range_example` test): tune a GEMM over a range
# of M into a dispatch rule, bundle its shape-generic kernels, build the bundle and range_demo.c with
# a plain `cc`, and check every M of the range (odd ones included) against plain C loops, the
# bucket that answered, and the clean misses outside the range; then a two-bucket rule written by
# hand, one with fixed buckets (kernels of one shape at M 1 and 2, checked to answer exactly
# those M, with a bundle without them as the control), and bad ranges and rules refused in one
# line with exit code 2.
#   bash examples/bundle/range.sh [path/to/tessera] [work dir]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh" bundle_range "$@"

step "bad ranges: one line, exit code 2"
for m in 0..5 9..3 1..99999999999 1..2000000 "1,,3" "a..b" 1...4 "1,x" ","; do
  refused "--m $m" "$T" tune gemm --m "$m" --n 33 --k 20 --trials 2 --db bad.db
done
# Flags a range cannot take.
for extra in --estimate --trans-a "--batch 2" "--strategy random"; do
  # shellcheck disable=SC2086  # $extra is a flag and maybe its value
  refused "--m 1..8 $extra" "$T" tune gemm --m 1..8 --n 33 --k 20 --trials 2 --db bad.db $extra
done
# A range whose top is too large a kernel for the element limit.
refused "a huge range" "$T" tune gemm --m 1..1048576 --n 4096 --k 4096 --trials 2 --db bad.db
[ ! -e bad.db ] || [ ! -s bad.db ] || true

step "tune over M 1..96 (small budgets: this is a test, not a benchmark)"
"$T" tune gemm --m 1..96 --n 33 --k 20 --trials 4 --points 4 --min-time 0.002 --top-k 1 --fixed-up-to 1 --db tessera.db \
  --dispatch-out rule.json | tail -14
grep -q '"format": "tessera-dispatch-1"' rule.json || die "no rule written"

step "bundle the rule, build it and the demo with $CC"
"$T" bundle --dispatch rule.json --db tessera.db --out bundle | tail -4
build_demo bundle range_demo.c range_demo strict
./range_demo 33 20 1 96 | tee demo.txt | tail -5
grep -q "range demo: all checks passed" demo.txt || die "range demo failed"

step "a two-bucket rule: M 1..9 and 10..96 answered by different kernels"
ARCH=$(rule_field rule.json arch)
cat > two.json <<JSON
{"format": "tessera-dispatch-1", "kernel": "gemm_96x33x20_f32", "arch": "$ARCH", "threads": 1,
 "kernel_ir": "kernel gemm_96x33x20_f32 : gemm {\n  in A: f32[96, 20]\n  in B: f32[20, 33]\n  out C: f32[96, 33]\n  C[i, j] = sum(k < 20: A[i, k] * B[k, j])\n}\n",
 "dim": "M", "lo": 1, "hi": 96,
 "configs": ["KC=8,KU=1,MC=16,MR=1,NC=32,NR=16,ORDER=ij,THREADS=1,schedule=blis",
             "KC=16,KU=2,MC=32,MR=6,NC=64,NR=16,ORDER=ji,THREADS=1,schedule=blis"],
 "buckets": [{"lo": 1, "hi": 9, "config": 0}, {"lo": 10, "hi": 96, "config": 1}]}
JSON
"$T" bundle --dispatch two.json --db tessera.db --out two | tail -3
build_demo two range_demo.c range_demo_two
./range_demo_two 33 20 1 96 2 | tee two.txt | tail -4
grep -q "range demo: all checks passed" two.txt || die "two-bucket demo failed"
grep -q "bucket 1 of 2 (M 10..96)" two.txt || die "bucket 1 did not answer M=10"

step "a rule with fixed buckets: M 1 and 2 by plain kernels of that shape, 3..96 shape-generic"
sed -e 's/"configs": \[/"configs": ["KC=16,KU=1,MC=16,MR=1,NC=64,NR=16,ORDER=ij,THREADS=1,schedule=plain", /' \
    -e 's/"buckets": \[.*\]}/"buckets": [{"lo": 1, "hi": 1, "config": 0, "fixed": true}, {"lo": 2, "hi": 2, "config": 0, "fixed": true}, {"lo": 3, "hi": 96, "config": 2}]}/' \
    two.json > fixed.json
"$T" bundle --dispatch fixed.json --db tessera.db --out fixed | tail -5
build_demo fixed range_demo.c range_demo_fixed
./range_demo_fixed 33 20 1 96 3 1,2 | tee fixed.txt | tail -4
grep -q "range demo: all checks passed" fixed.txt || die "fixed-bucket demo failed"
grep -q "bucket 0 of 3 (M 1..1), fixed-shape kernel" fixed.txt || die "M=1 was not answered by its fixed bucket"
# The control: the same check against the two-bucket bundle (no fixed buckets) must fail at M 1 and 2.
if ./range_demo_two 33 20 1 96 2 1,2 > control.txt; then die "the kernel-kind check passed a bundle without fixed buckets"; fi
grep -q "M=1: answered by .* (shape-generic)" control.txt || die "the control failed for another reason"

step "bad rules: one line, exit code 2"
sed 's/"hi": 9,/"hi": 8,/' two.json > gap.json
printf 'not json' > junk.json
# A fixed bucket answers one size only.
sed 's/{"lo": 2, "hi": 2, "config": 0, "fixed": true}, {"lo": 3,/{"lo": 2, "hi": 9, "config": 0, "fixed": true}, {"lo": 10,/' fixed.json > wide.json
cmp -s wide.json fixed.json && die "wide.json is not the wide rule"
for rule in gap.json junk.json missing.json wide.json; do
  refused "$rule" "$T" bundle --dispatch "$rule" --db tessera.db --out never
done
[ ! -e never ] || die "a bad rule left a bundle folder"
echo "range.sh: ok"
