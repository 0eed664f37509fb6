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
import sys
import time
from typing import Any, Callable, cast, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _tessera
from .errors import (AccessDeniedError, CompileError, InvalidArgumentError, InvalidConfigError, NotFoundError, ParseError,
                     ServiceUnavailableError, StoreError, TesseraError, TesseraWarning, UnsupportedError, VerifyError,
                     WrongResultError)

__version__: str = getattr(_tessera, "__version__")  # set by the module, not in its stub

Config = Union[None, str, Dict[str, Union[int, str]]]
Trial = _tessera.Trial
Record = _tessera.Record
#: Host kernels on all cores (the default of every ``threads=`` argument, as the CLI's ``--threads``).
ALL_CORES: int = -1

_ALIGN = 64
_NUMPY_DTYPES: Dict[str, np.dtype] = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}


class TensorSpec(NamedTuple):
    """One input or output of a kernel: its name, shape and Tessera dtype ("f32", "f16", "bf16")."""
    name: str
    shape: Tuple[int, ...]
    dtype: str


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
    """A zero-filled, C-contiguous, 64-byte aligned array."""
    a = empty(shape, dtype)
    a[...] = 0
    return a


def is_aligned(a: np.ndarray) -> bool:
    """Whether kernels can use ``a`` without a copy: C-contiguous and 64-byte aligned."""
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


def _bfloat16() -> Optional[np.dtype]:
    """ml_dtypes' bfloat16 when the package is installed (outputs then round-trip as bfloat16)."""
    try:
        import ml_dtypes  # type: ignore[import-not-found]
    except ImportError:
        return None
    return np.dtype(ml_dtypes.bfloat16)


class Kernel:
    """A verified kernel. Build one with :func:`gemm`, :func:`elementwise`, :func:`attention`,
    :func:`parse` or :func:`load`."""

    def __init__(self, k: "_tessera.Kernel"):
        self._k = k
        self._compiled: Dict[Tuple[str, str, str, int], "_tessera.Compiled"] = {}

    name = property(lambda self: self._k.name, doc="The kernel's name (derived from its shape unless given).")
    family = property(lambda self: self._k.family, doc='"gemm", "elementwise" or "attention".')
    ir = property(lambda self: self._k.ir, doc="The kernel in the IR text form (`tessera run file`).")
    workload = property(lambda self: self._k.workload, doc="The workload hash (part of every cache key).")
    flops = property(lambda self: self._k.flops, doc="Floating-point operations of one run.")
    bytes = property(lambda self: self._k.bytes, doc="Bytes one run reads (inputs) and writes (outputs).")

    @property
    def inputs(self) -> List[TensorSpec]:
        """The inputs, in call order."""
        return [TensorSpec(t["name"], tuple(t["shape"]), t["dtype"]) for t in self._k.inputs]

    @property
    def outputs(self) -> List[TensorSpec]:
        """The outputs, in call order (after the inputs)."""
        return [TensorSpec(t["name"], tuple(t["shape"]), t["dtype"]) for t in self._k.outputs]

    def key(self, target: str = "host", threads: int = ALL_CORES) -> Dict[str, Any]:
        """The hard key on ``target`` (family, workload, shape, dtype, layout, target, arch, units,
        key_id); on the host ``units`` is ``threads`` (all cores by default), as ``--threads``."""
        return self._k.key(target, threads)

    def space(self, target: str = "host", threads: int = ALL_CORES) -> List[Dict[str, Any]]:
        """The knobs tune searches on ``target``: name, legal values, default."""
        return self._k.space(target, threads)

    def default_config(self, target: str = "host", threads: int = ALL_CORES) -> Dict[str, Union[int, str]]:
        """The space's default config on ``target`` (what runs untuned)."""
        return json.loads(self._k.default_config(target, threads))

    def compile(self, config: Config = None, target: str = "host", emulate: Union[bool, str] = False,
                threads: int = ALL_CORES) -> "_tessera.Compiled":
        """Compiles (and caches) this kernel with ``config`` (None: the default) for ``target``.
        ``emulate=True`` (or ``"mapped"``) runs a GPU target's mapped kernel on the CPU, one fiber per
        GPU thread, with races and out-of-bounds accesses reported as errors; ``"pre"`` runs its
        pre-mapping IR instead (faster, sees less). Correctness only: the times are this CPU's."""
        mode = "mapped" if emulate is True else (emulate or "")
        full = self._k.complete_config(_config_text(config), target, threads)
        key = (full, target, mode, threads)
        if key not in self._compiled:
            self._compiled[key] = _tessera.compile(self._k, full, target, mode, threads)
        return self._compiled[key]

    def empty_outputs(self, bfloat16: bool = False) -> List[np.ndarray]:
        """Aligned, uninitialized outputs (bf16 ones as ml_dtypes.bfloat16 when ``bfloat16`` and
        ml_dtypes is installed, else as uint16 bits)."""
        bf = _bfloat16() if bfloat16 else None
        return [empty(t.shape, t.dtype).view(bf) if bf is not None and t.dtype == "bf16" else empty(t.shape, t.dtype)
                for t in self.outputs]

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
            copy: bool = True, threads: int = ALL_CORES) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """Runs the kernel. Pass the inputs (outputs are allocated, aligned, and returned) or the
        inputs then the outputs (written in place and returned). Arrays are used without a copy
        when they are C-contiguous, of the kernel's dtype and 64-byte aligned; others are staged
        through aligned copies when ``copy`` is true and refused otherwise. bf16 outputs it
        allocates are ml_dtypes.bfloat16 arrays when a bf16 input was one, else uint16 bits."""
        n_in, n_out = len(self.inputs), len(self.outputs)
        if len(arrays) == n_in:
            bf = any(isinstance(a, np.ndarray) and a.dtype.name == "bfloat16" for a in arrays)
            arrays = tuple(arrays) + tuple(self.empty_outputs(bfloat16=bf))
        elif len(arrays) != n_in + n_out:
            raise InvalidArgumentError(
                f"invalid-argument: {self.name} takes {n_in} inputs ({', '.join(t.name for t in self.inputs)}) "
                f"and optionally {n_out} outputs, got {len(arrays)} arrays")
        ready, write_back = self._prepare(arrays, copy)
        self.compile(config, target, emulate, threads).run(ready)
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


# Members of the extension's Kernel that this wrapper does not expose, and why (the stub test
# checks that every other public member of _tessera.Kernel is exposed here).
_KERNEL_INTERNAL = {
    "complete_config": "used by Kernel.compile",
    "check": "wrapped by Kernel.check (ml_dtypes arrays)",
}


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
    """A kernel from a file in the IR text form."""
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
    """bfloat16 bits (uint16, or an ml_dtypes.bfloat16 array) -> float32 values."""
    if isinstance(b, np.ndarray) and b.dtype.name == "bfloat16":
        b = b.view(np.uint16)
    return (np.ascontiguousarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def _cache_args(cache: Optional[str], token: Optional[str], ca_cert: Optional[str] = None) -> Tuple[str, str, str]:
    # Like the CLI: the shared cache comes from the arguments or the environment.
    return (os.environ.get("TESSERA_CACHE_URL", "") if cache is None else cache,
            os.environ.get("TESSERA_TOKEN", "") if token is None else token,
            os.environ.get("TESSERA_CA_CERT", "") if ca_cert is None else ca_cert)


class Progress:
    """The default progress report of :func:`tune`, as ``tessera tune`` prints it ("trial 12/200
    best 88.1 GFLOP/s (75% of peak) last 61.2 GFLOP/s elapsed 9s ETA 2m31s"): one line rewritten
    in place on a terminal, else a line at most every ``every`` seconds and at the end. Pass
    ``progress=False`` to :func:`tune` to silence it, or a callable of (Trial, dict) of your own."""

    def __init__(self, kernel: "Kernel", stream: Any = None, every: float = 5.0):
        self._compute = kernel.family != "elementwise"
        self._stream = stream if stream is not None else sys.stderr
        self._tty = bool(getattr(self._stream, "isatty", lambda: False)())
        self._every = every
        self._last = 0.0
        self._width = 0

    def _rate(self, t: Optional[Trial]) -> str:
        if t is None or not t.ok:
            return "-" if t is None else t.status
        return f"{t.gflops:.1f} GFLOP/s" if self._compute else f"{t.gbps:.1f} GB/s"

    @staticmethod
    def _dur(s: float) -> str:
        return f"{int(s // 60)}m{int(s) % 60:02d}s" if s >= 60 else f"{s:.0f}s"

    def __call__(self, trial: Trial, p: Dict[str, Any]) -> None:
        """Reports one measured candidate (``p``: trial, trials, elapsed, eta, best)."""
        best = p.get("best")
        share = ""
        # A share of 0 is none known (the host's copy probe ran on busy cores): no figure then.
        if best is not None and best.ok and best.peak_fraction > 0:
            pct = 100 * best.peak_fraction
            # Never a bare share above 100 %: a kernel cannot beat the hardware.
            share = (f" ({pct:.0f}% of peak)" if pct <= 100 else
                     f" ({pct:.0f}% of peak: above it, the data fit in the caches or the probe read the peak low)")
        line = (f"trial {p['trial']}/{p['trials']}  best {self._rate(best)}{share}  last {self._rate(trial)}  "
                f"elapsed {self._dur(p['elapsed'])}  ETA {self._dur(p['eta'])}")
        last = p["trial"] >= p["trials"]
        if self._tty:
            self._stream.write("\r" + line.ljust(self._width) + ("\n" if last else ""))
            self._width = len(line)
        elif last or time.monotonic() - self._last >= self._every:
            self._stream.write(line + "\n")
            self._last = time.monotonic()
        self._stream.flush()

    def finish(self) -> None:
        """Ends a line rewritten in place (a search that stopped before its last trial)."""
        if self._tty and self._width:
            self._stream.write("\n")
            self._stream.flush()
            self._width = 0


class TuneResult:
    """The outcome of :func:`tune`: the winner (``config``, ``time_us``, ``best``), every measured
    candidate (``history``), the default's result, status counts, and the stored record."""

    def __init__(self, kernel: Kernel, r: "_tessera.TuneResult", threads: int = ALL_CORES):
        self.kernel = kernel
        self._r = r
        self._threads = threads

    outcome = property(lambda self: self._r.outcome, doc='"tuned", "already-tuned" or "nothing-correct".')
    history = property(lambda self: self._r.history, doc="Every Trial this run measured, in order.")
    default = property(lambda self: self._r.default, doc="The default config's Trial (None when not measured).")
    statuses = property(lambda self: self._r.statuses, doc="Trials per status, e.g. {'ok': 37, 'compile-error': 3}.")
    speedup_over_default = property(
        lambda self: self._r.speedup_over_default,
        doc="The winner's speedup over the default config: this run's same-run ratio, or for a kernel "
            "already tuned the stored winner against the stored default; None when the default was "
            "never measured.")
    seconds = property(lambda self: self._r.seconds, doc="Seconds the search took.")
    key_id = property(lambda self: self._r.key_id, doc="The tuned key's id.")
    interrupted = property(lambda self: self._r.interrupted, doc="Ctrl-C ended the search after a batch.")
    emulated = property(lambda self: self._r.emulated, doc="Measured on the emulated device (not stored).")
    estimated = property(lambda self: self._r.estimated, doc="Predicted by the analytic model: nothing ran.")
    best = property(lambda self: self._r.best, doc="The winning Trial (None when already tuned).")

    @property
    def record(self) -> Optional[Record]:
        """The stored record of the winner (this run's, or the one that was already stored)."""
        return self._r.winner if self._r.winner is not None else self._r.cached

    @property
    def config(self) -> Dict[str, Union[int, str]]:
        """The winning config (NotFoundError when no candidate was correct)."""
        if self._r.best is not None:
            return cast(Dict[str, Union[int, str]], self._r.best.config)
        if self.record is not None:
            return cast(Dict[str, Union[int, str]], self.record.config)
        raise NotFoundError("not-found: no candidate produced a correct result " + json.dumps(self.statuses))

    @property
    def time_us(self) -> float:
        """The winner's median time in microseconds."""
        return self._r.best.median_us if self._r.best is not None else (self.record.median_us if self.record else 0.0)

    def run(self, *arrays: Any, **kw: Any) -> Union[np.ndarray, Tuple[np.ndarray, ...]]:
        """The kernel with the winning config (on the threads it was tuned for)."""
        kw.setdefault("threads", self._threads)
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
         device: Optional[Union[int, str]] = None, estimate: bool = False, threads: int = ALL_CORES,
         workers: bool = False, worker_wait: float = 30.0, ca_cert: Optional[str] = None,
         progress: Union[bool, Callable[[Trial, Dict[str, Any]], None]] = True) -> TuneResult:
    """Tunes ``kernel`` on ``target`` with the same session as ``tessera tune`` (cache first,
    evolutionary search with the XGBoost model, every candidate checked against the reference in
    a forked child and stored, top-k re-measured). ``db``: a SQLite store path (None: nothing is
    kept). ``cache``: the shared cache URL (None: $TESSERA_CACHE_URL; ``token`` and ``ca_cert``
    default to $TESSERA_TOKEN and $TESSERA_CA_CERT); a token the service refuses raises
    AccessDeniedError, a cache that is down is a TesseraWarning. ``threads``: host kernels on that
    many threads, the key's units as ``--threads`` (default: all cores). ``workers=True`` measures
    on the service's live workers of the target (``worker_wait`` seconds for one to show up) as
    ``tessera tune --workers``. GPU targets are measured on an attached device of their arch
    (``device``: its index), or with ``device="emulated"`` on this CPU (correctness and the loop
    only: those timings are labelled and never stored), or with ``estimate=True`` ranked by the
    analytic GPU model (nothing runs; the top ``trials``, 32 by default, are checked by the
    compiler and stored as *estimated* records, never as winners); without the device this raises
    UnsupportedError, as Kernel.run does. ``trials`` defaults to 200, ``strategy`` to
    "evolutionary" ("ranked" when estimating). ``progress``: True prints a progress line to stderr
    as the CLI does (:class:`Progress`), False is silent, a callable gets (Trial, progress dict)
    after each trial; ``on_trial`` is called as well. Ctrl-C ends the search after the batch in
    flight; the result then has ``interrupted`` set."""
    url, tok, ca = _cache_args(cache, token, ca_cert)
    if trials is None:
        trials = 32 if estimate else 200
    if strategy is None:
        strategy = "ranked" if estimate else "evolutionary"
    reporter: Optional[Callable[[Trial, Dict[str, Any]], None]] = None
    if progress is True:
        reporter = Progress(kernel)
    elif callable(progress):
        reporter = progress
    elif progress is not False:
        raise InvalidArgumentError("invalid-argument: progress must be True, False or a callable")
    callback: Optional[Callable[[Trial, Dict[str, Any]], None]] = None
    if reporter is not None or on_trial is not None:
        def callback(t: Trial, p: Dict[str, Any]) -> None:
            if reporter is not None:
                reporter(t, p)
            if on_trial is not None:
                on_trial(t, p)
    try:
        r = _tessera.tune(kernel._k, target, trials, time_budget, db or "", url, tok, strategy, seed, batch, top_k,
                          min_time, timeout, resume, force, warm_start, space or "", callback,
                          "" if device is None else str(device), estimate, threads, workers, worker_wait, ca)
    finally:
        if isinstance(reporter, Progress):
            reporter.finish()
    return TuneResult(kernel, r, threads)


def best(kernel: Kernel, target: str = "host", db: Optional[str] = None, cache: Optional[str] = None, *,
         token: Optional[str] = None, verify: bool = True, threads: int = ALL_CORES,
         ca_cert: Optional[str] = None) -> Optional[Record]:
    """The stored winner for ``kernel`` on ``target`` (host: on ``threads`` threads): the local
    store, then the shared cache (a shared winner is first checked here: legal, compiles, matches
    the reference; ``verify=False`` trusts it); None when there is none. A ``db`` path that does
    not exist is a TesseraWarning (it is not created); a token the service refuses raises
    AccessDeniedError."""
    url, tok, ca = _cache_args(cache, token, ca_cert)
    return _tessera.best(kernel._k, target, db or "", url, tok, verify, threads, ca)


def nearest(kernel: Kernel, target: str = "host", db: Optional[str] = None, limit: int = 3,
            threads: int = ALL_CORES) -> List[Tuple[float, Record]]:
    """Winners of the closest tuned shapes in the local store: (distance, record), closest first.
    Their ``key`` says what differs from this kernel's (shape, threads as ``units``, ...)."""
    return _tessera.nearest(kernel._k, target, db or "", limit, threads)


def compare(kernel: Kernel, targets: Iterable[str] = ("host",), db: Optional[str] = None,
            cache: Optional[str] = None, *, token: Optional[str] = None, threads: int = ALL_CORES,
            ca_cert: Optional[str] = None) -> Dict[str, Any]:
    """The kernel's winners on several targets side by side, as ``tessera compare`` shows them:
    ``rows`` (per target: ``kind`` measured / estimated / none, config, time, throughput, share of
    peak, the model's bound, tile facts, resources; ``note`` says why a row is empty and which key
    fields the nearest stored record differs in) and ``why`` (derived differences). ``threads``:
    the host row's thread count."""
    url, tok, ca = _cache_args(cache, token, ca_cert)
    return _tessera.compare(kernel._k, list(targets), db or "", url, tok, threads, ca)


def measure(kernel: Kernel, configs: Sequence[Config], target: str = "host", min_time: float = 0.05,
            threads: int = ALL_CORES) -> List[Trial]:
    """Each config run on seeded inputs in a forked child, checked against the reference, timed."""
    return _tessera.measure(kernel._k, [_config_text(c) for c in configs], target, min_time, 20.0, threads)


class Client:
    """A client of the shared tuning cache (``tessera serve``). A token the service refuses raises
    AccessDeniedError everywhere; lookups otherwise fail open (a service that is down is a miss
    with a TesseraWarning); status, export and whoami raise ServiceUnavailableError then."""

    def __init__(self, url: str, token: str = "", timeout: float = 1.0, ca_cert: Optional[str] = None):
        self._c = _tessera.Client(url, token, timeout, os.environ.get("TESSERA_CA_CERT", "") if ca_cert is None else ca_cert)

    url = property(lambda self: self._c.url, doc="The service URL(s).")

    def best(self, kernel: Kernel, target: str = "host", allow_nearest: bool = True,
             threads: int = ALL_CORES) -> Dict[str, Any]:
        """{"kind": "hit"|"nearest"|"miss", "record", "stale", "stale_reasons", "nearest", "warning"}"""
        return self._c.best(kernel._k, target, allow_nearest, threads)

    def whoami(self) -> Dict[str, Any]:
        """{"name", "scope"}: the token as the service sees it (scope "none" without a token)."""
        return self._c.whoami()

    def status(self) -> Dict[str, Any]:
        """The service's /status: record and winner counts, sizes, version."""
        return json.loads(self._c.status())

    def export(self, since: int = 0, limit: int = 10000) -> Tuple[str, int]:
        """One page of records as JSON lines after id ``since``, and the next ``since`` (0 at the end)."""
        return self._c.export(since, limit)

    def push(self, db: str) -> Dict[str, Any]:
        """Pushes the local store's outbox (what was tuned while the service was away)."""
        return self._c.push(db)


def bundle(kernels: Sequence[Kernel], targets: Sequence[str] = ("host",), out: str = "bundle",
           db: Optional[str] = None, cache: Optional[str] = None, *, token: Optional[str] = None,
           missing: str = "fail", host_cpu: str = "level", verify: bool = True, replace: bool = False,
           threads: int = ALL_CORES, ca_cert: Optional[str] = None) -> Dict[str, Any]:
    """``tessera bundle`` from Python: compiles each kernel's tuned config ahead of time into
    ``out`` (C runtime, kernel table, objects, manifest.json). ``missing``: "fail" (default:
    NotFoundError naming every kernel without a tuned config; nothing is written), "default" (ship
    the space's defaults, with a TesseraWarning) or "skip". ``threads``: the host keys' thread
    count. Returns the summary, ``rows`` saying what each entry is (tuned, estimated, nearest,
    default)."""
    url, tok, ca = _cache_args(cache, token, ca_cert)
    return _tessera.bundle([k._k for k in kernels], list(targets), out, db or "", url, tok, missing, host_cpu, verify,
                           replace, threads, ca)


__all__ = [
    "Kernel", "TensorSpec", "TuneResult", "Progress", "ALL_CORES", "Client", "Trial", "Record", "gemm", "elementwise", "attention", "parse",
    "load", "tune", "best", "nearest", "compare", "measure", "bundle", "empty", "zeros", "aligned", "is_aligned",
    "numpy_dtype", "float32_to_bf16_bits", "bf16_bits_to_float32", "TesseraError", "InvalidArgumentError",
    "ParseError", "VerifyError", "InvalidConfigError", "CompileError", "WrongResultError", "NotFoundError",
    "UnsupportedError", "StoreError", "AccessDeniedError", "ServiceUnavailableError", "TesseraWarning",
]
