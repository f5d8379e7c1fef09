#!/usr/bin/env python3
"""One tenant listing its batch job's steps (64 KiB commands each) while
another tenant reads one small job: the other's read latency (a list that
renders every step's command under the lock makes every reader and the
cycle wait for it).

    steps_load.py TESSERAD NSTEPS     (bench/steps-load BUILD_DIR: 1000 steps)

One real node, r-1, has a scripted agent: the steps start 64 at a time (the
most a job runs at once) and the agent reports their tasks' ends.
"""
import os, sys, time, threading, shutil
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from harness import bench_ctld, http_call, read_unparsed
BIN = sys.argv[1]; NS = int(sys.argv[2])
p, URL, tok, TMP = bench_ctld(BIN, "sl-", ["{names: 'r-[1-1]', class: a8}"],
                              "node_lost_after: 600s\nscheduler: {interval: 0.05s}\n",
                              ["team-a", "team-b"])
try:
    st, d = http_call(URL, "POST", "/v1/tokens", tok, {"name": "r-1", "role": "node"})
    node = d["token"]["secret"]
    gen = http_call(URL, "POST", "/v1/agent/register", node, {"node": "r-1", "discovery": {"gpus": 8}})[1]["gen"]
    def sync(tasks, wait_s=0):
        global gen
        st, d = http_call(URL, "POST", "/v1/agent/sync", node, {"node": "r-1", "gen": gen, "tasks": tasks, "wait_s": wait_s})
        assert st == 200, (st, str(d)[:200])
        gen = d["gen"]
        return d
    def spec(name, tenant, env):
        return {"tenant": tenant, "name": name, "command": ["sleep", "3600"], "env": env,
                "tasks": [{"gpus": 1, "gpu_model": "A100-80GB"}]}
    small = http_call(URL, "POST", "/v1/jobs", tok, spec("small", "team-b", {}))[1]["jobs"][0]["id"]
    batch = http_call(URL, "POST", "/v1/jobs", tok, spec("batch", "team-a", {"SLURM_JOB_NAME": "b"}))[1]["jobs"][0]["id"]
    step_tok = None
    for _ in range(200):
        d = sync([], wait_s=0.2)
        step_tok = next((t.get("step_token") for t in d.get("tasks", []) if t["job"] == batch), None)
        if step_tok:
            break
    assert step_tok, "the batch job runs"
    ranks = [{"job": batch, "rank": 0, "state": "running"}, {"job": small, "rank": 0, "state": "running"}]
    sync(ranks)
    arg = "x" * 65000
    made = 0
    while made < NS:
        ids = []
        for _ in range(min(64, NS - made)):
            st, d = http_call(URL, "POST", f"/v1/jobs/{batch}/steps", step_tok, {"command": ["echo", arg]})
            assert st == 201, (st, str(d)[:200])
            ids.append(d["step"]["id"])
        made += len(ids)
        sync(ranks + [{"job": batch, "rank": 0, "step": s, "state": "exited", "exit_code": 0} for s in ids])
    stop = time.time() + 10
    lists = [0]
    def lister():
        while time.time() < stop:
            read_unparsed(URL, f"/v1/jobs/{batch}/steps", tok)
            lists[0] += 1
    ts = [threading.Thread(target=lister) for _ in range(2)]
    for t in ts: t.start()
    lat = []
    while time.time() < stop:
        q = time.time(); http_call(URL, "GET", f"/v1/jobs/{small}", tok); lat.append(time.time() - q); time.sleep(0.02)
    for t in ts: t.join()
    lat.sort()
    print(f"{BIN} {NS} steps x 64 KiB commands, 2 listers ({lists[0]} lists): other tenant's GET n={len(lat)} "
          f"p50 {1000*lat[len(lat)//2]:.1f} ms p99 {1000*lat[int(len(lat)*0.99)]:.1f} ms max {1000*lat[-1]:.1f}")
finally:
    p.kill(); p.wait(); shutil.rmtree(TMP, ignore_errors=True)
