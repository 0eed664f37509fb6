"""Owns what the dashboard's browser test (browser_test.py) shares: the service it fills with real
tunes, an API client that asks /v1 what the pages should show, a headless Chromium (Selenium, the
chromedriver from Debian), and the checks: console errors, chart data points, and whether hostile
record strings rendered as text and ran nothing."""
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

# Strings a hostile writer puts where the pages show text. Each would run or add elements if a page
# parsed it as HTML; `window.__xss` is what they set.
PAYLOADS = [
    '<img src=x onerror="window.__xss=1">',
    '<script>window.__xss=2</script>',
    '"><svg onload="window.__xss=3">',
    "<iframe srcdoc='<script>parent.__xss=4</script>'></iframe>",
]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        check.failed += 1
    return cond


check.failed = 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_browser():
    """One line saying what is missing to drive a browser, or None."""
    if not os.path.exists(CHROMIUM) or not os.path.exists(CHROMEDRIVER):
        return "chromium or chromedriver is not installed (scripts/setup.sh installs chromium chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "python3-selenium is not installed (scripts/setup.sh installs it)"
    return None


class Api:
    """The /v1 API as the pages see it, through urllib."""

    def __init__(self, base):
        self.base = base

    def call(self, path, token=None, body=None, method=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method or ("POST" if data else "GET"))
        if token:
            req.add_header("Authorization", "Bearer " + token)
        if data:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read() or b"null"), dict(r.headers)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null"), dict(e.headers)

    def get(self, path, token):
        status, body, _ = self.call(path, token)
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {body}")
        return body

    def records(self, key_id, token):
        out, after = [], 0
        while True:
            page = self.get(f"/v1/records?key_id={key_id}&limit=1000" + (f"&after={after}" if after else ""), token)
            out += page["records"]
            if not page["next_after"]:
                return out
            after = page["next_after"]


class Service:
    """A real `tessera serve` on a loopback port, with tokens of every scope."""

    def __init__(self, tessera, work):
        self.tessera, self.work = tessera, work
        self.db = os.path.join(work, "cache.db")
        self.tokens = {}
        for name, scope in [("ada", "admin"), ("tuner", "write"), ("viewer", "read"), ("mallory", "write"),
                            ("w1", "worker"), ("w2", "worker")]:
            self.tokens[name] = subprocess.run([tessera, "serve", "token", "add", name, "--scope", scope, "--db", self.db],
                                               capture_output=True, text=True, check=True).stdout.strip()
        self.log = open(os.path.join(work, "serve.log"), "w")
        port_file = os.path.join(work, "port")
        self.proc = subprocess.Popen([tessera, "serve", "--db", self.db, "--port", "0", "--port-file", port_file,
                                      "--sync", "normal", "--max-connections-per-client", "0"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(200):
            if os.path.exists(port_file):
                break
            time.sleep(0.05)
        self.port = int(open(port_file).read())
        self.url = f"http://127.0.0.1:{self.port}"
        self.api = Api(self.url)
        self.children = []

    def env(self, token):
        return dict(os.environ, TESSERA_CACHE_URL=self.url, TESSERA_TOKEN=self.tokens[token])

    def tessera_run(self, args, token="tuner", timeout=300):
        r = subprocess.run([self.tessera] + args, capture_output=True, text=True, env=self.env(token), timeout=timeout,
                           cwd=self.work)
        # A refused push is only a warning to a tuner; here it would leave the pages without data.
        if r.returncode != 0 or "refused" in r.stderr:
            raise RuntimeError(f"tessera {' '.join(args)}: exit {r.returncode}\n{r.stderr}")
        return r.stdout

    def start_worker(self, token):
        p = subprocess.Popen([self.tessera, "worker", "--cache", self.url, "--quiet"], env=self.env(token),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.work)
        self.children.append(p)
        return p

    def stop(self):
        for p in self.children + [self.proc]:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
        self.log.close()


def open_browser(work):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1100",
              "--ignore-certificate-errors", "--no-first-run", "--disable-extensions", "--disable-background-networking",
              f"--user-data-dir={os.path.join(work, 'chromium-profile')}"]:
        opts.add_argument(a)
    # The performance log carries the DevTools network events: the headers the browser really sent
    # (Accept-Encoding) and got back (Content-Encoding, Cache-Control).
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=DriverService(CHROMEDRIVER), options=opts)


def network_exchanges(driver):
    """{url: {"request": headers the browser sent, "response": headers it got, "status": code}} of the
    requests since the last call, from the DevTools events in the performance log."""
    urls, req, resp = {}, {}, {}
    for e in driver.get_log("performance"):
        m = json.loads(e["message"])["message"]
        p = m.get("params", {})
        if m["method"] == "Network.requestWillBeSent":
            urls[p["requestId"]] = p["request"]["url"]
        elif m["method"] == "Network.requestWillBeSentExtraInfo":
            req[p["requestId"]] = {k.lower(): v for k, v in p.get("headers", {}).items()}
        elif m["method"] == "Network.responseReceived":
            r = p["response"]
            resp[p["requestId"]] = ({k.lower(): v for k, v in r.get("headers", {}).items()}, r.get("status"))
    out = {}
    for rid, url in urls.items():
        h, status = resp.get(rid, ({}, None))
        out[url] = {"request": req.get(rid, {}), "response": h, "status": status}
    return out


def console_errors(driver):
    """Severe console messages since the last call (failed loads, CSP violations, exceptions)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def wait_for(driver, js, timeout=20, what="condition"):
    end = time.time() + timeout
    while time.time() < end:
        v = driver.execute_script(js)
        if v:
            return v
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}: {js}")


def chart_points(driver):
    """{canvas id: [points per dataset]} of every chart the page drew."""
    return driver.execute_script(
        "return Object.fromEntries(Object.entries(Tessera.charts).map(([k, c]) => [k, c.data.datasets.map(d => d.data.length)]))")


def sign_in(driver, token):
    from selenium.webdriver.common.by import By
    wait_for(driver, "return !document.getElementById('login').hidden || !document.getElementById('main').hidden",
             what="sign-in prompt or page")
    if driver.execute_script("return !document.getElementById('login').hidden"):
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.ID, "signin").click()
    wait_for(driver, "return !document.getElementById('main').hidden", what="the page after signing in")


def xss_report(driver, payload_texts):
    """What the hostile strings did on the current page: elements they would create, handlers that
    ran, and whether each string shows as text."""
    return driver.execute_script("""
      const texts = arguments[0];
      const body = document.body.innerText;
      // (a report's own scripts are children of <body>; record strings land in <main>)
      const injected = [...document.querySelectorAll('img, iframe, svg, main script, [onerror], [onload]')]
        .map(e => e.outerHTML.slice(0, 80));
      return {ran: window.__xss !== undefined, injected: injected, shown: texts.map(t => body.includes(t))};
    """, payload_texts)


def xss_ok(rep):
    return not rep["ran"] and not rep["injected"] and all(rep["shown"])


# The negative control: a renderer that parses what the pages set as text as HTML instead (installed
# before any page script runs, through the DevTools protocol). With it the XSS check must fail.
UNSAFE_RENDERER = """
  const desc = Object.getOwnPropertyDescriptor(Node.prototype, 'textContent');
  Object.defineProperty(Node.prototype, 'textContent', {configurable: true, get: desc.get,
    set(v) { if (this.nodeType === 1) this.innerHTML = v; else desc.set.call(this, v); }});
  Document.prototype.createTextNode = function (s) {
    const t = document.createElement('template'); t.innerHTML = s; return t.content; };
"""


def knob_effects(records):
    """What the Kernel page's knob table must show: per knob with two or more values among the ok
    records, the value of the best and worst median time."""
    def median(xs):
        s = sorted(xs)
        n = len(s)
        return s[(n - 1) // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    by = {}
    for r in records:
        if r["status"] != "ok":
            continue
        for k, v in r["config"].items():
            by.setdefault(k, {}).setdefault(json.dumps(v) if isinstance(v, (dict, list)) else str(v), []).append(r["result"]["median_us"])
    out = {}
    for k, vals in by.items():
        if len(vals) < 2:
            continue
        meds = {v: median(ts) for v, ts in vals.items()}
        best = min(meds.values())
        worst = max(meds.values())
        out[k] = {"best": best, "worst": worst, "spread": worst / best}
    return out
