"""tessera.torch with a shape range (`tessera bundle --dispatch`): one shape-generic GEMM kernel
serves every M of its range for nn.Linear, found by the runtime's range dispatch; an M outside the
range runs torch's operator, and the log line names the range."""
import json
import logging
import os
import subprocess

import pytest
import torch
import torch.nn.functional as F

import tessera
import tessera.torch as tt

N, K, LO, HI = 48, 32, 1, 64


@pytest.fixture(scope="module")
def range_bundle(tmp_path_factory):
    exe = os.environ.get("TESSERA_BIN")
    if not exe or not os.path.exists(exe):
        pytest.skip("the tessera CLI is not given (TESSERA_BIN)")
    d = tmp_path_factory.mktemp("range")
    top = tessera.gemm(HI, N, K, trans_b=True, epilogue="acc + bias", shapes={"bias": (N,)})
    # Runtime sizes need a schedule of the blis family: the default's blocking, that schedule.
    cfg = ",".join(f"{k}={v}" for k, v in sorted({**top.default_config(threads=1), "schedule": "blis"}.items()))
    rule = {"format": "tessera-dispatch-1", "kernel": top.name, "arch": top.key("host", threads=1)["arch"], "threads": 1,
            "kernel_ir": top.ir, "dim": "M", "lo": LO, "hi": HI, "configs": [cfg],
            "buckets": [{"lo": LO, "hi": HI, "config": 0}]}
    (d / "rule.json").write_text(json.dumps(rule))
    r = subprocess.run([exe, "bundle", "--dispatch", str(d / "rule.json"), "--db", str(d / "t.db"), "--out", str(d / "b")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return tt.load(str(d / "b"))


def test_every_m_of_the_range_runs_the_shape_generic_kernel(range_bundle, caplog):
    torch.manual_seed(8)
    w, b = torch.randn(N, K), torch.randn(N)
    for m in (1, 7, 33, HI):
        x = torch.randn(m, K)
        torch.testing.assert_close(tt.linear(x, w, b, range_bundle), F.linear(x, w, b), rtol=1e-4, atol=1e-4)
    rows = tt.stats()
    assert [r["ran"] for r in rows] == ["tessera"] * 4
    assert all(r["how"].startswith(f"range ") and f"M {LO}..{HI}" in r["how"] for r in rows)
    # Outside the range: torch, and the line says which range the bundle serves.
    with caplog.at_level(logging.WARNING, logger="tessera.torch"):
        x = torch.randn(HI + 1, K)
        torch.testing.assert_close(tt.linear(x, w, b, range_bundle), F.linear(x, w, b))
    assert tt.stats()[-1]["ran"] == "torch"
    assert any(f"M={HI + 1} is outside the range" in m for m in caplog.messages), caplog.messages
    # The same shapes without the bias are another kernel: torch runs them.
    tt.linear(torch.randn(8, K), w, None, range_bundle)
    assert tt.stats()[-1]["ran"] == "torch"
