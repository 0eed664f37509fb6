#!/usr/bin/env bash
# A GPU GEMM over a range of M without a GPU (also the `bundle_range_gpu_example` test): tune
# through the estimate into a dispatch rule, bundle its runtime-M kernels (cubin + PTX, each checked
# on the mapped-kernel emulator) and check the manifest; flag combinations a GPU range does not
# take are refused in one line with exit code 2.
#   bash examples/bundle/range_gpu.sh [path/to/tessera] [work dir]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/common.sh" bundle_range_gpu "$@"
G=(gemm --m 1..256 --n 64 --k 64 --dtype f16)

step "refused in one line, exit code 2"
refuse() { refused "$*" "$T" tune "$@" --trials 2 --db bad.db; }
refuse "${G[@]}" --target sm_80                       # a GPU range is tuned through the estimate
refuse "${G[@]}" --target host --estimate             # the estimate predicts GPU targets
refuse elementwise --expr 'y = x * 2' --shape 64x8 --rows 1..64 --target sm_80 --estimate
refuse "${G[@]}" --target gfx942 --estimate           # NVIDIA only

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
echo "range_gpu.sh: ok"
