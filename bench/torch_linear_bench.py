"""Times tessera.torch's Linear on the CPU with the weight kept as the [K, N] copy the NN GEMM reads
(keep_weight=True, the default) against the same Linear reading the weight as given (the NT GEMM,
keep_weight=False) and F.linear (oneDNN), in one process, interleaved, for the GPT block's plain
GEMMs (qkv, proj, fc2 at dim 256, seq 128), both kernels tuned for the same trials and threads;
then the whole GPT block of examples/torch patched with keep_weights on and off (one bundle with
both layouts of its GEMMs) against eager torch, interleaved the same way.

    PYTHONPATH=build/python $(bash tests/torch/torch_venv.sh build/pyenv/bin/python) \\
      bench/torch_linear_bench.py [--trials 16 --threads 1 --rounds 15 --calls 100]

Each round runs every variant for --calls calls, in an order rotated every round, and keeps each
call's time; printed per op and variant are the median and the fastest call, and the ratios of
medians (> 1: the first faster). The machine's load is printed before and after.
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", type=int, default=128, help="rows (batch x seq)")
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--trials", type=int, default=16, help="tuning trials per kernel")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--calls", type=int, default=100, help="calls per variant and round")
    p.add_argument("--out", default="build/bench/torch_linear")
    a = p.parse_args()
    import tessera
    import tessera.torch as tt

    torch.set_num_threads(a.threads)
    d = a.dim
    ops = {"qkv": (d, 3 * d), "proj": (d, d), "fc2": (4 * d, d)}  # name: (K, N)
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, {a.threads} thread(s); "
          f"load before {loadavg()}", flush=True)
    torch.manual_seed(0)
    mods = {name: nn.Linear(k, n).eval() for name, (k, n) in ops.items()}
    xs = {name: torch.randn(a.m, k) for name, (k, _) in ops.items()}
    kernels = []
    for name, mod in mods.items():
        for keep in (True, False):
            kernels += tt.record(nn.Sequential(mod), xs[name], keep_weights=keep)
    os.makedirs(a.out, exist_ok=True)
    db = os.path.join(a.out, "tessera.db")
    t0 = time.perf_counter()
    for k in kernels:
        tessera.tune(k, target="host", trials=a.trials, db=db, threads=a.threads, min_time=0.02)
    tessera.bundle(kernels, targets=["host"], out=os.path.join(a.out, "bundle"), db=db, missing="default", replace=True,
                   threads=a.threads)
    b = tt.load(os.path.join(a.out, "bundle"))
    print(f"tuned {len(kernels)} kernels ({a.trials} trials each) and bundled in {time.perf_counter() - t0:.0f} s", flush=True)

    for name, mod in mods.items():
        x, w, bias = xs[name], mod.weight, mod.bias
        variants = {
            "kept": lambda: tt.linear(x, w, bias, b, keep_weight=True),
            "as given": lambda: tt.linear(x, w, bias, b, keep_weight=False),
            "F.linear": lambda: F.linear(x, w, bias),
        }
        times = {v: [] for v in variants}
        with torch.no_grad():
            want = F.linear(x, w, bias)
            tt.stats(reset=True)
            errs = {v: (f() - want).abs().max().item() for v, f in variants.items()}
            rows = tt.stats()
            for r in range(a.rounds):
                order = list(variants)
                order = order[r % 3:] + order[:r % 3]
                for v in order:
                    f = variants[v]
                    f()
                    for _ in range(a.calls):
                        s = time.perf_counter()
                        f()
                        times[v].append(time.perf_counter() - s)
        k, n = ops[name]
        print(f"{name} {a.m}x{n}x{k} +bias: kernels " +
              ", ".join(f"{r['kernel']} ({r['weight'] or 'as given'}, {r['how']})" for r in rows if r["ran"] == "tessera")
              + f"; max |err| {max(errs.values()):.2g}")
        if len([r for r in rows if r["ran"] == "tessera"]) != 2:
            print(f"  not every variant ran on the bundle: {rows}")
        med = {v: statistics.median(t) for v, t in times.items()}
        for v, t in times.items():
            print(f"  {v:<9} median {med[v] * 1e6:8.1f} us  fastest {min(t) * 1e6:8.1f} us  ({len(t)} calls)")
        print(f"  F.linear/kept {med['F.linear'] / med['kept']:.2f}x, F.linear/as given {med['F.linear'] / med['as given']:.2f}x, "
              f"as given/kept {med['as given'] / med['kept']:.2f}x", flush=True)
    block(a, tt, tessera)
    print(f"load after {loadavg()}")
    return 0


def block(a, tt, tessera):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "torch"))
    import gpt_block
    model = gpt_block.make(a.dim, 4)
    x = torch.randn(1, a.m, a.dim)
    with torch.no_grad():
        want = model(x)
    kernels = {k.workload: k for keep in (True, False) for k in tt.record(model, x, keep_weights=keep)}
    db = os.path.join(a.out, "tessera.db")
    for k in kernels.values():
        tessera.tune(k, target="host", trials=a.trials, db=db, threads=a.threads, min_time=0.02)
    out = os.path.join(a.out, "block_bundle")
    tessera.bundle(list(kernels.values()), targets=["host"], out=out, db=db, missing="default", replace=True,
                   threads=a.threads)
    b = tt.load(out)
    times = {"kept": [], "as given": [], "eager": []}
    calls = max(a.calls // 5, 5)
    with torch.no_grad():
        errs = {}
        for v in ("kept", "as given"):
            tt.patch(model, b, keep_weights=v == "kept")
            tt.stats(reset=True)
            errs[v] = (model(x) - want).abs().max().item()
            assert all(r["ran"] == "tessera" for r in tt.stats()), tt.stats()
        for r in range(a.rounds):
            order = list(times)
            order = order[r % 3:] + order[:r % 3]
            for v in order:
                if v == "eager":
                    tt.unpatch(model)
                else:
                    tt.patch(model, b, keep_weights=v == "kept")
                model(x)
                for _ in range(calls):
                    s = time.perf_counter()
                    model(x)
                    times[v].append(time.perf_counter() - s)
    med = {v: statistics.median(t) for v, t in times.items()}
    print(f"block dim {a.dim} seq {a.m}: {len(kernels)} kernels, every op on the bundle; max |err| kept "
          f"{errs['kept']:.2g}, as given {errs['as given']:.2g}")
    for v, t in times.items():
        print(f"  {v:<9} median {med[v] * 1e3:8.3f} ms  fastest {min(t) * 1e3:8.3f} ms  ({len(t)} calls)")
    print(f"  eager/kept {med['eager'] / med['kept']:.2f}x, eager/as given {med['eager'] / med['as given']:.2f}x, "
          f"as given/kept {med['as given'] / med['kept']:.2f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
