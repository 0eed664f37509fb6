#!/usr/bin/env python3
"""The analytic GPU model against Tessera's own measurements on a device (issue 13): reads the ok,
measured records of a store that `tessera tune --target sm_XX` filled on the device (for instance
the device.db that bench/gpu/device_session.sh leaves under $OUT), asks `tessera compile` for the
model's estimate of each config with its ptxas resources (the `estimate` line), and prints per
kernel N, Spearman's rank correlation, the median and the range of the relative error, the best
measured time among the estimate's top 1 / 5 / 10 as a fraction of the true best, and the rank of
the measured best in the estimate. Runs where the store is (no GPU needed: ptxas only).

Usage: model_vs_device.py [--gpu NAME] DB TARGET 'FAMILY FLAGS' ...   e.g.
  model_vs_device.py out/device.db sm_90 'gemm --m 4096 --n 4096 --k 4096 --dtype f16'
--gpu: the model's facts of that GPU (`tessera gpus`), e.g. the measured device's own row, instead
of the target's default product's."""
import json
import os
import re
import shlex
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

TESSERA = os.environ.get("TESSERA_BIN", os.path.join(os.path.dirname(__file__), "../../build/cli/tessera"))


def ranks(v):
    order = sorted(range(len(v)), key=lambda i: v[i])
    r = [0.0] * len(v)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and v[order[j + 1]] == v[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    m = (n + 1) / 2
    sab = sum((x - m) * (y - m) for x, y in zip(ra, rb))
    saa = sum((x - m) ** 2 for x in ra)
    sbb = sum((y - m) ** 2 for y in rb)
    return sab / (saa * sbb) ** 0.5 if saa and sbb else 0.0


def estimate(target, gpu, flags, config):
    cmd = [TESSERA, "compile", "--target", target, "--emit", "cubin", "-o", os.devnull, "--config", config] + shlex.split(flags)
    if gpu:
        cmd += ["--gpu", gpu]
    p = subprocess.run(cmd, capture_output=True, text=True)
    m = re.search(r"^estimate\s+([0-9.]+) us", p.stderr, re.M)
    return float(m.group(1)) if m else None


def main():
    args = sys.argv[1:]
    gpu = None
    if args[:1] == ["--gpu"] and len(args) > 1:
        gpu, args = args[1], args[2:]
    if len(args) < 3:
        sys.exit(__doc__)
    db, target, kernels = args[0], args[1], args[2:]
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    print(f"{'kernel':<12} {'N':>4} {'Spearman':>9} {'err med':>8} {'err range':>16} {'top-1':>6} {'top-5':>6} {'top-10':>6} {'best rank':>10}")
    for spec in kernels:
        family = spec.split()[0]
        rows = con.execute(
            "SELECT r.config, MIN(r.median_us) FROM records r JOIN keys k ON r.key_id = k.key_id "
            "WHERE k.family = ? AND k.target = ? AND r.status = 'ok' AND r.estimator = '' GROUP BY r.config",
            (family, target)).fetchall()
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            est = list(pool.map(lambda r: estimate(target, gpu, spec, r[0]), rows))
        pairs = [(m, e) for (_, m), e in zip(rows, est) if e]
        if len(pairs) < 2:
            print(f"{family:<12} {len(pairs):>4}  too few records")
            continue
        meas = [p[0] for p in pairs]
        ests = [p[1] for p in pairs]
        errs = sorted(e / m - 1 for m, e in pairs)
        best = min(meas)
        by_est = sorted(range(len(pairs)), key=lambda i: ests[i])
        top = lambda k: best / min(meas[i] for i in by_est[:k])
        rank = by_est.index(meas.index(best)) + 1
        print(f"{family:<12} {len(pairs):>4} {spearman(ests, meas):>9.3f} {errs[len(errs) // 2] * 100:>+7.0f}% "
              f"{errs[0] * 100:>+7.0f}..{errs[-1] * 100:+.0f}% {top(1):>6.2f} {top(5):>6.2f} {top(10):>6.2f} {rank:>10}")


if __name__ == "__main__":
    main()
