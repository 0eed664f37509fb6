"""The stand-in CUDA device tessera.torch's CUDA path runs on without a GPU, shared by
tests/torch/cuda_standin.py and bench/torch_cuda_standin.py: the stand-in driver
(tests/bundle/fake_cuda.c, loaded under libcuda.so.1 before the bundle's runtime), one of its
allocations handed out as torch's caching allocator would (CPU tensors over it), and a Device that
says those tensors are on a CUDA device of a given chip with a given current stream.
Import it only after ``load`` (which must run before anything dlopens libcuda.so.1)."""
import ctypes
import math
import os

import torch

from tessera import _torch_cuda

STREAM = 0x5EED0


def load(path):
    """The stand-in driver, loaded globally so that the runtime's dlopen("libcuda.so.1") finds it."""
    fake = ctypes.CDLL(path, mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)
    fake.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.c_size_t]
    fake.fake_cuda_expect_stream.argtypes = [ctypes.c_void_p]
    return fake


class Pool:
    """Torch's caching allocator's stand-in: one driver allocation handed out in 512-byte blocks
    (torch's are 512-byte aligned); ``reset`` gives back everything taken after ``mark``."""

    def __init__(self, fake, nbytes):
        q = ctypes.c_ulonglong(0)
        assert fake.cuMemAlloc_v2(ctypes.byref(q), nbytes) == 0
        self.end, self.next = q.value + nbytes, (q.value + 511) // 512 * 512
        self.keep = self.next

    def take(self, nbytes):
        q = self.next
        self.next += (max(nbytes, 1) + 511) // 512 * 512
        assert self.next <= self.end, "stand-in pool exhausted"
        return q

    def mark(self):
        self.keep = self.next

    def reset(self):
        self.next = self.keep


class StandIn(_torch_cuda.Device):
    """CPU tensors over ``pool`` as the tensors of a CUDA device of ``chip`` on ``stream``."""

    def __init__(self, pool, chip="sm_90", stream=STREAM):
        self._pool, self._chip, self._stream = pool, chip, stream

    def is_gpu(self, device):
        return device.type == "cpu"

    def index(self, device):
        return 0

    def chip(self, device):
        return self._chip

    def name(self, device):
        return "the stand-in driver's device"

    def stream(self, device):
        return self._stream

    def empty(self, shape, dtype, device):
        n = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        buf = (ctypes.c_ubyte * max(n, 1)).from_address(self._pool.take(n))
        return torch.frombuffer(buf, dtype=torch.uint8)[:n].view(dtype).view(tuple(shape))


def on_device(t):
    """A copy of ``t`` in the current Device's memory."""
    return _torch_cuda.device.empty(t.shape, t.dtype, t.device).copy_(t)
