#!/usr/bin/env python3
"""A 100,000-element array in a running tesserad on virtual nodes, its
pending elements kept as one record until the scheduler wants them
(docs/job-spec.md "Large arrays", src/ctld/array_lazy.c).

    array_lazy_test.py TESSERAD

Two virtual 8-GPU nodes. The array (throttle 3, 1-s elements) is accepted
within the client's timeout and answers one id per element, consecutive;
an element far down the array reads pending, named and explained, before it
is a job; `tessera jobs` lists the rest as ID_[a-b]; elements start in index
order, never more than 3 at once; one unstarted element is cancelled alone
and the listing leaves a hole for it; afterok on the whole array waits; the
tenant's queued cap counts the elements that are not jobs yet; a restart
keeps all of it (the hole, the order, the count); the whole array's cancel
ends every element, the afterok dependent fails, and nothing stays pending.
SQLite; PostgreSQL instead when TS_TEST_PG_URL names a server (a database
of its own, dropped at the end). Every wait is bounded."""
import os
import subprocess
import sys
import tempfile
import time

TESSERAD = sys.argv[1]
CLI = os.path.join(os.path.dirname(os.path.abspath(TESSERAD)), "tessera")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_for, wait_ready  # noqa

N = 100000
PG = os.environ.get("TS_TEST_PG_URL")
TMP = tempfile.mkdtemp(prefix="tessera-array-lazy-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


def pg_database():
    """A database of its own on TS_TEST_PG_URL's server (dropped at the end)."""
    if not PG:
        return None, None
    name = f"tessera_array_lazy_{os.getpid()}"
    subprocess.run(["psql", PG, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True,
                   capture_output=True)
    subprocess.run(["psql", PG, "-qc", f"CREATE DATABASE {name}"], check=True,
                   capture_output=True)
    return PG.rsplit("/", 1)[0] + "/" + name, name


STORE, PGDB = pg_database()
write("cluster.yaml", """node_classes:
  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'n[1-2]', class: g8}
""")
write("tenants.yaml", "tenants:\n  team-a: {}\n  team-b: {}\n")
write("tesserad.yaml", f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
virtual_nodes: all
limits: {{requests_per_s: 100000, burst: 100000, queued_jobs_per_tenant: 150000}}
scheduler: {{interval: 0.2s, backoff: 0s}}
""" + (f"store: {STORE}\n" if STORE else ""))

procs = []
ADMIN = None


def start():
    p = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "a"))
    procs.append(p)
    check(wait_ready(URL, timeout=60), "tesserad is ready")
    return p


def call(method, path, body=None, timeout=30):
    return http_call(URL, method, path, ADMIN, body, timeout=timeout)


def spec(name, **kw):
    return dict({"tenant": "team-a", "name": name, "tier": "opportunistic",
                 "command": ["run"], "time_limit": "1h", "duration": "1s",
                 "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}]}, **kw)


def job(jid):
    return call("GET", f"/v1/jobs/{jid}")[1].get("job", {})


def cli(*args):
    env = dict(os.environ, TESSERA_URL=URL, TESSERA_TOKEN=ADMIN)
    return subprocess.run([CLI, *args], env=env, capture_output=True, text=True, timeout=60)


def starts(first, upto):
    return [job(first + k).get("start_time") or 0 for k in range(upto)]


def in_order(first, upto, what):
    s = starts(first, upto)
    done = [x for x in s if x > 0]
    check(len(done) >= 1 and s[:len(done)] == done and done == sorted(done),
          f"{what}: elements started in index order: {s}")


def running(first):
    st, d = call("GET", "/v1/jobs?state=running&limit=1000")
    return [j["id"] for j in d.get("jobs", []) if first <= j["id"] < first + N]


try:
    start()
    ADMIN = open(os.path.join(TMP, "state", "admin.token")).read().strip()

    # ---- submission: one record, answered within the client's timeout ----
    t0 = time.monotonic()
    st, d = call("POST", "/v1/jobs", spec("big", array_size=N, array_throttle=3), timeout=120)
    took = time.monotonic() - t0
    ids = [j["id"] for j in d.get("jobs", [])] if st == 201 else []
    check(st == 201 and len(ids) == N, f"an array of {N} is accepted: {st}, {len(ids)} ids "
          f"in {took:.2f} s")
    F = ids[0] if ids else 0
    check(ids == list(range(F, F + N)), "its ids are consecutive, element i is job F + i")
    last = job(F + N - 1)
    check(last.get("state") == "pending" and last.get("name") == f"big[{N - 1}]" and
          f"array {F}" in (last.get("why") or ""),
          f"its last element reads pending, named, explained: {last}")
    ev = call("GET", f"/v1/jobs/{F + N - 1}/events")
    check(ev[0] == 200, f"and has its events page: {ev[0]}")
    other = call("POST", "/v1/jobs", spec("plain"))[1]["jobs"][0]["id"]
    check(other >= F + N, f"a later job gets an id after the array's: {other} >= {F + N}")

    # held: its elements past the window would come pending and start
    st, d = call("POST", "/v1/jobs", spec("held-big", array_size=500, hold=True), timeout=120)
    check(st == 400 and "hold" in str(d) and "dependency" in str(d),
          f"a large array submitted held is refused, naming hold: {st} {d}")
    st, d = call("POST", "/v1/jobs", spec("held-small", array_size=64, hold=True))
    small = [j["id"] for j in d.get("jobs", [])] if st == 201 else []
    check(st == 201 and all(job(k).get("state") == "held" for k in small[-2:]),
          f"an array of 64 is taken held, each element: {st}")
    if small:
        call("POST", f"/v1/arrays/{small[0]}/cancel")

    # ---- listing: the elements not yet jobs, compactly ----
    st, d = call("GET", "/v1/jobs?limit=10")
    arr = [a for a in d.get("arrays", []) if a.get("array") == F]
    check(st == 200 and len(arr) == 1 and arr[0]["indices"].endswith(f"-{N - 1}") and
          arr[0]["pending"] > N - 1000, f"GET /v1/jobs lists the array's rest once: {arr}")
    r = cli("jobs", "--limit", "10")
    check(r.returncode == 0 and f"{F}_[" in r.stdout and f"-{N - 1}]" in r.stdout,
          f"tessera jobs prints {F}_[a-{N - 1}]: {r.returncode} {r.stdout[-400:]} {r.stderr}")
    r = cli("show", str(F + N - 1))
    check(r.returncode == 0 and f"big[{N - 1}]" in r.stdout and "pending" in r.stdout,
          f"tessera show of its last element shows it pending: {r.returncode} {r.stderr}")

    # ---- the throttle: lowest first, 3 at once ----
    most = 0
    end = time.monotonic() + 20
    while time.monotonic() < end and not (job(F + 8).get("state") == "completed"):
        most = max(most, len(running(F)))
        time.sleep(0.1)
    check(job(F + 8).get("state") == "completed", "element 8 completes")
    check(0 < most <= 3, f"never more than 3 run at once: at most {most} seen")
    in_order(F, 12, "before the restart")

    # ---- one unstarted element alone ----
    mid = F + N // 2
    st, d = call("POST", f"/v1/jobs/{mid}/cancel")
    check(st == 200 and d.get("job", {}).get("state") == "cancelled",
          f"an unstarted element far down is cancelled alone: {st} {d}")
    check(job(mid + 1).get("state") == "pending", "its neighbour still waits")
    st, d = call("GET", "/v1/jobs?limit=10")
    arr = [a for a in d.get("arrays", []) if a.get("array") == F]
    hole = f"-{N // 2 - 1},{N // 2 + 1}-{N - 1}"
    check(arr and arr[0]["indices"].endswith(hole), f"the listing has a hole for it: {arr}")

    # ---- a whole-array dependency, the queued cap ----
    dep = call("POST", "/v1/jobs", spec("after", dependency=f"afterok:{F}"))[1]["jobs"][0]["id"]
    wait_for(lambda: f"array {F}" in (job(dep).get("why") or ""), "afterok waits for the array")
    check(job(dep).get("reason") == "dependency", f"its reason: {job(dep).get('reason')}")
    st, d = call("POST", "/v1/jobs", spec("more", array_size=N), timeout=120)
    check(st == 429 and "too_many_queued" in str(d),
          f"the elements not yet jobs count against the queued cap: {st}")
    st, d = call("POST", "/v1/jobs", spec("more", tenant="team-b", array_size=N // 2),
                 timeout=120)
    check(st == 201, f"another tenant's array is its own count: {st}")
    if st == 201:
        call("POST", f"/v1/arrays/{d['jobs'][0]['id']}/cancel", timeout=120)

    # ---- restart: the record comes back from the store ----
    stop_all(procs)
    procs.clear()
    start()
    check(job(F + N - 1).get("state") == "pending", "after a restart the last element waits")
    check(job(mid).get("state") == "cancelled", "the cancelled element stays cancelled")
    st, d = call("GET", "/v1/jobs?limit=10")
    arr = [a for a in d.get("arrays", []) if a.get("array") == F]
    check(arr and arr[0]["indices"].endswith(hole), f"the hole is still there: {arr}")
    k0 = max(k for k in range(64) if job(F + k).get("state") in ("completed", "running")) + 1
    wait_for(lambda: job(F + k0 + 3).get("state") == "completed",
             f"the elements after the restart start too ({k0}..{k0 + 3})", timeout=30)
    in_order(F, k0 + 4, "after the restart")
    made = [job(F + k) for k in range(k0 + 4, k0 + 12)]
    made = [j for j in made if j.get("state") == "pending" and
            "become jobs" not in (j.get("why") or "")]
    check(made and all(j.get("start_time") is None and j.get("end_time") is None and
                       j.get("preemptions") == 0 for j in made),
          f"elements made jobs after the restart start afresh (not as element 0 ended): "
          f"{[(j['id'], j.get('start_time'), j.get('end_time')) for j in made]}")

    # ---- the whole array ----
    st, d = call("POST", f"/v1/arrays/{F}/cancel", timeout=120)
    check(st == 200 and d.get("elements") == N and d.get("cancelled", 0) > N - 1000,
          f"the array's cancel ends the rest: {st} {d}")
    check(job(F + N - 1).get("state") == "cancelled", "its last element reads cancelled")
    check(job(F + N // 4).get("state") == "cancelled", "and one in between too")
    st, d = call("GET", "/v1/jobs?limit=10")
    check(not [a for a in d.get("arrays", []) if a.get("array") == F],
          "the listing has no pending rest any more")
    wait_for(lambda: job(dep).get("state") == "failed", "afterok on the cancelled array fails")
    st, d = call("POST", "/v1/jobs", spec("again", array_size=N), timeout=120)
    check(st == 201, f"the cap has room again: {st}")
finally:
    stop_all(procs)
    if PGDB:
        subprocess.run(["psql", PG, "-qc", f"DROP DATABASE IF EXISTS {PGDB}"],
                       capture_output=True)
finish(TMP, [os.path.join(TMP, "log")])
