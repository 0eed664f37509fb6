"""A bundle's threaded host kernels on either OpenMP runtime (bundle/runtime/tessera_omp_gomp.c):
LLVM's libomp, as link.flags says, or GNU OpenMP's team through the bundle's shim, which
tessera.torch uses so that its kernels share torch's threads. Each case runs in a fresh process,
whose mapped libraries and threads are what is checked."""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import textwrap
import warnings

import pytest

import tessera
from tessera.bundle_lib import build_shared

M = N = K = 256

_RUN = textwrap.dedent("""
    import ctypes, json, os, sys
    import numpy as np
    from tessera.bundle_lib import BundleLibrary
    folder, openmp = sys.argv[1], sys.argv[2]
    def threads():
        return len(os.listdir("/proc/self/task"))
    before = threads()
    lib = BundleLibrary(folder, openmp=openmp)
    k = lib.find("gemm", (%(m)d, %(n)d, %(k)d), "f32")
    rng = np.random.default_rng(3)
    def aligned(shape, fill):
        raw = np.zeros(int(np.prod(shape)) + 16, dtype=np.float32)
        off = (-raw.ctypes.data %% 64) // 4
        a = raw[off:off + int(np.prod(shape))].reshape(shape)
        a[...] = fill
        return a
    a = aligned((%(m)d, %(k)d), rng.standard_normal((%(m)d, %(k)d)))
    b = aligned((%(k)d, %(n)d), rng.standard_normal((%(k)d, %(n)d)))
    c = aligned((%(m)d, %(n)d), 0)
    for _ in range(3):
        lib.run(k, (%(m)d, %(n)d, %(k)d), [a.ctypes.data, b.ctypes.data, c.ctypes.data])
    err = float(np.abs(c - a.astype(np.float64) @ b.astype(np.float64)).max())
    maps = open("/proc/self/maps").read()
    print(json.dumps({"path": lib.path, "config": k.config, "err": err, "threads_added": threads() - before,
                      "libomp": "libomp.so" in maps, "libgomp": "libgomp.so" in maps}))
""") % {"m": M, "n": N, "k": K}


@pytest.fixture(scope="module")
def threaded_bundle(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("omp") / "bundle")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tessera.TesseraWarning)  # untuned defaults are named
        tessera.bundle([tessera.gemm(M, N, K)], targets=["host"], out=out, missing="default", threads=2)
    return out


def _run(folder, openmp):
    r = subprocess.run([sys.executable, "-c", _RUN, folder, openmp], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_the_bundle_under_test_is_threaded(threaded_bundle):
    with open(os.path.join(threaded_bundle, "manifest.json")) as f:
        cfg = json.load(f)["entries"][0]["config"]
    assert cfg.get("THREADS") == 2, cfg
    with open(os.path.join(threaded_bundle, "link.flags")) as f:
        assert "-l:libomp.so.5" in f.read()
    assert os.path.exists(os.path.join(threaded_bundle, "tessera_omp_gomp.c"))


def test_gnu_openmp_runs_the_kernels_without_libomp(threaded_bundle):
    g = _run(threaded_bundle, "gomp")
    assert g["path"].endswith("libtessera_bundle_gomp.so")
    assert g["err"] < 1e-3 * K ** 0.5
    assert g["libgomp"] and not g["libomp"], g
    # Negative control: the same bundle as link.flags says runs on libomp, which starts its own workers.
    o = _run(threaded_bundle, "libomp")
    assert o["path"].endswith("libtessera_bundle.so")
    assert o["err"] < 1e-3 * K ** 0.5
    assert o["libomp"], o
    assert o["threads_added"] >= 1, o


def test_an_unknown_runtime_is_one_clear_error(threaded_bundle):
    with pytest.raises(tessera.InvalidArgumentError, match="openmp must be one of libomp, gomp"):
        build_shared(threaded_bundle, openmp="iomp")


_SHIM_TEST = r"""
#define _GNU_SOURCE
#include <stdint.h>
#include <unistd.h>
#include <sys/syscall.h>
void __kmpc_fork_call(void* loc, int32_t argc, void (*fn)(int32_t*, int32_t*, ...), ...);
void __kmpc_push_num_threads(void* loc, int32_t gtid, int32_t n);
void __kmpc_for_static_init_8u(void*, int32_t, int32_t, int32_t*, uint64_t*, uint64_t*, int64_t*, int64_t, int64_t);
void __kmpc_barrier(void*, int32_t);
int32_t __kmpc_global_thread_num(void*);
struct out { int n; int tid[64]; long os[64]; int last[64]; };
static void body(int32_t* gtid, int32_t* btid, struct out* o) {
  uint64_t lo = 0, hi = (uint64_t)o->n - 1;
  int64_t stride = 1;
  int32_t last = 0;
  (void)btid;
  __kmpc_for_static_init_8u(0, *gtid, 34, &last, &lo, &hi, &stride, 1, 0);
  for (uint64_t i = lo; hi - lo != (uint64_t)-1 && i <= hi; ++i) {
    o->tid[i] = __kmpc_global_thread_num(0);
    o->os[i] = (long)syscall(SYS_gettid);
    o->last[i] = last;
  }
  __kmpc_barrier(0, *gtid);
}
int run(struct out* o, int threads) {
  __kmpc_push_num_threads(0, 0, threads);
  __kmpc_fork_call(0, 1, (void (*)(int32_t*, int32_t*, ...))body, o);
  return __kmpc_global_thread_num(0);
}
"""


class _Out(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int), ("tid", ctypes.c_int * 64), ("os", ctypes.c_long * 64), ("last", ctypes.c_int * 64)]


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_shim_splits_a_loop_as_libomps_static_schedule(tmp_path, threaded_bundle):
    """The shim's entry points alone (a loop of 11 iterations on 2 and 3 threads): each thread one
    block, the first trip % n one more, on distinct OS threads with the caller as thread 0."""
    src = tmp_path / "t.c"
    src.write_text(_SHIM_TEST)
    so = tmp_path / "t.so"
    shim = os.path.join(threaded_bundle, "tessera_omp_gomp.c")  # as every bundle carries it
    subprocess.run(["cc", "-O1", "-std=c11", "-fPIC", "-shared", str(src), shim, "-o", str(so), "-ldl"], check=True)
    lib = ctypes.CDLL(str(so), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    me = ctypes.CDLL(None).syscall(186)  # gettid on x86-64
    for threads, want in ((2, [0] * 6 + [1] * 5), (3, [0] * 4 + [1] * 4 + [2] * 3)):
        o = _Out(n=11)
        for i in range(64):
            o.tid[i] = -1
        assert lib.run(ctypes.byref(o), threads) == 0  # outside the region: thread 0 again
        assert list(o.tid[:11]) == want
        assert all(o.os[i] == me for i in range(11) if want[i] == 0)
        assert len({o.os[i] for i in range(11)}) == threads
        assert [i for i in range(11) if o.last[i]] == [i for i in range(11) if want[i] == threads - 1]
