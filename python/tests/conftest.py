"""Shared fixtures of the Python tests: the shared-cache variables cleared (a developer's
environment must not leak into the tests), a temporary store path."""
import os
import socket
import subprocess
import time

import pytest


@pytest.fixture(autouse=True)
def no_shared_cache(monkeypatch):
    monkeypatch.delenv("TESSERA_CACHE_URL", raising=False)
    monkeypatch.delenv("TESSERA_TOKEN", raising=False)
    monkeypatch.delenv("TESSERA_CA_CERT", raising=False)


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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """A real `tessera serve` on loopback with a write token: (url, token)."""
    exe = tessera_bin()
    if not exe:
        pytest.skip("the tessera CLI is not next to this package")
    sdb = str(tmp_path / "cache.db")
    out = subprocess.run([exe, "serve", "token", "add", "py", "--scope", "write", "--db", sdb],
                         capture_output=True, text=True, check=True).stdout
    token = next(w for w in out.split() if w.startswith("tsk_"))
    port = free_port()
    proc = subprocess.Popen([exe, "serve", "--db", sdb, "--port", str(port), "--bind", "127.0.0.1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
        except OSError:
            time.sleep(0.05)
    yield url, token
    proc.terminate()
    proc.wait(timeout=10)
