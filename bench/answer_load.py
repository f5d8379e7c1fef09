#!/usr/bin/env python3
"""One tenant's steps churning on a node whose answer is near its budget,
while another tenant reads one small job: the other's read latency (a node
answer rebuilt whole under the controller's lock at every step change makes
every reader and the cycle wait for it), and how long the node's syncs take.

    answer_load.py TESSERAD SECONDS     (bench/answer-load BUILD_DIR: 10 s)

One real node, r-1, has a scripted agent (this process). Tenant team-a runs
a batch job of 4 ranks there with ~600 KB of environment each (under the
640 KiB a task may carry) and keeps 64 steps on all 4 ranks running: 256
step tasks, each its rank's environment again, ~150 MB of tasks held to the
node's 32 MiB budget. For SECONDS, the agent ends one step and the script
starts another, syncing after each: every change rebuilds r-1's answer.
Tenant team-b's reader, in its own process (a parse of a 33 MB answer here
would hold this one's interpreter), GETs its job every 20 ms.
"""
import os
import re
import shutil
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from harness import LatencyReader, bench_ctld, http_call  # noqa: E402

BIN = sys.argv[1]
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
GEN = re.compile(rb'"gen"\s*:\s*(\d+)')


def main():
    p, url, tok, tmp = bench_ctld(BIN, "al-", ["{names: 'r-[1-1]', class: a8}"],
                                  "node_lost_after: 600s\nscheduler: {interval: 0.05s}\n",
                                  ["team-a", "team-b"])
    try:
        st, d = http_call(url, "POST", "/v1/tokens", tok, {"name": "r-1", "role": "node"})
        node = d["token"]["secret"]
        gen = [http_call(url, "POST", "/v1/agent/register", node,
                         {"node": "r-1", "discovery": {"gpus": 8}})[1]["gen"]]
        import json

        def sync(tasks, wait_s=0, parse=False):
            body = json.dumps({"node": "r-1", "gen": gen[0], "tasks": tasks,
                               "wait_s": wait_s}).encode()
            req = urllib.request.Request(url + "/v1/agent/sync", data=body, method="POST",
                                         headers={"Authorization": "Bearer " + node,
                                                  "Content-Type": "application/json"})
            with urllib.request.urlopen(req, timeout=120) as r:
                raw = r.read()
            gen[0] = int(GEN.search(raw).group(1))
            return json.loads(raw) if parse else len(raw)

        def job(name, tenant, count, env):
            spec = {"tenant": tenant, "name": name, "command": ["sleep", "3600"], "env": env,
                    "tasks": [{"count": count, "gpus": 1, "gpu_model": "A100-80GB"}]}
            st, d = http_call(url, "POST", "/v1/jobs", tok, spec)
            assert st in (200, 201), (st, str(d)[:300])
            return d["jobs"][0]["id"]

        small = job("small", "team-b", 1, {})
        batch = job("batch", "team-a", 4, {"SLURM_JOB_NAME": "b", "BIG": "x" * 600_000})
        step_tok, ranks = None, []
        for _ in range(200):
            d = sync([], wait_s=0.2, parse=True)
            tasks = d.get("tasks", [])
            step_tok = next((t.get("step_token") for t in tasks
                             if t["job"] == batch and t.get("step_token")), None)
            if step_tok and {small, batch} <= {t["job"] for t in tasks}:
                ranks = [{"job": t["job"], "rank": t["rank"], "state": "running"}
                         for t in tasks if t.get("step") is None]
                break
        assert step_tok and len(ranks) == 5, "both jobs run on r-1"
        sync(ranks)

        def step():
            st, d = http_call(url, "POST", f"/v1/jobs/{batch}/steps", step_tok,
                              {"command": ["sleep", "3600"]})
            assert st == 201, (st, str(d)[:300])
            return d["step"]["id"]

        live = [step() for _ in range(64)]
        size = sync(ranks)
        stop_at = time.time() + SECONDS
        other = LatencyReader(url, f"/v1/jobs/{small}", tok, stop_at)
        syncs = []
        while time.time() < stop_at:
            done = live.pop(0)
            q = time.time()
            sync(ranks + [{"job": batch, "rank": r, "step": done, "state": "exited",
                           "exit_code": 0} for r in range(4)])
            live.append(step())
            size = sync(ranks)
            syncs.append(time.time() - q)
        syncs.sort()
        print(f"{BIN}: 64 steps x 4 ranks x 600 KB env, answer {size / 1e6:.1f} MB, "
              f"{len(syncs)} step changes in {SECONDS:.0f} s (median {1000 * syncs[len(syncs) // 2]:.0f}"
              f" ms each, 2 syncs + a step start); other tenant's GET {other.summary()}")
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
