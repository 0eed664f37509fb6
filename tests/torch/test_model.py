"""tessera.torch on a whole model: patch() sends a GPT block's GEMMs (bias and GELU fused), and its
causal attention to the bundle with no change to the model's code; unpatch() restores it;
tune_model() records, tunes, bundles and patches."""
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

import gpt_block
import tessera.torch as tt
from conftest import DIM, HEADS


def test_patched_block_runs_every_op_on_the_bundle(bundle, block_input):
    model = gpt_block.make(DIM, HEADS)
    with torch.no_grad():
        want = model(block_input)
        tt.patch(model, bundle)
        got = model(block_input)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    ran = {(r["op"], r["ran"]) for r in tt.stats()}
    assert ran == {("linear", "tessera"), ("attention", "tessera")}, tt.stats()
    assert sum(r["calls"] for r in tt.stats()) == 5  # qkv, attention, proj, fc1+GELU, fc2
    assert isinstance(model.mlp[1], nn.Identity) and model.mlp[0].activation == "gelu_tanh"
    # Compiled whole (fake tensors through the custom operators), still on the bundle.
    tt.stats(reset=True)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(block_input), want, rtol=1e-4, atol=1e-4)
    assert {r["ran"] for r in tt.stats()} == {"tessera"}
    tt.unpatch(model)
    tt.stats(reset=True)
    with torch.no_grad():
        torch.testing.assert_close(model(block_input), want)
    assert tt.stats() == [] and isinstance(model.mlp[1], nn.GELU)


def test_patched_block_calls_skip_the_dispatcher(bundle, block_input, monkeypatch):
    """A patched Linear's weight is an nn.Parameter: eager calls without gradients still go straight
    to the kernel (torch's Python custom-operator path costs tens of microseconds per call)."""
    model = tt.patch(gpt_block.make(DIM, HEADS), bundle)
    through = []
    for name in ("linear", "attention"):
        op = getattr(torch.ops.tessera, name)
        monkeypatch.setattr(torch.ops.tessera, name, lambda *a, _op=op, _n=name: (through.append(_n), _op(*a))[1])
    tt.stats(reset=True)
    with torch.no_grad():
        model(block_input)
    assert through == [] and sum(r["calls"] for r in tt.stats() if r["ran"] == "tessera") == 5, (through, tt.stats())
    # Negative control: a tensor subclass is not plain: its calls go through the operator.
    class Sub(torch.Tensor):
        pass
    with torch.no_grad():
        tt.linear(block_input.as_subclass(Sub), model.qkv.weight, model.qkv.bias, bundle)
    assert through and set(through) == {"linear"}, through


def test_another_width_falls_back_op_by_op(bundle):
    model = gpt_block.make(2 * DIM, HEADS)  # no kernel of the bundle has these shapes
    x = torch.randn(1, 16, 2 * DIM)
    with torch.no_grad():
        want = model(x)
        got = tt.patch(model, bundle)(x)
    torch.testing.assert_close(got, want)
    assert {r["ran"] for r in tt.stats()} == {"torch"}


def test_tune_model_writes_and_loads_the_bundle(tmp_path):
    torch.manual_seed(7)
    model = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16)).eval()
    x = torch.randn(8, 32)
    with torch.no_grad():
        want = model(x)
    seen = []
    b = tt.tune_model(model, (x,), out=str(tmp_path / "b"), db=str(tmp_path / "t.db"), trials=2, min_time=0.005,
                      threads=1, on_kernel=lambda k, r: seen.append((k.name, r.outcome)))
    assert len(seen) == 2 and all(o != "nothing-correct" for _, o in seen), seen
    tt.stats(reset=True)
    with torch.no_grad():
        torch.testing.assert_close(model(x), want, rtol=1e-4, atol=1e-4)
    assert [r["how"] for r in tt.stats()] == ["exact", "exact"]  # tuned at these shapes
    assert isinstance(b, tt.Bundle)
    with pytest.raises(tt.InvalidArgumentError, match="ran no operator"):
        tt.tune_model(nn.Sequential(nn.ReLU()), (x,), out=str(tmp_path / "c"), db=str(tmp_path / "t.db"))


def _blocktime_after_load(folder, openmp, env_value):
    """KMP_BLOCKTIME in the environment and as libomp (libomp.so.5, what a bundle loaded with
    openmp="libomp" runs on) reads it, in a fresh process that imports tessera.torch and loads the
    bundle at `folder`, with the variable unset or set to `env_value`."""
    code = ("import ctypes, os, sys, tessera.torch as tt; tt.load(sys.argv[1], openmp=sys.argv[2]); "
            "omp = ctypes.CDLL('libomp.so.5'); omp.omp_get_max_threads(); "
            "print(os.environ.get('KMP_BLOCKTIME', '-'), omp.kmp_get_blocktime())")
    env = {k: v for k, v in os.environ.items() if k != "KMP_BLOCKTIME"}
    if env_value is not None:
        env["KMP_BLOCKTIME"] = env_value
    out = subprocess.run([sys.executable, "-c", code, folder, openmp], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_a_libomp_bundle_keeps_its_workers_from_spinning_against_torch(bundle):
    # Unset: libomp's workers sleep at once after a parallel kernel (0 ms), not the default 200 ms.
    assert _blocktime_after_load(bundle.folder, "libomp", None) == ["0", "0"]
    # The negative controls: a value the user set is what libomp runs with; a bundle on torch's
    # own team (the default) leaves libomp's default alone.
    assert _blocktime_after_load(bundle.folder, "libomp", "7") == ["7", "7"]
    assert _blocktime_after_load(bundle.folder, "gomp", None) == ["-", "200"]


def test_tuning_measures_without_the_sleep_setting(monkeypatch):
    monkeypatch.delenv("KMP_BLOCKTIME", raising=False)
    monkeypatch.setattr(tt, "_blocktime_ours", [False])
    tt._libomp_workers_sleep()
    assert os.environ["KMP_BLOCKTIME"] == "0"
    with tt._tuning_env():
        assert "KMP_BLOCKTIME" not in os.environ
    assert os.environ["KMP_BLOCKTIME"] == "0"
    # A value the user set is theirs, tuning included.
    monkeypatch.setenv("KMP_BLOCKTIME", "7")
    monkeypatch.setattr(tt, "_blocktime_ours", [False])
    tt._libomp_workers_sleep()
    with tt._tuning_env():
        assert os.environ["KMP_BLOCKTIME"] == "7"
