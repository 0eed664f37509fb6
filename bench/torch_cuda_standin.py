"""The host side of tessera.torch's CUDA path per operator, without a GPU (issue 52). The GPT block
of examples/torch/gpt_block.py is bundled for sm_90 (untuned defaults: what runs does not matter
here), patched, and run on tensors in the memory of the stand-in CUDA driver (tests/bundle's
tessera_fake_cuda, loaded as libcuda.so.1) with its stream operations counted, not run
(fake_cuda_skip_ops: no kernel, memset or copy runs on the CPU), or with --capture while it captures (every stream operation
recorded, none executed; tessera.torch then keeps no weight copy or workspace, as in a real
capture), so the time measured is tessera.torch's and the C runtime's (Python, the custom
operator, the launch path, the driver calls) and the count of stream operations is what a real GPU
would run per call (each a driver call of a few microseconds and a device operation). Torch's own
CPU work on the stand-in tensors (the block's LayerNorms and residuals, and inside the calls the
weight transpositions and input staging copies a GPU runs as one async copy kernel each) is left
out of the time per call.
    python bench/torch_cuda_standin.py FAKE_LIBCUDA [--runtime-copies] [--capture] [--seconds 2]
--runtime-copies: launches without torch's transposed copies (the runtime's strided copies, one
driver operation per row or column of a transposed weight: the launch path before they were
given)."""
import argparse
import ctypes
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("fake", help="the stand-in CUDA driver (build/tests/bundle/libtessera_fake_cuda.so)")
p.add_argument("--runtime-copies", action="store_true")
p.add_argument("--capture", action="store_true", help="each forward under the stand-in's graph capture (recorded, not "
               "run; no weight copy or workspace is kept then), as this bench ran before launch plans")
p.add_argument("--seconds", type=float, default=2.0)
p.add_argument("--dim", type=int, default=256)
p.add_argument("--heads", type=int, default=4)
p.add_argument("--seq", type=int, default=128)
a = p.parse_args()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
import standin_device  # noqa: E402  (the stand-in device the tests drive the same path with)

fake = standin_device.load(a.fake)  # before any dlopen("libcuda.so.1")

import torch  # noqa: E402

import tessera  # noqa: E402
import tessera.torch as tt  # noqa: E402
from tessera import _torch_cuda  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "torch"))
import gpt_block  # noqa: E402

from standin_device import STREAM, StandIn, on_device  # noqa: E402

pool = standin_device.Pool(fake, 256 << 20)


torch.set_num_threads(1)
model = gpt_block.make(a.dim, a.heads)
x = torch.randn(1, a.seq, a.dim)
work = tempfile.mkdtemp(prefix="tessera_standin_")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # untuned defaults are named
    tessera.bundle(tt.record(model, x, keep_weights=False), targets=["sm_90"], out=os.path.join(work, "b"), missing="default")
b = tt.load(os.path.join(work, "b"))
if a.runtime_copies:
    b.lib.cuda_transposed_operands = lambda kernel, dims: []  # type: ignore[method-assign]

_torch_cuda.device = StandIn(pool)
fake.fake_cuda_set_params(-1)
fake.fake_cuda_expect_stream(STREAM)
with torch.no_grad():
    for prm in model.parameters():
        prm.data = on_device(prm.data)
    x = on_device(x)
tt.patch(model, b)

# Torch's CPU work inside tessera.torch's calls is timed apart.
torch_cpu = [0.0]
transpose = _torch_cuda._transpose
transposed = {}  # the stand-in's CPU transposition, once per weight: on a GPU it is an async copy kernel
copies = [0]


def timed_transpose(t, *args):
    t0 = time.perf_counter()
    copies[0] += 1
    key = (t.data_ptr(), args)
    r = transposed.get(key)
    if r is None:
        r = transposed[key] = transpose(t, *args)
    torch_cpu[0] += time.perf_counter() - t0
    return r


_torch_cuda._transpose = timed_transpose
inside = [0.0]
if hasattr(tt, "_Launch"):  # launch plans (tessera.torch's _Launch)
    stage = tt._stage

    def timed_stage(t):  # a staged input (not contiguous: the attention's q, k, v) is a copy kernel on a GPU
        t0 = time.perf_counter()
        r = stage(t)
        torch_cpu[0] += time.perf_counter() - t0
        return r

    tt._stage = timed_stage
    call = tt._Launch.__call__

    def timed_launch(self, *args):
        t0 = time.perf_counter()
        r = call(self, *args)
        inside[0] += time.perf_counter() - t0
        return r

    tt._Launch.__call__ = timed_launch
else:  # the operators before them (A/B runs against an older package)
    ready = tt._ready

    def timed_ready(t):
        t0 = time.perf_counter()
        r = ready(t)
        if r[1]:
            torch_cpu[0] += time.perf_counter() - t0
        return r

    tt._ready = timed_ready
    call = tt._call

    def timed_call(*args):
        t0 = time.perf_counter()
        r = call(*args)
        inside[0] += time.perf_counter() - t0
        return r

    tt._call = timed_call
if hasattr(fake, "fake_cuda_skip_ops"):
    fake.fake_cuda_skip_ops(1)  # stream operations counted, not run: the stand-in's own emulation costs nothing


def forward():
    pool.reset()
    if a.capture:
        fake.fake_cuda_capture(1)  # recorded, not run
    try:
        return model(x)
    finally:
        fake.fake_cuda_capture(0)


with torch.no_grad():
    forward()  # plans, module loads, kept weight copies and workspaces
    pool.mark()  # what the first forward kept is not handed out again
    tt.stats(reset=True)
    per_op, ops, fwd, n_fwd = [], [], [], 0
    end = time.perf_counter() + a.seconds
    copies[0] = 0
    while time.perf_counter() < end or n_fwd < 5:
        torch_cpu[0] = inside[0] = 0.0
        o0 = fake.fake_cuda_stream_ops()
        t0 = time.perf_counter()
        forward()
        fwd.append(time.perf_counter() - t0 - torch_cpu[0])
        ops.append(fake.fake_cuda_stream_ops() - o0)
        n_fwd += 1
        calls = sum(r["calls"] for r in tt.stats()) / n_fwd
        per_op.append((inside[0] - torch_cpu[0]) / calls)
rows = tt.stats()
on_bundle = all(r["ran"] == "tessera" for r in rows)
c = (ctypes.c_int * 5)()
fake.fake_cuda_counts(c)
print(f"load {open('/proc/loadavg').read().split()[:3]}; block dim {a.dim} heads {a.heads} seq {a.seq}; "
      f"{'the runtime transposes (strided driver copies)' if a.runtime_copies else 'torch transposes the weights'}")
print(f"tessera calls per forward {calls:.0f} (all on the bundle: {on_bundle}); driver stream operations per forward "
      f"{statistics.median(ops):.0f} ({statistics.median(ops) / calls:.1f} per call); syncs {c[0]}, host copies {c[1]}, "
      f"refused in capture {c[4]}")
staged = sum(r["staged"] for r in rows) / n_fwd
print(f"host time per call inside tessera.torch (torch's CPU copies excluded: {copies[0] / n_fwd:.0f} transpositions, "
      f"{staged:.0f} staged inputs per forward, a copy kernel each on a GPU): median "
      f"{statistics.median(per_op) * 1e6:.1f} us, fastest {min(per_op) * 1e6:.1f} us ({n_fwd} forwards)")
print(f"host time per forward (the block's own torch ops on the CPU included, the copies above not): median "
      f"{statistics.median(fwd) * 1e6:.0f} us, fastest {min(fwd) * 1e6:.0f} us")
for r in rows:
    print(f"  {r['op']:<10} {r['shape']:<28} {r['kernel']}")
shutil.rmtree(work, ignore_errors=True)
