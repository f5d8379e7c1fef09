#!/usr/bin/env python3
"""tesserad with two real tessera-agent processes on loopback, running real
processes: a 2-node gang sees its rank, world size and GPUs and completes; a
borrowing job is preempted with its checkpoint signal, acknowledges its
checkpoint and requeues; a gang whose rank fails fails as one and its other
rank is stopped; the ranks' step times (TESSERA_STEP_FILE) flag a slow rank;
a task's output is fetched live and kept once it ended.

    e2e_test.py TESSERAD TESSERA_AGENT [FAKE_NVML FIXTURE]

With the fake NVML (tests/fakes) each agent discovers eight H100s with their
UUIDs, the tasks get those UUIDs in CUDA_VISIBLE_DEVICES, and an Xid 79
written into one node's fixture drains that node and requeues its job.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

TESSERAD, AGENT = sys.argv[1], sys.argv[2]
FAKE = sys.argv[3] if len(sys.argv) > 4 and os.path.exists(sys.argv[3]) else None
FIXTURE = sys.argv[4] if FAKE else None
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ADMIN_IDENTITY, with_root  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-e2e-")
PROCS = []


PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def call(method, path, token, body=None):
    return http_call(URL, method, path, token, body)


def wait_for(pred, what, timeout=20.0):
    return harness_wait_for(pred, what, timeout, step=0.2)
open(os.path.join(TMP, "cluster.yaml"), "w").write("""topology:
  levels: [leaf, node, gpu]
node_classes:
  g4: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'r-[1-2]', class: g4, topology: {leaf: l1}}
""")
open(os.path.join(TMP, "tenants.yaml"), "w").write(with_root("""tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 16}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 8}}}
"""))
open(os.path.join(TMP, "tesserad.yaml"), "w").write(f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}node_lost_after: 10s
stragglers: {{factor: 1.5, window: 1s}}
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 5s, backoff: 1s}}
""")


def _up():
    try:
        urllib.request.urlopen(URL + "/readyz", timeout=1)
        return True
    except Exception:
        return False


def start(args, log, env=None):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, log), "w"),
                         env=env)
    PROCS.append(p)
    return p


try:
    start([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")], "tesserad.log")
    wait_ready(URL)
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    for node in ("r-1", "r-2"):
        st, d = call("POST", "/v1/tokens", admin, {"name": node, "role": "node"})
        tf = os.path.join(TMP, node + ".token")
        open(tf, "w").write(d["token"]["secret"] + "\n")
        env = dict(os.environ)
        nvml = "/nonexistent/libnvidia-ml.so.1"
        if FAKE:
            fx = json.load(open(FIXTURE))
            for g in fx["gpus"]:  # distinct UUIDs per node
                g["uuid"] = g["uuid"][:-2] + ("01" if node == "r-1" else "02")
            json.dump(fx, open(os.path.join(TMP, node + "-gpus.json"), "w"))
            env["TESSERA_FAKE_NVML_FIXTURE"] = os.path.join(TMP, node + "-gpus.json")
            nvml = FAKE
        start([AGENT, "--server", URL, "--node", node, "--token-file", tf,
               "--state-dir", os.path.join(TMP, node), "--nvml", nvml], node + ".log", env)
    wait_for(lambda: all(call("GET", f"/v1/nodes/{n}", admin)[1]["node"]["state"] == "up"
                         for n in ("r-1", "r-2")), "both agents register and their nodes come up")

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}", admin)[1]["job"]

    def spec(tenant, name, cmd, count=1, tier="guaranteed", grace="5s"):
        return {"tenant": tenant, "name": name, "tier": tier, "command": ["/bin/sh", "-c", cmd],
                "tasks": [{"count": count, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}],
                "time_limit": "1h", "checkpoint": {"signal": "SIGUSR1", "grace": grace}}

    # a 2-node gang, real processes
    st, d = call("POST", "/v1/jobs", admin, spec(
        "team-a", "hello", 'echo "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK '
        'master=$MASTER_ADDR gpus=$CUDA_VISIBLE_DEVICES"; sleep 1', count=2, tier="opportunistic"))
    hello = d["jobs"][0]["id"]
    wait_for(lambda: job(hello)["state"] == "completed", "the gang runs on both agents and completes")
    outs = []
    for node in ("r-1", "r-2"):
        for r in (0, 1):
            p = os.path.join(TMP, node, "logs", f"j{hello}-r{r}.out")
            if os.path.exists(p):
                outs.append(open(p).read().strip())
    if FAKE:
        want = sorted(f"rank={r} world=2 local=0 master=r-1 gpus=" + ",".join(
            g["uuid"][:-2] + ("01" if r == 0 else "02") for g in json.load(open(FIXTURE))["gpus"])
            for r in (0, 1))
    else:
        want = [f"rank={r} world=2 local=0 master=r-1 gpus=0,1,2,3,4,5,6,7" for r in (0, 1)]
    check(sorted(outs) == want, f"each rank saw its environment: {outs}")

    # output: the ended ranks' last output is kept with the job; a running
    # rank's is fetched from its agent
    st, d = call("GET", f"/v1/jobs/{hello}/logs?rank=1", admin)
    check(st == 200 and not d["live"] and d["data"].startswith("rank=1 world=2"),
          f"an ended rank's output is kept: {st} {d}")
    st, d = call("POST", "/v1/jobs", admin, spec("team-a", "chatty",
                 'for i in 1 2 3; do echo "line $i"; echo "oops $i" >&2; done; sleep 60',
                 tier="opportunistic"))
    chatty = d["jobs"][0]["id"]
    wait_for(lambda: job(chatty)["state"] == "running", "a chatty job runs")
    got = wait_for(lambda: (lambda r: r[1] if r[0] == 200 and "line 3" in r[1]["data"] else None)(
        call("GET", f"/v1/jobs/{chatty}/logs", admin)), "its output is fetched from its agent")
    if got:
        check(got["live"] and got["data"] == "line 1\nline 2\nline 3\n", f"live stdout: {got}")
    st, d = call("GET", f"/v1/jobs/{chatty}/logs?stream=stderr&tail=7", admin)
    check(st == 200 and d["data"] == "oops 3\n", f"the tail of its stderr: {st} {d}")
    st, d = call("GET", f"/v1/jobs/{chatty}/logs?rank=5", admin)
    check(st == 400 and "rank" in d["error"]["message"], f"a rank it does not have: {st}")
    st, d = call("GET", f"/v1/jobs/{chatty}/logs?stream=stdin", admin)
    check(st == 400 and "stream" in d["error"]["message"], f"a stream that is not one: {st}")
    call("POST", f"/v1/jobs/{chatty}/cancel", admin)
    wait_for(lambda: job(chatty)["state"] == "cancelled", "it is cancelled")
    st, d = call("GET", f"/v1/jobs/{chatty}/logs?rank=5", admin)
    check(st == 400 and "ranks 0..0" in d["error"]["message"],
          f"a rank it does not have, once it ended: 400 naming its ranks: {st} {d}")

    # a gang whose rank 1 fails: the job fails at once, and rank 0, stopped
    # as the gang stops, still reports its last output, kept with the job
    st, d = call("POST", "/v1/jobs", admin, spec(
        "team-a", "gangfail", 'if [ "$RANK" = 1 ]; then sleep 1.5; echo boom; exit 3; fi; '
        'while true; do echo r0 working; sleep 0.2; done', count=2, tier="opportunistic",
        grace="1s"))
    gf = d["jobs"][0]["id"]
    wait_for(lambda: job(gf)["state"] == "failed", "the gang fails as its rank 1 exits 3")
    got = wait_for(lambda: (lambda r: r[1] if r[0] == 200 else None)(
        call("GET", f"/v1/jobs/{gf}/logs?rank=0", admin)), "rank 0's last output is kept", 15)
    check(bool(got) and not got["live"] and "r0 working" in got["data"],
          f"the stopped rank's last output is kept once the job failed: {got}")
    outs = [e for e in call("GET", f"/v1/jobs/{gf}/events", admin)[1]["events"]
            if e["kind"] == "output" and e["detail"].startswith("rank 0 stdout")]
    check(len(outs) == 1, f"kept once: {len(outs)} output events of rank 0")

    # step times: each rank appends its own to $TESSERA_STEP_FILE; rank 1 is
    # three times slower, and the controller flags it from the agents' medians
    st, d = call("POST", "/v1/jobs", admin, spec(
        "team-a", "steps", 'if [ "$RANK" = 1 ]; then t=3.0; else t=1.0; fi; '
        'while true; do echo "$t" >> "$TESSERA_STEP_FILE"; sleep 0.1; done', count=2,
        tier="opportunistic"))
    steps = d["jobs"][0]["id"]
    ev = wait_for(lambda: [e for e in call("GET", f"/v1/jobs/{steps}/events", admin)[1]["events"]
                           if e["kind"] == "straggler"], "the slow rank's step times flag it")
    if ev:
        check("rank 1 " in ev[0]["detail"] and "step 3 s vs the gang's median 1 s"
              in ev[0]["detail"], f"rank 1 at 3 s against 1 s: {ev[0]['detail']}")
    call("POST", f"/v1/jobs/{steps}/cancel", admin)
    wait_for(lambda: job(steps)["state"] == "cancelled", "it is cancelled")

    # the controller restarts (kill -9) while a job runs on the agents: they
    # register again and report it; it keeps running and completes, once
    st, d = call("POST", "/v1/jobs", admin, spec("team-a", "survivor", "sleep 4; echo done",
                                                 count=2, tier="opportunistic"))
    sv = d["jobs"][0]["id"]
    wait_for(lambda: job(sv)["state"] == "running", "a job runs before the controller restarts")
    ctld = PROCS[0]
    ctld.send_signal(signal.SIGKILL)
    ctld.wait(timeout=10)
    PROCS[0] = start([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")], "tesserad2.log")
    wait_for(lambda: job(sv)["state"] == "completed" if _up() else False,
             "after the restart the job completes where it ran")
    starts = [e for e in call("GET", f"/v1/jobs/{sv}/events", admin)[1]["events"]
              if e["kind"] == "started"]
    check(len(starts) == 1, f"it started once ({len(starts)})")
    done = 0
    for node in ("r-1", "r-2"):
        for f in os.listdir(os.path.join(TMP, node, "logs")):
            if f.startswith(f"j{sv}-") and f.endswith(".out"):
                done += open(os.path.join(TMP, node, "logs", f)).read().count("done")
    check(done == 2, f"each rank ran to its end exactly once ({done} 'done' lines for 2 ranks)")

    # preemption with a checkpoint acknowledgement
    ckpt = ('trap \'echo checkpointing; touch "$TESSERA_CHECKPOINT_DONE"; exit 0\' USR1; '
            'while true; do sleep 0.1; done')
    st, d = call("POST", "/v1/jobs", admin, spec("team-b", "borrow", ckpt, count=2,
                                                 tier="opportunistic"))
    bj = d["jobs"][0]["id"]
    wait_for(lambda: job(bj)["state"] == "running", "a borrowing gang runs")
    time.sleep(1.5)
    st, d = call("POST", "/v1/jobs", admin, spec("team-a", "reclaim", "sleep 1"))
    aj = d["jobs"][0]["id"]
    wait_for(lambda: job(bj)["state"] == "pending" and job(bj)["preemptions"] >= 1,
             "the borrower is preempted and requeues")
    ev = call("GET", f"/v1/jobs/{bj}/events", admin)[1]["events"]
    check(any(e["kind"] == "requeued" and "checkpointed" in (e["detail"] or "") for e in ev),
          f"it acknowledged its checkpoint: {[e['kind'] + ':' + str(e['detail']) for e in ev]}")
    wait_for(lambda: job(aj)["state"] == "completed", "the guaranteed job runs on the reclaimed GPUs")
    call("POST", f"/v1/jobs/{bj}/cancel", admin)

    # a rank that fails fails the gang; the other rank is stopped
    # (a sleep of its own length, so another test's "sleep 100" is not taken for it)
    mark = f"sleep 100.{os.getpid() % 100000:05d}"
    st, d = call("POST", "/v1/jobs", admin, spec(
        "team-a", "broken", f'if [ "$RANK" = 1 ]; then exit 3; fi; {mark}', count=2,
        tier="opportunistic"))
    broken = d["jobs"][0]["id"]
    wait_for(lambda: job(broken)["state"] == "failed", "a failed rank fails the gang")
    wait_for(lambda: not subprocess.run(["pgrep", "-f", mark], capture_output=True).stdout.strip(),
             "its other rank was stopped", timeout=15)

    if FAKE:
        # idle reaping: the fake GPUs report 0 % utilisation; a job whose spec
        # says idle.timeout 3s is warned in its log, then stopped and held
        sp = spec("team-a", "idler", "sleep 100")
        sp["idle"] = {"timeout": "3s"}
        st, d = call("POST", "/v1/jobs", admin, sp)
        ij = d["jobs"][0]["id"]
        wait_for(lambda: job(ij)["state"] == "held", "an idle job is reaped and held")
        kinds = [e["kind"] for e in call("GET", f"/v1/jobs/{ij}/events", admin)[1]["events"]]
        check("idle-warning" in kinds and "reaped" in kinds, f"with a warning first: {kinds}")
        logs = "".join(open(os.path.join(TMP, n, "logs", f)).read()
                       for n in ("r-1", "r-2") for f in os.listdir(os.path.join(TMP, n, "logs"))
                       if f.startswith(f"j{ij}-") and f.endswith(".out"))
        check("GPUs have been idle" in logs, "the warning is in the task's log")
        call("POST", f"/v1/jobs/{ij}/cancel", admin)

        # an Xid 79 on r-2: the node fails, its job requeues, nothing new lands there
        st, d = call("POST", "/v1/jobs", admin, spec("team-a", "victim", "sleep 100", count=2,
                                                     tier="opportunistic"))
        vj = d["jobs"][0]["id"]
        wait_for(lambda: job(vj)["state"] == "running", "a gang runs on both nodes")
        path = os.path.join(TMP, "r-2-gpus.json")
        fx = json.load(open(path))
        fx["gpus"][3].setdefault("xids", []).append(79)
        json.dump(fx, open(path + ".tmp", "w"))
        os.rename(path + ".tmp", path)
        t0 = time.time()
        wait_for(lambda: call("GET", "/v1/nodes/r-2", admin)[1]["node"]["state"] == "drained",
                 "Xid 79 drains r-2")
        print(f"note: Xid 79 to drained in {time.time() - t0:.1f} s")
        h = call("GET", "/v1/nodes/r-2", admin)[1]["node"]["health"]
        check(h["state"] == "failed" and "79" in h["reasons"], f"r-2 says why: {h}")
        wait_for(lambda: any(e["kind"] == "requeued" for e in
                             call("GET", f"/v1/jobs/{vj}/events", admin)[1]["events"]),
                 "the gang on the failed node requeues")
finally:
    stop_all(PROCS)
finish(TMP, ("tesserad.log", "r-1.log", "r-2.log"))
