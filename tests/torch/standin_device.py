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
_SIZES = {dt: torch.empty((), dtype=dt).element_size() for dt in (torch.float32, torch.float16, torch.bfloat16, torch.uint8,
                                                                   torch.float64, torch.int32, torch.int64)}


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
        self.fake = fake
        self.end, self.next = q.value + nbytes, (q.value + 511) // 512 * 512
        self.start = self.keep = self.next
        # One uint8 tensor over the whole allocation: a tensor handed out is a slice of it (as cheap
        # to make as the caching allocator's, where a ctypes buffer per tensor took microseconds).
        self.base = torch.frombuffer((ctypes.c_ubyte * (self.end - self.start)).from_address(self.start), dtype=torch.uint8)

    def take(self, nbytes):
        q = self.next
        self.next += (max(nbytes, 1) + 511) // 512 * 512
        assert self.next <= self.end, "stand-in pool exhausted"
        return q

    def tensor(self, nbytes):
        """``nbytes`` of the pool as a uint8 tensor of its own version counter (``.data``: a slice's
        would be the pool's, bumped by a write to any tensor of it, where torch's are per tensor)."""
        q = self.take(nbytes)
        return self.base[q - self.start:q - self.start + nbytes].data

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

    def capturing(self, device):
        return bool(self._pool.fake.fake_cuda_capturing())

    def empty(self, shape, dtype, device):
        n = math.prod(shape) * _SIZES[dtype]
        return self._pool.tensor(n).view(dtype).view(tuple(shape))


def on_device(t):
    """A copy of ``t`` in the current Device's memory."""
    return _torch_cuda.device.empty(t.shape, t.dtype, t.device).copy_(t)
