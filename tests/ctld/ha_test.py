#!/usr/bin/env python3
"""High availability: two tesserad on one PostgreSQL store (docs/ha.md).

    ha_test.py TESSERAD

Starts its own PostgreSQL with scripts/pg-test-server (exit 77, skipped,
when no PostgreSQL binaries are installed), then two controllers with
`ha:` (lease 3s, renew 0.5s) on a virtual cluster: one leads, the other
answers 503 with the leader's URL, /readyz 503 and /metrics role standby.
A client submits with Idempotency-Keys, retrying each key on both URLs
until it is acknowledged, while the leader is killed with SIGKILL several
times (the killed one is started again and stands by; TS_HA_TEST_LEASE,
TS_HA_TEST_RENEW and TS_HA_TEST_ROUNDS change the settings, to measure). Each time the
standby takes over within lease + renew + slack; the failover time (kill
to the first acknowledged submission on the new leader) is printed, with
the median and the maximum. At the end every acknowledged key is stored
exactly once, with the id it was acknowledged with. A clean stop hands the
lease over at once. A leader cut off from PostgreSQL by a TCP proxy that
drops its connections exits with status 75 before the standby takes over.
With the database away for everyone, the standby answers 503 throughout and
once it is back one controller leads with nothing lost.
An `ha:` configuration on SQLite is refused, naming ha. Every wait is
bounded.
"""
import glob
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

TESSERAD = sys.argv[1]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from harness import FAILS, check, finish, free_port, http_call, wait_for  # noqa: E402
from harness import TcpProxy as Proxy, pg_start, pg_stop  # noqa: E402

# the lease settings and rounds can be changed to measure (docs/ha.md)
LEASE = float(os.environ.get("TS_HA_TEST_LEASE", "3"))
RENEW = float(os.environ.get("TS_HA_TEST_RENEW", "0.5"))
ROUNDS = int(os.environ.get("TS_HA_TEST_ROUNDS", "3"))
SLACK = 5.0  # a start of the controller (restore) and a loaded test machine

if not (os.environ.get("PGBIN") or glob.glob("/usr/lib/postgresql/*/bin/postgres")):
    print("SKIP: no PostgreSQL binaries (scripts/install-deps installs them)")
    sys.exit(77)

TMP = tempfile.mkdtemp(prefix="tessera-ha-")
PGDIR = tempfile.mkdtemp(prefix="tessera-pg-ha.")  # its parent must be open to postgres
STORE = pg_start(PGDIR)

with open(os.path.join(TMP, "cluster.yaml"), "w") as f:
    f.write("""topology:
  levels: [node, gpu]
node_classes:
  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'n-[1-4]', class: g8}
""")
with open(os.path.join(TMP, "tenants.yaml"), "w") as f:
    f.write("""tenants:
  team-a: {guaranteed: {gpu: {H100-80GB: 32}}}
  team-b: {}
""")

PORTS = [free_port(), free_port()]
URLS = [f"http://127.0.0.1:{p}" for p in PORTS]
LOGS = ["a.log", "b.log"]


def config(i, store, ha=True, key_file=None):
    path = os.path.join(TMP, f"ctl{i}.yaml")
    with open(path, "w") as f:
        if key_file:
            f.write(f"secrets_key_file: {key_file}\n")
        f.write(f"""listen: 127.0.0.1:{PORTS[i]}
cluster: cluster.yaml
tenants: tenants.yaml
virtual_nodes: all
state_dir: {os.path.join(TMP, 'state')}
store: {store}
limits: {{requests_per_s: 10000, burst: 10000}}
scheduler: {{interval: 0.2s}}
metrics_public: true
""")
        if ha:
            f.write(f"ha: {{lease: {LEASE:g}s, renew: {RENEW:g}s, advertise_url: {URLS[i]}}}\n")
    return path


def start(i, store=None, key_file=None):
    log = open(os.path.join(TMP, LOGS[i]), "ab")
    # a ThreadSanitizer build sleeps 1 s in _exit by default: the exit on a
    # lost lease is timed here
    env = dict(os.environ, TSAN_OPTIONS=os.environ.get("TSAN_OPTIONS", "") +
               " atexit_sleep_ms=0")
    return subprocess.Popen([TESSERAD, "--config", config(i, store or STORE, key_file=key_file)],
                            stdout=log, stderr=log, env=env)


def readyz(i):
    try:
        with urllib.request.urlopen(URLS[i] + "/readyz", timeout=2) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except Exception:
        return None, ""


def metric(i, name):
    try:
        st, text = http_call(URLS[i], "GET", "/metrics", timeout=2)
    except Exception:
        return None
    for line in (text if st == 200 and isinstance(text, str) else "").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


procs = [None, None]
try:
    # --- ha: on SQLite is refused, naming ha
    r = subprocess.run([TESSERAD, "--config", config(0, os.path.join(TMP, "lite.db"))],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "ha:" in r.stderr and "PostgreSQL" in r.stderr,
          f"ha: on SQLite is refused, naming ha ({r.stderr.strip()[:120]})")

    # --- one leader, one standby
    procs[0] = start(0)
    wait_for(lambda: readyz(0)[0] == 200, "the first controller leads")
    procs[1] = start(1)
    wait_for(lambda: readyz(1)[0] == 503, "the second controller answers as a standby")
    st, body = readyz(1)
    check(st == 503 and "standby" in body and URLS[0] in body,
          f"standby /readyz: 503 naming the leader ({body.strip()})")
    check("leader" in readyz(0)[1], "leader /readyz says leader")
    check(http_call(URLS[1], "GET", "/healthz")[0] == 200, "standby /healthz: 200")
    try:
        urllib.request.urlopen(URLS[1] + "/ui/", timeout=5)
        page, ctype = "", ""
    except urllib.error.HTTPError as e:
        page, ctype = e.read().decode(), e.headers.get("Content-Type", "")
    check(ctype.startswith("text/html") and f'href="{URLS[0]}/ui/"' in page,
          f"the console on a standby is a page linking the leader's ({ctype}: {page[:160]})")
    st, d = http_call(URLS[1], "GET", "/v1/jobs", "tsk_whatever")
    check(st == 503 and d["error"]["code"] == "standby" and d["error"]["leader"] == URLS[0],
          f"standby API: 503 standby with the leader's URL ({d})")
    st, d = http_call(URLS[1], "POST", "/v1/jobs", "tsk_x", {"tenant": "team-a"})
    check(st == 503 and d["error"]["code"] == "standby", "standby: a submission is refused too")
    check(wait_for(lambda: metric(1, 'tessera_ha_role{role="standby"}') == 1, "standby metric",
                   timeout=5), "standby /metrics: role standby")
    check(metric(0, 'tessera_ha_role{role="leader"}') == 1 and metric(0, "tessera_ha_epoch") >= 1,
          "leader /metrics: role leader and its epoch")

    # a controller without ha: on the set's store is refused while it leads
    # (it would run beside the leader unfenced), naming the leader
    single = config(0, STORE, ha=False).replace("ctl0", "ctl-single")
    os.rename(config(0, STORE, ha=False), single)
    with open(single) as f:
        text = f.read().replace(f"127.0.0.1:{PORTS[0]}", f"127.0.0.1:{free_port()}")
    with open(single, "w") as f:
        f.write(text)
    r = subprocess.run([TESSERAD, "--config", single], capture_output=True, text=True, timeout=30)
    check(r.returncode == 1 and "leads it" in r.stderr and URLS[0] in r.stderr and "ha:" in r.stderr,
          f"a controller without ha: beside the leader is refused ({r.returncode}: "
          f"{r.stderr.strip()[-200:]})")

    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    st, d = http_call(URLS[0], "POST", "/v1/tokens", admin,
                      {"name": "alice", "role": "user", "tenant": "team-a"})
    check(st == 201, "a user token on the leader")
    alice = d["token"]["secret"]

    def spec(n):
        return {"tenant": "team-a", "name": f"j{n}", "tier": "guaranteed",
                "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}],
                "time_limit": "1h", "duration": "1h", "command": ["true"]}

    acked = {}  # key -> id

    def submit(n, deadline):
        """Retries key n on both controllers until it is acknowledged;
        (index of the controller that acknowledged it, time)."""
        key = f"ha-{n}"
        while time.time() < deadline:
            for i in (0, 1):
                try:
                    st, d = http_call(URLS[i], "POST", "/v1/jobs", alice, spec(n),
                                      {"Idempotency-Key": key}, timeout=5)
                except Exception:
                    continue
                if st in (200, 201):
                    jid = d["jobs"][0]["id"]
                    if key in acked and acked[key] != jid:
                        check(False, f"key {key}: acknowledged as {acked[key]} then {jid}")
                    acked[key] = jid
                    return i, time.time()
            time.sleep(0.05)
        return None, time.time()

    n = 0
    for _ in range(10):
        submit(n, time.time() + 10)
        n += 1
    check(len(acked) == 10, "10 submissions acknowledged by the leader")
    # an interactive session asked of the standby goes to the leader it
    # names (the stream is opened once more there), which answers for the job
    cli = os.path.join(os.path.dirname(TESSERAD), "tessera")
    if acked and os.path.exists(cli):
        r = subprocess.run([cli, "--server", URLS[1], "exec", str(acked["ha-0"]), "--", "true"],
                           capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, TESSERA_TOKEN=alice, XDG_CONFIG_HOME=TMP))
        check("standby" not in r.stderr and r.returncode not in (0, 2),
              f"tessera exec against the standby is answered by the leader: {r.returncode} "
              f"{r.stderr.strip()[:200]}")
    # a large array (its elements mostly not jobs yet: array_lazy.c) that the
    # failovers below must not lose nor reorder; team-b's, out of alice's lists
    st, d = http_call(URLS[0], "POST", "/v1/jobs", admin,
                      dict(spec(0), tenant="team-b", name="arr", tier="opportunistic",
                           duration="1s", array_size=1000, array_throttle=2), timeout=30)
    check(st == 201 and len(d["jobs"]) == 1000, f"an array of 1000 on the leader: {st}")
    arr0 = d["jobs"][0]["id"] if st == 201 else 0

    failovers = []
    leader = 0
    for rnd in range(ROUNDS):
        standby = 1 - leader
        # a few acknowledged just before the kill
        for _ in range(5):
            submit(n, time.time() + 10)
            n += 1
        t_kill = time.time()
        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait(timeout=10)
        who, t_ack = submit(n, t_kill + LEASE + RENEW + SLACK + 10)
        n += 1
        dt = t_ack - t_kill
        check(who == standby and dt <= LEASE + RENEW + SLACK,
              f"round {rnd + 1}: the standby took over; first acknowledged submission "
              f"{dt:.2f} s after the kill (bound {LEASE + RENEW + SLACK:.1f} s)")
        failovers.append(dt)
        check(readyz(standby)[0] == 200, f"round {rnd + 1}: the new leader is ready")
        procs[leader] = start(leader)
        wait_for(lambda: readyz(leader)[0] == 503, f"round {rnd + 1}: the old leader stands by")
        st, d = http_call(URLS[leader], "GET", "/v1/jobs", alice)
        check(st == 503 and d["error"]["leader"] == URLS[standby],
              f"round {rnd + 1}: the restarted one names the new leader")
        check(metric(standby, "tessera_ha_epoch") == rnd + 2,
              f"round {rnd + 1}: epoch {rnd + 2} on the new leader")
        leader = standby

    def elem(k):
        return http_call(URLS[leader], "GET", f"/v1/jobs/{arr0 + k}", admin)[1].get("job", {})

    check(elem(999).get("state") == "pending", "after the failovers the array's last element "
          "still waits")
    done = [k for k in range(200) if elem(k).get("state") == "completed"]
    check(done and done == list(range(len(done))),
          f"its elements completed in index order across the failovers: {done[-3:]}")
    nxt = len(done) + 2
    check(wait_for(lambda: elem(nxt).get("state") == "completed", "the array goes on", 30),
          f"the last leader goes on with it: element {nxt} completes")
    st, d = http_call(URLS[leader], "POST", f"/v1/arrays/{arr0}/cancel", admin, timeout=60)
    check(st == 200 and elem(999).get("state") == "cancelled", f"and cancels it whole: {st}")

    # every acknowledged job exactly once, with its acknowledged id
    seen, cur = [], None
    for _ in range(50):
        st, d = http_call(URLS[leader], "GET", "/v1/jobs?limit=1000" +
                          (f"&cursor={cur}" if cur else ""), alice)
        if st != 200:
            break
        seen += d["jobs"]
        cur = d.get("next_cursor")
        if not cur:
            break
    by_name = {}
    for j in seen:
        by_name.setdefault(j["name"], []).append(j["id"])
    dup = [k for k, v in by_name.items() if len(v) > 1]
    lost = [k for k, jid in acked.items() if by_name.get("j" + k[3:]) != [jid]]
    check(not dup and not lost and len(seen) == len(acked),
          f"{len(acked)} acknowledged jobs: each stored exactly once ({len(seen)} stored, "
          f"duplicated {dup[:5]}, lost {lost[:5]})")

    print(f"failover (kill -9 of the leader to the first acknowledged submission on the new "
          f"leader), lease {LEASE:g} s, renew {RENEW:g} s: "
          + ", ".join(f"{x:.2f}" for x in failovers)
          + f" s; median {statistics.median(failovers):.2f} s, max {max(failovers):.2f} s")

    # a clean stop ends the lease: the standby takes over without waiting it out
    standby = 1 - leader
    t0 = time.time()
    procs[leader].send_signal(signal.SIGTERM)
    procs[leader].wait(timeout=30)
    ok = wait_for(lambda: readyz(standby)[0] == 200, "takeover after a clean stop", timeout=15)
    check(ok and time.time() - t0 < LEASE, f"after a clean stop the standby leads in "
          f"{time.time() - t0:.2f} s (< the lease)")

    # --- the leader cut off from PostgreSQL (a proxy between them drops every
    # connection): it stops acting (exits 75) before the standby takes over
    procs[standby].send_signal(signal.SIGTERM)
    procs[standby].wait(timeout=30)
    proxy = Proxy(int(STORE.rsplit(":", 1)[1].split("/")[0]))
    via = STORE.replace(f":{proxy.port_to}/", f":{proxy.port}/")
    procs[0] = start(0, via)
    wait_for(lambda: readyz(0)[0] == 200, "the controller behind the proxy leads", timeout=30)
    procs[1] = start(1)
    wait_for(lambda: readyz(1)[0] == 503, "the other stands by", timeout=30)
    submit(n, time.time() + 10)
    n += 1
    exited = {}

    def waiter(p):
        p.wait()
        exited["t"] = time.time()  # to the millisecond, whatever the poll below does

    threading.Thread(target=waiter, args=(procs[0],), daemon=True).start()
    t_cut = time.time()
    proxy.cut_all()
    t_lead = None
    deadline = t_cut + LEASE + RENEW + SLACK + 10
    while time.time() < deadline and ("t" not in exited or t_lead is None):
        if t_lead is None and readyz(1)[0] == 200:
            t_lead = time.time()
        time.sleep(0.02)
    t_exit = exited.get("t")
    check(procs[0].poll() == 75, f"the cut-off leader exits with status 75 "
          f"({procs[0].poll()})")
    # it gives up the lease less a fifth after its last renewal was sent
    # (before the cut), so the lease, which the database extended from a
    # later moment, cannot have expired yet; 0.3 s of slack for the watchdog
    # and the process's end on a loaded machine
    bound = LEASE * 0.8 + 0.3
    check(t_exit is not None and t_lead is not None and t_exit < t_lead and
          t_exit - t_cut < bound,
          f"it stopped {(t_exit or 0) - t_cut:.2f} s after the cut (bound {bound:g} s), "
          f"before the standby led ({(t_lead or 0) - t_cut:.2f} s after)")
    log0 = open(os.path.join(TMP, LOGS[0])).read()
    check("stopping as leader of epoch" in log0, "its log says why it stopped")
    who, _ = submit(n, time.time() + 10)
    n += 1
    check(who == 1, "the new leader acknowledges submissions")
    proxy.close()

    # every acknowledged job exactly once, again, after all of it
    st, d = http_call(URLS[1], "GET", "/v1/jobs?limit=1000", alice)
    names = [j["name"] for j in d.get("jobs", [])] if st == 200 else []
    check(len(names) == len(set(names)) == len(acked) and
          all(("j" + k[3:]) in names for k in acked),
          f"after the cut: {len(acked)} acknowledged, {len(names)} stored, none twice")

    # --- the database away for everyone (both behind proxies, both cut for
    # DOWN_S): the leader exits, the standby answers 503 naming no leader
    # throughout; once it is back (and the exited one restarted, as a
    # supervisor would), one of them leads and nothing is lost
    DOWN_S = 5.0
    procs[1].send_signal(signal.SIGTERM)
    procs[1].wait(timeout=30)
    pa, pb = Proxy(proxy.port_to), Proxy(proxy.port_to)
    procs[0] = start(0, STORE.replace(f":{pa.port_to}/", f":{pa.port}/"))
    wait_for(lambda: readyz(0)[0] == 200, "leader behind proxy a", timeout=30)
    procs[1] = start(1, STORE.replace(f":{pb.port_to}/", f":{pb.port}/"))
    wait_for(lambda: readyz(1)[0] == 503, "standby behind proxy b", timeout=30)
    t_cut = time.time()
    pa.cut_all()
    pb.cut_all()
    answers = set()
    while time.time() < t_cut + max(DOWN_S, LEASE + RENEW):
        st, d = http_call(URLS[1], "GET", "/v1/jobs", alice, timeout=5)
        answers.add((st, d["error"]["code"] if isinstance(d, dict) and "error" in d else None))
        time.sleep(0.2)
    last = http_call(URLS[1], "GET", "/v1/jobs", alice, timeout=5)[1]
    check(procs[0].poll() == 75, f"database down: the leader exited 75 ({procs[0].poll()})")
    check(procs[1].poll() is None and answers == {(503, "standby")},
          f"database down: the standby stays up answering 503 standby ({answers})")
    check(isinstance(last, dict) and last["error"]["leader"] is None,
          "database down: once the lease ran out the standby names no leader")
    pa.resume()
    pb.resume()
    t_back = time.time()
    procs[0] = start(0, STORE.replace(f":{pa.port_to}/", f":{pa.port}/"))
    ok = wait_for(lambda: readyz(0)[0] == 200 or readyz(1)[0] == 200,
                  "database back: one controller leads", timeout=LEASE + RENEW + SLACK + 10)
    lead = 0 if readyz(0)[0] == 200 else 1
    check(ok and readyz(1 - lead)[0] == 503,
          f"database back: controller {lead} leads {time.time() - t_back:.2f} s later, the "
          f"other stands by")
    st, d = http_call(URLS[lead], "GET", "/v1/jobs?limit=1000", alice)
    names = [j["name"] for j in d.get("jobs", [])] if st == 200 else []
    check(len(names) == len(set(names)) == len(acked),
          f"database back: {len(acked)} acknowledged, {len(names)} stored, none twice")
    who, _ = submit(n, time.time() + 10)
    check(who == lead, "database back: the leader acknowledges submissions")
    pa.close()
    pb.close()

    # --- a controller that takes the lease and cannot open (a secrets key
    # that does not decrypt the stored secrets) gives it back at once and
    # waits two leases before it exits: the controller that can open leads
    # (it kept the lease to its end, and won it again under a supervisor)
    for p in procs:
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
    procs[0] = start(0)
    wait_for(lambda: readyz(0)[0] == 200, "a leader again, on the store itself", timeout=30)
    st, _ = http_call(URLS[0], "PUT", "/v1/secrets/HA_KEPT", admin,
                      {"value": "kept", "scope": "tenant", "tenant": "team-a"})
    check(st in (200, 201), f"a secret stored ({st})")
    wrong = os.path.join(TMP, "wrong.key")
    subprocess.run([TESSERAD, "--gen-secrets-key", wrong], check=True, capture_output=True)
    procs[1] = start(1, key_file=wrong)
    wait_for(lambda: readyz(1)[0] == 503, "the wrong-key controller stands by", timeout=30)
    procs[0].send_signal(signal.SIGKILL)
    procs[0].wait(timeout=30)
    gave = wait_for(lambda: "gave the lease back" in open(os.path.join(TMP, LOGS[1])).read(),
                    "the wrong-key controller leads, cannot open, gives the lease back",
                    timeout=LEASE + RENEW + SLACK)
    t0 = time.time()
    procs[0] = start(0)
    ok = wait_for(lambda: readyz(0)[0] == 200, "the controller that can open leads",
                  timeout=LEASE + SLACK)
    check(gave and ok and time.time() - t0 < RENEW + SLACK,
          f"it leads {time.time() - t0:.2f} s after its start, not after the lease ran out")
    procs[1].wait(timeout=2 * LEASE + SLACK)
    check(procs[1].returncode == 1, f"and it exits 1 ({procs[1].returncode})")

    # --- a standby that cannot read the store (a database that is not
    # there) says so, rather than that no leader holds the lease
    bad = STORE.rsplit("/", 1)[0] + "/no_such_database"
    procs[1] = start(1, bad)
    said = wait_for(lambda: "cannot read the store's lease" in readyz(1)[1],
                    "a blind standby's /readyz says it cannot read the lease", timeout=30)
    st, d = http_call(URLS[1], "GET", "/v1/jobs", alice)
    msg = d["error"]["message"] if isinstance(d, dict) and "error" in d else ""
    check(said and st == 503 and "cannot read the store's lease" in msg and
          "no leader holds" not in msg and "no_such_database" not in msg,
          f"and its 503 says it cannot tell who leads, naming no database: {st} {msg}")
    check("cannot read the lease" in open(os.path.join(TMP, LOGS[1])).read(),
          "its log says why")
finally:
    for p in procs:
        if p and p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        if p:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    pg_stop(PGDIR)
finish(TMP, LOGS)
