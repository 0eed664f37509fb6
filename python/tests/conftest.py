"""Shared fixtures of the Python tests: the shared-cache variables cleared (a developer's
environment must not leak into the tests), a temporary store path."""
import os

import pytest


@pytest.fixture(autouse=True)
def no_shared_cache(monkeypatch):
    monkeypatch.delenv("TESSERA_CACHE_URL", raising=False)
    monkeypatch.delenv("TESSERA_TOKEN", raising=False)


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "tessera.db")


def tessera_bin():
    """The CLI next to the build tree's Python package (for the cache service tests)."""
    path = os.environ.get("TESSERA_BIN")
    if path and os.path.exists(path):
        return path
    import tessera
    here = os.path.dirname(os.path.dirname(os.path.abspath(tessera.__file__)))  # build/python
    cand = os.path.join(os.path.dirname(here), "cli", "tessera")
    return cand if os.path.exists(cand) else None
