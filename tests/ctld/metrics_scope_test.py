#!/usr/bin/env python3
"""/metrics by who asks (issue 24): a scrape token, an admin and a
cluster-viewer read every tenant's series; a tenant's own token (viewer,
user, tenant-admin) reads its tenant's series and the cluster-wide ones that
count nothing of another tenant, and never another tenant's name; a node
token is refused. Every page passes promtool where it is installed.

    metrics_scope_test.py TESSERAD
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-metrics-scope-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
open(os.path.join(TMP, "cluster.yaml"), "w").write(
    "topology:\n  levels: [node, gpu]\nnode_classes:\n"
    "  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}\n"
    "nodes:\n  - {names: 'n-[1-2]', class: g8}\n")
open(os.path.join(TMP, "tenants.yaml"), "w").write(
    "tenants:\n  blue: {guaranteed: {gpu: {H100-80GB: 8}}}\n"
    "  green: {guaranteed: {gpu: {H100-80GB: 8}}}\n")
open(os.path.join(TMP, "tesserad.yaml"), "w").write(
    f"listen: 127.0.0.1:{PORT}\ncluster: cluster.yaml\ntenants: tenants.yaml\n"
    "virtual_nodes: all\nstate_dir: state\n"
    "limits: {requests_per_s: 100000, burst: 100000}\nscheduler: {interval: 0.2s}\n")
# series that add up every tenant's jobs or requests: never on a tenant's page
EVERY_TENANT = ("tessera_jobs_submitted_total", "tessera_jobs_started_total",
                "tessera_jobs_finished_total", "tessera_jobs_cancelled_total",
                "tessera_preemptions_total", "tessera_queue_wait_seconds",
                "tessera_http_responses_total", "tessera_read_view_answers_total")
# cluster-wide series a tenant's page keeps
CLUSTER = ("tessera_gpus{", "tessera_gpu_fragmentation_ratio", "tessera_scheduling_cycles_total",
           "tessera_scheduling_cycle_seconds", "tessera_jobs_waiting{")


def call(method, path, token=None, body=None):
    return http_call(URL, method, path, token, body, timeout=10)


def promtool_ok(txt, who):
    if not shutil.which("promtool"):
        return
    pr = subprocess.run(["promtool", "check", "metrics"], input=txt.encode(),
                        capture_output=True, timeout=30)
    check(pr.returncode == 0, f"promtool accepts the page {who} reads: "
          + (pr.stdout + pr.stderr).decode()[:300])


def spec(tenant, name):
    return {"tenant": tenant, "name": name, "tier": "guaranteed",
            "tasks": [{"count": 1, "gpus": 4, "cpu_milli": 1000, "memory_mib": 1024}],
            "time_limit": "1h", "duration": "1h", "command": ["true"]}


proc = None
try:
    proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(TMP, "tesserad.log"), "w"))
    check(wait_ready(URL), "tesserad starts")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    toks = {"admin": admin}
    for name, body in (("blue-viewer", {"role": "viewer", "tenant": "blue"}),
                       ("blue-admin", {"role": "tenant-admin", "tenant": "blue"}),
                       ("blue-user", {"role": "user", "tenant": "blue"}),
                       ("everyone", {"role": "cluster-viewer"}),
                       ("prom", {"role": "scrape"}),
                       ("n-1", {"role": "node"})):
        st, d = call("POST", "/v1/tokens", admin, dict(body, name=name))
        check(st == 201, f"admin makes the {body['role']} token {name} ({st})")
        toks[name] = d["token"]["secret"] if st == 201 else ""
    for tenant in ("blue", "green"):
        st, d = call("POST", "/v1/jobs", admin, spec(tenant, f"{tenant}-job"))
        check(st in (200, 201), f"a job of {tenant} is submitted ({st})")

    def running_both():
        st, txt = call("GET", "/metrics", toks["prom"])
        return st == 200 and all(f'tessera_jobs{{state="running",tenant="{t}"}} 1' in txt
                                 for t in ("blue", "green"))
    deadline = time.time() + 20
    while not running_both() and time.time() < deadline:
        time.sleep(0.2)
    check(running_both(), "both tenants' jobs run (the scrape token's page says so)")
    # a job of green that waits: 16 GPUs while 8 are held
    big = spec("green", "green-waits")
    big["tasks"][0].update(count=2, gpus=8)
    big["tier"] = "opportunistic"
    st, d = call("POST", "/v1/jobs", admin, big)
    check(st in (200, 201), f"a big job of green is submitted ({st} {d})")
    st, txt = call("GET", "/metrics", toks["prom"])
    waiting_all = sum(float(l.split()[-1]) for l in str(txt).splitlines()
                      if l.startswith("tessera_jobs_waiting{"))
    check(waiting_all >= 1, f"the scrape token's page counts green's waiting job ({waiting_all})")

    # ---- every tenant's series ---------------------------------------------------------
    for who in ("prom", "admin", "everyone"):
        st, txt = call("GET", "/metrics", toks[who])
        check(st == 200 and 'tenant="blue"' in txt and 'tenant="green"' in txt
              and all(s in txt for s in EVERY_TENANT),
              f"{who} reads every tenant's series ({st})")
        if st == 200:
            promtool_ok(txt, who)

    # ---- a tenant's own page -----------------------------------------------------------
    for who in ("blue-viewer", "blue-admin", "blue-user"):
        st, txt = call("GET", "/metrics", toks[who])
        txt = txt if isinstance(txt, str) else str(txt)
        check(st == 200, f"{who} reads /metrics ({st})")
        check('tessera_jobs{state="running",tenant="blue"} 1' in txt
              and 'tessera_tenant_gpus_used{tenant="blue",gpu_model="H100-80GB"} 4.000' in txt
              and 'tessera_tenant_gpus_guaranteed{tenant="blue",gpu_model="H100-80GB"} 8.000'
              in txt, f"{who} reads its tenant's series")
        check("green" not in txt, f"{who}'s page never names the other tenant")
        leaked = [s for s in EVERY_TENANT if s in txt]
        check(not leaked, f"{who}'s page has no series that adds up every tenant's work: "
              f"{leaked}")
        missing = [s for s in CLUSTER if s not in txt]
        check(not missing, f"{who}'s page keeps the cluster-wide series: missing {missing}")
        waiting = sum(float(l.split()[-1]) for l in txt.splitlines()
                      if l.startswith("tessera_jobs_waiting{"))
        check(waiting == 0, f"{who}'s waiting reasons count its own jobs only ({waiting})")
        if st == 200:
            promtool_ok(txt, who)

    # ---- nobody else -------------------------------------------------------------------
    st, d = call("GET", "/metrics", toks["n-1"])
    check(st == 403 and "node" in str(d), f"a node token may not read /metrics ({st})")
    st, d = call("GET", "/metrics")
    check(st == 401, f"/metrics without a token: 401 ({st})")
finally:
    stop_all([proc] if proc else [])
finish(TMP, ("tesserad.log",))
