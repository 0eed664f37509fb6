#!/usr/bin/env bash
# Shape-generic elementwise kernels end to end (also the `bundle_range_rows_example` test): tune
# y = x * s + b over a range of rows (the leading dimension) into a dispatch rule, bundle its
# kernels, build the bundle and range_rows_demo.c with a plain `cc`, and check row counts of the
# range (odd ones included) against plain C, the bucket that answered and the clean misses
# outside the range; bad --rows values are refused in one line with exit code 2.
#   bash examples/bundle/range_rows.sh [path/to/tessera] [work dir]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh" bundle_range_rows "$@"
EW=(elementwise --expr 'y = x * s + b' --shape 200x40 --shape s=40 --shape b=200x1)

step "bad --rows values: one line, exit code 2"
for r in 0..5 9..3 1..99999999999 "1,,3" "a..b" x 0; do
  refused "--rows $r" "$T" tune "${EW[@]}" --rows "$r" --trials 2 --db bad.db
done
refused "run --rows 1..4" "$T" run "${EW[@]}" --rows 1..4
grep -q "for \`tessera tune\`" err.txt || die "run --rows 1..4 does not say ranges are for tune: $(cat err.txt)"

step "tune over rows 1..200 (small budgets: this is a test, not a benchmark)"
"$T" tune "${EW[@]}" --rows 1..200 --trials 4 --points 4 --min-time 0.002 --top-k 1 --db tessera.db \
  --dispatch-out rule.json | tail -12
grep -q '"format": "tessera-dispatch-1"' rule.json || die "no rule written"
grep -q '"dim": "rows"' rule.json || die "the rule does not name its dimension"

step "bundle the rule, build it and the demo with $CC"
"$T" bundle --dispatch rule.json --db tessera.db --out bundle | tail -4
build_demo bundle range_rows_demo.c range_rows_demo strict
./range_rows_demo 40 1 200 | tee demo.txt | tail -5
grep -q "range rows demo: all checks passed" demo.txt || die "range rows demo failed"
step "a two-bucket rule: rows 1..9 and 10..200 answered by different kernels (row tiles of 3, two threads)"
ARCH=$(rule_field rule.json arch)
cat > two.json <<JSON
{"format": "tessera-dispatch-1", "kernel": "elementwise_200x40_f32", "arch": "$ARCH", "threads": 2,
 "kernel_ir": "kernel elementwise_200x40_f32 : elementwise {\n  in b: f32[200, 1]\n  in s: f32[40]\n  in x: f32[200, 40]\n  out y: f32[200, 40]\n  y[d0, d1] = x[d0, d1] * s[d1] + b[d0, 0]\n}\n",
 "dim": "rows", "lo": 1, "hi": 200,
 "configs": ["CHUNK=0,NT=0,ROWS=1,THREADS=1,UNROLL=1,VW=8",
             "CHUNK=16,NT=0,ROWS=3,THREADS=2,UNROLL=2,VW=8"],
 "buckets": [{"lo": 1, "hi": 9, "config": 0}, {"lo": 10, "hi": 200, "config": 1}]}
JSON
"$T" bundle --dispatch two.json --db tessera.db --out two | tail -3
build_demo two range_rows_demo.c range_rows_demo_two
./range_rows_demo_two 40 1 200 | tee two.txt | tail -3
grep -q "range rows demo: all checks passed" two.txt || die "two-bucket demo failed"
grep -q "bucket 1 of 2 (rows 10..200)" two.txt || die "bucket 1 did not answer rows=10"
# A GEMM's rule is not an elementwise kernel's: the dimension must match the kernel.
sed 's/"dim": "rows"/"dim": "M"/' two.json > wrongdim.json
refused "a rule on M for an elementwise kernel" "$T" bundle --dispatch wrongdim.json --db tessera.db --out never
[ ! -e never ] || die "a bad rule left a bundle folder"
echo "range_rows.sh: ok"
