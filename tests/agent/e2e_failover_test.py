#!/usr/bin/env python3
"""A real tessera-agent given several controllers (--controller URL,URL,...)
finds the leader and follows it when it moves, its task running through:

- the list is a dead port and a standby (a stand-in here that answers every
  request 503 {"error": {"code": "standby", "leader": URL}}, the contract of
  docs/ha.md); the agent skips the dead one, follows the standby's hint to
  the real tesserad (on SQLite), registers there and runs a job's task;
- that tesserad is killed with SIGKILL and a new one takes over on another
  port with the same state (the standby now names it): the agent switches,
  registers again with its running task, the new controller adopts it, and
  the job completes having started once, its task having run once.

    e2e_failover_test.py TESSERAD TESSERA_AGENT FAKE_NVML FIXTURE
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TESSERAD, AGENT, FAKE, FIXTURE = sys.argv[1:5]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ADMIN_IDENTITY, with_root  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-e2e-failover-")
PROCS = {}
PORT1, PORT2, DEAD = free_port(), free_port(), free_port()
URL1, URL2 = f"http://127.0.0.1:{PORT1}", f"http://127.0.0.1:{PORT2}"
LOST = 20.0  # node_lost_after: far longer than the switch
STANDBY = {"leader": URL1, "agent_calls": 0}


class Standby(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if self.path.startswith("/v1/agent/"):
            STANDBY["agent_calls"] += 1
        body = json.dumps({"error": {"code": "standby", "message": "this controller is a standby",
                                     "leader": STANDBY["leader"]}}).encode()
        self.send_response(503)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = answer


standby = ThreadingHTTPServer(("127.0.0.1", 0), Standby)
standby.daemon_threads = True
threading.Thread(target=standby.serve_forever, daemon=True).start()
SURL = f"http://127.0.0.1:{standby.server_address[1]}"


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


def wait_for(pred, what, timeout=20.0):
    return harness_wait_for(pred, what, timeout, step=0.1)


write("cluster.yaml", """topology:
  levels: [leaf, node, gpu]
node_classes:
  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'r-[1-1]', class: g8, topology: {leaf: l1}}
""")
write("tenants.yaml", with_root("""tenants:
  team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
"""))
for name, port in (("t1.yaml", PORT1), ("t2.yaml", PORT2)):
    write(name, f"""listen: 127.0.0.1:{port}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}node_lost_after: {LOST:.0f}s
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 2s, backoff: 0s}}
""")


def start(name, args, env=None):
    PROCS[name] = subprocess.Popen(args, stdout=subprocess.DEVNULL, env=env,
                                   stderr=open(os.path.join(TMP, name + ".log"), "a"))


def agent_log():
    return open(os.path.join(TMP, "r-1.log")).read()


def lines(jid):
    out = []
    d = os.path.join(TMP, "r-1", "logs")
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.startswith(f"j{jid}-") and f.endswith(".out"):
            out += open(os.path.join(d, f)).read().split()
    return out


try:
    start("tesserad", [TESSERAD, "--config", os.path.join(TMP, "t1.yaml")])
    check(wait_ready(URL1), "tesserad starts")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    st, d = http_call(URL1, "POST", "/v1/tokens", admin, {"name": "r-1", "role": "node"})
    write("r-1.token", d["token"]["secret"] + "\n")

    # bad lists are refused, naming the entry
    r = subprocess.run([AGENT, "--controller", f"{SURL},ftp://x", "--node", "r-1", "--token-file",
                        os.path.join(TMP, "r-1.token"), "--state-dir", os.path.join(TMP, "bad")],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and 'URL 2 "ftp://x"' in r.stderr,
          f"a bad URL in the list is refused, named ({r.returncode}: {r.stderr.strip()})")
    # a container's writable layer and the state disk's reserve: sizes in MiB,
    # 0..2^30 (docs/tessera-agent.md)
    for opt in ("--container-write-mib", "--disk-reserve-mib", "--output-keep-mib"):
        for bad in ("-1", "lots", str((1 << 30) + 1)):
            r = subprocess.run([AGENT, "--controller", SURL, "--node", "r-1", "--token-file",
                                os.path.join(TMP, "r-1.token"), "--state-dir",
                                os.path.join(TMP, "bad"), opt, bad],
                               capture_output=True, text=True, timeout=30)
            check(r.returncode == 2 and opt in r.stderr and
                  f'"{bad}"' in r.stderr and "0..1073741824" in r.stderr,
                  f"{opt} {bad} is refused, naming it ({r.returncode}: {r.stderr.strip()})")
    for bad in ("-1", "lots", "87601"):  # hours an ended task's logs stay, 0..87600
        r = subprocess.run([AGENT, "--controller", SURL, "--node", "r-1", "--token-file",
                            os.path.join(TMP, "r-1.token"), "--state-dir",
                            os.path.join(TMP, "bad"), "--output-keep-hours", bad],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and "--output-keep-hours" in r.stderr and f'"{bad}"' in r.stderr
              and "0..87600" in r.stderr,
              f"--output-keep-hours {bad} is refused, naming it ({r.returncode}: "
              f"{r.stderr.strip()})")
    for bad in ("169.254.0.0/40", "metadata", "127.0.0.1,,10.0.0.0/8x"):
        r = subprocess.run([AGENT, "--controller", SURL, "--node", "r-1", "--token-file",
                            os.path.join(TMP, "r-1.token"), "--state-dir",
                            os.path.join(TMP, "bad"), "--registry-allow", bad],
                           capture_output=True, text=True, timeout=30)
        check(r.returncode == 2 and "--registry-allow" in r.stderr and "entry" in r.stderr,
              f"--registry-allow {bad} is refused, naming the entry ({r.returncode}: "
              f"{r.stderr.strip()})")

    env = dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=FIXTURE)
    start("r-1", [AGENT, "--controller", f"http://127.0.0.1:{DEAD},{SURL}", "--node", "r-1",
                  "--token-file", os.path.join(TMP, "r-1.token"), "--state-dir",
                  os.path.join(TMP, "r-1"), "--nvml", FAKE], env=env)

    def node_up(url):
        st, d = http_call(url, "GET", "/v1/nodes/r-1", admin, timeout=5)
        return st == 200 and d["node"]["state"] == "up"

    wait_for(lambda: node_up(URL1), "the agent finds the leader past a dead URL and a standby")
    check(STANDBY["agent_calls"] >= 1, f"it asked the standby ({STANDBY['agent_calls']} calls)")
    log = agent_log()
    check(f"http://127.0.0.1:{DEAD}/v1/agent/register: Couldn't connect to server "
          f"(no answer; switching to {SURL})" in log,
          "it logs the switch from the dead controller")
    check(f"{SURL}/v1/agent/register: HTTP 503: this controller is a standby (a standby; "
          f"switching to the leader it names, {URL1})" in log,
          "it logs the switch to the leader the standby named")

    st, d = http_call(URL1, "POST", "/v1/jobs", admin, {
        "tenant": "team-a", "name": "through", "command":
        ["/bin/sh", "-c", "for i in $(seq 1 40); do echo tick; sleep 0.2; done; echo done"],
        "tasks": [{"count": 1, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}],
        "time_limit": "1h"})
    check(st == 201, f"a job is accepted ({st})")
    jid = d["jobs"][0]["id"]

    def job(url):
        st, d = http_call(url, "GET", f"/v1/jobs/{jid}", admin, timeout=5)
        return d["job"] if st == 200 else None

    wait_for(lambda: (job(URL1) or {}).get("state") == "running", "the job runs on r-1")
    wait_for(lambda: len(lines(jid)) >= 3, "its task ticks")

    # the leader dies; a new one takes over on another port with the same state
    t_kill = time.time()
    PROCS["tesserad"].send_signal(signal.SIGKILL)
    PROCS["tesserad"].wait(timeout=10)
    STANDBY["leader"] = URL2
    ticks_at_kill = len(lines(jid))
    start("tesserad2", [TESSERAD, "--config", os.path.join(TMP, "t2.yaml")])
    check(wait_ready(URL2), "the new leader starts")
    wait_for(lambda: f"switching to the leader it names, {URL2})" in agent_log(), "the agent switches to the new leader")
    wait_for(lambda: node_up(URL2), "and registers there")
    t_back = time.time()
    j = job(URL2)
    check(j is not None and j["state"] == "running",
          f"the new leader adopts the running task ({j and j['state']})")
    check(len(lines(jid)) > ticks_at_kill and "done" not in lines(jid),
          "the task ran on through the switch")
    print(f"note: from the kill to the agent registered with the new leader: "
          f"{t_back - t_kill:.2f} s")
    wait_for(lambda: (job(URL2) or {}).get("state") == "completed", "the job completes",
             timeout=30)
    ev = http_call(URL2, "GET", f"/v1/jobs/{jid}/events", admin)[1]["events"]
    starts = [e for e in ev if e["kind"] == "started"]
    check(len(starts) == 1, f"it started once ({len(starts)})")
    check(lines(jid).count("done") == 1, "its task ran once, to its end")
    check(job(URL2)["preemptions"] == 0, "and was never requeued")
finally:
    stop_all(list(PROCS.values()))
    standby.shutdown()
finish(TMP, ("tesserad.log", "tesserad2.log", "r-1.log"))
