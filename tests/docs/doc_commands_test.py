#!/usr/bin/env python3
"""Runs every command block of README.md and docs/*.md, so the documentation cannot drift from the
binaries: each document's ```sh blocks run in order as one shell script each, in one working
folder per document (a reader's checkout: build/, examples/, bench/, scripts/ and python/ are
links), with HOME in a throw-away folder whose ~/.local/bin is on PATH (the README's install step
puts `tessera` there); ```python blocks run with the package of the build tree. Every command must
exit 0.

What is changed before running, and why (TESSERA_DOC_FULL=1 keeps the documented sizes):
- sizes, by a divisor d chosen per block (16, 8, 4, 2, else 1: the written size): --m/--n/--k/--seq
  divided by d (at least 4), --heads at most max(2, heads/d), shape dimensions of 64 or more divided
  by d, integers of 256 or more in Python blocks divided by d. A shrink must not change what a
  command means: d is the largest one at which every kernel of the block, shrunk, still resolves to
  the config it resolves to as written in its thread count (THREADS) and its code path (every
  categorical knob: GEMM's schedule, a GPU strategy, MATH, ...), asked of the binary itself
  (`tessera compile ... --emit config`, `Kernel.default_config()` in Python) on this host. So the
  test shrinks less on a machine of more cores, and a written command whose config does not
  resolve (an illegal --config) fails here as it would for a reader. One d per block keeps the
  shapes a block repeats (a tuned kernel, its kernel-list line, the demo's flags) equal;
- --trials at most 8 (two of the search's batches: the first and one the cost model chose, so the
  model-guided path runs), --time-budget at most 10 s, trials= at most 8, compare --tune at most 2:
  the suite measures that the commands work, not how fast (the benchmarks under bench/ do that);
  the strategy (--strategy) is never changed;
- every command has a time budget (BUDGET_S; a block's comment `<!-- doc-test: budget: N -->`
  says otherwise) and the log prints each block's divisor and time;
- a command that measures on a GPU (tune, run or worker with --target sm_*/gfx* and neither
  --estimate, --emulate nor --device emulated) is skipped unless nvidia-smi or rocminfo finds one;
- `http://cache.lan:8787` in Python becomes a loopback port nothing listens on (a cache that is down
  is a miss with a warning, as documented).

A block preceded by `<!-- doc-test: torch -->` runs as a reader with torch would run it: with the
interpreter of the torch venv tests/torch/torch_venv.sh makes or reuses (the one the torch tests
use) and the CUDA toolkit's libraries on LD_LIBRARY_PATH; where no such venv can be had (no
network for PyPI) it is skipped and the log says why.

A block that cannot run on a test machine (a cache host's /srv, a database host, a farm of GPUs) is
preceded by `<!-- doc-test: skip: REASON -->`, and REASON must name the test file that covers what
the block shows; the file must exist. `--self-test` checks the runner itself (a failing command, a
skip without a covering test, a size rule, a shrink that changes a command's meaning and a command
over its budget are caught).
"""
import argparse
import ast
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^```(\w*)\s*$")
SKIP = re.compile(r"^<!--\s*doc-test:\s*skip:\s*(.+?)\s*-->\s*$")
TORCH = re.compile(r"^<!--\s*doc-test:\s*torch\s*-->\s*$")
BUDGET = re.compile(r"^<!--\s*doc-test:\s*budget:\s*(\d+)\s*-->\s*$")
BUDGET_S = 240  # seconds a command may take at its chosen size (a 2-core CI machine)
# A tune's trials are capped just past the search's first batch (4 candidates, SearchSettings::
# batchSize: uniform draws or the prior's top), so that one trial is the XGBoost model's pick,
# trained on the first batch. Three trials (the cap before) never reached the model: a shrink that
# skipped the code path the command is about; eight (two whole batches) doubled the test's time
# (241 -> 362 s on a 2-core CI machine) for no further code path.
TRIALS_CAP = 5
BUDGET_CAP_S = 10
DIVISORS = (16, 8, 4, 2, 1)
GPU_TARGET = re.compile(r"--targets?[ =](sm_|gfx)\w*")


def blocks(path):
    """(line, language, text, skip reason or None, budget in s, needs torch) of every fenced block
    with a language. The comments before a block (skip, budget, torch) may come in any order."""
    out, lang, start, body, skip, budget, torch = [], None, 0, [], None, BUDGET_S, False
    pending = {}
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = FENCE.match(line.rstrip("\n"))
            if lang is None and m:
                lang, start, body = m.group(1), n, []
                skip, budget, torch = pending.get("skip"), pending.get("budget", BUDGET_S), pending.get("torch", False)
                pending = {}
                continue
            if lang is not None and line.rstrip("\n") == "```":
                if lang in ("sh", "bash", "python"):
                    out.append((start, lang, "".join(body), skip, budget, torch))
                lang = None
                continue
            if lang is not None:
                body.append(line)
                continue
            s, b, t = SKIP.match(line.strip()), BUDGET.match(line.strip()), TORCH.match(line.strip())
            if s:
                pending["skip"] = s.group(1)
            elif b:
                pending["budget"] = int(b.group(1))
            elif t:
                pending["torch"] = True
            elif line.strip():
                pending = {}  # prose between a comment and a block: the comment is not the block's
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


# A size flag given a range (`--m 1..4096`) or a list (`--seq 128,512`): a tune over its points.
RANGE = re.compile(r"--(?:m|n|k|seq|rows|batch)[ =]\d+(?:\.\.|,)\d")


def shrink_shell(cmd, d=16):
    """The command at sizes divided by d (d = 1: the written sizes), trials and budgets capped."""
    def div(v, least=4):
        return v if d == 1 else str(max(least, int(v) // d))

    def heads(v):
        return v if d == 1 else str(max(min(2, int(v)), int(v) // d))
    code, sep, comment = cmd.partition(" #") if "<<" not in cmd else (cmd, "", "")
    if RANGE.search(code):
        d = 1  # a range or list of sizes: its training points are what it means, so none is shrunk
    code = re.sub(r"(--(?:m|n|k|seq)[ =])(\d+)", lambda m: m.group(1) + div(m.group(2)), code)
    code = re.sub(r"(--heads(?:-kv)?[ =])(\d+)", lambda m: m.group(1) + heads(m.group(2)), code)
    code = re.sub(r"(--trials[ =])(\d+)", lambda m: m.group(1) + str(min(TRIALS_CAP, int(m.group(2)))), code)
    code = re.sub(r"(--tune[ =])(\d+)", lambda m: m.group(1) + str(min(2, int(m.group(2)))), code)
    code = re.sub(r"(--time-budget[ =])(\d+)", lambda m: m.group(1) + str(min(BUDGET_CAP_S, int(m.group(2)))), code)

    def shape(m):
        return m.group(1) + "x".join(div(x) if int(x) >= 64 else x for x in m.group(2).split("x"))
    code = re.sub(r"(--shape[ =](?:\w+=)?)(\d+(?:x\d+)*)", shape, code)
    code = re.sub(r"(--gemm[ =])(\d+(?:x\d+)*)", shape, code)  # examples/bundle/demo.c's flags

    def attention(m):
        b, h, q, hd = m.group(2).split("x")
        return m.group(1) + "x".join([b, heads(h), div(q), hd])
    code = re.sub(r"(--attention[ =])(\d+x\d+x\d+x\d+)", attention, code)
    # Heredoc lines are kernel-list lines: the same flags, the same rules.
    return code + (sep + comment if sep else "")


def shrink_python(text, d=16):
    if d > 1:
        text = re.sub(r"\b(\d{3,})\b", lambda m: str(max(4, int(m.group(1)) // d)) if int(m.group(1)) >= 256 else m.group(1),
                      text)
    text = re.sub(r"trials=(\d+)", lambda m: "trials=" + str(min(TRIALS_CAP, int(m.group(1)))), text)
    return text


# What a command means, asked of the binary: the config its kernel resolves to on this host
# (`compile ... --emit config`), reduced to the thread count and the code path.
VERBS = ("run", "tune", "compile", "best", "space", "compare", "worker")
FAMILIES = ("gemm", "elementwise", "attention")
KERNEL_FLAGS = ("--causal", "--trans-a", "--trans-b")  # the kernels' flags without a value
NO_VALUE = {"--json", "--estimate", "--resume", "--force", "--verify-time", "--no-warm-start", "--no-transfer",
            "--workers", "--flush-cache", "--no-verify", "--all-winners"} | set(KERNEL_FLAGS)
KEEP = ("--target", "--gpu", "--gpu-facts", "--threads", "--host-preset", "--config")  # compile takes them
PARENT_VALUE = {"--trials", "--db", "--strategy", "--time-budget", "--seed", "--top-k", "--timeout", "--min-time",
                "--min-runs", "--device", "--worker-wait", "--cache", "--token", "--dispatch-out", "--max-kernels", "--fixed-up-to",
                "--points", "--emit", "-o", "--output", "--tune", "--max-elements", "--space", "--targets"}


def meaning_of(config_json):
    """The thread count and the code path of a resolved config: THREADS and every categorical knob."""
    cfg = config_json.get("config", config_json)
    kept = {k: v for k, v in cfg.items() if k == "THREADS" or isinstance(v, str)}
    return json.dumps({"target": config_json.get("target", "host"), "knobs": kept}, sort_keys=True)


def probes(cmd, binary):
    """The `compile ... --emit config` command lines that say what `cmd` means (one per target it
    names, one per kernel line of a heredoc kernel list); [] for a command without a kernel."""
    if "<<" in cmd:
        lines = cmd.split("\n")[1:-1]
        out = []
        for line in lines:
            words = line.split("#")[0].split()
            if words and words[0] in FAMILIES:
                out += probes("tessera compile " + " ".join(words), binary)
        return out
    code = re.split(r"\s(?:\||>|2>|&&|;)\s", " " + cmd.partition(" #")[0] + " ")[0]
    try:
        words = shlex.split(code)
    except ValueError:
        return []
    if not words or not (words[0] in ("$T", "tessera") or words[0].endswith("/tessera")):
        return []
    verb = next((i for i, w in enumerate(words) if w in VERBS), None)
    if verb is None:
        return []
    parent, kernel, family, targets, gpus = [], [], None, [], []
    i = verb + 1
    while i < len(words):
        w = words[i]
        name, eq, val = w.partition("=") if w.startswith("--") else (w, "", "")
        if family is None and w in FAMILIES:
            family = w
        elif w in ("file", "key"):
            return []  # a kernel from a file or the store: its size is not on the line
        elif name in NO_VALUE:
            if name in KERNEL_FLAGS:
                kernel.append(name)
        elif name == "--emulate":
            if not eq and i + 1 < len(words) and words[i + 1] in ("mapped", "pre"):
                i += 1
        elif name.startswith("-"):
            if not eq:
                i += 1
                val = words[i] if i < len(words) else ""
            if name == "--targets":
                targets += [t for t in val.split(",") if t]
            elif name == "--gpu" and words[verb] == "compare":
                gpus.append(val)
            elif name in KEEP:
                parent += [name, val]
            elif name in PARENT_VALUE:
                pass
            elif family is not None:
                # A range or list of sizes means its points' kernels: probed at its largest point
                # (compile takes one size; the block is never shrunk, see RANGE).
                if re.fullmatch(r"\d+(?:(?:\.\.|,)\d+)+", val):
                    val = str(max(int(x) for x in re.split(r"\.\.|,", val)))
                kernel += [name, val]
        i += 1
    if family is None:
        return []
    ways = [["--target", t] if re.fullmatch(r"host|sm_\w+|gfx\w+", t) else ["--gpu", t] for t in targets]
    ways += [["--gpu", g] for g in gpus]
    return [[binary, "compile"] + parent + way + [family] + kernel + ["--emit", "config"] for way in (ways or [[]])]


def ask(argv, cwd, env):
    """The meaning one probe reports, or an error line."""
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
    return [meaning_of(json.loads(line)) for line in proc.stdout.splitlines() if line.strip()], None


PY_PROBE = r"""
import ast, json, sys, tessera
tree = ast.parse(sys.stdin.read())
out = []
for node in ast.walk(tree):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            isinstance(node.func.value, ast.Name) and node.func.value.id == "tessera" and \
            node.func.attr in ("gemm", "elementwise", "attention"):
        k = eval(compile(ast.Expression(node), "<doc>", "eval"), {"tessera": tessera})
        out.append({"target": "host", "config": k.default_config()})
print(json.dumps(out))
"""


def ask_python(code, cwd, env):
    """The meanings of the kernels a Python block builds (tessera.gemm/elementwise/attention calls)."""
    proc = subprocess.run([env.get("TESSERA_DOC_PYTHON", sys.executable), "-c", PY_PROBE], input=code, cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
    return [meaning_of(c) for c in json.loads(proc.stdout)], None


def choose_divisor(items, shrink, meaning):
    """The largest divisor at which every item keeps its meaning, and why the larger ones failed.

    items: the block's commands (or its one Python text); shrink(item, d) -> the item at d;
    meaning(item) -> (list of meanings, None) or (None, error line). A written item whose meaning
    cannot be resolved is an error of the document (returned as the third value)."""
    written, notes = {}, []
    for it in items:
        m, err = meaning(it)
        if err is not None:
            return 1, notes, "as written, %s: %s" % (it.splitlines()[0][:100], err)
        written[it] = m
    for d in DIVISORS:
        changed = None
        for it in items:
            small = shrink(it, d)
            if small == shrink(it, 1) or not written[it]:
                continue
            m, err = meaning(small)
            if err is not None or m != written[it]:
                changed = "%s: %s" % (small.splitlines()[0][:100], err or "%s -> %s" % (written[it], m))
                break
        if changed is None:
            return d, notes, None
        notes.append("/%d would change %s" % (d, changed))
    return 1, notes, None


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


def script_for(cmds, d, gpu, log, full=False):
    """The block as one bash script at divisor d; every command between two time marks on stderr."""
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
        run = cmd if full else shrink_shell(cmd, d)
        label = run.splitlines()[0][:140].replace("'", "'\\''")
        lines.append(f"echo '+ {label}' >&2; echo \"doc-test-time {i + 1} start $EPOCHREALTIME\" >&2")
        lines.append(run)
        lines.append(f"rc=$?; echo \"doc-test-time {i + 1} end $EPOCHREALTIME\" >&2; if [ $rc -ne 0 ]; then "
                     f"echo 'doc-test: command {i + 1} exited '$rc': {label}' >&2; exit 1; fi")
    return "\n".join(lines) + "\n"


def command_times(stderr):
    """{command number: seconds} from the script's time marks."""
    start, out = {}, {}
    for m in re.finditer(r"^doc-test-time (\d+) (start|end) ([\d.]+)$", stderr, re.M):
        n, what, t = int(m.group(1)), m.group(2), float(m.group(3))
        if what == "start":
            start[n] = t
        elif n in start:
            out[n] = t - start[n]
    return out


def run_doc(doc, source, build, work, doc_env, full, gpu, log):
    """Runs one document's blocks; returns the failures (strings)."""
    failures = []
    os.makedirs(work, exist_ok=True)
    for name, target in (("build", build), ("examples", "examples"), ("bench", "bench"), ("scripts", "scripts"),
                         ("python", "python")):
        link = os.path.join(work, name)
        if not os.path.lexists(link):
            os.symlink(target if os.path.isabs(target) else os.path.join(source, target), link)
    rel = os.path.relpath(doc, source)
    binary = os.path.join(build, "cli", "tessera")
    for line, lang, text, skip, budget, torch in blocks(doc):
        where = f"{rel}:{line}"
        env = doc_env  # a torch block's changes stay its own
        if skip:
            covered = [w for w in re.findall(r"[\w./-]+\.(?:cpp|py|sh)", skip) if os.path.exists(os.path.join(source, w))]
            if not covered:
                failures.append(f"{where}: skipped without naming an existing test that covers it ({skip})")
            else:
                log.append(f"{where}: skipped: {skip}")
            continue
        if torch:
            tpy, why = torch_python(source, env)
            if tpy is None:
                log.append(f"{where}: skipped: no torch here ({why})")
                continue
            # What a reader with torch installed has: torch's interpreter, the CUDA toolkit's
            # libraries the slim torch wheel imports (tests/torch/torch_venv.sh).
            env = dict(env, TESSERA_DOC_PYTHON=tpy, LD_LIBRARY_PATH=os.pathsep.join(
                p for p in ("/usr/local/cuda/lib64", env.get("LD_LIBRARY_PATH", "")) if p))
        began = time.monotonic()
        if lang == "python":
            code = text.replace("http://cache.lan:8787", "http://127.0.0.1:9")
            memo = {}

            def meaning(c):
                if c not in memo:
                    memo[c] = ask_python(c, work, env)
                return memo[c]
            d, notes, wrong = (1, [], None) if full else choose_divisor([code], shrink_python, meaning)
        else:
            cmds = commands(text)
            memo = {}

            def meaning(c):
                if c not in memo:
                    got, err = [], None
                    for argv in probes(c, binary):
                        m, err = ask(argv, work, env)
                        if err is not None:
                            break
                        got += m
                    memo[c] = (None, err) if err is not None else (got, None)
                return memo[c]
            d, notes, wrong = (1, [], None) if full else choose_divisor(
                [c for c in cmds if not SYSTEM.match(c) and (gpu or not needs_gpu(c))], shrink_shell, meaning)
        if wrong is not None:
            failures.append(f"{where}: {wrong}")
            continue
        chosen = time.monotonic() - began
        if lang == "python":
            proc = subprocess.run([env.get("TESSERA_DOC_PYTHON", sys.executable), "-W", "default", "-c",
                                   code if full else shrink_python(code, d)],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=1800)
            times = {1: time.monotonic() - began - chosen}
        else:
            script = script_for(cmds, d, gpu, log, full)
            proc = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True, timeout=1800)
            times = command_times(proc.stderr)
        took = time.monotonic() - began
        slowest = max(times.items(), key=lambda kv: kv[1], default=(0, 0.0))
        log.append(f"{where}: {lang}, sizes /{d}, {took:.0f} s (sizes chosen in {chosen:.0f} s; slowest command "
                   f"{slowest[0]}: {slowest[1]:.0f} s of its {budget} s budget)")
        log.extend("  " + n for n in notes)
        if proc.returncode != 0:
            err = re.sub(r"^doc-test-time .*\n", "", proc.stderr, flags=re.M)
            failures.append(f"{where}: {lang} block failed (exit {proc.returncode})\n" + err[-3000:] + proc.stdout[-1500:])
        for n, sec in sorted(times.items()):
            if sec > budget:
                failures.append(f"{where}: command {n} took {sec:.0f} s, over its budget of {budget} s")
    return failures


_TORCH = {}


def torch_python(source, env):
    """(the python of the torch venv tests/torch/torch_venv.sh makes or reuses, None) or (None, why)."""
    if "py" not in _TORCH:
        base = env.get("TESSERA_DOC_PYTHON", sys.executable)
        try:
            proc = subprocess.run(["bash", os.path.join(source, "tests", "torch", "torch_venv.sh"), base],
                                  env=env, capture_output=True, text=True, timeout=3600)
            ok = proc.returncode == 0 and proc.stdout.strip()
            _TORCH["py"] = (proc.stdout.strip().splitlines()[-1], None) if ok else \
                (None, (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1])
        except (OSError, subprocess.TimeoutExpired) as e:
            _TORCH["py"] = (None, str(e))
    return _TORCH["py"]


def run_all(source, build, docs, full):
    tmp = tempfile.mkdtemp(prefix="tessera-doc-test-")
    try:
        home = os.path.join(tmp, "home")
        os.makedirs(home)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("TESSERA_") or k in ("TESSERA_DOC_PYTHON", "TESSERA_CORES")}  # the machine's, kept
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
        with open(bad, "a") as f:
            f.write("\n<!-- doc-test: budget: 1 -->\n```sh\nsleep 2\n```\n")
        failures, _ = run_all(tmp, tmp, [bad], False)
        assert len(failures) == 4, failures
        assert "BAD.md:1" in failures[0] and "exited 1" in failures[0], failures[0]
        assert "without naming an existing test" in failures[1], failures[1]
        assert "changes the system (sudo)" in failures[2], failures[2]
        assert "took 2 s, over its budget of 1 s" in failures[3], failures[3]
        failures, _ = run_all(tmp, tmp, [good], False)
        assert not failures, failures
        assert shrink_shell("$T run gemm --m 1024 --n 1000 --k 8 --trials 200 --shape 4096x4096 --shape s=4096") == \
            "$T run gemm --m 64 --n 62 --k 4 --trials 5 --shape 256x256 --shape s=256"
        assert shrink_shell("./demo --gemm 1024x1000x8 --attention 1x8x2048x64") == "./demo --gemm 64x62x8 --attention 1x2x128x64"
        assert shrink_shell("$T run gemm --m 1024 --n 1000 --k 8 --trials 200 --heads 8", 2) == \
            "$T run gemm --m 512 --n 500 --k 4 --trials 5 --heads 4"
        assert shrink_shell("$T run gemm --m 1024 --k 8 --trials 200", 1) == "$T run gemm --m 1024 --k 8 --trials 5"
        # The comments before a block, in any order; prose between one and the block drops it.
        with open(os.path.join(tmp, "marks.md"), "w") as f:
            f.write("<!-- doc-test: torch -->\n<!-- doc-test: budget: 9 -->\n\n```python\nx = 1\n```\n"
                    "<!-- doc-test: torch -->\nprose\n```python\ny = 2\n```\n")
        assert [b[3:] for b in blocks(os.path.join(tmp, "marks.md"))] == [(None, 9, True), (None, BUDGET_S, False)]
        # A range or list is a tune over its points: never shrunk (the rest of the line neither),
        # probed at its largest point; 1 would have become 4 (div's least) before.
        assert shrink_shell("$T tune gemm --m 1..4096 --n 1024 --k 1024 --estimate") == \
            "$T tune gemm --m 1..4096 --n 1024 --k 1024 --estimate"
        assert shrink_shell("$T tune attention --seq 128,512 --heads 8 --trials 9", 4) == \
            "$T tune attention --seq 128,512 --heads 8 --trials 5"
        assert shrink_shell("$T tune attention --seq 128,512 --heads 8 --trials 4", 4) == \
            "$T tune attention --seq 128,512 --heads 8 --trials 4"
        assert probes("$T tune gemm --m 1..4096 --n 1024 --k 1024 --target sm_80 --estimate", "B") == \
            [["B", "compile", "--target", "sm_80", "gemm", "--m", "4096", "--n", "1024", "--k", "1024", "--emit", "config"]]
        assert shrink_python("tessera.gemm(1024, 100, 4096); tune(k, trials=100)", 2) == \
            "tessera.gemm(512, 100, 2048); tune(k, trials=5)"
        # What a command means is asked of the binary with the command's own kernel and target flags.
        assert probes("$T run gemm --m 512 --n 512 --k 512 --config 'schedule=plain,MR=4,NR=16'   # NR: x", "B") == \
            [["B", "compile", "--config", "schedule=plain,MR=4,NR=16", "gemm", "--m", "512", "--n", "512", "--k", "512",
              "--emit", "config"]]
        assert probes("$T tune --gpu L4 --estimate attention --heads 8 --seq 64 --head-dim 64 --causal --trials 9 --db x.db",
                      "B") == [["B", "compile", "--gpu", "L4", "attention", "--heads", "8", "--seq", "64", "--head-dim",
                                "64", "--causal", "--emit", "config"]]
        assert [p[2:4] for p in probes("$T compare gemm --m 8 --n 8 --k 8 --targets sm_90,gfx942,host --tune 32", "B")] == \
            [["--target", "sm_90"], ["--target", "gfx942"], ["--target", "host"]]
        assert probes("$T compile gemm --m 64 --n 64 --k 64 --emit ir > k.tsr", "B")[0][-4:] == ["--k", "64", "--emit", "config"]
        assert probes("$T run file k.tsr", "B") == [] and probes("make -C bundle", "B") == []
        assert [p[2:] for p in probes("cat > k.txt <<'EOF'\ngemm --m 8 --n 8 --k 8   # x\nEOF", "B")] == \
            [["gemm", "--m", "8", "--n", "8", "--k", "8", "--emit", "config"]]
        # The divisor: the largest that keeps every command's meaning (a GEMM's threads are 2 from
        # M = 320 up in this stand-in), and a written command that does not resolve is the
        # document's error. A shrink that changed a meaning is never chosen.
        fake = lambda c: ([str(int(re.search(r"--m (\d+)", c).group(1)) >= 320)], None) if "--m" in c else ([], None)
        assert choose_divisor(["$T run gemm --m 1024", "$T run gemm --m 8", "ls"], shrink_shell, fake)[0] == 2
        assert choose_divisor(["$T run gemm --m 300"], shrink_shell, fake)[0] == 16
        broken = lambda c: (None, "invalid config") if "plain" in c else fake(c)
        assert "invalid config" in choose_divisor(["$T run gemm --m 512 --config schedule=plain"], shrink_shell, broken)[2]
        assert needs_gpu("$T tune gemm --m 8 --target sm_90 --trials 1")
        assert not needs_gpu("$T tune gemm --m 8 --target sm_90 --estimate")
        assert not needs_gpu("$T compile gemm --m 8 --target gfx942 --emit hsaco")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("doc-test self-test: ok")


def binary_self_test(build):
    """Against the built binary: a written command's meaning resolves, and the old fixed shrink (/16)
    of the README's first command changes it where the written size runs on several threads (the
    negative control: 1024^3 runs blis on all cores; 64^3 one thread of plain)."""
    binary = os.path.join(build, "cli", "tessera")
    cmd = "$T run gemm --m 1024 --n 1024 --k 1024 --dtype f32"
    [written], err = ask(probes(cmd, binary)[0], build, os.environ)
    assert err is None, err
    assert json.loads(written)["knobs"].get("schedule"), written
    if json.loads(written)["knobs"].get("THREADS", 1) > 1:
        [small], err = ask(probes(shrink_shell(cmd, 16), binary)[0], build, os.environ)
        assert small != written, (small, written)
    print("doc-test binary self-test: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--self-test", action="store_true")
    ap.add_argument("--docs", nargs="+", metavar="NAME",
                    help="only these documents (README.md, docs/NAME.md by file name); default: all")
    a = ap.parse_args()
    self_test()
    binary_self_test(os.path.abspath(a.build))
    if a.self_test:
        return 0
    docs = [os.path.join(a.source, "README.md")] + sorted(
        os.path.join(a.source, "docs", f) for f in os.listdir(os.path.join(a.source, "docs")) if f.endswith(".md"))
    if a.docs:
        unknown = set(a.docs) - {os.path.basename(d) for d in docs}
        if unknown:
            print("error: no such document: " + ", ".join(sorted(unknown)), file=sys.stderr)
            return 2
        docs = [d for d in docs if os.path.basename(d) in a.docs]
    failures, log = run_all(os.path.abspath(a.source), os.path.abspath(a.build), docs,
                            os.environ.get("TESSERA_DOC_FULL") == "1")
    print("\n".join(log))
    for f in failures:
        print("FAILED " + f, file=sys.stderr)
    print(f"{len(docs)} documents, {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
