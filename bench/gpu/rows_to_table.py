#!/usr/bin/env python3
"""Turns the goal rows a device run measured (vendor_rows.py's vendor_rows.json: `tessera run` of
each config on the device, checked against the reference before its time counts) into records of
the device tables (bench/data/device_*.jsonl.gz), so that bench/gpu/defaults_table.py can choose
defaults from them as from the tunes' records.

Each row's hard key, key_id and kernel IR come from this build (`tessera tune --estimate --gpu GPU`,
one trial, into a scratch store, exported with scripts/export_table.sh): the same key a tune on
that GPU stores. Each correct run becomes one record of that key with its config, its measured
median and the device's name and date as provenance; wrong or failed runs are left out (the device
tables hold `ok` records only for defaults). Records already in OUT (same key_id and config) are
kept, not duplicated.

Usage: python3 bench/gpu/rows_to_table.py --tessera build/cli/tessera --gpu H200 --device "NVIDIA H200" \\
         --when 2026-11-30T00:30:00Z --out bench/data/device_h200.jsonl.gz out/vendor_rows.json [...]"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def template(tessera, gpu, target, flags, scratch):
    """The record a one-trial estimate tune of `flags` on `gpu` stores: its key, key_id, kernel IR."""
    db = os.path.join(scratch, "t.db")
    if os.path.exists(db):
        os.remove(db)
    cmd = [tessera, "tune", "--target", target, "--gpu", gpu, "--estimate", "--trials", "1", "--force", "--no-warm-start",
           "--no-transfer", "--db", db, "--json"] + flags
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"rows_to_table: {' '.join(cmd)} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
    out = os.path.join(scratch, "t.jsonl.gz")
    env = dict(os.environ, TESSERA_BIN=tessera)
    e = subprocess.run(["bash", os.path.join(ROOT, "scripts", "export_table.sh"), db, out], capture_output=True, text=True, env=env)
    if e.returncode != 0:
        sys.exit(f"rows_to_table: export of {db} failed: {e.stderr.strip()}")
    recs = [json.loads(line) for line in gzip.open(out, "rt")]
    if not recs:
        sys.exit(f"rows_to_table: the estimate tune of {' '.join(flags)} stored nothing")
    return recs[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="+", help="vendor_rows.json files")
    ap.add_argument("--tessera", default=os.path.join(ROOT, "build", "cli", "tessera"))
    ap.add_argument("--gpu", required=True, help="the GPU's name for the key (tessera gpus), e.g. H200")
    ap.add_argument("--device", required=True, help="the device's own name (nvidia-smi), the records' cpu_model")
    ap.add_argument("--when", required=True, help="when the device measured (ISO 8601, UTC)")
    ap.add_argument("--out", required=True, help="the device table to append to (.jsonl.gz)")
    a = ap.parse_args()
    old = [json.loads(line) for line in gzip.open(a.out, "rt")] if os.path.exists(a.out) else []
    have = {(r["key_id"], json.dumps(r["config"], sort_keys=True)) for r in old}
    next_id = max([r.get("id", 0) for r in old] + [0]) + 1
    added, keys = [], 0
    with tempfile.TemporaryDirectory() as scratch:
        for path in a.rows:
            for row in json.load(open(path)):
                runs = [r for r in row["runs"] if r.get("correct") and r.get("time_us") and r.get("resolved")]
                if not runs:
                    continue
                t = template(a.tessera, a.gpu, row["target"], row["flags"], scratch)
                keys += 1
                for run in runs:
                    cfg = run["resolved"]
                    mark = (t["key_id"], json.dumps(cfg, sort_keys=True))
                    if mark in have:
                        continue
                    have.add(mark)
                    us = float(run["time_us"])
                    rec = {k: t[k] for k in ("key", "key_id", "kernel_ir") if k in t}
                    rec.update({
                        "id": next_id, "config": cfg, "status": "ok", "stale": False, "trust": "vouched",
                        "provenance": dict(t.get("provenance", {}), cpu_model=a.device, created_at=a.when, host="vm"),
                        "received_at": a.when,
                        "result": {"median_us": us, "p20_us": us, "p80_us": us, "n": 1, "trials": 1, "tuning_seconds": 0.0,
                                   "gflops": row["flops"] / us / 1e3, "gbps": 0.0, "max_abs_err": 0.0, "max_rel_err": 0.0,
                                   "peak_fraction": 0.0},
                    })
                    next_id += 1
                    added.append(rec)
    with gzip.open(a.out, "wt") as f:
        for r in old + added:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    print(f"{len(added)} records of {keys} keys added to {os.path.relpath(a.out, ROOT)} ({len(old) + len(added)} in all)")


if __name__ == "__main__":
    main()
