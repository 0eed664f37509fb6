"""Owns loading an ahead-of-time bundle folder (``tessera bundle``) into this process: its C runtime,
kernel table and host objects linked once into a shared library with the system's C compiler, opened
with ctypes, and its kernels described and run on caller-owned memory (no copies, no numpy, no torch).

    lib = BundleLibrary("bundle")
    k = lib.find("gemm", (256, 256, 256), "f32")      # None when the bundle has none
    lib.run(k, (256, 256, 256), [a_ptr, b_ptr, c_ptr])

The library is built next to the bundle (``libtessera_bundle.so``) or, when that folder is read-only,
under ``~/.cache/tessera/bundles``; a library older than any of its inputs is rebuilt.
"""
from __future__ import annotations

import ctypes
import glob
import hashlib
import json
import os
import shlex
import subprocess
import tempfile
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from .errors import InvalidArgumentError, NotFoundError, TesseraError, UnsupportedError

_MAX_RANK = 8
_RUNTIME_SOURCES = ("tessera_runtime.c", "tessera_runtime_gpu.c", "tessera_bundle_table.c", "tessera_bundle_images.c")
_STATUS = {0: "ok", 1: "not found", 2: "bad argument", 3: "unsupported here", 4: "device error", 5: "out of memory"}


_KERNEL_FIELDS: List[Any] = [(n, ctypes.c_char_p) for n in ("name", "family", "shape", "dtype", "target", "arch", "config",
                                                           "source", "tuned_shape", "time_kind")] + [
    ("time_us", ctypes.c_double), ("estimator", ctypes.c_char_p), ("bound", ctypes.c_char_p),
    ("num_inputs", ctypes.c_int), ("num_outputs", ctypes.c_int), ("runtime_m", ctypes.c_int),
    ("m_lo", ctypes.c_int64), ("m_hi", ctypes.c_int64), ("range_dim", ctypes.c_char_p)]


class _KernelInfo(ctypes.Structure):
    _fields_ = _KERNEL_FIELDS  # tessera_kernel_info of tessera_bundle.h, in order


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_char_p), ("is_output", ctypes.c_int),
                ("rank", ctypes.c_int), ("dims", ctypes.c_int64 * _MAX_RANK), ("bytes", ctypes.c_size_t)]


class TensorDesc(NamedTuple):
    name: str
    dtype: str
    shape: tuple
    is_output: bool


class KernelDesc(NamedTuple):
    """One kernel of a loaded bundle: ``handle`` is the runtime's pointer (pass it to ``run``)."""
    handle: int
    name: str
    family: str
    shape: str
    dtype: str
    target: str
    arch: str
    config: str
    source: str
    time_kind: str
    time_us: float
    runtime_m: bool
    m_lo: int
    m_hi: int
    tensors: tuple


def _s(b: Optional[bytes]) -> str:
    return b.decode() if b else ""


def _newest_input(folder: str) -> float:
    paths = [os.path.join(folder, s) for s in _RUNTIME_SOURCES] + glob.glob(os.path.join(folder, "host", "*.o"))
    paths += [os.path.join(folder, n) for n in ("link.flags", "manifest.json", _GOMP_SHIM)]
    return max(os.path.getmtime(p) for p in paths if os.path.exists(p))


def _library_path(folder: str, name: str) -> str:
    if os.access(folder, os.W_OK):
        return os.path.join(folder, name)
    with open(os.path.join(folder, "manifest.json"), "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()[:16]
    cache = os.path.join(os.path.expanduser("~"), ".cache", "tessera", "bundles", digest)
    os.makedirs(cache, exist_ok=True)
    return os.path.join(cache, name)


# The threaded host kernels' OpenMP runtime: "libomp" (LLVM's, what link.flags names) or "gomp" (the
# bundle's tessera_omp_gomp.c linked in instead: the kernels' parallel regions run on the GNU OpenMP
# team the process already has, e.g. PyTorch's; see that file). A bundle without threaded kernels, or
# one written before the file existed, links as "libomp" either way.
OPENMP_RUNTIMES = ("libomp", "gomp")
_GOMP_SHIM = "tessera_omp_gomp.c"


def build_shared(folder: str, cc: Optional[str] = None, openmp: str = "libomp") -> str:
    """Links the bundle in ``folder`` into a shared library (once; again when an input is newer) and
    returns its path. The host objects are position-independent (``tessera bundle`` emits them so);
    the runtime's C sources are compiled with -fPIC here. ``openmp``: OPENMP_RUNTIMES."""
    folder = os.path.abspath(folder)
    if openmp not in OPENMP_RUNTIMES:
        raise InvalidArgumentError(f"invalid-argument: openmp must be one of {', '.join(OPENMP_RUNTIMES)}, got {openmp!r}")
    for src in _RUNTIME_SOURCES:
        if not os.path.exists(os.path.join(folder, src)):
            raise InvalidArgumentError(f"invalid-argument: {folder} is not a Tessera bundle (no {src})")
    flags = []
    if os.path.exists(os.path.join(folder, "link.flags")):
        with open(os.path.join(folder, "link.flags")) as f:
            flags = shlex.split(f.read())
    sources = [os.path.join(folder, s) for s in _RUNTIME_SOURCES]
    threaded = "-l:libomp.so.5" in flags
    gomp = openmp == "gomp" and threaded and os.path.exists(os.path.join(folder, _GOMP_SHIM))
    if gomp:  # the shim instead of libomp (its -L folder, if any, goes too)
        sources.append(os.path.join(folder, _GOMP_SHIM))
        flags = [f for f in flags if f != "-l:libomp.so.5" and not f.startswith("-L")]
    out = _library_path(folder, "libtessera_bundle_gomp.so" if gomp else "libtessera_bundle.so")
    if os.path.exists(out) and os.path.getmtime(out) >= _newest_input(folder):
        return out
    cc = cc or os.environ.get("CC") or "cc"
    objs = sorted(glob.glob(os.path.join(folder, "host", "*.o")))
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=os.path.dirname(out))
    os.close(fd)
    cmd = [cc, "-O2", "-std=c11", "-fPIC", "-shared", "-I", folder] + sources
    cmd += objs + flags + ["-lm", "-o", tmp]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        os.unlink(tmp)
        last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise TesseraError(f"error: linking the bundle {folder} into a shared library failed ({cc}): {last}")
    os.replace(tmp, out)
    return out


class BundleLibrary:
    """A bundle folder loaded into this process (see the module's doc)."""

    def __init__(self, folder: str, cc: Optional[str] = None, openmp: str = "libomp"):
        self.folder = os.path.abspath(folder)
        mpath = os.path.join(self.folder, "manifest.json")
        if not os.path.isfile(mpath):
            raise InvalidArgumentError(f"invalid-argument: {folder} is not a Tessera bundle (no manifest.json)")
        with open(mpath) as f:
            self.manifest: Dict[str, Any] = json.load(f)
        if self.manifest.get("format") != "tessera-bundle":
            raise InvalidArgumentError(f"invalid-argument: {folder}/manifest.json is not a Tessera bundle manifest")
        self.path = build_shared(self.folder, cc, openmp)
        lib = ctypes.CDLL(self.path, mode=os.RTLD_NOW | os.RTLD_LOCAL)
        vp, i64p = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64)
        lib.tessera_find_dims.restype = vp
        lib.tessera_find_dims.argtypes = [ctypes.c_char_p, i64p, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p]
        lib.tessera_run_dims.restype = ctypes.c_int
        lib.tessera_run_dims.argtypes = [vp, i64p, ctypes.c_int, ctypes.POINTER(vp)]
        lib.tessera_last_message.restype = ctypes.c_char_p
        lib.tessera_kernel_count.restype = ctypes.c_int
        lib.tessera_kernel_at.restype = vp
        lib.tessera_kernel_at.argtypes = [ctypes.c_int]
        lib.tessera_info.argtypes = [vp, ctypes.POINTER(_KernelInfo)]
        lib.tessera_num_tensors.argtypes = [vp]
        lib.tessera_tensor.argtypes = [vp, ctypes.c_int, ctypes.POINTER(_TensorInfo)]
        lib.tessera_cuda_workspace_bytes.restype = ctypes.c_int
        lib.tessera_cuda_workspace_bytes.argtypes = [vp, i64p, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
        lib.tessera_cuda_launch.restype = ctypes.c_int
        lib.tessera_cuda_launch.argtypes = [vp, i64p, ctypes.c_int, ctypes.POINTER(vp), vp, vp, ctypes.c_int]
        # A bundle made before the caller-transposed operands has neither entry point.
        self._launch_packed = getattr(lib, "tessera_cuda_launch_packed", None)
        self._transposed = getattr(lib, "tessera_cuda_transposed_operand", None)
        if self._launch_packed is not None and self._transposed is not None:
            self._launch_packed.restype = ctypes.c_int
            self._launch_packed.argtypes = [vp, i64p, ctypes.c_int, ctypes.POINTER(vp), ctypes.POINTER(vp), vp, vp, ctypes.c_int]
            self._transposed.restype = ctypes.c_int
            self._transposed.argtypes = [vp, i64p, ctypes.c_int, ctypes.c_int, i64p]
        else:
            self._launch_packed = self._transposed = None
        self._lib = lib
        self._run = lib.tessera_run_dims
        self._launch = lib.tessera_cuda_launch
        self.kernels: List[KernelDesc] = [self._describe(lib.tessera_kernel_at(i)) for i in range(lib.tessera_kernel_count())]
        self.by_handle = {k.handle: k for k in self.kernels}

    def _describe(self, h: int) -> KernelDesc:
        info = _KernelInfo()
        self._lib.tessera_info(h, ctypes.byref(info))
        tensors = []
        for i in range(self._lib.tessera_num_tensors(h)):
            t = _TensorInfo()
            self._lib.tessera_tensor(h, i, ctypes.byref(t))
            tensors.append(TensorDesc(_s(t.name), _s(t.dtype), tuple(t.dims[:t.rank]), bool(t.is_output)))
        return KernelDesc(h, _s(info.name), _s(info.family), _s(info.shape), _s(info.dtype), _s(info.target), _s(info.arch),
                          _s(info.config), _s(info.source), _s(info.time_kind), info.time_us, bool(info.runtime_m),
                          info.m_lo, info.m_hi, tuple(tensors))

    def last_message(self) -> str:
        return _s(self._lib.tessera_last_message())

    def find(self, family_or_name: str, dims: Sequence[int], dtype: str, arch: str = "host") -> Optional[KernelDesc]:
        """The runtime's choice for (family or kernel/range name, key shape, dtype, arch), ranges
        included; None when it has none (``last_message()`` says why)."""
        if not dims or len(dims) > _MAX_RANK:
            raise InvalidArgumentError(f"invalid-argument: a key shape has 1..{_MAX_RANK} dimensions, not {len(dims)}")
        arr = (ctypes.c_int64 * len(dims))(*dims)
        h = self._lib.tessera_find_dims(family_or_name.encode(), arr, len(dims), dtype.encode(), arch.encode())
        return self.by_handle.get(h) if h else None

    def run(self, kernel: KernelDesc, dims: Any, pointers: Sequence[int]) -> None:
        """Runs ``kernel`` at key shape ``dims`` (a sequence or a ctypes int64 array, kept by callers
        that run one shape often) on the buffers at ``pointers`` (inputs then outputs,
        row-major, dense, 64-byte aligned for host kernels). Errors raise with the runtime's line."""
        n = len(kernel.tensors)
        if len(pointers) != n:
            raise InvalidArgumentError(f"invalid-argument: {kernel.name} takes {n} buffers, got {len(pointers)}")
        arr = dims if isinstance(dims, ctypes.Array) else (ctypes.c_int64 * len(dims))(*dims)
        st = self._run(kernel.handle, arr, len(arr), (ctypes.c_void_p * n)(*pointers))
        if st != 0:
            self._check(kernel, st)

    def cuda_workspace_bytes(self, kernel: KernelDesc, dims: Any) -> int:
        """The device workspace ``cuda_launch`` needs for ``kernel`` at key shape ``dims``."""
        arr = dims if isinstance(dims, ctypes.Array) else (ctypes.c_int64 * len(dims))(*dims)
        n = ctypes.c_size_t(0)
        self._check(kernel, self._lib.tessera_cuda_workspace_bytes(kernel.handle, arr, len(arr), ctypes.byref(n)))
        return n.value

    def cuda_transposed_operands(self, kernel: KernelDesc, dims: Any) -> List[Tuple[int, int, int, int, int, int]]:
        """The tensors ``cuda_launch`` would copy transposed for ``kernel`` at ``dims`` (one driver
        copy per row or column), each as (tensor index, slices, rows, cols, prows, pcols): the
        tensor holds ``slices`` [cols][rows] matrices, the kernel reads each transposed into a
        zero-padded [prows][pcols] (tessera_cuda_transposed_operand). Empty for a bundle made
        without that entry point."""
        if self._transposed is None:
            return []
        arr = dims if isinstance(dims, ctypes.Array) else (ctypes.c_int64 * len(dims))(*dims)
        out = []
        for t in range(len(kernel.tensors)):
            lay = (ctypes.c_int64 * 5)()
            self._check(kernel, self._transposed(kernel.handle, arr, len(arr), t, lay))
            if lay[0] > 0:
                out.append((t, lay[0], lay[1], lay[2], lay[3], lay[4]))
        return out

    def bound(self, kernel: KernelDesc, dims: Sequence[int], gpu: bool = False, device: int = 0) -> Optional[Any]:
        """``kernel`` at key shape ``dims`` bound to the runtime's entry point for repeated calls
        (tessera._tessera.BundleCall): host, ``call(p0, ..., pn-1)`` as ``run``; gpu,
        ``call(workspace, stream, p0, ..., pn-1[, packed0, ..., packedn-1])`` as ``cuda_launch``
        on ``device``. The call returns the runtime's status (``check`` raises for it). None when
        the extension or (gpu) the bundle's tessera_cuda_launch_packed is missing: use ``run`` /
        ``cuda_launch``."""
        try:
            from ._tessera import BundleCall  # type: ignore[attr-defined]
        except ImportError:
            return None
        fn = self._launch_packed if gpu else self._run
        entry = ctypes.cast(fn, ctypes.c_void_p).value if fn is not None else None
        if not entry:
            return None
        return BundleCall(entry, kernel.handle, list(dims), len(kernel.tensors), gpu, device)

    def check(self, kernel: KernelDesc, status: int) -> None:
        """Raises the error of a runtime status (a ``bound`` call's) with the runtime's line."""
        self._check(kernel, status)

    def cuda_launch(self, kernel: KernelDesc, dims: Any, pointers: Sequence[int], workspace: int, stream: int,
                    device: int, packed: Optional[Sequence[int]] = None) -> None:
        """Enqueues ``kernel`` on CUDA ``stream`` (a CUstream handle) of ``device`` over device
        buffers (inputs then outputs) and a device workspace of ``cuda_workspace_bytes`` bytes: no
        allocation, host copy or synchronisation (tessera_cuda_launch of tessera_bundle.h).
        ``packed``: per tensor, 0 or device memory holding it in the layout
        ``cuda_transposed_operands`` gives, read instead of the runtime's transposed copies."""
        n = len(kernel.tensors)
        if len(pointers) != n or (packed is not None and len(packed) != n):
            raise InvalidArgumentError(f"invalid-argument: {kernel.name} takes {n} buffers, got {len(pointers)}"
                                       + (f" and {len(packed)} packed" if packed is not None else ""))
        arr = dims if isinstance(dims, ctypes.Array) else (ctypes.c_int64 * len(dims))(*dims)
        bufs = (ctypes.c_void_p * n)(*pointers)
        if packed is not None and any(packed):
            if self._launch_packed is None:
                raise InvalidArgumentError(f"invalid-argument: the bundle {self.folder} predates caller-transposed "
                                           "operands (tessera_cuda_launch_packed): bundle it again")
            self._check(kernel, self._launch_packed(kernel.handle, arr, len(arr), bufs, (ctypes.c_void_p * n)(*packed),
                                                    workspace or None, stream or None, device))
            return
        self._check(kernel, self._launch(kernel.handle, arr, len(arr), bufs, workspace or None, stream or None, device))

    def _check(self, kernel: KernelDesc, st: int) -> None:
        if st == 0:
            return
        msg = f"{kernel.name}: {_STATUS.get(st, st)}: {self.last_message()}"
        if st == 1:
            raise NotFoundError("not-found: " + msg)
        if st == 3:
            raise UnsupportedError("unsupported: " + msg)
        if st == 2:
            raise InvalidArgumentError("invalid-argument: " + msg)
        raise TesseraError("error: " + msg)

    def ranges(self) -> List[Dict[str, Any]]:
        """The manifest's shape ranges (name, dim, lo, hi, shape_at_hi, buckets)."""
        return list(self.manifest.get("ranges", []))

    def entries(self) -> List[Dict[str, Any]]:
        return list(self.manifest.get("entries", []))
