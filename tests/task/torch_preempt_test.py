#!/usr/bin/env python3
"""Real PyTorch training through real preemptions: tesserad and two real
tessera-agent processes (fake NVML: eight H100s each) on loopback run
tests/task/train_job.py, which uses the task library (python/tessera_task).

  1. graceful: a borrowing job is preempted mid-run by guaranteed work; on
     the checkpoint signal it saves with torch.save and acknowledges; it is
     requeued (backoff 0), resumes from its checkpoint and finishes. Its final
     parameters and loss curve are bit-identical to an uninterrupted run of
     the same job, no step is computed twice, and the time from the signal
     to its process running again is measured (target under 5 s).
  2. killed without grace (checkpoint.grace 0, the job does not save on the
     signal): it resumes from its last periodic checkpoint; the steps lost
     are exactly those since that checkpoint, and the result is again
     bit-identical.
  3. a 2-rank job whose rank 1 is slowed: the step times the library
     reports flag rank 1 as a straggler.

    torch_preempt_test.py TESSERAD TESSERA_AGENT FAKE_NVML FIXTURE

Run it with the Python that has Debian's python3-torch (/usr/bin/python3,
installed by scripts/install-deps). Without torch it FAILS saying so: it
never skips. Every wait is bounded.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
try:
    import torch
except ImportError as e:
    print(f"FAIL: {sys.executable} cannot import torch ({e}): this test needs Debian's "
          "python3-torch; run scripts/install-deps", flush=True)
    sys.exit(1)

TESSERAD, AGENT, FAKE, FIXTURE = sys.argv[1:5]
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ADMIN_IDENTITY, with_root  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-torch-")
PROCS = []
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
JOB = os.path.join(HERE, "train_job.py")
STEPS = 3000
ENV = {"PYTHONPATH": os.path.abspath(os.path.join(ROOT, "python")), "OMP_NUM_THREADS": "1"}


def call(method, path, token, body=None):
    return http_call(URL, method, path, token, body)


def wait_for(pred, what, timeout=30.0):
    return harness_wait_for(pred, what, timeout, step=0.1)


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


write("cluster.yaml", """topology:
  levels: [leaf, node, gpu]
node_classes:
  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'r-[1-2]', class: g8, topology: {leaf: l1}}
""")
write("tenants.yaml", with_root("""tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 16}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 16}}}
      team-b: {}
"""))
write("tesserad.yaml", f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}checkpoint_dir: {TMP}/ckpt
node_lost_after: 10s
stragglers: {{factor: 1.5, window: 1s}}
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 20s, backoff: 0s}}
""")


def start(args, log, env=None):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, log), "w"),
                         env=env)
    PROCS.append(p)
    return p


def progress(tenant, jid, rank=0):
    """The job's progress lines (train_job.py), [] before it wrote any."""
    path = os.path.join(TMP, "ckpt", tenant, str(jid), f"progress-r{rank}.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.endswith("\n")]


def steps_done(lines):
    return max([ln["step"] for ln in lines if ln["event"] == "step"], default=0)


def same_result(path, base, what):
    got = torch.load(path)
    same_params = (got["model"].keys() == base["model"].keys() and
                   all(torch.equal(got["model"][k], base["model"][k]) for k in base["model"]))
    check(same_params, f"{what}: final parameters bit-identical to the uninterrupted run")
    check(got["losses"] == base["losses"],
          f"{what}: loss curve identical ({len(got['losses'])} vs {len(base['losses'])} steps)")


FIGURES = {}
try:
    # the uninterrupted run of the same job, outside Tessera
    base_out = os.path.join(TMP, "base.pt")
    env = dict(os.environ, **ENV, TESSERA_CHECKPOINT_DIR=os.path.join(TMP, "base"))
    for v in ("TESSERA_RESTARTS", "TESSERA_CHECKPOINT_DONE", "TESSERA_STEP_FILE"):
        env.pop(v, None)
    r = subprocess.run([sys.executable, JOB, "--steps", str(STEPS), "--out", base_out], env=env,
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, f"the uninterrupted run completes: {r.stderr[-500:]}")
    base = torch.load(base_out)
    check(len(base["losses"]) == STEPS and base["losses"][-1] < base["losses"][0] / 10,
          f"it trains: loss {base['losses'][0]:.3f} -> {base['losses'][-1]:.4f}")

    start([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")], "tesserad.log")
    wait_ready(URL)
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    for node in ("r-1", "r-2"):
        st, d = call("POST", "/v1/tokens", admin, {"name": node, "role": "node"})
        tf = os.path.join(TMP, node + ".token")
        write(node + ".token", d["token"]["secret"] + "\n")
        fx = json.load(open(FIXTURE))
        for g in fx["gpus"]:
            g["uuid"] = g["uuid"][:-2] + ("01" if node == "r-1" else "02")
        write(node + "-gpus.json", json.dumps(fx))
        aenv = dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=os.path.join(TMP, node + "-gpus.json"))
        start([AGENT, "--server", URL, "--node", node, "--token-file", tf,
               "--state-dir", os.path.join(TMP, node), "--nvml", FAKE], node + ".log", aenv)
    wait_for(lambda: all(call("GET", f"/v1/nodes/{n}", admin)[1]["node"]["state"] == "up"
                         for n in ("r-1", "r-2")), "both agents register and their nodes come up")

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}", admin)[1]["job"]

    def events(jid):
        return call("GET", f"/v1/jobs/{jid}/events", admin)[1]["events"]

    def submit(tenant, name, args, count=1, tier="opportunistic", grace="20s", command=None):
        st, d = call("POST", "/v1/jobs", admin, {
            "tenant": tenant, "name": name, "tier": tier,
            "command": command or [sys.executable, JOB] + args, "env": ENV,
            "tasks": [{"count": count, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}],
            "time_limit": "1h", "checkpoint": {"signal": "SIGUSR1", "grace": grace}})
        check(st in (200, 201), f"{name} is accepted: {st} {d if st not in (200, 201) else ''}")
        return d["jobs"][0]["id"]

    def preempt_mid_run(jid, at_step, name):
        """Guaranteed work needing both nodes, once the job passed at_step."""
        wait_for(lambda: steps_done(progress("team-b", jid)) >= at_step,
                 f"{name}: the job trains past step {at_step}")
        return submit("team-a", name + "-reclaim", [], count=2, tier="guaranteed",
                      command=["/bin/sh", "-c", "sleep 0.5"])

    # 1. graceful preemption
    out1 = os.path.join(TMP, "graceful.pt")
    g = submit("team-b", "graceful", ["--steps", str(STEPS), "--out", out1,
                                      "--step-sleep", "0.003"])
    rid = preempt_mid_run(g, 600, "graceful")
    wait_for(lambda: job(g)["state"] == "completed", "graceful: the job finishes", timeout=120)
    check(job(rid)["state"] == "completed", "graceful: the guaranteed work ran")
    ev = events(g)
    check(any(e["kind"] == "requeued" and "checkpointed" in (e["detail"] or "") for e in ev),
          f"graceful: preempted and requeued, checkpoint acknowledged: "
          f"{[e['kind'] + ':' + str(e['detail']) for e in ev]}")
    lines = progress("team-b", g)
    starts = [ln for ln in lines if ln["event"] == "start"]
    sig = [ln for ln in lines if ln["event"] == "signal"]
    check(len(starts) == 2 and len(sig) == 1, f"graceful: two runs, one checkpoint signal: {lines[:1]}"
          f" starts={starts} signals={sig}")
    if len(starts) == 2 and len(sig) == 1:
        s = sig[0]["step"]
        check(0 < s < STEPS, f"graceful: preempted mid-run, at step {s}")
        check(starts[1]["run"] == 1 and starts[1]["from"] == s and
              starts[1]["last_stop"] == "checkpointed",
              f"graceful: the second run resumes from step {s} (TESSERA_RESTARTS=1, "
              f"TESSERA_LAST_STOP=checkpointed): {starts[1]}")
        n = sum(1 for ln in lines if ln["event"] == "step")
        check(n == STEPS, f"graceful: no step computed twice ({n} steps for {STEPS})")
        FIGURES["signal_to_save_s"] = sig[0]["saved"] - sig[0]["at"]
        FIGURES["signal_to_running_again_s"] = starts[1]["t"] - sig[0]["at"]
        FIGURES["signal_to_training_again_s"] = starts[1]["ready"] - sig[0]["at"]
        # of which the guaranteed work's own run (its started and finished events)
        rt = {e["kind"]: e.get("time") for e in events(rid)}
        if rt.get("started") and rt.get("finished"):
            FIGURES["signal_to_reclaim_start_s"] = rt["started"] - sig[0]["at"]
            FIGURES["reclaim_ran_s"] = rt["finished"] - rt["started"]
            FIGURES["reclaim_end_to_running_again_s"] = starts[1]["t"] - rt["finished"]
        check(FIGURES["signal_to_running_again_s"] < 5.0,
              f"graceful: signal to running again in {FIGURES['signal_to_running_again_s']:.2f} s"
              " (target < 5 s)")
    same_result(out1, base, "graceful")

    # 2. killed without grace: resumes from the last periodic checkpoint
    out2 = os.path.join(TMP, "killed.pt")
    period = 250
    k = submit("team-b", "killed", ["--steps", str(STEPS), "--out", out2, "--step-sleep",
                                    "0.003", "--period", str(period), "--on-signal", "ignore"],
               grace="0s")
    rid2 = preempt_mid_run(k, 700, "killed")
    wait_for(lambda: job(k)["state"] == "completed", "killed: the job finishes", timeout=120)
    check(job(rid2)["state"] == "completed", "killed: the guaranteed work ran")
    lines = progress("team-b", k)
    starts = [i for i, ln in enumerate(lines) if ln["event"] == "start"]
    check(len(starts) == 2, f"killed: two runs ({len(starts)})")
    if len(starts) == 2:
        first, second = lines[:starts[1]], lines[starts[1]]
        last = steps_done(first)
        resumed = second["from"]
        lost = last - resumed
        expect = (last // period) * period
        # a kill during the save at a period boundary leaves the one before
        check(resumed == expect or (last % period == 0 and resumed == last - period),
              f"killed: resumed from the last periodic checkpoint (step {resumed}; "
              f"last step done {last}, period {period})")
        check(second["last_stop"] in ("terminated", "killed"),
              f"killed: TESSERA_LAST_STOP says it was not checkpointed: {second['last_stop']}")
        n = sum(1 for ln in lines if ln["event"] == "step")
        check(n == STEPS + lost, f"killed: lost steps = steps since that checkpoint = {lost} "
              f"({n} computed for {STEPS})")
        FIGURES["killed_lost_steps"] = lost
        FIGURES["killed_last_step"] = last
    same_result(out2, base, "killed")

    # 3. two ranks, rank 1 slowed: the step times flag it
    sj = submit("team-a", "straggle", ["--steps", "100000", "--out", os.path.join(TMP, "s.pt"),
                                       "--step-sleep", "0.002", "--slow-rank", "1",
                                       "--slow-sleep", "0.008"], count=2, tier="guaranteed")
    ev = wait_for(lambda: [e for e in events(sj) if e["kind"] == "straggler"],
                  "straggler: the slowed rank's reported step times flag it", timeout=40)
    if ev:
        check("rank 1 " in ev[0]["detail"], f"straggler: rank 1 is named: {ev[0]['detail']}")
        FIGURES["straggler_detail"] = ev[0]["detail"]
    call("POST", f"/v1/jobs/{sj}/cancel", admin)
    wait_for(lambda: job(sj)["state"] == "cancelled", "straggler: cancelled")
finally:
    stop_all(PROCS)
print("figures:", json.dumps(FIGURES))
finish(TMP, ("tesserad.log", "r-1.log", "r-2.log"))
