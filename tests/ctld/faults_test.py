#!/usr/bin/env python3
"""tesserad under injected store failures (docs/store.md "Fault injection").

    faults_test.py TESSERAD [sweep|scenarios] [STORE_URL]

tesserad built for tests reads TESSERAD_STORE_FAULTS (nth=N, every=N,
kind=io|full|drop|commit). Under it, what must hold: every write that failed
answers 503 to its client (an HTTP client or an agent), the controller never
exits, memory stays equal to the store (a job's state as the store has it
and as the controller holds it agree, and a running job has its placement),
and a restart without faults shows exactly what was acknowledged: every
acknowledged job and action is there, and no refused action happened.

scenarios: the API and agent-protocol paths with every write failing (cancel
and requeue of a running job, an agent's job end, submission), then with
every other write failing until each report gets through; on PostgreSQL also
a dropped session and failed COMMITs.
sweep: the API scenario with every Nth write failing for N in 1..50, each on a
fresh store, each followed by a restart that checks what was acknowledged.
Every wait is bounded; the sweep prints how many controllers crashed (0).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

TESSERAD = sys.argv[1]
MODE = sys.argv[2] if len(sys.argv) > 2 else "scenarios"
PG = sys.argv[3] if len(sys.argv) > 3 else os.environ.get("TS_TEST_PG_URL")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import FAILS, check, free_port, http_call, wait_for  # noqa: E402
from harness import ADMIN_IDENTITY  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-faults-")
SWEEP_MAX = 50
SWEEP_BUDGET_S = 240  # the sweep stops early (and says so) past this

CLUSTER = """topology:
  levels: [leaf, node, gpu]
node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
  a4: {gpu_model: A100-40GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'v-[1-2]', class: g4, topology: {leaf: lv}}
  - {name: r-1, class: a4, topology: {leaf: lr}}
"""
TENANTS = """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 8, A100-40GB: 4}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8, A100-40GB: 4}}}
"""
VIRTUAL_GPUS = 8


def pg_database(name):
    """A fresh database on the PostgreSQL server of PG; its URL."""
    base = PG.rsplit("/", 1)[0]
    for sql in (f"DROP DATABASE IF EXISTS {name}", f"CREATE DATABASE {name}"):
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", "-c", "SET client_min_messages "
                        "= warning", "-c", sql, PG], check=True, stdout=subprocess.DEVNULL)
    return f"{base}/{name}"


class Ctl:
    """One store (a folder, and a database on PostgreSQL) and the tesserad
    processes started on it one after the other."""

    def __init__(self, name):
        self.dir = os.path.join(TMP, name)
        os.makedirs(self.dir, mode=0o700)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.store = pg_database("tessera_faults_" + name.replace("-", "_")) if PG else None
        for f, text in (("cluster.yaml", CLUSTER), ("tenants.yaml", TENANTS)):
            open(os.path.join(self.dir, f), "w").write(text)
        open(os.path.join(self.dir, "tesserad.yaml"), "w").write(
            f"listen: 127.0.0.1:{self.port}\ncluster: cluster.yaml\ntenants: tenants.yaml\n"
            "virtual_nodes: ['v-*']\nstate_dir: state\nnode_lost_after: 60s\n"
            "limits: {requests_per_s: 100000, burst: 100000}\n" + ADMIN_IDENTITY +
            "scheduler: {interval: 0.1s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 1s, backoff: 1s}\n")
        self.proc = None
        self.admin = None
        self.crashed = False

    def log(self):
        return os.path.join(self.dir, "tesserad.log")

    def start(self, faults=""):
        env = dict(os.environ)
        env.pop("TESSERAD_STORE_FAULTS", None)
        if faults:
            env["TESSERAD_STORE_FAULTS"] = faults
        args = [TESSERAD, "--config", os.path.join(self.dir, "tesserad.yaml")]
        if self.store:
            args += ["--store", self.store]
        self.proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log(), "ab"))
        deadline = time.time() + 30
        while time.time() < deadline and self.proc.poll() is None:
            try:
                with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                time.sleep(0.05)
        check(self.proc.poll() is None, f"tesserad starts (faults: {faults or 'none'})")
        if self.admin is None:
            self.admin = open(os.path.join(self.dir, "state", "admin.token")).read().strip()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM; records a crash if it had exited by itself."""
        if not self.alive():
            self.crashed = True
            check(False, f"tesserad still runs (exit status {self.proc.returncode})")
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            check(False, "tesserad stops within 20 s of SIGTERM")
        log = open(self.log(), errors="replace").read()
        check("Sanitizer" not in log and "runtime error" not in log,
              "no sanitizer report in the log")

    def call(self, method, path, body=None, token=None, headers=None):
        try:
            return http_call(self.url, method, path, token or self.admin, body,
                             headers=headers, timeout=30)
        except Exception as e:  # a refused connection: the controller is gone
            return 0, str(e)

    def close(self):
        if self.alive():
            self.stop()
        if self.store:
            subprocess.run(["psql", "-q", PG, "-c",
                            f"DROP DATABASE IF EXISTS {self.store.rsplit('/', 1)[1]}"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def spec(name, gpus=4, duration="60s", model="H100-80GB", **kw):
    s = {"tenant": "team-a", "name": name, "tier": "guaranteed",
         "tasks": [{"count": 1, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 1024,
                    "gpu_model": model}],
         "time_limit": "1h", "duration": duration, "command": ["true"]}
    s.update(kw)
    return s


def consistent(ctl, ids, what):
    """The store's state of each job (GET) equals the controller's (explain),
    a running or stopping job has its placement, and the virtual nodes are
    not over-committed."""
    def agree():
        bad = []
        gpus = 0
        for jid in ids:
            st, d = ctl.call("GET", f"/v1/jobs/{jid}")
            st2, e = ctl.call("GET", f"/v1/jobs/{jid}/explain")
            if st != 200 or st2 != 200:
                bad.append(f"{jid}: GET {st}, explain {st2}")
                continue
            j = d["job"]
            if j["state"] != e["state"]:
                bad.append(f"{jid}: store {j['state']}, memory {e['state']}")
            if j["state"] in ("running", "stopping"):
                if not j.get("placement"):
                    bad.append(f"{jid}: {j['state']} without a placement")
                gpus += j["gpus"]
        if gpus > VIRTUAL_GPUS:
            bad.append(f"{gpus} GPUs running on {VIRTUAL_GPUS}")
        return bad
    bad = agree()
    deadline = time.time() + 3
    while bad and time.time() < deadline:  # a change between the two reads
        time.sleep(0.1)
        bad = agree()
    check(not bad, f"{what}: memory equals the store, no job runs without its allocation "
                   f"{bad[:3] if bad else ''}")


def api_scenario(ctl, key):
    """Submissions and actions on virtual nodes, each tried up to three times;
    returns the ledger of what was acknowledged and refused."""
    led = {"ids": {}, "acked": [], "refused": [], "n503": 0, "bad": []}

    def note(st, what):
        if st == 503:
            led["n503"] += 1
        elif st == 0 or st >= 500:
            led["bad"].append(f"{what}: {st}")

    def submit(name, **kw):
        body = spec(name, **kw)
        for attempt in range(3):
            st, d = ctl.call("POST", "/v1/jobs", body,
                             headers={"Idempotency-Key": f"{key}-{name}"})
            note(st, f"submit {name}")
            if st in (200, 201):
                if attempt > 0 and st == 200:
                    led["bad"].append(f"submit {name}: a 503 answer was stored after all")
                led["ids"][name] = [j["id"] for j in d["jobs"]]
                return
            if st != 503:
                led["bad"].append(f"submit {name}: {st} {d}")
                return

    def act(name, action):
        if name not in led["ids"]:
            return
        jid = led["ids"][name][0]
        for _ in range(3):
            st, d = ctl.call("POST", f"/v1/jobs/{jid}/{action}")
            note(st, f"{action} {name}")
            if st == 200:
                led["acked"].append((name, action))
                return
            if st == 409:
                return
            if st != 503:
                led["bad"].append(f"{action} {name}: {st}")
                return
        led["refused"].append((name, action))

    submit("a")
    submit("b")
    submit("c")
    wait_for(lambda: not ctl.alive() or all(
        ctl.call("GET", f"/v1/jobs/{led['ids'][n][0]}")[1].get("job", {}).get("state") != "pending"
        for n in ("a", "b") if n in led["ids"]), "a and b leave pending", timeout=3)
    # the 1-GPU jobs after a and b run: in a split first level (team-a's
    # backlog deep against its 8 GPUs) they would go first, fewest GPUs first
    submit("d", gpus=1, duration="1s")
    submit("arr", gpus=1, duration="30s", array_size=3)
    act("c", "hold")
    act("c", "release")
    act("c", "hold")
    act("arr", "cancel")
    act("a", "requeue")
    act("b", "cancel")
    act("d", "cancel")
    time.sleep(0.3)  # a few cycles under faults
    return led


def check_ledger(ctl, led, what):
    """After a restart without faults: what was acknowledged is there."""
    ids = [i for v in led["ids"].values() for i in v]
    for name, v in led["ids"].items():
        for jid in v:
            st, _ = ctl.call("GET", f"/v1/jobs/{jid}")
            if st != 200:
                check(False, f"{what}: acknowledged job {name} ({jid}) survives a restart")
    state = {}
    for name, v in led["ids"].items():
        st, d = ctl.call("GET", f"/v1/jobs/{v[0]}")
        state[name] = d["job"]["state"] if st == 200 else None
    acked = set(led["acked"])
    last_hold = [a for n, a in led["acked"] if n == "c" and a in ("hold", "release")]
    wrong = []
    for name, action in acked:
        if action == "cancel" and state.get(name) != "cancelled":
            wrong.append(f"{name} cancel acknowledged, now {state.get(name)}")
    if last_hold and last_hold[-1] == "hold" and state.get("c") != "held":
        wrong.append(f"c hold acknowledged last, now {state.get('c')}")
    for name, action in led["refused"]:
        if (name, action) in acked:
            continue
        if action == "cancel" and state.get(name) == "cancelled":
            wrong.append(f"{name}: cancel refused (503) yet cancelled")
    if ("a", "requeue") in acked:
        st, d = ctl.call("GET", f"/v1/jobs/{led['ids']['a'][0]}/events")
        if st != 200 or not any(e["kind"] == "requeue" for e in d.get("events", [])):
            wrong.append("a: requeue acknowledged, no requeue event")
    check(not wrong, f"{what}: a restart shows what was acknowledged {wrong[:3] if wrong else ''}")
    consistent(ctl, ids, what + " after the restart")


def sweep():
    crashes = 0
    n503 = 0
    t0 = time.time()
    done = 0
    for n in range(1, SWEEP_MAX + 1):
        if time.time() - t0 > SWEEP_BUDGET_S:
            print(f"sweep: stopped after N={n - 1} (time budget {SWEEP_BUDGET_S} s)")
            break
        kind = ("io", "full", "commit")[n % 3]
        ctl = Ctl(f"sweep{n}")
        try:
            ctl.start()
            ctl.stop()  # the admin token exists; now the same store under faults
            ctl.start(f"every={n},kind={kind}")
            led = api_scenario(ctl, f"s{n}")
            n503 += led["n503"]
            check(not led["bad"], f"every={n},kind={kind}: every failed write answered 503 "
                                  f"{led['bad'][:3] if led['bad'] else ''}")
            ids = [i for v in led["ids"].values() for i in v]
            if ctl.alive():
                consistent(ctl, ids, f"every={n},kind={kind}")
            ctl.stop()
            crashes += ctl.crashed
            ctl.start()
            check_ledger(ctl, led, f"every={n},kind={kind}")
            ctl.stop()
            done += 1
        finally:
            ctl.close()
            if not FAILS:
                shutil.rmtree(ctl.dir, ignore_errors=True)
    print(f"sweep: N in 1..{done}, {n503} answers 503, {crashes} crashes, "
          f"{time.time() - t0:.0f} s")
    check(crashes == 0, "no controller crashed in the sweep")
    check(done >= 10, "the sweep covered at least N in 1..10")
    check(n503 > 0, "the sweep injected failures")


def agent_scenarios():
    ctl = Ctl("agent")
    ctl.start()
    st, d = ctl.call("POST", "/v1/tokens", {"name": "r-1", "role": "node"})
    check(st == 201, "node token")
    node = d["token"]["secret"]
    gen = [0]
    reports = []

    def register():
        st, d = ctl.call("POST", "/v1/agent/register", {"node": "r-1", "discovery": {"gpus": 4},
                                                        "tasks": reports}, node)
        if st == 200:
            gen[0] = d["gen"]
        return st

    def sync(wait=0.2):
        st, d = ctl.call("POST", "/v1/agent/sync", {"node": "r-1", "gen": gen[0], "tasks": reports,
                                                    "wait_s": wait}, node)
        if st == 200:
            gen[0] = d["gen"]
        return st, d

    def desired(jid):
        st, d = sync(0)
        return st == 200 and [t for t in d["tasks"] if t["job"] == jid]

    def job(jid):
        st, d = ctl.call("GET", f"/v1/jobs/{jid}")
        return d["job"] if st == 200 else {}

    check(register() == 200, "r-1 registers")
    st, d = ctl.call("POST", "/v1/jobs", spec("real", gpus=4, model="A100-40GB"))
    one = d["jobs"][0]["id"]
    check(wait_for(lambda: desired(one), "the job reaches r-1's desired state", 10) is not None,
          "the job runs on r-1")
    reports[:] = [{"job": one, "rank": 0, "state": "running"}]
    sync()
    ctl.stop()

    # every write fails: nothing may change, nobody may be told it did
    ctl.start("every=1")
    check(register() == 200, "r-1 registers again (no durable write)")
    st, _ = ctl.call("POST", f"/v1/jobs/{one}/cancel")
    check(st == 503, f"cancel of a running job whose write fails: 503 (got {st})")
    j = job(one)
    check(j.get("state") == "running" and j.get("placement"),
          "after the refused cancel the job still runs, with its allocation")
    check(bool(desired(one)), "and its agent is still told to run it")
    st, _ = ctl.call("POST", f"/v1/jobs/{one}/requeue")
    check(st == 503, f"requeue whose write fails: 503 (got {st})")
    st, _ = ctl.call("POST", "/v1/jobs", spec("refused"))
    check(st == 503, f"a submission whose write fails: 503 (got {st})")
    reports[:] = [{"job": one, "rank": 0, "state": "exited", "exit_code": 0}]
    st, _ = sync()
    check(st == 503, f"an agent's job end whose write fails: 503 to the agent (got {st})")
    check(job(one).get("state") == "running", "the job is still running (the end not written)")
    time.sleep(0.6)  # cycles under failing writes
    check(ctl.alive(), "the controller runs on under failing writes")
    st, m = ctl.call("GET", "/metrics")
    fails = [ln for ln in (m if isinstance(m, str) else "").splitlines()
             if ln.startswith("tessera_store_write_failures_total ")]
    check(fails and float(fails[0].split()[1]) >= 1, f"failures counted in /metrics {fails}")
    consistent(ctl, [one], "every=1")
    ctl.stop()

    # every other write fails: the agent's report gets through on a retry
    ctl.start("every=2")
    check(register() == 200, "r-1 registers a third time")
    ok = wait_for(lambda: sync()[0] == 200 and job(one).get("state") == "completed",
                  "the end gets through on a retry", 10)
    check(ok is not None, "exit 0 completes the job once the write succeeds")
    reports[:] = []
    ids = [one]
    for k in range(4):
        for _ in range(4):
            st, d = ctl.call("POST", "/v1/jobs", spec(f"g{k}", gpus=2, model="A100-40GB"))
            if st == 201:
                ids.append(d["jobs"][0]["id"])
                break
            check(st == 503, f"a submission answers 201 or 503 (got {st})")
    running = wait_for(lambda: [t for t in sync(0)[1].get("tasks", []) if t["job"] in ids],
                       "jobs reach r-1 under every=2", 10) or []
    reports[:] = [{"job": t["job"], "rank": t["rank"], "state": "exited", "exit_code": 0}
                  for t in running]
    wait_for(lambda: sync(0)[0] == 200 and all(job(t["job"]).get("state") == "completed"
                                               for t in running),
             "every reported end is written in the end", 10)
    consistent(ctl, ids, "every=2 with an agent")
    ctl.stop()
    ctl.start()
    consistent(ctl, ids, "agent scenario after a restart")
    check(job(one).get("state") == "completed", "the completed job stays completed")
    ctl.stop()
    ctl.close()

    # the API scenario under the other kinds (PostgreSQL: a dropped session)
    kinds = ["kind=commit", "kind=full"] + (["kind=drop"] if PG else [])
    for i, kind in enumerate(kinds):
        for every in (2, 3):
            ctl = Ctl(f"kind{i}-{every}")
            try:
                ctl.start()
                ctl.stop()
                ctl.start(f"every={every},{kind}")
                led = api_scenario(ctl, f"k{i}{every}")
                check(not led["bad"], f"every={every},{kind}: failed writes answered 503 "
                                      f"{led['bad'][:3] if led['bad'] else ''}")
                check(led["n503"] > 0, f"every={every},{kind}: failures were injected")
                ctl.stop()
                ctl.start()
                check_ledger(ctl, led, f"every={every},{kind}")
                ctl.stop()
            finally:
                ctl.close()

    # a bad rule is refused at start, with the reason
    bad = Ctl("badrule")
    bad.start()
    bad.stop()
    env = dict(os.environ, TESSERAD_STORE_FAULTS="every=0")
    r = subprocess.run([TESSERAD, "--config", os.path.join(bad.dir, "tesserad.yaml")] +
                       (["--store", bad.store] if bad.store else []), env=env,
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "every" in r.stderr, f"every=0 is refused: {r.stderr.strip()}")
    bad.close()


try:
    if MODE == "sweep":
        sweep()
    else:
        agent_scenarios()
finally:
    pass

if FAILS:
    for d in sorted(os.listdir(TMP)):
        log = os.path.join(TMP, d, "tesserad.log")
        if os.path.exists(log):
            print(f"--- {log}\n" + open(log, errors="replace").read()[-1500:])
    print(f"{len(FAILS)} FAILED:", *FAILS, sep="\n  ")
    sys.exit(1)
shutil.rmtree(TMP, ignore_errors=True)
print("all passed")
