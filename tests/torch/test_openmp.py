"""Threaded host kernels inside a torch process run on torch's own OpenMP team (tt.load's default,
openmp="gomp": the bundle's tessera_omp_gomp.c in place of LLVM's libomp), so no second runtime's
workers spin or sleep against torch's ops. Each case runs in a fresh process: what it maps and
which threads it starts are the check."""
import json
import subprocess
import sys
import textwrap

import pytest
import torch

import tessera
import tessera.torch as tt

M, N, K = 256, 512, 256

_RUN = textwrap.dedent("""
    import json, os, sys
    import torch, torch.nn.functional as F
    import tessera.torch as tt
    folder, openmp = sys.argv[1], sys.argv[2]
    torch.set_num_threads(2)
    torch.manual_seed(4)
    x, w, b = torch.randn(%(m)d, %(k)d), torch.randn(%(n)d, %(k)d), torch.randn(%(n)d)
    want = F.linear(x, w, b)
    torch.randn(1 << 20).exp_()  # past at::parallel_for's grain: torch's own team of two is up from here
    before = len(os.listdir("/proc/self/task"))
    bundle = tt.load(folder, openmp=openmp)
    for _ in range(3):
        got = tt.linear(x, w, b, bundle)
    (row,) = [r for r in tt.stats() if r["op"] == "linear"]
    maps = open("/proc/self/maps").read()
    print(json.dumps({"ran": row["ran"], "kernel": row["kernel"], "err": float((got - want).abs().max()),
                      "threads_added": len(os.listdir("/proc/self/task")) - before,
                      "libomp": "libomp.so" in maps, "path": bundle.lib.path}))
""") % {"m": M, "n": N, "k": K}


def test_threaded_kernels_run_on_torchs_threads(tmp_path):
    torch.manual_seed(4)
    kernels = tt.record(torch.nn.Sequential(torch.nn.Linear(K, N)), torch.randn(M, K))
    out = str(tmp_path / "bundle")
    with pytest.warns(tessera.TesseraWarning):  # untuned defaults are named
        tessera.bundle(kernels, targets=["host"], out=out, missing="default", threads=2)
    with open(f"{out}/manifest.json") as f:
        assert json.load(f)["entries"][0]["config"].get("THREADS") == 2
    seen = {}
    for openmp in ("gomp", "libomp"):  # each in a fresh process: what it maps, which threads it starts
        r = subprocess.run([sys.executable, "-c", _RUN, out, openmp], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        seen[openmp] = json.loads(r.stdout.strip().splitlines()[-1])
    g, o = seen["gomp"], seen["libomp"]
    assert g["ran"] == "tessera" and g["path"].endswith("libtessera_bundle_gomp.so"), g
    assert g["err"] < 1e-3, g
    assert not g["libomp"] and g["threads_added"] == 0, g
    # Negative control: on libomp the same kernel starts a worker of its own beside torch's.
    assert o["ran"] == "tessera" and o["err"] < 1e-3, o
    assert o["libomp"] and o["threads_added"] >= 1, o
