#!/usr/bin/env python3
"""Writes docs/results.md's generated sections from the benches' JSON outputs, with SVG plots.

A bench run with `--json FILE` (build/bench/search_efficiency: trials per table and seed;
build/bench/gemm_bench: GFLOP/s per shape with the host, its peak and its load;
build/bench/small_shapes_bench: the default's and a short sweep's best time per small or skinny shape
against OpenBLAS) leaves its figures as data;
this script turns each such file into a section of docs/results.md between the markers

    <!-- results_page: NAME begin -->  ...  <!-- results_page: NAME end -->

(NAME: the JSON file's name without .json) and, with --svg, draws its plot next to the JSON file
(NAME.svg) with matplotlib. The markdown is computed from the JSON alone (no clock, no host), so
`--check` can tell, without matplotlib, whether docs/results.md says what the committed JSON says.

  python3 bench/results_page.py docs/results/search_efficiency.json            # rewrite the section
  build/pyenv/bin/python bench/results_page.py --svg docs/results/search_efficiency.json   # and the plot
  python3 bench/results_page.py --check docs/results/search_efficiency.json    # exit 1 if they differ
  python3 bench/results_page.py --check docs/results     # every JSON there, and no section without one

matplotlib is in the build's venv (build/pyenv, made by scripts/python_env.sh from
python/requirements-test.txt); `--svg` says so in one line when the interpreter cannot import it.
"""
import argparse
import json
import math
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
DEFAULT_MD = os.path.join(ROOT, "docs", "results.md")


class PageError(Exception):
    """A JSON file or a results page this script cannot use; the message is the one line printed."""


def geomean(v):
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else float("nan")


def quantile(v, q):
    """The bench's quantile (linear between the order statistics, as bench/search_efficiency.cpp)."""
    s = sorted(v)
    pos = q * (len(s) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def load(path):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        raise PageError(f"{path}: not a readable JSON file ({e})")
    if not isinstance(doc, dict):
        raise PageError(f"{path}: not a JSON object")
    if doc.get("bench") == "gemm":
        return load_gemm(path, doc)
    if doc.get("bench") == "small_shapes":
        return load_small(path, doc)
    if doc.get("bench") != "search_efficiency":
        raise PageError(f"{path}: not the --json output of search_efficiency, gemm_bench or small_shapes_bench (its \"bench\" is "
                        f"{doc.get('bench')!r})")
    tables = doc.get("tables")
    if not isinstance(tables, list) or not tables:
        raise PageError(f"{path}: no tables")
    for t in tables:
        for key in ("table", "split", "configs", "random", "columns"):
            if key not in t:
                raise PageError(f"{path}: a table without \"{key}\"")
        for name, col in t["columns"].items():
            trials = col.get("trials")
            if not isinstance(trials, list) or not trials or not all(isinstance(x, (int, float)) and x > 0 for x in trials):
                raise PageError(f"{path}: {t['table']} {name}: \"trials\" must be a non-empty list of positive counts")
            # The medians and p90s are recomputed from the per-seed trials, so that a hand edit of
            # one without the other cannot pass unnoticed.
            for q, key in ((0.5, "median"), (0.9, "p90")):
                if abs(quantile(trials, q) - col.get(key, -1)) > 1e-6:
                    raise PageError(f"{path}: {t['table']} {name}: its {key} {col.get(key)} is not the {key} of its trials")
    return doc


def load_gemm(path, doc):
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        raise PageError(f"{path}: no rows")
    for key in ("dtype", "threads", "host", "anchor", "load", "fma_peak_gflops_f32_one_core"):
        if key not in doc:
            raise PageError(f"{path}: no \"{key}\"")
    for r in rows:
        for key in ("m", "n", "k", "tessera_gflops", "anchor_gflops", "peak_gflops", "checked"):
            if key not in r:
                raise PageError(f"{path}: a row without \"{key}\"")
        if not all(isinstance(r[k], (int, float)) and r[k] > 0 for k in ("tessera_gflops", "anchor_gflops", "peak_gflops")):
            raise PageError(f"{path}: a row's GFLOP/s must be positive numbers")
    return doc


def load_small(path, doc):
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        raise PageError(f"{path}: no rows")
    for key in ("threads", "host", "load", "max_configs"):
        if key not in doc:
            raise PageError(f"{path}: no \"{key}\"")
    for r in rows:
        for key in ("family", "kernel", "default_us", "best_us", "default_config"):
            if key not in r:
                raise PageError(f"{path}: a row without \"{key}\"")
        nums = [r["default_us"], r["best_us"]] + [r[k] for k in ("anchor_us", "default_x_anchor", "best_x_anchor") if k in r]
        if not all(isinstance(x, (int, float)) and x > 0 for x in nums):
            raise PageError(f"{path}: {r['kernel']}: times and ratios must be positive numbers")
    return doc


def small_command(doc, json_rel):
    opts = [f"--threads {doc['threads']}"]
    if doc.get("family", "all") != "all":
        opts.append(f"--family {doc['family']}")
    if doc.get("skinny"):
        opts.append("--skinny")
    opts.append(f"--max-configs {doc['max_configs']}")
    return f"build/bench/small_shapes_bench {' '.join(opts)} --json {json_rel}"


def small_markdown(doc, json_rel, svg_rel):
    """A small_shapes_bench run: its machine and load, a row per kernel (the default, the best of a
    short sweep, OpenBLAS where the row has it), the geometric means, and the plot."""
    ld = doc["load"]
    t = doc["threads"]
    rows = doc["rows"]
    anchored = [r for r in rows if "default_x_anchor" in r]
    out = [f"Written by `bench/results_page.py` from `{json_rel}` (do not edit by hand: rerun the",
           f"script). Measured with `{small_command(doc, json_rel)}` on {doc['host']} ({doc.get('arch', '?')}), "
           f"{t} thread{'s' if t > 1 else ''}; best: coordinate descent from the default and from each other "
           f"schedule, {doc['max_configs']} configs per kernel shared between them (at least one each); anchor {doc.get('anchor', 'none')} in the same process, "
           f"interleaved (x anchor above 1: Tessera is faster). Load {ld['before']:.2f} before, {ld['after']:.2f} "
           f"after on {ld['cores']} cores, control {ld['control']:.2f}x, worst p80/p20 {ld['worst_p80_p20']:.2f}x"
           + (": **measured under load, the ratios are uncertain**." if ld.get("busy") else " (quiet)."), ""]
    if anchored:
        gm = geomean([r["default_x_anchor"] for r in anchored])
        worst = min(anchored, key=lambda r: r["default_x_anchor"])
        below = [r for r in anchored if r["default_x_anchor"] < 1.0]
        out.append(f"Default against the anchor: geometric mean **{gm:.2f}x** over {len(anchored)} GEMMs, worst "
                   f"{worst['default_x_anchor']:.2f}x ({worst['kernel']}); {len(below)} below 1.0x.")
        out += ["", f"![the default against the anchor per kernel]({svg_rel})", ""]
    gb = geomean([max(1.0, r["default_us"] / r["best_us"]) for r in rows])
    out.append(f"Default / best of the sweep: geometric mean {gb:.2f}x over {len(rows)} kernels, at most "
               f"{max(max(1.0, r['default_us'] / r['best_us']) for r in rows):.2f}x.")
    out.append("")
    head = ["kernel", "default us", "best us", "anchor us", "default x anchor", "best x anchor", "default config"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    us = lambda x: f"{x:.3g}" if x < 10 else f"{x:.4g}"
    for r in rows:
        cells = [f"{r['family']} {r['kernel']}" if r["family"] != "gemm" else r["kernel"], us(r["default_us"]),
                 us(r["best_us"]), us(r["anchor_us"]) if "anchor_us" in r else "-",
                 f"{r['default_x_anchor']:.2f}x" if "default_x_anchor" in r else "-",
                 f"{r['best_x_anchor']:.2f}x" if "best_x_anchor" in r else "-",
                 f"`{r['default_config']}`" + (f" (best: {r['best_change']})" if r.get("best_change") else "")]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def draw_small(doc, svg_path, plt):
    rows = [r for r in doc["rows"] if "default_x_anchor" in r]
    if not rows:
        raise PageError("no row has an anchor to draw against")
    fig, ax = plt.subplots(figsize=(7, 0.16 * len(rows) + 1.2))
    y = list(range(len(rows)))
    vals = [r["default_x_anchor"] for r in rows]
    # Bars from 1.0 (parity): right of it Tessera is faster, left of it slower.
    ax.barh(y, [v - 1.0 for v in vals], left=1.0, color=["#3b6ea5" if v >= 1.0 else "#c0504d" for v in vals], height=0.7)
    ax.scatter([r["best_x_anchor"] for r in rows], y, marker="|", s=60, color="black", zorder=3, label="best of the sweep")
    ax.axvline(1.0, color="gray", linestyle="--", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels([r["kernel"] for r in rows], fontsize=5)
    ax.invert_yaxis()
    ax.set_xlabel(f"x {doc.get('anchor', 'anchor')} (above 1: Tessera faster), log scale", fontsize=7)
    t = doc["threads"]
    ax.set_title(f"small and skinny GEMM defaults, {t} thread{'s' if t > 1 else ''}, {doc['host']}", fontsize=8)
    ax.legend(fontsize=6, loc="lower right")
    ax.grid(True, axis="x", which="both", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(svg_path, metadata={"Date": None, "Creator": None})
    plt.close(fig)


def gemm_markdown(doc, json_rel, svg_rel):
    """A gemm_bench run: its machine and load, a row per shape, and the roofline plot."""
    ld = doc["load"]
    t = doc["threads"]
    out = [f"Written by `bench/results_page.py` from `{json_rel}` (do not edit by hand: rerun the",
           f"script). Measured with `build/bench/gemm_bench --dtype {doc['dtype']} --threads {t} "
           f"{' '.join(str(r['m']) for r in doc['rows'])} --json {json_rel}` on {doc['host']} ({doc.get('arch', '?')}), "
           f"FMA peak {doc['fma_peak_gflops_f32_one_core']:.1f} GFLOP/s f32 per core as the bench measured it, "
           f"{t} thread{'s' if t > 1 else ''}; anchor {doc['anchor']} in the same process, interleaved. "
           f"Load {ld['before']:.2f} before, {ld['after']:.2f} after on {ld['cores']} cores, control "
           f"{ld['control']:.2f}x, worst p80/p20 {ld['worst_p80_p20']:.2f}x"
           + (": **measured under load, the ratios are uncertain**." if ld.get("busy") else " (quiet)."),
           "", f"![GFLOP/s against arithmetic intensity, the compute roof]({svg_rel})", ""]
    torch = any("torch_gflops" in r for r in doc["rows"])
    head = ["M x N x K", "config", "Tessera GFLOP/s", "anchor GFLOP/s", "ratio"]
    if torch:
        head += ["torch GFLOP/s", "ratio"]
    head += ["of peak", "checked"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for r in doc["rows"]:
        share = r["tessera_gflops"] / r["peak_gflops"]
        cells = [f"{r['m']}x{r['n']}x{r['k']}", r.get("config_kind", "?"), f"{r['tessera_gflops']:.1f}",
                 f"{r['anchor_gflops']:.1f}", f"{r['tessera_gflops'] / r['anchor_gflops']:.2f}x"]
        if torch:
            tg = r.get("torch_gflops")
            cells += [f"{tg:.1f}", f"{r['tessera_gflops'] / tg:.2f}x"] if tg else ["-", "-"]
        # Never a bare share above 100 %: the probe read the peak low (bench_util.h ofPeak).
        cells += [f"{share * 100:.1f} %" if share <= 1 else f"{share * 100:.0f} %*", "ok" if r["checked"] else "WRONG"]
        out.append("| " + " | ".join(cells) + " |")
    if any(r["tessera_gflops"] > r["peak_gflops"] for r in doc["rows"]):
        out.append("")
        out.append("\\* above the measured peak: no kernel beats the hardware, so the probe read the peak low.")
    return "\n".join(out) + "\n"


def draw_gemm(doc, svg_path, plt):
    es = {"f32": 4, "bf16": 2, "f16": 2}.get(doc["dtype"], 4)
    rows = doc["rows"]
    # Arithmetic intensity: flops over the bytes of A, B and C each moved once.
    ai = [2 * r["m"] * r["n"] * r["k"] / (es * (r["m"] * r["k"] + r["k"] * r["n"]) + 4 * r["m"] * r["n"]) for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.scatter(ai, [r["tessera_gflops"] for r in rows], label="Tessera", color="C0", zorder=3)
    ax.scatter(ai, [r["anchor_gflops"] for r in rows], label=doc["anchor"], color="C1", marker="s", zorder=3)
    if any("torch_gflops" in r for r in rows):
        pts = [(a, r["torch_gflops"]) for a, r in zip(ai, rows) if "torch_gflops" in r]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], label="torch", color="C2", marker="^", zorder=3)
    for a, r in zip(ai, rows):
        ax.annotate(f"{r['m']}x{r['n']}x{r['k']}", (a, r["tessera_gflops"]), fontsize=6, xytext=(4, 4),
                    textcoords="offset points")
    peak = max(r["peak_gflops"] for r in rows)
    ax.axhline(peak, color="gray", linestyle="--", linewidth=0.8)
    ax.text(min(ai), peak, f" compute peak {peak:.0f} GFLOP/s", fontsize=7, va="bottom")
    ax.set_xscale("log")
    ax.set_ylim(0, peak * 1.15)  # linear from zero: the gap to the roof reads as it is
    ax.set_xlabel("arithmetic intensity (flops per byte of A, B and C)", fontsize=8)
    ax.set_ylabel("GFLOP/s (fastest call)", fontsize=8)
    t = doc["threads"]
    ax.set_title(f"GEMM {doc['dtype']}, {t} thread{'s' if t > 1 else ''}, {doc['host']}", fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="major", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(svg_path, metadata={"Date": None, "Creator": None})
    plt.close(fig)


ORDER = ["evolutionary", "ga", "random", "exhaustive", "evo+warm", "evo+prior", "evo+inverted"]


def column_names(doc):
    """The columns any table has: the bench's own order first (the strategies, then evo+warm,
    evo+prior and evo+inverted), any other after them by name."""
    names = set()
    for t in doc["tables"]:
        names.update(t["columns"])
    return [n for n in ORDER if n in names] + sorted(n for n in names if n not in ORDER)


def unique_names(tables):
    """Table names, the second and later of a repeated name numbered (a record export may hold
    several tables of one shape: other dtypes or knob sets)."""
    seen, out = {}, []
    for t in tables:
        n = seen[t["table"]] = seen.get(t["table"], 0) + 1
        out.append(t["table"] if n == 1 else f"{t['table']} #{n}")
    return out


def label(name):
    return "evo+xgboost" if name == "evolutionary" else name


def fmt(x):
    return f"{x:.0f}" if x >= 10 else f"{x:.1f}"


def section_markdown(doc, json_rel, svg_rel):
    """The section's markdown (between the markers), from the JSON alone. `json_rel`: the JSON file
    as the reader names it (from the repository's root); `svg_rel`: the plot, from the page."""
    if doc["bench"] == "gemm":
        return gemm_markdown(doc, json_rel, svg_rel)
    if doc["bench"] == "small_shapes":
        return small_markdown(doc, json_rel, svg_rel)
    cols = column_names(doc)
    out = []
    out.append(f"Written by `bench/results_page.py` from `{json_rel}` (do not edit by hand: rerun the")
    out.append(f"script). Replay: `build/bench/search_efficiency {doc.get('options', '')} --json "
               f"{json_rel}`, then `python3 bench/results_page.py --svg {json_rel}`.")
    out.append(f"Trials to reach {doc['target'] * 100:.0f} % of each table's best recorded config, {doc['seeds']} seeds "
               f"from seed {doc.get('first_seed', 0)}, batch {doc['batch']}: median / p90, and random / strategy "
               "(random: the exact expectation of sampling without replacement). Settings are chosen on the "
               f"development kernels ({', '.join(doc['development'])}); the rest are held out.")
    out.append("")
    out.append(f"![random / evo+xgboost per table, median and p90]({svg_rel})")
    out.append("")
    out.append(f"![share of runs done against trials, per split and column]({convergence_path(svg_rel)})")
    out.append("")
    head = ["table", "split", "configs", "random"] + [label(c) for c in cols] + [f"rnd/{label(c)}" for c in cols]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for t, shown in zip(doc["tables"], unique_names(doc["tables"])):
        r = t["random"]
        cells = [shown, t["split"], str(t["configs"]), f"{fmt(r['median'])} / {fmt(r['p90'])}"]
        ratios = []
        for c in cols:
            col = t["columns"].get(c)
            if col is None:
                cells.append("-")
                ratios.append("-")
                continue
            cells.append(f"{fmt(col['median'])} / {fmt(col['p90'])}")
            ratios.append(f"{r['median'] / col['median']:.1f}x / {r['p90'] / col['p90']:.1f}x")
        out.append("| " + " | ".join(cells + ratios) + " |")
    out.append("")
    out.append("Geomean of random / strategy at the median (p90 after the slash), per split:")
    out.append("")
    out.append("| split | tables | " + " | ".join(label(c) for c in cols) + " |")
    out.append("|---|---|" + "---|" * len(cols))
    for split in ("development", "held-out"):
        rows = [t for t in doc["tables"] if t["split"] == split]
        if not rows:
            continue
        cells = []
        for c in cols:
            have = [t for t in rows if c in t["columns"]]
            if not have:
                cells.append("-")
                continue
            gm = geomean([t["random"]["median"] / t["columns"][c]["median"] for t in have])
            gp = geomean([t["random"]["p90"] / t["columns"][c]["p90"] for t in have])
            cells.append(f"{gm:.1f}x / {gp:.1f}x ({len(have)})")
        out.append(f"| {split} | {len(rows)} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def markers(name):
    return f"<!-- results_page: {name} begin -->", f"<!-- results_page: {name} end -->"


def splice(page, name, body):
    """`page` with the section `name` replaced by `body` (appended at the end when it has none)."""
    begin, end = markers(name)
    b, e = page.find(begin), page.find(end)
    if (b < 0) != (e < 0) or (b >= 0 and e < b):
        raise PageError(f"the results page has one of the markers of {name} without the other")
    block = f"{begin}\n{body}{end}"
    if b < 0:
        return page.rstrip("\n") + "\n\n" + block + "\n"
    return page[:b] + block + page[e + len(end):]


def current(page, name):
    begin, end = markers(name)
    b, e = page.find(begin), page.find(end)
    if b < 0 or e < 0:
        return None
    return page[b + len(begin) + 1:e]


def draw(doc, svg_path):
    try:
        import matplotlib
    except ImportError:
        raise PageError("--svg needs matplotlib: run it with build/pyenv/bin/python (bash scripts/python_env.sh makes it)")
    matplotlib.use("svg")
    import matplotlib.pyplot as plt
    # Reproducible SVG: fixed ids, no date, text as text (searchable, smaller than glyph paths).
    matplotlib.rcParams["svg.hashsalt"] = "tessera"
    matplotlib.rcParams["svg.fonttype"] = "none"
    if doc["bench"] == "gemm":
        return draw_gemm(doc, svg_path, plt)
    if doc["bench"] == "small_shapes":
        return draw_small(doc, svg_path, plt)
    tables = sorted(doc["tables"], key=lambda t: (t["split"] != "development", t["table"]))
    evo = "evolutionary"
    tables = [t for t in tables if evo in t["columns"]]
    if not tables:
        raise PageError("no table has an evo+xgboost column to draw")
    med = [t["random"]["median"] / t["columns"][evo]["median"] for t in tables]
    p90 = [t["random"]["p90"] / t["columns"][evo]["p90"] for t in tables]
    colors = ["#3b6ea5" if t["split"] == "development" else "#d08a2c" for t in tables]
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(tables) + 1.4))
    y = list(range(len(tables)))
    ax.barh(y, med, color=colors, height=0.6)
    ax.scatter(p90, y, marker="|", s=120, color="black", zorder=3, label="p90")
    ax.set_yticks(y)
    ax.set_yticklabels(unique_names(tables), fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1, color="gray", linewidth=0.8)
    ax.axvline(5, color="gray", linewidth=0.8, linestyle="--")
    ax.set_xlabel("random / evo+xgboost, trials to 95 % of the best\n(bars: median; |: p90; dashed line: 5x)", fontsize=8)
    from matplotlib.patches import Patch
    ax.legend(handles=[Patch(color="#3b6ea5", label="development"), Patch(color="#d08a2c", label="held-out")],
              fontsize=7, loc="lower right")
    ax.set_title(f"search efficiency, {doc['seeds']} seeds", fontsize=9)
    fig.tight_layout()
    fig.savefig(svg_path, metadata={"Date": None, "Creator": None})
    plt.close(fig)

    # Convergence: per split, the share of runs (table x seed) that reached the target within a
    # given multiple of random's median trials, one line per column; random's own line is the
    # exact distribution of sampling without replacement, approximated by its median (x = 1).
    cols = column_names(doc)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4), sharey=True)
    for ax, split in zip(axes, ("development", "held-out")):
        rows = [t for t in doc["tables"] if t["split"] == split]
        for i, c in enumerate(cols):
            xs = sorted(x / t["random"]["median"] for t in rows if c in t["columns"] for x in t["columns"][c]["trials"])
            if not xs:
                continue
            ys = [(i + 1) / len(xs) for i in range(len(xs))]
            ax.step(xs, ys, where="post", label=label(c), linewidth=1.2, color=f"C{i}")  # one colour per column
        ax.axvline(1, color="gray", linewidth=0.8, linestyle="--")
        ax.set_xscale("log")
        ax.set_title(f"{split} ({len(rows)} tables)", fontsize=9)
        ax.set_xlabel("trials to 95 % / random's median", fontsize=8)
        ax.grid(True, which="major", linewidth=0.3)
    axes[0].set_ylabel("share of runs done", fontsize=8)
    axes[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(convergence_path(svg_path), metadata={"Date": None, "Creator": None})
    plt.close(fig)


def convergence_path(svg_path):
    return svg_path[: -len(".svg")] + "_convergence.svg"


def self_test():
    """The script against made-up inputs: a section written is one --check accepts; an edited page,
    an edited trial count, a median that is not its trials' and a lone marker are each caught; the
    plot (when matplotlib imports) names every table and is the same bytes when drawn twice."""
    import copy
    import shutil
    import subprocess
    import tempfile
    doc = {"bench": "search_efficiency", "options": "--seeds 3", "seeds": 3, "first_seed": 0, "target": 0.95,
           "batch": 4, "development": ["host"], "tables": []}
    for name, split, trials in (("host_a", "development", [10.0, 12.0, 30.0]), ("gemm_b", "held-out", [40.0, 50.0, 60.0])):
        doc["tables"].append({"table": name, "kernel": name, "split": split, "configs": 500, "within_target": 5,
                              "random": {"median": 100.0, "p90": 300.0}, "cold_cap": {"median": 5.0, "p90": 5.0},
                              "columns": {"evolutionary": {"median": quantile(trials, 0.5), "p90": quantile(trials, 0.9),
                                                           "trials": trials}}})
    me = os.path.abspath(__file__)
    fails = []
    with tempfile.TemporaryDirectory() as d:
        page, js = os.path.join(d, "results.md"), os.path.join(d, "st.json")
        with open(page, "w") as f:
            f.write("# Results\n\nprose before\n")
        with open(js, "w") as f:
            json.dump(doc, f)
        run = lambda *args: subprocess.run([sys.executable, me, "--md", page, *args], capture_output=True, text=True)
        if run(js).returncode != 0 or run("--check", js).returncode != 0:
            fails.append("a section just written is not accepted by --check")
        text = open(page).read()
        if "prose before" not in text or "| host_a | development | 500 | 100 / 300 | 12 / 26 | 8.3x / 11.4x |" not in text:
            fails.append("the section lacks the prose around it or host_a's row: " + text)
        if "| held-out | 1 | 2.0x / 5.2x (1) |" not in text:
            fails.append("the held-out geomean row is not 2.0x / 5.2x")
        with open(page, "w") as f:
            f.write(text.replace("12 / 26", "11 / 26"))
        r = run("--check", js)
        if r.returncode != 1 or "does not say what st says" not in r.stderr:
            fails.append(f"an edited page passed --check (rc {r.returncode}: {r.stderr.strip()})")
        with open(page, "w") as f:
            f.write(text)
        edited = copy.deepcopy(doc)
        edited["tables"][0]["columns"]["evolutionary"]["trials"][1] = 13.0
        edited["tables"][0]["columns"]["evolutionary"]["median"] = 13.0
        edited["tables"][0]["columns"]["evolutionary"]["p90"] = quantile([10.0, 13.0, 30.0], 0.9)
        with open(js, "w") as f:
            json.dump(edited, f)
        r = run("--check", js)
        if r.returncode != 1:
            fails.append(f"a changed trial count passed --check (rc {r.returncode}: {r.stderr.strip()})")
        edited["tables"][0]["columns"]["evolutionary"]["median"] = 12.0
        with open(js, "w") as f:
            json.dump(edited, f)
        r = run("--check", js)
        if r.returncode != 2 or "is not the median of its trials" not in r.stderr:
            fails.append(f"a median that is not its trials' was not refused (rc {r.returncode}: {r.stderr.strip()})")
        with open(page, "w") as f:
            f.write("<!-- results_page: st begin -->\n")
        with open(js, "w") as f:
            json.dump(doc, f)
        r = run(js)
        if r.returncode != 2 or "without the other" not in r.stderr:
            fails.append(f"a lone marker was not refused (rc {r.returncode})")
        try:
            import matplotlib  # noqa: F401
            have_mpl = True
        except ImportError:
            have_mpl = False
        if have_mpl:
            with open(page, "w") as f:
                f.write("")
            svg = os.path.join(d, "st.svg")
            if run("--svg", js).returncode != 0:
                fails.append("--svg failed")
            else:
                first = open(svg, "rb").read()
                run("--svg", js)
                if open(svg, "rb").read() != first:
                    fails.append("the same JSON drew two different SVG files")
                if not first.startswith(b"<?xml") or b"host_a" not in first or b"gemm_b" not in first:
                    fails.append("the SVG does not name every table")
                conv = open(convergence_path(svg), "rb").read()
                if b"held-out (1 tables)" not in conv or b"evo+xgboost" not in conv:
                    fails.append("the convergence plot lacks a split's panel or the column's line")
        # A gemm_bench run: its row, a share above the peak starred (never a bare figure past 100 %),
        # and its plot.
        gemm = {"bench": "gemm", "dtype": "f32", "threads": 1, "host": "Test CPU", "arch": "x86-64-v4",
                "fma_peak_gflops_f32_one_core": 100.0, "anchor": "sgemm (OpenBLAS Test)",
                "load": {"before": 0.1, "after": 0.2, "cores": 2, "control": 1.0, "worst_p80_p20": 1.1, "busy": False},
                "rows": [{"m": 256, "n": 256, "k": 256, "config_kind": "default", "tessera_gflops": 80.0,
                          "anchor_gflops": 64.0, "peak_gflops": 100.0, "checked": True},
                         {"m": 512, "n": 512, "k": 512, "config_kind": "default", "tessera_gflops": 104.0,
                          "anchor_gflops": 104.0, "peak_gflops": 100.0, "checked": True}]}
        def fresh(path, doc):
            """`doc` written to `path`, the page emptied and the section (and plot) written; (run, page)."""
            with open(path, "w") as f:
                json.dump(doc, f)
            with open(page, "w") as f:
                f.write("")
            r = run(*(["--svg"] if have_mpl else []), path)
            return r, open(page).read()

        gj = os.path.join(d, "g.json")
        r, text = fresh(gj, gemm)
        if r.returncode != 0 or "| 256x256x256 | default | 80.0 | 64.0 | 1.25x | 80.0 % | ok |" not in text:
            fails.append(f"the gemm section lacks its 256^3 row (rc {r.returncode}): {text}")
        if "| 104 %* |" not in text or "above the measured peak" not in text:
            fails.append("a share above the peak is not starred and explained")
        if "(quiet)" not in text:
            fails.append("a quiet run is not said to be quiet")
        if have_mpl and b"compute peak 100 GFLOP/s" not in open(os.path.join(d, "g.svg"), "rb").read():
            fails.append("the gemm plot lacks its compute roof")
        # A small_shapes_bench run: its rows, the geometric means, a row below the anchor counted, and
        # its plot naming the kernels; a non-positive time refused.
        small = {"bench": "small_shapes", "threads": 1, "host": "Test CPU", "arch": "x86-64-v4", "family": "gemm",
                 "skinny": False, "max_configs": 1, "anchor": "sgemm (OpenBLAS Test)",
                 "load": {"before": 0.1, "after": 0.2, "cores": 2, "control": 1.0, "worst_p80_p20": 1.1, "busy": False},
                 "rows": [{"family": "gemm", "kernel": "72x72x72", "default_us": 4.0, "best_us": 4.0, "anchor_us": 4.4,
                           "default_x_anchor": 1.1, "best_x_anchor": 1.1, "default_config": "schedule=nvec", "best_change": ""},
                          {"family": "gemm", "kernel": "500x500x500", "default_us": 1500.0, "best_us": 1250.0,
                           "anchor_us": 1200.0, "default_x_anchor": 0.8, "best_x_anchor": 0.96,
                           "default_config": "schedule=blis", "best_change": "MR=6"}]}
        sj = os.path.join(d, "s.json")
        r, text = fresh(sj, small)
        if r.returncode != 0 or "| 72x72x72 | 4 | 4 | 4.4 | 1.10x | 1.10x | `schedule=nvec` |" not in text:
            fails.append(f"the small-shapes section lacks its 72^3 row (rc {r.returncode}): {text}")
        if "geometric mean **0.94x** over 2 GEMMs, worst 0.80x (500x500x500); 1 below 1.0x" not in text:
            fails.append("the small-shapes geometric mean, worst row or count below 1.0x is wrong")
        if "| 500x500x500 | 1500 | 1250 | 1200 | 0.80x | 0.96x | `schedule=blis` (best: MR=6) |" not in text:
            fails.append("the small-shapes row with a better sweep does not say its change")
        if have_mpl and b"500x500x500" not in open(os.path.join(d, "s.svg"), "rb").read():
            fails.append("the small-shapes plot does not name its kernels")
        small["rows"][0]["best_us"] = 0
        with open(sj, "w") as f:
            json.dump(small, f)
        if run("--check", sj).returncode != 2:
            fails.append("a small-shapes time of zero was not refused")
        with open(page, "w") as f:  # the page as the gemm case left it, for the folder case below
            f.write("")
        run(gj)
        # A folder is the whole set: a section whose JSON is not in it is refused.
        folder = os.path.join(d, "set")
        os.mkdir(folder)
        shutil.copy(gj, folder)
        with open(page, "a") as f:
            f.write("\n<!-- results_page: gone begin -->\n<!-- results_page: gone end -->\n")
        r = run("--check", folder)
        if r.returncode != 2 or "section gone has no gone.json" not in r.stderr:
            fails.append(f"a section without its JSON passed a folder's --check (rc {r.returncode}: {r.stderr.strip()})")
        gemm["rows"][0]["tessera_gflops"] = -1
        with open(gj, "w") as f:
            json.dump(gemm, f)
        if run("--check", gj).returncode != 2:
            fails.append("a negative GFLOP/s was not refused")
    for f in fails:
        print("results_page self-test: " + f, file=sys.stderr)
    print(f"results_page self-test: {'FAILED' if fails else 'ok'}"
          f"{'' if have_mpl else ' (the plot not drawn: no matplotlib in ' + sys.executable + ')'}")
    return 1 if fails else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", nargs="+", help="a bench's --json output (docs/results/NAME.json)")
    ap.add_argument("--md", default=DEFAULT_MD, help="the results page (default: docs/results.md)")
    ap.add_argument("--svg", action="store_true", help="also draw NAME.svg beside each JSON file (matplotlib)")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a section differs from its JSON")
    a = ap.parse_args(argv)
    try:
        try:
            with open(a.md) as f:
                page = f.read()
        except OSError as e:
            raise PageError(f"{a.md}: cannot read the results page ({e.strerror})")
        stale = []
        paths = []
        for path in a.json:
            if os.path.isdir(path):
                found = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".json"))
                if not found:
                    raise PageError(f"{path}: no .json files")
                paths += found
                # A folder is the whole set: a section whose JSON is gone is stale too.
                names = {os.path.splitext(os.path.basename(f))[0] for f in found}
                for m in re.finditer(r"<!-- results_page: (\S+) begin -->", page):
                    if m.group(1) not in names:
                        raise PageError(f"{a.md}: section {m.group(1)} has no {m.group(1)}.json in {path}")
            else:
                paths.append(path)
        for path in paths:
            doc = load(path)
            name = os.path.splitext(os.path.basename(path))[0]
            svg = os.path.join(os.path.dirname(path), name + ".svg")
            json_rel = os.path.relpath(os.path.abspath(path), ROOT)
            if json_rel.startswith(".."):
                json_rel = path
            body = section_markdown(doc, json_rel, os.path.relpath(svg, os.path.dirname(os.path.abspath(a.md))))
            if a.check:
                if current(page, name) != body:
                    stale.append(name)
                continue
            page = splice(page, name, body)
            if a.svg:
                draw(doc, svg)
        if a.check:
            if stale:
                print(f"results_page: {a.md} does not say what {', '.join(stale)} says: "
                      "rerun python3 bench/results_page.py on it", file=sys.stderr)
                return 1
            return 0
        with open(a.md, "w") as f:
            f.write(page)
        return 0
    except PageError as e:
        print(f"results_page: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
