#!/usr/bin/env python3
"""Arrays, dependencies, impossible requests and the numbers of the API, in a
running tesserad on virtual nodes (docs/job-spec.md, docs/api.md).

    arrays_test.py TESSERAD

Four virtual 8-GPU H100 nodes (32 GPUs), one of them shared by fractions.
Tenants: org (24 guaranteed) > team-a (8), team-b (borrows at most 4), and
students beside it with no guarantee; later x and y, nobody guaranteed. A dependency may name more than 64
ids; afterok, afterany and afternotok on an array's id stand for every
element; the whole-array cancel endpoint and its refusals; a request that
can never fit is refused naming the field (total, GPUs per task, model, GPU
memory, CPU, one node, a tenant's guarantee or borrowing limit), while what
only waits is accepted; gpus_text for whole GPUs, shares and MIG; fair share
counted against the cluster's capacity where nobody is guaranteed (it read
0), and usage_share. Every wait is bounded.
"""
import os
import subprocess
import sys
import tempfile
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_for, wait_ready  # noqa

TMP = tempfile.mkdtemp(prefix="tessera-arrays-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


write("cluster.yaml", """node_classes:
  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
  g8s: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288, gpu_mode: shared}
nodes:
  - {names: 'n[1-3]', class: g8}
  - {name: s1, class: g8s}
""")
write("tenants.yaml", """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 24}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
      team-b: {borrow_limit: {gpu: {H100-80GB: 4}}}
  students: {}
""")
write("tesserad.yaml", f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
virtual_nodes: all
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, backoff: 0s, half_life: 60s}}
""")

procs = []
ADMIN = None


def call(method, path, body=None, token=None):
    return http_call(URL, method, path, token or ADMIN, body)


def spec(name, tenant="team-a", gpus=1, count=1, duration="30s", tier="guaranteed", **kw):
    task = {"count": count, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 1024}
    task.update(kw.pop("task", {}))
    return dict({"tenant": tenant, "name": name, "tier": tier, "command": ["run"],
                 "time_limit": "1h", "duration": duration, "tasks": [task]}, **kw)


def submit(body, token=None):
    st, d = call("POST", "/v1/jobs", body, token)
    check(st == 201, f"{body['name']} is accepted: {st} {d if st != 201 else ''}")
    return [j["id"] for j in d["jobs"]] if st == 201 else []


def refused(body, field, words, what):
    st, d = call("POST", "/v1/jobs", body)
    err = d.get("error", {}) if isinstance(d, dict) else {}
    paths = [f.get("path") for f in err.get("fields", [])]
    msg = err.get("message", "")
    check(st == 400 and paths == [field] and all(w in msg for w in words),
          f"{what}: 400 naming {field} and {words}: {st} {msg}")


def job(jid):
    return call("GET", f"/v1/jobs/{jid}")[1].get("job", {})


def state(jid):
    return job(jid).get("state")


try:
    procs.append(subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                                  stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(TMP, "log"), "a")))
    check(wait_ready(URL), "tesserad is ready")
    ADMIN = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    toks = {}
    for name, role, tenant in [("ann", "user", "team-a"), ("bob", "user", "team-b"),
                               ("vic", "viewer", "team-a")]:
        st, d = call("POST", "/v1/tokens", {"name": name, "role": role, "tenant": tenant})
        toks[name] = d["token"]["secret"] if st == 201 else None

    # ---- impossible requests: refused at submission, naming the field ----
    refused(spec("huge", count=1000, tier="opportunistic"), "tasks[0].count",
            ["1000 tasks of 1 GPU", "at most 32 can ever run"], "1000 GPUs on 32")
    refused(spec("wide", gpus=16, tier="opportunistic"), "tasks[0].gpus",
            ["16 GPUs per task", "is 8 GPUs"], "16 GPUs in one task on nodes of 8")
    refused(spec("a100", tier="opportunistic", task={"gpu_model": "A100-80GB"}),
            "tasks[0].gpu_model", ["it has H100-80GB"], "a model the cluster lacks")
    refused(spec("gmem", tier="opportunistic", task={"gpu_memory_mib": 100000}),
            "tasks[0].gpu_memory_mib", ["100000", "81920"], "more GPU memory than any GPU")
    refused(spec("cpu", tier="opportunistic", task={"cpu_milli": 100000}),
            "tasks[0].cpu_milli", ["100000", "64000"], "more CPU than any node")
    refused(spec("mem", tier="opportunistic", task={"memory_mib": 600000}),
            "tasks[0].memory_mib", ["600000", "524288"], "more memory than any node")
    refused(spec("onenode", count=9, tier="opportunistic", topology={"required": "node"}),
            "tasks[0].count", ["on one node", "holds 8"], "9 GPUs required on one node")
    refused(spec("frac", count=33, tier="opportunistic", gpus=None,
                 task={"gpus": 1, "gpu_fraction": 0.25}),
            "tasks[0].count", ["33 tasks of 0.25 GPU", "at most 32"],
            "33 quarter GPUs on the 8 shared GPUs")
    refused(spec("over", count=9), "tasks",
            ["9 GPUs of H100-80GB", "team-a's guarantee is 8"], "guaranteed above the guarantee")
    refused(spec("borrow", tenant="team-b", count=5, tier="opportunistic"), "tasks",
            ["5 GPUs of H100-80GB", "team-b's guarantee plus borrowing limit is 4"],
            "opportunistic above guarantee plus borrowing limit")
    refused(spec("students", tenant="students", count=1), "tasks",
            ["students's guarantee is 0"], "guaranteed work of a tenant with no guarantee")
    refused(spec("lent", tenant="students", count=25, tier="opportunistic"), "tasks",
            ["guarantees add up to 24", "at most 24 can ever run"],
            "more than every guarantee together (what nobody is guaranteed is not lent)")
    refused(spec("mig", tier="opportunistic", gpus=None, task={"gpus": 0, "mig_profile": "1g"}),
            "tasks[0].mig_profile", ["in MIG mode"], "a MIG instance with no GPU in MIG mode")
    refused(spec("frac-model", tier="opportunistic", gpus=None,
                 task={"gpus": 1, "gpu_fraction": 0.5, "gpu_memory_mib": 100000}),
            "tasks[0].gpu_memory_mib", ["100000"], "a share asking more memory than a GPU")
    # what only waits is accepted: 24 GPUs, as many as the guarantees (s1's
    # shared GPUs take whole-GPU work too)
    ids = submit(spec("all", tenant="students", count=24, tier="opportunistic", duration="1s"))
    check(len(ids) == 1, "24 GPUs of 24 guaranteed are accepted")
    wait_for(lambda: state(ids[0]) == "completed", "and run")

    # ---- gpus_text: one rendering for the CLI and the console ----
    st, d = call("POST", "/v1/jobs", spec("quarters", tier="opportunistic", gpus=None,
                                           count=4, task={"gpus": 1, "gpu_fraction": 0.25}))
    q = d["jobs"][0] if st == 201 else {}
    check(q.get("gpus_text") == "4\u00d70.25 any (1 GPU)",
          f"4 quarter GPUs read 4\u00d70.25 any (1 GPU): {q.get('gpus_text')}")
    wait_for(lambda: state(q.get("id")) == "running", "the quarters run")
    check(job(q.get("id")).get("gpus_text") == "4\u00d70.25 H100-80GB (1 GPU)",
          f"running, with their model: {job(q.get('id')).get('gpus_text')}")
    call("POST", f"/v1/jobs/{q.get('id')}/cancel")
    st, d = call("POST", "/v1/jobs", spec("two", count=2, gpus=4, tier="opportunistic"))
    check(st == 201 and d["jobs"][0]["gpus_text"] == "8\u00d7any",
          f"2 tasks of 4 GPUs read 8\u00d7any: {d['jobs'][0].get('gpus_text') if st == 201 else d}")
    call("POST", f"/v1/jobs/{d['jobs'][0]['id']}/cancel")

    # ---- dependencies on whole arrays, and past 64 ids ----
    arr = submit(spec("parts", array_size=3, duration="1s"))
    many = submit(spec("dep-many", duration="1s",
                       dependency="afterany:" + ":".join(str(arr[0]) for _ in range(100))))
    check(len(many) == 1, "a dependency naming 100 ids is accepted")
    after = submit(spec("after-all", duration="1s", dependency=f"afterok:{arr[0]}"))
    notok = submit(spec("notok", duration="1s", dependency=f"afternotok:{arr[0]}"))
    j = job(after[0])
    time.sleep(0.5)
    j = job(after[0])
    check(j.get("reason") == "dependency" and f"array {arr[0]}" in (j.get("why") or ""),
          f"afterok on the array waits naming it: {j.get('why')}")
    wait_for(lambda: all(state(i) == "completed" for i in arr), "the array completes")
    wait_for(lambda: state(after[0]) == "completed", "afterok on the array runs after it")
    check(min(job(after[0])["start_time"] - job(i)["end_time"] for i in arr) >= 0,
          "it started after every element ended")
    wait_for(lambda: state(notok[0]) == "failed", "afternotok on an array that completed fails")
    ev = call("GET", f"/v1/jobs/{notok[0]}/events")[1].get("events", [])
    det = " ".join(e.get("detail") or "" for e in ev if e["kind"] == "failed")
    check(f"every element of array {arr[0]} completed" in det, f"it says why: {det}")
    wait_for(lambda: state(many[0]) == "completed", "the 100-id dependency holds and runs")

    # ---- cancel a whole array ----
    arr = submit(spec("c", array_size=5, duration="60s"), toks["ann"])
    st, d = call("POST", f"/v1/arrays/{arr[0]}/cancel", None, toks["vic"])
    check(st == 403, f"a viewer cannot cancel an array: {st}")
    st, d = call("POST", f"/v1/arrays/{arr[0]}/cancel", None, toks["bob"])
    check(st == 404, f"another tenant's array answers 404: {st}")
    st, d = call("POST", f"/v1/arrays/{arr[1]}/cancel", None, toks["ann"])
    check(st == 404 and d["error"]["code"] == "not_an_array",
          f"an element that is not the first is no array's id: {st} {d}")
    st, d = call("GET", f"/v1/arrays/{arr[0]}/cancel", None, toks["ann"])
    check(st == 405, f"GET is not allowed: {st}")
    call("POST", f"/v1/jobs/{arr[3]}/cancel", None, toks["ann"])
    st, d = call("POST", f"/v1/arrays/{arr[0]}/cancel", None, toks["ann"])
    check(st == 200 and d == {"array": arr[0], "elements": 5, "cancelled": 4},
          f"the array's cancel cancels the 4 still active: {st} {d}")
    check(all(state(i) == "cancelled" for i in arr), "every element is cancelled")

    check(wait_for(lambda: all(state(i) == "cancelled" for i in arr), "every element ends"),
          "every element is cancelled")

    # ---- fair share where nobody is guaranteed anything: shares of the cluster ----
    st, d = http_call(URL, "PUT", "/v1/tenants", ADMIN, raw=b"tenants:\n  x: {}\n  y: {}\n",
                      headers={"Content-Type": "application/yaml"})
    check(st == 200, f"tenants without guarantees: {st} {d}")
    ids = submit(spec("busy", tenant="y", count=8, tier="opportunistic", duration="60s"))
    wait_for(lambda: state(ids[0]) == "running", "y runs 8 GPUs")
    time.sleep(1.0)
    t = {x["name"]: x for x in call("GET", "/v1/tenants")[1]["tenants"]}
    check(abs(t["y"].get("usage_share", -1) - 8 / 32) < 1e-9,
          f"8 of the cluster's 32 GPUs read 0.25 at once: {t['y']}")
    check(t["y"]["share"] > 0.0005, f"and its decayed share is above 0: {t['y']['share']}")
    check(t["x"]["share"] == 0 and t["x"]["usage_share"] == 0, "idle x reads 0")
    call("POST", f"/v1/jobs/{ids[0]}/cancel")
finally:
    stop_all(procs)
finish(TMP, [os.path.join(TMP, "log")])
