"""Times the small GPT block of examples/torch on Tessera's tuned kernels (tessera.torch.tune_model:
its GEMMs with bias and GELU fused, its causal attention from one bundle) against eager torch and
torch.compile (inductor) of the same block in the same run, on the CPU, with one thread and with all
cores (torch and the bundle on the same count), and prints the ratios and the machine's load; with a
CUDA device, the block on the GPU too (tuned for the device's chip, launched on torch's stream).

    LD_LIBRARY_PATH=/usr/local/cuda/lib64 PYTHONPATH=build/python \\
      $(bash tests/torch/torch_venv.sh build/pyenv/bin/python) bench/torch_model_bench.py [--trials 16]

Timing: a warm-up call, then calls for --seconds each; the median and the fastest call are printed,
ratios are of medians (> 1: Tessera faster). Sizes default to a GPT-2-small-like block cut to the
machine (dim 256, 4 heads, seq 128, batch 1; --dim/--heads/--seq/--batch change them).
"""
import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "torch"))
import gpt_block  # noqa: E402


def timed(fn, seconds):
    fn()
    ts, start = [], time.perf_counter()
    while time.perf_counter() - start < seconds or len(ts) < 5:
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), min(ts), len(ts)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dim", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--trials", type=int, default=16, help="tuning trials per kernel")
    p.add_argument("--seconds", type=float, default=2.0, help="timing per variant")
    p.add_argument("--threads", default="1,all",
                   help="comma list of thread counts, 'all' = every core; 'none': the CUDA section only")
    p.add_argument("--out", default="build/bench/torch_model")
    p.add_argument("--keep-weights", choices=("on", "off"), default="off",
                   help="CPU Linears on kept [K, N] weight copies (NN GEMMs) or reading the weight as given (the default)")
    p.add_argument("--openmp", choices=("gomp", "libomp", "both"), default="both",
                   help="the bundle's threaded kernels on torch's OpenMP team (gomp, tessera.torch's default), on "
                        "LLVM's libomp, or both (a row each, timed in turn)")
    a = p.parse_args()
    import tessera.torch as tt

    cores = os.cpu_count() or 1
    print(f"torch {torch.__version__}, {cores} cores, CPU capability {torch.backends.cpu.get_cpu_capability()}; "
          f"block dim {a.dim} heads {a.heads} seq {a.seq} batch {a.batch}; weights kept: {a.keep_weights}; "
          f"load before {loadavg()}", flush=True)
    x = torch.randn(a.batch, a.seq, a.dim)
    worst = []
    for t in [t for t in a.threads.split(",") if t != "none"]:
        threads = cores if t == "all" else int(t)
        torch.set_num_threads(threads)
        model = gpt_block.make(a.dim, a.heads)
        with torch.no_grad():
            want = model(x)
            t0 = time.perf_counter()
            b = tt.tune_model(model, (x,), out=os.path.join(a.out, f"t{threads}", "bundle"),
                              db=os.path.join(a.out, f"t{threads}", "tessera.db"), trials=a.trials, threads=threads,
                              min_time=0.02, keep_weights=a.keep_weights == "on")
            tune_s = time.perf_counter() - t0
            rows = []
            for omp in (("gomp", "libomp") if a.openmp == "both" else (a.openmp,)):
                tt.unpatch(model)
                tt.patch(model, tt.load(os.path.join(a.out, f"t{threads}", "bundle"), openmp=omp),
                         keep_weights=a.keep_weights == "on")
                tt.stats(reset=True)
                err = (model(x) - want).abs().max().item()
                on_bundle = all(r["ran"] == "tessera" for r in tt.stats())
                rows.append((f"tessera {omp}", timed(lambda: model(x), a.seconds), err, on_bundle))
            tt.unpatch(model)
            eager = timed(lambda: model(x), a.seconds)
            torch._dynamo.reset()
            compiled = torch.compile(model)
            compiled(x)  # compiles outside the timing
            comp = timed(lambda: compiled(x), a.seconds)
        print(f"threads {threads}: tuned and bundled in {tune_s:.0f} s; max |err| {max(r[2] for r in rows):.2g}; every op "
              f"on the bundle: {all(r[3] for r in rows)}", flush=True)
        for name, (med, best, n) in [(r[0], r[1]) for r in rows] + [("eager", eager), ("torch.compile", comp)]:
            print(f"  {name:<15} median {med * 1e3:8.3f} ms  fastest {best * 1e3:8.3f} ms  ({n} calls)")
        for name, ours, _, _ in rows:
            print(f"  ratio eager/{name} {eager[0] / ours[0]:.2f}x, torch.compile/{name} {comp[0] / ours[0]:.2f}x", flush=True)
        worst.append(min(eager[0], comp[0]) / rows[0][1][0])
        del b
    print(f"load after {loadavg()}")
    if torch.cuda.is_available():
        cuda(a, tt)
    else:
        print("CUDA: no device here (torch.cuda.is_available() is False): not measured")
    return 0


def cuda(a, tt):
    """The same block on the GPU: tuned for the device's chip on the device, its kernels launched on
    torch's stream, against eager and torch.compile; each call is synchronised for the timing."""
    major, minor = torch.cuda.get_device_capability()
    chip = f"sm_{major}{minor}"
    x = torch.randn(a.batch, a.seq, a.dim, device="cuda")
    model = gpt_block.make(a.dim, a.heads).cuda()
    out = os.path.join(a.out, chip)
    with torch.no_grad():
        want = model(x)
        tt.tune_model(model, (x,), target=chip, out=os.path.join(out, "bundle"), db=os.path.join(out, "tessera.db"),
                      trials=a.trials, min_time=0.02)
        tt.patch(model, tt.load(os.path.join(out, "bundle")))
        tt.stats(reset=True)
        err = (model(x) - want).abs().max().item()
        on_bundle = all(r["ran"] == "tessera" for r in tt.stats())

        def synced(f):
            return lambda: (f(), torch.cuda.synchronize())
        ours = timed(synced(lambda: model(x)), a.seconds)
        tt.unpatch(model)
        eager = timed(synced(lambda: model(x)), a.seconds)
        torch._dynamo.reset()
        compiled = torch.compile(model)
        compiled(x)
        comp = timed(synced(lambda: compiled(x)), a.seconds)
    print(f"CUDA {torch.cuda.get_device_name()} ({chip}): max |err| {err:.2g}; every op on the bundle: {on_bundle}")
    for name, (med, best, n) in (("tessera", ours), ("eager", eager), ("torch.compile", comp)):
        print(f"  {name:<14} median {med * 1e3:8.3f} ms  fastest {best * 1e3:8.3f} ms  ({n} calls)")
    print(f"  ratio eager/tessera {eager[0] / ours[0]:.2f}x, torch.compile/tessera {comp[0] / ours[0]:.2f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
