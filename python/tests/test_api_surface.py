"""The Python API as a demanding user meets it: docstrings on every public member, type stubs that
match the extension (mypy's stubtest, and the wrapper exposing what the extension's Kernel has),
one exception per kind of failure, progress by default, bfloat16 round trips, the thread count in
every host key, and a shared cache whose refusals are errors, never silent misses."""
import inspect
import io
import os
import subprocess
import sys

import numpy as np
import pytest

import tessera
from tessera import _tessera


def _public_members(obj):
    for name, value in vars(obj).items():
        if name.startswith("_"):
            continue
        yield name, value


def test_every_public_member_has_a_docstring():
    missing = []
    for name in tessera.__all__:
        obj = getattr(tessera, name)
        if name == "ALL_CORES":
            continue
        if not (inspect.getdoc(obj) or "").strip():
            missing.append(name)
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for member, value in _public_members(obj):
                doc = getattr(value, "__doc__", None)
                if isinstance(value, (int, float, str, dict, tuple)):
                    continue
                if not (doc or "").strip():
                    missing.append(f"{name}.{member}")
    assert not missing, f"{len(missing)} public members without a docstring: {missing}"
    # A negative control: the check above does see a member without one.
    class Bare:
        def f(self):
            pass
    assert not (getattr(Bare.f, "__doc__", None) or "").strip()


def test_the_wrapper_exposes_what_the_extensions_kernel_has():
    # The stub of _tessera.Kernel is what an editor shows; each of its public members must work on
    # tessera.Kernel too (Kernel.bytes was in the stub and raised AttributeError), unless the
    # wrapper names it as internal with a reason.
    k = tessera.gemm(8, 8, 8)
    for name, _ in _public_members(_tessera.Kernel):
        if name in tessera._KERNEL_INTERNAL:
            continue
        assert hasattr(tessera.Kernel, name), f"tessera.Kernel lacks {name}, which _tessera.Kernel has"
    assert k.bytes == 3 * 8 * 8 * 4 and k.flops == 2 * 8 ** 3


def _mypy(args, cwd):
    pkg_root = os.path.dirname(os.path.dirname(tessera.__file__))
    env = dict(os.environ, MYPYPATH=pkg_root, PYTHONPATH=pkg_root)
    return subprocess.run([sys.executable, "-m", "mypy", "--python-version", "3.11", "--no-incremental",
                           "--cache-dir", os.path.join(str(cwd), ".mypy_cache")] + args,
                          capture_output=True, text=True, env=env, cwd=str(cwd))


def test_stubs_match_the_module(tmp_path):
    pytest.importorskip("mypy")
    # 1. Every name of the generated stub exists in the extension and the other way round.
    import ast
    stub = ast.parse(open(os.path.join(os.path.dirname(tessera.__file__), "_tessera.pyi")).read())
    in_stub = {n.name for n in stub.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    at_runtime = {n for n in dir(_tessera) if not n.startswith("_")}
    assert in_stub == at_runtime, (sorted(in_stub - at_runtime), sorted(at_runtime - in_stub))
    for cls in (n for n in stub.body if isinstance(n, ast.ClassDef)):
        stub_members = {m.name for m in cls.body if isinstance(m, ast.FunctionDef) and not m.name.startswith("_")}
        runtime = {m for m in vars(getattr(_tessera, cls.name)) if not m.startswith("_")}
        assert stub_members == runtime, (cls.name, sorted(stub_members ^ runtime))
    # 2. The package type-checks against the stub: every call into the extension has the
    # parameters the stub (the bindings) declares.
    run = _mypy(["-p", "tessera"], tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # A negative control: a call the stub does not allow is caught.
    bad = tmp_path / "bad.py"
    bad.write_text("from tessera import _tessera\n_tessera.gemm(1, 2, 3).key('host', 1, 2)\n")
    assert _mypy([str(bad)], tmp_path).returncode != 0


def test_exceptions_are_one_class_per_kind():
    k = tessera.gemm(16, 16, 16)
    with pytest.raises(tessera.InvalidConfigError):
        k.run(*k.random_inputs(), config={"MC": 7})
    with pytest.raises(tessera.UnsupportedError):
        k.run(*k.random_inputs(), target="gfx942")
    with pytest.raises(tessera.UnsupportedError):
        tessera.tune(k, target="gfx942", trials=1, progress=False)
    with pytest.raises(tessera.InvalidArgumentError, match="threads applies to the host target only"):
        k.key("sm_90", threads=1)
    assert issubclass(tessera.AccessDeniedError, PermissionError)
    assert issubclass(tessera.ServiceUnavailableError, ConnectionError)
    assert issubclass(tessera.TesseraWarning, RuntimeWarning)


def test_tune_reports_progress_by_default_and_is_silenced_by_an_argument(db, capfd):
    k = tessera.gemm(32, 32, 32)
    tessera.tune(k, trials=3, db=db, min_time=0.002, top_k=1)
    err = capfd.readouterr().err
    assert "trial 3/3" in err and "best" in err and "GFLOP/s" in err
    tessera.tune(k, trials=3, db=db, min_time=0.002, top_k=1, force=True, progress=False)
    assert "trial" not in capfd.readouterr().err
    seen = []
    tessera.tune(k, trials=2, db=db, min_time=0.002, top_k=0, force=True, progress=lambda t, p: seen.append(p["trial"]))
    assert seen == [1, 2]
    # Above 100 % of a peak is never shown bare.
    p = tessera.Progress(tessera.elementwise("y = x + 1", shape=(8,)), stream=io.StringIO())
    class T:
        ok, status, gflops, gbps, peak_fraction = True, "ok", 0.0, 40.0, 9.0
    p(T(), {"trial": 1, "trials": 1, "elapsed": 0.1, "eta": 0.0, "best": T()})
    assert "900% of peak: above it" in p._stream.getvalue()


def test_speedup_over_default_when_already_tuned(db):
    k = tessera.gemm(64, 64, 64)
    first = tessera.tune(k, trials=4, db=db, min_time=0.002, top_k=2, progress=False)
    assert first.outcome == "tuned" and first.speedup_over_default >= 1.0
    again = tessera.tune(k, trials=4, db=db, min_time=0.002, progress=False)
    assert again.outcome == "already-tuned"
    assert again.speedup_over_default is not None and again.speedup_over_default > 0
    # Without a store there is no stored default to compare with: None, not 0.0.
    assert tessera.tune(k, trials=0, time_budget=0.5, progress=False).speedup_over_default != 0.0


def test_bf16_round_trips_as_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    k = tessera.elementwise("y = bf16(f32(x) * 2)", shape=(4, 32), dtype="bf16")
    x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(4, 32).astype(ml_dtypes.bfloat16)
    y = k.run(x)
    assert y.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(y.astype(np.float32), x.astype(np.float32) * 2)
    # uint16 bits in, uint16 bits out, as before.
    bits = x.view(np.uint16)
    assert k.run(bits).dtype == np.uint16
    np.testing.assert_array_equal(tessera.bf16_bits_to_float32(k.run(bits)), y.astype(np.float32))


def test_threads_is_part_of_every_host_key(db):
    k = tessera.gemm(32, 32, 32)
    assert k.key(threads=1)["units"] == 1 and k.key(threads=1)["key_id"] != k.key()["key_id"]
    assert "THREADS" not in k.default_config(threads=1)
    res = tessera.tune(k, trials=2, db=db, min_time=0.002, top_k=1, threads=1, progress=False)
    assert res.record.key["units"] == 1
    assert tessera.best(k, db=db, threads=1).config == res.config
    assert tessera.best(k, db=db) is None or k.key()["units"] == 1
    near = tessera.nearest(k, db=db)
    assert near and near[0][1].key["units"] == 1
    rows = tessera.compare(k, ["host"], db=db)["rows"]
    if k.key()["units"] != 1:
        assert rows[0]["kind"] == "none" and "threads 1 (asked" in rows[0]["note"]
    assert tessera.compare(k, ["host"], db=db, threads=1)["rows"][0]["kind"] == "measured"
    c = res.run(*k.random_inputs())
    assert c.shape == (32, 32)


def test_lookups_warn_about_a_store_that_does_not_exist(tmp_path):
    k = tessera.gemm(8, 8, 8)
    typo = str(tmp_path / "tesera.db")
    with pytest.warns(tessera.TesseraWarning, match="no store at .*tesera.db"):
        assert tessera.best(k, db=typo) is None
    assert not os.path.exists(typo)


def test_a_refused_token_is_an_error_not_a_miss(server, db):
    url, token = server
    k = tessera.gemm(16, 16, 16)
    bad = tessera.Client(url, "tsk_not-a-token")
    with pytest.raises(tessera.AccessDeniedError, match="401"):
        bad.best(k)
    with pytest.raises(tessera.AccessDeniedError):
        bad.status()
    with pytest.raises(tessera.AccessDeniedError, match="needs a read token, but no token was given"):
        tessera.tune(k, trials=1, db=db, cache=url, token="", progress=False)
    with pytest.raises(tessera.AccessDeniedError):
        tessera.best(k, cache=url, token="tsk_wrong")
    assert tessera.Client(url, token).whoami()["scope"] == "write"
    # A service that is down stays a miss with a warning.
    from conftest import free_port
    with pytest.warns(tessera.TesseraWarning):
        assert tessera.best(k, cache=f"http://127.0.0.1:{free_port()}", token=token) is None
