"""Kernels from Python: builders, running on numpy arrays in place (and staged when they are not
aligned), dtypes f32/f16/bf16, GPU targets' emulation, and errors as exceptions with the CLI's
one-line messages."""
import numpy as np
import pytest

import tessera


def test_gemm_matches_numpy_in_place():
    k = tessera.gemm(96, 80, 64)
    assert k.family == "gemm" and [t.name for t in k.inputs] == ["A", "B"] and k.outputs[0].shape == (96, 80)
    a, b = k.random_inputs(seed=1)
    c = tessera.empty((96, 80))
    ptr = c.ctypes.data
    out = k.run(a, b, c, copy=False)  # copy=False: fails unless every array is used in place
    assert out is c and c.ctypes.data == ptr
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_outputs_are_allocated_when_only_inputs_are_given():
    k = tessera.gemm(33, 17, 9, trans_b=True)
    a = np.random.default_rng(0).standard_normal((33, 9), dtype=np.float32)
    b = np.random.default_rng(1).standard_normal((17, 9), dtype=np.float32)  # stored N x K
    c = k.run(a, b)  # plain numpy arrays: staged through aligned copies
    assert tessera.is_aligned(c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


def test_unaligned_output_is_written_back_or_refused():
    k = tessera.elementwise("y = x * 2.0 + 1.0", shapes={"x": (8, 16)})
    x = tessera.aligned(np.arange(128, dtype=np.float32).reshape(8, 16))
    buf = np.zeros(8 * 16 + 1, dtype=np.float32)
    y = buf[1:].reshape(8, 16)  # 4 bytes past an aligned start at best: never 64-aligned
    assert not tessera.is_aligned(y)
    with pytest.raises(tessera.InvalidArgumentError, match="64-byte aligned"):
        k.run(x, y, copy=False)
    k.run(x, y)
    np.testing.assert_array_equal(y, x * 2 + 1)


def test_config_and_results_agree_across_configs():
    k = tessera.gemm(64, 64, 64)
    a, b = k.random_inputs()
    default = k.run(a, b)
    space = {s["name"]: s for s in k.space()}
    assert "schedule" in space
    other = dict(k.default_config())
    other["schedule"] = next(v for v in space["schedule"]["domain"] if v != other["schedule"])
    np.testing.assert_allclose(k.run(a, b, config=other), default, rtol=1e-5, atol=1e-5)
    assert k.compile(other).config != k.compile(None).config


def test_elementwise_broadcast_gelu():
    k = tessera.elementwise("y = gelu(x * s + b)", shapes={"x": (64, 256), "s": (256,), "b": (256,)})
    names = [t.name for t in k.inputs]
    arrs = {t.name: a for t, a in zip(k.inputs, k.random_inputs(3))}
    y = k.run(*[arrs[n] for n in names])
    z = arrs["x"] * arrs["s"] + arrs["b"]
    ref = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)


def test_attention_against_numpy_causal_gqa():
    k = tessera.attention(heads=4, seq=64, head_dim=32, heads_kv=2, causal=True)
    q, kk, v = k.random_inputs(5)
    o = k.run(q, kk, v)
    g = 4 // 2
    kr, vr = np.repeat(kk, g, axis=1), np.repeat(v, g, axis=1)
    s = q.astype(np.float64) @ kr.transpose(0, 1, 3, 2) / np.sqrt(32)
    s = np.where(np.tril(np.ones((64, 64), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ vr
    np.testing.assert_allclose(o, ref, rtol=1e-4, atol=1e-5)
    assert k.check(q, kk, v, o)["ok"]


def test_f16_uses_numpy_float16():
    k = tessera.gemm(32, 32, 32, dtype="f16")
    a, b = [tessera.aligned(x.astype(np.float16)) for x in tessera.gemm(32, 32, 32).random_inputs()]
    c = k.run(a, b)
    assert c.dtype == np.float16
    np.testing.assert_allclose(c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32), rtol=2e-2, atol=2e-2)
    assert k.check(a, b, c)["ok"]


def test_bf16_takes_bits_and_ml_dtypes():
    k = tessera.gemm(32, 48, 16, dtype="bf16")
    a, b = k.random_inputs(7)
    assert a.dtype == np.uint16
    c = k.run(a, b)
    ref = tessera.bf16_bits_to_float32(a) @ tessera.bf16_bits_to_float32(b)
    np.testing.assert_allclose(tessera.bf16_bits_to_float32(c), ref, rtol=2e-2, atol=2e-2)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a2, b2 = a.view(ml_dtypes.bfloat16), b.view(ml_dtypes.bfloat16)
    c2 = tessera.empty((32, 48), "bf16").view(ml_dtypes.bfloat16)
    k.run(a2, b2, c2, copy=False)
    np.testing.assert_array_equal(c2.view(np.uint16), c)


def test_ir_round_trip_and_load(tmp_path):
    k = tessera.gemm(16, 16, 16, epilogue="relu(acc + bias)", shapes={"bias": (16,)})
    p = tmp_path / "k.tsr"
    p.write_text(k.ir)
    k2 = tessera.load(p)
    assert k2.workload == k.workload and [t.name for t in k2.inputs] == ["A", "B", "bias"]
    a, b, bias = k2.random_inputs()
    np.testing.assert_allclose(k2.run(a, b, bias), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-5)


def test_gpu_target_emulated_and_unavailable():
    k = tessera.gemm(40, 24, 16)
    a, b = k.random_inputs()
    c = k.run(a, b, target="sm_80", emulate=True)  # the mapped kernel, one fiber per GPU thread
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    for mode in ("mapped", "pre"):
        np.testing.assert_allclose(k.run(a, b, target="gfx942", emulate=mode), a @ b, rtol=1e-4, atol=1e-4)
    with pytest.raises(tessera.InvalidArgumentError, match="emulate takes"):
        k.run(a, b, target="sm_80", emulate="fast")
    with pytest.raises(tessera.UnsupportedError, match="cannot run here"):
        k.run(a, b, target="sm_80")


def test_errors_are_exceptions_with_the_cli_message():
    with pytest.raises(tessera.InvalidArgumentError, match="^invalid-argument: unknown dtype 'f64'"):
        tessera.gemm(8, 8, 8, dtype="f64")
    with pytest.raises(tessera.ParseError):
        tessera.elementwise("y = gelu(x *", shapes={"x": (4, 4)})
    with pytest.raises(tessera.TesseraError):
        tessera.gemm(0, 8, 8)
    k = tessera.gemm(8, 8, 8)
    with pytest.raises(tessera.InvalidConfigError, match="^invalid-config"):
        k.compile({"MR": 7777})
    with pytest.raises(ValueError):  # InvalidArgumentError is a ValueError
        k.run(np.zeros((8, 8), np.float64), np.zeros((8, 8), np.float32))
    with pytest.raises(tessera.InvalidArgumentError, match="takes 2 inputs"):
        k.run(np.zeros((8, 8), np.float32))
    with pytest.raises(tessera.InvalidArgumentError, match="unknown target"):
        k.run(*k.random_inputs(), target="sm_12")
    a, b = k.random_inputs()
    with pytest.raises(tessera.InvalidArgumentError, match="overlaps"):
        k.run(a, b, a)  # output aliasing an input


def test_dlpack_objects_pass_through():
    k = tessera.gemm(16, 16, 16)
    a, b = k.random_inputs()
    c = tessera.empty((16, 16))

    class Wrapped:  # a minimal DLPack producer (what torch/jax CPU tensors look like)
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kw):
            return self.arr.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

    k.run(Wrapped(a), Wrapped(b), Wrapped(c))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
