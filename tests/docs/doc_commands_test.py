#!/usr/bin/env python3
"""Runs every command block of README.md and docs/*.md, so the documentation cannot drift from the
binaries: each document's ```sh blocks run in order as one shell script each, in one working
folder per document (a reader's checkout: build/, examples/, bench/, scripts/ and python/ are
links), with HOME in a throw-away folder whose ~/.local/bin is on PATH (the README's install step
puts `tessera` there); ```python blocks run with the package of the build tree. Every command must
exit 0.

What is changed before running, and why (TESSERA_DOC_FULL=1 keeps the documented sizes):
- sizes: --m/--n/--k/--seq divided by 16 (at least 4), --heads at most 2, shape dimensions of 64 or
  more divided by 16, integers of 256 or more in Python blocks divided by 16, --trials at most 3,
  --time-budget at most 5 s, trials= at most 3: the suite measures that the commands work, not
  how fast (the benchmarks under bench/ do that);
- a command that measures on a GPU (tune, run or worker with --target sm_*/gfx* and neither
  --estimate, --emulate nor --device emulated) is skipped unless nvidia-smi or rocminfo finds one;
- `http://cache.lan:8787` in Python becomes a loopback port nothing listens on (a cache that is down
  is a miss with a warning, as documented).

A block that cannot run on a test machine (a cache host's /srv, a database host, a farm of GPUs) is
preceded by `<!-- doc-test: skip: REASON -->`, and REASON must name the test file that covers what
the block shows; the file must exist. `--self-test` checks the runner itself (a failing command, a
skip without a covering test and a size rule are caught).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"^<!--\s*doc-test:\s*skip:\s*(.+?)\s*-->\s*$")
GPU_TARGET = re.compile(r"--targets?[ =](sm_|gfx)\w*")


def blocks(path):
    """(line, language, text, skip reason or None) of every fenced block with a language."""
    out, lang, start, body, skip, pending = [], None, 0, [], None, None
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line.rstrip("\n"))
            if lang is None and m:
                lang, start, body, skip, pending = m.group(1), n, [], pending, None
                continue
            if lang is not None and line.rstrip("\n") == "```":
                if lang in ("sh", "bash", "python"):
                    out.append((start, lang, "".join(body), skip))
                lang = None
                continue
            if lang is not None:
                body.append(line)
            else:
                s = SKIP.match(line.strip())
                pending = s.group(1) if s else (pending if not line.strip() else None)
    return out


def commands(text):
    """Shell commands of a block: continuation lines joined, a heredoc kept with its command."""
    out, cur, heredoc = [], "", None
    for line in text.splitlines():
        if heredoc is not None:
            cur += "\n" + line
            if line.strip() == heredoc:
                out.append(cur)
                cur, heredoc = "", None
            continue
        stripped = line.strip()
        if not cur and (not stripped or stripped.startswith("#")):
            continue
        cur = cur + "\n" + line if cur else line
        if line.rstrip().endswith("\\"):
            continue
        h = re.search(r"<<-?'?(\w+)'?", line)
        if h:
            heredoc = h.group(1)
            continue
        out.append(cur)
        cur = ""
    if cur:
        out.append(cur)
    return out


def shrink_shell(cmd):
    def div(v, d=16, least=4):
        return str(max(least, int(v) // d))
    code, sep, comment = cmd.partition(" #") if "<<" not in cmd else (cmd, "", "")
    code = re.sub(r"(--(?:m|n|k|seq)[ =])(\d+)", lambda m: m.group(1) + div(m.group(2)), code)
    code = re.sub(r"(--heads[ =])(\d+)", lambda m: m.group(1) + str(min(2, int(m.group(2)))), code)
    code = re.sub(r"(--heads-kv[ =])(\d+)", lambda m: m.group(1) + str(min(2, int(m.group(2)))), code)
    code = re.sub(r"(--trials[ =])(\d+)", lambda m: m.group(1) + str(min(3, int(m.group(2)))), code)
    code = re.sub(r"(--tune[ =])(\d+)", lambda m: m.group(1) + str(min(2, int(m.group(2)))), code)
    code = re.sub(r"(--time-budget[ =])(\d+)", lambda m: m.group(1) + str(min(5, int(m.group(2)))), code)

    def shape(m):
        return m.group(1) + "x".join(div(d) if int(d) >= 64 else d for d in m.group(2).split("x"))
    code = re.sub(r"(--shape[ =](?:\w+=)?)(\d+(?:x\d+)*)", shape, code)
    code = re.sub(r"(--gemm[ =])(\d+(?:x\d+)*)", shape, code)  # examples/bundle/demo.c's flags

    def attention(m):
        b, h, q, d = m.group(2).split("x")
        return m.group(1) + "x".join([b, str(min(2, int(h))), div(q), d])
    code = re.sub(r"(--attention[ =])(\d+x\d+x\d+x\d+)", attention, code)
    # Heredoc lines are kernel-list lines: the same flags, the same rules.
    return code + (sep + comment if sep else "")


def shrink_python(text):
    text = re.sub(r"\b(\d{3,})\b", lambda m: str(max(4, int(m.group(1)) // 16)) if int(m.group(1)) >= 256 else m.group(1),
                  text)
    text = re.sub(r"trials=(\d+)", lambda m: "trials=" + str(min(3, int(m.group(1)))), text)
    return text


def needs_gpu(cmd):
    words = cmd.split()
    verb = next((w for w in words if w in ("tune", "run", "worker")), None)
    if verb is None or not GPU_TARGET.search(cmd):
        return False
    return not re.search(r"--estimate|--emulate|--device[ =]emulated", cmd)


def have_gpu():
    for probe in (["nvidia-smi", "-L"], ["rocminfo"]):
        if shutil.which(probe[0]):
            try:
                if subprocess.run(probe, capture_output=True, timeout=30).returncode == 0:
                    return True
            except (OSError, subprocess.TimeoutExpired):
                pass
    return False


SYSTEM = re.compile(r"^\s*(sudo|apt-get|apt|dpkg|systemctl|kubectl)\b")


def script_for(cmds, full, gpu, log):
    lines = ["set -u -o pipefail"]
    for i, cmd in enumerate(cmds):
        if SYSTEM.match(cmd):
            # Never run on a test machine: a block that changes the system is marked skipped.
            lines.append(f"echo 'doc-test: command {i + 1} changes the system ({cmd.split()[0]}): mark its block "
                         "<!-- doc-test: skip: ... -->' >&2; exit 1")
            break
        if needs_gpu(cmd) and not gpu:
            log.append("  skipped (no GPU here): " + cmd.splitlines()[0][:110])
            continue
        run = cmd if full else shrink_shell(cmd)
        label = run.splitlines()[0][:140].replace("'", "'\\''")
        lines.append(f"echo '+ {label}' >&2")
        lines.append(run)
        lines.append(f"rc=$?; if [ $rc -ne 0 ]; then echo 'doc-test: command {i + 1} exited '$rc': {label}' >&2; "
                     "exit 1; fi")
    return "\n".join(lines) + "\n"


def run_doc(doc, source, build, work, env, full, gpu, log):
    """Runs one document's blocks; returns the failures (strings)."""
    failures = []
    os.makedirs(work, exist_ok=True)
    for name, target in (("build", build), ("examples", "examples"), ("bench", "bench"), ("scripts", "scripts"),
                         ("python", "python")):
        link = os.path.join(work, name)
        if not os.path.lexists(link):
            os.symlink(target if os.path.isabs(target) else os.path.join(source, target), link)
    rel = os.path.relpath(doc, source)
    for line, lang, text, skip in blocks(doc):
        where = f"{rel}:{line}"
        if skip:
            covered = [w for w in re.findall(r"[\w./-]+\.(?:cpp|py|sh)", skip) if os.path.exists(os.path.join(source, w))]
            if not covered:
                failures.append(f"{where}: skipped without naming an existing test that covers it ({skip})")
            else:
                log.append(f"{where}: skipped: {skip}")
            continue
        log.append(f"{where}: {lang}")
        if lang == "python":
            code = text.replace("http://cache.lan:8787", "http://127.0.0.1:9")
            code = code if full else shrink_python(code)
            proc = subprocess.run([env.get("TESSERA_DOC_PYTHON", sys.executable), "-W", "default", "-c", code],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=1800)
        else:
            script = script_for(commands(text), full, gpu, log)
            proc = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            failures.append(f"{where}: {lang} block failed (exit {proc.returncode})\n" + proc.stderr[-3000:] +
                            proc.stdout[-1500:])
    return failures


def run_all(source, build, docs, full):
    tmp = tempfile.mkdtemp(prefix="tessera-doc-test-")
    try:
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_") or k == "TESSERA_DOC_PYTHON"}
        env.update(HOME=home, PATH=os.path.join(home, ".local", "bin") + os.pathsep + os.environ.get("PATH", ""),
                   PYTHONPATH=os.path.join(build, "python"))
        gpu = have_gpu()
        failures, log = [], []
        for doc in docs:
            name = os.path.splitext(os.path.basename(doc))[0]
            failures += run_doc(doc, source, build, os.path.join(tmp, name), env, full, gpu, log)
        return failures, log
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def self_test():
    """The runner catches what it must: a failing command, a skip without a covering test."""
    tmp = tempfile.mkdtemp(prefix="tessera-doc-selftest-")
    try:
        os.makedirs(os.path.join(tmp, "tests"))
        open(os.path.join(tmp, "tests", "covering_test.py"), "w").close()
        bad = os.path.join(tmp, "BAD.md")
        with open(bad, "w") as f:
            f.write("```sh\ntrue\nfalse   # fails\n```\n\n<!-- doc-test: skip: nothing covers it -->\n```sh\ntrue\n```\n"
                    "\n```sh\nsudo apt-get install nothing-at-all\n```\n")
        good = os.path.join(tmp, "GOOD.md")
        with open(good, "w") as f:
            f.write("```sh\nX=1\n[ \"$X\" = 1 ]\ncat > f.txt <<'EOF'\na # b\nEOF\ngrep -q 'a # b' f.txt\n```\n\n"
                    "<!-- doc-test: skip: tests/covering_test.py -->\n```sh\nfalse\n```\n")
        failures, _ = run_all(tmp, tmp, [bad], False)
        assert len(failures) == 3, failures
        assert "BAD.md:1" in failures[0] and "exited 1" in failures[0], failures[0]
        assert "without naming an existing test" in failures[1], failures[1]
        assert "changes the system (sudo)" in failures[2], failures[2]
        failures, _ = run_all(tmp, tmp, [good], False)
        assert not failures, failures
        assert shrink_shell("$T run gemm --m 1024 --n 1000 --k 8 --trials 200 --shape 4096x4096 --shape s=4096") == \
            "$T run gemm --m 64 --n 62 --k 4 --trials 3 --shape 256x256 --shape s=256"
        assert shrink_shell("./demo --gemm 1024x1000x8 --attention 1x8x2048x64") == "./demo --gemm 64x62x8 --attention 1x2x128x64"
        assert needs_gpu("$T tune gemm --m 8 --target sm_90 --trials 1")
        assert not needs_gpu("$T tune gemm --m 8 --target sm_90 --estimate")
        assert not needs_gpu("$T compile gemm --m 8 --target gfx942 --emit hsaco")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("doc-test self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    self_test()
    if a.self_test:
        return 0
    docs = [os.path.join(a.source, "README.md")] + sorted(
        os.path.join(a.source, "docs", f) for f in os.listdir(os.path.join(a.source, "docs")) if f.endswith(".md"))
    failures, log = run_all(os.path.abspath(a.source), os.path.abspath(a.build), docs,
                            os.environ.get("TESSERA_DOC_FULL") == "1")
    print("\n".join(log))
    for f in failures:
        print("FAILED " + f, file=sys.stderr)
    print(f"{len(docs)} documents, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
