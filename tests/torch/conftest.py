"""Shared fixtures of the tessera.torch tests: the small GPT block of examples/torch, and one bundle
of the space's default configs for its kernels (no tuning: these tests check correctness and the
dispatch, not speed), built once per session."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "torch"))

import gpt_block  # noqa: E402
import tessera  # noqa: E402
import tessera.torch as tt  # noqa: E402

DIM, HEADS, SEQ, BATCH = 64, 4, 32, 2


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device (ctest python_torch_gpu_tests)")


@pytest.fixture(scope="session")
def block():
    return gpt_block.make(DIM, HEADS)


@pytest.fixture(scope="session")
def block_input():
    torch.manual_seed(1)
    return torch.randn(BATCH, SEQ, DIM)


@pytest.fixture(scope="session")
def block_kernels(block, block_input):
    return tt.record(block, block_input)


@pytest.fixture(scope="session")
def bundle(tmp_path_factory, block_kernels):
    out = str(tmp_path_factory.mktemp("tt") / "bundle")
    extra = [tessera.elementwise("y = gelu(x + b)", {"x": (BATCH * SEQ, 4 * DIM), "b": (4 * DIM,)})]
    with pytest.warns(tessera.TesseraWarning):  # untuned defaults are named
        tessera.bundle(block_kernels + extra, targets=["host"], out=out, missing="default")
    return tt.load(out)


@pytest.fixture(autouse=True)
def fresh_stats():
    tt.stats(reset=True)
    yield
