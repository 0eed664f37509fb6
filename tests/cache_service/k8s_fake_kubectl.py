#!/usr/bin/env python3
"""Owns standing in for kubectl when k8s_layout_test.py runs deploy/kubernetes/make-secrets.sh:
`exec deploy/tessera-serve -c serve -- CMD...` runs CMD here with the serve container's
TESSERA_STORE (FAKE_STORE); `create secret` prints the object kubectl would send; `apply -f -` keeps
it in FAKE_STATE/secrets.json; every command line goes to FAKE_STATE/argv.jsonl, so the test can
check that no secret was ever on one."""
import json
import os
import subprocess
import sys

state = os.environ["FAKE_STATE"]
args = sys.argv[1:]
with open(os.path.join(state, "argv.jsonl"), "a") as f:
    f.write(json.dumps(args) + "\n")
if "-n" in args:
    del args[args.index("-n"):args.index("-n") + 2]
secrets = os.path.join(state, "secrets.json")
have = json.load(open(secrets)) if os.path.exists(secrets) else {}
if args[0] == "exec":
    cmd = args[args.index("--") + 1:]
    sys.exit(subprocess.run(cmd, env=dict(os.environ, TESSERA_STORE=os.environ["FAKE_STORE"])).returncode)
if args[:2] == ["get", "secret"]:
    sys.exit(0 if args[2] in have else 1)
if args[:2] == ["rollout", "status"]:
    sys.exit(0)
if args[:2] == ["create", "secret"]:
    kind, name, data = args[2], args[3], {}
    for a in args[4:]:
        if a.startswith("--from-literal="):
            k, v = a.split("=", 1)[1].split("=", 1)
            data[k] = v
        elif a.startswith("--from-file="):
            k, p = a.split("=", 1)[1].split("=", 1)
            data[k] = open(p).read()
        elif a.startswith("--cert="):
            data["tls.crt"] = open(a.split("=", 1)[1]).read()
        elif a.startswith("--key="):
            data["tls.key"] = open(a.split("=", 1)[1]).read()
    print(json.dumps({"kind": "Secret", "type": kind, "name": name, "data": data}))
    sys.exit(0)
if args[:2] == ["apply", "-f"]:
    obj = json.loads(sys.stdin.read())
    have[obj["name"]] = obj["data"]
    json.dump(have, open(secrets, "w"))
    sys.exit(0)
sys.exit("fake kubectl: unexpected " + " ".join(args))
