#!/usr/bin/env python3
"""Reads do not wait for the scheduling cycle.

    reads_test.py TESSERAD

The cycle computes with the controller's lock released and lets waiting
readers in between its passes over every job (docs/tesserad.md). Here every
cycle is stretched by 1.6 s (TESSERAD_TEST_CYCLE_DELAY_MS, test builds:
half with the lock released, half holding it in 5-ms steps with a yield
after each), and cycles run back to back (an interval of 10 ms, virtual
nodes, jobs ending all the time). A job read, a page of jobs, an explain,
/readyz, a submission, a node, the node list, the tenants and /metrics must
each answer well within a quarter of a cycle. When the lock was held for
the whole cycle, every read that met one waited up to its end; reads of
nodes, tenants and /metrics then still waited for the cycle's end (the
cycle bound its starts into the live cluster as it planned; now it plans on
its own copy and applies the starts under the lock once written). Each
answer must add up: a node's free GPUs and its jobs (one GPU each) make its
8 GPUs, and /metrics' allocated GPUs equal the tenant's GPUs used, so no
read sees a start the cycle has planned but not written. A change (a
cancel) waits for the cycle running when it comes: the next cycle lets it
in first (it used to wait cycle after cycle); counted in cycles planned
meanwhile, two at most (a write slower than the next cycle's wait for
writes in flight is applied after that cycle). The cycle's
test pause sits in its dependency pass, where a submission comes in at a
yield: a job with a `singleton` dependency submitted then must wait for its
running namesake (one decided against the table of names built before it
came started beside it).

Then, on a slow store (TESSERAD_STORE_FAULTS delay_ms=1500: every write
waits 1.5 s before its commit), PUT /v1/tenants replaces the tenants while
another request submits to a tenant the new document removes: job reads
answer within 400 ms while the tenants are written (they waited for the
whole write when it held the lock), and the submission either is refused
naming the tenant or makes the replacement fail with 409, never a job
stored for a tenant that is gone. Last, without the delay on 400 nodes
while four clients read the node list: a job read as running is always
among its node's jobs. Every wait is bounded.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, ctld_files, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-reads-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
# (800 ms made a quarter 200 ms: a submission, which writes the store, took
# 550 ms once on a 2-core host busy with other work, not waiting for a cycle)
DELAY_MS = 1600
BOUND_S = DELAY_MS / 1000.0 / 4  # a quarter of a cycle: 400 ms


def configure(nodes, config, state_dir):
    """Virtual 8-GPU nodes v-1..v-NODES, and tesserad's configuration."""
    ctld_files(TMP, PORT, [f"{{names: 'v-[1-{nodes}]', class: g8}}"],
               "virtual_nodes: all\nscheduler: {interval: 0.01s}\n", config, state_dir)


configure(2, "tesserad.yaml", "state")


def call(method, path, token, body=None):
    return http_call(URL, method, path, token, body, timeout=30)


def metric_values(txt):
    out = {}
    for line in txt.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def timed(method, path, token, body=None):
    t = time.monotonic()
    st, d = call(method, path, token, body)
    return st, d, time.monotonic() - t


env = dict(os.environ, TESSERAD_TEST_CYCLE_DELAY_MS=str(DELAY_MS))
log = open(os.path.join(TMP, "log"), "w")
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=log, env=env)
try:
    check(wait_ready(URL, timeout=30), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    # 40 one-GPU jobs of 1 s on 16 GPUs: some run, some wait, some end in
    # every cycle, so the loop never rests
    st, d = call("POST", "/v1/jobs", admin,
                 {"name": "r", "tenant": "t", "array_size": 40,
                  "tasks": [{"gpus": 1}], "duration": 1})
    check(st in (200, 201), f"an array of 40 is accepted ({st})")
    jobs = d.get("jobs", []) if isinstance(d, dict) else []
    first = jobs[0]["id"] if jobs else 0
    check(len(jobs) == 40, f"40 ids ({len(jobs)})")
    time.sleep(1.0)
    lat = {"job": [], "page": [], "explain": [], "readyz": [], "submit": [], "node": [],
           "nodes": [], "tenants": [], "metrics": []}
    bad = []  # answers that do not add up
    t_end = time.monotonic() + 4 * DELAY_MS / 1000.0  # four cycles or more
    i = 0
    while time.monotonic() < t_end and i < 400:
        jid = first + i % 40
        st, d, dt = timed("GET", f"/v1/jobs/{jid}", admin)
        lat["job"].append(dt if st == 200 else 99.0)
        st, d, dt = timed("GET", "/v1/jobs?limit=20", admin)
        lat["page"].append(dt if st == 200 else 99.0)
        st, d, dt = timed("GET", f"/v1/jobs/{jid}/explain", admin)
        lat["explain"].append(dt if st == 200 else 99.0)
        st, d, dt = timed("GET", "/readyz", None)
        lat["readyz"].append(dt if st == 200 else 99.0)
        st, d, dt = timed("GET", "/v1/nodes/v-1", admin)
        node = d.get("node", {}) if st == 200 and isinstance(d, dict) else {}
        lat["node"].append(dt if st == 200 else 99.0)
        if node.get("gpus_free", -1) + len(node.get("jobs", [])) != 8:
            bad.append(("node", node.get("gpus_free"), node.get("jobs")))
        st, d, dt = timed("GET", "/v1/nodes", admin)
        lat["nodes"].append(dt if st == 200 and len(d.get("nodes", [])) == 2 else 99.0)
        for nd in d.get("nodes", []) if st == 200 else []:
            if nd.get("gpus_free", -1) + len(nd.get("jobs", [])) != 8:
                bad.append(("nodes", nd.get("name"), nd.get("gpus_free"), nd.get("jobs")))
        st, d, dt = timed("GET", "/v1/tenants", admin)
        lat["tenants"].append(dt if st == 200 and d.get("tenants") else 99.0)
        st, txt, dt = timed("GET", "/metrics", admin)
        lat["metrics"].append(dt if st == 200 else 99.0)
        m = metric_values(str(txt)) if st == 200 else {}
        alloc = m.get('tessera_gpus{state="allocated"}')
        used = m.get('tessera_tenant_gpus_used{tenant="t",gpu_model="H100-80GB"}', 0.0)
        if alloc is None or abs(alloc - used) > 1e-6:
            bad.append(("metrics", alloc, used))
        if i % 8 == 0:
            st, d, dt = timed("POST", "/v1/jobs", admin,
                              {"name": f"s{i}", "tenant": "t",
                               "tasks": [{"gpus": 1}], "duration": 1})
            lat["submit"].append(dt if st in (200, 201) else 99.0)
        i += 1
        time.sleep(0.01)
    cycles_seen = 4 * DELAY_MS / 1000.0
    for k, v in lat.items():
        worst = max(v) if v else 99.0
        check(len(v) > 0 and worst < BOUND_S,
              f"{k}: {len(v)} calls over {cycles_seen:.1f} s of cycles, the slowest "
              f"{worst * 1e3:.0f} ms (bound {BOUND_S * 1e3:.0f} ms, a cycle {DELAY_MS} ms)")
    check(not bad, f"every node, node list and /metrics answer adds up ({len(bad)} did not: "
          f"{bad[:3]})")
    m = metric_values(str(call("GET", "/metrics", admin)[1]))
    check(m.get("tessera_read_view_answers_total", 0) > 0,
          f"reads were answered while a cycle planned "
          f"({m.get('tessera_read_view_answers_total')} of them)")
    ONE_CYCLE_S = 1.25 * DELAY_MS / 1000.0
    # singleton: a namesake submitted while the dependency pass runs waits
    one = {"name": "S", "tenant": "t", "tasks": [{"gpus": 1}], "duration": 120,
           "dependency": "singleton"}
    st, d = call("POST", "/v1/jobs", admin, one)
    s1 = d["jobs"][0]["id"] if st == 201 and d.get("jobs") else 0
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and \
            call("GET", f"/v1/jobs/{s1}", admin)[1].get("job", {}).get("state") != "running":
        time.sleep(0.1)
    later = []
    for _ in range(8):  # spread over more than a cycle
        st, d = call("POST", "/v1/jobs", admin, one)
        if st == 201 and d.get("jobs"):
            later.append(d["jobs"][0]["id"])
        time.sleep(0.12)
    time.sleep(3 * DELAY_MS / 1000.0)  # decided by two cycles at least
    states = [call("GET", f"/v1/jobs/{i}", admin)[1].get("job", {}) for i in later]
    s1_state = call("GET", f"/v1/jobs/{s1}", admin)[1].get("job", {}).get("state")
    check(s1_state == "running" and len(later) == 8 and
          all(j.get("state") == "pending" and j.get("reason") == "dependency" for j in states),
          f"singleton: with S running ({s1_state}), its 8 namesakes wait: "
          f"{[(j.get('state'), j.get('reason')) for j in states]}")
    # a cancel waits for the cycle running, then goes first: counted in
    # cycles, not milliseconds (under load its write may outlast the next
    # cycle's wait for writes in flight, CTLD_CHANGERS_WAIT_S, and its apply
    # then waits for that cycle too: two cycles at most, never more)
    def cycles():
        st, txt = call("GET", "/metrics", admin)
        return metric_values(str(txt)).get("tessera_scheduling_cycles_total", -1) \
            if st == 200 else -1
    worst, most = 0.0, 0
    for jid in later[:4]:
        before = cycles()
        st, d, dt = timed("POST", f"/v1/jobs/{jid}/cancel", admin)
        passed = cycles() - before
        worst = max(worst, dt if st == 200 else 99.0)
        most = max(most, int(passed) if st == 200 and before >= 0 else 99)
        time.sleep(0.25)
    check(most <= 2, f"cancels answer within the cycle running and the next at most "
          f"({most} cycles planned meanwhile at most; the slowest {worst * 1e3:.0f} ms, "
          f"a cycle {ONE_CYCLE_S * 1e3 / 1.25:.0f} ms)")
    st, txt, dt = timed("GET", "/metrics", admin)
    check(st == 200 and "tessera_scheduling_cycles_total" in str(txt),
          f"/metrics answers ({dt * 1e3:.0f} ms)")
    # the cycles went on: every job of the array ends
    deadline = time.monotonic() + 90
    done = 0
    while time.monotonic() < deadline:
        st, d = call("GET", "/v1/jobs?state=completed&limit=500", admin)
        done = len(d.get("jobs", [])) if st == 200 and isinstance(d, dict) else 0
        if done >= 40:
            break
        time.sleep(0.5)
    check(done >= 40, f"the cycles go on: {done} jobs completed (at least 40)")
finally:
    stop_all([proc])

# ---- tenants replaced on a slow store ---------------------------------------
open(os.path.join(TMP, "tenants.yaml"), "w").write("tenants:\n  t: {}\n  gone: {}\n")
env = dict(os.environ, TESSERAD_STORE_FAULTS="delay_ms=1500")
log2 = open(os.path.join(TMP, "log2"), "w")
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=log2, env=env)
try:
    check(wait_ready(URL, timeout=30), "tesserad is ready again (slow store)")
    st, d = call("GET", "/v1/jobs?limit=1", admin)
    some = d["jobs"][0]["id"] if st == 200 and d.get("jobs") else first
    out = {}

    def put_tenants():
        out["put"] = http_call(URL, "PUT", "/v1/tenants", admin, raw=b"tenants:\n  t: {}\n",
                               headers={"Content-Type": "application/yaml"}, timeout=60)

    def submit_gone():
        time.sleep(0.3)  # while the tenants are being written
        out["submit"] = call("POST", "/v1/jobs", admin,
                             {"name": "late", "tenant": "gone", "tasks": [{"gpus": 1}],
                              "duration": 1})

    threads = [threading.Thread(target=put_tenants), threading.Thread(target=submit_gone)]
    for th in threads:
        th.start()
    time.sleep(0.2)
    reads = []
    t_end = time.monotonic() + 1.2
    while time.monotonic() < t_end:
        st, d, dt = timed("GET", f"/v1/jobs/{some}", admin)
        reads.append(dt if st == 200 else 99.0)
        time.sleep(0.02)
    for th in threads:
        th.join(timeout=60)
    worst = max(reads) if reads else 99.0
    check(worst < BOUND_S, f"job reads while the tenants are written: {len(reads)}, the slowest "
          f"{worst * 1e3:.0f} ms (bound {BOUND_S * 1e3:.0f} ms, a write 1,500 ms)")
    pst, _ = out.get("put", (0, None))
    sst, sd = out.get("submit", (0, None))
    check((pst == 200 and sst in (400, 404, 422)) or (pst == 409 and sst in (200, 201)),
          f"the replacement and a submission to the tenant it removes: PUT {pst}, "
          f"submission {sst} (one of them refused)")
    st, d = call("GET", "/v1/tenants", admin)
    names = sorted(t["name"] for t in d.get("tenants", [])) if st == 200 else []
    st, d = call("GET", "/v1/jobs?tenant=gone&limit=10", admin)
    active = [j["id"] for j in d.get("jobs", []) if j["state"] in ("pending", "running")] \
        if st == 200 else []
    check(("gone" in names) == bool(active) or (not active),
          f"no active job of a tenant that is gone (tenants {names}, jobs of gone {active})")
    check("stored but not loaded" not in open(os.path.join(TMP, "log2")).read(),
          "no submission was stored without being loaded")
finally:
    stop_all([proc])

# ---- a job read as running is on its node ------------------------------------
# Without the test's cycle delay, on 400 nodes whose list takes a while to
# render: four clients read the node list without pause (holding the lock
# while the cycle waits to apply what it has written), and each new job is
# read until it runs, then its node at once. The job must be among the
# node's jobs: a job read from the store row said running before the cycle
# applied its start, while the node, read from the cycle's copies, still
# had the GPU free (up to 8 of 180 such reads, in a build before the job's live
# state came from memory).
configure(400, "tesserad3.yaml", "state3")
log3 = open(os.path.join(TMP, "log3"), "w")
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad3.yaml")],
                        stdout=subprocess.DEVNULL, stderr=log3)
stop = threading.Event()
try:
    check(wait_ready(URL, timeout=30), "tesserad is ready (400 nodes)")
    admin = open(os.path.join(TMP, "state3", "admin.token")).read().strip()

    def list_nodes():
        t_end = time.monotonic() + 120
        while not stop.is_set() and time.monotonic() < t_end:
            call("GET", "/v1/nodes", admin)

    hogs = [threading.Thread(target=list_nodes, daemon=True) for _ in range(4)]
    for th in hogs:
        th.start()
    seen, bad, mu = [0], [], threading.Lock()

    def follow(jid):
        t_end, job = time.monotonic() + 30, {}
        while time.monotonic() < t_end and job.get("state") != "running":
            st, d = call("GET", f"/v1/jobs/{jid}", admin)
            job = d.get("job", {}) if st == 200 and isinstance(d, dict) else {}
        if job.get("state") != "running" or not job.get("placement"):
            with mu:
                bad.append((jid, "never ran", job.get("state")))
            return
        where = job["placement"][0]["node"]
        st, d = call("GET", f"/v1/nodes/{where}", admin)
        node = d.get("node", {}) if st == 200 and isinstance(d, dict) else {}
        with mu:
            seen[0] += 1
            if jid not in node.get("jobs", []):
                bad.append((jid, where, node.get("gpus_free"), node.get("jobs")))

    for rnd in range(15):
        st, d = call("POST", "/v1/jobs", admin, {"name": f"v{rnd}", "tenant": "t",
                                                  "array_size": 12, "tasks": [{"gpus": 1}],
                                                  "duration": 600})
        ids = [j["id"] for j in d.get("jobs", [])] if st in (200, 201) else []
        followers = [threading.Thread(target=follow, args=(i,)) for i in ids]
        for th in followers:
            th.start()
        for th in followers:
            th.join(timeout=60)
    stop.set()
    check(seen[0] == 180 and not bad, f"every job read as running is on its node ({seen[0]} of "
          f"180 followed; wrong: {bad[:3]})")
finally:
    stop.set()
    stop_all([proc])
finish(TMP, [os.path.join(TMP, "log"), os.path.join(TMP, "log2"), os.path.join(TMP, "log3")])
