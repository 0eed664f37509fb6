"""Owns Tessera's tuned kernels inside PyTorch models: a bundle's kernels as torch custom operators
(``tessera::linear``, ``tessera::bias_gelu``, ``tessera::attention``, registered through
``torch.library`` with fake implementations, so ``torch.compile`` traces them with fullgraph),
drop-in modules, ``patch`` for a whole model, and ``stats`` saying what ran where.

    import tessera.torch as tt
    b = tt.load("bundle")                 # a folder written by `tessera bundle` / tessera.bundle
    tt.patch(model, b)                    # nn.Linear (+ a following GELU) and F.scaled_dot_product_attention
    y = model(x)                          # Tessera's kernels where the bundle has them, torch's elsewhere
    print(tt.stats())

CPU tensors run the bundle's host kernels in the tensors' own memory (no copy unless a tensor is not
contiguous or not 64-byte aligned: then it is staged and ``stats`` counts it), on the thread count
the kernel was tuned and bundled for. A Linear's weight ([N, K], the GEMM's B transposed) is read
as given by the GEMM with B transposed; with ``keep_weights=True`` (``patch``, ``Linear``,
``record``, ``tune_model``) the NN GEMM reads a kept [K, N] copy instead (``_kept_copy``: made once
per weight, remade when the weight's version, memory, shape, dtype or device changes), which
``record`` and ``tune_model`` then put in host bundles; a bundle with only the GEMM reading the
weight as given runs that one. Not the default: on a Sapphire Rapids core it paid for fc2's
K = 1024 and lost for qkv's K = 256 (docs/journal.md, PyTorch).
CUDA tensors run the bundle's GPU kernels for the device's chip, enqueued by the C runtime on
torch's current stream (``_torch_cuda``: no synchronisation, no host copy, outputs and workspace
from torch's caching allocator; capturable in a CUDA graph); a bundle with GPU code for other chips
only is an error naming both. A shape, dtype or device the
bundle has no kernel for runs torch's own operator, logged once per shape on the ``tessera.torch``
logger. Inference only: a call
that needs gradients runs torch's operator. Needs torch (``pip install tessera[torch]``).

A call's first run makes its launch plan (``_Launch``, per bundle, op, shapes, dtypes, flags and
device): the kernel, the inputs' order, the output's shape and the kernel bound to the runtime's
entry point (``tessera._tessera.BundleCall``). Later calls of that key check their inputs' layout,
allocate the output and make one native call with their tensors' pointers. On CUDA tensors the
plans share one kept workspace per device and stream and one transposed copy per weight, kept while
the weight's version counter is unchanged (``_torch_cuda.Launch``; ``forget_copies``, which drops
the CPU's kept copies too, after a write through ``tensor.data``, which the counter does not see).
"""
from __future__ import annotations

import contextlib
import ctypes
import itertools
import logging
import os
import threading
import weakref
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch  # type: ignore[import-not-found, unused-ignore]
import torch.nn.functional as F  # type: ignore[import-not-found, unused-ignore]
from torch import nn  # type: ignore[import-not-found, unused-ignore]
from torch.overrides import TorchFunctionMode  # type: ignore[import-not-found, unused-ignore]

from . import _torch_cuda as _cuda, attention as _attention, elementwise as _elementwise, gemm as _gemm, parse as _parse, Kernel
from .bundle_lib import BundleLibrary, KernelDesc
from .errors import InvalidArgumentError

# A bundle's threaded host kernels run on torch's own OpenMP team (load(..., openmp="gomp"), the
# default). A bundle loaded on LLVM's libomp (openmp="libomp") makes two OpenMP runtimes share the
# cores: libomp's workers spin for 200 ms after each parallel kernel by default (KMP_BLOCKTIME),
# holding the cores torch's next op (a LayerNorm, a residual add) needs: the GPT block of
# bench/torch_model_bench.py on two Sapphire Rapids cores took a median 8.4 ms with Tessera's
# kernels against eager torch's 1.6 ms; with KMP_BLOCKTIME=0 2.3 ms (docs/journal.md, PyTorch). So
# such a load sets KMP_BLOCKTIME=0 unless the user set it (libomp reads it when it starts: the
# process's first parallel region). Tuning runs without that setting (_tuning_env): a kernel on
# torch's team finds it awake between ops, as the tuner's back-to-back calls find libomp's
# spinning workers; with them asleep every two-thread candidate paid a wake-up (~350 us here)
# and the tune kept one thread for every kernel of the block.
_blocktime_ours = [False]


def _libomp_workers_sleep() -> None:
    if "KMP_BLOCKTIME" not in os.environ:
        os.environ["KMP_BLOCKTIME"] = "0"
        _blocktime_ours[0] = True


@contextlib.contextmanager
def _tuning_env() -> Iterator[None]:
    ours = _blocktime_ours[0] and os.environ.get("KMP_BLOCKTIME") == "0"
    if ours:
        del os.environ["KMP_BLOCKTIME"]
    try:
        yield
    finally:
        if ours:
            os.environ["KMP_BLOCKTIME"] = "0"

_log = logging.getLogger("tessera.torch")
_DTYPES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_ACTIVATIONS = {"": "{}", "gelu": "gelu_erf({})", "gelu_tanh": "gelu({})"}
_ALIGN = 64
_GPU_ALIGN = 16  # vector loads and TMA
_lock = threading.Lock()
_ids = itertools.count(1)
_registry: Dict[int, "_Resolver"] = {}
_stats: Dict[tuple, Dict[str, Any]] = {}


class _Request(NamedTuple):
    """A kernel one call needs: family, dtype, the key shape, the Tessera kernel at any size of its
    range dimension (None: the call's own) and what the log names."""
    op: str
    family: str
    dtype: str
    dims: Tuple[int, ...]
    build: Callable[[Optional[int]], Kernel]
    what: str
    names: Tuple[str, ...] = ()  # the tensor names of the call's inputs, in the order it passes them
    variant: str = ""  # tells apart requests of one op and shape that differ in layout ("kept": the weight's kept copy)
    alt: Optional["_Request"] = None  # asked of a bundle that has no kernel for this one (an older bundle's layout)


class _Plan(NamedTuple):
    kernel: Optional[KernelDesc]
    how: str  # "exact", "nearest", "default", "range NAME bucket ...", or why torch runs it
    order: Tuple[int, ...] = ()  # the call's input for each of the kernel's inputs
    kept: int = -1  # the call's input the kernel reads as its kept copy (``_kept_copy``), or -1


def _row(res: "_Resolver", req: _Request, where: str, plan: _Plan) -> Dict[str, Any]:
    """The stats row of (resolver, op, shape, dtype, where, kernel), made if new (under _lock)."""
    key = (res.id, req.op, req.what, req.dtype, where, plan.kernel.name if plan.kernel else "")
    s = _stats.get(key)
    if s is None:
        s = _stats[key] = {"op": req.op, "shape": req.what, "dtype": req.dtype, "ran": where,
                           "kernel": plan.kernel.name if plan.kernel else "", "how": plan.how, "calls": 0, "staged": 0,
                           "weight": "kept" if plan.kept >= 0 else ""}
    return s


_stats_epoch = [0]  # bumped by stats(reset=True): a launch plan's kept row is then found again


def forget_copies() -> None:
    """Drops the weight copies tessera.torch keeps: the CPU Linears' kept [K, N] copies
    (``_kept_copy``) and the CUDA launch plans' transposed copies and workspaces. Needed only after
    writing a weight in a way its version counter does not see (through ``tensor.data``), or to
    free their memory; the next call makes its copy again."""
    with _lock:
        _kept.clear()
    _cuda.forget_copies()


def stats(reset: bool = False) -> List[Dict[str, Any]]:
    """What ran where: one row per (op, shape, dtype, where, kernel) with ``ran`` ("tessera" or
    "torch"), the kernel, ``how`` (its config's source, its range bucket, or why torch ran it),
    ``calls``, ``staged`` (inputs copied because they were not contiguous or not 64-byte aligned)
    and ``weight`` ("kept": the kernel read the weight's kept [K, N] copy; else empty)."""
    with _lock:
        rows = [dict(v) for v in _stats.values()]
        if reset:
            _stats.clear()
            _stats_epoch[0] += 1
    return rows


class _Resolver:
    """What a call asks a bundle (or a shape recorder) for."""

    def __init__(self) -> None:
        self.id = next(_ids)
        self._plans: Dict[tuple, _Plan] = {}
        _registry[self.id] = self

    def plan(self, req: _Request, device: torch.device) -> _Plan:
        key = (req.op, req.family, req.dtype, req.dims, req.what, req.variant, str(device))
        p = self._plans.get(key)
        if p is None:
            p = self._resolve(req, device)
            if p.kernel is None and req.alt is not None and self._logs():  # a recorder records req only
                q = self._resolve(req.alt, device)
                if q.kernel is not None:
                    p = q._replace(how=f"{q.how}; weight read as given: the bundle has no {req.variant} kernel")
            elif p.kernel is not None and req.variant == "kept":
                p = p._replace(kept=req.names.index("B"))
            self._plans[key] = p
            if p.kernel is None and self._logs():
                _log.warning("tessera.torch: no %s kernel for %s %s in %s: %s; running torch's operator", req.op, req.what,
                             req.dtype, self, p.how)
        return p

    def _logs(self) -> bool:
        return True

    def _resolve(self, req: _Request, device: torch.device) -> _Plan:
        raise NotImplementedError


_VENDORS = ("host", "nvidia")


class Bundle(_Resolver):
    """A bundle folder loaded for torch (``load``). Kernels are matched by what they compute (the
    workload hash of the kernel a call needs against the bundle's), then by shape: a kernel compiled
    for the call's shape, else a shape range (``tessera bundle --dispatch``) holding it."""

    def __init__(self, folder: str, cc: Optional[str] = None, openmp: str = "gomp"):
        if openmp == "libomp":
            _libomp_workers_sleep()
        self.lib = BundleLibrary(folder, cc, openmp)
        self.folder = self.lib.folder
        self._fixed: Dict[Tuple[str, str], List[str]] = {}  # (vendor, workload) -> kernel names
        for e in self.lib.entries():
            if e.get("vendor") in _VENDORS and "runtime_m" not in e and e.get("workload"):
                self._fixed.setdefault((e["vendor"], e["workload"]), []).append(e["name"])
        # Each range with its vendor and the workload of its kernel at the range's top size (its kernel_ir).
        self._ranges: List[Tuple[str, Dict[str, Any], str]] = []
        for r in self.lib.ranges():
            for vendor in _VENDORS:
                ents = [e for e in self.lib.entries() if e.get("vendor") == vendor and "runtime_m" in e
                        and e["name"].startswith(r["name"] + "_range") and e.get("kernel_ir")]
                if ents:
                    self._ranges.append((vendor, r, _parse(ents[0]["kernel_ir"]).workload))
        super().__init__()

    def __repr__(self) -> str:
        return f"<tessera.torch.Bundle {self.folder}: {len(self.lib.kernels)} kernels, {len(self._ranges)} ranges>"

    def _resolve(self, req: _Request, device: torch.device) -> _Plan:
        vendor, chip = "host", "host"
        if _cuda.device.is_gpu(device):
            vendor, chip = "nvidia", _cuda.check_chip(self.lib, device) or ""
            if not chip:
                return _Plan(None, f"{device} tensors: the bundle has host code only")
        elif device.type != "cpu":
            return _Plan(None, f"{device.type} tensors: tessera.torch runs CPU and CUDA tensors")

        def find(name: str) -> Optional[KernelDesc]:
            if vendor == "host":
                return self.lib.find(name, req.dims, req.dtype, "host")
            return _cuda.find(self.lib, name, req.dims, req.dtype, chip)
        try:
            want = req.build(None)
        except Exception as e:  # a shape Tessera's builders refuse (e.g. causal with seq_q > seq_kv)
            return _Plan(None, f"not a Tessera {req.family} kernel: {e}")
        wl = want.workload
        # Kernels of one workload take their inputs in one order (the builder's): the call's by name.
        order = tuple(req.names.index(t.name) for t in want.inputs)
        for name in self._fixed.get((vendor, wl), []):
            k = find(name)
            if k is not None:
                return _Plan(k, k.source, order)
        why = ""
        for rv, r, rwl in self._ranges:
            if rv == vendor and r.get("lo", 0) > 0 and _range_workload(req, r) == rwl:
                k = find(r["name"])
                if k is not None:
                    return _Plan(k, f"range {r['name']} {r['dim']} {r['lo']}..{r['hi']}", order)
                why = self.lib.last_message()
        if not why:
            have = sorted({k.shape for k in self.lib.kernels if k.family == req.family and k.dtype == req.dtype
                           and _cuda.is_gpu_kernel(k) == (vendor != "host")})
            why = (f"the bundle has no kernel computing it on {chip} (its {req.family} {req.dtype} shapes: "
                   f"{', '.join(have) if have else 'none'})")
        return _Plan(None, why)


_range_cache: Dict[tuple, str] = {}


def _range_workload(req: _Request, r: Dict[str, Any]) -> str:
    key = (req.op, req.what, req.dtype, req.variant, r["hi"])
    if key not in _range_cache:
        try:
            _range_cache[key] = req.build(int(r["hi"])).workload
        except Exception:
            _range_cache[key] = ""
    return _range_cache[key]


def load(folder: str, cc: Optional[str] = None, openmp: str = "gomp") -> Bundle:
    """Loads a bundle folder: links it into a shared library (once, with ``cc``) and indexes its
    host kernels and shape ranges. Threaded host kernels run on torch's own OpenMP threads
    (``openmp="gomp"``: the bundle's tessera_omp_gomp.c in place of LLVM's libomp, so the two do
    not fight over the cores between torch's ops and Tessera's); ``openmp="libomp"`` links libomp."""
    return Bundle(folder, cc, openmp)


# ---- the operators ----

def _empty(shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A new contiguous tensor: torch's allocator for the device (the CUDA path's, for a GPU)."""
    if _cuda.device.is_gpu(device):
        return _cuda.device.empty(shape, dtype, device)
    return torch.empty(tuple(shape), dtype=dtype, device=device)


def _stage(t: torch.Tensor) -> torch.Tensor:
    """A contiguous, aligned copy of ``t`` (an input a kernel cannot read in place)."""
    return _empty(t.shape, t.dtype, t.device).copy_(t)


class _Launch:
    """One call's launch plan, made on its first call and kept per (bundle, op, shapes, dtypes, flags,
    device) in ``_calls``: the plan and request, the kernel's inputs in the call's order, the
    output's shape, the stats row, and the kernel bound to the runtime's entry point at the call's
    shape (``BundleLibrary.bound``; a CUDA kernel: ``_torch_cuda.Launch``). A later call with the
    same key checks its inputs' layout, extracts their pointers, allocates the output and makes one
    native call: no request, plan or dictionary of the bundle is consulted. Pointers are never
    kept: every call passes its own tensors'."""

    __slots__ = ("bundle", "res", "req", "plan", "order", "out_shape", "dtype", "device", "fallback", "gpu", "align",
                 "native", "cuda", "row", "epoch", "logs", "kept")

    def __init__(self, bundle: int, res: "_Resolver", req: _Request, plan: _Plan, out_shape: Tuple[int, ...],
                 dtype: torch.dtype, device: torch.device, fallback: Callable[..., torch.Tensor]):
        self.bundle, self.res, self.req, self.plan = bundle, res, req, plan
        self.order, self.out_shape, self.dtype, self.device, self.fallback = plan.order, out_shape, dtype, device, fallback
        self.kept = plan.kept
        self.gpu = _cuda.device.is_gpu(device)
        self.align = _GPU_ALIGN if self.gpu else _ALIGN
        self.native: Any = None
        self.cuda: Optional[_cuda.Launch] = None
        self.row: Optional[Dict[str, Any]] = None
        self.epoch = -1
        self.logs = res._logs()
        k = plan.kernel
        if k is not None:
            lib = res.lib  # type: ignore[attr-defined]  # only a Bundle plans kernels
            if _cuda.is_gpu_kernel(k):
                self.cuda = _cuda.Launch(lib, k, req.dims, device)
            else:
                self.native = lib.bound(k, req.dims)
                if self.native is None:  # no extension: the ctypes call
                    cdims = (ctypes.c_int64 * len(req.dims))(*req.dims)
                    self.native = lambda *ptrs: lib.run(k, cdims, ptrs) or 0

    def _count(self, staged: int) -> None:
        if not self.logs:
            return
        with _lock:
            if self.epoch != _stats_epoch[0] or self.row is None:
                self.row = _row(self.res, self.req, "tessera" if self.plan.kernel is not None else "torch", self.plan)
                self.epoch = _stats_epoch[0]
            self.row["calls"] += 1
            self.row["staged"] += staged

    def __call__(self, *ts: Optional[torch.Tensor]) -> torch.Tensor:
        """The op's tensors in its own order (None for an absent bias)."""
        if _registry.get(self.bundle) is not self.res:
            raise InvalidArgumentError(f"invalid-argument: no tessera.torch bundle {self.bundle} in this process")
        if self.plan.kernel is None:
            self._count(0)
            return self.fallback(*ts)
        staged = 0
        ready: List[torch.Tensor] = []
        for i in self.order:
            t = ts[i] if i != self.kept else _kept_copy(ts[i])  # type: ignore[arg-type]
            assert t is not None
            if not t.is_contiguous() or t.data_ptr() % self.align:
                t = _stage(t)
                staged += 1
            ready.append(t)
        if self.gpu:
            o = _cuda.device.empty(self.out_shape, self.dtype, self.device)
        else:
            o = torch.empty(self.out_shape, dtype=self.dtype, device=self.device)
        ready.append(o)
        if self.cuda is not None:
            self.cuda(ready)
        else:
            st = self.native(*[t.data_ptr() for t in ready])
            if st:
                self.res.lib.check(self.plan.kernel, st)  # type: ignore[attr-defined]
        self._count(staged)
        return o


_calls: Dict[tuple, _Launch] = {}  # (bundle, op, shapes, dtypes, flags, device) -> its launch plan

# id(weight) -> (weakref to it, its version, data_ptr, shape, dtype, device, its kept [K, N] copy)
_kept: Dict[int, Tuple[Any, int, int, torch.Size, torch.dtype, torch.device, torch.Tensor]] = {}


def _kept_copy(w: torch.Tensor) -> torch.Tensor:
    """``w.t()`` as a contiguous tensor (an nn.Linear weight [N, K] as the [K, N] B an NN GEMM reads
    row by row), made on the first call and kept for the next while ``w`` is the same tensor object
    with the same version counter (bumped by every in-place write through torch: ``copy_``,
    ``load_state_dict``, an optimiser's step), memory, shape, dtype and device; dropped with ``w``
    and by ``forget_copies``. A tensor without a version counter (an inference tensor) gets a new
    copy on every call, never a kept one. Why: the host GEMM reading the weight as given (B
    transposed, NT) packs it on every call; the NN GEMM on the kept copy reads it in place."""
    key = id(w)
    hit = _kept.get(key)
    ver = _cuda._version(w)
    if hit is not None and ver is not None and hit[1] == ver and hit[0]() is w and hit[2] == w.data_ptr() and \
            hit[3] == w.shape and hit[4] == w.dtype and hit[5] == w.device:
        return hit[6]
    with torch.no_grad():
        c = _empty((w.shape[1], w.shape[0]), w.dtype, w.device).copy_(w.t())
    if ver is None:
        return c
    def drop(_: Any, k: int = key) -> None:  # w was collected: its copy goes with it
        _kept.pop(k, None)
    try:
        ref = weakref.ref(w, drop)
    except TypeError:
        return c
    _kept[key] = (ref, ver, w.data_ptr(), w.shape, w.dtype, w.device, c)
    return c


def _launch(bundle: int, key: tuple, describe: Callable[[], Tuple[Optional[_Request], str]], device: torch.device,
            out_shape: Tuple[int, ...], dtype: torch.dtype, fallback: Callable[..., torch.Tensor]) -> _Launch:
    """The launch plan of ``key``, made on its first call (``describe`` says what the call needs)."""
    res = _registry.get(bundle)
    if res is None:
        raise InvalidArgumentError(f"invalid-argument: no tessera.torch bundle {bundle} in this process")
    req, why = describe()
    if req is not None:
        plan = res.plan(req, device)
    else:
        plan = _Plan(None, why)
        if res._logs():
            _log.warning("tessera.torch: no %s kernel for %s in %s; running torch's operator", key[1], why, res)
        req = _Request(key[1], "", "", (), lambda m: None, why)  # type: ignore[arg-type,return-value]
    run = _calls[key] = _Launch(bundle, res, req, plan, tuple(out_shape), dtype, device, fallback)
    return run


def _shape(*ts: torch.Tensor) -> str:
    return " ".join("x".join(str(d) for d in t.shape) for t in ts)


def _linear_impl(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], activation: str,
                 bundle: int, keep: bool = False) -> torch.Tensor:
    keep = keep and x.device.type == "cpu"  # the host GEMMs only: CUDA keeps its own transposed copy (_torch_cuda)
    key = (bundle, "linear", x.shape, weight.shape, None if bias is None else bias.shape, activation, x.dtype, weight.dtype,
           None if bias is None else bias.dtype, x.device, keep)
    run = _calls.get(key)
    if run is None:  # the first call of this key: what it needs (nothing of this runs again)
        n = weight.shape[0]

        def describe() -> Tuple[Optional[_Request], str]:
            kdim = x.shape[-1] if x.dim() else 0
            m = x.numel() // kdim if kdim else 0
            dt = _DTYPES.get(x.dtype)
            what = _shape(x, weight) + (" +bias" if bias is not None else "") + (f" {activation}" if activation else "")
            if (dt is None or weight.dtype != x.dtype or (bias is not None and bias.dtype != x.dtype) or weight.dim() != 2
                    or m == 0 or activation not in _ACTIVATIONS):
                return None, f"{what}: dtype {x.dtype} not f32/f16/bf16, mixed dtypes or an empty shape"
            epi = _ACTIVATIONS[activation].format("acc + bias" if bias is not None else "acc")
            shapes: Optional[Dict[str, Sequence[int]]] = {"bias": (n,)} if bias is not None else None

            def builder(trans_b: bool) -> Callable[[Optional[int]], Kernel]:
                return lambda mm: _gemm(mm or m, n, kdim, dt, trans_b=trans_b, epilogue=None if epi == "acc" else epi,
                                        shapes=shapes)
            names = ("A", "B", "bias")[:3 if bias is not None else 2]
            # The weight as given is [N, K]: the GEMM's B transposed (NT). Kept, its [K, N] copy is read as B (NN),
            # and a bundle without that kernel (recorded before, or with keep_weights=False) runs the NT one.
            as_given = _Request("linear", "gemm", dt, (m, n, kdim), builder(True), what, names)
            if not keep:
                return as_given, ""
            return _Request("linear", "gemm", dt, (m, n, kdim), builder(False), what, names, "kept", as_given), ""

        run = _launch(bundle, key, describe, x.device, (*x.shape[:-1], n), x.dtype,
                      lambda x, w, b: _torch_linear(x, w, b, activation))
    # x is read as its [m, k] rows: a contiguous x is that in place, another is staged contiguous.
    return run(x, weight, bias)


def _bias_gelu_impl(x: torch.Tensor, bias: torch.Tensor, approximate: str, bundle: int) -> torch.Tensor:
    key = (bundle, "bias_gelu", x.shape, bias.shape, approximate, x.dtype, bias.dtype, x.device)
    run = _calls.get(key)
    if run is None:  # the first call of this key: what it needs (nothing of this runs again)
        def describe() -> Tuple[Optional[_Request], str]:
            dt = _DTYPES.get(x.dtype)
            n = x.shape[-1] if x.dim() else 0
            rows = x.numel() // n if n else 0
            what = _shape(x, bias) + f" {approximate}"
            if dt is None or bias.dtype != x.dtype or bias.dim() != 1 or bias.shape[0] != n or rows == 0 or \
                    approximate not in ("none", "tanh"):
                return None, f"{what}: unsupported dtype or shapes"
            expr = "y = gelu(x + b)" if approximate == "tanh" else "y = gelu_erf(x + b)"

            def build(mm: Optional[int]) -> Kernel:
                return _elementwise(expr, {"x": (mm or rows, n), "b": (n,)}, dtype=dt)
            return _Request("bias_gelu", "elementwise", dt, (rows, n), build, what, ("x", "b")), ""

        run = _launch(bundle, key, describe, x.device, x.shape, x.dtype,
                      lambda x, bias: F.gelu(x + bias, approximate=approximate))
    return run(x, bias)


def _attention_impl(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, scale: Optional[float],
                    bundle: int) -> torch.Tensor:
    key = (bundle, "attention", q.shape, k.shape, v.shape, is_causal, scale, q.dtype, k.dtype, v.dtype, q.device)
    run = _calls.get(key)
    if run is None:  # the first call of this key: what it needs (nothing of this runs again)
        def describe() -> Tuple[Optional[_Request], str]:
            dt = _DTYPES.get(q.dtype)
            what = _shape(q, k) + (" causal" if is_causal else "") + (f" scale {scale!r}" if scale is not None else "")
            if not (dt is not None and q.dim() == 4 and k.dim() == 4 and v.dim() == 4 and k.dtype == q.dtype and v.dtype == q.dtype):
                return None, f"{what}: not [B,H,S,D] f32/f16/bf16 tensors of one dtype"
            b, h, sq, d = q.shape
            hkv, skv = k.shape[1], k.shape[2]
            if k.shape[0] != b or v.shape != k.shape or k.shape[3] != d or hkv == 0 or h % hkv:
                return None, f"{what}: K and V do not fit Q (batch, head_dim, or heads not a multiple of K's)"
            if is_causal and sq != skv:
                # torch's causal mask is aligned top-left, Tessera's bottom-right: they agree only here.
                return None, f"{what}: causal with seq_q != seq_kv (torch aligns the mask top-left)"

            def build(mm: Optional[int]) -> Kernel:
                return _attention(h, mm or sq, d, heads_kv=hkv, seq_kv=mm or skv, batch=b, causal=is_causal, scale=scale,
                                  dtype=dt)
            return _Request("attention", "attention", dt, (b, h, hkv, sq, skv, d), build, what, ("Q", "K", "V")), ""

        def fallback(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=k.shape[-3] != q.shape[-3])

        run = _launch(bundle, key, describe, q.device, q.shape, q.dtype, fallback)
    return run(q, k, v)


@torch.library.custom_op("tessera::linear", mutates_args=())
def _linear_op(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], activation: str,
               bundle: int, keep: bool = False) -> torch.Tensor:
    return _linear_impl(x, weight, bias, activation, bundle, keep)


@_linear_op.register_fake
def _(x, weight, bias, activation, bundle, keep=False):
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


@torch.library.custom_op("tessera::bias_gelu", mutates_args=())
def _bias_gelu_op(x: torch.Tensor, bias: torch.Tensor, approximate: str, bundle: int) -> torch.Tensor:
    return _bias_gelu_impl(x, bias, approximate, bundle)


@_bias_gelu_op.register_fake
def _(x, bias, approximate, bundle):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("tessera::attention", mutates_args=())
def _attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, scale: Optional[float],
                  bundle: int) -> torch.Tensor:
    return _attention_impl(q, k, v, is_causal, scale, bundle)


@_attention_op.register_fake
def _(q, k, v, is_causal, scale, bundle):
    return torch.empty_like(q, memory_format=torch.contiguous_format)


_PLAIN = (torch.Tensor, nn.Parameter)  # a Parameter (a patched Linear's weight) is a plain tensor to torch's dispatch


def _direct(*ts: Optional[torch.Tensor]) -> bool:
    """Eager calls on plain tensors skip the dispatcher (its Python custom-op path costs tens of
    microseconds); under torch.compile, fake tensors or any dispatch mode the operator is called."""
    if torch.compiler.is_compiling() or torch._C._len_torch_dispatch_stack():
        return False
    for t in ts:  # a loop, not all(generator): this runs on every call
        if t is not None and type(t) not in _PLAIN:
            return False
    return True


_modes = threading.local()  # how many _AttentionModes this thread is inside


def _quiet(fn: Callable[..., torch.Tensor], *args: Any) -> torch.Tensor:
    """``fn(*args)`` (a direct call's implementation) with torch functions undispatched when the
    only function modes are a patched forward's _AttentionMode: otherwise every tensor method the
    call's host path uses (reshape, data_ptr, empty, ...) goes through that mode's Python handler,
    about a hundred and fifty per forward of a GPT block. Another mode still sees them."""
    n = torch._C._len_torch_function_stack()
    if n and n == getattr(_modes, "n", 0):
        with torch._C.DisableTorchFunction():
            return fn(*args)
    return fn(*args)


def _grad(*ts: Optional[torch.Tensor]) -> bool:
    if not torch.is_grad_enabled():
        return False
    for t in ts:
        if t is not None and t.requires_grad:
            return True
    return False


def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor], bundle: _Resolver,
           activation: str = "", keep_weight: bool = False) -> torch.Tensor:
    """``F.linear`` (then GELU: ``activation`` "gelu" erf, "gelu_tanh") on the bundle's GEMM. On CPU
    tensors with ``keep_weight`` the GEMM reads a kept [K, N] copy of ``weight`` (``_kept_copy``:
    made once per weight, remade when it changes) when the bundle has that kernel; else it reads
    ``weight`` as given (the transposed-B kernel)."""
    if _grad(x, weight, bias):
        return _torch_linear(x, weight, bias, activation)
    if _direct(x, weight, bias):
        return _quiet(_linear_impl, x, weight, bias, activation, bundle.id, keep_weight)
    return torch.ops.tessera.linear(x, weight, bias, activation, bundle.id, keep_weight)


def _torch_linear(x, weight, bias, activation):
    y = F.linear(x, weight, bias)
    return F.gelu(y, approximate="tanh" if activation == "gelu_tanh" else "none") if activation else y


def bias_gelu(x: torch.Tensor, bias: torch.Tensor, bundle: _Resolver, approximate: str = "none") -> torch.Tensor:
    """``F.gelu(x + bias)`` on the bundle's fused elementwise kernel."""
    if _grad(x, bias):
        return F.gelu(x + bias, approximate=approximate)
    if _direct(x, bias):
        return _quiet(_bias_gelu_impl, x, bias, approximate, bundle.id)
    return torch.ops.tessera.bias_gelu(x, bias, approximate, bundle.id)


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bundle: _Resolver,
                                 is_causal: bool = False, scale: Optional[float] = None) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` (no mask, no dropout; grouped-query when K/V have fewer
    heads) on the bundle's attention kernel."""
    if _grad(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=k.shape[-3] != q.shape[-3])
    if _direct(q, k, v):
        return _quiet(_attention_impl, q, k, v, is_causal, scale, bundle.id)
    return torch.ops.tessera.attention(q, k, v, is_causal, scale, bundle.id)


# ---- modules and patching ----

class Linear(nn.Module):
    """``nn.Linear`` (optionally followed by GELU, fused into the GEMM's epilogue) on the bundle's
    GEMM; shares the original module's parameters. ``keep_weights``: on CPU tensors the GEMM reads
    a kept [K, N] copy of the weight (one more copy of it in memory; see ``linear``)."""

    def __init__(self, linear: nn.Linear, bundle: _Resolver, activation: str = "", keep_weights: bool = False):
        super().__init__()
        if activation not in _ACTIVATIONS:
            raise InvalidArgumentError(f"invalid-argument: activation must be one of {sorted(_ACTIVATIONS)}, not '{activation}'")
        self.weight = linear.weight
        self.bias = linear.bias
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.activation = activation
        self.bundle = bundle
        self.keep_weights = keep_weights

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.weight, self.bias, self.bundle, self.activation, self.keep_weights)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}, "
                f"activation='{self.activation}', bundle={self.bundle.id}, keep_weights={self.keep_weights}")


class BiasGELU(nn.Module):
    """``gelu(x + bias)`` as one fused elementwise kernel of the bundle."""

    def __init__(self, bundle: _Resolver, approximate: str = "none"):
        super().__init__()
        self.bundle, self.approximate = bundle, approximate

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return bias_gelu(x, bias, self.bundle, self.approximate)


class ScaledDotProductAttention(nn.Module):
    """``F.scaled_dot_product_attention(q, k, v, is_causal=..., scale=...)`` on the bundle's attention."""

    def __init__(self, bundle: _Resolver):
        super().__init__()
        self.bundle = bundle

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
                scale: Optional[float] = None) -> torch.Tensor:
        return scaled_dot_product_attention(q, k, v, self.bundle, is_causal, scale)


class _AttentionMode(TorchFunctionMode):
    """Sends a model's ``F.scaled_dot_product_attention`` calls (no mask, no dropout) to the bundle."""

    def __init__(self, bundle: _Resolver):
        super().__init__()
        self.bundle = bundle

    def __enter__(self):
        _modes.n = getattr(_modes, "n", 0) + 1
        return super().__enter__()

    def __exit__(self, *exc: Any) -> Any:
        _modes.n -= 1
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
            a = dict(zip(names, args))
            a.update(kwargs)
            if a.get("attn_mask") is None and not a.get("dropout_p"):
                return scaled_dot_product_attention(a["query"], a["key"], a["value"], self.bundle,
                                                    bool(a.get("is_causal", False)), a.get("scale"))
        return func(*args, **kwargs)


def _gelu_activation(m: nn.Module) -> Optional[str]:
    if isinstance(m, nn.GELU):
        return "gelu_tanh" if m.approximate == "tanh" else "gelu"
    return None


def patch(model: nn.Module, bundle: _Resolver, attention: bool = True, keep_weights: bool = False) -> nn.Module:
    """Makes ``model`` (in place) run the bundle's kernels: every ``nn.Linear`` becomes ``Linear``
    (an ``nn.GELU`` right after it in an ``nn.Sequential`` is fused into its epilogue), and with
    ``attention`` its ``F.scaled_dot_product_attention`` calls go to the bundle. With
    ``keep_weights=True`` a Linear on CPU tensors keeps a [K, N] copy of its weight for the bundle's
    NN GEMM (remade when the weight changes; one more copy of the Linear weights in memory); by
    default it reads the weight as given (the transposed-B GEMM, no copy). Patching a
    patched model again switches it to ``bundle`` and ``keep_weights``; ``unpatch`` restores it.
    Returns ``model``."""
    undo: List[Tuple[nn.Module, str, nn.Module]] = getattr(model, "_tessera_undo", [])

    def swap(parent: nn.Module, name: str, new: nn.Module) -> None:
        undo.append((parent, name, getattr(parent, name)))
        setattr(parent, name, new)

    for parent in list(model.modules()):
        kids = list(parent.named_children())
        for i, (name, child) in enumerate(kids):
            if isinstance(child, (Linear, BiasGELU, ScaledDotProductAttention)):
                child.bundle = bundle
                if isinstance(child, Linear):
                    child.keep_weights = keep_weights
            elif isinstance(child, nn.Linear):
                act = ""
                if isinstance(parent, nn.Sequential) and i + 1 < len(kids):
                    act = _gelu_activation(kids[i + 1][1]) or ""
                    if act:
                        swap(parent, kids[i + 1][0], nn.Identity())
                swap(parent, name, Linear(child, bundle, act, keep_weights))
    object.__setattr__(model, "_tessera_undo", undo)
    object.__setattr__(model, "_tessera_keep", keep_weights)
    if attention:
        if "forward" not in model.__dict__:
            original = model.forward

            def forward(*args: Any, **kwargs: Any) -> Any:
                with _AttentionMode(model._tessera_bundle):  # type: ignore[attr-defined]
                    return original(*args, **kwargs)
            object.__setattr__(model, "_tessera_forward", original)
            model.forward = forward  # type: ignore[method-assign]
        object.__setattr__(model, "_tessera_bundle", bundle)
    return model


def unpatch(model: nn.Module) -> nn.Module:
    """Undoes ``patch``: the original modules and forward are back."""
    for parent, name, original in reversed(getattr(model, "_tessera_undo", [])):
        setattr(parent, name, original)
    object.__setattr__(model, "_tessera_undo", [])
    model.__dict__.pop("_tessera_keep", None)
    if "_tessera_forward" in model.__dict__:
        del model.forward
        del model._tessera_forward
    return model


# ---- tuning a model's kernels ----

class _Recorder(_Resolver):
    """Collects the kernels a forward pass asks for (torch runs every call meanwhile)."""

    def __init__(self) -> None:
        super().__init__()
        self.kernels: Dict[str, Tuple[_Request, Kernel]] = {}

    def __repr__(self) -> str:
        return "<tessera.torch shape recorder>"

    def _logs(self) -> bool:
        return False

    def _resolve(self, req: _Request, device: torch.device) -> _Plan:
        try:
            k = req.build(None)
        except Exception as e:
            return _Plan(None, f"not a Tessera {req.family} kernel: {e}")
        self.kernels.setdefault(k.workload, (req, k))
        return _Plan(None, "recording shapes")


def record(model: nn.Module, *example_inputs: Any, keep_weights: bool = False, **example_kwargs: Any) -> List[Kernel]:
    """The Tessera kernels ``model``'s forward pass on the example inputs runs through the custom
    operators (after ``patch(..., keep_weights=keep_weights)``), one per distinct kernel, in the order
    first met. On CPU tensors with ``keep_weights`` a Linear is the NN GEMM on the weight's kept copy;
    without it, and on other devices, the GEMM reading the weight as given (B transposed), which is
    what a GPU target's bundle needs."""
    rec = _Recorder()
    previous = getattr(model, "_tessera_bundle", None)
    previous_keep = getattr(model, "_tessera_keep", False)
    patch(model, rec, keep_weights=keep_weights)
    try:
        with torch.no_grad():
            model(*example_inputs, **example_kwargs)
    finally:
        if previous is not None:
            patch(model, previous, keep_weights=previous_keep)
        else:
            unpatch(model)
        _registry.pop(rec.id, None)
    return [k for _, k in rec.kernels.values()]


def tune_model(model: nn.Module, example_inputs: Tuple[Any, ...], target: str = "host", out: str = "tessera_bundle",
               db: str = "tessera.db", trials: int = 40, estimate: bool = False, threads: int = -1,
               min_time: float = 0.05, missing: str = "default", progress: bool = False,
               on_kernel: Optional[Callable[[Kernel, Any], None]] = None, keep_weights: bool = False) -> Any:
    """Records the kernels ``model`` runs on ``example_inputs`` (a forward pass), tunes each on
    ``target`` (``estimate=True``: ranked by the analytic GPU model, nothing runs; for a GPU target
    without its device), stores the results in ``db`` and writes the bundle ``out`` (replacing a
    bundle there). Host target: the model is patched with the loaded bundle (and ``keep_weights``:
    its Linears' GEMMs are recorded and tuned as the NN GEMMs on kept weight copies, see
    ``patch``), which is returned; other targets: the GEMMs reading the weight as given, the model
    is left as it was and the bundle's summary is returned."""
    from . import bundle as _bundle, tune as _tune
    for path in (db, out):
        if os.path.dirname(os.path.abspath(path)):
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    kernels = record(model, *example_inputs, keep_weights=keep_weights and target == "host")
    if not kernels:
        raise InvalidArgumentError("invalid-argument: the forward pass ran no operator Tessera tunes "
                                   "(nn.Linear, GELU after a Linear in nn.Sequential, scaled_dot_product_attention)")
    for k in kernels:
        with _tuning_env():
            r = _tune(k, target=target, trials=trials, db=db, estimate=estimate, threads=threads, min_time=min_time,
                      progress=progress)
        if on_kernel is not None:
            on_kernel(k, r)
    summary = _bundle(kernels, targets=[target], out=out, db=db, missing=missing, replace=True, threads=threads)
    if target != "host":
        return summary
    b = load(out)
    patch(model, b, keep_weights=keep_weights)
    return b
