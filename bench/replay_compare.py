#!/usr/bin/env python3
"""Compares two `search_efficiency --json` outputs of the same tables and seeds, per split.

    bench/replay_compare.py BASE.json OTHER.json [--column evolutionary] [--resamples 1000]

For the development and held-out splits it prints random's trials over the column's (geometric
mean of the tables' medians and of their p90s) for both runs, the tables whose median or p90
moved, and a paired bootstrap over the seeds (the same seeds index both runs): the geometric mean
over the tables of BASE's median trials over OTHER's, with its 90 % interval. Above 1, OTHER
needs fewer trials. Tables of fewer than 10 configs are left out of the bootstrap (any search
needs all of their few trials). Used for the settings' ablations of docs/search-notes.md.
"""
import argparse
import json
import math
import random
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            j = json.load(f)
        return {(t["table"], t["configs"], i): t for i, t in enumerate(j["tables"])}
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"replay_compare: {path}: not a search_efficiency --json output ({e})")


def gmean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("other")
    ap.add_argument("--column", default="evolutionary")
    ap.add_argument("--resamples", type=int, default=1000)
    a = ap.parse_args()
    base, other = load(a.base), load(a.other)
    if set(base) != set(other):
        sys.exit("replay_compare: the two outputs replay different tables")
    col = a.column
    rng = random.Random(1)
    for split in ("development", "held-out"):
        keys = [k for k, t in other.items() if t["split"] == split and col in t["columns"] and col in base[k]["columns"]]
        if not keys:
            continue
        ratio = lambda t, c, q: t["random"][q] / t["columns"][c][q]
        moved = [k for k in keys if (base[k]["columns"][col]["median"], base[k]["columns"][col]["p90"]) !=
                 (other[k]["columns"][col]["median"], other[k]["columns"][col]["p90"])]
        print(f"{split} [{col}], {len(keys)} tables: random / search, median {gmean([ratio(base[k], col, 'median') for k in keys]):.2f}x"
              f" -> {gmean([ratio(other[k], col, 'median') for k in keys]):.2f}x, p90 {gmean([ratio(base[k], col, 'p90') for k in keys]):.2f}x"
              f" -> {gmean([ratio(other[k], col, 'p90') for k in keys]):.2f}x; {len(moved)} moved")
        for k in moved:
            b, o = base[k]["columns"][col], other[k]["columns"][col]
            print(f"    {k[0]:<44} {b['median']:g}/{b['p90']:g} -> {o['median']:g}/{o['p90']:g}")
        big = [k for k in keys if base[k]["configs"] >= 10]
        if not big:
            continue
        n = min(len(base[big[0]]["columns"][col]["trials"]), len(other[big[0]]["columns"][col]["trials"]))

        def stat(idx):
            return gmean([statistics.median([base[k]["columns"][col]["trials"][i] for i in idx]) /
                          statistics.median([other[k]["columns"][col]["trials"][i] for i in idx]) for k in big])

        boots = sorted(stat([rng.randrange(n) for _ in range(n)]) for _ in range(a.resamples))
        lo, hi = boots[int(0.05 * len(boots))], boots[int(0.95 * len(boots)) - 1]
        print(f"  paired bootstrap over {n} seeds, {len(big)} tables of 10+ configs: base / other trials {stat(list(range(n))):.3f}"
              f" (90 % interval {lo:.3f} - {hi:.3f}; above 1: the other run needs fewer)")


if __name__ == "__main__":
    main()
