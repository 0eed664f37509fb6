#!/usr/bin/env python3
"""Writes docs/results.md whole from the benches' JSON outputs, with SVG plots.

A bench run with `--json FILE` (build/bench/search_efficiency: trials per table and seed;
build/bench/gemm_bench: GFLOP/s per shape with the host, its peak and its load;
build/bench/small_shapes_bench: the default's and a short sweep's best time per small or skinny shape
against OpenBLAS; build/bench/shape_range_bench: per M of a range the dispatch rule's kernel time,
the per-shape best and OpenBLAS's; build/bench/attention_bench: per shape Tessera's time and the
unfused OpenBLAS path's, torch's where it ran) leaves its figures as data in docs/results/NAME.json.
This script writes the page from that folder alone: a fixed preamble (PREAMBLE: what the page is,
that each section states its host and load, the command that rewrites it, the link to the dated
lab notebook docs/journal.md), then one section per JSON file in the order SECTIONS defines, each
between the markers

    <!-- results_page: NAME begin -->  ...  <!-- results_page: NAME end -->

and, with --svg, draws each section's plot next to its JSON file (NAME.svg) with matplotlib.
Nothing on the page is written by hand. The markdown is computed from the JSON alone (no clock,
no host), so `--check` can tell, without matplotlib, whether docs/results.md is exactly what the
committed JSON says: a section that differs, a section whose JSON is gone, a hand edit anywhere
else on the page and a plot the page links to that is missing each fail it (exit 1); a JSON file
that is not a bench's output, whose figures contradict each other, or that has no place in
SECTIONS is refused (exit 2).

  python3 bench/results_page.py docs/results                          # rewrite the page
  build/pyenv/bin/python bench/results_page.py --svg docs/results     # and every plot
  build/pyenv/bin/python bench/results_page.py --svg docs/results/gemm_f32_1t.json   # the page, one plot
  python3 bench/results_page.py --check docs/results                  # exit 1 if the page differs
  python3 bench/results_page.py --self-test                           # the checks against made-up pages

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
    if doc.get("bench") == "shape_range":
        return load_range(path, doc)
    if doc.get("bench") == "attention":
        return load_attention(path, doc)
    if doc.get("bench") == "gpu_rows":
        return load_gpu_rows(path, doc)
    if doc.get("bench") != "search_efficiency":
        raise PageError(f"{path}: not the --json output of search_efficiency, gemm_bench, small_shapes_bench, shape_range_bench, "
                        f"attention_bench or bench/gpu/vendor_rows.py (its \"bench\" is {doc.get('bench')!r})")
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


def rows_of(path, doc, doc_keys):
    """The document's rows, once it has rows and every key of `doc_keys`."""
    rows = doc.get("rows")
    if not isinstance(rows, list) or not rows:
        raise PageError(f"{path}: no rows")
    for key in doc_keys:
        if key not in doc:
            raise PageError(f"{path}: no \"{key}\"")
    return rows


def require(path, row, keys, where=""):
    for key in keys:
        if key not in row:
            raise PageError(f"{path}: {where}a row without \"{key}\"")


def load_gemm(path, doc):
    for r in rows_of(path, doc, ("dtype", "threads", "host", "anchor", "load", "fma_peak_gflops_f32_one_core")):
        require(path, r, ("m", "n", "k", "tessera_gflops", "anchor_gflops", "peak_gflops", "checked"))
        if not all(isinstance(r[k], (int, float)) and r[k] > 0 for k in ("tessera_gflops", "anchor_gflops", "peak_gflops")):
            raise PageError(f"{path}: a row's GFLOP/s must be positive numbers")
    return doc


def load_small(path, doc):
    for r in rows_of(path, doc, ("threads", "host", "load", "max_configs")):
        require(path, r, ("family", "kernel", "default_us", "best_us", "default_config"))
        nums = [r["default_us"], r["best_us"]] + [r[k] for k in ("anchor_us", "default_x_anchor", "best_x_anchor") if k in r]
        if not all(isinstance(x, (int, float)) and x > 0 for x in nums):
            raise PageError(f"{path}: {r['kernel']}: times and ratios must be positive numbers")
    return doc


def load_range(path, doc):
    rows = rows_of(path, doc, ("n", "k", "hi", "threads", "trials", "points", "runs", "fixed_up_to", "host", "anchor",
                               "load", "rule"))
    if not doc["rule"].get("buckets") or not doc["rule"].get("configs"):
        raise PageError(f"{path}: a rule without buckets or kernels")
    for r in rows:
        if "m" not in r:
            raise PageError(f"{path}: a row without \"m\"")
        if "failed" in r:
            continue
        require(path, r, ("bucket", "fixed", "rule_us", "shape_us", "blas_us", "regret", "shape_config", "checked"),
                f"M={r['m']}: ")
        if not all(isinstance(r[k], (int, float)) and r[k] > 0 for k in ("rule_us", "shape_us", "blas_us")):
            raise PageError(f"{path}: M={r['m']}: times must be positive numbers")
        # The regret is recomputed from the two times, so that a hand edit of one cannot pass.
        if abs(r["rule_us"] / r["shape_us"] - 1 - r["regret"]) > 1e-6:
            raise PageError(f"{path}: M={r['m']}: its regret {r['regret']} is not rule_us / shape_us - 1")
    if not any("failed" not in r for r in rows):
        raise PageError(f"{path}: every row failed")
    return doc


def load_attention(path, doc):
    for r in rows_of(path, doc, ("dtype", "threads", "rounds", "host", "anchor", "load")):
        require(path, r, ("shape", "heads", "seq", "dim", "causal", "tessera_ms", "tessera_gflops", "anchor_ms",
                          "anchor_gflops", "peak_gflops", "checked"))
        nums = [r[k] for k in ("tessera_ms", "tessera_gflops", "anchor_ms", "anchor_gflops", "peak_gflops", "torch_ms") if k in r]
        if not all(isinstance(x, (int, float)) and x > 0 for x in nums):
            raise PageError(f"{path}: {r['shape']}: times and GFLOP/s must be positive numbers")
    return doc


def load_gpu_rows(path, doc):
    """bench/gpu/vendor_rows.py's gpu_rows.json: a device run's goal rows, each of Tessera's times
    checked against the reference, torch's op timed in the same run. Estimates are not measurements:
    a dry run has no place on the page."""
    rows = rows_of(path, doc, ("gpu", "device", "date", "torch", "rows"))
    if doc.get("dry_run"):
        raise PageError(f"{path}: a dry run (estimates only): the page holds measurements")
    for r in rows:
        require(path, r, ("row", "target", "goal", "flops", "torch_us", "best"))
        times = [t for t in ((r["best"] or {}).get("time_us"), r["torch_us"]) if t is not None]
        if not all(isinstance(t, (int, float)) and t > 0 for t in times) or not r["flops"] > 0:
            raise PageError(f"{path}: {r['row']}: times and flops must be positive numbers")
    return doc


def row_line(cells):
    return "| " + " | ".join(cells) + " |"


def head_lines(head):
    """A Markdown table's heading and rule."""
    return [row_line(head), "|" + "---|" * len(head)]


def peak_cells(r):
    """A row's share of the peak and its check. Never a bare share above 100 %: the probe read the
    peak low (bench_util.h ofPeak), the footnote says so."""
    share = r["tessera_gflops"] / r["peak_gflops"]
    return [f"{share * 100:.1f} %" if share <= 1 else f"{share * 100:.0f} %*", "ok" if r["checked"] else "WRONG"]


def peak_footnote(rows):
    if any(r["tessera_gflops"] > r["peak_gflops"] for r in rows):
        return ["", "\\* above the measured peak: no kernel beats the hardware, so the probe read the peak low."]
    return []


def load_line(doc):
    """The run's load in one sentence, the same for every bench: a busy run says its ratios are uncertain."""
    ld = doc["load"]
    return (f"Load {ld['before']:.2f} before, {ld['after']:.2f} after on {ld['cores']} cores, control {ld['control']:.2f}x, "
            f"worst p80/p20 {ld['worst_p80_p20']:.2f}x"
            + (": **measured under load, the ratios are uncertain**." if ld.get("busy") else " (quiet)."))


def threads_word(t):
    return f"{t} thread{'s' if t > 1 else ''}"


def range_command(doc, json_rel):
    opts = f"--n {doc['n']} --k {doc['k']} --hi {doc['hi']} --threads {doc['threads']} --trials {doc['trials']} " \
           f"--points {doc['points']} --runs {doc['runs']}"
    if doc["fixed_up_to"] != 16:
        opts += f" --fixed-up-to {doc['fixed_up_to']}"
    return f"build/bench/shape_range_bench {opts} --json {json_rel}"


def range_markdown(doc, json_rel, svg_rel):
    """A shape_range_bench run: its machine and load, the rule, the regret and the OpenBLAS ratio's
    geometric means and worst rows, the plot, and a row per M."""
    rule = doc["rule"]
    rows = [r for r in doc["rows"] if "failed" not in r]
    failed = [r for r in doc["rows"] if "failed" in r]
    out = [f"Written by `bench/results_page.py` from `{json_rel}` (do not edit by hand: rerun the",
           f"script). Measured with `{range_command(doc, json_rel)}` on {doc['host']} ({doc.get('arch', '?')}), "
           f"{threads_word(doc['threads'])}: GEMM {doc.get('dtype', 'f32')}, N = {doc['n']}, K = {doc['k']}, M = 1..{doc['hi']} "
           f"log-spaced. The rule (`tessera tune --m 1..{doc['hi']}`: shape-generic kernels, and fixed-shape ones for M up to "
           f"{doc['fixed_up_to']} where they measured faster) is tuned from at most {doc['points']} training points; each M's "
           f"per-shape best is that shape's own tune, {doc['trials']} trials (at least {doc['runs']} timed runs each) as the rule's. "
           f"Regret: rule time / per-shape time - 1; OpenBLAS / rule above 1: the rule's kernel is faster. Anchor "
           f"{doc['anchor']} in the same process, interleaved. {load_line(doc)}", ""]
    reg = geomean([1 + r["regret"] for r in rows]) - 1
    worst = max(rows, key=lambda r: r["regret"])
    over = sum(1 for r in rows if r["regret"] > 0.10)
    bl = geomean([r["blas_us"] / r["rule_us"] for r in rows])
    wb = min(rows, key=lambda r: r["blas_us"] / r["rule_us"])
    below = sum(1 for r in rows if r["blas_us"] < r["rule_us"])
    out.append(f"Regret: geometric mean **{reg * 100:.1f} %** over {len(rows)} shapes (goal: within 10 %), worst "
               f"{worst['regret'] * 100:.1f} % (M = {worst['m']}), {over} over 10 %. OpenBLAS / rule: geometric mean "
               f"**{bl:.2f}x**, worst {wb['blas_us'] / wb['rule_us']:.2f}x (M = {wb['m']}), {below} below 1.0x. "
               f"The rule: {len(rule['buckets'])} bucket{'s' if len(rule['buckets']) > 1 else ''}, "
               f"{len(rule['configs'])} kernel{'s' if len(rule['configs']) > 1 else ''}."
               + (f" {len(failed)} shape{'s' if len(failed) > 1 else ''} failed: "
                  + ", ".join(f"M = {r['m']} ({r['failed']})" for r in failed) + "." if failed else ""))
    out += ["", f"![GFLOP/s and regret against M: the rule, the per-shape best and OpenBLAS]({svg_rel})", ""]
    out.append("| bucket | M | kernel | fixed |")
    out.append("|---|---|---|---|")
    for i, b in enumerate(rule["buckets"]):
        out.append(f"| {i} | {b['lo']}..{b['hi']} | `{rule['configs'][b['config']]}` | {'yes' if b['fixed'] else 'no'} |")
    out.append("")
    head = ["M", "bucket", "rule us", "per-shape us", "regret", "OpenBLAS us", "OpenBLAS / rule", "per-shape config", "checked"]
    out += head_lines(head)
    us = lambda x: f"{x:.3g}" if x < 10 else f"{x:.4g}" if x < 1e4 else f"{x:.0f}"
    for r in doc["rows"]:
        if "failed" in r:
            out.append(f"| {r['m']} | - | - | - | - | - | - | {r['failed']} failed | - |")
            continue
        out.append(f"| {r['m']} | {r['bucket']}{' (fixed)' if r['fixed'] else ''} | {us(r['rule_us'])} | {us(r['shape_us'])} | "
                   f"{r['regret'] * 100:.1f} % | {us(r['blas_us'])} | {r['blas_us'] / r['rule_us']:.2f}x | "
                   f"`{r['shape_config']}` | {'ok' if r['checked'] else 'WRONG'} |")
    return "\n".join(out) + "\n"


def draw_range(doc, svg_path, plt):
    rows = [r for r in doc["rows"] if "failed" not in r]
    ms = [r["m"] for r in rows]
    gf = lambda r, key: 2.0 * r["m"] * doc["n"] * doc["k"] / r[key] * 1e-3  # us -> GFLOP/s
    fig, (top, bot) = plt.subplots(2, 1, figsize=(7, 5), sharex=True, gridspec_kw={"height_ratios": [3, 1.4]})
    top.plot(ms, [gf(r, "rule_us") for r in rows], marker="o", markersize=3, label="the rule", color="C0")
    top.plot(ms, [gf(r, "shape_us") for r in rows], marker="s", markersize=3, label="per-shape best", color="C2")
    top.plot(ms, [gf(r, "blas_us") for r in rows], marker="^", markersize=3, label=doc["anchor"], color="C1")
    top.set_xscale("log")
    top.set_ylim(bottom=0)  # linear from zero: the gaps read as they are
    top.set_ylabel("GFLOP/s", fontsize=8)
    top.legend(fontsize=7, loc="lower right")
    top.grid(True, which="major", linewidth=0.3)
    top.set_title(f"one rule for M = 1..{doc['hi']}, N = {doc['n']}, K = {doc['k']}, {threads_word(doc['threads'])}, "
                  f"{doc['host']}", fontsize=8)
    reg = [r["regret"] * 100 for r in rows]
    bot.bar(ms, reg, width=[m * 0.25 for m in ms], color=["#c0504d" if v > 10 else "#3b6ea5" for v in reg])
    bot.axhline(10, color="gray", linestyle="--", linewidth=0.8)
    bot.axhline(0, color="black", linewidth=0.5)
    bot.set_ylabel("regret %", fontsize=8)
    bot.set_xlabel("M (log scale); dashed: the 10 % goal; dotted: the rule's bucket edges", fontsize=8)
    for b in doc["rule"]["buckets"][1:]:
        for ax in (top, bot):
            ax.axvline(b["lo"], color="gray", linestyle=":", linewidth=0.6)
    bot.grid(True, axis="y", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(svg_path, metadata={"Date": None, "Creator": None})
    plt.close(fig)


def attention_markdown(doc, json_rel, svg_rel):
    """An attention_bench run: its machine and load, a row per shape against the unfused OpenBLAS
    path (and torch where it ran), and the plot."""
    t = doc["threads"]
    cmd = f"build/bench/attention_bench --dtype {doc['dtype']} --threads {t} --json {json_rel}" + \
          (f" {doc['rounds']}" if doc["rounds"] != 5 else "")
    torch = any("torch_ms" in r for r in doc["rows"])
    out = [f"Written by `bench/results_page.py` from `{json_rel}` (do not edit by hand: rerun the",
           f"script). Measured with `{cmd}` on {doc['host']} ({doc.get('arch', '?')}), {threads_word(t)}, batch 1: the "
           f"default FlashAttention kernel (or the tuned one, where the row says so) against the anchor {doc['anchor']} "
           f"in the same process, interleaved, its fastest call of {doc['rounds']} rounds per side"
           + (", and torch's scaled_dot_product_attention timed in its own process right before" if torch
              else "; no torch column (no bench/.venv with torch)")
           + ". The unfused path computes all S x S scores, causal or not; GFLOP/s count 4 H S^2 D (causal Tessera: the "
           f"visible pairs only). {load_line(doc)}", "",
           f"![ms per shape: Tessera, the unfused anchor{', torch' if torch else ''}]({svg_rel})", ""]
    head = ["shape", "config", "Tessera ms", "GFLOP/s", "unfused ms", "GFLOP/s", "unfused / Tessera"]
    if torch:
        head += ["torch ms", "torch / Tessera"]
    head += ["of peak", "checked"]
    out += head_lines(head)
    for r in doc["rows"]:
        cells = [r["shape"], r.get("config_kind", "?"), f"{r['tessera_ms']:.2f}", f"{r['tessera_gflops']:.1f}",
                 f"{r['anchor_ms']:.2f}", f"{r['anchor_gflops']:.1f}", f"{r['anchor_ms'] / r['tessera_ms']:.2f}x"]
        if torch:
            cells += [f"{r['torch_ms']:.2f}", f"{r['torch_ms'] / r['tessera_ms']:.2f}x"] if "torch_ms" in r else ["-", "-"]
        cells += peak_cells(r)
        out.append(row_line(cells))
    out += peak_footnote(doc["rows"])
    out.append("")
    out.append("Configs: " + "; ".join(f"{r['shape']}: `{r['config']}`" for r in doc["rows"] if "config" in r) + ".")
    return "\n".join(out) + "\n"


def draw_attention(doc, svg_path, plt):
    rows = doc["rows"]
    series = [("Tessera", "tessera_ms", "C0"), ("unfused (OpenBLAS)", "anchor_ms", "C1")]
    if any("torch_ms" in r for r in rows):
        series.append(("torch SDPA", "torch_ms", "C2"))
    fig, ax = plt.subplots(figsize=(7, 0.55 * len(rows) * len(series) / 2 + 1.4))
    h = 0.8 / len(series)
    for i, (name, key, color) in enumerate(series):
        ys = [j + i * h for j, r in enumerate(rows) if key in r]
        ax.barh(ys, [r[key] for r in rows if key in r], height=h, color=color, label=name)
    ax.set_yticks([j + h * (len(series) - 1) / 2 for j in range(len(rows))])
    ax.set_yticklabels([r["shape"] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms, fastest call (shorter is faster)", fontsize=8)
    ax.set_title(f"attention forward {doc['dtype']}, {threads_word(doc['threads'])}, {doc['host']}", fontsize=8)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=len(series), frameon=False)  # under the bars
    ax.grid(True, axis="x", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(svg_path, metadata={"Date": None, "Creator": None})
    plt.close(fig)


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
    t = doc["threads"]
    rows = doc["rows"]
    anchored = [r for r in rows if "default_x_anchor" in r]
    out = [f"Written by `bench/results_page.py` from `{json_rel}` (do not edit by hand: rerun the",
           f"script). Measured with `{small_command(doc, json_rel)}` on {doc['host']} ({doc.get('arch', '?')}), "
           f"{threads_word(t)}; best: coordinate descent from the default and from each other "
           f"schedule, {doc['max_configs']} configs per kernel shared between them (at least one each); anchor {doc.get('anchor', 'none')} in the same process, "
           f"interleaved (x anchor above 1: Tessera is faster). {load_line(doc)}", ""]
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
    out += head_lines(head)
    us = lambda x: f"{x:.3g}" if x < 10 else f"{x:.4g}"
    for r in rows:
        cells = [f"{r['family']} {r['kernel']}" if r["family"] != "gemm" else r["kernel"], us(r["default_us"]),
                 us(r["best_us"]), us(r["anchor_us"]) if "anchor_us" in r else "-",
                 f"{r['default_x_anchor']:.2f}x" if "default_x_anchor" in r else "-",
                 f"{r['best_x_anchor']:.2f}x" if "best_x_anchor" in r else "-",
                 f"`{r['default_config']}`" + (f" (best: {r['best_change']})" if r.get("best_change") else "")]
        out.append(row_line(cells))
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
    t = doc["threads"]
    out = [f"Written by `bench/results_page.py` from `{json_rel}` (do not edit by hand: rerun the",
           f"script). Measured with `build/bench/gemm_bench --dtype {doc['dtype']} --threads {t} "
           f"{' '.join(str(r['m']) for r in doc['rows'])} --json {json_rel}` on {doc['host']} ({doc.get('arch', '?')}), "
           f"FMA peak {doc['fma_peak_gflops_f32_one_core']:.1f} GFLOP/s f32 per core as the bench measured it, "
           f"{threads_word(t)}; anchor {doc['anchor']} in the same process, interleaved. {load_line(doc)}",
           "", f"![GFLOP/s against arithmetic intensity, the compute roof]({svg_rel})", ""]
    torch = any("torch_gflops" in r for r in doc["rows"])
    head = ["M x N x K", "config", "Tessera GFLOP/s", "anchor GFLOP/s", "ratio"]
    if torch:
        head += ["torch GFLOP/s", "ratio"]
    head += ["of peak", "checked"]
    out += head_lines(head)
    for r in doc["rows"]:
        cells = [f"{r['m']}x{r['n']}x{r['k']}", r.get("config_kind", "?"), f"{r['tessera_gflops']:.1f}",
                 f"{r['anchor_gflops']:.1f}", f"{r['tessera_gflops'] / r['anchor_gflops']:.2f}x"]
        if torch:
            tg = r.get("torch_gflops")
            cells += [f"{tg:.1f}", f"{r['tessera_gflops'] / tg:.2f}x"] if tg else ["-", "-"]
        cells += peak_cells(r)
        out.append(row_line(cells))
    out += peak_footnote(doc["rows"])
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


def gpu_markdown(doc, json_rel):
    """A device run's goal rows: Tessera's best correct run of each row against torch's op, timed in
    the same run, with the row's goal."""
    rows = doc["rows"]
    out = [f"Written by `bench/results_page.py` from `{json_rel}` (do not edit by hand: rerun the",
           f"script). Measured by `bench/gpu/device_rows.sh` (`bench/gpu/vendor_rows.py`) on {doc['device']} "
           f"({doc['gpu']}), {doc['date']}, {doc['torch']} in the same run: each row's configs run by `tessera run`, "
           "checked against the reference before their time counts, the fastest correct one kept; torch's op timed "
           "the same way (CUDA events, L2 flushed, median). Ratio above 1: Tessera is faster.", ""]
    met = [r for r in rows if r["best"] and r["torch_us"] and r["torch_us"] / r["best"]["time_us"] >= r["goal"]]
    timed = [r for r in rows if r["best"] and r["torch_us"]]
    if timed:
        out += [f"Torch / Tessera: geometric mean **{geomean([r['torch_us'] / r['best']['time_us'] for r in timed]):.2f}x** "
                f"over {len(timed)} rows; {len(met)} of {len(rows)} at their goal.", ""]
    head = ["row", "target", "Tessera us", "TFLOP/s", "torch us", "torch / Tessera", "goal", "config"]
    out += head_lines(head)
    for r in rows:
        b = r["best"] or {}
        t, a = b.get("time_us"), r["torch_us"]
        cells = [r["row"], r["target"], f"{t:.1f}" if t else "no correct run", f"{r['flops'] / t * 1e-6:.1f}" if t else "-",
                 f"{a:.1f}" if a else f"- ({r.get('torch_op') or 'not timed'})", f"{a / t:.2f}x" if t and a else "-",
                 f">= {r['goal']}x", f"`{b['config']}`" if b.get("config") else "-"]
        out.append(row_line(cells))
    return "\n".join(out) + "\n"


def section_markdown(doc, json_rel, svg_rel):
    """The section's markdown (between the markers), from the JSON alone. `json_rel`: the JSON file
    as the reader names it (from the repository's root); `svg_rel`: the plot, from the page."""
    if doc["bench"] == "gemm":
        return gemm_markdown(doc, json_rel, svg_rel)
    if doc["bench"] == "small_shapes":
        return small_markdown(doc, json_rel, svg_rel)
    if doc["bench"] == "shape_range":
        return range_markdown(doc, json_rel, svg_rel)
    if doc["bench"] == "attention":
        return attention_markdown(doc, json_rel, svg_rel)
    if doc["bench"] == "gpu_rows":
        return gpu_markdown(doc, json_rel)
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
    out += head_lines(head)
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
        out.append(row_line(cells + ratios))
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


# The page's sections, in its order: (heading, [(NAME, subheading or None)]), NAME being
# docs/results/NAME.json. A JSON file not named here has no place on the page and is refused; a
# name without its file is left out (with its heading when the whole group is).
SECTIONS = (
    ("GPU: the goal rows against torch", (("gpu_rows", None),)),
    ("Host GEMM: the default kernel against OpenBLAS", (("gemm_f32_1t", "GEMM f32, one thread"),
                                                        ("gemm_f32_2t", "GEMM f32, two threads"),
                                                        ("gemm_bf16_1t", "GEMM bf16, one thread"))),
    ("Host GEMM: small and skinny shapes against OpenBLAS", (("small_gemm_1t", "Small and skinny GEMMs, one thread"),
                                                             ("small_gemm_2t", "Small and skinny GEMMs, two threads"))),
    ("Shape ranges: one rule for every M", (("shape_range_1t", "The range rule, one thread"),
                                            ("shape_range_2t", "The range rule, two threads"))),
    ("Host attention against the unfused OpenBLAS path", (("attention_f32_1t", "Attention f32, one thread"),
                                                          ("attention_f32_2t", "Attention f32, two threads"))),
    ("Search efficiency: the current replay", (("search_efficiency", None),)),
)
PLACED = [name for _, names in SECTIONS for name, _ in names]

PREAMBLE = """# Measured results

This page is written whole by `bench/results_page.py` from the benches' `--json` outputs kept in
`docs/results/` (one section per file, with its plot drawn by matplotlib); nothing on it is written
by hand, and the `docs_results_page` test fails when it says anything other than what those files
say. Each section names the bench command that measured it, the host it ran on and the machine's
load before and after the run, with the control's slowdown: a section measured under load says
that its ratios are uncertain. Ratios are against anchors measured in the same process,
interleaved. OpenBLAS runs with the kernels it picks for the host: the benches drop an inherited
`OPENBLAS_CORETYPE` or `OPENBLAS_L2_SIZE` and say so (`TESSERA_BENCH_OPENBLAS_ENV=keep` keeps them),
and each section names the core OpenBLAS ran.

The dated history of these and every other measurement (GPUs, PyTorch, the search's settings, the
emulator, the cache service, build and test times) is the lab notebook, [journal.md](journal.md).
The GPU section is written from a device run's `gpu_rows.json` (`bench/gpu/device_rows.sh` leaves it
in its output; copy it to `docs/results/`); until a device run has left one here, the latest GPU
figures are the journal's.

To refresh a section, rerun the command it names (that rewrites its JSON file), then write the page
and the plots again:

<!-- doc-test: skip: rewrites the committed page; bench/results_page.py --self-test writes and checks a page -->
```sh
build/pyenv/bin/python bench/results_page.py --svg docs/results
python3 bench/results_page.py --check docs/results   # what the docs_results_page test runs
```
"""


def slug(heading):
    """The anchor a Markdown renderer gives a heading (GitHub's rule: lower case, punctuation
    dropped, spaces to hyphens)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def render(docs, json_rel, svg_rel):
    """The whole page from `docs` (NAME: its JSON) in SECTIONS' order; `json_rel(NAME)` and
    `svg_rel(NAME)` name the JSON file and the plot as the page shows them."""
    unplaced = sorted(n for n in docs if n not in PLACED)
    if unplaced:
        raise PageError(f"{', '.join(n + '.json' for n in unplaced)}: no place on the page (add it to SECTIONS in "
                        "bench/results_page.py)")
    out, contents = [PREAMBLE], []
    for heading, names in SECTIONS:
        here = [(n, sub) for n, sub in names if n in docs]
        if not here:
            continue
        contents.append(f"- [{heading}](#{slug(heading)})")
        out.append(f"## {heading}\n")
        for name, sub in here:
            if sub:
                out.append(f"### {sub}\n")
            begin, end = markers(name)
            out.append(f"{begin}\n{section_markdown(docs[name], json_rel(name), svg_rel(name))}{end}\n")
    out.insert(1, "Sections:\n\n" + "\n".join(contents) + "\n")
    return "\n".join(out)


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
    if doc["bench"] == "shape_range":
        return draw_range(doc, svg_path, plt)
    if doc["bench"] == "attention":
        return draw_attention(doc, svg_path, plt)
    if doc["bench"] == "gpu_rows":
        return None  # a table says it: no plot
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
    """The script against made-up inputs: a page written is one --check accepts, in SECTIONS' order
    with the preamble; an edited section, a hand edit outside the sections, an edited trial count, a
    section whose JSON is gone and a missing plot are each caught; a median that is not its trials',
    a regret that is not its times', a non-positive time and a JSON with no place on the page are
    refused; each bench's rows are written as they should be; the plots (when matplotlib imports)
    name what they show and are the same bytes when drawn twice."""
    import copy
    import subprocess
    import tempfile
    doc = {"bench": "search_efficiency", "options": "--seeds 3", "seeds": 3, "first_seed": 0, "target": 0.95,
           "batch": 4, "development": ["host"], "tables": []}
    for name, split, trials in (("host_a", "development", [10.0, 12.0, 30.0]), ("gemm_b", "held-out", [40.0, 50.0, 60.0])):
        doc["tables"].append({"table": name, "kernel": name, "split": split, "configs": 500, "within_target": 5,
                              "random": {"median": 100.0, "p90": 300.0}, "cold_cap": {"median": 5.0, "p90": 5.0},
                              "columns": {"evolutionary": {"median": quantile(trials, 0.5), "p90": quantile(trials, 0.9),
                                                           "trials": trials}}})
    load_ = {"before": 0.1, "after": 0.2, "cores": 2, "control": 1.0, "worst_p80_p20": 1.1, "busy": False}
    gemm = {"bench": "gemm", "dtype": "f32", "threads": 1, "host": "Test CPU", "arch": "x86-64-v4",
            "fma_peak_gflops_f32_one_core": 100.0, "anchor": "sgemm (OpenBLAS Test)", "load": load_,
            "rows": [{"m": 256, "n": 256, "k": 256, "config_kind": "default", "tessera_gflops": 80.0,
                      "anchor_gflops": 64.0, "peak_gflops": 100.0, "checked": True},
                     {"m": 512, "n": 512, "k": 512, "config_kind": "default", "tessera_gflops": 104.0,
                      "anchor_gflops": 104.0, "peak_gflops": 100.0, "checked": True}]}
    small = {"bench": "small_shapes", "threads": 1, "host": "Test CPU", "arch": "x86-64-v4", "family": "gemm",
             "skinny": False, "max_configs": 1, "anchor": "sgemm (OpenBLAS Test)", "load": load_,
             "rows": [{"family": "gemm", "kernel": "72x72x72", "default_us": 4.0, "best_us": 4.0, "anchor_us": 4.4,
                       "default_x_anchor": 1.1, "best_x_anchor": 1.1, "default_config": "schedule=nvec", "best_change": ""},
                      {"family": "gemm", "kernel": "500x500x500", "default_us": 1500.0, "best_us": 1250.0,
                       "anchor_us": 1200.0, "default_x_anchor": 0.8, "best_x_anchor": 0.96,
                       "default_config": "schedule=blis", "best_change": "MR=6"}]}
    rng = {"bench": "shape_range", "dtype": "f32", "n": 1024, "k": 1024, "hi": 64, "threads": 1, "trials": 8, "points": 8,
           "runs": 3, "fixed_up_to": 16, "host": "Test CPU", "arch": "x86-64-v4", "anchor": "sgemm (OpenBLAS Test)",
           "load": dict(load_, busy=True, control=1.6),
           "rule": {"buckets": [{"lo": 1, "hi": 1, "config": 0, "fixed": True}, {"lo": 2, "hi": 64, "config": 1, "fixed": False}],
                    "configs": ["schedule=nvec,MR=1", "schedule=blis,MR=6"]},
           "rows": [{"m": 1, "bucket": 0, "fixed": True, "rule_us": 20.0, "shape_us": 20.0, "blas_us": 40.0, "regret": 0.0,
                     "blas_x_rule": 2.0, "shape_config": "schedule=nvec,MR=1", "checked": True},
                    {"m": 3, "failed": "per-shape tune"},
                    {"m": 64, "bucket": 1, "fixed": False, "rule_us": 121.0, "shape_us": 100.0, "blas_us": 110.0,
                     "regret": 0.21, "blas_x_rule": 110 / 121, "shape_config": "schedule=blis,MR=4", "checked": True}]}
    attn = {"bench": "attention", "dtype": "f32", "threads": 1, "rounds": 5, "host": "Test CPU", "arch": "x86-64-v4",
            "anchor": "unfused: sgemm, softmax, sgemm (OpenBLAS Test)", "torch": True, "load": load_,
            "rows": [{"shape": "H8 S2048 D64", "heads": 8, "seq": 2048, "dim": 64, "causal": False, "config_kind": "default",
                      "config": "BQ=64", "tessera_ms": 40.0, "tessera_gflops": 50.0, "anchor_ms": 60.0, "anchor_gflops": 33.3,
                      "peak_gflops": 100.0, "checked": True, "torch_ms": 50.0},
                     {"shape": "H8 S2048 D64 causal", "heads": 8, "seq": 2048, "dim": 64, "causal": True,
                      "config_kind": "default", "config": "BQ=32", "tessera_ms": 25.0, "tessera_gflops": 40.0,
                      "anchor_ms": 60.0, "anchor_gflops": 33.3, "peak_gflops": 100.0, "checked": True}]}
    me = os.path.abspath(__file__)
    gpu = {"bench": "gpu_rows", "gpu": "H200", "device": "NVIDIA H200", "torch": "torch 2.11.0", "date": "2026-11-30",
           "dry_run": False, "rows": [
               {"row": "GEMM f16 4096^3", "target": "sm_90a", "goal": 1.05, "flops": 2 * 4096 ** 3, "torch_us": 1100.0,
                "torch_op": "torch.matmul", "best": {"time_us": 1000.0, "config": "strategy=wgmma"}},
               {"row": "attention D256", "target": "sm_90a", "goal": 1.0, "flops": 1e12, "torch_us": 900.0,
                "torch_op": "sdpa", "best": None}]}
    fails = []
    try:
        import matplotlib  # noqa: F401
        have_mpl = True
    except ImportError:
        have_mpl = False
    with tempfile.TemporaryDirectory() as d:
        page, res = os.path.join(d, "results.md"), os.path.join(d, "results")
        os.mkdir(res)
        run = lambda *args: subprocess.run([sys.executable, me, "--md", page, *args], capture_output=True, text=True)

        def put(name, body):
            with open(os.path.join(res, name + ".json"), "w") as f:
                json.dump(body, f)

        def write_all():
            """The page (and, with matplotlib, the plots; without, empty stand-ins) from the folder; (run, page)."""
            r = run(*(["--svg"] if have_mpl else []), res)
            if not have_mpl:
                for f in os.listdir(res):
                    if f.endswith(".json"):
                        for svg in (f[:-5] + ".svg", f[:-5] + "_convergence.svg"):
                            open(os.path.join(res, svg), "a").close()
            return r, open(page).read() if os.path.exists(page) else ""

        put("search_efficiency", doc)
        put("gemm_f32_1t", gemm)
        put("small_gemm_1t", small)
        put("shape_range_1t", rng)
        put("attention_f32_1t", attn)
        put("gpu_rows", gpu)
        r, text = write_all()
        if r.returncode != 0 or run("--check", res).returncode != 0:
            fails.append(f"a page just written is not accepted by --check (rc {r.returncode}: {r.stderr.strip()})")
        if not text.startswith(PREAMBLE) or "[journal.md](journal.md)" not in text:
            fails.append("the page does not open with the preamble that links the journal")
        order = [text.find(markers(n)[0]) for n in ("gpu_rows", "gemm_f32_1t", "small_gemm_1t", "shape_range_1t", "attention_f32_1t",
                                                    "search_efficiency")]
        if min(order) < 0 or order != sorted(order):
            fails.append(f"the sections are not in SECTIONS' order: {order}")
        if "- [Shape ranges: one rule for every M](#shape-ranges-one-rule-for-every-m)" not in text:
            fails.append("the contents list lacks a section's link")
        # Each bench's rows: every string of an entry on the page, or its message.
        for needed, message in (
                (("| host_a | development | 500 | 100 / 300 | 12 / 26 | 8.3x / 11.4x |",),
                 "the search section lacks host_a's row"),
                (("| held-out | 1 | 2.0x / 5.2x (1) |",), "the held-out geomean row is not 2.0x / 5.2x"),
                (("| 256x256x256 | default | 80.0 | 64.0 | 1.25x | 80.0 % | ok |",), "the gemm section lacks its 256^3 row"),
                (("| 104 %* |", "above the measured peak"), "a share above the peak is not starred and explained"),
                (("(quiet)",), "a quiet run is not said to be quiet"),
                (("| 72x72x72 | 4 | 4 | 4.4 | 1.10x | 1.10x | `schedule=nvec` |",),
                 "the small-shapes section lacks its 72^3 row"),
                (("geometric mean **0.94x** over 2 GEMMs, worst 0.80x (500x500x500); 1 below 1.0x",),
                 "the small-shapes geometric mean, worst row or count below 1.0x is wrong"),
                (("| 500x500x500 | 1500 | 1250 | 1200 | 0.80x | 0.96x | `schedule=blis` (best: MR=6) |",),
                 "the small-shapes row with a better sweep does not say its change"),
                (("| 64 | 1 | 121 | 100 | 21.0 % | 110 | 0.91x | `schedule=blis,MR=4` | ok |",),
                 "the shape-range section lacks its M = 64 row"),
                (("| 1 | 0 (fixed) | 20 | 20 | 0.0 % | 40 | 2.00x |", "| 0 | 1..1 | `schedule=nvec,MR=1` | yes |"),
                 "the shape-range section lacks its fixed bucket's row or the rule's table"),
                (("geometric mean **10.0 %** over 2 shapes", "1 over 10 %", "M = 3 (per-shape tune)"),
                 "the shape-range regret's geometric mean, its count over 10 % or the failed shape is wrong"),
                (("**measured under load, the ratios are uncertain**",), "a busy run is not said to be uncertain"),
                (("| H8 S2048 D64 | default | 40.00 | 50.0 | 60.00 | 33.3 | 1.50x | 50.00 | 1.25x | 50.0 % | ok |",),
                 "the attention section lacks its torch row"),
                (("| H8 S2048 D64 causal | default | 25.00 | 40.0 | 60.00 | 33.3 | 2.40x | - | - | 40.0 % | ok |",),
                 "the attention row without torch does not say so"),
                (("| GEMM f16 4096^3 | sm_90a | 1000.0 | 137.4 | 1100.0 | 1.10x | >= 1.05x | `strategy=wgmma` |",),
                 "the GPU section lacks its GEMM row"),
                (("| attention D256 | sm_90a | no correct run | - | 900.0 | - | >= 1.0x | - |", "1 of 2 at their goal"),
                 "the GPU section's row without a correct run, or its count at goal, is wrong"),
        ):
            if any(n not in text for n in needed):
                fails.append(message)
        # The page is written whole: an edited section, a hand edit outside the sections (the
        # preamble, between two sections, at the end) are each caught.
        for what, edited in (("an edited section", text.replace("12 / 26", "11 / 26")),
                             ("a hand edit of the preamble", text.replace("nothing on it is written", "nothing on it is")),
                             ("a paragraph added between two sections",
                              text.replace("### ", "A note by hand.\n\n### ", 1)),
                             ("a line added at the end", text + "\nA note by hand.\n")):
            with open(page, "w") as f:
                f.write(edited)
            r = run("--check", res)
            if r.returncode != 1:
                fails.append(f"{what} passed --check (rc {r.returncode}: {r.stderr.strip()})")
        r = run("--check", res)
        if "outside its sections" not in r.stderr:
            fails.append(f"a hand edit outside the sections is not named as such: {r.stderr.strip()}")
        with open(page, "w") as f:
            f.write(text.replace("12 / 26", "11 / 26"))
        if "does not say what search_efficiency says" not in run("--check", res).stderr:
            fails.append("an edited section is not named")
        with open(page, "w") as f:
            f.write(text)
        # The JSON: a changed trial count is stale; a median that is not its trials', a regret that
        # is not its times' and a non-positive time are refused.
        edited = copy.deepcopy(doc)
        col = edited["tables"][0]["columns"]["evolutionary"]
        col["trials"][1], col["median"], col["p90"] = 13.0, 13.0, quantile([10.0, 13.0, 30.0], 0.9)
        put("search_efficiency", edited)
        if run("--check", res).returncode != 1:
            fails.append("a changed trial count passed --check")
        col["median"] = 12.0
        put("search_efficiency", edited)
        r = run("--check", res)
        if r.returncode != 2 or "is not the median of its trials" not in r.stderr:
            fails.append(f"a median that is not its trials' was not refused (rc {r.returncode}: {r.stderr.strip()})")
        put("search_efficiency", doc)
        bad = copy.deepcopy(rng)
        bad["rows"][2]["shape_us"] = 110.0
        put("shape_range_1t", bad)
        r = run("--check", res)
        if r.returncode != 2 or "is not rule_us / shape_us - 1" not in r.stderr:
            fails.append(f"a regret that is not its times' was not refused (rc {r.returncode}: {r.stderr.strip()})")
        put("shape_range_1t", rng)
        for name, body, path in (("small_gemm_1t", small, ("rows", 0, "best_us")), ("gemm_f32_1t", gemm, ("rows", 0, "tessera_gflops")),
                                 ("attention_f32_1t", attn, ("rows", 1, "anchor_ms"))):
            bad = copy.deepcopy(body)
            bad[path[0]][path[1]][path[2]] = 0
            put(name, bad)
            if run("--check", res).returncode != 2:
                fails.append(f"{name}: a {path[2]} of zero was not refused")
            put(name, body)
        for what, edit in (("a dry run", lambda g: g.update(dry_run=True)),
                           ("a time of zero", lambda g: g["rows"][0]["best"].update(time_us=0))):
            bad = copy.deepcopy(gpu)
            edit(bad)
            put("gpu_rows", bad)
            if run("--check", res).returncode != 2:
                fails.append(f"gpu_rows: {what} was not refused")
        put("gpu_rows", gpu)
        put("unplaced", gemm)
        r = run("--check", res)
        if r.returncode != 2 or "no place on the page" not in r.stderr:
            fails.append(f"a JSON with no place on the page was not refused (rc {r.returncode}: {r.stderr.strip()})")
        os.remove(os.path.join(res, "unplaced.json"))
        if run("--check", res).returncode != 0:
            fails.append("the page is not accepted again once every JSON is as written")
        # A section whose JSON is gone is stale, and so is a page whose plot is missing.
        os.remove(os.path.join(res, "attention_f32_1t.json"))
        r = run("--check", res)
        if r.returncode != 1 or "has a section attention_f32_1t with no attention_f32_1t.json" not in r.stderr:
            fails.append(f"a section without its JSON passed --check (rc {r.returncode}: {r.stderr.strip()})")
        put("attention_f32_1t", attn)
        os.rename(os.path.join(res, "gemm_f32_1t.svg"), os.path.join(d, "kept.svg"))
        r = run("--check", res)
        if r.returncode != 1 or "gemm_f32_1t.svg, which is missing" not in r.stderr:
            fails.append(f"a missing plot passed --check (rc {r.returncode}: {r.stderr.strip()})")
        os.rename(os.path.join(d, "kept.svg"), os.path.join(res, "gemm_f32_1t.svg"))
        if have_mpl:
            svg = lambda n: open(os.path.join(res, n + ".svg"), "rb").read()
            first = {n: svg(n) for n in PLACED if os.path.exists(os.path.join(res, n + ".svg"))}
            write_all()
            if any(svg(n) != b for n, b in first.items()):
                fails.append("the same JSON drew two different SVG files")
            se = first["search_efficiency"]
            if not se.startswith(b"<?xml") or b"host_a" not in se or b"gemm_b" not in se:
                fails.append("the search plot does not name every table")
            conv = svg("search_efficiency_convergence")
            if b"held-out (1 tables)" not in conv or b"evo+xgboost" not in conv:
                fails.append("the convergence plot lacks a split's panel or the column's line")
            if b"compute peak 100 GFLOP/s" not in first["gemm_f32_1t"]:
                fails.append("the gemm plot lacks its compute roof")
            if b"500x500x500" not in first["small_gemm_1t"]:
                fails.append("the small-shapes plot does not name its kernels")
            if b"regret %" not in first["shape_range_1t"] or b"per-shape best" not in first["shape_range_1t"]:
                fails.append("the shape-range plot lacks its regret panel or the per-shape line")
            if b"H8 S2048 D64 causal" not in first["attention_f32_1t"] or b"torch SDPA" not in first["attention_f32_1t"]:
                fails.append("the attention plot does not name its shapes or torch")
            # --svg with one file named draws that file's plot only.
            for n in ("gemm_f32_1t", "small_gemm_1t"):
                os.remove(os.path.join(res, n + ".svg"))
            run("--svg", os.path.join(res, "gemm_f32_1t.json"))
            if not os.path.exists(os.path.join(res, "gemm_f32_1t.svg")) or os.path.exists(os.path.join(res, "small_gemm_1t.svg")):
                fails.append("--svg with one JSON named did not draw that plot alone")
    for f in fails:
        print("results_page self-test: " + f, file=sys.stderr)
    print(f"results_page self-test: {'FAILED' if fails else 'ok'}"
          f"{'' if have_mpl else ' (the plots not drawn: no matplotlib in ' + sys.executable + ')'}")
    return 1 if fails else 0


def main(argv):
    if argv == ["--self-test"]:
        return self_test()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("json", nargs="+", help="the folder of the benches' --json outputs (docs/results), or files in it")
    ap.add_argument("--md", default=DEFAULT_MD, help="the results page (default: docs/results.md)")
    ap.add_argument("--svg", action="store_true", help="also draw the plots: of every file for a folder, else of those named")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if the page is not what the JSON says")
    a = ap.parse_args(argv)
    try:
        folders = {os.path.normpath(p if os.path.isdir(p) else os.path.dirname(os.path.abspath(p))) for p in a.json}
        if len(folders) != 1:
            raise PageError("the page is written from one folder of JSON files: " + ", ".join(sorted(folders)))
        folder = folders.pop()
        for p in a.json:
            if not os.path.isdir(p) and not (p.endswith(".json") and os.path.isfile(p)):
                raise PageError(f"{p}: not a .json file or a folder")
        found = sorted(f for f in os.listdir(folder) if f.endswith(".json"))
        if not found:
            raise PageError(f"{folder}: no .json files")
        docs = {os.path.splitext(f)[0]: load(os.path.join(folder, f)) for f in found}
        md_dir = os.path.dirname(os.path.abspath(a.md))

        def json_rel(name):
            rel = os.path.relpath(os.path.join(folder, name + ".json"), ROOT)
            return os.path.join(folder, name + ".json") if rel.startswith("..") else rel

        page = render(docs, json_rel, lambda name: os.path.relpath(os.path.join(folder, name + ".svg"), md_dir))
        if a.check:
            try:
                with open(a.md) as f:
                    have = f.read()
            except OSError as e:
                raise PageError(f"{a.md}: cannot read the results page ({e.strerror})")
            problems = []
            stale = [n for n in docs if current(have, n) != current(page, n)]
            if stale:
                problems.append(f"does not say what {', '.join(stale)} says")
            gone = [m.group(1) for m in re.finditer(r"<!-- results_page: (\S+) begin -->", have) if m.group(1) not in docs]
            problems += [f"has a section {n} with no {n}.json in {folder}" for n in gone]
            if not problems and have != page:
                problems.append("differs outside its sections (the page is written whole: a hand edit, or the "
                                "script's preamble, headings or order changed)")
            for m in re.finditer(r"!\[[^\]]*\]\(([^)]+\.svg)\)", page):
                if not os.path.isfile(os.path.join(md_dir, m.group(1))):
                    problems.append(f"links the plot {m.group(1)}, which is missing (draw it with --svg)")
            if problems:
                for p in problems:
                    print(f"results_page: {a.md} {p}", file=sys.stderr)
                print("results_page: rerun python3 bench/results_page.py on the folder (with --svg from build/pyenv/bin/python "
                      "for the plots)", file=sys.stderr)
                return 1
            return 0
        if a.svg:
            named = {os.path.splitext(os.path.basename(p))[0] for p in a.json if not os.path.isdir(p)}
            for name in docs:
                if any(os.path.isdir(p) for p in a.json) or name in named:
                    draw(docs[name], os.path.join(folder, name + ".svg"))
        with open(a.md, "w") as f:
            f.write(page)
        return 0
    except PageError as e:
        print(f"results_page: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
