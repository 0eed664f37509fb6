#!/usr/bin/env python3
"""Holds ARCHITECTURE.md to the tree: every file or folder it names in backquotes must exist, every
`ARCHITECTURE.md §N` a source comment cites must be a section of it, and no document or source
file may send a reader to a design note outside the repository; the code generator's folders
(codegen/ and its subfolders, and the back ends above it, HELD) include codegen's shared files,
their own, and no other but those ALLOWED: codegen/ includes none of them.
`--self-test` checks that the checks catch a missing path, a missing section, an outside reference
and a back-arrow into a codegen subfolder or a back end."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

PATH = re.compile(r"`([A-Za-z0-9_.\-]+(?:/[A-Za-z0-9_.\-<>*]*)+|[A-Za-z0-9_\-]+\.(?:h|cpp|c|py|sh|md|txt))`")
CITE = re.compile(r"ARCHITECTURE\.md (§[0-9]+(?:\.[0-9]+)*)")
OUTSIDE = re.compile(r"\.\./shared/|design\.md")
# Source files whose header comments still cite the old design note: files being restructured
# now (the store and job queue, process isolation); their citations move to ARCHITECTURE.md with
# that change, and this list shrinks to nothing.
NOT_YET = set()
# The folders held to codegen's dependency direction (ARCHITECTURE.md §1), and the one arrow
# between them beyond codegen's shared files: the emulator reads the register-A wgmma text that
# codegen/nvidia/wgmma_ptx.h writes.
HELD = ("codegen/", "hostgen/", "emulator/")
ALLOWED = {"emulator": {"codegen/nvidia"}}
INCLUDE = re.compile(r'^\s*#\s*include\s*"((?:codegen|hostgen|emulator)/[^"]+)"')


def named_paths(doc):
    """Backquoted words of ARCHITECTURE.md that are paths (a folder/ or a file with an extension),
    with a bare file name resolved against the last folder named before it on the same line."""
    out = []
    for n, line in enumerate(open(doc, encoding="utf-8"), 1):
        if line.startswith("```") or line.startswith("    "):
            continue
        folder = None
        for m in PATH.finditer(line):
            word = m.group(1)
            if "<" in word or "*" in word:  # a pattern such as search/space_<family>.cpp: its folder
                word = word.rsplit("/", 1)[0] + "/"
            if "/" in word:
                folder = word.rsplit("/", 1)[0]
                out.append((n, word))
            elif folder:
                out.append((n, folder + "/" + word))
    return out


def sections(doc):
    return {m.group(1) for m in re.finditer(r"^#+ (§[0-9.]+) ", open(doc, encoding="utf-8").read(), re.M)}


def tracked(source):
    try:
        files = subprocess.run(["git", "-C", source, "ls-files"], capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        files = [os.path.relpath(os.path.join(d, f), source) for d, _, fs in os.walk(source) for f in fs]
    return [f for f in files if not f.startswith(("build/", "tests/docs/architecture_test.py"))]


def codegen_arrows(source, files):
    """Includes that point from codegen's shared files into a subfolder or a back end, or between
    them against ALLOWED."""
    problems = []
    for f in files:
        if not f.startswith(HELD) or not f.endswith((".h", ".cpp")):
            continue
        here = os.path.dirname(f)
        try:
            lines = open(os.path.join(source, f), encoding="utf-8").read().splitlines()
        except (OSError, UnicodeDecodeError):
            continue
        for n, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            there = os.path.dirname(m.group(1))
            if there in ("codegen", here) or there in ALLOWED.get(here, ()):
                continue
            problems.append(f"{f}:{n}: {here}/ includes {m.group(1)}, against codegen's dependency direction")
    return problems


def check(source):
    doc = os.path.join(source, "ARCHITECTURE.md")
    problems = []
    if not os.path.exists(doc):
        return ["ARCHITECTURE.md is missing"]
    for n, p in named_paths(doc):
        if not os.path.exists(os.path.join(source, p.rstrip("/"))):
            problems.append(f"ARCHITECTURE.md:{n}: names {p}, which does not exist")
    have = sections(doc)
    problems += codegen_arrows(source, tracked(source))
    for f in tracked(source):
        if not f.endswith((".h", ".cpp", ".c", ".py", ".sh", ".md", ".txt", ".cmake")):
            continue
        try:
            text = open(os.path.join(source, f), encoding="utf-8").read()
        except (OSError, UnicodeDecodeError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            for m in CITE.finditer(line):
                if m.group(1) not in have:
                    problems.append(f"{f}:{n}: cites ARCHITECTURE.md {m.group(1)}, which it does not have")
            if OUTSIDE.search(line) and f not in NOT_YET:
                problems.append(f"{f}:{n}: points outside the repository: {line.strip()[:100]}")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "src"))
        open(os.path.join(tmp, "src", "a.cpp"), "w").write("// Owns a (ARCHITECTURE.md §1, §2)\n")
        open(os.path.join(tmp, "src", "b.cpp"), "w").write("// see ARCHITECTURE.md §9 and ../shared/design.md\n")
        open(os.path.join(tmp, "ARCHITECTURE.md"), "w").write(
            "# x\n## §1 One\n`src/a.cpp` and `b.cpp`, `src/missing.cpp`, `nowhere/`\n")
        for d, body in (("codegen", '#include "codegen/nvidia/k.h"\n#include "codegen/gpu.h"\n'),
                        ("emulator", '#include "codegen/nvidia/k.h"\n#include "emulator/r.h"\n#include "codegen/amd/m.h"\n'),
                        ("codegen/nvidia", '#include "emulator/r.h"\n#include "codegen/amd/m.h"\n'),
                        ("hostgen", '#include "codegen/kernel_func.h"\n#include "emulator/r.h"\n')):
            os.makedirs(os.path.join(tmp, d), exist_ok=True)
            open(os.path.join(tmp, d, "x.cpp"), "w").write(body)
        problems = check(tmp)
        want = ["names src/missing.cpp", "names nowhere/", "cites ARCHITECTURE.md §9", "points outside",
                "codegen/x.cpp:1: codegen/ includes codegen/nvidia/k.h", "codegen/nvidia/x.cpp:1: codegen/nvidia/ includes emulator/r.h",
                "codegen/nvidia/x.cpp:2: codegen/nvidia/ includes codegen/amd/m.h", "emulator/x.cpp:3: emulator/ includes codegen/amd/m.h",
                "hostgen/x.cpp:2: hostgen/ includes emulator/r.h"]
        for w in want:
            assert any(w in p for p in problems), (w, problems)
        assert not any("src/a.cpp" in p or "src/b.cpp," in p for p in problems if "names" in p), problems
        assert len(problems) == 9, problems  # the emulator's arrow into nvidia/ is allowed
    print("architecture self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    self_test()
    if a.self_test:
        return 0
    problems = check(os.path.abspath(a.source))
    for p in problems:
        print(p, file=sys.stderr)
    print(f"ARCHITECTURE.md: {len(named_paths(os.path.join(a.source, 'ARCHITECTURE.md')))} paths named, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
