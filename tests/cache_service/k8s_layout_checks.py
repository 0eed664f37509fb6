#!/usr/bin/env python3
"""Owns the checks of the Kubernetes layout (deploy/kubernetes/) that need no process of its own:
the YAML documents against the Kubernetes API schemas (kubernetes-validate, strict), every name a
manifest refers to against what the layout defines, the pods' security settings and probes, and
every `tessera` command line against the real binary's --help. k8s_layout_test.py runs them, then
what can run here."""
import glob
import os
import re
import shlex
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
LAYOUT = os.path.join(ROOT, "deploy", "kubernetes")
SCHEMA_VERSIONS = ["1.29.0", "1.37.0"]     # the oldest the README supports (backoffLimitPerIndex), the newest
SERVE_HOST = "tessera-serve.tessera.svc.cluster.local:8787"

def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        check.failed = True
    return cond


check.failed = False


# ---- the layout as data -------------------------------------------------------------------------

def load_layout():
    import yaml
    docs = []
    for path in sorted(glob.glob(os.path.join(LAYOUT, "**", "*.yaml"), recursive=True)):
        for doc in yaml.safe_load_all(open(path)):
            if doc is not None and doc.get("kind") != "Kustomization":
                docs.append((os.path.relpath(path, LAYOUT), doc))
    return docs


def pod_templates(docs):
    """(file, workload, pod template) of every workload."""
    out = []
    for f, d in docs:
        k, spec = d.get("kind"), d.get("spec", {})
        if k in ("Deployment", "StatefulSet", "DaemonSet", "Job"):
            out.append((f, d, spec["template"]))
        elif k == "CronJob":
            out.append((f, d, spec["jobTemplate"]["spec"]["template"]))
    return out


def labels_match(selector, labels):
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        if e["operator"] == "In" and labels.get(e["key"]) not in e["values"]:
            return False
    return True


def expression_values_each_match(selector, templates):
    """Every value of an In expression selects some pod (no name in a policy that matches nothing)."""
    ok = True
    for e in selector.get("matchExpressions") or []:
        for v in e.get("values", []):
            sel = {"matchLabels": {**(selector.get("matchLabels") or {}), e["key"]: v}}
            ok &= any(labels_match(sel, t["metadata"].get("labels", {})) for _, _, t in templates)
    return ok


def containers(tmpl):
    spec = tmpl["spec"]
    return [(c, True) for c in spec.get("initContainers", [])] + [(c, False) for c in spec["containers"]]


# ---- tessera's own --help -------------------------------------------------------------------------

HELP = {}


def help_of(tessera, path):
    if tuple(path) not in HELP:
        r = subprocess.run([tessera, *path, "--help"], capture_output=True, text=True)
        text = r.stdout + r.stderr
        # "  --store,--db TEXT=..." and "  -h,--help": every name of an option line.
        flags = {n for names in re.findall(r"^\s+(-{1,2}[\w-]+(?:,-{1,2}[\w-]+)*)", text, re.M)
                 for n in names.split(",") if n.startswith("--")}
        subs, in_subs = set(), False
        for line in text.splitlines():
            if line.startswith("Subcommands:"):
                in_subs = True
            elif in_subs and re.match(r"^  \S", line):
                subs.add(line.split()[0])
            elif in_subs and line and not line.startswith(" "):
                in_subs = False
        HELP[tuple(path)] = (r.returncode, flags, subs, text)
    return HELP[tuple(path)]


def split_command(tessera, argv):
    """['serve', 'token', 'add', 'x', '--scope', 'read'] -> (['serve', 'token', 'add'], rest)."""
    path, i = [], 0
    while i < len(argv) and argv[i] in help_of(tessera, path)[2]:
        path.append(argv[i])
        i += 1
    return path, argv[i:]


def check_flags(tessera, argv, where):
    """Each --flag of a tessera command line is an option of its (sub)command; returns the path."""
    path, rest = split_command(tessera, argv)
    rc, flags, _, _ = help_of(tessera, path)
    check(bool(path) and rc == 0, f"{where}: `tessera {' '.join(path)}` is a subcommand")
    tail = []
    if "--" in rest:
        tail = rest[rest.index("--") + 1:]
        rest = rest[:rest.index("--")]
    for a in rest:
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            check(name in flags, f"{where}: `tessera {' '.join(path)}` accepts {name}")
    if path == ["tune-all"]:       # the flags after -- go to every `tessera tune`
        _, tune_flags, _, _ = help_of(tessera, ["tune"])
        for a in tail:
            if a.startswith("--"):
                check(a.split("=", 1)[0] in tune_flags, f"{where}: `tessera tune` (after --) accepts {a.split('=')[0]}")
    return path, rest, tail


def flag_value(argv, name):
    for i, a in enumerate(argv):
        if a == name and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


# ---- static checks --------------------------------------------------------------------------------

def static_checks(tessera, docs):
    import kubernetes_validate as kv
    for f, d in docs:
        for v in SCHEMA_VERSIONS:
            try:
                kv.validate(d, v, strict=True)
                err = None
            except kv.ValidationError as e:
                err = f"{'.'.join(map(str, e.path))}: {e.message}"
            check(err is None, f"{f}: {d['kind']}/{d['metadata']['name']} valid for Kubernetes {v}"
                  + (f" ({err})" if err else ""))
        if d["kind"] != "Namespace":
            check(d["metadata"].get("namespace") == "tessera", f"{f}: {d['kind']}/{d['metadata']['name']} in namespace tessera")

    # kustomizations: every manifest of a folder is listed (except the Secret template), images agree
    images = {}
    for kpath in sorted(glob.glob(os.path.join(LAYOUT, "**", "kustomization.yaml"), recursive=True)):
        import yaml
        k, folder = yaml.safe_load(open(kpath)), os.path.dirname(kpath)
        listed = set(k.get("resources", []))
        present = {os.path.basename(p) for p in glob.glob(os.path.join(folder, "*.yaml"))} - {"kustomization.yaml",
                                                                                             "secrets.template.yaml"}
        check(listed == present, f"{os.path.relpath(kpath, LAYOUT)} lists exactly {sorted(present)}")
        for im in k.get("images", []):
            if im["name"] in images:
                check(images[im["name"]] == im, f"image {im['name']} mapped alike in every kustomization")
            images[im["name"]] = im

    by_kind = {}
    for f, d in docs:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    secrets = {n: set((s.get("data") or {}) | (s.get("stringData") or {})) for n, s in by_kind.get("Secret", {}).items()}
    configmaps = {n: set(c.get("data") or {}) for n, c in by_kind.get("ConfigMap", {}).items()}
    pvcs = set(by_kind.get("PersistentVolumeClaim", {}))
    templates = pod_templates(docs)

    for f, d, tmpl in templates:
        name, labels, spec = d["metadata"]["name"], tmpl["metadata"].get("labels", {}), tmpl["spec"]
        where = f"{f}: {d['kind']}/{name}"
        if "selector" in d["spec"]:
            check(labels_match(d["spec"]["selector"], labels), f"{where}: its selector matches its pod labels")
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        volumes.update({c["metadata"]["name"]: {"pvc": True} for c in d["spec"].get("volumeClaimTemplates", [])})
        for v in spec.get("volumes", []):
            if "secret" in v:
                check(v["secret"]["secretName"] in secrets, f"{where}: Secret {v['secret']['secretName']} is defined")
            if "configMap" in v:
                cm = v["configMap"]["name"]
                check(cm in configmaps, f"{where}: ConfigMap {cm} is defined")
                for item in v["configMap"].get("items", []):
                    check(item["key"] in configmaps.get(cm, ()), f"{where}: ConfigMap {cm} has key {item['key']}")
            if "persistentVolumeClaim" in v:
                check(v["persistentVolumeClaim"]["claimName"] in pvcs,
                      f"{where}: PVC {v['persistentVolumeClaim']['claimName']} is defined")
        psc = spec.get("securityContext", {})
        check(spec.get("automountServiceAccountToken") is False,
              f"{where}: no service account token (nothing here talks to the API server)")
        for c, init in containers(tmpl):
            cw = f"{where} container {c['name']}"
            sc = c.get("securityContext", {})
            check(sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, f"{cw}: runs as non-root")
            check((sc.get("seccompProfile") or psc.get("seccompProfile") or {}).get("type") == "RuntimeDefault",
                  f"{cw}: seccomp RuntimeDefault")
            check(sc.get("allowPrivilegeEscalation") is False and sc.get("capabilities", {}).get("drop") == ["ALL"],
                  f"{cw}: no privilege escalation, all capabilities dropped")
            check(sc.get("readOnlyRootFilesystem") is True, f"{cw}: read-only root file system")
            res = c.get("resources", {})
            check({"cpu", "memory"} <= set(res.get("requests", {})) and "memory" in res.get("limits", {}),
                  f"{cw}: CPU and memory requests, a memory limit")
            for m in c.get("volumeMounts", []):
                check(m["name"] in volumes, f"{cw}: volume {m['name']} is defined in the pod")
            env = {e["name"]: e for e in c.get("env", [])}
            for e in env.values():
                ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                if ref:
                    check(ref["key"] in secrets.get(ref["name"], ()), f"{cw}: Secret {ref['name']} has key {ref['key']}")
                ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
                if ref:
                    check(ref["key"] in configmaps.get(ref["name"], ()), f"{cw}: ConfigMap {ref['name']} has key {ref['key']}")
            for a in c.get("command", []) + c.get("args", []):
                for var in re.findall(r"\$\((\w+)\)", a):
                    check(var in env, f"{cw}: $({var}) is set in the container's env")
            ports = {p.get("name") for p in c.get("ports", [])}
            for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
                p = c.get(kind)
                if not p:
                    continue
                target = p.get("httpGet") or p.get("tcpSocket") or {}
                if isinstance(target.get("port"), str):
                    check(target["port"] in ports, f"{cw}: {kind} port {target['port']} is a container port")
                if "httpGet" in p:
                    check(p["httpGet"]["path"] in ("/healthz", "/readyz"), f"{cw}: {kind} on {p['httpGet']['path']}")
            check_tessera_container(tessera, d, tmpl, c, env, cw)

    # Services, PDBs and NetworkPolicies select pods the layout has (and name ports they have)
    for n, svc in by_kind.get("Service", {}).items():
        matched = [t for _, _, t in templates if labels_match({"matchLabels": svc["spec"]["selector"]},
                                                               t["metadata"].get("labels", {}))]
        check(bool(matched), f"Service {n}: its selector matches a pod template")
        for p in svc["spec"]["ports"]:
            if isinstance(p.get("targetPort"), str):
                names = {q.get("name") for t in matched for c in t["spec"]["containers"] for q in c.get("ports", [])}
                check(p["targetPort"] in names, f"Service {n}: target port {p['targetPort']} is a pod port")
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        for n, obj in by_kind.get(kind, {}).items():
            sel = obj["spec"].get("selector") or obj["spec"].get("podSelector")
            if sel:
                check(any(labels_match(sel, t["metadata"].get("labels", {})) for _, _, t in templates),
                      f"{kind} {n}: selects a pod template")
            for rule in obj["spec"].get("ingress", []):
                for peer in rule.get("from", []):
                    if "podSelector" in peer:
                        check(expression_values_each_match(peer["podSelector"], templates),
                              f"{kind} {n}: every pod it lets in exists")
    return by_kind, templates


def tessera_argv(c):
    """The tessera command line of a container of one of Tessera's images, else None."""
    if not c["image"].startswith("tessera") or c["image"] == "tessera-front":
        return None
    cmd = c.get("command") or ["tessera"]
    if cmd[0] != "tessera":
        return None
    return cmd[1:] + c.get("args", [])


def check_tessera_container(tessera, d, tmpl, c, env, cw):
    argv = tessera_argv(c)
    if argv is None:
        return
    path, rest, tail = check_flags(tessera, argv, cw)
    if path == ["serve"]:
        # The store: --store, or TESSERA_STORE (read by serve when --store is not given); either
        # way it is the engine seam of issue 16, which serve's help must offer.
        check(flag_value(rest, "--store") is not None or "TESSERA_STORE" in env,
              f"{cw}: the store comes from --store or TESSERA_STORE")
        check("--store" in help_of(tessera, ["serve"])[1], f"{cw}: `tessera serve` has --store (PostgreSQL URLs)")
        check(flag_value(rest, "--db") is None, f"{cw}: no --db (a SQLite file in a pod is lost with the pod)")
        check("PGPASSWORD" in env and "secretKeyRef" in env["PGPASSWORD"].get("valueFrom", {}),
              f"{cw}: PGPASSWORD from a Secret")
        port = int(flag_value(rest, "--port") or 8787)
        check(port in [p["containerPort"] for p in c.get("ports", [])], f"{cw}: --port {port} is the container port")
        check(flag_value(rest, "--bind") == "0.0.0.0", f"{cw}: binds the pod address (--bind 0.0.0.0)")
        check(c.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/healthz"
              and c.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/readyz",
              f"{cw}: liveness on /healthz, readiness on /readyz")
    elif path == ["worker"]:
        target = flag_value(rest, "--target") or "host"
        gpus = c.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        if target.startswith("sm_"):
            check(gpus == 1 and flag_value(rest, "--device") == "0",
                  f"{cw}: one GPU per pod (nvidia.com/gpu: 1), measured as --device 0")
        check("TESSERA_TOKEN" in env and "secretKeyRef" in env["TESSERA_TOKEN"].get("valueFrom", {}),
              f"{cw}: the worker token from a Secret")
        check(SERVE_HOST in (flag_value(rest, "--cache") or ""), f"{cw}: --cache names the serve Service")
    elif path == ["tune-all"]:
        js = d["spec"]
        shard = flag_value(rest, "--shard") or ""
        m = re.fullmatch(r"\$\(JOB_COMPLETION_INDEX\)/(\d+)", shard)
        check(d["kind"] == "Job" and js.get("completionMode") == "Indexed" and m is not None
              and int(m.group(1)) == js.get("completions") == js.get("parallelism"),
              f"{cw}: Indexed Job, --shard $(JOB_COMPLETION_INDEX)/N with N = completions = parallelism")
        fr = env.get("JOB_COMPLETION_INDEX", {}).get("valueFrom", {}).get("fieldRef", {})
        check(fr.get("fieldPath") == "metadata.annotations['batch.kubernetes.io/job-completion-index']",
              f"{cw}: JOB_COMPLETION_INDEX from the completion index annotation")
        check("--workers" in tail and SERVE_HOST in (flag_value(tail, "--cache") or ""),
              f"{cw}: each tune measures on the workers through the serve Service")


def doc_commands(tessera, path, at_least):
    """Every `tessera ...` line of the shell blocks of a document: its flags are the binary's."""
    text, n = open(path).read(), 0
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.strip()
            if not line.startswith("tessera "):
                continue
            argv = shlex.split(line, comments=True)
            for stop in ("|", "&&", ";", ">", "&"):
                if stop in argv:
                    argv = argv[:argv.index(stop)]
            check_flags(tessera, argv[1:], f"{os.path.relpath(path, ROOT)}: `{line[:60]}`")
            n += 1
    check(n >= at_least, f"{os.path.relpath(path, ROOT)}: {n} tessera command lines checked")
