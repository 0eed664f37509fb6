"""tessera.torch on a real CUDA device (label gpu; skipped without one): the bundle's kernels for
the device's chip, eagerly and inside a CUDA graph capture, against torch's own operators."""
import pytest
import torch
import torch.nn.functional as F

import tessera
import tessera.torch as tt

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device (torch.cuda.is_available())")]
M, K, N, H, S, D = 64, 64, 192, 4, 32, 16


@pytest.fixture(scope="module")
def gpu_bundle(tmp_path_factory):
    major, minor = torch.cuda.get_device_capability()
    out = str(tmp_path_factory.mktemp("ttgpu") / "bundle")
    kernels = [tessera.gemm(M, N, K, trans_b=True, epilogue="gelu(acc + bias)", shapes={"bias": (N,)}),
               tessera.elementwise("y = gelu(x + b)", {"x": (M, N), "b": (N,)}),
               tessera.attention(H, S, D, batch=2, causal=True)]
    with pytest.warns(tessera.TesseraWarning):
        tessera.bundle(kernels, targets=[f"sm_{major}{minor}"], out=out, missing="default")
    return tt.load(out)


def test_ops_on_cuda_tensors_eager_and_in_a_graph(gpu_bundle):
    torch.manual_seed(0)
    x, w, b = (torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda"), torch.randn(N, device="cuda"))
    q, k, v = (torch.randn(2, H, S, D, device="cuda") for _ in range(3))

    def run():
        return (tt.linear(x, w, b, gpu_bundle, activation="gelu_tanh"),
                tt.bias_gelu(F.linear(x, w, b), b, gpu_bundle, approximate="tanh"),
                tt.scaled_dot_product_attention(q, k, v, gpu_bundle, is_causal=True))

    want = (F.gelu(F.linear(x, w, b), approximate="tanh"), F.gelu(F.linear(x, w, b) + b, approximate="tanh"),
            F.scaled_dot_product_attention(q, k, v, is_causal=True))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():  # warm-up on a side stream, as torch.cuda.graph asks
        eager = run()
    torch.cuda.current_stream().wait_stream(s)
    for got, ref in zip(eager, want):
        torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-3)
    assert {r["ran"] for r in tt.stats()} == {"tessera"}, tt.stats()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        captured = run()
    x.copy_(torch.randn_like(x))  # new inputs, same addresses: the replay computes on them
    g.replay()
    torch.cuda.synchronize()
    want = (F.gelu(F.linear(x, w, b), approximate="tanh"), F.gelu(F.linear(x, w, b) + b, approximate="tanh"),
            F.scaled_dot_product_attention(q, k, v, is_causal=True))
    for got, ref in zip(captured, want):
        torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-3)


def test_kept_weight_copies_follow_the_weights(gpu_bundle):
    """A linear call keeps its weight's transposed copy for the next call (tessera._torch_cuda.Launch):
    an in-place write to the weight, another weight of the same shape, another stream and a graph
    replayed after a write must each give torch's result, not the kept copy's."""
    torch.manual_seed(1)
    x, w, b = (torch.randn(M, K, device="cuda"), torch.randn(N, K, device="cuda"), torch.randn(N, device="cuda"))

    def check(w):
        got = tt.linear(x, w, b, gpu_bundle, activation="gelu_tanh")
        torch.testing.assert_close(got, F.gelu(F.linear(x, w, b), approximate="tanh"), rtol=1e-3, atol=1e-3)

    with torch.no_grad():
        check(w)
        check(w)  # the kept copy
        w.mul_(-0.5)  # an in-place write: the version counter moves
        check(w)
        check(torch.randn_like(w))  # another weight, same shape
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            w.add_(1.0)
            check(w)
        torch.cuda.current_stream().wait_stream(s)
        check(w)
        # A graph captured on a stream whose call kept a copy transposes on every replay: a write to
        # the weight after the capture is seen.
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            check(w)  # a kept copy for stream s
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            y = tt.linear(x, w, b, gpu_bundle, activation="gelu_tanh")
        w.mul_(2.0)
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(y, F.gelu(F.linear(x, w, b), approximate="tanh"), rtol=1e-3, atol=1e-3)
    assert {r["ran"] for r in tt.stats()} == {"tessera"}, tt.stats()
