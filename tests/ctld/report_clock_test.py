#!/usr/bin/env python3
"""Job ends that agents report give their GPUs back even when the write of
the end is applied after a later scheduling cycle.

    report_clock_test.py TESSERAD

An agent's report is planned at the instant it arrives, committed with the
controller's lock released, then applied. A cycle may run meanwhile at a
later instant; the scheduler's quota refuses time that runs backwards, so an
end applied with its own older instant used to leave its GPUs taken for
good (the cluster filled up with allocations of jobs that had ended). Here
every store transaction is slowed by 100 ms (TESSERAD_STORE_FAULTS
delay_ms: a slow disk, nothing fails), so that one node's report is still
being written when another node's end, applied, lets a cycle start a job
(the quota moves to that cycle's instant). Scripted agents on 4 nodes of 8
GPUs, each its own thread, run 160 single-GPU jobs that exit at once. Every
job must complete, the cluster must end with 0 GPUs allocated, and tesserad
must log no allocation it could not release. Every wait is bounded.
"""
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
from harness import ctld_files  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-clock-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
JOBS = 160
NODES = ["r-1", "r-2", "r-3", "r-4"]
DEADLINE_S = 120

ctld_files(TMP, PORT, ["{names: 'r-[1-4]', class: g8}"], "scheduler: {interval: 0.05s}\n")


def call(method, path, token, body=None):
    return http_call(URL, method, path, token, body, timeout=30)


def metric(name):
    st, txt = call("GET", "/metrics", admin)
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+]+)$", txt if st == 200 else "", re.M)
    return float(m.group(1)) if m else -1.0


env = dict(os.environ, TESSERAD_STORE_FAULTS="delay_ms=100")
log = open(os.path.join(TMP, "log"), "w")
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=log, env=env)
try:
    check(wait_ready(URL), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    secret, gens = {}, {}
    for n in NODES:
        st, d = call("POST", "/v1/tokens", admin, {"name": n, "role": "node"})
        check(st == 201, f"node credential {n}")
        secret[n] = d["token"]["secret"] if st == 201 else ""
        st, d = call("POST", "/v1/agent/register", secret[n],
                     {"node": n, "discovery": {}, "tasks": []})
        check(st == 200, f"{n} registers")
        gens[n] = d.get("gen", 0) if st == 200 else 0
    spec = {"tenant": "t", "name": "short", "tier": "opportunistic", "command": ["true"],
            "tasks": [{"gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}], "time_limit": "1h",
            "array_size": JOBS}
    st, d = call("POST", "/v1/jobs", admin, spec)
    check(st in (200, 201), f"{JOBS} single-GPU jobs submitted")
    deadline = time.time() + DEADLINE_S
    stop = threading.Event()

    def agent(n):
        """Every task it is asked to run has exited by its next report."""
        report, gen = [], gens[n]
        while not stop.is_set() and time.time() < deadline:
            try:
                st, d = call("POST", "/v1/agent/sync", secret[n],
                             {"node": n, "gen": gen, "wait_s": 0.2, "tasks": report})
            except OSError:
                st = 0
            if st == 200:
                gen = d["gen"]
                report = [{"job": t["job"], "rank": t["rank"], "state": "exited",
                           "exit_code": 0} for t in d["tasks"] if t["action"] == "run"]
            else:
                time.sleep(0.1)  # 503: the same report again

    threads = [threading.Thread(target=agent, args=(n,), daemon=True) for n in NODES]
    for t in threads:
        t.start()
    done = 0.0
    while time.time() < deadline:
        done = metric("tessera_jobs_finished_total")
        if done >= JOBS:
            break
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join(timeout=35)
    check(done == JOBS, f"all {JOBS} jobs completed within {DEADLINE_S} s (completed: "
          f"{done:.0f})")
    allocated = -1.0
    for _ in range(50):  # the last end's apply follows its write
        allocated = metric('tessera_gpus{state="allocated"}')
        if allocated == 0:
            break
        time.sleep(0.1)
    check(allocated == 0, f"no GPU is left allocated once every job ended ({allocated:.0f})")
finally:
    stop_all([proc])
    log.close()
text = open(os.path.join(TMP, "log")).read()
check("releasing its allocation" not in text, "no allocation failed to go back")
finish(TMP, ["log"])
