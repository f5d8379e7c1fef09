#!/usr/bin/env python3
"""The controller's side of the agent protocol (docs/agent-protocol.md), driven
by scripted agents over loopback HTTP.

    agent_protocol_test.py TESSERAD

Two real (not virtual) 4-GPU nodes: no work before an agent registers; node
credentials speak only for their node; a job runs when its agent reports it
and completes when it exits 0; a gang whose rank fails fails as one and leaves
the other node's desired state; a preempted job's ranks get a stop with the
checkpoint signal and the job requeues once they report stopped; a failed
health report drains the node and requeues its jobs; a silent agent is
declared lost after node_lost_after and its jobs requeue. Every wait is bounded.
"""
import os
import subprocess
import sys
import tempfile
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ADMIN_IDENTITY, RUN_AS, RUN_UID, USER_IDENTITY, with_root  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-agents-")


PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def call(method, path, token, body=None, timeout=30):
    return http_call(URL, method, path, token, body, timeout=timeout)


def wait_for(pred, what, timeout=15.0):
    return harness_wait_for(pred, what, timeout)
open(os.path.join(TMP, "cluster.yaml"), "w").write("""topology:
  levels: [leaf, node, gpu]
node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'r-[1-2]', class: g4, topology: {leaf: l1}}
""")
open(os.path.join(TMP, "tenants.yaml"), "w").write(with_root("""tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 8}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 4}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 4}}}
"""))
open(os.path.join(TMP, "tesserad.yaml"), "w").write(f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}node_lost_after: 3s
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 2s, backoff: 1s}}
""")


proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "w"))
try:
    wait_ready(URL)
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    tok = {}
    for name, role, tenant in [("r-1", "node", None), ("r-2", "node", None),
                               ("alice", "user", "team-a"), ("bob", "user", "team-b")]:
        st, d = call("POST", "/v1/tokens", admin, {"name": name, "role": role, "tenant": tenant,
                                                   **(USER_IDENTITY if role == "user" else {})})
        check(st == 201, f"token {name} ({role})")
        tok[name] = d["token"]["secret"]
    st, _ = call("POST", "/v1/tokens", admin, {"name": "nope", "role": "node"})
    check(st == 400, "a node credential must be named after a node")

    def spec(tenant, name, gpus=4, count=1, tier="guaranteed"):
        return {"tenant": tenant, "name": name, "tier": tier, "command": ["sleep", "100"],
                "tasks": [{"count": count, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 1024}],
                "time_limit": "1h", "checkpoint": {"signal": "SIGUSR1", "grace": "2s"}}

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}", admin)[1]["job"]

    # no agent: no work
    st, d = call("POST", "/v1/jobs", tok["alice"], spec("team-a", "one"))
    one = d["jobs"][0]["id"]
    time.sleep(0.6)
    check(job(one)["state"] == "pending", "no work lands on a node without an agent")
    st, _ = call("POST", "/v1/agent/sync", tok["alice"], {"node": "r-1", "gen": 0})
    check(st == 403, "a user token cannot use the agent endpoints")
    st, _ = call("POST", "/v1/agent/register", tok["r-1"], {"node": "r-2", "discovery": {}})
    check(st == 403, "a node credential speaks only for its node")
    st, _ = call("GET", "/v1/jobs", tok["r-1"])
    check(st == 403, "a node credential cannot use the user API")
    st, _ = call("POST", "/v1/agent/sync", tok["r-1"], {"node": "r-1", "gen": 0})
    check(st == 409, "sync before register: 409")

    gens = {"r-1": 0, "r-2": 0}
    reports = {"r-1": [], "r-2": []}

    def sync(node, health=None, wait_s=None):
        body = {"node": node, "gen": gens[node], "tasks": reports[node]}
        if health:
            body["health"] = health
        if wait_s is not None:
            body["wait_s"] = wait_s
        st, d = call("POST", "/v1/agent/sync", tok[node], body)
        if st == 200:
            gens[node] = d["gen"]
        return st, d

    st, d = call("POST", "/v1/agent/register", tok["r-1"],
                 {"node": "r-1", "discovery": {"gpus": 4}, "tasks": []})
    check(st == 200, "r-1 registers")
    gens["r-1"] = d["gen"]
    got = wait_for(lambda: [t for t in sync("r-1")[1]["tasks"] if t["job"] == one],
                   "the job appears in r-1's desired state")
    if got:
        t = got[0]
        check(t["action"] == "run" and len(t["gpus"]) == 4 and t["command"] == ["sleep", "100"]
              and t["world_size"] == 1 and t["user"] == RUN_AS and t["uid"] == RUN_UID,
              f"the task as sent (user and uid: alice's token's mapping, not its name): {t}")
    reports["r-1"] = [{"job": one, "rank": 0, "state": "running"}]
    sync("r-1")
    # a report outside the protocol is left out (tessera/agent_proto.h),
    # the rest of its sync applied, the log naming its field; before the
    # codec it read as exit code 0
    def refused():
        st, m = call("GET", "/metrics", admin)
        for ln in (m if isinstance(m, str) else "").splitlines():
            if ln.startswith("tessera_agent_reports_refused_total "):
                return int(float(ln.split()[1]))
        return -1
    before = refused()
    for bad, field in (({"state": "exited", "exit_code": "1"}, "tasks[0].exit_code: must be an integer"),
                       ({"state": "done"}, "tasks[0].state: must be one of running, exited, failed, stopped"),
                       ({"state": "failed", "signal": 1 << 40}, "tasks[0].signal: must be an integer in 1..127")):
        st, d = call("POST", "/v1/agent/sync", tok["r-1"],
                     {"node": "r-1", "gen": gens["r-1"], "tasks": [dict(job=one, rank=0, **bad)],
                      "health": {"verdict": "degraded", "reasons": ["xid 79"]}})
        check(st == 200, f"{bad}: the sync is answered, its report left out: {st}")
        check(call("GET", "/v1/nodes/r-1", admin)[1]["node"]["health"]["state"] == "degraded",
              f"{bad}: the rest of the sync (the node's health) is applied")
        call("POST", "/v1/agent/sync", tok["r-1"],
             {"node": "r-1", "gen": gens["r-1"], "tasks": [dict(job=one, rank=0, state="running")],
              "health": {"verdict": "healthy", "reasons": []}})
    check(refused() - before == 3, f"the three reports are counted: {refused() - before}")
    log = open(os.path.join(TMP, "log")).read()
    check("tasks[0].exit_code: must be an integer" in log,
          "tesserad's log names the first left-out report's field (then at most once a minute)")
    check(job(one)["state"] == "running", "a report left out changes nothing of its job")
    reports["r-1"] = [{"job": one, "rank": 0, "state": "exited", "exit_code": 0}]
    sync("r-1")
    wait_for(lambda: job(one)["state"] == "completed", "exit 0 completes the job")
    reports["r-1"] = []

    # a gang over both nodes: one rank fails, the gang fails as one
    st, d = call("POST", "/v1/agent/register", tok["r-2"],
                 {"node": "r-2", "discovery": {"gpus": 4}, "tasks": []})
    gens["r-2"] = d["gen"]
    # a member of a sync body outside the protocol is left out, the rest
    # applied (tessera/agent_proto.h ts_sync); a "tasks" that is no list is 400
    st, d = call("POST", "/v1/agent/sync", tok["r-2"],
                 {"node": "r-2", "gen": gens["r-2"], "tasks": [], "wait_s": 0,
                  "prefetch": [{"job": 1, "state": "paused"}],
                  "health": {"verdict": "degraded", "reasons": ["xid 79"]}})
    check(st == 200 and call("GET", "/v1/nodes/r-2", admin)[1]["node"]["health"]["state"]
          == "degraded", f"a body member outside the protocol is left out, the rest applied ({st})")
    check("node r-2: a member of its sync outside the agent protocol left out (the rest "
          "applied): prefetch[0].state: must be one of fetching, ready, failed"
          in open(os.path.join(TMP, "log")).read(), "tesserad's log names the member left out")
    st, _ = call("POST", "/v1/agent/sync", tok["r-2"], {"node": "r-2", "gen": 0, "tasks": {}})
    check(st == 400, f"a tasks that is not a list: 400 ({st})")
    call("POST", "/v1/agent/sync", tok["r-2"], {"node": "r-2", "gen": gens["r-2"], "tasks": [],
                                                "wait_s": 0,
                                                "health": {"verdict": "healthy", "reasons": []}})
    st, d = call("POST", "/v1/jobs", tok["alice"], spec("team-a", "gang", count=2, tier="opportunistic"))
    gang = d["jobs"][0]["id"]
    wait_for(lambda: any(t["job"] == gang for t in sync("r-1")[1]["tasks"]), "gang rank on r-1")
    wait_for(lambda: any(t["job"] == gang for t in sync("r-2")[1]["tasks"]), "gang rank on r-2")
    reports["r-1"] = [{"job": gang, "rank": 0, "state": "running"}]
    reports["r-2"] = [{"job": gang, "rank": 1, "state": "exited", "exit_code": 3}]
    sync("r-1")
    sync("r-2")
    wait_for(lambda: job(gang)["state"] == "failed", "a failed rank fails the whole gang")
    check(not any(t["job"] == gang for t in sync("r-1")[1]["tasks"]),
          "the other rank leaves r-1's desired state (its agent stops it)")
    reports = {"r-1": [], "r-2": []}

    # preemption: bob borrows both nodes, alice's guaranteed job takes one back
    st, d = call("POST", "/v1/jobs", tok["bob"], spec("team-b", "borrow", count=2, tier="opportunistic"))
    bj = d["jobs"][0]["id"]
    wait_for(lambda: job(bj)["state"] == "running", "bob's borrowing gang runs")
    reports["r-1"] = [{"job": bj, "rank": 0, "state": "running"}]
    reports["r-2"] = [{"job": bj, "rank": 1, "state": "running"}]
    sync("r-1")
    sync("r-2")
    time.sleep(1.2)
    st, d = call("POST", "/v1/jobs", tok["alice"], spec("team-a", "reclaim"))
    aj = d["jobs"][0]["id"]
    stops = wait_for(lambda: [t for t in sync("r-1")[1]["tasks"] if t["job"] == bj and t["action"] == "stop"],
                     "the victim's rank gets a stop")
    if stops:
        check(stops[0]["signal"] == 10 and stops[0]["grace_s"] == 2, f"with signal and grace: {stops[0]}")
    reports["r-1"] = [{"job": bj, "rank": 0, "state": "stopped", "outcome": "checkpointed"}]
    reports["r-2"] = [{"job": bj, "rank": 1, "state": "stopped", "outcome": "checkpointed"}]
    sync("r-1")
    sync("r-2")
    # as an agent does, each sync reports again (a report that lands while
    # the job's change is being written counts at the next one)
    wait_for(lambda: (sync("r-1", wait_s=0.2), sync("r-2", wait_s=0.2),
                      job(bj)["state"] == "pending")[-1],
             "the victim requeues once every rank stopped")
    ev = call("GET", f"/v1/jobs/{bj}/events", admin)[1]["events"]
    check(any(e["kind"] == "requeued" and "checkpointed" in (e["detail"] or "") for e in ev),
          "its requeued event says it checkpointed")
    wait_for(lambda: job(aj)["state"] == "running", "the guaranteed job runs")
    reports = {"r-1": [], "r-2": []}
    node_of_aj = job(aj)["placement"][0]["node"]
    reports[node_of_aj] = [{"job": aj, "rank": 0, "state": "running"}]

    # health: failed drains the node and requeues its jobs
    st, d = sync(node_of_aj, {"verdict": "failed", "reasons": ["xid 79: GPU has fallen off the bus"]})
    check(d.get("drained") is True, "a failed node is drained")
    wait_for(lambda: job(aj)["state"] in ("pending", "running") and job(aj)["placement"] != [] and
             any(e["kind"] == "requeued" for e in call("GET", f"/v1/jobs/{aj}/events", admin)[1]["events"]),
             "its job requeues")
    st, d = call("GET", f"/v1/nodes/{node_of_aj}", admin)
    check(d["node"]["state"] == "drained" and d["node"]["health"]["state"] == "failed"
          and "xid 79" in d["node"]["health"]["reasons"], f"the node shows why: {d['node']['health']}")
    sync(node_of_aj, {"verdict": "healthy", "reasons": []})

    # lost: r-1 stays silent past node_lost_after (3 s) while r-2 keeps syncing
    other = "r-2"
    t_end = time.time() + 5
    while time.time() < t_end:
        sync(other)
    st, d = call("GET", "/v1/nodes/r-1", admin)
    check(d["node"]["state"] == "drained" and d["node"]["health"]["state"] == "unknown",
          f"a silent agent's node is lost and drained: {d['node']['state']}, {d['node']['health']}")
    st, _ = call("POST", "/v1/agent/sync", tok["r-1"], {"node": "r-1", "gen": gens["r-1"]})
    check(st == 409, "the lost agent must register again")
finally:
    stop_all([proc])
finish(TMP, ("log",))
