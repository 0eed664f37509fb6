#!/usr/bin/env bash
# Shape-generic attention kernels end to end (also the `bundle_range_seq_example` test): tune
# causal grouped-query attention over a range of sequence lengths (query and key lengths together)
# into a dispatch rule, bundle its kernels, build the bundle and range_seq_demo.c with a plain
# `cc`, and check lengths of the range (odd ones and block edges included) against plain C, the
# bucket that answered and the clean misses outside the range; bad --seq values and rules whose
# dimension is not the kernel's are refused in one line with exit code 2.
#   bash examples/bundle/range_seq.sh [path/to/tessera] [work dir]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh" bundle_range_seq "$@"
# Batch 2, 2 query heads sharing 1 key/value head, head_dim 16, causal (bottom-right aligned:
# with equal lengths, key j is visible to query i when j <= i).
ATT=(attention --batch 2 --heads 2 --heads-kv 1 --head-dim 16 --causal)

step "bad --seq values: one line, exit code 2"
for s in 0..5 9..3 -4..8 1..99999999999 1..2000000 "1,,3" "a..b" x 0 "5,0"; do
  refused "--seq $s" "$T" tune "${ATT[@]}" --seq "$s" --trials 2 --db bad.db
done
refused "--seq with --seq-kv" "$T" tune "${ATT[@]}" --seq 1..64 --seq-kv 64 --trials 2 --db bad.db
grep -q -- "--seq-kv" err.txt || die "--seq LO..HI with --seq-kv does not name --seq-kv: $(cat err.txt)"
# A range whose top holds more than --max-elements is refused before anything runs.
refused "a huge top" "$T" tune attention --heads 64 --head-dim 128 --seq 1..1048576 --trials 2 --db bad.db
refused "run --seq 1..4" "$T" run "${ATT[@]}" --seq 1..4
grep -q "for \`tessera tune\`" err.txt || die "run --seq 1..4 does not say ranges are for tune: $(cat err.txt)"

step "tune over seq 1..200 (small budgets: this is a test, not a benchmark)"
"$T" tune "${ATT[@]}" --seq 1..200 --trials 3 --points 4 --min-time 0.002 --top-k 1 --db tessera.db \
  --dispatch-out rule.json | tail -12
grep -q '"format": "tessera-dispatch-1"' rule.json || die "no rule written"
grep -q '"dim": "seq"' rule.json || die "the rule does not name its dimension"

step "bundle the rule, build it and the demo with $CC"
"$T" bundle --dispatch rule.json --db tessera.db --out bundle | tail -4
grep -q '"key_dims": \[' bundle/manifest.json || die "the manifest does not say which key dimensions the range moves"
build_demo bundle range_seq_demo.c range_seq_demo strict
./range_seq_demo 2 2 1 16 1 200 1 | tee demo.txt | tail -6
grep -q "range seq demo: all checks passed" demo.txt || die "range seq demo failed"

step "a two-bucket rule: seq 1..20 and 21..200 answered by different kernels (the second on two threads)"
ARCH=$(rule_field rule.json arch)
IR=$(grep -o '"kernel_ir": "[^"]*"' rule.json | head -1 | sed 's/^"kernel_ir": //')
NAME=$(rule_field rule.json kernel)
# rule_json KERNEL_IR_JSON DIM HI: two buckets over 1..HI (the second on two threads).
rule_json() {
  cat <<JSON
{"format": "tessera-dispatch-1", "kernel": "$NAME", "arch": "$ARCH", "threads": 2,
 "kernel_ir": $1,
 "dim": "$2", "lo": 1, "hi": $3,
 "configs": ["BK=16,BQ=8,MR1=2,MR2=2,NR1=16,NR2=16,U1=1,U2=1,VW=8",
             "BK=64,BQ=32,MR1=2,MR2=2,NR1=16,NR2=16,THREADS=2,U1=2,U2=2,VW=8"],
 "buckets": [{"lo": 1, "hi": 20, "config": 0}, {"lo": 21, "hi": $3, "config": 1}]}
JSON
}
rule_json "$IR" seq 200 > two.json
"$T" bundle --dispatch two.json --db tessera.db --out two | tail -3
build_demo two range_seq_demo.c range_seq_demo_two
./range_seq_demo_two 2 2 1 16 1 200 1 | tee two.txt | tail -3
grep -q "range seq demo: all checks passed" two.txt || die "two-bucket demo failed"
grep -q "bucket 1 of 2 (seq 21..200)" two.txt || die "bucket 1 did not answer seq=21"
grep -q "bucket 0 of 2 (seq 1..20)" two.txt || die "bucket 0 did not answer seq=1"

step "rules whose dimension is not the kernel's: one line, exit code 2, no folder"
rule_json "$IR" M 200 > wrongdim.json
refused "a rule on M for an attention kernel" "$T" bundle --dispatch wrongdim.json --db tessera.db --out never
rule_json "$IR" rows 200 > rows.json
refused "a rule on rows for an attention kernel" "$T" bundle --dispatch rows.json --db tessera.db --out never
rule_json "$IR" seq 150 > wronghi.json
refused "a rule whose range ends below its kernel's length" "$T" bundle --dispatch wronghi.json --db tessera.db --out never
# A kernel with a key length of its own (seq_q 200, seq_kv 256) has no single sequence dimension.
APART=$("$T" compile "${ATT[@]}" --seq 200 --seq-kv 256 --emit ir | sed ':a;N;$!ba;s/\n/\\n/g')
rule_json "\"$APART\"" seq 200 > apart.json
grep -q 'f32\[2, 1, 256, 16\]' apart.json || die "apart.json: no kernel with a key length of 256"
refused "a rule over a kernel whose lengths differ" "$T" bundle --dispatch apart.json --db tessera.db --out never
grep -q "query and key lengths" err.txt || die "the refusal does not say the lengths differ: $(cat err.txt)"
[ ! -e never ] || die "a bad rule left a bundle folder"
echo "range_seq.sh: ok"
