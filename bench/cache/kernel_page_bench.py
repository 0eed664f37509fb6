#!/usr/bin/env python3
"""Times the dashboard's Kernel page (issue 51) in headless Chromium, with the browser's own
headers: for one key of N records (default 2,000 and 10,000), a real `tessera serve` on loopback
filled through the API, the page's time to data (navigation start to the winner and charts drawn,
`Tessera.shownAt`), against the anchor measured in the same run by the same browser: the records
API's first page of that key (GET /v1/records?key_id=...&limit=1000, fetched and parsed). Prints
one row per size with the ratio, the summary's bytes on the wire and decoded, and the load.

Beyond 10,000 records the key is filled by copying the API-written records in SQL (new ids and
fingerprints, the same configs and times; the winner stands): the API's own writes into one key
slow down with the key's size (a 1,000-record request into a key of ~50,000 took over a minute on
a loaded 2-core machine), which is the write path's matter, not the page's.

Usage: kernel_page_bench.py TESSERA_BIN [RECORDS ...]"""
import sqlite3
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "ui"))
from ui_checks import Service, missing_browser, open_browser, sign_in, wait_for  # noqa: E402
from kernel_page_test import seed  # noqa: E402

ANCHOR_JS = """
const done = arguments[arguments.length - 1];
const t0 = performance.now();
fetch('../v1/records?key_id=' + arguments[0] + '&limit=1000', {headers: {Authorization: 'Bearer ' + sessionStorage.getItem('tessera.token')},
  cache: 'no-store'}).then(r => r.json()).then(j => done([performance.now() - t0, j.records.length]));
"""


API_SEED = 10000


def copy_rows(db, key, extra):
    """`extra` more records of `key`: copies of its records with new ids and fingerprints."""
    con = sqlite3.connect(db, timeout=60)
    cols = [r[1] for r in con.execute("PRAGMA table_info(records)") if r[1] not in ("id", "fingerprint")]
    have = con.execute("SELECT count(*) FROM records WHERE key_id = ?", (key,)).fetchone()[0]
    done, rnd = 0, 0
    while done < extra:
        rnd += 1
        take = min(have, extra - done)
        con.execute(f"INSERT INTO records(fingerprint, {', '.join(cols)}) SELECT fingerprint || '-copy{rnd}', {', '.join(cols)} "
                    f"FROM records WHERE key_id = ? AND fingerprint NOT LIKE '%-copy%' ORDER BY id LIMIT ?", (key, take))
        done += take
    con.commit()
    con.close()


def one(tessera, n, runs=5):
    work = tempfile.mkdtemp(prefix="tessera-bench51-")
    svc = Service(tessera, work)
    driver = None
    try:
        t0 = time.time()
        key = seed(svc, min(n, API_SEED))
        if n > API_SEED:
            copy_rows(svc.db, key, n - API_SEED)
        seeded = time.time() - t0
        driver = open_browser(work)
        base = svc.url + "/ui/"
        driver.get(base)
        sign_in(driver, svc.tokens["viewer"])
        page, anchor, wire = [], [], None
        for _ in range(runs):
            driver.get(base + "kernel.html?key=" + key)
            wait_for(driver, "return window.Tessera && Tessera.shownAt !== undefined", timeout=120, what="data")
            page.append(driver.execute_script("return Tessera.shownAt"))
            wire = driver.execute_script("""const e = performance.getEntriesByType('resource').find(e => e.name.includes('digest=1'));
              return e ? [e.encodedBodySize, e.decodedBodySize] : null""")
            driver.set_script_timeout(60)
            anchor.append(driver.execute_async_script(ANCHOR_JS, key)[0])
        # The service's peak memory: the digest reads a key's records in pages, never all at once.
        hwm = next((int(line.split()[1]) for line in open(f"/proc/{svc.proc.pid}/status") if line.startswith("VmHWM")), 0)
        return {"n": n, "seeded_s": seeded, "page_ms": statistics.median(page), "anchor_ms": statistics.median(anchor), "wire": wire,
                "hwm_mb": hwm / 1024}
    finally:
        if driver:
            driver.quit()
        svc.stop()
        shutil.rmtree(work, ignore_errors=True)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    why = missing_browser()
    if why:
        raise SystemExit("kernel_page_bench: " + why)
    tessera = os.path.abspath(sys.argv[1])
    sizes = [int(a) for a in sys.argv[2:]] or [2000, 10000]
    print(f"load before: {open('/proc/loadavg').read().strip()}", flush=True)
    print("records | kernel page time to data (median ms) | anchor: records API first page (ms) | ratio | summary bytes wire/decoded"
          " | service peak RSS")
    for n in sizes:
        r = one(tessera, n)
        wire = f"{r['wire'][0]}/{r['wire'][1]}" if r["wire"] else "-"
        print(f"{n:>7} | {r['page_ms']:9.0f} | {r['anchor_ms']:9.1f} | {r['page_ms'] / r['anchor_ms']:6.1f}x | {wire}"
              f" | {r['hwm_mb']:.0f} MB   (seeded in {r['seeded_s']:.0f} s)", flush=True)
    print(f"load after: {open('/proc/loadavg').read().strip()}", flush=True)


if __name__ == "__main__":
    main()
