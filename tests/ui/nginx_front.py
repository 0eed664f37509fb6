"""Owns running the shipped nginx front (deploy/nginx/tessera-cache.conf) before a service for the
dashboard's browser test: TLS with a self-signed certificate made here, nginx as a child with its
own prefix (no system service), the file's values substituted as
tests/cache_service/nginx_front_test.py does."""
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SITE = os.path.join(HERE, "..", "..", "deploy", "nginx", "tessera-cache.conf")


class Front:
    def __init__(self, proc, port, cert):
        self.proc, self.port, self.cert = proc, port, cert
        self.url = f"https://127.0.0.1:{port}"

    def header(self, path, name):
        ctx = ssl.create_default_context(cafile=self.cert)
        with urllib.request.urlopen(self.url + path, context=ctx, timeout=10) as r:
            return r.headers.get(name, "")

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start(serve_port, work):
    """A running front before 127.0.0.1:serve_port, or None where nginx or openssl is missing."""
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not nginx or not shutil.which("openssl"):
        return None
    d = os.path.join(work, "nginx")
    os.makedirs(os.path.join(d, "logs"), exist_ok=True)
    cert, key = os.path.join(d, "cert.pem"), os.path.join(d, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    site = open(SITE).read()
    for old, new in [("server 127.0.0.1:8787;", f"server 127.0.0.1:{serve_port};"),
                     ("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;"),
                     ("/etc/ssl/tessera/cert.pem", cert), ("/etc/ssl/tessera/key.pem", key)]:
        assert old in site, old
        site = site.replace(old, new)
    open(os.path.join(d, "site.conf"), "w").write(site)
    open(os.path.join(d, "nginx.conf"), "w").write(f"""
user root;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/logs/error.log warn;
events {{ worker_connections 256; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  include {d}/site.conf;
}}
""")
    proc = subprocess.Popen([nginx, "-p", d, "-c", os.path.join(d, "nginx.conf"), "-g", "daemon off;"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return Front(proc, port, cert)
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("nginx exited at start")
            time.sleep(0.05)
    raise RuntimeError("nginx does not listen")
