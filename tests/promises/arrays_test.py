"""Promises of arrays, dependencies, impossible requests and the numbers a
user reads, on real agents: every element of a YAML array learns its index,
afterok on a whole array, cancel of a whole array (and of one element), the
throttle starts the lowest index first, a request that can never fit is
refused at submission (a drained node still counts), and a tenant's share is
not 0 while it runs.

Each scenario_* runs on the default cluster of tests/lib/cluster.py (four
8-GPU H100 nodes with agents; tenants team-a and team-b with 16 guaranteed
GPUs each) plus r-5, a 16-GPU node cluster.yaml declares but no agent serves
(drained, "no agent"): 48 GPUs declared."""
import re

from cluster import H100, Node
from harness import check

CLUSTER = {
    "nodes": [Node("r-1", "l1"), Node("r-2", "l1"), Node("r-3", "l2"), Node("r-4", "l2"),
              Node("r-5", "l2", cls="h16", agent=False)],
    "classes": {"h16": dict(H100, gpus=16)},
}


def spec(name, cmd, count=1, gpus=1, tier="guaranteed", tenant="team-a", **kw):
    return dict({"tenant": tenant, "name": name, "tier": tier,
                 "command": ["/bin/sh", "-c", cmd],
                 "tasks": [{"count": count, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 1024}],
                 "time_limit": "10m", "checkpoint": {"signal": "SIGUSR1", "grace": "3s"}}, **kw)


def out_of(c, jid):
    """What rank 0 of job jid wrote, on whichever node it ran."""
    return "".join(c.output(n.name, jid) for n in c.nodes)


def submit_ids(c, body):
    st, d = c.call("POST", "/v1/jobs", body)
    check(st == 201, f"submission of {body.get('name')} answers 201: {st} {d if st != 201 else ''}")
    return [j["id"] for j in d.get("jobs", [])] if st == 201 else []


def scenario_yaml_array_elements_learn_their_index(c):
    """agent-tasks.md: every element of an array, however submitted, gets
    TESSERA_ARRAY_INDEX, TESSERA_ARRAY_JOB_ID and TESSERA_ARRAY_SIZE."""
    path = c.path("array.yaml")
    with open(path, "w") as f:
        f.write("tenant: team-a\nname: idx\narray_size: 3\ntime_limit: 10m\n"
                "command: 'echo \"index=$TESSERA_ARRAY_INDEX array=$TESSERA_ARRAY_JOB_ID "
                "size=$TESSERA_ARRAY_SIZE\"'\n"
                "tasks:\n  - {gpus: 1, cpu_milli: 1000, memory_mib: 1024}\n")
    r = c.cli("submit", "-f", path)
    check(r.returncode == 0, f"tessera submit -f array.yaml exits 0: {r.returncode} {r.stderr}")
    ids = [int(x) for x in r.stdout.split()] if r.returncode == 0 else []
    check(len(ids) == 3, f"one id per element: {r.stdout!r}")
    for jid in ids:
        c.wait_job(jid, "completed", 30)
    outs = [out_of(c, jid).strip() for jid in ids]
    want = [f"index={k} array={ids[0] if ids else ''} size=3" for k in range(3)]
    check(outs == want, f"each element printed its own index and its array's id: {outs}")


def scenario_large_array_elements_run_as_jobs(c):
    """job-spec.md "Large arrays": an array of 100 keeps most of its elements
    as one record until the scheduler wants them; on real agents each still
    runs as its own job with its own index, the last one included."""
    ids = submit_ids(c, spec("big", 'echo "index=$TESSERA_ARRAY_INDEX '
                             'array=$TESSERA_ARRAY_JOB_ID size=$TESSERA_ARRAY_SIZE"',
                             array_size=100))
    if len(ids) != 100:
        return
    check(ids == list(range(ids[0], ids[0] + 100)), "one id per element, consecutive")
    last = c.job(ids[-1])
    check(last.get("state") == "pending" and f"array {ids[0]}" in (last.get("why") or ""),
          f"the last element waits, not yet a job, its why naming the array: {last.get('why')}")
    done = c.wait_job(ids[-1], "completed", 90, "the last element runs and completes")
    out = out_of(c, ids[-1]).strip()
    check(done and out == f"index=99 array={ids[0]} size=100",
          f"it printed its own index and its array's id: {out!r}")
    for jid in ids:
        c.wait_job(jid, "completed", 30)


def scenario_afterok_on_a_whole_array(c):
    """job-spec.md: an array's id in a dependency stands for every element:
    afterok:ID starts once every element completed; one that fails makes it
    fail at once."""
    ids = submit_ids(c, spec("parts", "sleep $((1 + TESSERA_ARRAY_INDEX)); echo done",
                             array_size=3))
    if len(ids) != 3:
        return
    after = c.submit(spec("merge", "echo merged", dependency=f"afterok:{ids[0]}"))
    c.wait(lambda: c.job(ids[0]).get("state") == "completed", "element 0 completes", 30)
    j = c.job(after)
    check(j.get("state") == "pending" and j.get("reason") == "dependency" and
          f"array {ids[0]}" in (j.get("why") or ""),
          f"with element 0 done the dependent still waits, naming the array: {j.get('why')}")
    done = c.wait_job(after, "completed", 40, "the dependent runs once every element completed")
    ends = [c.job(i).get("end_time") or 0 for i in ids]
    check(done and all(done["start_time"] >= e for e in ends),
          f"it started after the last element ended: {done and done['start_time']} {ends}")
    # one element fails: afterok on the array can never hold
    bad = submit_ids(c, spec("parts-bad", 'test "$TESSERA_ARRAY_INDEX" != 1', array_size=3))
    if len(bad) != 3:
        return
    never = c.submit(spec("never", "echo no", dependency=f"afterok:{bad[0]}"))
    j = c.wait_job(never, "failed", 40, "afterok on an array with a failed element fails")
    kinds = {e["kind"]: e.get("detail") or "" for e in c.events(never)}
    check(j and "element 1 of array" in kinds.get("failed", ""),
          f"the failure names the element: {kinds.get('failed')}")


def scenario_cancel_of_an_array(c):
    """cli.md: `tessera cancel ARRAY_ID` cancels every element still active;
    `ARRAY_ID_INDEX` one element only."""
    ids = submit_ids(c, spec("many", "exec sleep 300", array_size=4))
    if len(ids) != 4:
        return
    for jid in ids:
        c.wait_job(jid, "running", 30)
    r = c.cli("cancel", f"{ids[0]}_2")
    check(r.returncode == 0, f"tessera cancel ID_2 exits 0: {r.returncode} {r.stderr}")
    c.wait_job(ids[2], "cancelled", 20, "element 2 alone is cancelled")
    check(all(c.job(i).get("state") == "running" for i in (ids[0], ids[1], ids[3])),
          "the other elements still run")
    r = c.cli("cancel", str(ids[0]))
    check(r.returncode == 0 and "3 of its 4 elements cancelled" in r.stdout,
          f"tessera cancel ARRAY_ID cancels the rest: {r.returncode} {r.stdout} {r.stderr}")
    for jid in ids:
        c.wait_job(jid, "cancelled", 20)


def scenario_throttle_starts_lowest_index_first(c):
    """job-spec.md: a throttled array's waiting elements start the lowest
    index first."""
    ids = submit_ids(c, spec("thr", "sleep 1", array_size=6, array_throttle=2))
    if len(ids) != 6:
        return
    j = c.wait(lambda: (lambda x: x if "array throttle" in (x.get("why") or "") else None)(
        c.job(ids[5])), "the last element waits, its explanation naming the throttle", 10)
    check(j and j.get("state") == "pending" and j.get("reason") == "held",
          f"it waits as held: {j}")
    for jid in ids:
        c.wait_job(jid, "completed", 60)
    starts = [c.job(i).get("start_time") or 0 for i in ids]
    order = sorted(range(6), key=lambda k: (starts[k], k))
    check(order == list(range(6)), f"elements started in index order: {order} ({starts})")


def scenario_impossible_request_refused(c):
    """job-spec.md: a job that could never run is refused at submission,
    naming the field and the most that could ever fit; a drained node, or
    one whose agent is down, still counts."""
    st, d = c.call("POST", "/v1/jobs", spec("huge", "true", count=1000, tier="opportunistic"))
    msg = d.get("error", {}).get("message", "") if isinstance(d, dict) else ""
    fields = [f.get("path") for f in d.get("error", {}).get("fields", [])] if st == 400 else []
    check(st == 400 and fields == ["tasks[0].count"] and "at most 48 can ever run" in msg,
          f"1000 GPUs on a 48-GPU cluster: 400 naming tasks[0].count and 48: {st} {msg}")
    wide = spec("wide", "true", tier="opportunistic")
    wide["tasks"][0]["cpu_milli"] = 100000
    st, d = c.call("POST", "/v1/jobs", wide)
    msg = d.get("error", {}).get("message", "") if isinstance(d, dict) else ""
    check(st == 400 and msg.startswith("tasks[0].cpu_milli:") and "is 64000" in msg,
          f"100 cores in one task, 64 on the largest node: 400 naming tasks[0].cpu_milli: {msg}")
    st, d = c.call("POST", "/v1/jobs", spec("over", "true", count=20))
    msg = d.get("error", {}).get("message", "") if isinstance(d, dict) else ""
    check(st == 400 and "team-a's guarantee is 16" in msg,
          f"20 guaranteed GPUs on a guarantee of 16: 400 naming it: {msg}")
    # r-5 has no agent: it counts, so a 16-GPU task is accepted (and waits)
    check(c.node("r-5").get("state") == "drained", "r-5, without an agent, is drained")
    big = c.submit(spec("sixteen", "true", gpus=16, tier="opportunistic"))
    check(isinstance(big, int), "a 16-GPU task is accepted: only r-5, whose agent is down, has 16")
    if isinstance(big, int):
        c.call("POST", f"/v1/jobs/{big}/cancel")
    r = c.cli("drain", "r-4")
    check(r.returncode == 0, f"tessera drain r-4: {r.stderr}")
    jid = c.submit(spec("all", "true", count=32, tier="opportunistic"))
    check(isinstance(jid, int), "32 GPUs are accepted while a node is drained (it may come back)")
    r = c.cli("resume", "r-4")
    check(r.returncode == 0, f"tessera resume r-4 exits 0: {r.returncode} {r.stderr}")
    if isinstance(jid, int):
        c.wait_job(jid, "completed", 40, "it runs once the node is back")


def scenario_resume_of_a_node_that_stays_drained_fails(c):
    """cli.md: a resume that leaves the node drained exits 4, naming why."""
    r = c.cli("drain", "r-5")
    check(r.returncode == 0, f"tessera drain r-5: {r.returncode} {r.stderr}")
    r = c.cli("resume", "r-5")
    check(r.returncode == 4 and "node r-5 stays drained: no agent" in r.stderr,
          f"tessera resume r-5 (no agent) exits 4 saying why: {r.returncode} {r.stderr}")
    r = c.cli("resume", "r-4")
    check(r.returncode == 0 and "node r-4: up" in r.stdout,
          f"a node that comes back exits 0: {r.returncode} {r.stdout}")


def scenario_share_is_not_zero_while_a_tenant_runs(c):
    """cli.md: `tessera tenants` shows what a tenant uses now (NOW) beside its
    decayed fair share; 8 GPUs of the 32 guaranteed read 0.25 at once."""
    jid = c.submit(spec("busy", "exec sleep 300", count=8, tenant="team-b", tier="opportunistic"))
    if not c.wait_job(jid, "running", 30):
        return
    st, d = c.call("GET", "/v1/tenants")
    t = {x["name"]: x for x in d.get("tenants", [])} if st == 200 else {}
    b = t.get("team-b", {})
    check(abs(b.get("usage_share", 0) - 0.25) < 1e-9 and b.get("share", 0) > 0,
          f"team-b's usage_share is 0.25 and its share above 0: {b}")
    check(t.get("team-a", {}).get("usage_share") == 0, "team-a, idle, reads 0")
    r = c.cli("tenants")
    line = [x for x in r.stdout.splitlines() if x.startswith("team-b")]
    check(r.returncode == 0 and line and " 0.25 " in line[0],
          f"tessera tenants shows team-b NOW 0.25: {line}")
    c.call("POST", f"/v1/jobs/{jid}/cancel")


def scenario_explain_reads_times_and_gpus(c):
    """cli.md: `tessera show` and `tessera explain` print GPUs and times as
    people read them: a job of 2 x 4 GPUs reads 8×H100-80GB, and a waiting
    job's estimate is a local date and time with a duration."""
    for n in ("r-1", "r-2", "r-3"):  # 8 GPUs left: the second job waits for room
        c.cli("drain", n)
    fill = c.submit(spec("fill", "exec sleep 300", gpus=8))
    c.wait_job(fill, "running", 30)
    jid = c.submit(spec("wait", "true", count=2, gpus=4))
    r = c.cli("show", str(jid))
    check(r.returncode == 0 and re.search(r"^GPUs: +8×any$", r.stdout, re.M) is not None,
          f"show prints the job's GPUs as GPUS×MODEL: {r.stdout}")
    when = re.compile(r"start by 20\d\d-\d\d-\d\d \d\d:\d\d:\d\d \(in [0-9]+ (s|min)\)")
    j = c.wait(lambda: (lambda x: x if "start by" in (x.get("why") or "") else None)(
        c.job(jid)), "the waiting job has a start estimate", 20)
    why = (j or {}).get("why") or ""
    check(when.search(why) is not None, f"the estimate is a local time and a duration: {why}")
    r = c.cli("explain", str(jid))
    check(r.returncode == 0 and when.search(r.stdout) is not None,
          f"tessera explain prints it so: {r.stdout}")
    for n in ("r-1", "r-2", "r-3"):
        c.cli("resume", n)
