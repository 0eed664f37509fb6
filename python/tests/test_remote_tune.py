"""Python's tune through the shared service, as `tessera tune` does it: measured by a live
`tessera worker` (workers=True, with threads= in the key), and over https with a private CA
(ca_cert=) behind the shipped nginx front. Real processes on loopback: `tessera serve`, a worker,
nginx."""
import os
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

import tessera
from conftest import free_port, tessera_bin

UI_TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "ui")


def add_token(exe, db, name, scope):
    out = subprocess.run([exe, "serve", "token", "add", name, "--scope", scope, "--db", db],
                         capture_output=True, text=True, check=True).stdout
    return next(w for w in out.split() if w.startswith("tsk_"))


def wait_for_port(port, proc):
    for _ in range(200):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            assert proc.poll() is None, "the service exited at start"
            time.sleep(0.05)
    raise AssertionError("the service does not listen")


@pytest.fixture
def team(tmp_path):
    """`tessera serve` on loopback with a write token ("tuner") and a worker token ("box"), and one
    `tessera worker --threads 1` registered with it: (url, tuner token, the service's store)."""
    exe = tessera_bin()
    if not exe:
        pytest.skip("the tessera CLI is not next to this package")
    sdb = str(tmp_path / "service.db")
    tuner, box = add_token(exe, sdb, "tuner", "write"), add_token(exe, sdb, "box", "worker")
    port = free_port()
    serve = subprocess.Popen([exe, "serve", "--db", sdb, "--port", str(port), "--bind", "127.0.0.1",
                              "--lease-seconds", "3", "--worker-ttl", "3"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
    env.update(TESSERA_CACHE_URL=url, TESSERA_TOKEN=box)
    log = open(tmp_path / "worker.log", "w")
    worker = None
    try:
        wait_for_port(port, serve)
        worker = subprocess.Popen([exe, "worker", "--poll", "0.05", "--threads", "1"], env=env, stdout=log,
                                  stderr=subprocess.STDOUT)
        for _ in range(600):
            if "registered as worker" in open(tmp_path / "worker.log").read():
                break
            assert worker.poll() is None, open(tmp_path / "worker.log").read()
            time.sleep(0.05)
        else:
            raise AssertionError("the worker did not register: " + open(tmp_path / "worker.log").read())
        yield url, tuner, sdb
    finally:
        for p in (worker, serve):
            if p is not None:
                p.terminate()
                p.wait(timeout=10)
        log.close()


def test_tune_measured_by_a_live_worker_keyed_by_its_threads(team, db):
    url, tuner, sdb = team
    k = tessera.gemm(32, 32, 32)
    res = tessera.tune(k, trials=3, db=db, cache=url, token=tuner, workers=True, worker_wait=20, threads=1,
                       min_time=0.005, top_k=1, progress=False)
    assert res.outcome == "tuned" and res.best.ok
    assert res.record.key["units"] == 1  # threads=1 is the key's units, as --threads 1
    # The worker measured the candidates: the service holds them under its token; the tuner wrote
    # only its own measurement of the winner (the spot check: this machine is the worker's).
    with sqlite3.connect(sdb) as c:
        writers = dict(c.execute("SELECT writer, count(*) FROM records GROUP BY 1").fetchall())
        measured = c.execute("SELECT count(DISTINCT worker_id) FROM job_items WHERE worker_id != ''").fetchone()[0]
    assert writers.get("box", 0) >= 3 and writers.get("tuner", 0) <= 1, writers
    assert measured == 1
    # Two threads: no live worker has that key; the tune says so in one line and what to start.
    with pytest.raises(tessera.ServiceUnavailableError, match="no live worker for host.*--threads 2"):
        tessera.tune(k, trials=2, db=db, cache=url, token=tuner, workers=True, worker_wait=1.5, threads=2,
                     progress=False)
    # As the CLI's flags: workers measure on the workers' hardware and need the service.
    with pytest.raises(tessera.InvalidArgumentError, match="workers=True measures through the shared service"):
        tessera.tune(k, trials=2, db=db, workers=True, progress=False)
    with pytest.raises(tessera.InvalidArgumentError, match="workers=True measures on the workers' devices; drop device"):
        tessera.tune(k, trials=2, db=db, cache=url, token=tuner, workers=True, device=0, progress=False)


def test_tune_shares_over_https_only_with_the_private_ca(server, tmp_path):
    url, token = server
    sys.path.insert(0, UI_TESTS)
    try:
        import nginx_front
    finally:
        sys.path.remove(UI_TESTS)
    front = nginx_front.start(int(url.rsplit(":", 1)[1]), str(tmp_path))
    if front is None:
        pytest.skip("nginx or openssl is missing (scripts/setup.sh installs both)")
    try:
        k = tessera.gemm(24, 24, 24)
        # Without the CA the service's certificate does not verify: the cache is down for this tune
        # (a warning, as for any unreachable service) and nothing is shared.
        with pytest.warns(tessera.TesseraWarning, match="continuing without it"):
            tessera.tune(k, trials=2, db=str(tmp_path / "no_ca.db"), cache=front.url, token=token, min_time=0.005,
                         top_k=0, progress=False)
        assert tessera.Client(url, token).best(k)["kind"] == "miss"
        # With it, the winner reaches the service through the TLS front.
        res = tessera.tune(k, trials=2, db=str(tmp_path / "ca.db"), cache=front.url, token=token,
                           ca_cert=front.cert, min_time=0.005, top_k=0, progress=False)
        hit = tessera.Client(url, token).best(k)
        assert hit["kind"] == "hit" and hit["record"].config == res.config
    finally:
        front.stop()
