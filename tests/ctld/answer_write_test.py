#!/usr/bin/env python3
"""Writing a node's answer holds no lock that the rest of the controller waits for.

    answer_write_test.py TESSERAD

A node's answer near its budget (32 MiB of tasks, one tenant's steps
carrying their ranks' environment) takes most of a second to write out. A
change on the node (a job cancelled, a step started) takes that node's lock
while it holds the controller's, so an answer written under the node's lock
held every reader, submission and cycle for as long as the writing took.
Here every answer's writing is stretched to 4 s
(TESSERAD_TEST_ANSWER_DELAY_MS, test builds) and one real node, r-1, has a
scripted agent. While its sync's answer is being written, checked:

- a job on r-1 is cancelled within 2 s, and another tenant's job is read
  within 2 s;
- the answer written meanwhile is whole and current as of its sync (the
  cancelled job's task is in it, still to run), and the next sync's answer
  says to stop it;
- a step's task carries its rank's environment, then the step's own
  variables, in that order.
Every wait is bounded.
"""
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ScriptedNode, ctld_files, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-answer-write-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
DELAY_MS = 4000
BOUND_S = 2.0

ctld_files(TMP, PORT, ["{names: 'r-[1-1]', class: a8}"],
           "node_lost_after: 600s\nscheduler: {interval: 0.05s}\n")
with open(os.path.join(TMP, "tenants.yaml"), "a") as f:
    f.write("  u: {}\n")


def call(method, path, token, body=None, timeout=60):
    return http_call(URL, method, path, token, body, timeout=timeout)


env = dict(os.environ, TESSERAD_TEST_ANSWER_DELAY_MS=str(DELAY_MS))
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "w"),
                        env=env)
try:
    check(wait_ready(URL, timeout=30), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    r1 = ScriptedNode(URL, admin, "r-1")
    check(r1.made and r1.registered, "r-1 has a node credential and registers")

    def job(name, tenant, count, env, command=("sleep", "1000")):
        st, d = call("POST", "/v1/jobs", admin,
                     {"name": name, "tenant": tenant, "command": list(command), "env": env,
                      "tasks": [{"count": count, "gpus": 1, "gpu_model": "A100-80GB"}]})
        check(st in (200, 201), f"job {name} of tenant {tenant} ({st})")
        return d["jobs"][0]["id"] if st in (200, 201) else 0

    doomed = job("doomed", "t", 1, {})
    other = job("other", "u", 1, {})
    batch = job("batch", "t", 2, {"SLURM_JOB_NAME": "batch", "BIG": "b" * 2000})

    def all_there():
        st, d = r1.sync(wait_s=1)
        jobs = {t["job"] for t in d.get("tasks", [])} if st == 200 else set()
        return d if {doomed, other, batch} <= jobs else None

    d = wait_for(all_there, "the three jobs in r-1's desired state", 60.0) or {}
    tasks = d.get("tasks", [])
    token = next((t.get("step_token") for t in tasks
                  if t["job"] == batch and t.get("rank") == 0), None)
    check(bool(token), "rank 0 of the batch job holds its step credential")
    r1.tasks = [{"job": t["job"], "rank": t["rank"], "state": "running"} for t in tasks]
    st, d = r1.sync()
    check(st == 200, f"the ranks run ({st})")

    # a step on both ranks: its tasks are their ranks' plus the step's variables
    st, d = call("POST", f"/v1/jobs/{batch}/steps", token, {"command": ["hostname"]})
    check(st == 201, f"a step starts ({st})")
    step = d["step"]["id"] if st == 201 else -1
    st, d = r1.sync()
    got = d.get("tasks", []) if st == 200 else []
    ranks = {t["rank"]: t for t in got if t["job"] == batch and t.get("step") is None}
    steps = [t for t in got if t["job"] == batch and t.get("step") == step]
    check(len(steps) == 2, f"the step's two tasks are in r-1's answer ({len(steps)})")
    for t in steps:
        base = ranks.get(t["rank"], {}).get("env", [])
        own = t["env"][len(base):]
        check(t["env"][:len(base)] == base and len(base) > 0,
              f"step task of rank {t['rank']}: its rank's environment first, as is")
        check([v.split("=")[0] for v in own] == ["SLURM_STEP_ID", "SLURM_STEP_NUM_TASKS",
                                                 "SLURM_STEP_NUM_NODES", "TESSERA_STEP_ID"]
              and f"TESSERA_STEP_ID={step}" in own,
              f"step task of rank {t['rank']}: then the step's own variables ({own})")
        check(t["command"] == ["hostname"] and "step_token" not in t and not t.get("hold"),
              f"step task of rank {t['rank']}: the step's command, no credential, no hold")

    # a sync whose answer takes DELAY_MS to write, and meanwhile a change on r-1
    r1.tasks += [{"job": batch, "rank": r, "step": step, "state": "running"}
                       for r in (0, 1)]
    slow = {}

    def slow_sync():
        q = time.time()
        slow["st"], slow["d"] = r1.sync()
        slow["s"] = time.time() - q

    th = threading.Thread(target=slow_sync)
    th.start()
    time.sleep(0.5)  # its answer is being written
    q = time.time()
    st, d = call("POST", f"/v1/jobs/{doomed}/cancel", admin)
    took = time.time() - q
    check(st == 200, f"job {doomed} on r-1 cancelled ({st})")
    check(took < BOUND_S, f"the cancel took {took:.2f} s while r-1's answer was being written "
          f"(bound {BOUND_S} s, the writing {DELAY_MS / 1000} s)")
    q = time.time()
    st, d = call("GET", f"/v1/jobs/{other}", admin)
    took = time.time() - q
    check(st == 200 and took < BOUND_S, f"another tenant's job read in {took:.2f} s meanwhile")
    th.join(timeout=60)
    check(slow.get("st") == 200, f"the slow sync is answered ({slow.get('st')}, "
          f"{slow.get('s', 0):.2f} s)")
    was = {t["job"]: t.get("action") for t in slow.get("d", {}).get("tasks", [])
           if t.get("step") is None}
    check(was.get(doomed) == "run" and was.get(other) == "run",
          f"that answer is r-1's as of its sync, whole: {was}")
    st, d = r1.sync()
    now = {t["job"]: t.get("action") for t in d.get("tasks", []) if t.get("step") is None}
    check(st == 200 and now.get(doomed) == "stop" and now.get(other) == "run",
          f"the next answer stops the cancelled job: {now}")
finally:
    stop_all([proc])
finish(TMP, [os.path.join(TMP, "log")])
