#!/usr/bin/env python3
"""Job dependencies in a running tesserad (docs/job-spec.md "dependency").

    dependency_test.py TESSERAD

One virtual node of 4 GPUs; jobs of 1 GPU that "run" for a `duration`.
At submission a dependency naming an unknown job, or another tenant's job,
is a 400 naming `dependency` and the id; a malformed one too. An afterok
chain runs in order, each waiting meanwhile with reason `dependency` and a
why naming the job it waits for. afternotok on a completed job and afterok
on a cancelled one fail the dependent job at once, with the reason in its
`failed` event. afterany runs after a cancelled job; `?` runs as soon as
one side holds; `after` as soon as the job starts; singleton waits for the
earlier job of the same name and owner. Across a restart of tesserad a
dependent job keeps waiting with reason `dependency` (the ended job it
names is read from the store), and fails once its other job is cancelled.
Every wait is bounded.
"""
import os
import subprocess
import sys
import tempfile
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_for, wait_ready  # noqa

TMP = tempfile.mkdtemp(prefix="tessera-dep-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


write("cluster.yaml", """node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {name: n1, class: g4}
""")
write("tenants.yaml", """tenants:
  org:
    teams:
      team-a: {}
      team-b: {}
""")
write("tesserad.yaml", f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
virtual_nodes: all
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, backoff: 0s}}
""")

procs = []


def start():
    p = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "a"))
    procs.append(p)
    check(wait_ready(URL), "tesserad is ready")
    return p


def spec(name, duration, dependency=None, tenant="team-a"):
    s = {"tenant": tenant, "name": name, "command": ["run"], "time_limit": "1h",
         "duration": duration, "tasks": [{"gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}]}
    if dependency is not None:
        s["dependency"] = dependency
    return s


try:
    proc = start()
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()

    def call(method, path, body=None, token=admin):
        return http_call(URL, method, path, token, body)

    def submit(*a, token=admin, **k):
        st, d = call("POST", "/v1/jobs", spec(*a, **k), token)
        check(st == 201, f"{a[0]} submitted ({st} {d if st != 201 else ''})")
        return d["jobs"][0]["id"] if st == 201 else 0

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}")[1]["job"]

    def events(jid):
        return call("GET", f"/v1/jobs/{jid}/events")[1]["events"]

    def state_is(jid, state):
        return lambda: job(jid)["state"] == state

    def waits_for_dep(jid, phrase):
        def pred():
            j = job(jid)
            return j if j["state"] == "pending" and j["reason"] == "dependency" and \
                phrase in (j["why"] or "") else None
        return pred

    def failed_for(jid, phrase):
        def pred():
            ev = [e for e in events(jid) if e["kind"] == "failed"]
            return ev[0] if ev and job(jid)["state"] == "failed" and \
                phrase in (ev[0].get("detail") or "") else None
        return pred

    # ---- refused at submission ------------------------------------------------------
    st, d = call("POST", "/v1/jobs", spec("x", "1s", "afterok:987654"))
    check(st == 400 and d["error"]["fields"][0]["path"] == "dependency" and
          "987654" in d["error"]["message"], f"an unknown job id is a 400 naming it: {st} {d}")
    st, d = call("POST", "/v1/jobs", spec("x", "1s", "afterok:1?afterany:2,afterok:3"))
    check(st == 400 and d["error"]["fields"][0]["path"] == "dependency" and
          "cannot be mixed" in d["error"]["message"], f"',' and '?' mixed is a 400: {st} {d}")
    # no cap on ids but the text's (arrays_test.py submits one naming 100)
    st, d = call("POST", "/v1/jobs", spec("x", "1s", "afterok:" + ":".join(["1"] * 2100)))
    check(st == 400 and "4207 characters, at most 4096" in d["error"]["message"],
          f"a text over 4096 characters is a 400: {st} {d}")

    # tenants: a user names only its tenant's jobs
    toks = {}
    for name, tenant in [("ann", "team-a"), ("bob", "team-b")]:
        st, d = call("POST", "/v1/tokens", {"name": name, "role": "user", "tenant": tenant})
        check(st == 201, f"token {name} ({st})")
        toks[name] = d["token"]["secret"] if st == 201 else "tsk_none"
    a_job = submit("ann-job", "1s", token=toks["ann"])
    st, d = call("POST", "/v1/jobs", spec("bob-job", "1s", f"afterok:{a_job}", tenant="team-b"),
                 toks["bob"])
    check(st == 400 and d["error"]["fields"][0]["path"] == "dependency" and
          str(a_job) in d["error"]["message"],
          f"team-b's user cannot name team-a's job {a_job}: {st} {d}")
    submit("ann-next", "1s", f"afterany:{a_job}", token=toks["ann"])

    # ---- an afterok chain runs in order --------------------------------------------
    a = submit("a", "2s")
    b = submit("b", "1s", f"afterok:{a}")
    c = submit("c", "1s", f"afterok:{b}")
    j = wait_for(waits_for_dep(b, f"waits for job {a} ("), "b waits with reason dependency", 10)
    if j:
        check(j["why"].endswith("to end ok"), f"b's why: {j['why']}")
        e = call("GET", f"/v1/jobs/{b}/explain")[1]
        check(e.get("reason") == "dependency" and e.get("queue_position") is None and
              "dependency" in (e.get("estimated_start") or {}).get("reason", ""),
              f"explain says it is not ranked, for its dependency: {e}")
    wait_for(waits_for_dep(c, f"waits for job {b} (pending) to end ok"), "c waits for b", 10)
    wait_for(state_is(c, "completed"), "the chain completes", 30)
    ja, jb, jc = job(a), job(b), job(c)
    check(ja["state"] == jb["state"] == "completed", "a and b completed")
    check(jb["start_time"] >= ja["end_time"] and jc["start_time"] >= jb["end_time"],
          f"in order: a ends {ja['end_time']}, b starts {jb['start_time']} ends "
          f"{jb['end_time']}, c starts {jc['start_time']}")
    check(jb["spec"]["dependency"] == f"afterok:{a}", f"the spec keeps it: {jb['spec']}")

    # ---- dependencies that can never be met fail at once ----------------------------
    d1 = submit("d1", "1s", f"afternotok:{a}")
    ev = wait_for(failed_for(d1, f"job {a} completed (afternotok:{a})"),
                  "afternotok on a completed job fails", 10)
    if ev:
        check(ev["detail"].startswith("dependency can never be met"), f"detail: {ev['detail']}")
        check(job(d1)["start_time"] is None, "it never started")
    long1 = submit("long1", "5m")
    f1 = submit("f1", "1s", f"afterok:{long1}")
    any1 = submit("any1", "1s", f"afterany:{long1}")
    wait_for(waits_for_dep(any1, f"job {long1} (running) to end"), "afterany waits", 10)
    st, _ = call("POST", f"/v1/jobs/{long1}/cancel")
    check(st in (200, 202), f"long1 cancelled ({st})")
    wait_for(failed_for(f1, f"job {long1} cancelled (afterok:{long1})"),
             "afterok on a cancelled job fails", 10)
    wait_for(state_is(any1, "completed"), "afterany runs after the cancelled job", 15)

    # ---- '?' and after ----------------------------------------------------------------
    long2 = submit("long2", "5m")
    or1 = submit("or1", "1s", f"afterok:{long2}?afterany:{long1}")
    wait_for(state_is(or1, "completed"), "a?b runs when b holds while a runs", 15)
    check(job(long2)["state"] == "running", "long2 still runs")
    af = submit("af", "1s", f"after:{long2}")
    wait_for(state_is(af, "completed"), "after: runs once the job started", 15)
    call("POST", f"/v1/jobs/{long2}/cancel")

    # ---- singleton ------------------------------------------------------------------
    s1 = submit("solo", "2s")
    s2 = submit("solo", "1s", "singleton")
    j = wait_for(waits_for_dep(s2, f"job {s1}"), "the second singleton waits", 10)
    if j:
        check("an earlier job named solo of the same owner" in j["why"], f"why: {j['why']}")
    wait_for(state_is(s2, "completed"), "the second singleton runs after the first", 20)
    j1, j2 = job(s1), job(s2)
    check(j2["start_time"] >= j1["end_time"], "singleton: one at a time")
    other = submit("solo", "1s", "singleton", token=toks["ann"])
    wait_for(state_is(other, "completed"), "another owner's job of that name is not held up", 15)

    # ---- across a restart ---------------------------------------------------------
    long3 = submit("long3", "5m")
    r1 = submit("r1", "1s", f"afterok:{a},afterok:{long3}")
    wait_for(waits_for_dep(r1, f"waits for job {long3} (running) to end ok"),
             "r1 waits for long3", 10)
    stop_all([proc])
    procs.clear()
    proc = start()
    time.sleep(1.0)  # a few cycles
    j = wait_for(waits_for_dep(r1, f"waits for job {long3} (running) to end ok"),
                 "after the restart r1 still waits with reason dependency", 10)
    if j:
        check(f"job {a}" not in j["why"], f"the completed job counts as met: {j['why']}")
    call("POST", f"/v1/jobs/{long3}/cancel")
    wait_for(failed_for(r1, f"job {long3} cancelled"), "then fails when long3 is cancelled", 10)
finally:
    stop_all(procs)
finish(TMP, ["log"])
