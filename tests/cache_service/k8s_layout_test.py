#!/usr/bin/env python3
"""Checks the Kubernetes layout (deploy/kubernetes/) without a cluster. First the static checks of
k8s_layout_checks.py (API schemas, names and labels, security settings, probes, every `tessera`
command line against this binary's --help); then what can run here, as the pods run it:
- two `tessera serve` replicas with the Deployment's arguments and environment (TESSERA_STORE, no
  password in it, PGPASSWORD beside it) on one store, behind nginx with the ConfigMap's nginx.conf
  (nginx -t first); replica 0 is cut off from PostgreSQL (a relay the test cuts), then killed, and
  every request through the front must still be answered;
- the serve pod's wait-for-store init container and the backup CronJob's pg_dump script;
- the tune-all Job's shards as dry runs over its ConfigMap's kernel list (each kernel once);
- make-secrets.sh with k8s_fake_kubectl.py, which runs `kubectl exec` here and records what would
  reach the cluster (no secret on a command line; the Secrets of secrets.template.yaml).
With PG_DIR (scripts/pg_server.sh's folder: the ctest fixture `postgres`) the store is a database of
its own on that server; without it a SQLite file, and the PostgreSQL-only steps are skipped. No
cluster, image or GPU is used. kubernetes-validate comes from PyPI into a venv kept in BUILD_DIR.

Usage: k8s_layout_test.py TESSERA_BIN BUILD_DIR [PG_DIR]"""
import glob
import json
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from k8s_layout_checks import (HERE, LAYOUT, ROOT, SERVE_HOST, check, containers, doc_commands, load_layout,
                               static_checks, tessera_argv)

VALIDATOR = "kubernetes-validate==1.37.0"


def ensure_venv(build_dir):
    """Re-runs this script under a venv (kept in the build dir) holding kubernetes-validate and PyYAML."""
    venv = os.path.join(build_dir, "k8s-validate-venv")
    py = os.path.join(venv, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    stamp = os.path.join(venv, "requirement.txt")
    if not (os.path.exists(stamp) and open(stamp).read() == VALIDATOR):
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
        subprocess.run([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", VALIDATOR], check=True)
        open(stamp, "w").write(VALIDATOR)
    os.execv(py, [py] + sys.argv)


# ---- what runs here ---------------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, proc, seconds=15, ctx=None):
    end = time.time() + seconds
    while time.time() < end:
        if proc.poll() is not None:
            return None
        try:
            with urllib.request.urlopen(url, timeout=1, context=ctx) as r:
                return r.status
        except Exception:
            time.sleep(0.1)
    return None


def get(url, ctx=None, data=None, headers=None):
    req = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except Exception:
        return 0, b""


class Store:
    """Where the replicas keep their data: a database of its own on the tests' PostgreSQL server
    (as the pods see it: a URL without the password, PGPASSWORD beside it), or a SQLite file."""

    def __init__(self, pg_dir, work):
        self.pg, self.admin_url, self.db = False, None, None
        if pg_dir:
            url = open(os.path.join(pg_dir, "url")).read().strip()
            m = re.fullmatch(r"postgresql://([^:@/]+)@([^/]+)/(\w+)", url)
            if not check(m is not None, "the tests' PostgreSQL server URL has user, host and database, no password"):
                raise SystemExit(1)
            user, host, _ = m.groups()
            # The password is in the server's pgpass file (scripts/pg_server.sh), for PGPASSFILE.
            self.password = open(os.path.join(pg_dir, "pgpass")).read().strip().rsplit(":", 1)[1]
            os.environ["PGPASSFILE"] = os.path.join(pg_dir, "pgpass")
            self.db = f"k8s_layout_{os.getpid()}_{int(time.time())}"
            self.admin_url = url
            r = subprocess.run(["psql", "-qAt", "-d", url, "-c", f"CREATE DATABASE {self.db}"], capture_output=True,
                               text=True)
            check(r.returncode == 0, f"CREATE DATABASE {self.db} " + r.stderr.strip())
            self.location = f"postgresql://{user}@{host}/{self.db}?sslmode=disable"
            self.pg = True
        else:
            self.password = "unused"
            self.location = os.path.join(work, "store.db")
        self.env = dict(os.environ, TESSERA_STORE=self.location, PGPASSWORD=self.password)

    def created(self):
        if not self.pg:
            return os.path.exists(self.location)
        r = subprocess.run(["psql", "-qAt", "-d", self.location, "-c", "SELECT count(*) FROM information_schema.tables "
                            "WHERE table_schema = current_schema()"], capture_output=True, text=True, env=self.env)
        return r.returncode == 0 and int(r.stdout.strip() or 0) > 0

    def drop(self):
        if self.pg:
            subprocess.run(["psql", "-qAt", "-d", self.admin_url, "-c", f"DROP DATABASE IF EXISTS {self.db} WITH (FORCE)"],
                           capture_output=True)


def serve_container(templates):
    for _, d, t in templates:
        for c, _ in containers(t):
            argv = tessera_argv(c)
            if argv and argv[0] == "serve":
                return argv, c
    raise SystemExit("no serve container in the layout")


def run_init_container(templates, store):
    """The serve pod's wait-for-store script, as written, against the store (PostgreSQL only)."""
    for _, _, t in templates:
        for init in t["spec"].get("initContainers", []):
            if init["name"] == "wait-for-store" and store.pg:
                t0 = time.time()
                try:
                    ok = subprocess.run(init["command"], env=store.env, capture_output=True, timeout=20).returncode == 0
                except subprocess.TimeoutExpired:      # it loops for 5 minutes while the store is not there
                    ok = False
                check(ok and time.time() - t0 < 10,
                      f"wait-for-store: pg_isready accepts the pods' TESSERA_STORE ({time.time() - t0:.1f} s)")


def run_backup_script(by_kind, store, work):
    """The backup CronJob's script with its /backups in a folder here: a dump pg_restore can read."""
    if not store.pg:
        return
    c = by_kind["CronJob"]["tessera-pg-backup"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    backups = os.path.join(work, "backups")
    os.makedirs(backups)
    script = c["command"][2].replace("/backups", backups)
    r = subprocess.run(c["command"][:2] + [script], env=store.env, capture_output=True, text=True, timeout=120)
    dumps = glob.glob(os.path.join(backups, "tessera-*.dump"))
    ok = r.returncode == 0 and len(dumps) == 1
    if ok:
        listing = subprocess.run(["pg_restore", "--list", dumps[0]], capture_output=True, text=True)
        ok = listing.returncode == 0 and "TABLE DATA" in listing.stdout and "tokens" in listing.stdout
    check(ok, "the backup CronJob's script writes a pg_dump of the store that pg_restore reads "
          + r.stderr.strip()[-200:])


class Partition(threading.Thread):
    """A TCP relay between one replica and PostgreSQL that the test can cut, as a network partition
    would: open connections are reset, new ones refused."""

    def __init__(self, target_port):
        super().__init__(daemon=True)
        self.target, self.socks, self.cut_ = target_port, [], False
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]

    def run(self):
        while not self.cut_:
            try:
                a, _ = self.listener.accept()
                b = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                return
            if self.cut_:
                a.close()
                b.close()
                return
            self.socks += [a, b]
            for x, y in ((a, b), (b, a)):
                threading.Thread(target=self.pump, args=(x, y), daemon=True).start()

    @staticmethod
    def pump(x, y):
        try:
            while data := x.recv(65536):
                y.sendall(data)
        except OSError:
            pass
        for s in (x, y):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.cut_ = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)    # wakes the accept() (close alone does not)
        except OSError:
            pass
        self.listener.close()
        for s in self.socks:
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                s.close()
            except OSError:
                pass


def run_replicas_and_front(tessera, templates, by_kind, work, procs, store):
    """Two replicas started as the Deployment starts them, on one store, behind the ConfigMap's
    nginx.conf; replica 0 (on PostgreSQL) reaches the server through a relay the test cuts, then it
    is killed; the front must answer every request through replica 1 in both cases."""
    argv, _ = serve_container(templates)
    env = store.env
    partition = None
    if store.pg:
        pg_port = int(re.search(r"@[^:/]+:(\d+)/", store.location).group(1))
        partition = Partition(pg_port)
        partition.start()
    reader = subprocess.run([tessera, "serve", "token", "add", "reader", "--scope", "read", "--store", store.location],
                            capture_output=True, text=True, cwd=work, env=env)
    check(reader.returncode == 0 and reader.stdout.startswith("tsk_"),
          "`tessera serve token add --store FILE` (as make-secrets.sh calls it, LOCATION from TESSERA_STORE) " + reader.stderr.strip()[-200:])
    ports = []
    for i in range(2):
        port = free_port()
        # The Deployment's arguments, with a loopback address and a free port.
        args = [a for a in argv if not a.startswith(("--bind", "--port"))] + ["--bind=127.0.0.1", f"--port={port}"]
        renv = dict(env)
        if i == 0 and partition:
            renv["TESSERA_STORE"] = store.location.replace(f":{pg_port}/", f":{partition.port}/")
        procs.append(subprocess.Popen([tessera, *args], cwd=work, env=renv, stdout=subprocess.DEVNULL,
                                      stderr=open(os.path.join(work, f"serve{i}.log"), "w")))
        ports.append(port)
        check(wait_http(f"http://127.0.0.1:{port}/healthz", procs[-1]) == 200, f"replica {i}: /healthz answers 200")
        check(get(f"http://127.0.0.1:{port}/readyz")[0] == 200, f"replica {i}: /readyz answers 200")
    check(store.created(), f"serve took its store from TESSERA_STORE ({'PostgreSQL' if store.pg else 'SQLite'}: "
          "its tables were created)")

    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if not nginx or not shutil.which("openssl"):
        print("skip nginx: nginx or openssl is not installed (scripts/setup.sh installs them)")
        return 77
    conf = by_kind["ConfigMap"]["tessera-front"]["data"]["nginx.conf"]
    cert, key = os.path.join(work, "tls.crt"), os.path.join(work, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days",
                    "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], check=True,
                   capture_output=True)
    front_port = free_port()
    check(conf.count(f"server {SERVE_HOST} max_fails=0;") == 2, "nginx.conf: the serve Service, twice, as upstream")
    conf = conf.replace(f"server {SERVE_HOST}", f"server 127.0.0.1:{ports[0]}", 1)
    conf = conf.replace(f"server {SERVE_HOST}", f"server 127.0.0.1:{ports[1]}", 1)
    for old, new in [("listen 8443 ssl;", f"listen 127.0.0.1:{front_port} ssl;"),
                     ("/etc/tessera-front/tls/tls.crt", cert), ("/etc/tessera-front/tls/tls.key", key)]:
        check(old in conf, f"nginx.conf holds `{old}`")
        conf = conf.replace(old, new)
    prefix = os.path.join(work, "nginx") + "/"
    os.makedirs(prefix)
    open(os.path.join(prefix, "nginx.conf"), "w").write(conf)
    # As the image runs it (-e stderr -p PREFIX -c FILE); the folders are the pod's /tmp.
    cmd = [nginx, "-e", "stderr", "-p", prefix, "-c", os.path.join(prefix, "nginx.conf")]
    t = subprocess.run(cmd + ["-t"], capture_output=True, text=True)
    check(t.returncode == 0, "nginx -t accepts the ConfigMap's nginx.conf " + t.stderr.strip().replace("\n", " | ")[-300:])
    procs.append(subprocess.Popen(cmd + ["-g", "daemon off;"], stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(work, "nginx.log"), "w")))
    ctx = ssl.create_default_context(cafile=cert)
    front = f"https://127.0.0.1:{front_port}"
    check(wait_http(front + "/healthz", procs[-1], ctx=ctx) == 200, "through the front: /healthz 200")
    check(get(front + "/readyz", ctx)[0] == 200, "through the front: /readyz 200")
    cenv = dict(os.environ, TESSERA_CACHE_URL=front, TESSERA_TOKEN=reader.stdout.strip(), TESSERA_CA_CERT=cert)
    stats = subprocess.run([tessera, "cache", "stats"], capture_output=True, text=True, env=cenv, cwd=work)
    check(stats.returncode == 0 and "tessera-cache" in stats.stdout, "tessera cache stats over https through the front")
    big = get(front + "/healthz", ctx, headers={"X-Big": "a" * 9000})
    check(big[0] == 431 and b"headers-too-large" in big[1], f"a 9 KiB header line: {big[0]} (deploy/nginx's limits)")

    auth = {"Authorization": "Bearer " + reader.stdout.strip(), "Content-Type": "application/json"}
    if partition:
        # Replica 0 loses PostgreSQL: its /readyz answers 503 (in a cluster it would leave the
        # Service within seconds); until then the front sends its share to the other replica.
        partition.cut()
        end = time.time() + 10
        while get(f"http://127.0.0.1:{ports[0]}/readyz")[0] != 503 and time.time() < end:
            time.sleep(0.1)
        check(get(f"http://127.0.0.1:{ports[0]}/readyz")[0] == 503, "replica 0 cut off from PostgreSQL: /readyz 503")
        statuses = [get(front + "/readyz", ctx)[0] for _ in range(20)]
        statuses += [get(front + "/v1/workers", ctx, headers=auth)[0] for _ in range(10)]
        check(statuses == [200] * 30, "one replica without its store: 30 requests through the front answered by "
              f"the other: {sorted(set(statuses))}")
    else:
        print("skip: the store is SQLite (no PG_DIR): no replica can lose it alone")

    procs[0].kill()                       # replica 0 dies; nginx still sends it every other request
    procs[0].wait()
    statuses = [get(front + "/readyz", ctx)[0] for _ in range(20)]
    statuses += [get(front + "/v1/best/batch", ctx, data=b'{"key_ids":[]}', headers=auth)[0] for _ in range(10)]
    check(statuses == [200] * 30,
          f"one replica killed: 30 requests (GETs and POSTs) answered by the other: {sorted(set(statuses))}")
    return 0


def run_tune_all_shards(tessera, templates, by_kind, work):
    for _, d, t in templates:
        for c, _ in containers(t):
            argv = tessera_argv(c)
            if not argv or argv[0] != "tune-all":
                continue
            kernels = by_kind["ConfigMap"]["tessera-kernels"]["data"]["kernels.txt"]
            path = os.path.join(work, "kernels.txt")
            open(path, "w").write(kernels)
            lines = [i + 1 for i, l in enumerate(kernels.splitlines()) if l.strip() and not l.strip().startswith("#")]
            n = d["spec"]["completions"]
            rest = argv[argv.index("--"):]
            seen = []
            for i in range(n):
                r = subprocess.run([tessera, "tune-all", path, f"--shard={i}/{n}", "--dry-run", *rest],
                                   capture_output=True, text=True, cwd=work)
                check(r.returncode == 0, f"tune-all shard {i}/{n} of the ConfigMap's list: every line parses "
                      + r.stderr.strip()[-200:])
                seen += [int(x) for x in re.findall(r"kernels\.txt:(\d+): tessera tune", r.stdout)]
            check(sorted(seen) == lines, f"the {n} shards tune each of the {len(lines)} kernels once: {sorted(seen)}")
            return
    check(False, "a tune-all Job exists")




def run_make_secrets(tessera, work, store):
    state = os.path.join(work, "kubectl")
    os.makedirs(os.path.join(state, "bin"))
    fake = os.path.join(state, "bin", "kubectl")
    shutil.copy(os.path.join(HERE, "k8s_fake_kubectl.py"), fake)
    os.chmod(fake, 0o755)
    os.symlink(os.path.abspath(tessera), os.path.join(state, "bin", "tessera"))
    env = dict(store.env, KUBECTL=fake, FAKE_STATE=state, FAKE_STORE=store.location,
               PATH=os.path.join(state, "bin") + os.pathsep + os.environ["PATH"])
    script = os.path.join(LAYOUT, "make-secrets.sh")
    results = [subprocess.run(["bash", script, *a], capture_output=True, text=True, env=env, cwd=work)
               for a in (["store"], ["tls", os.path.join(work, "tls.crt"), os.path.join(work, "tls.key")], ["tokens"])]
    for r in results:
        check(r.returncode == 0, "make-secrets.sh: " + (r.stdout + r.stderr).strip().replace("\n", " | ")[-300:])
    have = json.load(open(os.path.join(state, "secrets.json"))) if os.path.exists(os.path.join(state, "secrets.json")) else {}
    import yaml
    template = {d["metadata"]["name"]: set(d["stringData"]) for d in
                yaml.safe_load_all(open(os.path.join(LAYOUT, "secrets.template.yaml"))) if d}
    check({n: set(v) for n, v in have.items()} == template,
          f"make-secrets.sh makes the Secrets and keys of secrets.template.yaml: {sorted(have)}")
    pw = have.get("tessera-store", {}).get("password", "")
    check(len(pw) >= 32 and have["tessera-store"]["url"].startswith("postgresql://tessera@"),
          "tessera-store: a random password of 32+ characters, a URL without it")
    argv = open(os.path.join(state, "argv.jsonl")).read()
    tokens = [have.get(n, {}).get("token", "") for n in ("tessera-worker-token", "tessera-tuner-token")]
    check(all(t.startswith("tsk_") for t in tokens) and not any(s and s in argv for s in [pw, *tokens]),
          "no password or token on any kubectl command line")
    listing = subprocess.run([tessera, "serve", "token", "list", "--store", store.location], capture_output=True,
                             text=True, env=store.env)
    check(re.search(r"gpu-farm\s.*worker", listing.stdout) and re.search(r"tune-all\s.*write", listing.stdout),
          "the store holds the tokens: gpu-farm (worker), tune-all (write)")


def main():
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    tessera, build_dir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    pg_dir = os.path.abspath(sys.argv[3]) if len(sys.argv) == 4 else None
    ensure_venv(build_dir)
    docs = load_layout()
    check(len(docs) >= 15, f"{len(docs)} YAML documents parsed under deploy/kubernetes")
    by_kind, templates = static_checks(tessera, docs)
    for f in ("Dockerfile", "README.md", "make-secrets.sh"):
        check(os.path.exists(os.path.join(LAYOUT, f)), f"deploy/kubernetes/{f} exists")
    doc_commands(tessera, os.path.join(ROOT, "docs", "team.md"), at_least=5)
    doc_commands(tessera, os.path.join(LAYOUT, "README.md"), at_least=0)
    kubectl = shutil.which("kubectl")
    if kubectl:      # optional: not on a fresh machine (not in Debian's archive)
        for k in (LAYOUT, os.path.join(LAYOUT, "tune-all")):
            r = subprocess.run([kubectl, "kustomize", k], capture_output=True, text=True)
            check(r.returncode == 0 and "registry.example.com/tessera/" in r.stdout,
                  f"kubectl kustomize {os.path.relpath(k, ROOT)} builds and maps the images")
    work = tempfile.mkdtemp(prefix="tessera-k8s-")
    os.chmod(work, 0o755)        # nginx's workers (another user under root) read its files
    procs, rc, store = [], 0, None
    try:
        store = Store(pg_dir, work)
        run_init_container(templates, store)
        rc = run_replicas_and_front(tessera, templates, by_kind, work, procs, store)
        run_tune_all_shards(tessera, templates, by_kind, work)
        run_make_secrets(tessera, work, store)
        run_backup_script(by_kind, store, work)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
        if store:
            store.drop()
        shutil.rmtree(work, ignore_errors=True)
    if check.failed:
        return 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
