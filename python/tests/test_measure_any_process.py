"""Tuning from a process whose forked children cannot use the GPU (a session that imported a GPU
framework and touched the device first): candidates are measured by the measuring helper, started
fresh, never by a fork of this process. Where torch with CUDA is installed, the session initialises
CUDA first; otherwise the stand-in poisons fork (every plain forked child of the session aborts,
tests/tune/fork_poison.cpp). Each case runs in its own interpreter: the poison cannot be undone."""
import os
import subprocess
import sys

import pytest

SESSION = r"""
import ctypes, os, sys
poison, db, control = sys.argv[1], sys.argv[2], sys.argv[3] == "control"
first = "the fork poison"
try:
    import torch
    if torch.cuda.is_available():
        torch.ones(1, device="cuda").sum().item()  # CUDA initialised in this process
        first = "torch on " + torch.cuda.get_device_name(0)
except ImportError:
    pass
if first == "the fork poison":
    ctypes.CDLL(poison)
if control:
    # The negative control: a plain forked child of this session dies of the poison.
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    sys.exit(0 if os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) != 0 else 1)
import numpy as np
import tessera
k = tessera.gemm(64, 64, 64)
res = tessera.tune(k, trials=4, db=db, min_time=0.005, top_k=1, threads=1)
assert res.outcome == "tuned", res.outcome
assert res.statuses.get("ok", 0) >= 4, res.statuses
a, b = k.random_inputs(5)
np.testing.assert_allclose(res.run(a, b), a @ b, rtol=1e-4, atol=1e-4)
print("tuned after", first, res.time_us)
"""


def poison_library():
    path = os.environ.get("TESSERA_FORK_POISON")
    if not path or not os.path.exists(path):
        pytest.skip("the fork poison library is built with the C++ tests (TESSERA_FORK_POISON)")
    return path


def run_session(poison, db, control):
    return subprocess.run([sys.executable, "-c", SESSION, poison, db, "control" if control else "tune"],
                          capture_output=True, text=True, timeout=600)


def test_a_session_that_used_the_gpu_first_tunes(tmp_path):
    poison = poison_library()
    r = run_session(poison, str(tmp_path / "t.db"), control=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "tuned after" in r.stdout
    # The control: in the same conditions a forked child dies (the poison is real).
    c = run_session(poison, str(tmp_path / "c.db"), control=True)
    if "torch on" not in r.stdout:
        assert c.returncode == 0, c.stdout + c.stderr
        assert "fork_poison" in c.stderr
