"""Kept weights on the CPU (keep_weights=True): a patched Linear runs the bundle's NN GEMM on a kept
[K, N] copy of its weight (made once, remade when the weight changes: in place, load_state_dict,
.to(), another tensor), equals F.linear, falls back to the GEMM reading the weight as given (NT) on
a bundle without the NN kernel, runs that one when turned off (the default), and forget_copies
drops the copies."""
import gc

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import tessera
import tessera.torch as tt

M, K, N = 48, 64, 96


def _kernels(dtype, keep):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(K, N)).to(dtype)
    return tt.record(model, torch.randn(M, K, dtype=dtype), keep_weights=keep)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """Two bundles of untuned defaults for a Linear at M x N x K, f32 and bf16: "both" has the NN
    GEMM (a kept weight) and the NT one (the weight as given); "old" only the NT one, as a bundle
    recorded before weights were kept."""
    out = {}
    for name, layouts in (("both", (True, False)), ("old", (False,))):
        ks = [k for keep in layouts for dt in (torch.float32, torch.bfloat16) for k in _kernels(dt, keep)]
        folder = str(tmp_path_factory.mktemp("kept") / name)
        with pytest.warns(tessera.TesseraWarning):
            tessera.bundle(ks, targets=["host"], out=folder, missing="default")
        out[name] = tt.load(folder)
    return out


def _patched(bundle, dtype=torch.float32, **kw):
    kw.setdefault("keep_weights", True)
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(K, N)).to(dtype).eval()
    return tt.patch(model, bundle, **kw), model[0]


def _row():
    (r,) = [r for r in tt.stats() if r["op"] == "linear"]
    return r


def _tol(dtype):
    return {"rtol": 1e-4, "atol": 1e-4} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}


def test_record_takes_the_layout():
    (nn_k,) = _kernels(torch.float32, True)
    (nt_k,) = _kernels(torch.float32, False)
    assert nn_k.workload != nt_k.workload
    assert nn_k.workload == tessera.gemm(M, N, K, epilogue="acc + bias", shapes={"bias": (N,)}).workload
    assert nt_k.workload == tessera.gemm(M, N, K, trans_b=True, epilogue="acc + bias", shapes={"bias": (N,)}).workload


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kept_copy_runs_the_nn_kernel_and_equals_f_linear(bundles, dtype):
    model, lin = _patched(bundles["both"], dtype)
    x = torch.randn(M, K, dtype=dtype)
    with torch.no_grad():
        y = model(x)
        copy = tt._kept[id(lin.weight)][6]
        y2 = model(x)
    torch.testing.assert_close(y, F.linear(x, lin.weight, lin.bias), **_tol(dtype))
    assert torch.equal(y, y2) and tt._kept[id(lin.weight)][6] is copy  # made once, then read
    assert torch.equal(copy, lin.weight.detach().t()) and copy.is_contiguous()
    r = _row()
    nt_name = [k.name for k in bundles["old"].lib.kernels if k.dtype == r["dtype"]][0]
    assert r["ran"] == "tessera" and r["calls"] == 2 and r["staged"] == 0 and r["kernel"] != nt_name, r


def test_a_changed_weight_changes_the_output(bundles):
    model, lin = _patched(bundles["both"])
    x = torch.randn(M, K)

    def check():
        with torch.no_grad():
            torch.testing.assert_close(model(x), F.linear(x, lin.weight, lin.bias), rtol=1e-4, atol=1e-4)
    check()
    with torch.no_grad():
        lin.weight.mul_(-2)  # in place: the version counter moves
    check()
    state = {"0.weight": torch.randn(N, K), "0.bias": torch.randn(N)}
    model.load_state_dict(state)
    check()
    assert torch.equal(lin.weight, state["0.weight"])
    lin.weight = nn.Parameter(torch.randn(N, K))  # another tensor: its own copy
    check()
    model.to(torch.bfloat16)  # new memory and dtype under the same Parameter
    with torch.no_grad():
        xb = x.bfloat16()
        torch.testing.assert_close(model(xb), F.linear(xb, lin.weight, lin.bias), rtol=2e-2, atol=2e-2)
    assert {r["ran"] for r in tt.stats()} == {"tessera"}
    # A write behind the version counter (through .data) is not seen until forget_copies.
    with torch.no_grad():
        model(xb)
        lin.weight.data.mul_(3)
        stale = model(xb)
        tt.forget_copies()
        assert not tt._kept
        torch.testing.assert_close(model(xb), F.linear(xb, lin.weight, lin.bias), rtol=2e-2, atol=2e-2)
    assert not torch.allclose(stale.float(), F.linear(xb, lin.weight, lin.bias).float(), rtol=2e-2, atol=2e-2)


def test_a_copy_never_remade_would_be_seen(bundles, monkeypatch):
    """Negative control of the test above: with the version counter hidden from the kept copy's
    check, an in-place update leaves the old copy in use and the comparison tells it apart."""
    model, lin = _patched(bundles["both"])
    x = torch.randn(M, K)
    monkeypatch.setattr(tt._cuda, "_version", lambda t: 0)
    with torch.no_grad():
        model(x)
        lin.weight.mul_(-2)
        y = model(x)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(y, F.linear(x, lin.weight, lin.bias), rtol=1e-4, atol=1e-4)


def test_inference_tensors_get_a_copy_per_call(bundles):
    with torch.inference_mode():
        model, lin = _patched(bundles["both"])
        x = torch.randn(M, K)
        y = model(x)
        lin.weight.mul_(2)  # an inference tensor has no version counter: never kept, so never stale
        y2 = model(x)
    torch.testing.assert_close(y2, F.linear(x, lin.weight, lin.bias), rtol=1e-4, atol=1e-4)
    assert not torch.equal(y, y2) and id(lin.weight) not in tt._kept
    assert _row()["ran"] == "tessera"


def test_an_nt_only_bundle_still_runs_its_kernel(bundles):
    model, lin = _patched(bundles["old"])
    x = torch.randn(M, K)
    with torch.no_grad():
        y = model(x)
    torch.testing.assert_close(y, F.linear(x, lin.weight, lin.bias), rtol=1e-4, atol=1e-4)
    r = _row()
    assert r["ran"] == "tessera" and "weight read as given" in r["how"], r
    assert r["kernel"] in {k.name for k in bundles["old"].lib.kernels} and id(lin.weight) not in tt._kept


def test_turned_off_runs_the_nt_kernel_without_a_copy(bundles):
    model, lin = _patched(bundles["both"], keep_weights=False)
    x = torch.randn(M, K)
    assert not tt.patch(nn.Sequential(nn.Linear(K, N)), bundles["both"])[0].keep_weights  # off by default
    with torch.no_grad():
        torch.testing.assert_close(model(x), F.linear(x, lin.weight, lin.bias), rtol=1e-4, atol=1e-4)
    off = _row()
    assert off["ran"] == "tessera" and id(lin.weight) not in tt._kept and "keep_weights=False" in repr(lin)
    tt.patch(model, bundles["both"], keep_weights=True)  # on again
    tt.stats(reset=True)
    with torch.no_grad():
        model(x)
    on = _row()
    assert id(lin.weight) in tt._kept and on["kernel"] != off["kernel"], (on, off)
    assert off["kernel"] in {k.name for k in bundles["old"].lib.kernels}


def test_the_operator_and_compile_read_the_kept_copy(bundles):
    b = bundles["both"]
    torch.manual_seed(3)
    x, w, bias = torch.randn(M, K), torch.randn(N, K), torch.randn(N)
    want = F.linear(x, w, bias)
    torch.testing.assert_close(torch.ops.tessera.linear(x, w, bias, "", b.id), want, rtol=1e-4, atol=1e-4)
    assert id(w) not in tt._kept  # the operator's default: the weight as given
    torch.testing.assert_close(torch.ops.tessera.linear(x, w, bias, "", b.id, True), want, rtol=1e-4, atol=1e-4)
    assert id(w) in tt._kept and len({r["kernel"] for r in tt.stats()}) == 2
    model, lin = _patched(b)
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    tt.stats(reset=True)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), F.linear(x, lin.weight, lin.bias), rtol=1e-4, atol=1e-4)
        lin.weight.add_(1)
        torch.testing.assert_close(compiled(x), F.linear(x, lin.weight, lin.bias), rtol=1e-4, atol=1e-4)
    assert {r["ran"] for r in tt.stats()} == {"tessera"} and id(lin.weight) in tt._kept
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        y = torch.ops.tessera.linear(torch.empty(M, K), torch.empty(N, K), None, "", b.id, True)
    assert y.shape == (M, N)


def test_forget_copies_and_a_dead_weight_drop_the_copy(bundles):
    model, lin = _patched(bundles["both"])
    with torch.no_grad():
        model(torch.randn(M, K))
    assert id(lin.weight) in tt._kept
    tt.forget_copies()
    assert id(lin.weight) not in tt._kept
    with torch.no_grad():
        model(torch.randn(M, K))
    key = id(lin.weight)
    assert key in tt._kept
    del model, lin
    gc.collect()  # the patched forward's closure holds the model in a cycle
    assert key not in tt._kept
