"""Drives tessera.torch's CUDA path (operator -> kernel for the chip -> tessera_cuda_launch) on a
machine without a GPU, in its own process (test_cuda.py runs it): the stand-in CUDA driver
(tests/bundle/fake_cuda.c) is loaded under libcuda.so.1 before the bundle's runtime, one of its
allocations stands in for torch's caching allocator (CPU tensors over it), and a stand-in Device
says those tensors are on a CUDA device of a given chip with a given current stream. Prints "ok
NAME" per check; an assertion stops it with a traceback.
    python cuda_standin.py FAKE_LIBCUDA WORK_DIR"""
import ctypes
import os
import re
import sys

FAKE, WORK = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standin_device  # noqa: E402

fake = standin_device.load(FAKE)  # before any dlopen("libcuda.so.1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tessera  # noqa: E402
import tessera.torch as tt  # noqa: E402
from tessera import _torch_cuda  # noqa: E402
from standin_device import STREAM, on_device  # noqa: E402

M, K, N, H, HKV, S, D = 32, 64, 96, 4, 2, 16, 16
fake.fake_cuda_last_launch.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.POINTER(ctypes.c_uint)]
pool = standin_device.Pool(fake, 16 << 20)


def StandIn(chip="sm_90", stream=STREAM):
    return standin_device.StandIn(pool, chip, stream)


def counts():
    c = (ctypes.c_int * 5)()
    fake.fake_cuda_counts(c)
    return list(c)  # synchronisations, host copies, allocations, operations on another stream, refused in capture


def last_launch():
    vals, stream, dims = (ctypes.c_ulonglong * 64)(), ctypes.c_void_p(), (ctypes.c_uint * 7)()
    n = fake.fake_cuda_last_launch(vals, 64, ctypes.byref(stream), dims)
    return list(vals[:n]), stream.value or 0, tuple(dims[:3]), tuple(dims[3:6])


def entry(b, name):
    (e,) = [e for e in b.lib.entries() if e["name"] == name]
    return e


def launch_of(e):
    g = re.search(r"grid (\d+)x(\d+)x(\d+), block (\d+)x(\d+)x(\d+)", e["launch"])
    return tuple(map(int, g.groups()[:3])), tuple(map(int, g.groups()[3:]))


def spans(*ts):
    return [(t.data_ptr(), t.data_ptr() + t.numel() * t.element_size()) for t in ts]


def check(name, cond, detail=""):
    assert cond, f"{name}: {detail}"
    print("ok", name, flush=True)


kernels = [tessera.gemm(M, N, K, trans_b=True, epilogue="gelu(acc + bias)", shapes={"bias": (N,)}),
           tessera.gemm(M // 2, N, K, trans_b=True, epilogue="gelu(acc + bias)", shapes={"bias": (N,)}),
           tessera.elementwise("y = gelu(x + b)", {"x": (M, N), "b": (N,)}),
           tessera.attention(H, S, D, heads_kv=HKV, batch=1, causal=True)]
import warnings  # noqa: E402
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # untuned defaults are named
    tessera.bundle(kernels, targets=["sm_90"], out=os.path.join(WORK, "b"), missing="default")
b = tt.load(os.path.join(WORK, "b"))
fake.fake_cuda_set_params(-1)
fake.fake_cuda_expect_stream(STREAM)
torch.manual_seed(0)
cpu = {"x": torch.randn(M, K), "w": torch.randn(N, K), "bias": torch.randn(N), "h": torch.randn(M, N),
       "q": torch.randn(1, H, S, D), "k": torch.randn(1, HKV, S, D), "v": torch.randn(1, HKV, S, D)}

# A device of a chip the bundle has no code for: one error naming the chip and the bundle's code sets.
_torch_cuda.device = StandIn(chip="sm_80")
dev = {k: on_device(t) for k, t in cpu.items()}
try:
    tt.linear(dev["x"], dev["w"], dev["bias"], b, activation="gelu_tanh")
    raise AssertionError("chip mismatch: no error")
except tessera.UnsupportedError as e:
    check("chip_mismatch", "sm_80" in str(e) and "sm_90" in str(e) and str(e).count("\n") == 0, str(e))

_torch_cuda.device = StandIn()
ops = {
    "linear": (lambda: tt.linear(dev["x"], dev["w"], dev["bias"], b, activation="gelu_tanh"), ("x", "w", "bias")),
    "bias_gelu": (lambda: tt.bias_gelu(dev["h"], dev["bias"], b, approximate="tanh"), ("h", "bias")),
    "attention": (lambda: tt.scaled_dot_product_attention(dev["q"], dev["k"], dev["v"], b, is_causal=True), ("q", "k", "v")),
}
shapes = {"linear": (M, N), "bias_gelu": (M, N), "attention": (1, H, S, D)}
for op, (call, names) in ops.items():
    tt.stats(reset=True)
    before, launches, start = counts(), fake.fake_cuda_launches(), pool.next
    y = call()
    (row,) = tt.stats()
    params, stream, grid, block = last_launch()
    e = entry(b, row["kernel"])
    check(f"{op}_runs_the_gpu_kernel", row["ran"] == "tessera" and e["arch"] == "sm_90" and y.shape == shapes[op] and
          fake.fake_cuda_launches() == launches + 1, f"{row} {e['arch']} {y.shape}")
    check(f"{op}_stream_only", counts() == before and stream == STREAM, f"{counts()} vs {before}, stream {stream:#x}")
    check(f"{op}_grid_block", (grid, block) == launch_of(e), f"{grid} {block} vs {e['launch']}")
    # Every pointer the kernel gets lies in the call's tensors or in memory the allocator handed out
    # during the call (the workspace, the output): nothing of the runtime's own.
    mine = spans(*(dev[n] for n in names)) + [(start, pool.next)]
    check(f"{op}_pointers", bool(params) and all(any(lo <= p < hi for lo, hi in mine) for p in params), f"{params} {mine}")

# A weight the kernel reads transposed (nn.Linear's [N, K] as the GEMM's [K, N] B) is transposed by
# torch's copy, not by the runtime's strided driver copies (one per row or column: hundreds of driver
# operations per call for a model's weight); the primary context is retained once, not per call.
tt.stats(reset=True)
tt.linear(dev["x"], dev["w"], dev["bias"], b, activation="gelu_tanh")
ops, retains = fake.fake_cuda_stream_ops(), fake.fake_cuda_ctx_retains()
for _ in range(3):
    tt.linear(dev["x"], dev["w"], dev["bias"], b, activation="gelu_tanh")
per_call = (fake.fake_cuda_stream_ops() - ops) / 3
check("linear_few_driver_operations", per_call <= 3, f"{per_call} stream operations per call")
check("context_retained_once", fake.fake_cuda_ctx_retains() == retains, f"{fake.fake_cuda_ctx_retains() - retains} retains in 3 calls")
(lk,) = [kd for kd in b.lib.kernels if kd.name == tt.stats()[0]["kernel"]]
(tw,) = b.lib.cuda_transposed_operands(lk, (M, N, K))
check("linear_weight_read_transposed", tw[:4] == (1, 1, K, N), str(tw))
# What the kernel reads as B: the weight transposed (zeros past it), as the runtime's own copies make it
# (the weight as it is now: the stand-in's launches above rewrote all memory their pointers reach).
# A weight made now (dev["w"]'s transposed copy is kept from the calls above: the stand-in's launches
# rewrote dev["w"] behind torch's version counter, which a real kernel never does to its inputs).
w2 = on_device(cpu["w"])
want = torch.zeros(tw[4], tw[5])
want[:K, :N] = w2.t()
seen = []
Snap = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int)


@Snap
def snap(ctx, params, n):  # the stand-in driver's kernel: keeps what each parameter points at, B's size
    seen.append([bytes((ctypes.c_ubyte * want.numel() * 4).from_address(params[j])) for j in range(n)])


fake.fake_cuda_set_kernel(snap, None)
transposes = [0]
transpose = _torch_cuda._transpose


def counted_transpose(*args):
    transposes[0] += 1
    return transpose(*args)


_torch_cuda._transpose = counted_transpose
y_ops = fake.fake_cuda_stream_ops()
tt.linear(dev["x"], w2, dev["bias"], b, activation="gelu_tanh")
ours = fake.fake_cuda_stream_ops() - y_ops
ws = _torch_cuda.device.empty((b.lib.cuda_workspace_bytes(lk, (M, N, K)),), torch.uint8, dev["x"].device)
y_ops = fake.fake_cuda_stream_ops()
b.lib.cuda_launch(lk, (M, N, K), [dev["x"].data_ptr(), w2.data_ptr(), dev["bias"].data_ptr(), on_device(torch.empty(M, N)).data_ptr()],
                  ws.data_ptr(), STREAM, 0)
theirs = fake.fake_cuda_stream_ops() - y_ops
wb = want.numpy().tobytes()
check("linear_kernel_reads_the_transposed_weight", len(seen) == 2 and wb in seen[0] and wb in seen[1],
      f"{len(seen)} launches; B found: {[wb in s for s in seen]}")
# Negative control: the runtime's own copies (tessera_cuda_launch without the caller's) are counted.
check("runtime_copies_are_counted", theirs >= min(K, N) and ours < theirs, f"{theirs} vs {ours} stream operations")


def b_seen(w):
    """Whether the last launch's B was w transposed (zeros past it)."""
    t = torch.zeros(tw[4], tw[5])
    t[:K, :N] = w.t()
    return t.numpy().tobytes() in seen[-1]


# The transposed copy is kept for the same weight: a second call transposes nothing and reads it.
n0 = transposes[0]
tt.linear(dev["x"], w2, dev["bias"], b, activation="gelu_tanh")
check("transposed_weight_kept", transposes[0] == n0 == 1 and b_seen(w2), f"{transposes[0] - n0} transpositions, first {n0}")
# A write through torch (the version counter) is seen: the next call transposes the new weight.
with torch.no_grad():
    w2.add_(1.0)
tt.linear(dev["x"], w2, dev["bias"], b, activation="gelu_tanh")
check("transposed_weight_follows_writes", transposes[0] == n0 + 1 and b_seen(w2), f"{transposes[0] - n0} transpositions")
# Negative control: a write behind the version counter (through .data) is not seen, so the kept copy
# is what those checks read; tt.forget_copies() drops it.
old_w2 = w2.clone()
w2.data.mul_(2.0)
tt.linear(dev["x"], w2, dev["bias"], b, activation="gelu_tanh")
check("write_behind_the_version_is_not_seen", transposes[0] == n0 + 1 and b_seen(old_w2) and not b_seen(w2))
tt.forget_copies()
tt.linear(dev["x"], w2, dev["bias"], b, activation="gelu_tanh")
check("forget_copies", transposes[0] == n0 + 2 and b_seen(w2))
# Another weight of the same shape (another layer) gets its own copy, not w2's.
w3 = on_device(torch.randn(N, K))
tt.linear(dev["x"], w3, dev["bias"], b, activation="gelu_tanh")
check("each_weight_its_own_copy", transposes[0] == n0 + 3 and b_seen(w3) and not b_seen(w2))
# Under graph capture a copy is made (recorded: it runs at every replay) and neither kept nor read
# from the kept ones: a replay then sees writes to the weight made after the capture.
w4 = on_device(torch.randn(N, K))
fake.fake_cuda_capture(1)
tt.linear(dev["x"], w4, dev["bias"], b, activation="gelu_tanh")  # w4 new: transposed in the capture
tt.linear(dev["x"], w3, dev["bias"], b, activation="gelu_tanh")  # w3 has a kept copy: transposed anyway
fake.fake_cuda_capture(0)
check("capture_keeps_no_copy", transposes[0] == n0 + 5, f"{transposes[0] - n0}")
tt.linear(dev["x"], w4, dev["bias"], b, activation="gelu_tanh")  # eager again: w4 transposed and kept
tt.linear(dev["x"], w3, dev["bias"], b, activation="gelu_tanh")  # w3's kept copy, from before
check("copy_kept_after_capture", transposes[0] == n0 + 6 and b_seen(w3), f"{transposes[0] - n0}")
# A repeated call allocates its output only: the workspace and the weight's copy are kept.
start = pool.next
tt.linear(dev["x"], w3, dev["bias"], b, activation="gelu_tanh")
out_bytes = (M * N * 4 + 511) // 512 * 512
check("only_the_output_allocated", pool.next - start == out_bytes, f"{pool.next - start} bytes, the output {out_bytes}")
# Another shape of the same weight (another batch): its own plan and kernel, the weight's copy shared
# when its kernel reads it in the same layout, one transposition otherwise.
n1 = transposes[0]
x16 = on_device(torch.randn(M // 2, K))
tt.stats(reset=True)
y16 = tt.linear(x16, w3, dev["bias"], b, activation="gelu_tanh")
(row16,) = tt.stats()
(k16,) = [kd for kd in b.lib.kernels if kd.name == row16["kernel"]]
(t16,) = b.lib.cuda_transposed_operands(k16, (M // 2, N, K))
same = t16[1:] == tw[1:]
check("other_shape_own_plan", row16["ran"] == "tessera" and k16.name != lk.name and y16.shape == (M // 2, N), str(row16))
check("copy_shared_across_shapes", transposes[0] == n1 + (0 if same else 1), f"layouts {tw} {t16}: "
      f"{transposes[0] - n1} transpositions")
_torch_cuda._transpose = transpose
fake.fake_cuda_set_kernel(None, None)

# The operator hands the runtime the call's tensors in the order the kernel declares them (by name:
# the elementwise kernel takes b before x): its launch equals one made from that order directly.
tt.stats(reset=True)
y = tt.bias_gelu(dev["h"], dev["bias"], b, approximate="tanh")
params = last_launch()[0]
(k,) = [kd for kd in b.lib.kernels if kd.name == tt.stats()[0]["kernel"]]
by_name = {"x": dev["h"], "b": dev["bias"], "y": y}


def direct(names):
    b.lib.cuda_launch(k, (M, N), [names[t.name].data_ptr() for t in k.tensors], 0, STREAM, 0)
    return last_launch()[0]


check("bias_gelu_argument_order", [t.name for t in k.tensors] == ["b", "x", "y"] and params == direct(by_name),
      f"{params} {k.tensors}")
# Negative control: x and b exchanged give another launch, which that comparison tells apart.
check("swapped_arguments_are_seen", direct({"x": dev["bias"], "b": dev["h"], "y": y}) != params)

# Negative control: a launch on another stream than torch's current one is counted.
_torch_cuda.device = StandIn(stream=0)
before = counts()
tt.bias_gelu(dev["h"], dev["bias"], b, approximate="tanh")
check("wrong_stream_is_seen", counts()[3] > before[3], f"{counts()} vs {before}")
_torch_cuda.device = StandIn()

# Graph capture: the call records on the stream and runs only when replayed; the driver refused nothing.
before, launches = counts(), fake.fake_cuda_launches()
fake.fake_cuda_capture(1)
y = tt.linear(dev["x"], dev["w"], dev["bias"], b, activation="gelu_tanh")
fake.fake_cuda_capture(0)
check("capture_records", fake.fake_cuda_launches() == launches and counts() == before, f"{counts()} vs {before}")
check("capture_replays", fake.fake_cuda_replay() > 0 and fake.fake_cuda_launches() == launches + 1)
# Negative control: the host-memory path (tessera_cuda_run: allocations, copies, a sync) is refused during capture.
fake.fake_cuda_capture(1)
try:
    b.lib.run(k, (M, N), [t.data_ptr() for t in (cpu["bias"], cpu["h"], torch.empty(M, N))])
    refused = False
except tessera.TesseraError:
    refused = True
fake.fake_cuda_capture(0)
check("host_path_refused_in_capture", refused and counts()[4] > before[4])

# A shape the bundle has no kernel for: torch's operator, counted, no launch.
tt.stats(reset=True)
launches = fake.fake_cuda_launches()
h2 = on_device(torch.randn(M + 1, N))
b2 = on_device(torch.randn(N))  # not dev["bias"]: the stand-in's launches above rewrote it (NaNs possible)
y = tt.bias_gelu(h2, b2, b, approximate="tanh")
(row,) = tt.stats()
check("fallback", row["ran"] == "torch" and "sm_90" in row["how"] and fake.fake_cuda_launches() == launches and
      torch.allclose(y, F.gelu(h2 + b2, approximate="tanh")), str(row))
print("all ok")
