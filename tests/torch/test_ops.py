"""tessera.torch's operators on CPU tensors: the bundle's host kernels give torch's results within
the reference tolerance, in place, and anything the bundle has no kernel for (another shape, another
epilogue, another dtype, torch's top-left causal mask) runs torch's operator with one log line."""
import logging

import pytest
import torch
import torch.nn.functional as F

import tessera.torch as tt
from conftest import BATCH, DIM, HEADS, SEQ

M = BATCH * SEQ


def rows(op):
    return [r for r in tt.stats() if r["op"] == op]


def test_linear_runs_the_bundle_kernel_in_place(bundle):
    torch.manual_seed(2)
    x, w, b = torch.randn(M, DIM), torch.randn(3 * DIM, DIM), torch.randn(3 * DIM)
    with torch.no_grad():
        y = tt.linear(x.view(BATCH, SEQ, DIM), w, b, bundle)
    torch.testing.assert_close(y, F.linear(x, w, b).view(BATCH, SEQ, 3 * DIM), rtol=1e-4, atol=1e-4)
    (r,) = rows("linear")
    assert r["ran"] == "tessera" and r["calls"] == 1 and r["staged"] == 0 and r["how"] == "default"
    # An input off the 64-byte alignment is staged through one aligned copy, and said so.
    off = torch.empty(M * DIM + 1)[1:].view(M, DIM).copy_(x)
    torch.testing.assert_close(tt.linear(off, w, b, bundle), F.linear(x, w, b), rtol=1e-4, atol=1e-4)
    assert [(r["calls"], r["staged"]) for r in rows("linear")] == [(1, 0), (1, 1)]


def test_linear_gelu_epilogue_and_a_different_epilogue_falls_back(bundle, caplog):
    torch.manual_seed(3)
    x, w, b = torch.randn(M, DIM), torch.randn(4 * DIM, DIM), torch.randn(4 * DIM)
    y = tt.linear(x, w, b, bundle, activation="gelu_tanh")
    torch.testing.assert_close(y, F.gelu(F.linear(x, w, b), approximate="tanh"), rtol=1e-4, atol=1e-4)
    assert rows("linear")[0]["ran"] == "tessera"
    # Same shapes, other epilogue (erf GELU): the bundle's kernel computes something else, so torch runs.
    tt.stats(reset=True)
    with caplog.at_level(logging.WARNING, logger="tessera.torch"):
        for _ in range(3):
            y = tt.linear(x, w, b, bundle, activation="gelu")
    torch.testing.assert_close(y, F.gelu(F.linear(x, w, b)), rtol=1e-5, atol=1e-5)
    (r,) = rows("linear")
    assert r["ran"] == "torch" and r["calls"] == 3 and "no kernel computing it" in r["how"]
    assert len([m for m in caplog.messages if "no linear kernel" in m]) == 1  # once per shape


def test_linear_unknown_shape_and_dtype_fall_back_with_one_line(bundle, caplog):
    x, w, b = torch.randn(M - 1, DIM), torch.randn(DIM, DIM), torch.randn(DIM)
    with caplog.at_level(logging.WARNING, logger="tessera.torch"):
        y1 = tt.linear(x, w, b, bundle)
        y1 = tt.linear(x, w, b, bundle)
        y2 = tt.linear(x.double(), w.double(), b.double(), bundle)
    torch.testing.assert_close(y1, F.linear(x, w, b))
    torch.testing.assert_close(y2, F.linear(x.double(), w.double(), b.double()))
    msgs = [m for m in caplog.messages if "no linear kernel" in m]
    assert len(msgs) == 2, msgs
    assert f"{M - 1}x{DIM}" in msgs[0] and "its gemm f32 shapes" in msgs[0]
    assert {r["ran"] for r in rows("linear")} == {"torch"}


def test_bias_gelu_elementwise(bundle):
    torch.manual_seed(4)
    x, b = torch.randn(BATCH, SEQ, 4 * DIM), torch.randn(4 * DIM)
    y = tt.bias_gelu(x, b, bundle, approximate="tanh")
    torch.testing.assert_close(y, F.gelu(x + b, approximate="tanh"), rtol=1e-4, atol=1e-5)
    assert rows("bias_gelu")[0]["ran"] == "tessera"
    y = tt.bias_gelu(x, b, bundle, approximate="none")  # not in the bundle: torch's
    torch.testing.assert_close(y, F.gelu(x + b))
    assert [r["ran"] for r in rows("bias_gelu")] == ["tessera", "torch"]


def test_attention_causal_and_its_fallbacks(bundle):
    torch.manual_seed(5)
    q, k, v = (torch.randn(BATCH, HEADS, SEQ, DIM // HEADS) for _ in range(3))
    y = tt.scaled_dot_product_attention(q, k, v, bundle, is_causal=True)
    torch.testing.assert_close(y, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=1e-4, atol=1e-5)
    assert rows("attention")[0]["ran"] == "tessera"
    # Not causal: another kernel, not in the bundle.
    y = tt.scaled_dot_product_attention(q, k, v, bundle, is_causal=False)
    torch.testing.assert_close(y, F.scaled_dot_product_attention(q, k, v))
    # Causal with fewer queries than keys: torch's mask is top-left, Tessera's bottom-right.
    y = tt.scaled_dot_product_attention(q[:, :, :8], k, v, bundle, is_causal=True)
    torch.testing.assert_close(y, F.scaled_dot_product_attention(q[:, :, :8], k, v, is_causal=True))
    why = [r["how"] for r in rows("attention") if r["ran"] == "torch"]
    assert len(why) == 2 and any("top-left" in w for w in why)


def test_other_devices_run_torch_with_one_line(bundle, caplog):
    x, w, b = (torch.empty(M, DIM, device="meta"), torch.empty(3 * DIM, DIM, device="meta"),
               torch.empty(3 * DIM, device="meta"))
    with caplog.at_level(logging.WARNING, logger="tessera.torch"):
        y = tt.linear(x, w, b, bundle)
        tt.linear(x, w, b, bundle)
    assert y.shape == (M, 3 * DIM) and y.device.type == "meta"
    assert [m for m in caplog.messages if "meta tensors" in m] and len(caplog.messages) == 1
    assert [(r["ran"], r["calls"]) for r in rows("linear")] == [("torch", 2)]


def test_gradients_run_torch(bundle):
    x = torch.randn(M, DIM, requires_grad=True)
    w, b = torch.randn(DIM, DIM), torch.randn(DIM)
    tt.linear(x, w, b, bundle).sum().backward()
    assert x.grad is not None and not rows("linear")


def test_fake_tensors_do_not_run(bundle):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x, w, b = torch.empty(M, DIM), torch.empty(3 * DIM, DIM), torch.empty(3 * DIM)
        y = torch.ops.tessera.linear(x, w, b, "", bundle.id)
        q = torch.empty(BATCH, HEADS, SEQ, DIM // HEADS)
        o = torch.ops.tessera.attention(q, q, q, True, None, bundle.id)
    assert y.shape == (M, 3 * DIM) and o.shape == q.shape
    assert tt.stats() == []


def test_compile_fullgraph(bundle):
    torch.manual_seed(6)
    x, w, b = torch.randn(M, DIM), torch.randn(4 * DIM, DIM), torch.randn(4 * DIM)
    q, k, v = (torch.randn(BATCH, HEADS, SEQ, DIM // HEADS) for _ in range(3))

    def f(x, q, k, v):
        h = torch.ops.tessera.linear(x, w, b, "gelu_tanh", bundle.id)
        a = torch.ops.tessera.attention(q, k, v, True, None, bundle.id)
        return h.sum() + a.sum(), h

    torch._dynamo.reset()
    g = torch.compile(f, fullgraph=True, backend="aot_eager")
    with torch.no_grad():
        got, h = g(x, q, k, v)
        want, hw = f(x, q, k, v)
    torch.testing.assert_close(h, hw)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-3)
    assert {r["ran"] for r in tt.stats()} == {"tessera"}


def test_bad_bundle_folder_is_one_clear_error(tmp_path):
    with pytest.raises(tt.InvalidArgumentError, match="not a Tessera bundle"):
        tt.load(str(tmp_path))


def test_launch_plans_are_per_shape_flags_and_data(bundle, caplog):
    """A call's launch plan (``tt._calls``) is made on its first call and reused only by calls of the
    same shapes, dtypes and flags; it keeps no pointer of the first call's tensors."""
    torch.manual_seed(7)
    x, w, b = torch.randn(M, DIM), torch.randn(4 * DIM, DIM), torch.randn(4 * DIM)

    def want(x, w, b):
        return F.gelu(F.linear(x, w, b), approximate="tanh")
    for _ in range(2):  # made, then reused
        torch.testing.assert_close(tt.linear(x, w, b, bundle, activation="gelu_tanh"), want(x, w, b), rtol=1e-4, atol=1e-4)
    (run,) = [r for k, r in tt._calls.items() if k[0] == bundle.id and k[1] == "linear" and k[2] == x.shape and
              k[5] == "gelu_tanh"]
    assert type(run.native).__name__ == "BundleCall"  # the native call, not ctypes
    # Other tensors of the same shapes: the same plan on their own memory.
    x2, w2, b2 = torch.randn(M, DIM), torch.randn(4 * DIM, DIM), torch.randn(4 * DIM)
    torch.testing.assert_close(tt.linear(x2, w2, b2, bundle, activation="gelu_tanh"), want(x2, w2, b2), rtol=1e-4, atol=1e-4)
    # A different shape after the cached one: its own plan (torch's here, with its one line).
    x3 = torch.randn(M - 3, DIM)
    with caplog.at_level(logging.WARNING, logger="tessera.torch"):
        torch.testing.assert_close(tt.linear(x3, w, b, bundle, activation="gelu_tanh"), want(x3, w, b))
    assert len([m for m in caplog.messages if "no linear kernel" in m]) == 1
    # The same rows as a 3-D input: another key, the same kernel, the output in the input's shape.
    y = tt.linear(x.view(BATCH, SEQ, DIM), w, b, bundle, activation="gelu_tanh")
    assert y.shape == (BATCH, SEQ, 4 * DIM)
    torch.testing.assert_close(y, want(x, w, b).view(BATCH, SEQ, 4 * DIM), rtol=1e-4, atol=1e-4)
    got = {(r["shape"], r["ran"]): r["calls"] for r in rows("linear")}
    assert got == {(f"{M}x{DIM} {4 * DIM}x{DIM} +bias gelu_tanh", "tessera"): 3,
                   (f"{M - 3}x{DIM} {4 * DIM}x{DIM} +bias gelu_tanh", "torch"): 1,
                   (f"{BATCH}x{SEQ}x{DIM} {4 * DIM}x{DIM} +bias gelu_tanh", "tessera"): 1}, got
    # stats(reset=True) while plans are kept: later calls count in new rows.
    tt.stats(reset=True)
    tt.linear(x, w, b, bundle, activation="gelu_tanh")
    assert [(r["ran"], r["calls"]) for r in rows("linear")] == [("tessera", 1)]


def test_a_wrong_launch_plan_would_be_seen(bundle):
    """Negative control of the test above: the plan of one flag (tanh GELU) handed to a call of
    another (erf GELU, same shapes, torch's) gives results the comparison tells apart."""
    torch.manual_seed(8)
    x, b = torch.randn(BATCH, SEQ, 4 * DIM), torch.randn(4 * DIM)
    tt.bias_gelu(x, b, bundle, approximate="tanh")
    tt.bias_gelu(x, b, bundle, approximate="none")
    keys = {k[4]: k for k in tt._calls if k[0] == bundle.id and k[1] == "bias_gelu" and k[2] == x.shape}
    right = tt._calls[keys["none"]]
    try:
        tt._calls[keys["none"]] = tt._calls[keys["tanh"]]
        y = tt.bias_gelu(x, b, bundle, approximate="none")
    finally:
        tt._calls[keys["none"]] = right
    with pytest.raises(AssertionError):
        torch.testing.assert_close(y, F.gelu(x + b), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tt.bias_gelu(x, b, bundle, approximate="none"), F.gelu(x + b))


def test_non_contiguous_input_is_staged_per_call(bundle):
    """A plan made on a contiguous input still stages a non-contiguous one of the same shape (the
    layout is checked per call, not kept with the plan)."""
    torch.manual_seed(9)
    q, k, v = (torch.randn(BATCH, HEADS, SEQ, DIM // HEADS) for _ in range(3))
    tt.scaled_dot_product_attention(q, k, v, bundle, is_causal=True)
    qt = torch.randn(BATCH, SEQ, HEADS, DIM // HEADS).transpose(1, 2)  # same shape, not contiguous
    y = tt.scaled_dot_product_attention(qt, k, v, bundle, is_causal=True)
    torch.testing.assert_close(y, F.scaled_dot_product_attention(qt, k, v, is_causal=True), rtol=1e-4, atol=1e-5)
    assert [(r["calls"], r["staged"]) for r in rows("attention")] == [(2, 1)]
