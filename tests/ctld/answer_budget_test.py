#!/usr/bin/env python3
"""One tenant's tasks cannot make a node's answer too large for its agent.

    answer_budget_test.py TESSERAD

Every task in a node's desired state carries its job's environment and
command, and every step task its rank's again; the agent refuses an answer
over its limit (64 MiB), after which every sync of the node would fail for
every tenant's jobs on it. Here the controller's budget for a node's tasks
is made small (TESSERAD_TEST_ANSWER_BUDGET, test builds) and one real node,
r-1, has a scripted agent. Tenant u runs a small job there; tenant t runs a
batch job of 4 ranks there, each with 100 KB of environment, and starts
steps on all 4 ranks. Checked:

- a spec whose environment and command are over 640 KiB is refused, the
  error naming `env`;
- the steps' tasks over the budget are left out of r-1's answer (held, the
  newest first), the answer stays within the budget, t's ranks and u's task stay in it and the
  node keeps syncing;
- a job runs at most 64 steps at once: the 65th is 409
  too_many_running_steps;
- once the steps end, the next one runs.
Every wait is bounded.
"""
import json
import os
import subprocess
import sys
import tempfile

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ScriptedNode, ctld_files, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-answer-budget-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
BUDGET = 3_000_000
BIG = "x" * 100_000
RUNNING_MAX = 64

ctld_files(TMP, PORT, ["{names: 'r-[1-1]', class: a8}"],
           "node_lost_after: 600s\nscheduler: {interval: 0.05s}\n")
with open(os.path.join(TMP, "tenants.yaml"), "a") as f:
    f.write("  u: {}\n")


def call(method, path, token, body=None, timeout=60):
    return http_call(URL, method, path, token, body, timeout=timeout)


env = dict(os.environ, TESSERAD_TEST_ANSWER_BUDGET=str(BUDGET))
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "w"),
                        env=env)
try:
    check(wait_ready(URL, timeout=30), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    r1 = ScriptedNode(URL, admin, "r-1")
    check(r1.made, "a node credential for r-1")
    check(r1.registered, "r-1 registers")

    def sync(wait_s=0):
        """r-1's sync and the size of its answer's text."""
        st, d = r1.sync(wait_s)
        return st, d, len(json.dumps(d)) if st == 200 else 0

    # a task's environment and command are bounded at the API
    st, d = call("POST", "/v1/jobs", admin,
                 {"name": "huge", "tenant": "t", "tasks": [{"gpus": 1}], "command": ["true"],
                  "env": {f"V{i}": "y" * 1000 for i in range(700)}})
    check(st == 400 and "env" in json.dumps(d) and "655360" in json.dumps(d),
          f"700 KB of environment is refused, naming env ({st} {json.dumps(d)[:300]})")

    st, d = call("POST", "/v1/jobs", admin,
                 {"name": "quiet", "tenant": "u", "tasks": [{"gpus": 1, "gpu_model": "A100-80GB"}],
                  "command": ["sleep", "1000"]})
    check(st in (200, 201), f"tenant u's job ({st})")
    quiet = d["jobs"][0]["id"] if st in (200, 201) else 0
    st, d = call("POST", "/v1/jobs", admin,
                 {"name": "batch", "tenant": "t",
                  "tasks": [{"count": 4, "gpus": 1, "gpu_model": "A100-80GB"}],
                  "command": ["sleep", "1000"], "env": {"SLURM_JOB_NAME": "batch", "BIG": BIG}})
    check(st in (200, 201), f"tenant t's batch job of 4 ranks ({st})")
    batch = d["jobs"][0]["id"] if st in (200, 201) else 0

    def both_there():
        st, d, size = sync(wait_s=1)
        jobs = {t["job"] for t in d.get("tasks", [])} if st == 200 else set()
        return d if {quiet, batch} <= jobs else None

    d = wait_for(both_there, "both jobs in r-1's desired state", 30.0) or {}
    tasks = d.get("tasks", [])
    token = next((t.get("step_token") for t in tasks
                  if t["job"] == batch and t.get("rank") == 0), None)
    check(bool(token), "rank 0 of the batch job holds its step credential")
    r1.tasks = [{"job": t["job"], "rank": t["rank"], "state": "running"} for t in tasks]
    st, d, size = sync()
    check(st == 200, f"the ranks run ({st})")

    # steps on all 4 ranks, each task 100 KB: 64 of them are 25 MB of tasks
    posted = []
    for k in range(RUNNING_MAX):
        st, d = call("POST", f"/v1/jobs/{batch}/steps", token, {"command": ["hostname"]})
        if st != 201:
            check(False, f"step {k} starts ({st} {d})")
            break
        posted.append(d["step"]["id"])
    check(len(posted) == RUNNING_MAX, f"{len(posted)} steps running")
    st, d = call("POST", f"/v1/jobs/{batch}/steps", token, {"command": ["hostname"]})
    check(st == 409 and d.get("error", {}).get("code", d.get("code")) == "too_many_running_steps"
          or (st == 409 and "too_many_running_steps" in json.dumps(d)),
          f"step {RUNNING_MAX + 1} waits for one to end: {st} {json.dumps(d)[:200]}")

    st, d, size = sync(wait_s=1)
    jobs = [t["job"] for t in d.get("tasks", [])] if st == 200 else []
    steps = [t for t in d.get("tasks", []) if t.get("step") is not None and t["job"] == batch]
    check(st == 200 and size <= BUDGET + 200_000,
          f"r-1's answer within the budget: {size} bytes (budget {BUDGET} for its tasks)")
    check(quiet in jobs, "tenant u's task is still in r-1's answer")
    check(len([t for t in d.get("tasks", []) if t["job"] == batch and t.get("step") is None])
          == 4, "t's 4 ranks are still in it")
    check(0 < len(steps) < RUNNING_MAX * 4, f"t's step tasks over the budget are held, the "
          f"first steps' kept: "
          f"{len(steps)} of {RUNNING_MAX * 4} in the answer")
    st, d = call("GET", f"/v1/jobs/{quiet}", admin)
    check(st == 200 and d["job"]["state"] == "running", "u's job keeps running")
    for _ in range(3):
        st, d, size = sync()
        check(st == 200, f"r-1 keeps syncing ({st}, {size} bytes)")

    # the steps end (the agent reports every step task exited): the next runs
    r1.tasks += [{"job": batch, "rank": r, "step": s, "state": "exited", "exit_code": 0}
                       for s in posted for r in range(4)]
    st, d, size = sync()
    check(st == 200, f"the steps' ends are applied ({st})")
    st, d = call("GET", f"/v1/jobs/{batch}/steps", admin)
    ended = [s for s in d.get("steps", []) if s.get("state") == "completed"]
    check(len(ended) == RUNNING_MAX, f"{len(ended)} steps completed")
    st, d = call("POST", f"/v1/jobs/{batch}/steps", token, {"command": ["hostname"]})
    check(st == 201, f"a step starts again once they ended ({st})")
finally:
    stop_all([proc])
finish(TMP, [os.path.join(TMP, "log")])
