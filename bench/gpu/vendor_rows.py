#!/usr/bin/env python3
"""The goal rows of issue 45 on an attached GPU, torch in the same run: GEMM f16/bf16 4096^3, the
shapes vendor heuristics handle poorly (1000^3, 4096x4096x320, 1024x1024x16384, batch 64 of 256^3)
and 8192^3 on sm_90a (wgmma + TMA); attention f16 H16 S4096 D128 causal and not, GQA with 4 KV
heads, D64 and D256 on sm_90a; and the sm_80-class kernels (mma.sync, mma-lane, flash-mma) on the
same device with --target sm_90. Each row runs `tessera run` on the device with the space's default
first, then a few other configs while the time budget lasts (every result checked against the
reference before its time counts), and times torch's op the way Tessera's device measurer times its
kernels (CUDA events around the op only, L2 flushed by writing twice its size between runs, median).
For each row's winner, the analytic model's estimate for the GPU named by --gpu (`tessera compile
--gpu`, ptxas's resources) and its error. Prints one line per row, writes vendor_rows.json, the
worst row (worst_row.json, for one Nsight Compute read), gpu_rows.json (the run as docs/results.md's
GPU section reads it: copy it to docs/results/ and run bench/results_page.py) and, with --table, one
dated markdown table. --dry-run (no GPU needed): the defaults' estimates only, nothing runs, torch
skipped, no gpu_rows.json (the results page holds measurements).
Usage: python3 bench/gpu/vendor_rows.py --tessera build/cli/tessera [--gpu H200] [--rows gemm,attention,sm80]
       [--out DIR] [--budget S] [--table FILE] [--quick] [--dry-run]"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

HOPPER = "sm_90a"
ATT = ["", "BQ=128,BK=64,STAGES=2"]
ATT_D64 = ["", "BQ=64,BK=64,STAGES=2"]
# flash-wgmma on sm_90a: FlashAttention-3's ping-pong and intra-warpgroup overlap (never timed yet)
# first, then fa3 without them (the measured default's pipeline) and fa2.
FW = "strategy=flash-wgmma,DSPLIT=1,"
ATT_WGMMA = [FW + "PIPE=fa3-pingpong,BQ=128,BK=128,STAGES=2",
             FW + "PIPE=fa3-pingpong,BQ=128,BK=64,STAGES=3",
             FW + "PIPE=fa3-overlap,BQ=128,BK=128,STAGES=2",
             FW + "PIPE=fa3,BQ=128,BK=64,STAGES=2",
             FW + "PIPE=fa3,BQ=128,BK=128,STAGES=2",
             FW + "BQ=128,BK=64,STAGES=2"]
# head_dim 256: O takes 128 registers per thread: fa3 without the overlap, BK 64.
ATT_WGMMA_D256 = [FW + "PIPE=fa3,BQ=128,BK=64,STAGES=2"]
WG = "strategy=wgmma,BK=64,VEC=8,"
GEMM_BIG = ["", WG + "BM=128,BN=128,TM=64,TN=128,STAGES=4,SPLITK=1", WG + "BM=256,BN=128,TM=128,TN=128,STAGES=4,SPLITK=1"]
# Shapes with fewer 128x256 tiles than SMs: small tiles, and split-K with the parallel reduction.
GEMM_SMALL = ["", WG + "BM=64,BN=128,TM=64,TN=128,STAGES=4,SPLITK=1", WG + "BM=128,BN=128,TM=64,TN=128,STAGES=4,SPLITK=2",
              WG + "BM=128,BN=256,TM=64,TN=256,STAGES=4,SPLITK=4", WG + "BM=64,BN=64,TM=64,TN=64,STAGES=4,SPLITK=1"]
LANE = "strategy=mma-lane,VEC=8,"
SM80_GEMM = ["", LANE + "BM=128,BN=128,BK=32,TM=64,TN=64,STAGES=4"]


def attention_row(name, h, hkv, s, d, causal, goal, target=HOPPER):
    flags = ["attention", "--heads", str(h), "--heads-kv", str(hkv), "--seq", str(s), "--head-dim", str(d),
             "--dtype", "f16"] + (["--causal"] if causal else [])
    flops = 4 * h * s * s * d * (0.5 if causal else 1.0)
    # The default first, then flash-wgmma (fa3 first): the budget stops the later configs of a row.
    alt = ATT_D64 if d == 64 else ATT
    wgmma = [] if target != HOPPER else ATT_WGMMA if d <= 128 else ATT_WGMMA_D256
    configs = alt[:1] + wgmma + alt[1:]
    return {"name": name, "target": target, "flags": flags, "flops": flops, "configs": configs, "goal": goal,
            "torch": ("sdpa", h, hkv, s, d, causal)}


def gemm_row(name, m, n, k, dtype="f16", batch=0, goal=1.2, target=HOPPER):
    flags = ["gemm", "--m", str(m), "--n", str(n), "--k", str(k), "--dtype", dtype] + \
            (["--batch", str(batch)] if batch else [])
    flops = 2 * m * n * k * max(batch, 1)
    if target != HOPPER:
        configs = SM80_GEMM
    else:
        configs = GEMM_BIG if m * n * max(batch, 1) >= 4096 * 4096 and k >= 1024 else GEMM_SMALL
    return {"name": name, "target": target, "flags": flags, "flops": flops, "configs": configs, "goal": goal,
            "torch": ("matmul", m, n, k, dtype, batch)}


ROWS = {
    "gemm": [gemm_row("gemm f16 4096^3", 4096, 4096, 4096, goal=1.05),
             gemm_row("gemm bf16 4096^3", 4096, 4096, 4096, "bf16", goal=1.05),
             gemm_row("gemm f16 1000^3", 1000, 1000, 1000),
             gemm_row("gemm f16 4096x4096x320", 4096, 4096, 320),
             gemm_row("gemm f16 1024x1024x16384", 1024, 1024, 16384),
             gemm_row("gemm f16 64 x 256^3", 256, 256, 256, batch=64),
             gemm_row("gemm f16 8192^3", 8192, 8192, 8192, goal=1.0)],
    "attention": [attention_row("attention f16 H16 S4096 D128 causal", 16, 16, 4096, 128, True, 1.0),
                  attention_row("attention f16 H16 S4096 D128", 16, 16, 4096, 128, False, 1.0),
                  attention_row("attention f16 H16 KV4 S4096 D128 causal", 16, 4, 4096, 128, True, 1.0),
                  attention_row("attention f16 H16 S4096 D64", 16, 16, 4096, 64, False, 1.0),
                  attention_row("attention f16 H16 S4096 D256", 16, 16, 4096, 256, False, 1.0)],
    # The sm_80-class kernels on the same device (--target sm_90: no wgmma, no TMA).
    "sm80": [gemm_row("sm_90 gemm f16 4096^3 (mma.sync)", 4096, 4096, 4096, goal=0.8, target="sm_90"),
             gemm_row("sm_90 gemm bf16 4096^3 (mma-lane)", 4096, 4096, 4096, "bf16", goal=0.8, target="sm_90"),
             attention_row("sm_90 attention f16 H16 S4096 D128 causal (flash-mma)", 16, 16, 4096, 128, True, 0.8,
                           target="sm_90")],
}


def estimate(tessera, gpu, target, flags, config):
    """The analytic model's time (us) for `config` on product `gpu` with ptxas's resources, or None."""
    cmd = [tessera, "compile", "--target", target, "-o", os.devnull] + (["--gpu", gpu] if gpu else []) + \
          (["--config", config] if config else []) + flags
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return None, None, "compile timed out"
    m = re.search(r"^estimate\s+([0-9.]+) us", p.stderr, re.M)
    cfg = re.search(r"^config\s+(\S+)", p.stderr, re.M)
    if p.returncode != 0 or not m:
        return None, None, (p.stderr.strip().splitlines() or ["no estimate"])[-1]
    return float(m.group(1)), cfg.group(1) if cfg else config, ""


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


def tune_estimate(tessera, gpu, target, flags, trials):
    """`tune --estimate` on product `gpu`: the model's best of `trials` configs compiled through ptxas."""
    cmd = [tessera, "tune", "--target", target, "--estimate", "--trials", str(trials), "--force", "--no-warm-start",
           "--no-transfer", "--db", os.path.join(os.environ.get("TMPDIR", "/tmp"), f"vendor_rows_{os.getpid()}.db"),
           "--json"] + (["--gpu", gpu] if gpu else []) + flags
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        j = json.loads(p.stdout)
        b = j["best"]
        cfg = b["config"]
        if isinstance(cfg, dict):
            cfg = ",".join(f"{k}={v}" for k, v in sorted(cfg.items()))
        return b["median_us"], cfg
    except (subprocess.TimeoutExpired, ValueError, KeyError, TypeError):
        return None, None


def fmt_us(v):
    return f"{v:.1f} us" if v is not None else "-"


def write_table(path, results, gpu, dry):
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    lines = [f"# Goal rows, {today}, {gpu or 'default product'}" + (" (dry run: nothing ran on a GPU)" if dry else ""), "",
             "| row | target | Tessera | TFLOP/s | torch | ratio | goal | model (winner) | model error | winner |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        b = r["best"] or {}
        t = b.get("time_us")
        ratio = f"{r['torch_us'] / t:.2f}x" if t and r["torch_us"] else "-"
        err = f"{(r['estimate_us'] / t - 1) * 100:+.0f} %" if t and r.get("estimate_us") else "-"
        tf = f"{r['flops'] / t * 1e-6:.0f}" if t else "-"
        dflt = f" (default {fmt_us(r['estimate_default_us'])})" if r.get("estimate_default_us") else ""
        lines.append(f"| {r['row']} | {r['target']} | {fmt_us(t)} | {tf} | {fmt_us(r['torch_us'])} | {ratio} | "
                     f">= {r['goal']}x | {fmt_us(r.get('estimate_us'))}{dflt} | {err} | {b.get('resolved') or r.get('estimate_config') or '-'} |")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def write_page_json(path, results, gpu):
    """The run as bench/results_page.py reads it (docs/results/gpu_rows.json): the rows with the
    device's and torch's names and the date, so the results page can say what ran where."""
    try:
        import torch
        device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else gpu
        anchor = f"torch {torch.__version__}"
    except ImportError:
        device, anchor = gpu, "no torch"
    doc = {"bench": "gpu_rows", "gpu": gpu, "device": device or "unnamed GPU", "torch": anchor, "dry_run": False,
           "date": time.strftime("%Y-%m-%d", time.gmtime()), "rows": results}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", default="build/cli/tessera")
    ap.add_argument("--gpu", default="", help="the product the model estimates for (the card's name on a device)")
    ap.add_argument("--rows", default="gemm,attention,sm80")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--quick", action="store_true", help="the default config only")
    ap.add_argument("--configs", default="", help="a regular expression: only the default and the configs it matches")
    ap.add_argument("--dry-run", action="store_true", help="estimates of the defaults only: nothing runs on a GPU")
    ap.add_argument("--budget", type=float, default=0, help="seconds for all rows (0: none); extra configs stop first")
    ap.add_argument("--table", default="", help="write the dated markdown table here")
    ap.add_argument("--timeout", type=int, default=60, help="seconds per tessera run")
    ap.add_argument("--estimate-trials", type=int, default=0,
                    help="dry run: also `tune --estimate` with this many trials per row (the model's winner)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = [row for group in args.rows.split(",") for row in ROWS[group]]
    start = time.time()
    results = []
    for i, row in enumerate(rows):
        configs = row["configs"][:1] if args.quick or args.dry_run else list(row["configs"])
        if args.configs:
            configs = configs[:1] + [c for c in configs[1:] if re.search(args.configs, c)]
        runs = []
        for j, c in enumerate(configs):
            # Past the default, a config runs only while the budget leaves ~8 s for each row still to come.
            left = args.budget - (time.time() - start) - 8 * (len(rows) - i - 1)
            if j > 0 and args.budget and left < 8:
                break
            if not args.dry_run:
                runs.append(run_tessera(args.tessera, row["target"], row["flags"], c, args.timeout))
        ok = [r for r in runs if r.get("correct") and r.get("time_us")]
        best = min(ok, key=lambda r: r["time_us"]) if ok else None
        anchor, what = (None, "dry run") if args.dry_run else torch_anchor(row["torch"])
        est_cfg = (best.get("resolved") if best else "") or ""
        if isinstance(est_cfg, dict):
            est_cfg = ",".join(f"{k}={v}" for k, v in sorted(est_cfg.items()))
        est, resolved, why = estimate(args.tessera, args.gpu, row["target"], row["flags"], est_cfg)
        res = {"row": row["name"], "target": row["target"], "flags": row["flags"], "runs": runs, "best": best,
               "torch_us": anchor, "torch_op": what, "goal": row["goal"], "flops": row["flops"], "estimate_us": est,
               "estimate_config": resolved, "estimate_error": why}
        if args.dry_run and args.estimate_trials:
            tuned, tuned_cfg = tune_estimate(args.tessera, args.gpu, row["target"], row["flags"], args.estimate_trials)
            if tuned is not None and (est is None or tuned < est):
                res.update(estimate_default_us=est, estimate_us=tuned, estimate_config=tuned_cfg)
                est, resolved = tuned, tuned_cfg
        results.append(res)
        line = f"{row['name']:<52}"
        if best:
            line += f" tessera {best['time_us']:9.1f} us {row['flops'] / best['time_us'] * 1e-6:6.1f} TFLOP/s ({best['config']})"
        elif not args.dry_run:
            line += " tessera: no correct run (" + "; ".join(str(r.get("error")) for r in runs)[:300] + ")"
        line += f" | model {fmt_us(est)}" + (f" ({why})" if why else "") + (f" for {resolved}" if args.dry_run else "")
        if anchor:
            line += f" | {what} {anchor:9.1f} us {row['flops'] / anchor * 1e-6:6.1f} TFLOP/s"
            if best:
                line += f" | {anchor / best['time_us']:.2f}x (goal >= {row['goal']}x)"
        elif not args.dry_run:
            line += f" | torch column skipped: {what}"
        print(line, flush=True)
        with open(os.path.join(args.out, "vendor_rows.json"), "w") as f:
            json.dump(results, f, indent=1)
    # The worst row against its goal (no correct run: the worst of all), for one Nsight Compute read.
    def score(r):
        t = (r["best"] or {}).get("time_us")
        return (r["torch_us"] / t / r["goal"]) if t and r["torch_us"] else (0 if not t else 1e9)
    worst = min(results, key=score) if results else None
    if worst:
        cfg = (worst["best"] or {}).get("config", "")
        with open(os.path.join(args.out, "worst_row.json"), "w") as f:
            json.dump({"row": worst["row"], "target": worst["target"], "flags": worst["flags"],
                       "config": "" if cfg in ("", "default") else cfg}, f)
    if not args.dry_run:
        write_page_json(os.path.join(args.out, "gpu_rows.json"), results, args.gpu)
    if args.table:
        write_table(args.table, results, args.gpu, args.dry_run)
    print(f"rows: {time.time() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
