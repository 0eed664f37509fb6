#!/usr/bin/env python3
"""Holds the documents' links to the tree: every relative link of README.md, ARCHITECTURE.md and
docs/*.md (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`, outside code blocks) must name
a file or folder that exists, and an anchor into a Markdown page must be one of that page's
headings as a renderer names it (lower case, punctuation dropped, spaces to hyphens, a repeated
heading numbered -1, -2, ...). So a section that moves (docs/results.md's dated records went to
docs/journal.md) cannot leave a link behind. `--self-test` checks that a missing file, a missing
anchor and a repeated heading's numbering are caught."""
import argparse
import os
import re
import sys
import tempfile

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def slug(heading):
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())  # a link in a heading: its text
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def lines_outside_code(path):
    inside = False
    for n, line in enumerate(open(path, encoding="utf-8"), 1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            yield n, line


def anchors(path, memo={}):
    if path not in memo:
        seen, out = {}, set()
        for _, line in lines_outside_code(path):
            m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
        memo[path] = out
    return memo[path]


def check(doc):
    problems = []
    here = os.path.dirname(doc)
    for n, line in lines_outside_code(doc):
        for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, mailto:, ...
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(here, path)) if path else doc
            if not os.path.exists(full):
                problems.append(f"{doc}:{n}: {target}: no such file")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                problems.append(f"{doc}:{n}: {target}: no heading of {os.path.basename(full)} has the anchor #{anchor}")
    return problems


def documents(source):
    docs = [os.path.join(source, f) for f in ("README.md", "ARCHITECTURE.md")]
    folder = os.path.join(source, "docs")
    return docs + sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".md"))


def self_test():
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "b.md"), "w") as f:
            f.write("# B page\n\n## Two words (2026-12-01)\n\n## Again\n\n## Again\n")
        with open(os.path.join(d, "a.md"), "w") as f:
            f.write("[ok](b.md#two-words-2026-12-01) [ok](b.md#again-1) [ok](#a-page)\n# A page\n"
                    "[gone](c.md) [bad](b.md#again-2)\n```\n[in code](nowhere.md)\n```\n")
        got = check(os.path.join(d, "a.md"))
        want = ["c.md: no such file", "b.md#again-2: no heading"]
        if len(got) != 2 or not all(any(w in g for g in got) for w in want):
            print("links self-test: FAILED: " + "; ".join(got), file=sys.stderr)
            return 1
    print("links self-test: ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--source", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    problems = [p for doc in documents(os.path.normpath(a.source)) for p in check(doc)]
    for p in problems:
        print(p, file=sys.stderr)
    print(f"links: {len(problems)} broken" if problems else "links: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
