#!/usr/bin/env python3
"""Two syncs of one node at once: a report counted as the same as the last
one applied never hides a change.

    agent_races_test.py TESSERAD

A sync whose report equals the last one applied in full, with the node's
generation unmoved since, is answered on the node's own lock without being
applied (docs/agent-protocol.md). An agent that retries after a client
timeout sends the same report while its first is still being written, so
two applies of one node overlap. On a slow store (TESSERAD_STORE_FAULTS
delay_ms=1500) two real nodes run the two ranks of a gang; sync A reports
rank 0 exited 0 (its output is written, with c->mu released), and sync B
comes while that write waits:

1. B carries the same report and A's write fails (nth=5, kind=commit): A is
   undone, so the next report must be applied again. When the other rank
   exits too, the job completes (it stayed running, its GPUs held, when B
   had recorded the report as applied).
2. B says the node is degraded, A healthy: after A ends, a healthy report
   must be applied and the node take work again (it stayed drained when A
   recorded its digest against the generation B had moved).
3. A is the newer report (seq 3: rank 0 exited) and B an older one of the
   same agent (seq 2: rank 0 running), a sync the agent dropped when the
   task's end cut its long-poll short, which reached the controller's lock
   only during A's write. B must change nothing: applied, it set the rank
   running again, A then recorded its digest, every later report of the
   exit read as the same, and the gang never completed.
Every wait is bounded.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ctld_files, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-agent-races-")


def controller(name, faults):
    """A tesserad with two real 8-GPU nodes, both agents registered, and a
    2-rank gang placed one rank per node: (url, admin, tokens, job, ranks, proc)."""
    d = os.path.join(TMP, name)
    os.makedirs(d)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    conf = ctld_files(d, port, ["{names: 'r-[1-2]', class: a8}"],
                      "node_lost_after: 120s\nscheduler: {interval: 0.2s}\n")
    env = dict(os.environ, TESSERAD_STORE_FAULTS=faults)
    proc = subprocess.Popen([TESSERAD, "--config", conf],
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(d, "log"), "w"), env=env)
    check(wait_ready(url, 30), f"{name}: tesserad is ready")
    admin = open(os.path.join(d, "state", "admin.token")).read().strip()
    tok = {}
    for n in ("r-1", "r-2"):  # writes 1 and 2
        st, b = http_call(url, "POST", "/v1/tokens", admin, {"name": n, "role": "node"})
        tok[n] = b["token"]["secret"] if st == 201 else ""
        st, _ = http_call(url, "POST", "/v1/agent/register", tok[n],
                          {"node": n, "discovery": {"gpus": 8}})
        check(st == 200, f"{name}: {n} registers ({st})")
    # write 3: the submission; write 4: the cycle's start
    st, b = http_call(url, "POST", "/v1/jobs", admin,
                      {"name": "gang", "tenant": "t", "command": ["sleep", "100"],
                       "tasks": [{"count": 2, "gpus": 8, "gpu_model": "A100-80GB"}]})
    jid = b["jobs"][0]["id"] if st in (200, 201) else 0
    ranks = {}

    def placed():
        for n in ("r-1", "r-2"):
            st, b = sync(url, tok, n, [])
            for t in b.get("tasks", []) if st == 200 else []:
                if t["job"] == jid:
                    ranks[n] = t["rank"]
        return len(ranks) == 2 or None

    wait_for(placed, f"{name}: the gang placed on both nodes", 30)
    for n in ranks:
        st, _ = sync(url, tok, n, [{"job": jid, "rank": ranks[n], "state": "running"}])
        check(st == 200, f"{name}: {n} reports its rank running ({st})")
    return url, admin, tok, jid, ranks, proc


def sync(url, tok, node, tasks, verdict="healthy", seq=None):
    body = {"node": node, "gen": 0, "tasks": tasks, "wait_s": 0,
            "health": {"verdict": verdict, "reasons": [] if verdict == "healthy" else ["xid 79"]}}
    if seq is not None:
        body["seq"] = seq
    return http_call(url, "POST", "/v1/agent/sync", tok[node], body, timeout=30)


def overlap(url, tok, a_tasks, b_tasks, b_verdict="healthy", a_seq=None, b_seq=None):
    """Sync A of r-1, and 0.4 s later (A's write waits 1.5 s) sync B: their answers."""
    out = {}
    th = threading.Thread(target=lambda: out.update(a=sync(url, tok, "r-1", a_tasks, seq=a_seq)))
    th.start()
    time.sleep(0.4)
    out["b"] = sync(url, tok, "r-1", b_tasks, b_verdict, seq=b_seq)
    th.join(30)
    return out.get("a", (0, {}))[0], out["b"][0]


procs = []
try:
    # 1. A's write (the 5th) fails while B, the same report, finds the rank exited
    url, admin, tok, jid, ranks, p = controller("undo", "nth=5,kind=commit,delay_ms=1500")
    procs.append(p)
    exited = [{"job": jid, "rank": ranks.get("r-1", 0), "state": "exited", "exit_code": 0,
               "output": {"stdout": "bye\n"}}]
    sa, sb = overlap(url, tok, exited, exited)
    check(sa == 503, f"undo: A's write fails (503; got {sa})")
    check(sb == 200, f"undo: B is answered ({sb})")
    for _ in range(2):  # the agent reports its rank exited, again
        sync(url, tok, "r-1", exited)
    sync(url, tok, "r-2", [{"job": jid, "rank": ranks.get("r-2", 1), "state": "exited",
                            "exit_code": 0}])
    done = wait_for(lambda: sync(url, tok, "r-1", exited) and
                    http_call(url, "GET", f"/v1/jobs/{jid}", admin)[1]["job"]["state"]
                    == "completed" or None, "undo: the gang completes", 15.0)
    check(bool(done), "undo: once both ranks exited 0 the gang completes (not left running)")
    stop_all([p])

    # 2. B says degraded while A (healthy) is written; then healthy again
    url, admin, tok, jid, ranks, p = controller("health", "delay_ms=1500")
    procs.append(p)
    exited = [{"job": jid, "rank": ranks.get("r-1", 0), "state": "exited", "exit_code": 0,
               "output": {"stdout": "bye\n"}}]
    sa, sb = overlap(url, tok, exited, exited, "degraded")
    check(sa == 200 and sb == 200, f"health: both syncs answered ({sa}, {sb})")

    def up_again():
        sync(url, tok, "r-1", exited)
        st, b = http_call(url, "GET", "/v1/nodes/r-1", admin)
        return st == 200 and b["node"]["state"] == "up" or None

    check(bool(wait_for(up_again, "health: r-1 up again", 15.0)),
          "health: a healthy report after the degraded one brings r-1 back")
    stop_all([p])

    # 3. an older report (B: running) lands during the newer one's write (A: exited)
    url, admin, tok, jid, ranks, p = controller("stale", "delay_ms=1500")
    procs.append(p)
    r1 = ranks.get("r-1", 0)
    exited = [{"job": jid, "rank": r1, "state": "exited", "exit_code": 0,
               "output": {"stdout": "bye\n"}}]
    # the report before B's is not B's (as when B is the first to say the
    # rank runs): B is not taken for the same report again and skipped
    sync(url, tok, "r-1", [], seq=1)
    sa, sb = overlap(url, tok, exited, [{"job": jid, "rank": r1, "state": "running"}],
                     a_seq=3, b_seq=2)
    check(sa == 200 and sb == 200, f"stale: both syncs answered ({sa}, {sb})")
    sync(url, tok, "r-1", exited, seq=4)  # the agent goes on reporting the exit
    sync(url, tok, "r-2", [{"job": jid, "rank": ranks.get("r-2", 1), "state": "exited",
                            "exit_code": 0}], seq=5)
    done = wait_for(lambda: http_call(url, "GET", f"/v1/jobs/{jid}", admin)[1]["job"]["state"]
                    == "completed" or None, "stale: the gang completes", 15.0)
    check(bool(done), "stale: the older report did not set the exited rank running again; "
          "once both ranks exited 0 the gang completes")
finally:
    stop_all(procs)
finish(TMP, [os.path.join(d, "log") for d in ("undo", "health", "stale")])
