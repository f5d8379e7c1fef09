#!/usr/bin/env python3
"""Clients through a real failover (docs/ha.md): two tesserad with `ha:` on
one PostgreSQL, a real tessera-agent given both (--controller A,B) and the
tessera CLI given both ($TESSERA_URL=B,A, the standby first).

- the CLI, asking the standby first, gets its answers from the leader;
- the agent registers with the leader and runs a job's task, which ticks;
- the leader is killed with SIGKILL: the standby takes the lease, the agent
  moves to it and registers again with the running task, which the new
  leader adopts; the task ticked on through the failover, the job
  completes having started once, and the CLI follows the new leader.

Starts its own PostgreSQL with scripts/pg-test-server (exit 77, skipped,
when no PostgreSQL binaries are installed). Every wait is bounded.

    e2e_ha_test.py TESSERAD TESSERA_AGENT FAKE_NVML FIXTURE TESSERA_CLI
"""
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

TESSERAD, AGENT, FAKE, FIXTURE, CLI = sys.argv[1:6]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from harness import check, finish, free_port, http_call, pg_start, pg_stop  # noqa: E402
from harness import ADMIN_IDENTITY, with_root  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402

LEASE, RENEW = 3.0, 0.5
LOST = 30.0  # node_lost_after: the agent's own deadline is half of it, past the failover

if not (os.environ.get("PGBIN") or glob.glob("/usr/lib/postgresql/*/bin/postgres")):
    print("SKIP: no PostgreSQL binaries (scripts/install-deps installs them)")
    sys.exit(77)

TMP = tempfile.mkdtemp(prefix="tessera-e2e-ha-")
PGDIR = tempfile.mkdtemp(prefix="tessera-pg-e2e-ha.")
PORTS = [free_port(), free_port()]
URLS = [f"http://127.0.0.1:{p}" for p in PORTS]
PROCS = {}


def wait_for(pred, what, timeout=20.0):
    return harness_wait_for(pred, what, timeout, step=0.1)


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


def start(name, args, env=None):
    PROCS[name] = subprocess.Popen(args, stdout=subprocess.DEVNULL, env=env,
                                   stderr=open(os.path.join(TMP, name + ".log"), "a"))


def readyz(i):
    try:
        with urllib.request.urlopen(URLS[i] + "/readyz", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except Exception:
        return None


def lines(jid):
    out = []
    d = os.path.join(TMP, "r-1", "logs")
    for f in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if f.startswith(f"j{jid}-") and f.endswith(".out"):
            out += open(os.path.join(d, f)).read().split()
    return out


def cli(*args):
    env = dict(os.environ, TESSERA_URL=f"{URLS[1]},{URLS[0]}", TESSERA_TOKEN=ADMIN,
               HOME=TMP)
    env.pop("XDG_CONFIG_HOME", None)
    r = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60, env=env)
    return r.returncode, r.stdout, r.stderr


STORE = pg_start(PGDIR)

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
for i in (0, 1):
    write(f"ctl{i}.yaml", f"""listen: 127.0.0.1:{PORTS[i]}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}store: {STORE}
node_lost_after: {LOST:.0f}s
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 2s, backoff: 0s}}
ha: {{lease: {LEASE:g}s, renew: {RENEW:g}s, advertise_url: {URLS[i]}}}
""")

ADMIN = None
try:
    start("a", [TESSERAD, "--config", os.path.join(TMP, "ctl0.yaml")])
    wait_for(lambda: readyz(0) == 200, "controller A leads")
    start("b", [TESSERAD, "--config", os.path.join(TMP, "ctl1.yaml")])
    wait_for(lambda: readyz(1) == 503, "controller B stands by")
    ADMIN = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    st, d = http_call(URLS[0], "POST", "/v1/tokens", ADMIN, {"name": "r-1", "role": "node"})
    check(st == 201, f"a node credential ({st})")
    write("r-1.token", d["token"]["secret"] + "\n")

    rc, out, err = cli("-o", "json", "nodes")
    check(rc == 0 and json.loads(out)["nodes"][0]["name"] == "r-1",
          f"the CLI, asking the standby first, is answered by the leader ({rc}: {err.strip()})")

    env = dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=FIXTURE)
    start("r-1", [AGENT, "--controller", f"{URLS[0]},{URLS[1]}", "--node", "r-1",
                  "--token-file", os.path.join(TMP, "r-1.token"), "--state-dir",
                  os.path.join(TMP, "r-1"), "--nvml", FAKE], env=env)

    def node_up(i):
        try:
            st, d = http_call(URLS[i], "GET", "/v1/nodes/r-1", ADMIN, timeout=5)
        except Exception:
            return False
        return st == 200 and d["node"]["state"] == "up"

    wait_for(lambda: node_up(0), "the agent registers with the leader")
    st, d = http_call(URLS[0], "POST", "/v1/jobs", ADMIN, {
        "tenant": "team-a", "name": "through", "command":
        ["/bin/sh", "-c", "for i in $(seq 1 75); do echo tick; sleep 0.2; done; echo done"],
        "tasks": [{"count": 1, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}],
        "time_limit": "1h"}, {"Idempotency-Key": "e2e-ha-through"})
    check(st == 201, f"a job is accepted ({st})")
    jid = d["jobs"][0]["id"]

    def job(i):
        try:
            st, d = http_call(URLS[i], "GET", f"/v1/jobs/{jid}", ADMIN, timeout=5)
        except Exception:
            return {}
        return d["job"] if st == 200 else {}

    wait_for(lambda: job(0).get("state") == "running", "the job runs on r-1")
    wait_for(lambda: len(lines(jid)) >= 3, "its task ticks")

    t_kill = time.time()
    PROCS["a"].send_signal(signal.SIGKILL)
    PROCS["a"].wait(timeout=10)
    ticks_at_kill = len(lines(jid))
    wait_for(lambda: readyz(1) == 200, "B takes the lease", timeout=LEASE + RENEW + 15)
    t_lead = time.time()
    wait_for(lambda: node_up(1), "the agent registers with the new leader", timeout=LOST / 2)
    t_back = time.time()
    j = job(1)
    check(j.get("state") == "running", f"the new leader adopts the running task ({j.get('state')})")
    check(len(lines(jid)) > ticks_at_kill and "done" not in lines(jid),
          "the task ticked on through the failover")
    print(f"note: kill -9 of the leader to B leading {t_lead - t_kill:.2f} s, to the agent "
          f"registered with B {t_back - t_kill:.2f} s (lease {LEASE:g} s, renew {RENEW:g} s)")
    log = open(os.path.join(TMP, "r-1.log")).read()
    check(f"switching to {URLS[1]}" in log, "the agent logged its switch to B")

    rc, out, err = cli("-o", "json", "show", str(jid))
    check(rc == 0 and json.loads(out)["job"]["state"] == "running",
          f"the CLI follows the new leader ({rc}: {err.strip()})")

    wait_for(lambda: job(1).get("state") == "completed", "the job completes", timeout=40)
    ev = http_call(URLS[1], "GET", f"/v1/jobs/{jid}/events", ADMIN)[1]["events"]
    starts = [e for e in ev if e["kind"] == "started"]
    check(len(starts) == 1, f"it started once ({len(starts)})")
    check(lines(jid).count("done") == 1, "its task ran once, to its end")
    check(job(1).get("preemptions") == 0, "and was never requeued")
finally:
    procs = [p for p in PROCS.values() if p.poll() is None]
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
    pg_stop(PGDIR)
finish(TMP, ("a.log", "b.log", "r-1.log"))
