"""Tessera from Python: build kernels (GEMM, fused elementwise chains, attention), run them on
numpy arrays in place, tune them with the same session as ``tessera tune``, look up and compare
stored winners, talk to the shared cache, and ship tuned kernels as an ahead-of-time C bundle.

    import numpy as np, tessera
    k = tessera.gemm(512, 512, 512)
    res = tessera.tune(k, trials=40, db="tessera.db")
    a, b = tessera.empty((512, 512)), tessera.empty((512, 512))
    a[:] = np.random.rand(512, 512); b[:] = np.random.rand(512, 512)
    c = k.run(a, b, config=res.config)
    assert np.allclose(c, a @ b, rtol=1e-4, atol=1e-3)

Arrays: kernels read and write the arrays' memory directly. An array is used in place when it is
C-contiguous, of the kernel's dtype and 64-byte aligned (``tessera.empty`` / ``tessera.aligned``
make such arrays, and the outputs ``run`` allocates are); other arrays are staged through aligned
copies (``copy=True``, the default) or refused (``copy=False``). dtypes: f32 is numpy float32, f16
is numpy float16, bf16 is a uint16 array of bfloat16 bits (``ml_dtypes.bfloat16`` arrays are viewed
as such without a copy). Objects with ``__dlpack__`` (e.g. CPU torch tensors) are passed through.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _tessera
from .errors import (CompileError, InvalidArgumentError, InvalidConfigError, NotFoundError, ParseError, StoreError,
                     TesseraError, UnsupportedError, VerifyError, WrongResultError)

__version__: str = _tessera.__version__

Config = Union[None, str, Dict[str, Union[int, str]]]
Trial = _tessera.Trial
Record = _tessera.Record

_ALIGN = 64
_NUMPY_DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}


class TensorSpec(NamedTuple):
    name: str
    shape: Tuple[int, ...]
    dtype: str  # "f32", "f16" or "bf16"


def _config_text(config: Config) -> str:
    if config is None:
        return ""
    if isinstance(config, dict):
        return json.dumps(config, sort_keys=True)
    if isinstance(config, str):
        return config
    raise InvalidArgumentError(f"invalid-argument: config must be a dict, a string or None, not {type(config).__name__}")


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype that holds a tensor of Tessera dtype ``dtype`` (bf16: uint16 bits)."""
    try:
        return _NUMPY_DTYPES[dtype]
    except KeyError:
        raise InvalidArgumentError(f"invalid-argument: unknown dtype '{dtype}' (expected f32, f16 or bf16)") from None


def empty(shape: Sequence[int], dtype: str = "f32") -> np.ndarray:
    """An uninitialized, C-contiguous, 64-byte aligned array (kernels use it without a copy)."""
    dt = numpy_dtype(dtype)
    shape = tuple(int(d) for d in shape)
    n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    raw = np.empty(n + _ALIGN, dtype=np.uint8)
    off = (-raw.ctypes.data) % _ALIGN
    return raw[off:off + n].view(dt).reshape(shape)


def zeros(shape: Sequence[int], dtype: str = "f32") -> np.ndarray:
    a = empty(shape, dtype)
    a[...] = 0
    return a


def is_aligned(a: np.ndarray) -> bool:
    return bool(a.flags.c_contiguous) and a.ctypes.data % _ALIGN == 0


def aligned(a: np.ndarray) -> np.ndarray:
    """``a`` itself when it is C-contiguous and 64-byte aligned, else an aligned copy."""
    if isinstance(a, np.ndarray) and is_aligned(a):
        return a
    src = np.asarray(a)
    n = src.nbytes
    raw = np.empty(n + _ALIGN, dtype=np.uint8)
    off = (-raw.ctypes.data) % _ALIGN
    out = raw[off:off + n].view(src.dtype).reshape(src.shape)
    out[...] = src
    return out


def _as_bits(a: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """bf16 tensors take bfloat16 arrays (ml_dtypes) as their uint16 bits, without a copy."""
    if spec.dtype == "bf16" and a.dtype.name == "bfloat16":
        return a.view(np.uint16)
    return a


class Kernel:
    """A verified kernel. Build one with :func:`gemm`, :func:`elementwise`, :func:`attention`,
    :func:`parse` or :func:`load`."""

    def __init__(self, k: "_tessera.Kernel"):
        self._k = k
        self._compiled: Dict[Tuple[str, str, bool], "_tessera.Compiled"] = {}

    name = property(lambda self: self._k.name)
    family = property(lambda self: self._k.family)
    ir = property(lambda self: self._k.ir, doc="The kernel in the IR text form (`tessera run file`).")
    workload = property(lambda self: self._k.workload, doc="The workload hash (part of every cache key).")
    flops = property(lambda self: self._k.flops)

    @property
    def inputs(self) -> List[TensorSpec]:
        return [TensorSpec(t["name"], tuple(t["shape"]), t["dtype"]) for t in self._k.inputs]

    @property
    def outputs(self) -> List[TensorSpec]:
        return [TensorSpec(t["name"], tuple(t["shape"]), t["dtype"]) for t in self._k.outputs]

    def key(self, target: str = "host") -> Dict[str, Any]:
        """The hard key on ``target`` (family, workload, shape, dtype, layout, target, arch, units, key_id)."""
        return self._k.key(target)

    def space(self, target: str = "host") -> List[Dict[str, Any]]:
        """The knobs tune searches on ``target``: name, legal values, default."""
        return self._k.space(target)

    def default_config(self, target: str = "host") -> Dict[str, Union[int, str]]:
        return json.loads(self._k.default_config(target))

    def compile(self, config: Config = None, target: str = "host", emulate: Union[bool, str] = False) -> "_tessera.Compiled":
        """Compiles (and caches) this kernel with ``config`` (None: the default) for ``target``.
        ``emulate=True`` (or ``"mapped"``) runs a GPU target's mapped kernel on the CPU, one fiber per
        GPU thread, with races and out-of-bounds accesses reported as errors; ``"pre"`` runs its
        pre-mapping IR instead (faster, sees less). Correctness only: the times are this CPU's."""
        mode = "mapped" if emulate is True else (emulate or "")
        full = self._k.complete_config(_config_text(config), target)
        key = (full, target, mode)
        if key not in self._compiled:
            self._compiled[key] = _tessera.compile(self._k, full, target, mode)
        return self._compiled[key]

    def empty_outputs(self) -> List[np.ndarray]:
        return [empty(t.shape, t.dtype) for t in self.outputs]

    def random_inputs(self, seed: int = 0) -> List[np.ndarray]:
        """Aligned inputs filled with uniform values in [-1, 1) (bf16 as rounded bits)."""
        rng = np.random.default_rng(seed)
        out = []
        for t in self.inputs:
            a = empty(t.shape, t.dtype)
            vals = rng.uniform(-1, 1, size=t.shape).astype(np.float32)
            if t.dtype == "bf16":
                a[...] = float32_to_bf16_bits(vals)
            else:
                a[...] = vals
            out.append(a)
        return out

    def _prepare(self, arrays: Sequence[Any], copy: bool) -> Tuple[List[Any], List[Tuple[np.ndarray, np.ndarray]]]:
        specs = self.inputs + self.outputs
        n_in = len(self.inputs)
        ready: List[Any] = []
        write_back: List[Tuple[np.ndarray, np.ndarray]] = []
        for i, (a, spec) in enumerate(zip(arrays, specs)):
            if not isinstance(a, np.ndarray):
                ready.append(a)  # __dlpack__ objects: the extension checks them, no copy
                continue
            a = _as_bits(a, spec)
            want = numpy_dtype(spec.dtype)
            if a.dtype != want:
                hint = "uint16 bits or ml_dtypes.bfloat16" if spec.dtype == "bf16" else str(want)
                raise InvalidArgumentError(f"invalid-argument: array {i} ({spec.name}): expected {hint}, got {a.dtype}")
            if tuple(a.shape) != spec.shape:
                raise InvalidArgumentError(
                    f"invalid-argument: array {i} ({spec.name}): expected shape {spec.shape}, got {tuple(a.shape)}")
            output = i >= n_in
            if output and not a.flags.writeable:
                raise InvalidArgumentError(f"invalid-argument: array {i} (output {spec.name}) is read-only")
            if is_aligned(a):
                ready.append(a)
                continue
            if not copy:
                raise InvalidArgumentError(
                    f"invalid-argument: array {i} ({spec.name}) is not C-contiguous and 64-byte aligned "
                    "(tessera.empty / tessera.aligned make arrays that are; copy=True stages a copy)")
            staged = aligned(a) if not output else empty(spec.shape, spec.dtype)
            if output:
                write_back.append((staged, a))
            ready.append(staged)
        return ready, write_back

    def run(self, *arrays: Any, config: Config = None, target: str = "host", emulate: Union[bool, str] = False,
            copy: bool = True) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """Runs the kernel. Pass the inputs (outputs are allocated, aligned, and returned) or the
        inputs then the outputs (written in place and returned). Arrays are used without a copy
        when they are C-contiguous, of the kernel's dtype and 64-byte aligned; others are staged
        through aligned copies when ``copy`` is true and refused otherwise."""
        n_in, n_out = len(self.inputs), len(self.outputs)
        if len(arrays) == n_in:
            arrays = tuple(arrays) + tuple(self.empty_outputs())
        elif len(arrays) != n_in + n_out:
            raise InvalidArgumentError(
                f"invalid-argument: {self.name} takes {n_in} inputs ({', '.join(t.name for t in self.inputs)}) "
                f"and optionally {n_out} outputs, got {len(arrays)} arrays")
        ready, write_back = self._prepare(arrays, copy)
        self.compile(config, target, emulate).run(ready)
        for staged, dest in write_back:
            dest[...] = staged
        outs = arrays[n_in:]
        return outs[0] if n_out == 1 else tuple(outs)

    def check(self, *arrays: np.ndarray) -> Dict[str, Any]:
        """Outputs against Tessera's reference evaluator (f64) on the inputs: pass inputs then
        outputs. Returns ok, max_abs_err, max_rel_err, tolerance, first_bad."""
        specs = self.inputs + self.outputs
        return self._k.check([np.ascontiguousarray(_as_bits(a, s)) if isinstance(a, np.ndarray) else a
                              for a, s in zip(arrays, specs)])

    def __repr__(self) -> str:
        return f"<tessera.Kernel {self.name} ({self.family})>"


def gemm(m: int, n: int, k: int, dtype: str = "f32", *, batch: int = 0, trans_a: bool = False, trans_b: bool = False,
         alpha: float = 1.0, beta: float = 0.0, epilogue: Optional[str] = None,
         shapes: Optional[Dict[str, Sequence[int]]] = None, name: Optional[str] = None) -> Kernel:
    """``C = epilogue(alpha * op(A) @ op(B) + beta * Cin)``; inputs A, B (Cin when beta != 0,
    then the epilogue's tensors, shaped by ``shapes``), output C."""
    return Kernel(_tessera.gemm(m, n, k, dtype, batch, trans_a, trans_b, alpha, beta, epilogue or "",
                                {k_: list(v) for k_, v in (shapes or {}).items()}, name or ""))


def elementwise(expr: str, shapes: Optional[Dict[str, Sequence[int]]] = None, *, shape: Optional[Sequence[int]] = None,
                dtype: str = "f32", name: Optional[str] = None) -> Kernel:
    """A fused elementwise chain, e.g. ``elementwise("y = gelu(x * s + b)", shapes={"x": (4096, 4096),
    "s": (4096,), "b": (4096,)})``. Inputs missing from ``shapes`` take ``shape`` (default: the
    largest shape given); numpy broadcasting."""
    shapes = {k_: [int(d) for d in v] for k_, v in (shapes or {}).items()}
    if shape is None:
        if not shapes:
            raise InvalidArgumentError("invalid-argument: give shapes={name: shape} or shape=")
        shape = max(shapes.values(), key=lambda s: (int(np.prod(s)), len(s)))
    return Kernel(_tessera.elementwise(expr, [int(d) for d in shape], shapes, dtype, name or ""))


def attention(heads: int, seq: int, head_dim: int, *, heads_kv: Optional[int] = None, seq_kv: Optional[int] = None,
              batch: int = 1, causal: bool = False, scale: Optional[float] = None, dtype: str = "f32",
              name: Optional[str] = None) -> Kernel:
    """``O = softmax(Q K^T * scale [+ causal mask]) V`` over [batch, heads, seq, head_dim]
    (grouped-query when heads_kv divides heads); inputs Q, K, V, output O."""
    return Kernel(_tessera.attention(heads, seq, head_dim, heads_kv or 0, seq_kv or 0, batch, causal, scale or 0.0,
                                     dtype, name or ""))


def parse(text: str) -> Kernel:
    """A kernel from its IR text form (``Kernel.ir``, ``tessera compile ... --emit ir``)."""
    return Kernel(_tessera.parse(text))


def load(path: Union[str, os.PathLike]) -> Kernel:
    with open(path, encoding="utf-8") as f:
        return parse(f.read())


def float32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 values -> bfloat16 bits (uint16), rounded to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = u + (0x7FFF + ((u >> 16) & 1))
    out = (rounded >> 16).astype(np.uint16)
    nan = np.isnan(a)
    out[nan] = 0x7FC0
    return out


def bf16_bits_to_float32(b: np.ndarray) -> np.ndarray:
    return (np.ascontiguousarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _cache_args(cache: Optional[str], token: Optional[str]) -> Tuple[str, str]:
    # Like the CLI: the shared cache comes from the arguments or the environment.
    return (os.environ.get("TESSERA_CACHE_URL", "") if cache is None else cache,
            os.environ.get("TESSERA_TOKEN", "") if token is None else token)


class TuneResult:
    """The outcome of :func:`tune`: the winner (``config``, ``time_us``, ``best``), every measured
    candidate (``history``), the default's result, status counts, and the stored record."""

    def __init__(self, kernel: Kernel, r: "_tessera.TuneResult"):
        self.kernel = kernel
        self._r = r

    outcome = property(lambda self: self._r.outcome, doc='"tuned", "already-tuned" or "nothing-correct".')
    history = property(lambda self: self._r.history)
    default = property(lambda self: self._r.default)
    statuses = property(lambda self: self._r.statuses)
    speedup_over_default = property(lambda self: self._r.speedup_over_default)
    seconds = property(lambda self: self._r.seconds)
    key_id = property(lambda self: self._r.key_id)
    interrupted = property(lambda self: self._r.interrupted)
    emulated = property(lambda self: self._r.emulated, doc="Measured on the emulated device (not stored).")
    estimated = property(lambda self: self._r.estimated, doc="Predicted by the analytic model: nothing ran.")
    best = property(lambda self: self._r.best, doc="The winning Trial (None when already tuned).")

    @property
    def record(self) -> Optional[Record]:
        """The stored record of the winner (this run's, or the one that was already stored)."""
        return self._r.winner if self._r.winner is not None else self._r.cached

    @property
    def config(self) -> Dict[str, Union[int, str]]:
        if self._r.best is not None:
            return self._r.best.config
        if self.record is not None:
            return self.record.config
        raise NotFoundError("not-found: no candidate produced a correct result " + json.dumps(self.statuses))

    @property
    def time_us(self) -> float:
        return self._r.best.median_us if self._r.best is not None else (self.record.median_us if self.record else 0.0)

    def run(self, *arrays: Any, **kw: Any) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """The kernel with the winning config."""
        return self.kernel.run(*arrays, config=self.config, **kw)

    def __repr__(self) -> str:
        if self.outcome == "nothing-correct":
            return f"<TuneResult {self.kernel.name}: nothing correct {self.statuses}>"
        return (f"<TuneResult {self.kernel.name}: {self.outcome}, {self.time_us:.4g} us, "
                f"{len(self.history)} trials, config {self.config}>")


def tune(kernel: Kernel, target: str = "host", trials: Optional[int] = None, db: Optional[str] = None,
         cache: Optional[str] = None, *, token: Optional[str] = None, time_budget: float = 0.0,
         strategy: Optional[str] = None, seed: int = 0, batch: int = 4, top_k: int = 5, min_time: float = 0.05,
         timeout: float = 20.0, resume: bool = False, force: bool = False, warm_start: bool = True,
         space: Optional[str] = None, on_trial: Optional[Callable[[Trial, Dict[str, Any]], None]] = None,
         device: Optional[Union[int, str]] = None, estimate: bool = False) -> TuneResult:
    """Tunes ``kernel`` on ``target`` with the same session as ``tessera tune`` (cache first,
    evolutionary search with the XGBoost model, every candidate checked against the reference in
    a forked child and stored, top-k re-measured). ``db``: a SQLite store path (None: nothing is
    kept). ``cache``: the shared cache URL (None: $TESSERA_CACHE_URL). GPU targets are measured on
    an attached device of their arch (``device``: its index), or with ``device="emulated"`` on this
    CPU (correctness and the loop only: those timings are labelled and never stored), or with
    ``estimate=True`` ranked by the analytic GPU model (nothing runs; the top ``trials``, 32 by
    default, are checked by the compiler and stored as *estimated* records, never as winners).
    ``trials`` defaults to 200, ``strategy`` to "evolutionary" ("ranked" when estimating). Ctrl-C
    ends the search after the batch in flight; the result then has ``interrupted`` set."""
    url, tok = _cache_args(cache, token)
    if trials is None:
        trials = 32 if estimate else 200
    if strategy is None:
        strategy = "ranked" if estimate else "evolutionary"
    r = _tessera.tune(kernel._k, target, trials, time_budget, db or "", url, tok, strategy, seed, batch, top_k,
                      min_time, timeout, resume, force, warm_start, space or "", on_trial,
                      "" if device is None else str(device), estimate)
    return TuneResult(kernel, r)


def best(kernel: Kernel, target: str = "host", db: Optional[str] = None, cache: Optional[str] = None, *,
         token: Optional[str] = None, verify: bool = True) -> Optional[Record]:
    """The stored winner for ``kernel`` on ``target``: the local store, then the shared cache (a
    shared winner is first checked here: legal, compiles, matches the reference; ``verify=False``
    trusts it); None."""
    url, tok = _cache_args(cache, token)
    return _tessera.best(kernel._k, target, db or "", url, tok, verify)


def nearest(kernel: Kernel, target: str = "host", db: Optional[str] = None, limit: int = 3) -> List[Tuple[float, Record]]:
    """Winners of the closest tuned shapes in the local store: (distance, record), closest first."""
    return _tessera.nearest(kernel._k, target, db or "", limit)


def compare(kernel: Kernel, targets: Iterable[str] = ("host",), db: Optional[str] = None,
            cache: Optional[str] = None, *, token: Optional[str] = None) -> Dict[str, Any]:
    """The kernel's winners on several targets side by side, as ``tessera compare`` shows them:
    ``rows`` (per target: ``kind`` measured / estimated / none, config, time, throughput, share of
    peak, the model's bound, tile facts, resources) and ``why`` (derived differences)."""
    url, tok = _cache_args(cache, token)
    return _tessera.compare(kernel._k, list(targets), db or "", url, tok)


def measure(kernel: Kernel, configs: Sequence[Config], target: str = "host", min_time: float = 0.05) -> List[Trial]:
    """Each config run on seeded inputs in a forked child, checked against the reference, timed."""
    return _tessera.measure(kernel._k, [_config_text(c) for c in configs], target, min_time)


class Client:
    """A client of the shared tuning cache (``tessera serve``). Lookups fail open: a service that
    is down is a miss with a warning; status/export raise."""

    def __init__(self, url: str, token: str = "", timeout: float = 1.0):
        self._c = _tessera.Client(url, token, timeout)

    url = property(lambda self: self._c.url)

    def best(self, kernel: Kernel, target: str = "host", allow_nearest: bool = True) -> Dict[str, Any]:
        """{"kind": "hit"|"nearest"|"miss", "record", "stale", "stale_reasons", "nearest", "warning"}"""
        return self._c.best(kernel._k, target, allow_nearest)

    def status(self) -> Dict[str, Any]:
        return json.loads(self._c.status())

    def export(self, since: int = 0, limit: int = 10000) -> Tuple[str, int]:
        return self._c.export(since, limit)

    def push(self, db: str) -> Dict[str, Any]:
        """Pushes the local store's outbox (what was tuned while the service was away)."""
        return self._c.push(db)


def bundle(kernels: Sequence[Kernel], targets: Sequence[str] = ("host",), out: str = "bundle",
           db: Optional[str] = None, cache: Optional[str] = None, *, token: Optional[str] = None,
           missing: str = "default", host_cpu: str = "level", verify: bool = True, replace: bool = False) -> Dict[str, Any]:
    """``tessera bundle`` from Python: compiles each kernel's tuned config ahead of time into
    ``out`` (C runtime, kernel table, objects, manifest.json). Returns the summary."""
    url, tok = _cache_args(cache, token)
    return _tessera.bundle([k._k for k in kernels], list(targets), out, db or "", url, tok, missing, host_cpu, verify,
                           replace)


__all__ = [
    "Kernel", "TensorSpec", "TuneResult", "Client", "Trial", "Record", "gemm", "elementwise", "attention", "parse",
    "load", "tune", "best", "nearest", "compare", "measure", "bundle", "empty", "zeros", "aligned", "is_aligned",
    "numpy_dtype", "float32_to_bf16_bits", "bf16_bits_to_float32", "TesseraError", "InvalidArgumentError",
    "ParseError", "VerifyError", "InvalidConfigError", "CompileError", "WrongResultError", "NotFoundError",
    "UnsupportedError", "StoreError",
]
