#!/usr/bin/env python3
"""The vendor-speed rows on an attached GPU: GEMM f16/bf16 4096^3 and the shapes vendor heuristics
handle poorly (1000^3, 4096x4096x320, 1024x1024x16384, batch 64 of 256^3), attention f16 H16 S4096
D128 causal and not, GQA with 4 KV heads, D64. Each row runs `tessera run` on the device with a few
configs (the space's default first; every result checked against the reference before its time
counts) and times torch's op in the same run the way Tessera's device measurer times its kernels
(CUDA events around the op only, L2 flushed by writing twice its size between runs, median).
Prints one line per row with both times, TFLOP/s and the ratio torch/Tessera (> 1: Tessera is
faster), against the row's goal. torch absent or no GPU: the torch column is skipped.
Usage: python3 bench/gpu/vendor_rows.py --tessera build/cli/tessera [--target sm_90] [--rows attention,gemm]
       [--out DIR] [--quick]"""
import argparse
import json
import os
import subprocess
import sys
import time

ATT_D128 = ["", "BQ=128,BK=64,STAGES=2", "BQ=64,BK=32,STAGES=2"]
ATT_D64 = ["", "BQ=128,BK=64,STAGES=2", "BQ=64,BK=128,STAGES=2"]
# sm_90a: the wgmma attention too (offered by the space, not its default until measured here).
# PIPE=fa3 (TMA producer warpgroup, mbarrier ring, P from registers) at two and three slots.
ATT_WGMMA = ["strategy=flash-wgmma,DSPLIT=1,BQ=128,BK=64,STAGES=2", "strategy=flash-wgmma,DSPLIT=1,BQ=64,BK=128,STAGES=2",
             "strategy=flash-wgmma,DSPLIT=1,PIPE=fa3,BQ=128,BK=64,STAGES=2",
             "strategy=flash-wgmma,DSPLIT=1,PIPE=fa3,BQ=128,BK=128,STAGES=2",
             "strategy=flash-wgmma,DSPLIT=1,PIPE=fa3,BQ=128,BK=64,STAGES=3"]
# Overrides on the space's default (mma for f16, mma-lane for bf16 and batched f16 on sm_80-90),
# then the lane-level mma.sync kernel at two warp layouts (for f16: whether it beats `mma`).
LANE = "strategy=mma-lane,VEC=8,"
GEMM_BIG = ["", "BM=128,BN=256,BK=16,TM=64,TN=64,STAGES=3", LANE + "BM=128,BN=128,BK=32,TM=64,TN=64,STAGES=4",
            LANE + "BM=128,BN=128,BK=32,TM=64,TN=32,STAGES=3", LANE + "BM=128,BN=256,BK=32,TM=64,TN=64,STAGES=3"]
GEMM_SMALL = ["", "BM=64,BN=64,BK=64,TM=32,TN=32,STAGES=3", LANE + "BM=64,BN=64,BK=32,TM=32,TN=32,STAGES=4",
              LANE + "BM=128,BN=128,BK=32,TM=64,TN=32,STAGES=3"]


def attention_row(name, h, hkv, s, d, causal, goal):
    flags = ["attention", "--heads", str(h), "--heads-kv", str(hkv), "--seq", str(s), "--head-dim", str(d),
             "--dtype", "f16"] + (["--causal"] if causal else [])
    flops = 4 * h * s * s * d * (0.5 if causal else 1.0)
    return {"name": name, "flags": flags, "flops": flops, "configs": ATT_D64 if d == 64 else ATT_D128, "goal": goal,
            "torch": ("sdpa", h, hkv, s, d, causal)}


def gemm_row(name, m, n, k, dtype="f16", batch=0, goal=0.9):
    flags = ["gemm", "--m", str(m), "--n", str(n), "--k", str(k), "--dtype", dtype] + \
            (["--batch", str(batch)] if batch else [])
    flops = 2 * m * n * k * max(batch, 1)
    big = m * n >= 4096 * 4096
    return {"name": name, "flags": flags, "flops": flops, "configs": GEMM_BIG if big else GEMM_SMALL, "goal": goal,
            "torch": ("matmul", m, n, k, dtype, batch)}


ROWS = {
    "gemm": [gemm_row("gemm f16 4096^3", 4096, 4096, 4096),
             gemm_row("gemm bf16 4096^3", 4096, 4096, 4096, "bf16"),
             gemm_row("gemm f16 1000^3", 1000, 1000, 1000, goal=1.2),
             gemm_row("gemm f16 4096x4096x320", 4096, 4096, 320, goal=1.2),
             gemm_row("gemm f16 1024x1024x16384", 1024, 1024, 16384, goal=1.2),
             gemm_row("gemm f16 64 x 256^3", 256, 256, 256, batch=64, goal=1.2)],
    "attention": [attention_row("attention f16 H16 S4096 D128 causal", 16, 16, 4096, 128, True, 0.8),
                  attention_row("attention f16 H16 S4096 D128", 16, 16, 4096, 128, False, 0.8),
                  attention_row("attention f16 H16 KV4 S4096 D128 causal", 16, 4, 4096, 128, True, 0.8),
                  attention_row("attention f16 H16 S4096 D64", 16, 16, 4096, 64, False, 1.0)],
}


def run_tessera(tessera, target, flags, config, timeout_s):
    cmd = [tessera, "run", "--target", target, "--json"] + (["--config", config] if config else []) + flags
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"config": config, "error": f"timed out after {timeout_s} s"}
    if p.returncode != 0:
        return {"config": config, "error": (p.stderr.strip() or p.stdout.strip()).splitlines()[-1:]}
    j = json.loads(p.stdout)
    return {"config": config or "default", "resolved": j.get("config"), "correct": j.get("correct"),
            "time_us": j.get("time_us"), "resources": j.get("resources"), "launch": j.get("launch"),
            "wall_s": round(time.time() - t0, 1)}


def torch_anchor(spec):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None, "torch is not installed here"
    if not torch.cuda.is_available():
        return None, "no CUDA device"
    # Timed as torch_anchor.py times its anchors (events, L2 flushed, median): one protocol.
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from torch_anchor import bench as anchor_bench

    def bench(fn):
        return anchor_bench(fn, min_time_s=0.3)

    if spec[0] == "sdpa":
        _, h, hkv, s, d, causal = spec
        q = torch.randn(1, h, s, d, dtype=torch.float16, device="cuda")
        k = torch.randn(1, hkv, s, d, dtype=torch.float16, device="cuda")
        v = torch.randn_like(k)
        kw = {"is_causal": causal}
        if hkv != h:
            kw["enable_gqa"] = True
        return bench(lambda: F.scaled_dot_product_attention(q, k, v, **kw)), "F.scaled_dot_product_attention"
    _, m, n, k, dtype, batch = spec
    dt = torch.float16 if dtype == "f16" else torch.bfloat16
    shape_a, shape_b = ((batch, m, k), (batch, k, n)) if batch else ((m, k), (k, n))
    a = torch.randn(*shape_a, dtype=dt, device="cuda")
    b = torch.randn(*shape_b, dtype=dt, device="cuda")
    return bench(lambda: torch.matmul(a, b)), "torch.matmul"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", default="build/cli/tessera")
    ap.add_argument("--target", default="sm_90")
    ap.add_argument("--rows", default="attention,gemm")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--quick", action="store_true", help="the default config only")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per tessera run")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    results = []
    for group in args.rows.split(","):
        for row in ROWS[group]:
            configs = row["configs"][:1] if args.quick else list(row["configs"])
            if group == "attention" and args.target == "sm_90a" and not args.quick:
                configs += ATT_WGMMA
            runs = [run_tessera(args.tessera, args.target, row["flags"], c, args.timeout) for c in configs]
            ok = [r for r in runs if r.get("correct") and r.get("time_us")]
            best = min(ok, key=lambda r: r["time_us"]) if ok else None
            anchor, what = torch_anchor(row["torch"])
            res = {"row": row["name"], "runs": runs, "best": best, "torch_us": anchor, "torch_op": what,
                   "goal": row["goal"], "flops": row["flops"]}
            results.append(res)
            line = f"{row['name']:<42}"
            if best:
                line += f" tessera {best['time_us']:9.1f} us {row['flops'] / best['time_us'] * 1e-6:6.1f} TFLOP/s ({best['config']})"
            else:
                line += " tessera: no correct run (" + "; ".join(str(r.get("error")) for r in runs)[:300] + ")"
            if anchor:
                line += f" | {what} {anchor:9.1f} us {row['flops'] / anchor * 1e-6:6.1f} TFLOP/s"
                if best:
                    line += f" | {anchor / best['time_us']:.2f}x (goal >= {row['goal']}x)"
            else:
                line += f" | torch column skipped: {what}"
            print(line, flush=True)
            with open(os.path.join(args.out, "vendor_rows.json"), "w") as f:
                json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
