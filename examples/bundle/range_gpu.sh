#!/usr/bin/env bash
# GPU kernels over a range without a GPU (also the `bundle_range_gpu_example` test): a GEMM over
# M, an elementwise kernel over its rows and an attention over its sequence length, each tuned
# through the estimate into a dispatch rule, its runtime-size kernels bundled (cubin + PTX, each
# checked on the mapped-kernel emulator) and the manifest checked; flag combinations a GPU range
# does not take are refused in one line with exit code 2.
#   bash examples/bundle/range_gpu.sh [path/to/tessera] [work dir]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh" bundle_range_gpu "$@"
G=(gemm --m 1..256 --n 64 --k 64 --dtype f16)

step "refused in one line, exit code 2"
refuse() { refused "$*" "$T" tune "$@" --trials 2 --db bad.db; }
refuse "${G[@]}" --target sm_80                       # a GPU range is tuned through the estimate
refuse "${G[@]}" --target host --estimate             # the estimate predicts GPU targets
refuse elementwise --expr 'y = x * 2' --shape 64x8 --rows 1..64 --target sm_80   # the estimate here too
refuse "${G[@]}" --target gfx942 --estimate           # NVIDIA only
refuse attention --heads 2 --head-dim 32 --dtype f16 --seq 1..64 --target gfx942 --estimate

step "tune M 1..256 on sm_80 through the estimate"
"$T" tune "${G[@]}" --target sm_80 --estimate --trials 6 --points 3 --db tessera.db --dispatch-out rule.json | tail -8
grep -q '"format": "tessera-dispatch-1"' rule.json || die "no rule written"
grep -q '"times": "estimated"' rule.json || die "the rule does not say its times are estimates"

step "bundle --dispatch: runtime-M cubins and PTX"
"$T" bundle --dispatch rule.json --db tessera.db --out b | grep "shape-generic" || die "no shape-generic kernel bundled"
ls b/gpu/*.cubin b/gpu/*.ptx > /dev/null || die "no cubin / PTX written"
grep -q '"runtime_m"' b/manifest.json || die "the manifest has no runtime_m"
grep -q 'TSR_ARG_SIZES' b/tessera_bundle_table.c || die "the table passes no sizes argument"
grep -q 'checked on the emulator\|"reference on the mapped-kernel emulator' b/manifest.json || die "the kernels were not checked"
step "elementwise rows 1..300 and attention seq 1..128 on sm_80: tune, rule, bundle"
"$T" tune elementwise --expr 'y = gelu(x * s + b)' --shape 300x64 --shape s=64 --shape b=300x1 --dtype f16 --rows 1..300 \
  --target sm_80 --estimate --trials 6 --points 3 --db tessera.db --dispatch-out ew.json | tail -4
grep -q '"dim": "rows"' ew.json || die "the elementwise rule does not dispatch on rows"
"$T" tune attention --batch 2 --heads 2 --heads-kv 1 --head-dim 32 --dtype f16 --causal --seq 1..128 \
  --target sm_80 --estimate --trials 6 --points 3 --db tessera.db --dispatch-out attn.json | tail -4
grep -q '"dim": "seq"' attn.json || die "the attention rule does not dispatch on seq"
grep -q '"times": "estimated"' attn.json || die "the attention rule does not say its times are estimates"
"$T" bundle --dispatch ew.json --dispatch attn.json --db tessera.db --out b2 > b2.txt || die "bundle failed: $(cat b2.txt)"
grep "shape-generic, rows" b2.txt || die "no runtime-rows kernel bundled"
grep "shape-generic, seq" b2.txt || die "no runtime-seq kernel bundled"
grep -q '"dim": "rows"' b2/manifest.json || die "the manifest has no rows range"
grep -q '"dim": "seq"' b2/manifest.json || die "the manifest has no seq range"
[ "$(grep -c '"kind": "reference on the mapped-kernel emulator' b2/manifest.json)" -ge 2 ] || die "the kernels were not checked"
echo "range_gpu.sh: ok"
