"""Owns tessera.torch's CUDA half: which of a bundle's GPU code sets a CUDA device runs (the device's
chip against the bundle's, one error naming both), and a kernel's launch on CUDA tensors through the
bundle's C runtime (``tessera_cuda_launch``) on torch's current stream: no synchronisation, no host
copy, the workspace and outputs from torch's caching allocator, so the call can be captured in a
CUDA graph. What it asks torch sits in ``Device``, which the tests replace to drive the same path
through a stand-in driver on a machine without a GPU."""
from __future__ import annotations

import ctypes
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch  # type: ignore[import-not-found, unused-ignore]

from .bundle_lib import BundleLibrary, KernelDesc
from .errors import UnsupportedError


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
        return int(torch.cuda.current_stream(device).cuda_stream)

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


class _Launch(NamedTuple):
    workspace: int  # bytes
    transposed: List[Tuple[int, int, int, int, int, int]]  # BundleLibrary.cuda_transposed_operands


_launches: Dict[Tuple[int, Tuple[int, ...]], _Launch] = {}


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


def launch(lib: BundleLibrary, kernel: KernelDesc, dims: Tuple[int, ...], cdims: ctypes.Array,
           tensors: List[torch.Tensor]) -> None:
    """Enqueues ``kernel`` on the current stream of the tensors' device over their memory (inputs in
    the kernel's order, then outputs). The workspace is a tensor of the caching allocator, released
    after the call: the allocator hands it out again only to work ordered after this launch on the
    same stream (in a graph capture: from the graph's private pool). An operand the kernel reads
    transposed is transposed by torch into such a tensor too (``_transpose``)."""
    dev = tensors[0].device
    key = (kernel.handle, dims)
    plan = _launches.get(key)
    if plan is None:
        plan = _launches[key] = _Launch(lib.cuda_workspace_bytes(kernel, cdims), lib.cuda_transposed_operands(kernel, cdims))
    ws = device.empty((plan.workspace,), torch.uint8, dev) if plan.workspace else None
    packed: Optional[List[int]] = None
    keep = []  # the transposed copies, alive until the launch is enqueued (the allocator orders reuse after it)
    for t, slices, rows, cols, prows, pcols in plan.transposed:
        p = _transpose(tensors[t], slices, rows, cols, prows, pcols)
        if p is not None:
            packed = packed or [0] * len(tensors)
            packed[t] = p.data_ptr()
            keep.append(p)
    lib.cuda_launch(kernel, cdims, [t.data_ptr() for t in tensors], ws.data_ptr() if ws is not None else 0,
                    device.stream(dev), device.index(dev), packed)
