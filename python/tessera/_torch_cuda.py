"""Owns tessera.torch's CUDA half: which of a bundle's GPU code sets a CUDA device runs (the device's
chip against the bundle's, one error naming both), and a kernel's launch on CUDA tensors through the
bundle's C runtime (``tessera_cuda_launch``) on torch's current stream: no synchronisation, no host
copy, the workspace and outputs from torch's caching allocator, so the call can be captured in a
CUDA graph. What it asks torch sits in ``Device``, which the tests replace to drive the same path
through a stand-in driver on a machine without a GPU."""
from __future__ import annotations

import ctypes
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch  # type: ignore[import-not-found, unused-ignore]

from .bundle_lib import BundleLibrary, KernelDesc
from .errors import UnsupportedError


_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what inductor's launches ask
_is_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)


class Device:
    """What the CUDA path asks torch: whether a device is a CUDA device, its chip, its current
    stream, and memory from the caching allocator."""

    def is_gpu(self, device: torch.device) -> bool:
        return device.type == "cuda"

    def index(self, device: torch.device) -> int:
        return device.index if device.index is not None else torch.cuda.current_device()

    def chip(self, device: torch.device) -> str:
        major, minor = torch.cuda.get_device_capability(device)
        return f"sm_{major}{minor}"

    def name(self, device: torch.device) -> str:
        return str(torch.cuda.get_device_name(device))

    def stream(self, device: torch.device) -> int:
        """The current stream's CUstream handle: torch's raw-stream query (no Stream object is
        made), else through ``torch.cuda.current_stream``."""
        if _raw_stream is not None:
            return int(_raw_stream(device.index if device.index is not None else torch.cuda.current_device()))
        return int(torch.cuda.current_stream(device).cuda_stream)

    def capturing(self, device: torch.device) -> bool:
        """Whether the current stream is capturing a CUDA graph."""
        if _is_capturing is not None:
            return bool(_is_capturing())
        return bool(torch.cuda.is_current_stream_capturing())

    def empty(self, shape: Sequence[int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        return torch.empty(tuple(shape), dtype=dtype, device=device)


device = Device()  # tests swap it for a stand-in


def code_sets(lib: BundleLibrary) -> List[str]:
    """The bundle's GPU code sets: the archs its NVIDIA and AMD kernels were compiled for."""
    return sorted({e.get("arch", "") for e in lib.entries() if e.get("vendor") in ("nvidia", "amd") and e.get("arch")})


def is_gpu_kernel(k: KernelDesc) -> bool:
    return k.arch.startswith(("sm_", "gfx"))


def runs_on(code_set: str, chip: str) -> bool:
    """Whether code compiled for ``code_set`` runs on ``chip``: the chip's own, or its
    arch-specific form (sm_90a on sm_90)."""
    return code_set in (chip, chip + "a")


def check_chip(lib: BundleLibrary, dev: torch.device) -> Optional[str]:
    """The device's chip when the bundle has code for it; None when the bundle has no GPU code at
    all (the host-only bundle: torch runs); an error naming both when it has code for others."""
    sets = code_sets(lib)
    if not sets:
        return None
    chip = device.chip(dev)
    if not any(runs_on(s, chip) for s in sets):
        raise UnsupportedError(
            f"unsupported: {dev} ({device.name(dev)}) is {chip}; the bundle {lib.folder} has GPU code for "
            f"{', '.join(sets)} only: bundle its kernels for {chip} (tessera bundle --target {chip})")
    return chip


def find(lib: BundleLibrary, name: str, dims: Sequence[int], dtype: str, chip: str) -> Optional[KernelDesc]:
    for arch in (chip + "a", chip):
        k = lib.find(name, dims, dtype, arch)
        if k is not None:
            return k
    return None


def _transpose(t: torch.Tensor, slices: int, rows: int, cols: int, prows: int, pcols: int) -> Optional[torch.Tensor]:
    """``t`` (``slices`` [cols][rows] matrices) as the kernel reads it: each transposed into a
    [prows][pcols] matrix, zeros past rows and cols; one copy kernel of torch's on the current
    stream (and a fill when there is padding), where the runtime would make one strided driver copy
    per row or column. None when ``t`` is not laid out so (the runtime copies it then)."""
    if t.numel() != slices * rows * cols or not t.is_contiguous():
        return None
    p = device.empty((slices, prows, pcols), t.dtype, t.device)
    if prows != rows or pcols != cols:
        p.zero_()
    p[:, :rows, :cols].copy_(t.view(slices, cols, rows).transpose(1, 2))
    return p


def _version(t: torch.Tensor) -> Optional[int]:
    try:
        return int(t._version)
    except RuntimeError:  # an inference tensor keeps no version counter: never reused
        return None


class Launch:
    """A GPU kernel at one key shape on one device, made on a call shape's first call
    (tessera.torch's ``_Launch``): its workspace size, the operands it reads transposed and the
    kernel bound to ``tessera_cuda_launch_packed`` (``BundleLibrary.bound``) are found once; a call
    looks up torch's current stream and makes one native call. The workspace (zero-padded operand
    copies, runtime sizes, tensor maps) is one tensor of the caching allocator per stream, kept and
    shared by every plan's launches there (grown to the largest asked for): the stream orders each
    launch after the last one that used it.

    The transposed copy of an operand (an nn.Linear weight read as the GEMM's B) is kept for the
    next call on the same tensor object while the tensor's version counter (bumped by every
    in-place write through torch: ``copy_``, ``load_state_dict``, an optimiser's step), its
    storage and the stream are unchanged, so a model's weights are transposed once, not on every
    call; kept copies are one extra device copy per such weight (shared by the plans of all the
    shapes it is called at, when they read it in one layout), dropped with the weight. Writes
    that bypass the version counter (through ``tensor.data``) are not seen: ``forget_copies()``
    (tessera.torch.forget_copies) drops the copies. A call under graph capture neither keeps nor
    reads a kept copy: the graph transposes on every replay, as it reads every other operand live,
    so it sees writes to the weight made after the capture."""

    def __init__(self, lib: BundleLibrary, kernel: KernelDesc, dims: Sequence[int], dev: torch.device):
        cdims = (ctypes.c_int64 * len(dims))(*dims)
        self.lib, self.kernel, self.cdims, self.dev = lib, kernel, cdims, dev
        self.workspace = lib.cuda_workspace_bytes(kernel, cdims)
        self.transposed = lib.cuda_transposed_operands(kernel, cdims)
        self.index = device.index(dev)
        self.native = lib.bound(kernel, dims, gpu=True, device=self.index)
        self.n = len(kernel.tensors)

    def _packed(self, t: torch.Tensor, stream: int, layout: Tuple[int, int, int, int, int],
                capturing: bool) -> Optional[torch.Tensor]:
        if capturing:  # the graph transposes on every replay: it sees writes to t made after the capture
            return _transpose(t, *layout)
        key = (id(t), layout)
        hit = _copies.get(key)
        ver = _version(t)
        if hit is not None and hit[0]() is t and ver is not None and hit[1] == ver and hit[2] == t.data_ptr() and \
                hit[3] == stream:
            return hit[4]
        p = _transpose(t, *layout)
        if p is not None and ver is not None:
            def drop(_: Any, k: Tuple[int, Tuple[int, ...]] = key) -> None:
                _copies.pop(k, None)
            try:
                ref = weakref.ref(t, drop)
            except TypeError:
                return p
            _copies[key] = (ref, ver, t.data_ptr(), stream, p)
        return p

    def __call__(self, tensors: List[torch.Tensor]) -> None:
        """Enqueues the kernel on the current stream over ``tensors`` (inputs in the kernel's order,
        then outputs). The workspace is a tensor of the caching allocator kept for the next call on
        the same stream (which the stream orders after this one's launch); under graph capture a
        new one from the graph's private pool, released after the call."""
        dev = self.dev
        stream = device.stream(dev)
        capturing = bool(self.workspace or self.transposed) and device.capturing(dev)
        ws = None
        if self.workspace:
            if capturing:  # the graph's own, from its pool: replays may run beside eager calls
                ws = device.empty((self.workspace,), torch.uint8, dev)
            else:
                ws = _workspaces.get((self.index, stream))  # the default stream is 0 on every device
                if ws is None or ws.numel() < self.workspace:
                    ws = _workspaces[(self.index, stream)] = device.empty((self.workspace,), torch.uint8, dev)
        packed: Optional[List[int]] = None
        keep = []  # this call's transposed copies, alive until the launch is enqueued
        for t, slices, rows, cols, prows, pcols in self.transposed:
            p = self._packed(tensors[t], stream, (slices, rows, cols, prows, pcols), capturing)
            if p is not None:
                packed = packed or [0] * self.n
                packed[t] = p.data_ptr()
                keep.append(p)
        ptrs = [t.data_ptr() for t in tensors]
        wsp = ws.data_ptr() if ws is not None else 0
        if self.native is None:
            self.lib.cuda_launch(self.kernel, self.cdims, ptrs, wsp, stream, self.index, packed)
            return
        st = self.native(wsp, stream, *ptrs, *packed) if packed is not None else self.native(wsp, stream, *ptrs)
        if st:
            self.lib.check(self.kernel, st)


# Kept across launch plans, so that the plans of one weight at several shapes (another batch or
# sequence length) share its copy, and every plan on a stream one workspace (the largest asked for).
_copies: Dict[Tuple[int, Tuple[int, ...]], Tuple[Any, Optional[int], int, int, torch.Tensor]] = {}
# (id(t), layout) -> (weakref to t, its version, its data_ptr, the stream, the copy)
_workspaces: Dict[Tuple[int, int], torch.Tensor] = {}  # (device index, stream) -> the workspace its launches share


def forget_copies() -> None:
    """Drops every kept transposed operand copy (after writing a weight through ``tensor.data``)
    and kept workspace."""
    _copies.clear()
    _workspaces.clear()
