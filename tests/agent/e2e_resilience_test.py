#!/usr/bin/env python3
"""tesserad and real tessera-agent processes on loopback, when things break:

- an agent cut off from the controller (a TCP proxy between them is cut)
  stops its tasks before the controller declares the node lost, so the job
  requeued elsewhere never runs twice at once (each run logs a timestamp
  every 0.1 s: the cut run's last line precedes the new run's first);
- an agent killed with SIGKILL and started again adopts its running task:
  the job ends once, its task ran once, and the exit code reaches the
  controller (adoption through the task's keeper and record); a task that
  ends while no agent runs is reported with its exit status by the next one.

    e2e_resilience_test.py TESSERAD TESSERA_AGENT FAKE_NVML FIXTURE
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

TESSERAD, AGENT, FAKE, FIXTURE = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ADMIN_IDENTITY, with_root  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402
from harness import TcpProxy  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-e2e-res-")
PROCS = {}
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
LOST = 4.0  # node_lost_after


def call(method, path, token, body=None):
    return http_call(URL, method, path, token, body)


def wait_for(pred, what, timeout=20.0):
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
  team-a: {guaranteed: {gpu: {H100-80GB: 16}}}
"""))
write("tesserad.yaml", f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}node_lost_after: {LOST:.0f}s
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 2s, backoff: 0s}}
""")


def start(name, args):
    PROCS[name] = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                   stderr=open(os.path.join(TMP, name + ".log"), "a"))


def start_agent(node, url):
    env = dict(os.environ)
    fx = json.load(open(FIXTURE))
    for g in fx["gpus"]:
        g["uuid"] = g["uuid"][:-2] + ("01" if node == "r-1" else "02")
    path = os.path.join(TMP, node + "-gpus.json")
    json.dump(fx, open(path, "w"))
    env["TESSERA_FAKE_NVML_FIXTURE"] = path
    PROCS[node] = subprocess.Popen(
        [AGENT, "--server", url, "--node", node, "--token-file", os.path.join(TMP, node + ".token"),
         "--state-dir", os.path.join(TMP, node), "--nvml", FAKE],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, node + ".log"), "a"), env=env)


def lines(node, jid):
    out = []
    d = os.path.join(TMP, node, "logs")
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.startswith(f"j{jid}-") and f.endswith(".out"):
            out += open(os.path.join(d, f)).read().split()
    return out


try:
    start("tesserad", [TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")])
    wait_ready(URL)
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    for node in ("r-1", "r-2"):
        st, d = call("POST", "/v1/tokens", admin, {"name": node, "role": "node"})
        write(node + ".token", d["token"]["secret"] + "\n")
    proxy = TcpProxy(PORT)
    start_agent("r-1", f"http://127.0.0.1:{proxy.port}")
    start_agent("r-2", URL)
    wait_for(lambda: all(call("GET", f"/v1/nodes/{n}", admin)[1]["node"]["state"] == "up"
                         for n in ("r-1", "r-2")), "both agents register")

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}", admin)[1]["job"]

    def submit(name, cmd):
        st, d = call("POST", "/v1/jobs", admin, {
            "tenant": "team-a", "name": name, "command": ["/bin/sh", "-c", cmd],
            "tasks": [{"count": 1, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}],
            "time_limit": "1h", "checkpoint": {"grace": "1s"}})
        return d["jobs"][0]["id"]

    # --- cut off: r-1's agent loses the controller -------------------------
    # drain r-2 so the job lands on r-1, then resume it for the requeue
    call("POST", "/v1/nodes/r-2/drain", admin)
    ticker = submit("ticker", "while true; do date +%s.%N; sleep 0.1; done")
    wait_for(lambda: job(ticker)["state"] == "running", "the ticking job runs")
    first_node = job(ticker)["placement"][0]["node"]
    check(first_node == "r-1", f"it runs on r-1 ({first_node})")
    wait_for(lambda: len(lines("r-1", ticker)) >= 3, "r-1's task ticks")
    call("POST", "/v1/nodes/r-2/resume", admin)
    t_cut = time.time()
    proxy.cut_all()
    wait_for(lambda: call("GET", "/v1/nodes/r-1", admin)[1]["node"]["state"] == "drained",
             "the controller declares r-1 lost", timeout=LOST + 10)
    t_lost = time.time()
    wait_for(lambda: len(lines("r-2", ticker)) >= 3, "the job runs again on r-2", timeout=20)
    old, new = lines("r-1", ticker), lines("r-2", ticker)
    if old and new:
        last_old, first_new = float(old[-1]), float(new[0])
        print(f"note: cut at {t_cut:.2f}; r-1's task last ticked {last_old - t_cut:.2f} s after "
              f"the cut; declared lost after {t_lost - t_cut:.2f} s; r-2 first ticked "
              f"{first_new - t_cut:.2f} s after the cut")
        check(last_old < first_new, "the cut-off run ended before the new run began")
        check(last_old - t_cut < LOST, "and before the controller could declare r-1 lost")
    call("POST", f"/v1/jobs/{ticker}/cancel", admin)
    wait_for(lambda: job(ticker)["state"] == "cancelled", "the ticking job is cancelled")

    # --- agent restart: r-2's agent is killed and started again -------------
    jid = submit("survivor", "sleep 3; echo done; exit 7")
    wait_for(lambda: job(jid)["state"] == "running", "a job runs on r-2")
    PROCS["r-2"].send_signal(signal.SIGKILL)
    PROCS["r-2"].wait(timeout=10)
    time.sleep(1.0)
    start_agent("r-2", URL)
    wait_for(lambda: job(jid)["state"] == "failed", "after the agent's restart the job ends where "
             "it ran, with its exit code", timeout=30)
    ev = call("GET", f"/v1/jobs/{jid}/events", admin)[1]["events"]
    starts = [e for e in ev if e["kind"] == "started"]
    check(len(starts) == 1, f"it started once ({len(starts)})")
    check(any(e["kind"] == "failed" for e in ev), f"the exit code 7 reached the controller: "
          f"{[e['kind'] + ':' + str(e['detail']) for e in ev]}")
    check(lines("r-2", jid).count("done") == 1, "the task ran to its end exactly once")
    check(job(jid)["preemptions"] == 0, "and was never requeued")

    # a task that ends while no agent runs: its keeper keeps the status
    jid = submit("brief", "sleep 1; echo done")
    wait_for(lambda: job(jid)["state"] == "running", "a short job runs on r-2")
    PROCS["r-2"].send_signal(signal.SIGKILL)
    PROCS["r-2"].wait(timeout=10)
    time.sleep(2.5)  # it ends meanwhile
    start_agent("r-2", URL)
    wait_for(lambda: job(jid)["state"] == "completed", "the restarted agent reports the exit 0 "
             "that happened while no agent ran", timeout=30)
    check(lines("r-2", jid).count("done") == 1, "it ran once")
finally:
    stop_all(list(PROCS.values()))
finish(TMP, ("tesserad.log", "r-1.log", "r-2.log"))
