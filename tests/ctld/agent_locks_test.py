#!/usr/bin/env python3
"""An agent's sync that changes nothing takes only its node's lock.

    agent_locks_test.py TESSERAD

Each node has its own lock for the agent protocol (docs/agent-protocol.md):
a sync whose report equals the last one applied, with nothing moved on the
node since, keeps its readings and answers from the node's published
desired document without the controller's lock, so it never waits for a
scheduling cycle. Here every cycle is stretched by 800 ms
(TESSERAD_TEST_CYCLE_DELAY_MS, test builds) and cycles run back to back
(jobs of 1 s ending all the time on two virtual H100 nodes); one real
A100 node, r-1, has a scripted agent. Checked:

- repeated syncs with the same report answer within 200 ms at the median, a
  quarter of a cycle, and are counted as `same` in tessera_agent_syncs_total (a changed
  report is applied, after the cycle running);
- the desired document answered that way is current: a job placed on r-1
  appears in it, and one that ends leaves it;
- an output request reaches the agent and its answer, carried by a sync
  that is otherwise the same, reaches the reader;
- the readings of same reports still count: a rank reporting 0 % GPU
  utilisation is warned, then stopped and held, by the idle policy;
- a report that changes something (the rank exits 0) completes the job;
- one tenant's jobs hold at most 2 of a node's 4 waiting output requests.
Every wait is bounded.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ctld_files, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-agent-locks-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
DELAY_MS = 800
BOUND_S = DELAY_MS / 1000.0 / 4

ctld_files(TMP, PORT, ["{names: 'v-[1-2]', class: g8}", "{names: 'r-[1-1]', class: a8}"],
           "virtual_nodes: ['v-*']\nnode_lost_after: 60s\nscheduler: {interval: 0.01s}\n")
with open(os.path.join(TMP, "tenants.yaml"), "a") as f:
    f.write("  u: {}\n")  # a second tenant, for the output requests' share


def call(method, path, token, body=None, timeout=30):
    return http_call(URL, method, path, token, body, timeout=timeout)


def syncs(admin):
    """tessera_agent_syncs_total by path."""
    st, text = call("GET", "/metrics", admin)
    got = {}
    for m in re.finditer(r'tessera_agent_syncs_total\{path="(\w+)"\} (\d+)', str(text)):
        got[m.group(1)] = int(m.group(2))
    return got


env = dict(os.environ, TESSERAD_TEST_CYCLE_DELAY_MS=str(DELAY_MS))
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "w"),
                        env=env)
try:
    check(wait_ready(URL, timeout=30), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    st, d = call("POST", "/v1/tokens", admin, {"name": "r-1", "role": "node"})
    check(st == 201, f"a node credential for r-1 ({st})")
    node = d["token"]["secret"] if st == 201 else ""
    # the loop never rests: 1-s jobs on the virtual nodes, some ending in every cycle
    st, d = call("POST", "/v1/jobs", admin,
                 {"name": "busy", "tenant": "t", "array_size": 40, "tasks": [{"gpus": 1, "gpu_model": "H100-80GB"}], "duration": 1})
    check(st in (200, 201), f"40 busy jobs on the virtual nodes ({st})")

    state = {"gen": 0, "tasks": []}

    def sync(extra=None, wait_s=0):
        body = {"node": "r-1", "gen": state["gen"], "tasks": state["tasks"], "wait_s": wait_s}
        body.update(extra or {})
        t = time.monotonic()
        st, d = call("POST", "/v1/agent/sync", node, body)
        dt = time.monotonic() - t
        if st == 200:
            state["gen"] = d["gen"]
        return st, d, dt

    st, d = call("POST", "/v1/agent/register", node, {"node": "r-1", "discovery": {"gpus": 8}})
    check(st == 200, f"r-1 registers ({st})")
    state["gen"] = d.get("gen", 0) if st == 200 else 0
    st, d, dt = sync()
    check(st == 200, f"the first report is applied ({st})")
    time.sleep(1.0)

    # the same report again and again: never waits for a cycle
    before = syncs(admin)
    lat = []
    t_end = time.monotonic() + 4 * DELAY_MS / 1000.0
    while time.monotonic() < t_end and len(lat) < 200:
        st, d, dt = sync()
        lat.append(dt if st == 200 else 99.0)
        time.sleep(0.02)
    after = syncs(admin)
    worst = max(lat) if lat else 99.0
    # the median, not the slowest: a sync that waited for the cycle (back to
    # back, 800 ms each) would wait ~400 ms on average, so the median tells
    # the two paths apart, while one answer slowed by a loaded machine (CI
    # runs tests side by side) says nothing of the lock
    median = sorted(lat)[len(lat) // 2] if lat else 99.0
    check(len(lat) > 10 and median < BOUND_S,
          f"{len(lat)} same reports over {4 * DELAY_MS / 1000:.1f} s of cycles: answered in "
          f"{median * 1e3:.0f} ms at the median, {worst * 1e3:.0f} ms at the slowest "
          f"(bound {BOUND_S * 1e3:.0f} ms on the median, a cycle {DELAY_MS} ms)")
    same = after.get("same", 0) - before.get("same", 0)
    check(same >= len(lat) - 2, f"counted as same: {same} of {len(lat)} ({before} -> {after})")

    # a job placed on r-1 shows in the document a same report is answered with
    st, d = call("POST", "/v1/jobs", admin,
                 {"name": "real", "tenant": "t", "tasks": [{"gpus": 2, "gpu_model": "A100-80GB"}],
                  "command": ["sleep", "100"], "idle": {"timeout": "4s"}})
    check(st in (200, 201), f"a job for r-1 ({st})")
    real = d["jobs"][0]["id"] if st in (200, 201) else 0
    got = wait_for(lambda: [t for t in sync(wait_s=1)[1].get("tasks", []) if t["job"] == real],
                   "the job appears in r-1's desired state", 15.0)
    check(bool(got) and got[0]["action"] == "run", "r-1 is told to run it")
    # it runs, at 0 % GPU utilisation
    state["tasks"] = [{"job": real, "rank": 0, "state": "running", "gpu_util": 0.0}]
    st, d, dt = sync()
    check(st == 200, f"the running report is applied ({st})")

    # an output request, answered by a sync that is otherwise the same
    out = {}

    def read_logs():
        out["r"] = call("GET", f"/v1/jobs/{real}/logs?rank=0", admin, timeout=20)

    # the agent's long-poll is already waiting when the request comes: the
    # request moves the node's generation, which must not make the answer's
    # report (the same one) wait for a cycle
    polled = {}

    def long_poll():
        polled["r"] = sync(wait_s=10)

    poller = threading.Thread(target=long_poll)
    poller.start()
    time.sleep(0.5)
    th = threading.Thread(target=read_logs)
    th.start()
    poller.join(15)
    want = (polled.get("r") or (0, {}, 0))[1].get("logs") or \
        wait_for(lambda: sync(wait_s=1)[1].get("logs") or None, "the output request", 10.0)
    check(bool(want), "the waiting long-poll answers with the output request")
    if want:
        before = syncs(admin)
        st, d, dt = sync({"logs": [{"id": want[0]["id"], "data": "hello\n", "size": 6}]})
        after = syncs(admin)
        # one answer: bounded by a cycle (the count below says which path it took)
        check(st == 200 and dt < DELAY_MS / 1000.0,
              f"the answer rides on a same report ({st}, {dt * 1e3:.0f} ms, a cycle {DELAY_MS} ms)")
        check(after.get("same", 0) - before.get("same", 0) == 1,
              f"the answer's report counted as same ({before} -> {after})")
    th.join(25)
    st, d = out.get("r", (0, {}))
    check(st == 200 and d.get("data") == "hello\n", f"the reader gets the agent's output ({st})")

    # the idle policy reads the readings of same reports: warned, then stopped
    def idle_task():
        for t in sync(wait_s=0.3)[1].get("tasks", []):
            if t["job"] == real and (t.get("idle_warning") or t.get("action") == "stop"):
                return t
        return None

    warned = wait_for(idle_task, "the idle warning or stop in r-1's document", 15.0)
    check(bool(warned), "the idle policy saw 0 % utilisation through same reports")
    stop = wait_for(lambda: [t for t in sync(wait_s=0.3)[1].get("tasks", [])
                             if t["job"] == real and t["action"] == "stop"] or None,
                    "the idle stop", 15.0)
    check(bool(stop), "the idle job is asked to stop")
    state["tasks"] = [{"job": real, "rank": 0, "state": "stopped", "outcome": "terminated"}]
    sync()
    held = wait_for(lambda: call("GET", f"/v1/jobs/{real}", admin)[1]["job"]["state"] == "held"
                    or None, "the idle job held", 15.0)
    check(bool(held), "it is held once its rank stopped")

    # a change is applied: a second job on r-1 exits 0 and completes
    st, d = call("POST", "/v1/jobs", admin,
                 {"name": "done", "tenant": "t", "tasks": [{"gpus": 1, "gpu_model": "A100-80GB"}],
                  "command": ["true"]})
    done = d["jobs"][0]["id"] if st in (200, 201) else 0
    got = wait_for(lambda: [t for t in sync(wait_s=1)[1].get("tasks", []) if t["job"] == done],
                   "the second job in r-1's desired state", 15.0)
    state["tasks"] = [{"job": done, "rank": 0, "state": "running"}]
    sync()
    state["tasks"] = [{"job": done, "rank": 0, "state": "exited", "exit_code": 0}]
    st, d, dt = sync()
    check(st == 200, f"the exit is applied ({st})")
    fin = wait_for(lambda: call("GET", f"/v1/jobs/{done}", admin)[1]["job"]["state"]
                   == "completed" or None, "the job completed", 10.0)
    check(bool(fin), "an exit 0 completes the job")
    gone = wait_for(lambda: not [t for t in sync(wait_s=0.3)[1].get("tasks", [])
                                 if t["job"] == done] or None, "the ended job leaves", 10.0)
    check(bool(gone), "the ended job leaves r-1's desired state")

    # output requests: one tenant's jobs hold at most 2 of a node's 4 waiting
    # ones (this agent answers none: each waits its 10 s)
    both = {}
    for ten in ("t", "u"):
        st, d = call("POST", "/v1/jobs", admin,
                     {"name": f"out-{ten}", "tenant": ten, "command": ["sleep", "100"],
                      "tasks": [{"gpus": 1, "gpu_model": "A100-80GB"}]})
        both[ten] = d["jobs"][0]["id"] if st in (200, 201) else 0
    placed = wait_for(lambda: len({t["job"] for t in sync(wait_s=0.3)[1].get("tasks", [])
                                   if t["job"] in both.values()}) == 2 or None,
                      "both jobs in r-1's desired state", 15.0)
    check(bool(placed), "a job of t and one of u run on r-1")
    state["tasks"] = [{"job": j, "rank": 0, "state": "running"} for j in both.values()]
    sync()
    got = {}

    def ask(key, job):
        got[key] = call("GET", f"/v1/jobs/{job}/logs?rank=0", admin, timeout=20)

    held = [threading.Thread(target=ask, args=(f"t{i}", both["t"])) for i in range(2)]
    for th in held:
        th.start()
    time.sleep(1.0)  # both wait for the agent now
    third = call("GET", f"/v1/jobs/{both['t']}/logs?rank=0", admin, timeout=20)
    check(third[0] == 429 and "tenant t" in json.dumps(third[1]),
          f"t's third waiting request is refused, naming the tenant: {third[0]} {third[1]}")
    other = threading.Thread(target=ask, args=("u", both["u"]))
    other.start()
    other.join(3.0)
    check(other.is_alive() or got.get("u", (0,))[0] != 429,
          f"u's request still has room and waits: {got.get('u')}")
    for th in held + [other]:
        th.join(25)
finally:
    stop_all([proc])
finish(TMP, ["log"])
