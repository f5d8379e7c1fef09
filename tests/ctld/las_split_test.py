#!/usr/bin/env python3
"""A split tenant's own limits and cross-tier time-sharing in a running tesserad.

    las_split_test.py TESSERAD

One virtual node of 4 GPUs, all of them team-g's guarantee. The cluster's
minimum runtime is an hour, so without the split keys nothing running is
ever preempted within this test. With scheduler.las {split_gpu_hours (a
step of 18 GPU-s: 4.5 s of 4 GPUs), split_backlog: 0, split_min_runtime:
1s, split_cross_tier: true}: team-g's long guaranteed job runs past the
step; its opportunistic short job (12 GPU-s, inside the step) arrives, the
overflow a tenant at its guarantee queues as opportunistic, and time-shares
it after a second, not an hour. The long job's event says time-sharing; it
does not take the GPUs back by its tier while the short job stands at a
lower level (the two would preempt each other in turn): the short job
starts and ends, then the long one resumes. Bad values of the keys are refused
naming them. Every wait is bounded.
"""
import os
import subprocess
import sys
import tempfile
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_for, wait_ready  # noqa

TMP = tempfile.mkdtemp(prefix="tessera-las-split-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


write("cluster.yaml", """node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {name: n1, class: g4}
""")
write("tenants.yaml", """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 4}}
    teams:
      team-g: {guaranteed: {gpu: {H100-80GB: 4}}}
""")
BASE = f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
virtual_nodes: all
limits: {{requests_per_s: 100000, burst: 100000}}
"""
SCHED = "scheduler: {interval: 0.2s, min_runtime: 1h, grace: 1s, backoff: 0s, " \
        "las: {split_gpu_hours: 0.005, split_backlog: 0, split_min_runtime: 1s, " \
        "split_max_preemptions_per_hour: 10, split_cross_tier: true}}\n"
write("tesserad.yaml", BASE + SCHED)

for bad, key in [("scheduler: {las: {split_backlog: -1}}\n", "scheduler.las.split_backlog"),
                 ("scheduler: {las: {split_min_runtime: soon}}\n",
                  "scheduler.las.split_min_runtime"),
                 ("scheduler: {las: {split_max_preemptions_per_hour: 1001}}\n",
                  "scheduler.las.split_max_preemptions_per_hour"),
                 ("scheduler: {las: {split_cross_tier: maybe}}\n",
                  "scheduler.las.split_cross_tier"),
                 ("scheduler: {fair_reclaim: yes}\n", "scheduler.fair_reclaim")]:
    write("bad.yaml", BASE + bad)
    r = subprocess.run([TESSERAD, "--config", os.path.join(TMP, "bad.yaml")],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode != 0 and key in r.stderr, f"refused naming {key}: {r.stderr.strip()[:160]}")


def spec(name, tier, duration):
    return {"tenant": "team-g", "name": name, "tier": tier, "command": ["run"],
            "tasks": [{"gpus": 4, "cpu_milli": 1000, "memory_mib": 1024}],
            "time_limit": "1h", "duration": duration}


procs = []
try:
    procs.append(subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                                  stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(TMP, "log"), "a")))
    check(wait_ready(URL), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()

    def call(method, path, body=None):
        return http_call(URL, method, path, admin, body)

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}")[1]["job"]

    def kinds(jid):
        return [e["kind"] for e in call("GET", f"/v1/jobs/{jid}/events")[1]["events"]]

    def submit(name, tier, duration):
        st, d = call("POST", "/v1/jobs", spec(name, tier, duration))
        check(st in (200, 201), f"{name} submitted ({st})")
        return d["jobs"][0]["id"] if "jobs" in d else d["job"]["id"]

    long_id = submit("long", "guaranteed", "60s")
    wait_for(lambda: job(long_id)["state"] == "running", "the long job runs")
    time.sleep(6)  # past the step
    short_id = submit("short", "opportunistic", "3s")
    ev = wait_for(lambda: [e for e in call("GET", f"/v1/jobs/{long_id}/events")[1]["events"]
                           if e["kind"] == "preempted"],
                  "the long job is time-shared within seconds, not the hour", 15)
    if ev:
        detail = ev[0].get("detail") or ""
        check("time-sharing" in detail, f"why: {detail}")
        check(f"for job {short_id}" in detail, f"for the short job: {detail}")
    wait_for(lambda: job(short_id)["state"] == "completed", "the short job completes", 20)
    check(kinds(short_id).count("started") == 1, f"once, not preempted back: {kinds(short_id)}")
    wait_for(lambda: kinds(long_id).count("started") >= 2, "the long job resumes", 20)
finally:
    stop_all(procs)
finish(TMP, ["log"])
