#!/usr/bin/env python3
"""ha_failover.py - controller failures under load, with real agents running
real tasks, counted (issues 13 and 14; docs/ha.md).

Mode `ha`: one PostgreSQL (scripts/pg-test-server), N tesserad with `ha:`
(one leader, the others standing by), A tessera-agent on the fake NVML given
every controller URL, tasks that run (a two-node gang and single-GPU jobs
that outlive the run, short jobs from the storm), C client threads
submitting with Idempotency-Keys (each key retried until acknowledged,
following a standby's `leader`), and rounds of faults on the current
leader: `kill` (SIGKILL) or `cut` (a TCP proxy between it and PostgreSQL
drops its connections), optionally the database stopped for a while.
Mode `single`: one tesserad on SQLite, SIGKILLed at random instants.
A supervisor restarts every controller that exits, as systemd would.

Counted at the end: acknowledged jobs missing (lost), keys stored as two
jobs (duplicated), tasks started more than once (the agents' start log,
TESSERA_AGENT_START_LOG, and each task's own line in a run log), rounds
after which the gang was not running on its first processes (gangs
broken), controller exits that are neither our kills nor the lost-lease
exit 75 (crashes), and on PostgreSQL events of an older epoch stored after
a newer epoch's (epoch inversions, events.epoch). Per round: kill -> first
acknowledged submission on another controller, kill -> first task start
ordered by another controller. Everything is bounded in time and count.
Prints a summary, writes it as JSON (--json), exits 1 when a count is not 0.
"""
import argparse
import collections
import glob
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from harness import TcpProxy, free_port, http_call, pg_start  # noqa: E402
from harness import ALLOW_ROOT, USER_IDENTITY  # noqa: E402

PGBIN = os.environ.get("PGBIN") or (sorted(glob.glob("/usr/lib/postgresql/*/bin")) or [""])[-1]
ROUND_WAIT_S = 60.0       # the most one round waits for its acknowledgement and start
SETTLE_S = 60.0           # the most the end waits for keys in flight
EXIT_LOST_LEASE = 75      # tesserad's exit when it lost its lease (docs/ha.md)
REQ_TIMEOUT_S = 5.0


def log(*a):
    print(*a, flush=True)


def pct(xs):
    return {"n": len(xs), "median": round(statistics.median(xs), 3) if xs else None,
            "max": round(max(xs), 3) if xs else None, "all": [round(x, 3) for x in xs]}


class Run:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp(prefix="tessera-hafo-")
        self.pgdir = None
        self.store = None
        self.procs_lock = threading.Lock()
        self.ctl = []            # per controller: dict(proc, port, url, log, proxy)
        self.agents = []
        self.exits = []          # (controller, status, time) of exits not caused by us
        self.kills = 0
        self.stopping = False
        self.acked = {}          # key -> (job id, controller index, time)
        self.ack_log = []        # (time, controller index, time the request was sent)
        self.conflicts = []      # a key acknowledged with two ids
        self.refused = []        # a key refused for good (4xx other than a retryable one)
        self.storm_on = threading.Event()
        self.storm_stop = threading.Event()
        self.start_log = os.path.join(self.tmp, "starts.log")
        self.run_log = os.path.join(self.tmp, "runs.log")
        self.rng = random.Random(a.seed)
        self.hard_deadline = float("inf")  # set by finish: keys in flight get SETTLE_S
        self.early = 0
        self.retried = 0         # keys acknowledged after more than one attempt
        self.retried_200 = 0     # of which answered 200: stored by an earlier attempt
        self.client_errors = []
        self.last_key = {}

    # ---- PostgreSQL
    def pg_start(self):
        return pg_start(self.pgdir)

    def pg_stop_keep(self):
        """Stops the server, keeping its data (pg-test-server stop removes it)."""
        cmd = [os.path.join(PGBIN, "pg_ctl"), "-D", os.path.join(self.pgdir, "data"), "-m",
               "fast", "-w", "-t", "60", "stop"]
        if os.getuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        subprocess.run(cmd, capture_output=True, timeout=90, check=True)

    def psql(self, sql):
        port = self.store.rsplit(":", 1)[1].split("/")[0]
        r = subprocess.run([os.path.join(PGBIN, "psql"), "-h", "127.0.0.1", "-p", port, "-U",
                            "postgres", "-d", "tessera_test", "-qAt", "-F", " ", "-c", sql],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("psql: " + r.stderr)
        return [ln.split() for ln in r.stdout.splitlines() if ln.strip()]

    # ---- controllers, under a supervisor that restarts what exits
    def write(self, name, text):
        with open(os.path.join(self.tmp, name), "w") as f:
            f.write(text)

    def config(self, i):
        a = self.a
        c = self.ctl[i]
        store = ""
        if a.mode == "ha":
            url = self.store
            if c["proxy"]:
                url = url.replace(f":{c['proxy'].port_to}/", f":{c['proxy'].port}/")
            store = f"store: {url}\n"
        text = f"""listen: 127.0.0.1:{c['port']}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{store}node_lost_after: {a.node_lost_after:g}s
limits: {{requests_per_s: 1000000, burst: 1000000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, grace: 2s, backoff: 0s}}
"""
        if a.mode == "ha":
            text += (f"ha: {{lease: {a.lease:g}s, renew: {a.renew:g}s, "
                     f"advertise_url: {c['url']}}}\n")
        self.write(f"ctl{i}.yaml", text)
        return os.path.join(self.tmp, f"ctl{i}.yaml")

    def spawn(self, i):
        c = self.ctl[i]
        logf = open(os.path.join(self.tmp, f"ctl{i}.log"), "ab")
        c["proc"] = subprocess.Popen([self.a.tesserad, "--config", self.config(i)],
                                     stdout=logf, stderr=logf, cwd=self.tmp)
        c["killed"] = False
        c["spawned_at"] = time.time()

    def supervise(self):
        while not self.stopping:
            for i, c in enumerate(self.ctl):
                with self.procs_lock:
                    p = c["proc"]
                    if self.stopping or p is None or p.poll() is None:
                        continue
                    if not c["killed"]:
                        self.exits.append((i, p.returncode, time.time()))
                    c["proc"] = None
                    c["down_at"] = time.time()
            for i, c in enumerate(self.ctl):
                with self.procs_lock:
                    if (not self.stopping and c["proc"] is None and
                            time.time() - c["down_at"] >= self.a.restart_delay):
                        self.spawn(i)
            time.sleep(0.02)

    def kill9(self, i):
        with self.procs_lock:
            c = self.ctl[i]
            c["killed"] = True
            c["proc"].send_signal(signal.SIGKILL)
            self.kills += 1

    def readyz(self, i):
        try:
            with urllib.request.urlopen(self.ctl[i]["url"] + "/readyz", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except Exception:
            return None

    def leader(self, timeout=ROUND_WAIT_S, not_=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            for i in range(len(self.ctl)):
                if i != not_ and self.readyz(i) == 200:
                    return i
            time.sleep(0.05)
        return None

    # ---- clients
    def spec(self, key):
        d = round(self.rng.uniform(0.2, 2.0), 1)
        return {"tenant": "team-a", "name": key, "tier": "guaranteed",
                "command": ["/bin/sh", "-c", f"echo {key} >> {self.run_log}; sleep {d}"],
                "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}],
                "time_limit": "1h"}

    def submit(self, key, body, cur):
        """Retries key until acknowledged (or the end's deadline passes):
        on no answer, on to the next controller; on a standby's 503, to the
        leader it names, else the next; on another 503 or a 429, again on
        the same one. Returns the controller to use next."""
        urls = [c["url"] for c in self.ctl]
        tries = 0
        while time.time() < self.hard_deadline:
            tries += 1
            t_sent = time.time()
            try:
                st, d = http_call(urls[cur], "POST", "/v1/jobs", self.token, body,
                                  {"Idempotency-Key": key}, timeout=REQ_TIMEOUT_S)
            except Exception:
                st, d = None, None
            if st in (200, 201):
                jid = d["jobs"][0]["id"]
                t = time.time()
                old = self.acked.get(key)
                if old and old[0] != jid:
                    self.conflicts.append((key, old[0], jid))
                self.acked[key] = (jid, cur, t)
                self.ack_log.append((t, cur, t_sent))
                if tries > 1:
                    self.retried += 1
                    # 200: the key was already stored by an attempt whose answer was lost
                    self.retried_200 += st == 200
                return cur
            err = d.get("error", {}) if isinstance(d, dict) else {}
            if st == 503 and err.get("code") == "standby":
                hint = err.get("leader")
                cur = (urls.index(hint) if hint in urls and hint != urls[cur]
                       else (cur + 1) % len(urls))
            elif st is None:
                cur = (cur + 1) % len(urls)
            elif st not in (503, 429):
                self.refused.append((key, st, str(d)[:200]))
                return cur
            time.sleep(0.05)
        return cur

    def client(self, ci):
        cur = 0
        n = 0
        self.storm_on.wait()
        try:
            while not self.storm_stop.is_set():
                key = f"s{ci}-{n}"
                n += 1
                cur = self.submit(key, self.spec(key), cur)
                if self.storm_stop.is_set():
                    break
                time.sleep(self.rng.uniform(0.5, 1.5) / self.a.rate)
        except Exception as e:  # a client that stopped early is a failure of the run
            self.client_errors.append(f"client {ci}, key s{ci}-{n - 1}: {e!r}")
        self.last_key[ci] = f"s{ci}-{n - 1}"

    # ---- the agents' record of task starts
    def starts(self):
        out = []
        try:
            with open(self.start_log) as f:
                for ln in f:
                    p = ln.split()
                    if len(p) >= 6:
                        out.append({"node": p[0], "task": p[1], "pid": int(p[2]),
                                    "t": float(p[4]), "ctl": p[5]})
        except FileNotFoundError:
            pass
        return out

    def job(self, i, jid):
        try:
            st, d = http_call(self.ctl[i]["url"], "GET", f"/v1/jobs/{jid}", self.admin,
                              timeout=REQ_TIMEOUT_S)
        except Exception:
            return {}
        return d.get("job", {}) if st == 200 else {}

    def gang_ok(self, lead):
        """The gang runs on the processes it first started with, each once."""
        j = self.job(lead, self.gang)
        st = [s for s in self.starts() if s["task"].startswith(f"j{self.gang}-")]
        alive = all(os.path.exists(f"/proc/{s['pid']}") for s in st)
        return (j.get("state") == "running" and len(st) == 2 and
                len({s["task"] for s in st}) == 2 and alive), j.get("state"), len(st)

    # ---- the run
    def setup(self):
        a = self.a
        self.write("cluster.yaml", "topology:\n  levels: [leaf, node, gpu]\nnode_classes:\n"
                   "  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, "
                   "memory_mib: 524288}\nnodes:\n"
                   f"  - {{names: 'r-[1-{a.agents}]', class: g8, topology: {{leaf: l1}}}}\n")
        self.write("tenants.yaml", f"tenants:\n  team-a: {{allow_root: {ALLOW_ROOT}, "
                   f"guaranteed: {{gpu: {{H100-80GB: {8 * a.agents}}}}}}}\n")
        n = a.controllers if a.mode == "ha" else 1
        if a.mode == "ha":
            self.pgdir = tempfile.mkdtemp(prefix="tessera-pg-hafo.")
            self.store = self.pg_start()
        pg_port = int(self.store.rsplit(":", 1)[1].split("/")[0]) if self.store else 0
        for i in range(n):
            port = free_port()
            self.ctl.append({"port": port, "url": f"http://127.0.0.1:{port}", "proc": None,
                             "killed": False, "down_at": 0.0,
                             "proxy": TcpProxy(pg_port) if a.proxies else None})
        self.spawn(0)
        if self.leader(60) != 0:
            raise SystemExit("the first controller did not become ready")
        for i in range(1, n):
            self.spawn(i)
        threading.Thread(target=self.supervise, daemon=True).start()
        self.admin = open(os.path.join(self.tmp, "state", "admin.token")).read().strip()
        u0 = self.ctl[0]["url"]
        st, d = http_call(u0, "POST", "/v1/tokens", self.admin,
                          {"name": "storm", "role": "user", "tenant": "team-a",
                           **USER_IDENTITY})
        assert st == 201, (st, d)
        self.token = d["token"]["secret"]
        fx = json.load(open(a.fixture))
        urls = ",".join(c["url"] for c in self.ctl)
        for k in range(1, a.agents + 1):
            node = f"r-{k}"
            st, d = http_call(u0, "POST", "/v1/tokens", self.admin, {"name": node, "role": "node"})
            assert st == 201, (st, d)
            self.write(node + ".token", d["token"]["secret"] + "\n")
            f = json.loads(json.dumps(fx))
            for g in f["gpus"]:  # distinct UUIDs per node
                g["uuid"] = g["uuid"][:-2] + f"{k:02d}"
            self.write(node + "-gpus.json", json.dumps(f))
            env = dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=os.path.join(self.tmp, node + "-gpus.json"),
                       TESSERA_AGENT_START_LOG=self.start_log)
            self.agents.append(subprocess.Popen(
                [a.agent, "--controller", urls, "--node", node, "--token-file",
                 os.path.join(self.tmp, node + ".token"), "--state-dir",
                 os.path.join(self.tmp, node), "--nvml", a.fake]
                + (["--lost-after", f"{a.agent_lost_after:g}"] if a.agent_lost_after else []),
                env=env,
                stdout=subprocess.DEVNULL, stderr=open(os.path.join(self.tmp, node + ".log"), "w")))

        def nodes_up():
            st, d = http_call(u0, "GET", "/v1/nodes", self.admin, timeout=REQ_TIMEOUT_S)
            return st == 200 and sum(x["state"] == "up" for x in d["nodes"]) == a.agents
        deadline = time.time() + 60
        while not nodes_up():
            if time.time() > deadline:
                raise SystemExit("the agents did not register")
            time.sleep(0.2)

        def long_job(name, count, gpus):
            st, d = http_call(u0, "POST", "/v1/jobs", self.token, {
                "tenant": "team-a", "name": name, "tier": "guaranteed",
                "command": ["/bin/sh", "-c",
                            f"echo {name}-$RANK >> {self.run_log}; exec sleep 3600"],
                "tasks": [{"count": count, "gpus": gpus, "cpu_milli": 100, "memory_mib": 64}],
                "time_limit": "2h"}, {"Idempotency-Key": name})
            assert st == 201, (st, d)
            return d["jobs"][0]["id"]
        # two tasks of 5 GPUs on 8-GPU nodes: a gang that must span two nodes
        self.gang = long_job("gang", 2, 5)
        self.longs = [long_job(f"long-{k}", 1, 1) for k in range(2)]
        deadline = time.time() + 60
        while not all(self.job(0, j).get("state") == "running" for j in [self.gang] + self.longs):
            if time.time() > deadline:
                raise SystemExit("the long jobs did not start")
            time.sleep(0.2)
        self.clients = [threading.Thread(target=self.client, args=(ci,), daemon=True)
                        for ci in range(a.clients)]
        for t in self.clients:
            t.start()
        self.storm_on.set()

    def early_kill(self):
        """--early-kills: a controller killed while it restores, not timed.
        One controller: SIGKILL, then SIGKILL again 0.05-0.6 s after the
        supervisor started it anew, while it opens the store, restores the
        jobs and takes the agents' registrations. ha: SIGKILL of the leader,
        then of the controller that takes the lease, 0-0.3 s after it says
        so (while it restores and the agents move to it)."""
        if self.a.mode == "ha":
            return self.early_kill_ha()
        t0 = time.time()
        self.kill9(0)
        deadline = t0 + 10
        while self.ctl[0].get("spawned_at", 0) <= t0 and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(self.rng.uniform(0.05, 0.6))
        with self.procs_lock:
            alive = self.ctl[0]["proc"] is not None and self.ctl[0]["proc"].poll() is None
        if alive:
            self.kill9(0)
        self.early += 1

    def early_kill_ha(self):
        lead = self.leader()
        if lead is None:
            return
        logs = [os.path.join(self.tmp, f"ctl{i}.log") for i in range(len(self.ctl))]
        sizes = [os.path.getsize(p) if os.path.exists(p) else 0 for p in logs]
        t0 = time.time()
        self.kill9(lead)
        taker = None
        while taker is None and time.time() < t0 + ROUND_WAIT_S:
            for i, p in enumerate(logs):
                with open(p, errors="replace") as f:
                    f.seek(sizes[i])
                    if "took the lease" in f.read():
                        taker = i
                        break
            time.sleep(0.01)
        if taker is not None:
            time.sleep(self.rng.uniform(0, 0.3))
            with self.procs_lock:
                c = self.ctl[taker]
                alive = c["proc"] is not None and c["proc"].poll() is None
            if alive:
                self.kill9(taker)
        self.early += 1

    def round(self, r, fault):
        a = self.a
        if r < a.early_kills:
            self.early_kill()
        time.sleep(self.rng.uniform(a.gap_min, a.gap_max))
        lead = self.leader()
        if lead is None:
            return {"round": r, "fault": fault, "error": "no leader"}
        url = self.ctl[lead]["url"]
        t_exit = {}
        if fault == "cut":
            # the controller stays cut off (restarted by the supervisor, it
            # stands by, unable to reach the database) until another leads
            p = self.ctl[lead]["proc"]
            threading.Thread(target=lambda: (p.wait(), t_exit.setdefault("t", time.time())),
                             daemon=True).start()
            t0 = time.time()
            self.ctl[lead]["proxy"].cut_all()
        else:
            t0 = time.time()
            self.kill9(lead)
        t_ack = t_start = t_lead = None
        deadline = t0 + ROUND_WAIT_S
        others = [i for i in range(len(self.ctl)) if i != lead] or [lead]
        while time.time() < deadline and (t_ack is None or t_start is None or
                                          (fault == "cut" and "t" not in t_exit)):
            if t_lead is None and fault == "cut":
                for i in others:
                    if self.readyz(i) == 200:
                        t_lead = time.time()
            if t_ack is None:
                # asked after the fault: answered by a process that leads
                # after it (a killed one answers nothing, a cut one cannot
                # commit), possibly the killed one started again
                xs = [t for t, c, sent in list(self.ack_log) if sent > t0]
                t_ack = min(xs) if xs else None
            if t_start is None:
                # ordered by another controller, or by the faulty one's URL
                # once a new process was started there
                t_new = self.ctl[lead].get("spawned_at", 0)
                xs = [s["t"] for s in self.starts() if s["t"] > t0 and
                      (s["ctl"] != url or t_new > t0 and s["t"] > t_new)]
                t_start = min(xs) if xs else None
            time.sleep(0.05)
        new = self.leader(10, not_=lead if fault == "cut" else None)
        if fault == "cut":  # its host reaches the database again: it stands by
            self.ctl[lead]["proxy"].resume()
        ok, gstate, gstarts = self.gang_ok(new) if new is not None else (False, None, None)
        res = {"round": r, "fault": fault, "from": lead, "to": new,
               "ack_s": round(t_ack - t0, 3) if t_ack else None,
               "start_s": round(t_start - t0, 3) if t_start else None,
               "gang_running": ok, "gang_state": gstate, "gang_starts": gstarts}
        if fault == "cut":
            res["exit_s"] = round(t_exit["t"] - t0, 3) if "t" in t_exit else None
            res["lead_s"] = round(t_lead - t0, 3) if t_lead else None
            res["stopped_first"] = bool(t_exit.get("t") and t_lead and t_exit["t"] < t_lead)
        log(f"round {r + 1} ({fault} controller {lead}): "
            + ", ".join(f"{k} {v}" for k, v in res.items() if k not in ("round", "fault")))
        return res

    def db_down(self, secs):
        """Stops PostgreSQL for secs; polls every controller's API meanwhile."""
        t0 = time.time()
        self.pg_stop_keep()
        t_down = time.time()  # what was acknowledged before this may have committed
        answers = collections.Counter()
        while time.time() < t0 + secs:
            for i in range(len(self.ctl)):
                try:
                    st, d = http_call(self.ctl[i]["url"], "GET", "/v1/jobs?limit=1", self.token,
                                      timeout=REQ_TIMEOUT_S)
                    code = d.get("error", {}).get("code") if isinstance(d, dict) else None
                    answers[f"{st} {code}" if code else str(st)] += 1
                except Exception:
                    answers["no answer"] += 1
            time.sleep(0.25)
        t_back = time.time()
        acked_during = [t for t, _, _ in list(self.ack_log) if t_down < t < t_back]
        url = self.pg_start()
        lead = self.leader(60)
        t_lead = time.time()
        res = {"down_s": round(t_back - t0, 1), "answers": dict(answers),
               "acknowledged_while_down": len(acked_during), "same_url": url == self.store,
               "leader_after_s": round(t_lead - t_back, 2) if lead is not None else None}
        log("database down: " + json.dumps(res))
        return res

    def finish(self, rounds, db):
        a = self.a
        self.hard_deadline = time.time() + SETTLE_S
        self.storm_stop.set()
        for t in self.clients:
            t.join(SETTLE_S + 10)
        lead = self.leader(30)
        gang_end = self.gang_ok(lead)[0] if lead is not None else False
        jobs, cur = [], None
        for _ in range(1000):
            st, d = http_call(self.ctl[lead]["url"], "GET", "/v1/jobs?limit=1000" +
                              (f"&cursor={cur}" if cur else ""), self.token, timeout=30)
            if st != 200:
                raise SystemExit(f"listing jobs: {st} {d}")
            jobs += d["jobs"]
            cur = d.get("next_cursor")
            if not cur:
                break
        by_name = collections.defaultdict(list)
        for j in jobs:
            by_name[j["name"]].append(j["id"])
        lost = [k for k, v in self.acked.items() if v[0] not in by_name.get(k, [])]
        dup = [k for k, v in by_name.items() if len(v) > 1]
        # stored, never acknowledged: the storm's last keys cut short by the
        # end's deadline, or a key the client gave up on (both allowed)
        unacked = sorted(k for k in by_name if k.startswith("s") and k not in self.acked)
        starts = self.starts()
        per_task = collections.Counter(s["task"] for s in starts)
        twice = sorted(t for t, n in per_task.items() if n > 1)
        runs = collections.Counter(open(self.run_log).read().split()) if os.path.exists(
            self.run_log) else collections.Counter()
        ran_twice = sorted(k for k, n in runs.items() if n > 1)
        out = {"mode": a.mode, "controllers": len(self.ctl), "agents": a.agents,
               "clients": a.clients, "lease_s": a.lease if a.mode == "ha" else None,
               "early_kill_rounds": self.early,
               "renew_s": a.renew if a.mode == "ha" else None, "kills": self.kills,
               "acknowledged": len(self.acked), "stored": len(jobs),
               "stored_unacknowledged": len(unacked), "stored_unacknowledged_keys": unacked[:10],
               "client_errors": self.client_errors[:10],
               "keys_retried": self.retried, "keys_retried_already_stored": self.retried_200,
               "clients_last_keys": [self.last_key.get(ci) for ci in range(a.clients)],
               "lost": len(lost), "lost_keys": lost[:10], "duplicated": len(dup),
               "duplicated_keys": dup[:10], "conflicting_acks": len(self.conflicts),
               "refused": len(self.refused), "refused_examples": self.refused[:5],
               "task_starts": len(starts), "started_twice": len(twice),
               "started_twice_tasks": twice[:10], "ran_twice": len(ran_twice),
               "ran_twice_keys": ran_twice[:10],
               "gangs_broken": sum(1 for x in rounds if not x.get("gang_running"))
               + (0 if gang_end else 1), "gang_running_at_end": gang_end,
               "crashes": [(i, s) for i, s, _ in self.exits if s != EXIT_LOST_LEASE],
               "lost_lease_exits": sum(1 for _, s, _ in self.exits if s == EXIT_LOST_LEASE),
               "agents_exited": [p.returncode for p in self.agents if p.poll() is not None],
               "rounds": rounds, "db_down": db}
        acks = [x["ack_s"] for x in rounds if x.get("ack_s") is not None]
        sts = [x["start_s"] for x in rounds if x.get("start_s") is not None]
        out["failover_ack_s"] = pct(acks)
        out["failover_start_s"] = pct(sts)
        out["unmeasured_rounds"] = sum(1 for x in rounds if x.get("ack_s") is None or
                                       x.get("start_s") is None)
        if a.mode == "ha":
            # each event and job row records the epoch that wrote it (store
            # migration 4); ids are drawn in commit order across a takeover,
            # so a row of an older epoch with a higher id than a newer
            # epoch's row is a commit of a deposed leader after its successor's
            out["epoch_inversions"] = 0
            for table in ("events", "jobs"):
                rows = self.psql(f"SELECT epoch, COUNT(*), MIN(id), MAX(id) FROM {table} "
                                 "GROUP BY epoch ORDER BY epoch")
                out[f"epochs_{table}"] = [[int(x) for x in r] for r in rows]
                inv = self.psql("SELECT COUNT(*) FROM (SELECT epoch, MAX(epoch) OVER (ORDER BY "
                                "id ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before "
                                f"FROM {table}) x WHERE epoch < before")
                out["epoch_inversions"] += int(inv[0][0])
            out["epochs"] = out["epochs_events"]
            cuts = [x for x in rounds if x["fault"] == "cut"]
            out["cut_stopped_first"] = sum(1 for x in cuts if x.get("stopped_first"))
            out["cuts"] = len(cuts)
        return out

    def cleanup(self):
        self.stopping = True
        self.storm_stop.set()
        for p in self.agents:
            p.send_signal(signal.SIGTERM)
        for c in self.ctl:
            if c["proc"] and c["proc"].poll() is None:
                c["proc"].send_signal(signal.SIGTERM)
        for p in self.agents + [c["proc"] for c in self.ctl if c["proc"]]:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for s in self.starts():  # the tasks outlive their agents (their keepers run them)
            try:
                os.killpg(s["pid"], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.pgdir:
            subprocess.run([os.path.join(ROOT, "scripts", "pg-test-server"), "stop", self.pgdir],
                           capture_output=True, timeout=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("ha", "single"), default="ha")
    ap.add_argument("--tesserad", required=True)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--fake", required=True, help="the fake libnvidia-ml.so.1")
    ap.add_argument("--fixture", required=True, help="its GPU fixture (h100x8.json)")
    ap.add_argument("--controllers", type=int, default=3, help="ha mode: 2..8")
    ap.add_argument("--agents", type=int, default=4, help="2..16 (the gang needs 2 nodes)")
    ap.add_argument("--clients", type=int, default=16, help="1..64")
    ap.add_argument("--rate", type=float, default=1.0, help="submissions/s per client, 0.1..100")
    ap.add_argument("--kills", type=int, default=10, help="SIGKILL rounds, 0..100")
    ap.add_argument("--cuts", type=int, default=0, help="ha mode: cut-off rounds, 0..100")
    ap.add_argument("--early-kills", type=int, default=0,
                    help="before each of the first N timed faults, two more kills (the "
                         "second while the controller that comes next restores), 0..100")
    ap.add_argument("--db-down", type=float, default=0, help="ha mode: seconds, 0..300")
    ap.add_argument("--lease", type=float, default=3.0)
    ap.add_argument("--renew", type=float, default=0.5)
    ap.add_argument("--gap-min", type=float, default=1.0, help="storm seconds before a fault")
    ap.add_argument("--gap-max", type=float, default=3.0)
    ap.add_argument("--restart-delay", type=float, default=0.1,
                    help="supervisor's pause before restarting an exited controller")
    ap.add_argument("--node-lost-after", type=float, default=30.0,
                    help="the controllers' node_lost_after, 10..600 s: agents stop their tasks "
                         "after half of it without a leader (a database outage longer than "
                         "that requeues them)")
    ap.add_argument("--agent-lost-after", type=float, default=0,
                    help="the agents' --lost-after, 0 (their default, 30 s) or 10..600 s")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", help="write the result here")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work folder (logs, start log) even when every count is 0")
    a = ap.parse_args()
    for name, v, lo, hi in (("controllers", a.controllers, 2, 8), ("agents", a.agents, 2, 16),
                            ("clients", a.clients, 1, 64), ("rate", a.rate, 0.1, 100),
                            ("kills", a.kills, 0, 100), ("cuts", a.cuts, 0, 100),
                            ("early-kills", a.early_kills, 0, 100),
                            ("db-down", a.db_down, 0, 300),
                            ("node-lost-after", a.node_lost_after, 10, 600)):
        if not lo <= v <= hi:
            ap.error(f"--{name}: must be {lo}..{hi}")
    if a.agent_lost_after and not 10 <= a.agent_lost_after <= 600:
        ap.error("--agent-lost-after: must be 0 or 10..600")
    if a.mode == "single" and (a.cuts or a.db_down):
        ap.error("--cuts and --db-down need --mode ha")
    if a.mode == "ha" and not os.path.exists(os.path.join(PGBIN, "postgres")):
        print("SKIP: no PostgreSQL binaries (scripts/install-deps installs them)")
        sys.exit(77)
    a.proxies = a.cuts > 0
    for k in ("tesserad", "agent", "fake", "fixture"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    run = Run(a)
    t_begin = time.time()
    out = None
    try:
        run.setup()
        log(f"setup done in {time.time() - t_begin:.1f} s: {a.mode}, "
            f"{len(run.ctl)} controller(s), {a.agents} agents, {a.clients} clients; gang job "
            f"{run.gang}; work in {run.tmp}")
        faults = ["kill"] * a.kills + ["cut"] * a.cuts
        rounds = [run.round(r, f) for r, f in enumerate(faults)]
        db = run.db_down(a.db_down) if a.db_down > 0 else None
        time.sleep(a.gap_max)  # the storm goes on after the last fault
        out = run.finish(rounds, db)
        out["wall_s"] = round(time.time() - t_begin, 1)
    finally:
        run.cleanup()
    bad = (out["lost"] or out["duplicated"] or out["conflicting_acks"] or out["started_twice"]
           or out["client_errors"]
           or out["ran_twice"] or out["gangs_broken"] or out["crashes"] or out["agents_exited"]
           or out["unmeasured_rounds"] or out["refused"] or out.get("epoch_inversions")
           or out.get("cut_stopped_first", 0) != out.get("cuts", 0)
           or (out["db_down"] and (out["db_down"]["acknowledged_while_down"] or
                                   out["db_down"]["leader_after_s"] is None)))
    fa, fs = out["failover_ack_s"], out["failover_start_s"]
    log(f"\n{a.mode}: {out['kills']} kills, {a.cuts} cuts; {out['acknowledged']} acknowledged, "
        f"{out['stored']} stored ({out['keys_retried']} keys retried, "
        f"{out['keys_retried_already_stored']} of them already stored); lost {out['lost']}, duplicated {out['duplicated']}, "
        f"started twice {out['started_twice']} (of {out['task_starts']} starts; ran twice "
        f"{out['ran_twice']}), gangs broken {out['gangs_broken']}, crashes "
        f"{len(out['crashes'])}, lost-lease exits {out['lost_lease_exits']}"
        + (f", epoch inversions {out['epoch_inversions']}" if a.mode == "ha" else ""))
    log(f"failover to first acknowledgement: median {fa['median']} s, max {fa['max']} s, "
        f"all {fa['all']}")
    log(f"failover to first new task start:  median {fs['median']} s, max {fs['max']} s, "
        f"all {fs['all']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    log("RESULT: " + ("FAIL" if bad else "ok"))
    if bad or a.keep:
        log(f"logs in {run.tmp}")
    else:
        shutil.rmtree(run.tmp, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
