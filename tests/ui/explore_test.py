#!/usr/bin/env python3
"""Tests exploring, comparing and finding on the dashboard (issue 51, items 4, 6 and 7) in headless
Chromium against a real `tessera serve` filled by real tunes and the records API, every request
with the browser's own headers (its Accept-Encoding):

- explore: hovering a point shows its record's config and provenance (not over empty space); the
  wheel zooms and a drag pans a chart, and "whole view" restores it; time against two knobs (one
  coloured per value of the second); the knobs' importance agrees with the variance each knob
  explains, computed here from the records API (a knob without effect near 0); two picked records
  side by side mark exactly the knobs that differ; a view exports as PNG and as CSV of the points
  in view (fewer once zoomed), with a formula-like knob value defused (a plain value untouched);
- compare: the picker finds kernels by search words (h100) and takes a kernel's own target
  first; GPUs by name (MI300X) are targets; four columns wrap inside a 1440 px window; a chart of
  time and throughput per target has one bar per target with a winner (none for a target
  without one);
- finding: search by expression (gelu, not tanh), product (h100 finds sm_90 and sm_90a, mi300 only
  gfx942), a dtype without case and a target prefix; recently changed by record arrival (a
  record that does not change the winner moves its key up; not under "newest winner") and by
  measured time.

Usage: explore_test.py TESSERA_BIN ARTIFACT_DIR"""
import csv
import glob
import math
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ui_checks import (Service, check, console_errors, missing_browser, network_exchanges, open_browser,  # noqa: E402
                       sign_in, wait_for)
from kernel_page_test import host_record, seed  # noqa: E402

READY = "return window.Tessera && Tessera.shownAt !== undefined"


def encoded_api_calls(driver, part):
    """The browser's own Accept-Encoding on the API calls whose URL holds `part`, and what came back."""
    net = network_exchanges(driver)
    calls = [v for u, v in net.items() if part in u and v["status"] == 200]
    return [(c["request"].get("accept-encoding", ""), c["response"].get("content-encoding", "")) for c in calls]


def downloads(folder, ext, before):
    """The file the browser saved (moved aside once seen: a second export of the same name would
    otherwise replace it unnoticed)."""
    for _ in range(100):
        new = [f for f in glob.glob(os.path.join(folder, "*." + ext)) if f not in before]
        if new and not any(f.endswith(".crdownload") for f in os.listdir(folder)):
            seen = os.path.join(folder, "seen")
            os.makedirs(seen, exist_ok=True)
            out = os.path.join(seen, f"{len(os.listdir(seen))}-{os.path.basename(new[0])}")
            os.rename(new[0], out)
            return [out]
        time.sleep(0.1)
    return []


def eta2(records, knob):
    """The share of the variance of log time that the knob's values explain (one-way)."""
    ys = [(str(r["config"].get(knob)), math.log(r["result"]["median_us"])) for r in records if r["status"] == "ok"]
    mean = sum(y for _, y in ys) / len(ys)
    total = sum((y - mean) ** 2 for _, y in ys)
    groups = {}
    for v, y in ys:
        groups.setdefault(v, []).append(y)
    between = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups.values())
    return between / total if total else 0


def explore(driver, svc, base, key, hostile_key, dl):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.actions.wheel_input import ScrollOrigin
    network_exchanges(driver)
    driver.get(base + "kernel.html?key=" + key)
    wait_for(driver, READY, what="the kernel page")
    enc = encoded_api_calls(driver, "digest=1")
    check(enc and all(e in ("br", "gzip") and e in a for a, e in enc), f"explore: the summary comes compressed for the browser's own headers {enc}")
    canvas = driver.find_element("id", "chart-time")
    # Hover: the point under the pointer shows its config and who measured it when.
    px = driver.execute_script("""const c = Tessera.charts['chart-time'], m = c.getDatasetMeta(0).data[0], r = c.canvas.getBoundingClientRect();
      return [m.x - r.width / 2, m.y - r.height / 2, c.data.datasets[0].data[0].config]""")
    ActionChains(driver).move_to_element_with_offset(canvas, int(px[0]), int(px[1])).perform()
    wait_for(driver, "return Tessera.charts['chart-time'].tooltip.getActiveElements().length > 0", what="a tooltip")
    lines = driver.execute_script("return Tessera.charts['chart-time'].tooltip.body.flatMap(b => b.lines)")
    text = " | ".join(lines)
    check(all(f"{k}={v}" in text for k, v in px[2].items()) and "by tuner" in text and "record " in text,
          f"explore: hovering a point shows its config and provenance ({text[:150]})")
    # A spot of the plot area 20 px or more from every point.
    empty = driver.execute_script("""const c = Tessera.charts['chart-time'], a = c.chartArea, r = c.canvas.getBoundingClientRect();
      const pts = c.data.datasets.flatMap((d, i) => c.getDatasetMeta(i).data.map(e => [e.x, e.y]));
      for (let y = a.top + 5; y < a.bottom; y += 7) for (let x = a.left + 5; x < a.right; x += 7)
        if (pts.every(([px, py]) => Math.hypot(px - x, py - y) > 20)) return [x - r.width / 2, y - r.height / 2];
      return null""")
    ActionChains(driver).move_to_element_with_offset(canvas, int(empty[0]), int(empty[1])).perform()
    time.sleep(0.3)
    check(driver.execute_script("return Tessera.charts['chart-time'].tooltip.getActiveElements().length") == 0,
          "negative control: over empty space no record is shown")
    # Zoom with the wheel, pan with a drag, back with "whole view"; the CSV is the view's points.
    rng = "const s = Tessera.charts['chart-time'].scales.x; return [s.min, s.max, Tessera.viewPoints(Tessera.charts['chart-time']).length]"
    whole = driver.execute_script(rng)
    before = set(glob.glob(os.path.join(dl, "*.csv")))
    driver.find_element("css selector", ".chart-tools[data-for=chart-time] .export-csv").click()
    full_csv = downloads(dl, "csv", before)
    full_rows = list(csv.reader(open(full_csv[0]))) if full_csv else []
    for _ in range(4):
        ActionChains(driver).scroll_from_origin(ScrollOrigin.from_element(canvas), 0, -120).perform()
        time.sleep(0.1)
    zoomed = driver.execute_script(rng)
    check(zoomed[1] - zoomed[0] < 0.7 * (whole[1] - whole[0]) and zoomed[2] < whole[2],
          f"explore: the wheel zooms in (x span {whole[1] - whole[0]:.0f} -> {zoomed[1] - zoomed[0]:.0f}, points in view {whole[2]} -> {zoomed[2]})")
    before = set(glob.glob(os.path.join(dl, "*.csv")))
    driver.find_element("css selector", ".chart-tools[data-for=chart-time] .export-csv").click()
    zoom_csv = downloads(dl, "csv", before)
    zoom_rows = list(csv.reader(open(zoom_csv[0]))) if zoom_csv else []
    check(len(full_rows) - 1 == whole[2] and len(zoom_rows) - 1 == zoomed[2] and zoomed[2] < whole[2] and full_rows[0][:3] == ["series", "measured (UTC)", "median time"],
          f"explore: CSV of the view has its points ({len(full_rows) - 1} whole, {len(zoom_rows) - 1} zoomed)")
    ActionChains(driver).move_to_element(canvas).click_and_hold().move_by_offset(120, 0).release().perform()
    panned = driver.execute_script(rng)
    check(panned[0] < zoomed[0] and abs((panned[1] - panned[0]) - (zoomed[1] - zoomed[0])) < 1e-6 * (whole[1] - whole[0]) + 1,
          f"explore: a drag pans (x from {zoomed[0]:.0f} to {panned[0]:.0f}, same span)")
    driver.find_element("css selector", ".chart-tools[data-for=chart-time] .reset-zoom").click()
    back = driver.execute_script(rng)
    check(abs(back[0] - whole[0]) < 1e-6 and abs(back[1] - whole[1]) < 1e-6 and back[2] == whole[2], "explore: 'whole view' restores the chart")
    before = set(glob.glob(os.path.join(dl, "*.png")))
    driver.find_element("css selector", ".chart-tools[data-for=chart-time] .export-png").click()
    png = downloads(dl, "png", before)
    head = open(png[0], "rb").read(24) if png else b""
    w, h = (int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")) if len(head) == 24 else (0, 0)
    check(head.startswith(b"\x89PNG\r\n\x1a\n") and w == driver.execute_script("return Tessera.charts['chart-time'].canvas.width") and h > 100,
          f"explore: PNG of the chart ({w}x{h})")
    # Two knobs: colour by the second; nothing to colour by is one colour (the neighbour).
    driver.execute_script("const s = document.getElementById('scatter-knob'); s.value = 'MC'; s.dispatchEvent(new Event('change'))")
    one = driver.execute_script("return Tessera.charts['chart-scatter'].data.datasets.map(d => d.label)")
    driver.execute_script("const s = document.getElementById('scatter-color'); s.value = 'schedule'; s.dispatchEvent(new Event('change'))")
    two = driver.execute_script("""const c = Tessera.charts['chart-scatter']; return [c.data.datasets.map(d => d.label),
      c.data.datasets.map(d => d.backgroundColor), c.data.datasets.map(d => d.data.every(p => p.config.schedule === d.label.split('=')[1].split(',')[0]))]""")
    check(one == ["measured"] and sorted(two[0]) == ["schedule=blis, measured", "schedule=packed, measured"] and len(set(two[1])) == 2 and all(two[2]),
          f"explore: time against MC coloured by schedule ({two[0]}; before: {one})")
    # Importance: the page's agrees with the variance explained, computed here from every record.
    records = svc.api.records(key, svc.tokens["viewer"])
    page = driver.execute_script("""return Object.fromEntries([...document.querySelectorAll('#knob-table tr[data-knob]')]
      .map(tr => [tr.dataset.knob, +tr.querySelector('[data-col=importance]').dataset.value]))""")
    mine = {k: eta2(records, k) for k in ["schedule", "MC", "NR", "KC"]}
    top = max(mine, key=mine.get)
    check(page and max(page, key=page.get) == top and all(abs(page.get(k, 0) - v) < 0.05 for k, v in mine.items()) and page.get("KC", 1) < 0.05,
          f"explore: knob importance {({k: round(v, 3) for k, v in page.items()})} agrees with the variance explained "
          f"{({k: round(v, 3) for k, v in mine.items()})}; KC (no effect) near 0")
    # Two records side by side: exactly the knobs that differ are marked.
    ids = driver.execute_script("""const b = [...document.querySelectorAll('#configs input.pick')]; b[0].click(); b[7].click();
      return [+b[0].dataset.id, +b[7].dataset.id]""")
    wait_for(driver, "return document.getElementById('rec-compare').dataset.picked === '2'", what="two picked records")
    byid = {r["id"]: r for r in records}
    want = {k for k in set(byid[ids[0]]["config"]) | set(byid[ids[1]]["config"]) if byid[ids[0]]["config"].get(k) != byid[ids[1]]["config"].get(k)}
    got = driver.execute_script("""return [...document.querySelectorAll('#rec-compare-table tr[data-knob="1"]')].map(tr => [tr.dataset.row, tr.dataset.differs])""")
    check(got and {k for k, d in got if d == "1"} == want and {k for k, d in got if d == "0"} == set(byid[ids[0]]["config"]) - want,
          f"explore: records {ids} side by side mark the knobs that differ ({sorted(want)}) and no other ({got})")
    before = set(glob.glob(os.path.join(dl, "*.csv")))
    driver.find_element("id", "cfg-csv").click()
    table = downloads(dl, "csv", before)
    rows = list(csv.reader(open(table[0]))) if table else []
    check(len(rows) == 101 and rows[0][:3] == ["pick", "id", "status"] and sum(r[0] == "picked" for r in rows[1:]) == 2,
          f"explore: the configs table exports as CSV ({len(rows) - 1} rows, the two picks marked)")
    # A knob value from a hostile client becomes an inert cell; a plain one is left as it is.
    driver.get(base + "kernel.html?key=" + hostile_key)
    wait_for(driver, READY, what="the hostile key")
    before = set(glob.glob(os.path.join(dl, "*.csv")))
    driver.find_element("id", "cfg-csv").click()
    got = downloads(dl, "csv", before)
    rows = list(csv.reader(open(got[0]))) if got else [[]]
    col = rows[0].index("knob:note") if "knob:note" in rows[0] else -1
    notes = [r[col] for r in rows[1:]] if col >= 0 else []
    check(len(notes) == 3 and all(n == "'-2+3+cmd" for n in notes), f"explore: a formula-like knob value is exported inert ({notes[:1]})")
    others = [c for r in rows[1:] for i, c in enumerate(r) if i != col and c.startswith("'")]
    check(col >= 0 and not others, f"negative control: no plain cell is quoted ({others[:2]})")


def compare(driver, svc, base, gpu_key):
    driver.set_window_size(1440, 1000)
    driver.get(base + "compare.html")
    wait_for(driver, "return !!document.getElementById('cmp-form') && !document.getElementById('main').hidden", what="the compare page")
    box = driver.find_element("id", "key")
    box.send_keys("h100 gemm")
    wait_for(driver, "return +document.getElementById('key-picks').dataset.count > 0", what="picks for h100")
    picks = driver.execute_script("return [...document.querySelectorAll('#key-picks .pick-key')].map(b => [b.dataset.key, b.dataset.target])")
    check(picks and all(t.startswith("sm_90") for _, t in picks) and gpu_key in [k for k, _ in picks],
          f"compare: the picker finds the H100's kernels by name ({[t for _, t in picks]})")
    driver.execute_script(f"document.querySelector('#key-picks .pick-key[data-key=\"{gpu_key}\"]').click()")
    from selenium.webdriver.support.ui import Select
    gpus = svc.api.get("/v1/gpus", svc.tokens["viewer"])["gpus"]
    wait_for(driver, "return !!document.getElementById('gpu-add').dataset.count", what="GPUs by name")
    opts = driver.execute_script("return [...document.querySelectorAll('#gpu-add option[data-arch]')].map(o => [o.value, o.dataset.arch])")
    check(len(opts) == len(gpus) and ["MI300X", "gfx942"] in opts and any(a == "sm_90" for _, a in opts),
          f"compare: GPUs by name to choose from ({len(opts)}, grouped by chip)")
    driver.execute_script("const t = document.getElementById('targets'); t.value = t.value.split(',')[0]")
    Select(driver.find_element("id", "gpu-add")).select_by_value("MI300X")
    driver.execute_script("const t = document.getElementById('targets'); t.value += ',sm_80,host'")
    tgt = driver.execute_script("return document.getElementById('targets').value")
    check(tgt.startswith("sm_90a,"), f"compare: the kernel's own target comes first ({tgt})")
    network_exchanges(driver)
    driver.find_element("id", "cmp-run").click()
    wait_for(driver, "return !document.getElementById('cmp-result').hidden && !!Tessera.charts['chart-cmp-time']", timeout=240, what="the comparison")
    heads = driver.execute_script("return [...document.querySelectorAll('#cmp-table thead th[data-target]')].map(th => th.textContent)")
    check(len(heads) == 4 and any("gfx942" in h and "MI300X" in h for h in heads), f"compare: a GPU by name is a target ({heads})")
    wide = driver.execute_script("""const t = document.getElementById('cmp-table'); return [t.scrollWidth, t.parentNode.clientWidth,
      document.documentElement.scrollWidth, window.innerWidth]""")
    check(wide[0] <= wide[1] and wide[2] <= wide[3], f"compare: four columns wrap inside 1440 px (table {wide[0]} of {wide[1]}, page {wide[2]})")
    doc = svc.api.call("/v1/compare", svc.tokens["viewer"], {"key_id": gpu_key, "targets": tgt.split(",")})[1]
    with_winner = [t["target"] for t in doc["targets"] if t.get("time_us", 0) > 0]
    bars = driver.execute_script("""const c = Tessera.charts['chart-cmp-time'], d = Tessera.charts['chart-cmp-throughput'];
      return [c.data.labels, c.data.datasets[0].data, d.data.datasets[0].data]""")
    check(len(bars[0]) == len(with_winner) and all(v > 0 for v in bars[1] + bars[2]) and len(with_winner) < 4
          and [l.split(" ")[0] for l in bars[0]] == with_winner,
          f"compare: one time and throughput bar per target with a winner ({bars[0]}); none for sm_80, which has none")
    enc = encoded_api_calls(driver, "/v1/compare")
    check(enc and all(("br" in a or "gzip" in a) and (not e or e in a) for a, e in enc), f"compare: asked with the browser's own headers {enc}")
    driver.set_window_size(1400, 1100)


def finding(driver, svc, base, keys):
    def listed(query):
        driver.get(base + "?" + query)
        wait_for(driver, "return document.getElementById('count').dataset.total !== undefined", what=query)
        return driver.execute_script("return [...document.querySelectorAll('#kernels tbody tr')].map(tr => tr.dataset.key)")
    network_exchanges(driver)
    got = listed("q=gelu")
    check(got == [keys["gelu"]], f"finding: 'gelu' finds the kernel whose expression has it ({len(got)} kernels)")
    enc = encoded_api_calls(driver, "/v1/kernels?")
    check(enc and all(e in ("br", "gzip", "") and (not e or e in a) for a, e in enc) and all("br" in a or "gzip" in a for a, _ in enc),
          f"finding: the overview's calls carry the browser's Accept-Encoding {enc[:1]}")
    check(listed("q=tanh") == [], "negative control: 'tanh', in no kernel's text, finds nothing")
    h100 = set(listed("q=h100"))
    check(h100 == {keys["sm_90a"], keys["sm_90"]}, f"finding: 'h100' finds the sm_90 and sm_90a kernels ({len(h100)})")
    check(listed("q=mi300") == [keys["gfx942"]], "finding: 'mi300' finds the gfx942 kernel only")
    check(set(listed("target=sm_90")) == {keys["sm_90a"], keys["sm_90"]} and listed("target=sm_90a") == [keys["sm_90a"]],
          "finding: the target sm_90 is a prefix (sm_90 and sm_90a), sm_90a only itself")
    check(sorted(listed("dtype=F32")) == sorted(listed("dtype=f32")) and listed("dtype=F32"), "finding: a dtype without case")
    # Recency: a slower record of the oldest key changes no winner but arrives last.
    old = keys["old"]
    status, _, _ = svc.api.call("/v1/records", svc.tokens["tuner"], {"records": [host_record(3, 99, 99999.0, {"MC": 32, "NR": 8}, shape=[96, 80, 64])]})
    arrived = listed("order=arrived")
    newest = driver.execute_script("return document.querySelector('#kernels tbody tr [data-col=newest]').dataset")
    recent = listed("order=recent")
    check(status == 200 and arrived[0] == old and recent[0] != old,
          f"finding: by arrival the key of the newest record comes first; by newest winner it does not ({recent.index(old) + 1}.)")
    rec = svc.api.get(f"/v1/records?key_id={old}&limit=1000", svc.tokens["viewer"])["records"]
    check(int(newest["id"]) == max(r["id"] for r in rec), f"finding: the row names its newest record (#{newest['id']})")
    measured = listed("order=measured")
    times = {k: max(r["provenance"]["created_at"] for r in svc.api.records(k, svc.tokens["viewer"])) for k in measured[:6]}
    check(list(times.values()) == sorted(times.values(), reverse=True) and measured[0] != arrived[0],
          f"finding: by measured time the latest measurement comes first ({list(times.values())[:3]})")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    tessera, art = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    why = missing_browser()
    if why:
        print("skipped: " + why)
        return 77
    os.makedirs(art, exist_ok=True)
    t_start = time.time()
    work = tempfile.mkdtemp(prefix="tessera-ui51x-")
    dl = os.path.join(work, "downloads")
    os.makedirs(dl)
    svc = Service(tessera, work)
    driver = None
    try:
        keys = {}
        # The oldest key: a record measured long ago, arriving first.
        status, body, _ = svc.api.call("/v1/records", svc.tokens["tuner"], {"records": [host_record(0, 1, 500.0, {"MC": 64, "NR": 8}, shape=[96, 80, 64])]})
        keys["old"] = body["results"][0]["key_id"]
        key = seed(svc, 2000, shape=[160, 160, 160])
        # A device the service has no knob table for takes short tokens as knob values: one that a
        # spreadsheet would run as a formula (a leading sign) is the hostile client's best try.
        hostile = [host_record(i, i + 1, 300.0 + i, {"MC": 64, "NR": 8 * (i + 1), "note": "-2+3+cmd"}, shape=[48, 48, 48]) for i in range(3)]
        for r in hostile:
            r["key"]["target"] = r["key"]["arch"] = "acme_npu"
        status, body, _ = svc.api.call("/v1/records", svc.tokens["tuner"], {"records": hostile})
        if status != 200:
            raise RuntimeError(f"hostile records refused: {status} {body}")
        hostile_key = body["results"][0]["key_id"]
        for target in ["sm_90a", "sm_90", "gfx942"]:
            svc.tessera_run(["tune", "gemm", "--m", "256", "--n", "256", "--k", "256", "--target", target, "--estimate", "--trials", "8"])
            keys[target] = svc.api.get("/v1/kernels?target=" + target, svc.tokens["viewer"])["kernels"]
            keys[target] = [k["key_id"] for k in keys[target] if k["key"]["target"] == target][0]
        svc.tessera_run(["tune", "elementwise", "--expr", "y = gelu(x * s)", "--shape", "512x256", "--shape", "s=256", "--trials", "4"])
        keys["gelu"] = svc.api.get("/v1/kernels?family=elementwise", svc.tokens["viewer"])["kernels"][0]["key_id"]
        driver = open_browser(work)
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": dl})
        base = svc.url + "/ui/"
        driver.get(base)
        sign_in(driver, svc.tokens["viewer"])
        explore(driver, svc, base, key, hostile_key, dl)
        open(os.path.join(art, "explore.png"), "wb").write(driver.get_screenshot_as_png())
        check(not console_errors(driver), "explore: no console errors")
        compare(driver, svc, base, keys["sm_90a"])
        open(os.path.join(art, "compare.png"), "wb").write(driver.get_screenshot_as_png())
        check(not console_errors(driver), "compare: no console errors")
        finding(driver, svc, base, keys)
        check(not console_errors(driver), "finding: no console errors")
    finally:
        if driver:
            driver.quit()
        svc.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"explore_test: {time.time() - t_start:.0f} s, screenshots in {art}", flush=True)
    if check.failed:
        print(f"explore_test: {check.failed} checks failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
