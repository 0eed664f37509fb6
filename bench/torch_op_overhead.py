"""The custom operator's own cost per call (issue 52): tessera.torch's ``linear`` against the bare
native call of the same kernel, on CPU tensors and on the stand-in CUDA driver, in one run.

    python bench/torch_op_overhead.py FAKE_LIBCUDA [--m 32 --n 192 --k 64] [--reps 200] [--rounds 15]

Per call overhead = (time of ``tt.linear(x, w, bias, bundle)``) - (time of the kernel's bare call:
``tessera._tessera.BundleCall`` bound to the runtime's entry point, all of its arguments made before
the loop, the output preallocated). Both are timed in alternating batches (``--reps`` calls each,
``--rounds`` rounds, the order swapped every round); the overhead is the median (and smallest) of
the rounds' differences. CPU: the bundle's host GEMM (+bias) at M x N x K. CUDA: the same GEMM
bundled for sm_90 on tensors in the stand-in driver's memory (tests/bundle's tessera_fake_cuda
loaded as libcuda.so.1; tests/torch/standin_device.py: one allocation handed out as torch's
caching allocator would), its stream operations counted but not run (fake_cuda_skip_ops), so both sides
are host time only: the operator's Python, the allocation of its output (the stand-in's allocator,
timed apart as ``alloc``), its weight's transposition (a torch CPU copy here, a copy kernel on a GPU)
and the runtime's launch path. Prints the load average before and after. Works on tessera.torch
before its launch plans (PYTHONPATH at an older package) for A/B runs."""
import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
import warnings

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("fake", help="the stand-in CUDA driver (build/tests/bundle/libtessera_fake_cuda.so)")
p.add_argument("--m", type=int, default=32)
p.add_argument("--n", type=int, default=192)
p.add_argument("--k", type=int, default=64)
p.add_argument("--reps", type=int, default=200)
p.add_argument("--rounds", type=int, default=15)
p.add_argument("--label", default="", help="a name for this run's lines (A/B runs)")
a = p.parse_args()


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


load_before = load()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
import standin_device  # noqa: E402

fake = standin_device.load(a.fake)  # before any dlopen("libcuda.so.1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

import tessera  # noqa: E402
import tessera.torch as tt  # noqa: E402
from tessera import _torch_cuda  # noqa: E402
from tessera._tessera import BundleCall  # noqa: E402

torch.set_num_threads(1)
M, N, K = a.m, a.n, a.k
work = tempfile.mkdtemp(prefix="tessera_overhead_")
kernels = tt.record(nn.Sequential(nn.Linear(K, N)), torch.randn(M, K))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # untuned defaults are named
    tessera.bundle(kernels, targets=["host"], out=os.path.join(work, "host"), missing="default")
    tessera.bundle(kernels, targets=["sm_90"], out=os.path.join(work, "gpu"), missing="default")
bh, bg = tt.load(os.path.join(work, "host")), tt.load(os.path.join(work, "gpu"))


def rounds(op, bare):
    """Median and smallest (op - bare) per call over alternating batches, and the medians of both."""
    for f in (op, bare):  # warm
        for _ in range(a.reps // 4 + 1):
            f()
    ops, bares, diffs = [], [], []
    for r in range(a.rounds):
        t = {}
        for name, f in ((("op", op), ("bare", bare)) if r % 2 == 0 else (("bare", bare), ("op", op))):
            t0 = time.perf_counter()
            for _ in range(a.reps):
                f()
            t[name] = (time.perf_counter() - t0) / a.reps
        ops.append(t["op"])
        bares.append(t["bare"])
        diffs.append(t["op"] - t["bare"])
    return statistics.median(diffs), min(diffs), statistics.median(ops), statistics.median(bares)


def kernel_of(b):
    (row,) = [r for r in tt.stats() if r["ran"] == "tessera"]
    (k,) = [kd for kd in b.lib.kernels if kd.name == row["kernel"]]
    return k


def us(x):
    return f"{x * 1e6:.2f}"


out_lines = []
with torch.no_grad():
    # ---- CPU ----
    torch.manual_seed(0)
    x, w, bias = torch.randn(M, K), torch.randn(N, K), torch.randn(N)
    tt.stats(reset=True)
    y = tt.linear(x, w, bias, bh)
    torch.testing.assert_close(y, torch.nn.functional.linear(x, w, bias), rtol=1e-4, atol=1e-4)
    k = kernel_of(bh)
    out = torch.empty(M, N)
    named = {"A": x, "B": w, "bias": bias}
    ptrs = [named[t.name].data_ptr() if not t.is_output else out.data_ptr() for t in k.tensors]
    native = BundleCall(ctypes.cast(bh.lib._run, ctypes.c_void_p).value, k.handle, [M, N, K], len(k.tensors))
    assert native(*ptrs) == 0
    d, dmin, op_t, bare_t = rounds(lambda: tt.linear(x, w, bias, bh), lambda: native(*ptrs))
    torch_t = rounds(lambda: torch.nn.functional.linear(x, w, bias), lambda: None)[2]
    out_lines.append(f"cpu  {a.label:<8} overhead median {us(d)} us, smallest {us(dmin)} us; op {us(op_t)} us, "
                     f"bare kernel call {us(bare_t)} us, torch F.linear {us(torch_t)} us")

    # ---- CUDA on the stand-in driver ----
    pool = standin_device.Pool(fake, 256 << 20)
    _torch_cuda.device = standin_device.StandIn(pool)
    fake.fake_cuda_set_params(-1)
    fake.fake_cuda_expect_stream(standin_device.STREAM)
    fake.fake_cuda_skip_ops(1)
    xd, wd, bd = (standin_device.on_device(t) for t in (x, w, bias))
    tt.stats(reset=True)
    tt.linear(xd, wd, bd, bg)
    k = kernel_of(bg)
    outd = _torch_cuda.device.empty((M, N), torch.float32, xd.device)
    dims = (M, N, K)
    ws_bytes = bg.lib.cuda_workspace_bytes(k, dims)
    ws = _torch_cuda.device.empty((max(ws_bytes, 1),), torch.uint8, xd.device)
    named = {"A": xd, "B": wd, "bias": bd}
    ptrs = [named[t.name].data_ptr() if not t.is_output else outd.data_ptr() for t in k.tensors]
    packed = [0] * len(k.tensors)
    keep = []
    for t, *layout in bg.lib.cuda_transposed_operands(k, dims):
        cp = _torch_cuda._transpose([xd, wd, bd][t], *layout)
        keep.append(cp)
        packed[t] = cp.data_ptr()
    native = BundleCall(ctypes.cast(bg.lib._launch_packed, ctypes.c_void_p).value, k.handle, list(dims),
                        len(k.tensors), True, 0)
    assert native(ws.data_ptr() if ws_bytes else 0, standin_device.STREAM, *ptrs, *packed) == 0
    pool.mark()
    launches, ops0 = fake.fake_cuda_launches(), fake.fake_cuda_stream_ops()

    # Each call's memory is handed out again to the next (pool.reset: the caching allocator gives a
    # freed block of the same size back to the next request on the stream), so neither side pays
    # for first touches of new pages; the bare side resets too.
    def op():
        pool.reset()
        tt.linear(xd, wd, bd, bg)

    wsp = ws.data_ptr() if ws_bytes else 0
    stream = standin_device.STREAM

    def bare():
        pool.reset()
        native(wsp, stream, *ptrs, *packed)

    d, dmin, op_t, bare_t = rounds(op, bare)
    per_call_ops = (fake.fake_cuda_stream_ops() - ops0) / (fake.fake_cuda_launches() - launches)

    def alloc():
        pool.reset()
        _torch_cuda.device.empty((M, N), torch.float32, xd.device)

    alloc_t = rounds(alloc, pool.reset)[0]
    c = (ctypes.c_int * 5)()
    fake.fake_cuda_counts(c)
    (row,) = [r for r in tt.stats() if r["ran"] == "tessera"]
    out_lines.append(f"cuda {a.label:<8} overhead median {us(d)} us, smallest {us(dmin)} us; op {us(op_t)} us, "
                     f"bare launch {us(bare_t)} us; stand-in alloc {us(alloc_t)} us each (workspace {ws_bytes} B); "
                     f"{per_call_ops:.1f} stream ops per launch, syncs {c[0]}, host copies {c[1]}, other stream {c[3]}")
print(f"load before {load_before}; after {load()}; linear {M}x{N}x{K} +bias f32, torch {torch.__version__}, "
      f"{a.reps} calls x {a.rounds} rounds")
for line in out_lines:
    print(line)
