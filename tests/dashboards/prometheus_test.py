#!/usr/bin/env python3
"""Every panel query of the Grafana dashboards (dashboards/*.json) against a
real Prometheus scraping a real local cluster.

    prometheus_test.py TESSERAD TESSERA_AGENT FAKE_NVML FIXTURE DASHBOARD_DIR

Starts tesserad and two tessera-agent processes on loopback on the fake
NVML (one node of whole GPUs, one in MIG mode), each agent serving its
dcgm-exporter page (--metrics-listen); runs work for two tenants (a job on
whole GPUs, a MIG task, an opportunistic job preempted by guaranteed work, a
job that waits); then starts Prometheus (Debian's `prometheus`) on loopback
scraping tesserad (with a token, as a production setup would) and the agents
(honor_labels: true) every second, and evaluates each panel's PromQL, and
each templating query, through the HTTP API: every one must parse and return
at least one series. Grafana's own variables are replaced first ($tenant and
$node by ".*", $__rate_interval by 15s, $__range by 1h, $__range_s by
3600). Bounded: about a minute.

Exits 77 (skipped) when the prometheus binary is missing.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

TESSERAD, AGENT, FAKE, FIXTURE, DASHDIR = sys.argv[1:6]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_for, wait_ready  # noqa: E402
from harness import ADMIN_IDENTITY, USER_IDENTITY, with_root  # noqa: E402

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
if not os.path.exists(PROMETHEUS):
    print("skipped: prometheus is not installed (scripts/install-deps)")
    sys.exit(77)

TMP = tempfile.mkdtemp(prefix="tessera-dash-")
PORT, PPORT = free_port(), free_port()
MPORTS = {"w-1": free_port(), "m-1": free_port()}
URL, PURL = f"http://127.0.0.1:{PORT}", f"http://127.0.0.1:{PPORT}"
QUERY_DEADLINE_S = 45.0
GRAFANA_VARS = {"$__rate_interval": "15s", "$__range_s": "3600", "$__range": "1h", "$tenant": ".*",
                "$node": ".*"}
procs = []


def call(method, path, token, body=None):
    return http_call(URL, method, path, token, body)


def start(args, log, env=None):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(TMP, log), "w"), env=env)
    procs.append(p)
    return p


open(os.path.join(TMP, "cluster.yaml"), "w").write("""topology:
  levels: [leaf, node, gpu]
node_classes:
  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
  g8mig:
    gpu_model: H100-80GB
    gpus: 8
    cpu_milli: 64000
    memory_mib: 524288
    gpu_mode: mig
    mig_layout: [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]
nodes:
  - {name: w-1, class: g8, topology: {leaf: l1}}
  - {name: m-1, class: g8mig, topology: {leaf: l1}}
""")
open(os.path.join(TMP, "tenants.yaml"), "w").write(with_root("""tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 16}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 8}}}
"""))
open(os.path.join(TMP, "tesserad.yaml"), "w").write(f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}metrics_public: false
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 2s, backoff: 30s}}
""")

LOOP = 'trap "exit 0" USR1 TERM; while true; do sleep 0.2; done'


def spec(tenant, name, task, tier="guaranteed"):
    return {"tenant": tenant, "name": name, "tier": tier, "command": ["/bin/sh", "-c", LOOP],
            "tasks": [dict(task, cpu_milli=1000, memory_mib=1024)], "time_limit": "1h",
            "checkpoint": {"signal": "SIGUSR1", "grace": "2s"}}


def promql(expr):
    q = urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(f"{PURL}/api/v1/query?{q}", timeout=10) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        try:
            return json.loads(e.read().decode() or "{}")
        except ValueError:  # starting up: a plain-text 503, not the API's JSON
            return {}
    except (urllib.error.URLError, OSError):
        return {}  # not listening yet


def queries():
    """(dashboard, panel title, expr) for every target and templating query."""
    out = []
    for name in sorted(os.listdir(DASHDIR)):
        if not name.endswith(".json"):
            continue
        d = json.load(open(os.path.join(DASHDIR, name)))
        for p in d["panels"]:
            for t in p.get("targets", []):
                out.append((name, p["title"], t["expr"]))
        for v in d.get("templating", {}).get("list", []):
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q or "")
            if v.get("type") == "query" and m:  # label_values(expr, label) as PromQL
                out.append((name, "variable " + v["name"], f"group by ({m.group(2)}) ({m.group(1)})"))
    return out


def substitute(expr):
    for k in sorted(GRAFANA_VARS, key=len, reverse=True):
        expr = expr.replace(k, GRAFANA_VARS[k])
    return expr


try:
    start([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")], "tesserad.log")
    check(wait_ready(URL), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    for i, node in enumerate(("w-1", "m-1")):
        st, d = call("POST", "/v1/tokens", admin, {"name": node, "role": "node"})
        tf = os.path.join(TMP, node + ".token")
        open(tf, "w").write(d["token"]["secret"] + "\n")
        fx = json.load(open(FIXTURE))
        for k, g in enumerate(fx["gpus"]):
            g["uuid"] = g["uuid"][:-2] + "%02d" % (i + 1)
            g["power_mw"] = 300000 + 1000 * k  # readings the shared fixture leaves out
            g["clocks_mhz"] = {"graphics": 1980, "sm": 1980, "mem": 2619, "video": 1755}
            if node == "m-1":  # MIG mode on, no instances yet: the agent makes the layout
                g["mig"] = {"mode": 1, "pending": 1, "instances": []}
        json.dump(fx, open(os.path.join(TMP, node + "-gpus.json"), "w"))
        env = dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=os.path.join(TMP, node + "-gpus.json"))
        start([AGENT, "--server", URL, "--node", node, "--token-file", tf, "--state-dir",
               os.path.join(TMP, node), "--nvml", FAKE, "--metrics-listen",
               f"127.0.0.1:{MPORTS[node]}"], node + ".log", env)
    wait_for(lambda: all(call("GET", f"/v1/nodes/{n}", admin)[1]["node"]["state"] == "up"
                         for n in MPORTS), "both agents register", timeout=20)
    toks = {}
    for name, tenant in [("alice", "team-a"), ("bob", "team-b")]:
        toks[name] = call("POST", "/v1/tokens", admin,
                          {"name": name, "role": "user", "tenant": tenant,
                           **USER_IDENTITY})[1]["token"]["secret"]

    def state(tok, jid):
        st, d = call("GET", f"/v1/jobs/{jid}", tok)
        return d["job"]["state"] if st == 200 else None

    # team-b borrows all of w-1; team-a takes half back; a MIG task; a job that waits
    bid = call("POST", "/v1/jobs", toks["bob"], spec("team-b", "borrow", {"count": 1, "gpus": 8},
                                                     "opportunistic"))[1]["jobs"][0]["id"]
    wait_for(lambda: state(toks["bob"], bid) == "running", "team-b's borrowing job runs", timeout=20)
    time.sleep(1.2)  # past min_runtime
    aid = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "train", {"count": 1, "gpus": 4}))[1]["jobs"][0]["id"]
    mid = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "probe", {"count": 1, "mig_profile": "1g.10gb"}))[1]["jobs"][0]["id"]
    # within team-b's guarantee (more is refused at submission), more than w-1 has left
    wid = call("POST", "/v1/jobs", toks["bob"], spec("team-b", "big", {"count": 2, "gpus": 4}))[1]["jobs"][0]["id"]
    wait_for(lambda: state(toks["alice"], aid) == "running", "team-a's job runs after a preemption", timeout=30)
    wait_for(lambda: state(toks["alice"], mid) == "running", "the MIG task runs", timeout=30)
    check(state(toks["bob"], wid) == "pending", "the big job waits")

    tf = os.path.join(TMP, "prom.token")
    open(tf, "w").write(admin)
    open(os.path.join(TMP, "prometheus.yml"), "w").write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: tesserad
    authorization: {{credentials_file: {tf}}}
    static_configs: [{{targets: ["127.0.0.1:{PORT}"]}}]
  - job_name: tessera-agents
    honor_labels: true
    static_configs: [{{targets: ["127.0.0.1:{MPORTS['w-1']}", "127.0.0.1:{MPORTS['m-1']}"]}}]
""")
    start([PROMETHEUS, "--config.file", os.path.join(TMP, "prometheus.yml"),
           "--storage.tsdb.path", os.path.join(TMP, "prom-data"),
           "--web.listen-address", f"127.0.0.1:{PPORT}", "--log.level", "warn"], "prometheus.log")
    wait_for(lambda: promql("up").get("status") == "success"
             and len(promql("up")["data"]["result"]) == 3
             and all(r["value"][1] == "1" for r in promql("up")["data"]["result"]),
             "Prometheus scrapes tesserad and both agents", timeout=30)
    todo = queries()
    check(len(todo) >= 30, f"the dashboards hold their panels ({len(todo)} queries)")
    deadline = time.time() + QUERY_DEADLINE_S
    results = {}
    while time.time() < deadline:
        for dash, title, expr in todo:
            if results.get(expr) == "ok":
                continue
            a = promql(substitute(expr))
            if a.get("status") != "success":
                results[expr] = "does not parse: " + a.get("error", "?")
            elif not a["data"]["result"]:
                results[expr] = "no data"
            else:
                results[expr] = "ok"
        if all(v == "ok" or v.startswith("does not parse") for v in results.values()):
            break
        time.sleep(1)
    bad_parse = 0
    for dash, title, expr in todo:
        r = results.get(expr, "not run")
        bad_parse += r.startswith("does not parse")
        check(r == "ok", f"{dash} / {title}: {expr} -> {r}")
    print(f"{len(todo)} queries, {sum(results.get(e) == 'ok' for _, _, e in todo)} with data, "
          f"{bad_parse} that fail to parse")
finally:
    stop_all(procs)
finish(TMP, ["tesserad.log", "w-1.log", "m-1.log", "prometheus.log"])
