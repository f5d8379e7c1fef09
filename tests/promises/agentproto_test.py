"""The agent protocol's one schema (docs/agent-protocol.md, its schema
docs/agent-protocol.schema.json) held to the live traffic: the agents of
this cluster talk to tesserad through a recording proxy on loopback, jobs
exercise what the protocol carries (starts, a stop with its checkpoint
signal, a time limit, a failure, an output request, a step of a batch job,
a MIG layout, a drain by a failed prolog), and every register and sync
request and every answer must validate against the schema, which allows no
field it does not describe."""
import http.client
import http.server
import json
import os
import threading

from cluster import Node, free_port
from harness import check

CTLD_PORT = free_port()
RECORDED = []  # (path, request document, status, answer document)
LOCK = threading.Lock()


class Recorder(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_GET(self):  # srun in a task reads its step through the same URL
        self.do_POST("GET")

    def do_POST(self, method="POST"):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if method == "POST" else None
        up = http.client.HTTPConnection("127.0.0.1", CTLD_PORT, timeout=90)
        hdr = {k: v for k, v in self.headers.items()
               if k.lower() in ("authorization", "content-type", "idempotency-key")}
        try:
            up.request(method, self.path, body, hdr)
            r = up.getresponse()
            data = r.read()
            status = r.status
            ctype = r.getheader("Content-Type") or "application/json"
        except OSError:
            self.send_error(502)
            return
        finally:
            up.close()
        try:
            req, ans = json.loads(body or b"null"), json.loads(data or b"null")
        except ValueError:
            req, ans = None, None
        with LOCK:
            if method == "POST":
                RECORDED.append((self.path, req, status, ans))
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the agent dropped a long-poll (a task of its ended meanwhile)


PROXY = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
PROXY.daemon_threads = True
threading.Thread(target=PROXY.serve_forever, daemon=True).start()
VIA = f"http://127.0.0.1:{PROXY.server_address[1]}"

TENANTS = """tenants:
  team-a: {guaranteed: {gpu: {H100-80GB: 16, A100-40GB: 8}}}
"""
CLUSTER = {"port": CTLD_PORT, "tenants": TENANTS,
           "nodes": [Node("p-1", "l1", server=VIA), Node("p-2", "l1", server=VIA),
                     Node("m-1", "l1", cls="mig8", fixture="a100-mig.json", server=VIA)]}

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                           "agent-protocol.schema.json")


def validator(name):
    """A validator of one of the schema's definitions."""
    import jsonschema
    schema = json.load(open(SCHEMA_PATH))
    sub = dict(schema, **{"$ref": f"#/$defs/{name}"})
    sub.pop("oneOf", None)
    return jsonschema.Draft202012Validator(sub)


def spec(name, cmd, gpus=1, count=1, **kw):
    s = {"tenant": "team-a", "name": name, "tier": "guaranteed", "time_limit": "5m",
         "command": ["/bin/sh", "-c", cmd],
         "tasks": [{"count": count, "gpus": gpus, "cpu_milli": 500, "memory_mib": 256}]}
    s.update(kw)
    return s


def scenario_every_message_matches_the_schema(c):
    """agent-protocol.md: every register and sync request and every answer
    matches docs/agent-protocol.schema.json, which names every field."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        print("  (no jsonschema module: scripts/install-deps installs it)")
        return
    # a gang that fails with its exit code and output
    jid = c.submit(spec("gang", "echo out; echo err >&2; exit 3", gpus=8, count=2))
    c.wait_job(jid, ("failed", "completed"), 30)
    # a running task asked for its output, then cancelled (its stop's signal)
    jid = c.submit(spec("long", "echo started; exec sleep 60"))
    if c.wait_job(jid, "running", 30):
        c.wait(lambda: "started" in c.cli("logs", str(jid)).stdout or None, "its output", 10)
        c.call("POST", f"/v1/jobs/{jid}/cancel")
        c.wait_job(jid, "cancelled", 30)
    # a time limit the agent enforces itself
    jid = c.submit(spec("limited", "exec sleep 60", time_limit="2s"))
    c.wait_job(jid, ("timed_out", "timeout", "failed"), 40)
    # a secret for the starting rank only
    r = c.cli("secrets", "set", "PROTO_KEY", "--scope", "tenant", "--tenant", "team-a", stdin="v-1\n")
    check(r.returncode == 0, f"a secret: {r.returncode} {r.stderr}")
    jid = c.submit(spec("secret", "test -n \"$PROTO_KEY\"", secrets=["PROTO_KEY"]))
    c.wait_job(jid, ("completed", "failed"), 30)
    # a MIG instance (the node's layout in the desired state, MIG in discovery)
    jid = c.submit({"tenant": "team-a", "name": "mig", "tier": "guaranteed", "time_limit": "5m",
                    "command": ["/bin/true"],
                    "tasks": [{"count": 1, "mig_profile": "3g.20gb", "gpu_model": "A100-40GB", "cpu_milli": 500,
                               "memory_mib": 256}]})
    if isinstance(jid, int):
        c.wait_job(jid, ("completed", "failed"), 40)
    # a batch job whose script runs a step on both its ranks
    path = c.path("steps.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=1 "
                "--account=team-a --time=5\nsrun hostname\n")
    r = c.cli("sbatch", path)
    sid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    check(sid is not None, f"a batch job with a step: {r.stdout} {r.stderr}")
    if sid:
        c.wait_job(sid, ("completed", "failed"), 60)
    with LOCK:
        seen = list(RECORDED)
    kinds = {"/v1/agent/register": "register_request", "/v1/agent/sync": "sync_request"}
    v = {k: validator(k) for k in ("register_request", "sync_request", "desired",
                                   "error_answer")}
    bad, counts, fields = [], {}, set()

    def walk(o, pre):
        if isinstance(o, dict):
            for k, x in o.items():
                fields.add(f"{pre}.{k}")
                walk(x, f"{pre}.{k}")
        elif isinstance(o, list):
            for x in o:
                walk(x, pre + "[]")
    for path, req, status, ans in seen:
        if path not in kinds:
            continue
        for name, doc in ((kinds[path], req),
                          ("desired" if status == 200 else "error_answer", ans)):
            counts[name] = counts.get(name, 0) + 1
            walk(doc, name)
            errs = sorted(v[name].iter_errors(doc), key=lambda e: list(e.path))
            if errs:
                e = errs[0]
                bad.append(f"{path} {name}: {'/'.join(map(str, e.path))}: {e.message[:200]}")
    check(counts.get("register_request", 0) >= 3 and counts.get("sync_request", 0) >= 10,
          f"the agents' traffic went through the recorder: {counts}")
    check(not bad, f"every message matches the schema ({sum(counts.values())} checked): "
          f"{bad[:5]}")
    # what this run made the protocol carry, so a field the schema names is
    # seen at least here: the step's tasks, the stop, the secret, MIG, output
    for f in ("desired.tasks[].step", "desired.tasks[].hold", "desired.tasks[].step_token",
              "desired.tasks[].signal", "desired.tasks[].secrets", "desired.mig[].layout",
              "desired.logs[].id", "sync_request.logs[].data",
              "sync_request.tasks[].output.stderr", "sync_request.tasks[].exit_code",
              "register_request.discovery.gpus[].mig.instances"):
        check(f in fields, f"the run carried {f}")
    # the schema can fail: a field it does not name, a wrong type
    one = next((a for p, _, st, a in seen if st == 200 and p == "/v1/agent/sync"), None)
    if one is not None:
        extra = dict(one, surprise=1)
        check(any(True for _ in v["desired"].iter_errors(extra)),
              "a field the schema does not name is refused")
        wrong = dict(one, gen="seven")
        check(any(True for _ in v["desired"].iter_errors(wrong)), "a wrong type is refused")
