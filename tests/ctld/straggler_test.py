#!/usr/bin/env python3
"""Stragglers, the checkpoint environment and NCCL QoS, on the controller's
side of the agent protocol, driven by scripted agents over loopback HTTP.

    straggler_test.py TESSERAD

Two 4-GPU nodes; gangs of four 2-GPU ranks. A rank whose reported step time
stays above 1.5x the gang's median for the window is flagged; for a tenant
whose policy drains, its node is drained (with the reason shown) and the job
stopped with its checkpoint signal and requeued; resuming the node runs it
again with TESSERA_RESTARTS=1 and TESSERA_LAST_STOP=checkpointed. Tasks carry
TESSERA_CHECKPOINT_DIR and their tenant's NCCL traffic class / service level
(own entry, else an ancestor's). A tenant's own idle window reaps its idle
job while another tenant's runs on. Bad stragglers / nccl_qos /
checkpoint_dir / idle.tenants values are refused naming the key. Every wait
is bounded.
"""
import os
import subprocess
import sys
import tempfile
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ADMIN_IDENTITY, with_root  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-straggler-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def call(method, path, token, body=None, timeout=30):
    return http_call(URL, method, path, token, body, timeout=timeout)


def wait_for(pred, what, timeout=15.0):
    return harness_wait_for(pred, what, timeout)


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


write("cluster.yaml", """topology:
  levels: [leaf, node, gpu]
node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'r-[1-2]', class: g4, topology: {leaf: l1}}
""")
write("tenants.yaml", with_root("""tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 8}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 4}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 4}}}
"""))
BASE = f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 2s, backoff: 1s}}
"""
write("tesserad.yaml", BASE + """stragglers: {factor: 1.5, window: 1s, drain: [team-a]}
idle: {tenants: {team-b: 2s}}
checkpoint_dir: /shared/ckpt
nccl_qos:
  org: {tc: 106, sl: 3}
  team-b: {tc: 41}
""")

# bad values: refused, naming the key
for bad, key in [("stragglers: {factor: 0.9}\n", "stragglers.factor"),
                 ("stragglers: {window: soon}\n", "stragglers.window"),
                 ("stragglers: {drain: team-a}\n", "stragglers.drain"),
                 ("checkpoint_dir: relative/dir\n", "checkpoint_dir"),
                 ("nccl_qos: {team-a: {sl: 16}}\n", "nccl_qos.team-a.sl"),
                 ("nccl_qos: {team-a: {tc: 1, dscp: 3}}\n", "dscp"),
                 ("idle: {tenants: {team-a: soon}}\n", "idle.tenants.team-a")]:
    write("bad.yaml", BASE + bad)
    r = subprocess.run([TESSERAD, "--config", os.path.join(TMP, "bad.yaml")],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode != 0 and key in r.stderr, f"refused naming {key}: {r.stderr.strip()[:160]}")

proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "w"))
try:
    wait_ready(URL)
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    tok = {}
    for name in ("r-1", "r-2"):
        st, d = call("POST", "/v1/tokens", admin, {"name": name, "role": "node"})
        tok[name] = d["token"]["secret"]
    gens = {"r-1": 0, "r-2": 0}
    reports = {"r-1": [], "r-2": []}

    def sync(node):
        st, d = call("POST", "/v1/agent/sync", tok[node],
                     {"node": node, "gen": gens[node], "tasks": reports[node], "wait_s": 0})
        if st == 200:
            gens[node] = d["gen"]
        return d if st == 200 else {"tasks": []}

    for n in ("r-1", "r-2"):
        st, d = call("POST", "/v1/agent/register", tok[n], {"node": n, "discovery": {}, "tasks": []})
        check(st == 200, f"{n} registers")
        gens[n] = d["gen"]

    def spec(tenant, name):
        return {"tenant": tenant, "name": name, "tier": "opportunistic", "command": ["train"],
                "tasks": [{"count": 4, "gpus": 2, "cpu_milli": 1000, "memory_mib": 1024}],
                "time_limit": "1h", "checkpoint": {"signal": "SIGUSR1", "grace": "5s"}}

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}", admin)[1]["job"]

    def events(jid):
        return call("GET", f"/v1/jobs/{jid}/events", admin)[1]["events"]

    def tasks_of(jid):
        out = {}
        for n in ("r-1", "r-2"):
            for t in sync(n)["tasks"]:
                if t["job"] == jid:
                    out[t["rank"]] = (n, t)
        return out

    def report(jid, steps, state="running", outcome=None):
        """every rank of jid reports; steps: rank -> step seconds"""
        for n in ("r-1", "r-2"):
            reports[n] = []
        for r, (n, t) in tasks_of(jid).items():
            rep = {"job": jid, "rank": r, "state": state}
            if state == "running" and r in steps:
                rep["step_s"] = steps[r]
            if outcome:
                rep["outcome"] = outcome
            reports[n].append(rep)
        for n in ("r-1", "r-2"):
            sync(n)

    def env_of(t):
        return dict(e.split("=", 1) for e in t["env"])

    # team-b: flagged only; its own traffic class, no service level
    st, d = call("POST", "/v1/jobs", admin, spec("team-b", "b-gang"))
    bj = d["jobs"][0]["id"]
    ts = wait_for(lambda: len(tasks_of(bj)) == 4 and tasks_of(bj), "team-b's gang is placed")
    if ts:
        n, t = ts[0]
        env = env_of(t)
        check(env.get("TESSERA_CHECKPOINT_DIR") == f"/shared/ckpt/team-b/{bj}"
              and env.get("TESSERA_RESTARTS") == "0" and env.get("TESSERA_JOB_ID") == str(bj)
              and "TESSERA_LAST_STOP" not in env, f"checkpoint environment: {env}")
        check(t.get("nccl_tc") == 41 and "nccl_sl" not in t, f"team-b's own QoS: {t}")
    slow = {0: 1.0, 1: 1.05, 2: 0.95, 3: 2.4}
    report(bj, slow)
    time.sleep(0.5)
    report(bj, slow)
    ev = wait_for(lambda: [e for e in events(bj) if e["kind"] == "straggler"] or
                  (report(bj, slow) and False), "team-b's slow rank is flagged")
    if ev:
        check("rank 3" in ev[0]["detail"] and "flagged only" in ev[0]["detail"], ev[0]["detail"])
    nodes = [call("GET", f"/v1/nodes/{n}", admin)[1]["node"] for n in ("r-1", "r-2")]
    check(all(x["state"] == "up" for x in nodes) and job(bj)["state"] == "running",
          "flag only: no drain, the job keeps running")
    call("POST", f"/v1/jobs/{bj}/cancel", admin)
    # its ranks stop (the scripted agents say so), then it reads cancelled
    wait_for(lambda: job(bj)["state"] == "stopping", "team-b's cancelled gang is stopping")
    report(bj, {}, state="stopped", outcome="terminated")
    wait_for(lambda: job(bj)["state"] == "cancelled", "team-b's gang is cancelled")
    for n in ("r-1", "r-2"):
        reports[n] = []

    # team-a: drain and requeue from the checkpoint; QoS from its organisation
    st, d = call("POST", "/v1/jobs", admin, spec("team-a", "a-gang"))
    aj = d["jobs"][0]["id"]
    ts = wait_for(lambda: len(tasks_of(aj)) == 4 and tasks_of(aj), "team-a's gang is placed")
    if ts:
        check(ts[0][1].get("nccl_tc") == 106 and ts[0][1].get("nccl_sl") == 3,
              f"team-a inherits org's QoS: {ts[0][1].get('nccl_tc')}, {ts[0][1].get('nccl_sl')}")
        slow_node = ts[1][0]
    slow = {0: 1.0, 1: 3.0, 2: 1.1, 3: 0.9}
    report(aj, slow)
    wait_for(lambda: any(e["kind"] == "straggler" for e in events(aj)) or
             (report(aj, slow) and False), "team-a's slow rank is flagged")
    node = call("GET", f"/v1/nodes/{slow_node}", admin)[1]["node"]
    check(node["state"] == "drained" and "straggler" in (node["drain_reason"] or ""),
          f"its node is drained, saying why: {node['state']}, {node['drain_reason']}")
    stops = wait_for(lambda: [t for _, t in tasks_of(aj).values() if t["action"] == "stop"],
                     "its ranks get the checkpoint signal")
    if stops:
        check(stops[0]["signal"] == 10, "with the job's checkpoint signal")
    report(aj, {}, state="stopped", outcome="checkpointed")
    wait_for(lambda: job(aj)["state"] == "pending", "the job requeues once every rank stopped")
    check(any(e["kind"] == "requeued" and "checkpointed" in (e["detail"] or "")
              for e in events(aj)), "its requeued event says it checkpointed")
    for n in ("r-1", "r-2"):
        reports[n] = []
        sync(n)
    st, _ = call("POST", f"/v1/nodes/{slow_node}/resume", admin)
    check(st in (200, 204), f"an admin resumes the node ({st})")
    node = call("GET", f"/v1/nodes/{slow_node}", admin)[1]["node"]
    check(node["state"] == "up" and node["drain_reason"] is None, f"resumed: {node['drain_reason']}")
    ts = wait_for(lambda: len(tasks_of(aj)) == 4 and tasks_of(aj), "the job runs again")
    if ts:
        env = env_of(ts[0][1])
        check(env.get("TESSERA_RESTARTS") == "1" and env.get("TESSERA_LAST_STOP") == "checkpointed"
              and env.get("TESSERA_CHECKPOINT_DIR") == f"/shared/ckpt/team-a/{aj}",
              f"it is told to resume from its checkpoint: {env}")

    # idle policy per tenant: team-b's window is 2 s, team-a has none
    def one(tenant, name):
        sp = spec(tenant, name)
        sp["tasks"][0]["count"] = 1
        return call("POST", "/v1/jobs", admin, sp)[1]["jobs"][0]["id"]
    call("POST", f"/v1/jobs/{aj}/cancel", admin)
    wait_for(lambda: job(aj)["state"] == "stopping", "team-a's cancelled gang is stopping")
    report(aj, {}, state="stopped", outcome="terminated")
    wait_for(lambda: job(aj)["state"] == "cancelled", "team-a's gang is cancelled")
    for n in ("r-1", "r-2"):
        reports[n] = []
    ib, ia = one("team-b", "b-idle"), one("team-a", "a-idle")
    wait_for(lambda: len(tasks_of(ib)) == 1 and len(tasks_of(ia)) == 1, "both idle jobs are placed")

    def report_idle():
        for n in ("r-1", "r-2"):
            reports[n] = []
        for jid in (ib, ia):
            for r, (n, t) in tasks_of(jid).items():
                reports[n].append({"job": jid, "rank": r, "state": "running", "gpu_util": 0.0})
        for n in ("r-1", "r-2"):
            sync(n)
    wait_for(lambda: job(ib)["state"] == "stopping" or (report_idle() and False),
             "team-b's idle job is reaped after its tenant's 2 s window")
    kinds = [e["kind"] for e in events(ib)]
    check("idle-warning" in kinds and "reaped" in kinds, f"warned, then reaped: {kinds}")
    check(job(ia)["state"] == "running", "team-a's idle job runs on (no window for it)")
finally:
    stop_all([proc])
finish(TMP, ("log",))
