#!/usr/bin/env python3
"""Runs the shipped nginx front (deploy/nginx/tessera-cache.conf) before a real `tessera serve` on
loopback, with TLS (a self-signed certificate made here), and repeats the attacks of issue 15
through it: slow-drip heads, dripping bodies, a flood of header fields, many requests from one
address. Throughout, /healthz through the front must answer: nine probes in ten within 100 ms and
every one within 1 s (a starved front times out at seconds; one slow probe on a busy 2-core CI
machine is not starvation). Also checks that the tessera client talks to the service through it
(https, TESSERA_CA_CERT). No system service: nginx runs as a child with `-p <tmpdir>`. Exits 77 (skipped) where nginx or openssl is missing.

Usage: nginx_front_test.py TESSERA_BIN"""
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, "..", "..", "deploy", "nginx", "tessera-cache.conf")
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, seconds=10):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit(f"process exited early ({proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


class Front:
    def __init__(self, port, cafile):
        self.port = port
        self.ctx = ssl.create_default_context(cafile=cafile)

    def connect(self, source="127.0.0.1", timeout=5):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout, source_address=(source, 0))
        return self.ctx.wrap_socket(raw, server_hostname="127.0.0.1")

    def request(self, raw_request, timeout=5, source="127.0.0.1"):
        """Sends bytes, returns (status, body) of the answer (0 when the connection just closed)."""
        s = self.connect(source, timeout)
        try:
            s.sendall(raw_request)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            head, _, body = data.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/"):
                return 0, b""
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            while len(body) < length:
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
            return int(head.split()[1]), body
        except (ssl.SSLError, OSError):
            return 0, b""
        finally:
            s.close()


class Probe(threading.Thread):
    """GET /healthz through the front every 50 ms on a fresh TLS connection."""

    def __init__(self, front):
        super().__init__(daemon=True)
        self.front, self.stop, self.failures, self.times_ms = front, False, 0, []

    def run(self):
        while not self.stop:
            t0 = time.monotonic()
            status, _ = self.front.request(b"GET /healthz HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n")
            self.times_ms.append((time.monotonic() - t0) * 1000)
            self.failures += status != 200
            time.sleep(0.05)

    def finish(self):
        self.stop = True
        self.join()
        self.count = len(self.times_ms)
        ordered = sorted(self.times_ms) or [0.0]
        self.worst_ms = ordered[-1]
        self.p90_ms = ordered[min(len(ordered) - 1, (len(ordered) * 9) // 10)]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        check.failed = True


check.failed = False


def drip(sockets, data, step_s, total_s):
    """One byte per socket per step; returns how many were closed by the other side."""
    closed = set()
    i, end = 0, time.time() + total_s
    while time.time() < end:
        for n, s in enumerate(sockets):
            if n in closed:
                continue
            try:
                s.setblocking(False)
                try:
                    if s.recv(4096) == b"":
                        closed.add(n)
                        continue
                except (ssl.SSLWantReadError, BlockingIOError):
                    pass
                if i < len(data):
                    s.setblocking(True)
                    s.settimeout(1)
                    s.send(data[i:i + 1])
            except (ssl.SSLError, OSError):
                closed.add(n)
        i += 1
        time.sleep(step_s)
    return len(closed)


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    tessera = sys.argv[1]
    if not NGINX or not shutil.which("openssl"):
        print("skipped: nginx or openssl is not installed (scripts/setup.sh installs them)")
        return 77
    work = tempfile.mkdtemp(prefix="tessera-nginx-")
    procs = []
    try:
        db = os.path.join(work, "cache.db")
        reader = subprocess.run([tessera, "serve", "token", "add", "r", "--db", db], capture_output=True, text=True,
                                check=True).stdout.strip()
        serve_port = free_port()
        serve = subprocess.Popen([tessera, "serve", "--db", db, "--port", str(serve_port), "--sync", "normal",
                                  "--max-connections-per-client", "0"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        procs.append(serve)
        wait_port(serve_port, serve)

        cert, key = os.path.join(work, "cert.pem"), os.path.join(work, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        front_port = free_port()
        site = open(SITE).read()
        # The shipped file, with this machine's values and short timeouts and caps (so the test
        # takes seconds, not minutes).
        for old, new in [("server 127.0.0.1:8787;", f"server 127.0.0.1:{serve_port};"),
                         ("listen 443 ssl;", f"listen 127.0.0.1:{front_port} ssl;"),
                         ("/etc/ssl/tessera/cert.pem", cert), ("/etc/ssl/tessera/key.pem", key),
                         ("client_header_timeout 10s;", "client_header_timeout 2s;"),
                         ("client_body_timeout 10s;", "client_body_timeout 2s;"),
                         ("limit_conn tessera_per_client 64;", "limit_conn tessera_per_client 20;")]:
            assert old in site, old
            site = site.replace(old, new)
        open(os.path.join(work, "site.conf"), "w").write(site)
        os.makedirs(os.path.join(work, "logs"), exist_ok=True)
        open(os.path.join(work, "nginx.conf"), "w").write(f"""
user root;
worker_processes 1;
pid {work}/nginx.pid;
error_log {work}/logs/error.log warn;
events {{ worker_connections 2048; }}
http {{
  access_log off;
  client_body_temp_path {work}/body;
  proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fastcgi;
  uwsgi_temp_path {work}/uwsgi;
  scgi_temp_path {work}/scgi;
  include {work}/site.conf;
}}
""")
        nginx = subprocess.Popen([NGINX, "-p", work, "-c", os.path.join(work, "nginx.conf"), "-g", "daemon off;"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(nginx)
        wait_port(front_port, nginx)
        front = Front(front_port, cert)

        status, body = front.request(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        check(status == 200 and b'"ok"' in body, "GET /healthz through TLS")
        env = dict(os.environ, TESSERA_CACHE_URL=f"https://127.0.0.1:{front_port}", TESSERA_TOKEN=reader,
                   TESSERA_CA_CERT=cert)
        stats = subprocess.run([tessera, "cache", "stats"], capture_output=True, text=True, env=env)
        check(stats.returncode == 0 and '"service": "tessera-cache"' in stats.stdout,
              "tessera cache stats over https with TESSERA_CA_CERT")
        env.pop("TESSERA_CA_CERT")
        bad = subprocess.run([tessera, "cache", "stats"], capture_output=True, text=True, env=env)
        check(bad.returncode != 0, "without the certificate the client refuses the self-signed front")

        # 1. 200 slow-drip heads (one byte every 200 ms) from one address: held by nginx, closed at
        # the 2 s header deadline; /healthz keeps answering.
        probe = Probe(front)
        probe.start()
        heads = [front.connect("127.0.0.2") for _ in range(200)]
        closed = drip(heads, b"GET /healthz HTTP/1.1\r\nHost: drip\r\nX-Pad: " + b"a" * 200, 0.2, 3.5)
        for s in heads:
            s.close()
        check(closed == 200, f"slow-drip heads closed at the header deadline: {closed}/200")

        # 2. Dripping bodies, 40 from one address: 20 are in progress at most (limit_conn, 503 for
        # the others); the rest are dropped by client_body_timeout (a pause of 3 s > 2 s).
        bodies = [front.connect("127.0.0.3") for _ in range(40)]
        statuses = []
        for s in bodies:
            s.sendall(b"POST /v1/best/batch HTTP/1.1\r\nHost: drip\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 1000\r\nAuthorization: Bearer " + reader.encode() + b"\r\n\r\n{")
        time.sleep(3.2)
        for s in bodies:
            try:
                s.settimeout(1)
                data = s.recv(4096)
                statuses.append(int(data.split()[1]) if data.startswith(b"HTTP/") else 0)
            except (ssl.SSLError, OSError, IndexError, ValueError):
                statuses.append(0)
            s.close()
        busy = statuses.count(503)
        timed_out = statuses.count(408) + statuses.count(0)
        check(busy == 20, f"limit_conn: {busy} of 40 requests from one address refused with 503")
        check(timed_out == 20, f"client_body_timeout: {timed_out} stalled bodies dropped")

        # 3. A million header fields: refused after 32 KiB with 431.
        flood = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"A: b\r\n" * 1000000 + b"\r\n"
        t0 = time.monotonic()
        status, body = front.request(flood, source="127.0.0.4")
        check(status in (431, 0) and time.monotonic() - t0 < 5, f"10^6 header fields: {status} in "
              f"{(time.monotonic() - t0) * 1000:.0f} ms")
        status, body = front.request(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n")
        check(status == 431 and b"headers-too-large" in body, f"a 9 KiB header line: {status}")
        probe.finish()
        check(probe.failures == 0, f"/healthz failures during the attacks: {probe.failures} of {probe.count}")
        check(probe.count >= 20, f"/healthz probes during the attacks: {probe.count}")
        check(probe.p90_ms < 100, f"/healthz p90 during the attacks: {probe.p90_ms:.1f} ms")
        check(probe.worst_ms < 1000, f"slowest /healthz during the attacks: {probe.worst_ms:.1f} ms")
        check(serve.poll() is None and nginx.poll() is None, "both processes still running")
        print(f"[measured] nginx front: /healthz p90 {probe.p90_ms:.1f} ms, worst {probe.worst_ms:.1f} ms "
              f"over {probe.count} probes", flush=True)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 1 if check.failed else 0


if __name__ == "__main__":
    sys.exit(main())
