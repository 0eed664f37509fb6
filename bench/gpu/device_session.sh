#!/usr/bin/env bash
# The device session of issue 13, for a machine with a GPU (an H100: sm_90). Runs the `gpu`-labelled
# tests, then `tessera tune` on the device for GEMM f16 4096^3 (100 trials), attention f16 H16
# S4096 D128 causal and bias+GELU 8192^2, the analytic model's estimate of each winner (the
# estimator's error against the measurement), and torch's anchors in the same run when torch is
# importable (bench/gpu/torch_anchor.py). Prints ratios; writes everything under ${OUT:-out}.
# Usage: [STEPS=gemm,attention,elementwise,torch] bash bench/gpu/device_session.sh [target]   (default sm_90)
set -euo pipefail
cd "$(dirname "$0")/../.."
TARGET=${1:-sm_90}
OUT=${OUT:-out}
mkdir -p "$OUT"
B=${TESSERA_BUILD_DIR:-build}
# TESSERA_BIN / TESSERA_GPU_TESTS: prebuilt programs (bench/gpu/run_on_device.sh on a machine
# without LLVM); otherwise this checkout's build.
T=${TESSERA_BIN:-$B/cli/tessera}
if [ -n "${TESSERA_GPU_TESTS:-}" ]; then
  # One process per test, as ctest runs them: the device measurer forks its children, which cannot
  # use CUDA once the parent process has initialized it (an earlier test in the same process).
  : > "$OUT/gpu_tests.txt"
  for t in $("$TESSERA_GPU_TESTS" --gtest_list_tests | awk '/^[^ ]/{s=$1} /^  /{print s $1}'); do
    "$TESSERA_GPU_TESTS" --gtest_filter="$t" 2>&1 | grep -E "^\[ *(OK|FAILED|SKIPPED) |^\[sm|Skipped|Failure|error" | tee -a "$OUT/gpu_tests.txt"
  done
else
  [ -x "$T" ] || bash scripts/build.sh
  ctest --test-dir "$B" -L gpu --output-on-failure | tee "$OUT/gpu_tests.txt"
fi
STEPS=${STEPS:-gemm,attention,elementwise,torch}
DB="$OUT/device.db"
run() {  # name, trials, kernel flags...
  local name=$1 trials=$2; shift 2
  "$T" tune --target "$TARGET" --trials "$trials" --db "$DB" --json "$@" > "$OUT/$name.tune.json"
  "$T" compare --targets "$TARGET" --db "$DB" --json "$@" > "$OUT/$name.compare.json"
  python3 - "$OUT/$name.tune.json" "$OUT/$name.compare.json" "$name" <<'PY'
import json, sys
tune = json.load(open(sys.argv[1])); cmp = json.load(open(sys.argv[2]))
row = cmp["targets"][0]
best = tune["best"]
est = row.get("estimated_us", 0)
err = (est / best["median_us"] - 1) * 100 if est else float("nan")
print(f"{sys.argv[3]}: {best['median_us']:.1f} us measured on {tune['measured_on']}, "
      f"model {est:.1f} us ({err:+.0f}%), {tune['trials']} trials, config {best['config']}")
PY
}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
has gemm && run gemm_f16_4096 100 gemm --m 4096 --n 4096 --k 4096 --dtype f16
has attention && run attention_f16_h16_s4096_d128_causal 60 attention --heads 16 --seq 4096 --head-dim 128 --causal --dtype f16
has elementwise && run bias_gelu_f16_8192 40 elementwise --expr 'y = gelu(x + b)' --shape 8192x8192 --shape b=8192 --dtype f16
if has torch && python3 bench/gpu/torch_anchor.py > "$OUT/torch.jsonl"; then
  python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
anchors = [json.loads(l) for l in open(os.path.join(out, "torch.jsonl"))]
names = ["gemm_f16_4096", "attention_f16_h16_s4096_d128_causal", "bias_gelu_f16_8192"]
if anchors and "skipped" in anchors[0]:
    print("torch column skipped:", anchors[0]["skipped"])
else:
    for name, a in zip(names, anchors):
        if not os.path.exists(os.path.join(out, name + ".tune.json")): continue
        t = json.load(open(os.path.join(out, name + ".tune.json")))["best"]["median_us"]
        print(f"{name}: Tessera {t:.1f} us vs {a['anchor']} {a['median_us']:.1f} us: {a['median_us'] / t:.2f}x")
PY
fi
