"""Promises of changing a job after its submission on a live cluster
(docs/api.md "Updating a job", docs/cli.md "update", "hold"): a queued job's
time limit, size, priority class and dependency change, checked as a
submission is; a running job only lowers its time limit; the change is
stored (it outlives a restart), recorded as an event, and the scheduler
starts the job as changed; hold and release."""
import os
import pwd
import signal
import time

from cluster import DEFAULT_CONFIG, wait_ready
from harness import check

CLUSTER = {
    "config": DEFAULT_CONFIG.rstrip("}\n") + ", priority_classes: {low: 0, default: 10, "
              "high: 100}}\n",
}

SPEC = {"tenant": "team-a", "name": "upd", "tier": "guaranteed",
        "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 500, "memory_mib": 256}],
        "time_limit": "5m", "command": ["/bin/sh", "-c", "sleep 300"]}


def user(c, name, role="user", tenant="team-a"):
    """A token mapped to the Unix user running the tests (as the admin's is)."""
    return c.token(name, role, tenant, unix_user=pwd.getpwuid(os.getuid()).pw_name,
                   uid=os.getuid())


def waiting(c, name, token=None, **extra):
    """A job that stays pending: it waits for a sleeping job to end well."""
    first = c.submit(dict(SPEC, name=name + "-first"), token)
    jid = c.submit(dict(SPEC, name=name, dependency=f"afterok:{first}", **extra), token)
    c.wait_job(jid, "pending", 10)
    return first, jid


def patch(c, jid, body, token=None):
    return c.call("PATCH", f"/v1/jobs/{jid}", body, token)


def field_of(d):
    f = (d.get("error", {}).get("fields") or [{}])[0] if isinstance(d, dict) else {}
    return f.get("path", "")


def scenario_update_then_start_with_the_new_size_and_limit(c):
    """api.md: a pending job's tasks, GPUs per task, time limit and dependency
    change; the job then starts as changed, and an "updated" event says what
    changed."""
    first, jid = waiting(c, "grow")
    st, d = patch(c, jid, {"tasks": 2, "gpus": 2, "time_limit": "10m", "dependency": None})
    check(st == 200, f"PATCH answers 200: {st} {d if st != 200 else ''}")
    j = c.wait_job(jid, "running", 30, "the job starts once its dependency is gone")
    if not j:
        return
    ranks = j.get("placement") or []
    check(len(ranks) == 2 and all(len(r.get("gpus", [])) == 2 for r in ranks),
          f"it runs 2 tasks of 2 GPUs each: {ranks}")
    check(j.get("gpus") == 4, f"its GPUs are 4: {j.get('gpus')}")
    check(j["spec"].get("time_limit") == 600, f"its time limit is 600 s: {j['spec']}")
    kinds = [e["kind"] for e in c.events(jid)]
    check("updated" in kinds, f"an 'updated' event is recorded: {kinds}")
    check(c.job(first).get("state") == "running", "the first job still runs")


def scenario_refused_updates_name_the_field(c):
    """api.md: an update is checked as a submission: a bad value names the
    field; an unknown field is refused; another tenant's job is not found;
    another user's job is forbidden; a running job may not change its size
    nor raise its time limit, but may lower it."""
    _, jid = waiting(c, "bad")
    st, d = patch(c, jid, {"tasks": 0})
    check(st == 400 and field_of(d).startswith("tasks"),
          f"tasks 0: 400 naming tasks: {st} {d}")
    st, d = patch(c, jid, {"gpus": 99})
    check(st == 400 and "gpus" in field_of(d), f"gpus 99: 400 naming gpus: {st} {d}")
    st, d = patch(c, jid, {"time_limit": "soon"})
    check(st == 400 and field_of(d) == "time_limit",
          f"time_limit 'soon': 400 naming time_limit: {st} {d}")
    st, d = patch(c, jid, {"nodes": 3})
    check(st == 400 and field_of(d) == "nodes", f"an unknown field: 400 naming it: {st} {d}")
    st, d = patch(c, jid, {"priority_class": "urgent"})
    check(st == 400 and field_of(d) == "priority_class",
          f"an unknown class: 400 naming priority_class: {st} {d}")
    st, d = patch(c, jid, {"dependency": f"afterok:{jid}"})
    check(st == 400 and field_of(d) == "dependency", f"itself as dependency: 400: {st} {d}")
    other = user(c, "upd-b", tenant="team-b")
    st, d = patch(c, jid, {"time_limit": "1m"}, other)
    check(st == 404, f"another tenant's token: 404: {st} {d}")
    peer = user(c, "upd-peer")
    st, d = patch(c, jid, {"time_limit": "1m"}, peer)
    check(st == 403, f"another user of the tenant: 403: {st} {d}")
    run = c.submit(dict(SPEC, name="running"))
    if not c.wait_job(run, "running", 30):
        return
    st, d = patch(c, run, {"tasks": 2})
    check(st == 409 and "tasks" in d.get("error", {}).get("message", ""),
          f"a running job's size: 409 naming tasks: {st} {d}")
    st, d = patch(c, run, {"time_limit": "1h"})
    check(st == 400 and field_of(d) == "time_limit", f"raising a running job's limit: 400: "
          f"{st} {d}")
    st, d = patch(c, run, {"time_limit": "2m"})
    check(st == 200 and d["job"]["spec"].get("time_limit") == 120,
          f"lowering a running job's limit: 200: {st} {d if st != 200 else ''}")


def scenario_a_user_lowers_its_class_but_does_not_raise_it(c):
    """api.md: a user may lower its job's priority class; raising it is for
    its tenant's admins (403 naming priority_class)."""
    alice = user(c, "upd-alice")
    _, jid = waiting(c, "prio", alice)
    st, d = patch(c, jid, {"priority_class": "low"}, alice)
    check(st == 200 and d["job"].get("priority") == 0,
          f"lowered to low: priority 0: {st} {d if st != 200 else ''}")
    st, d = patch(c, jid, {"priority_class": "high"}, alice)
    check(st == 403 and "priority_class" in d.get("error", {}).get("message", ""),
          f"raised by its user: 403 naming priority_class: {st} {d}")
    tadmin = user(c, "upd-tadmin", role="tenant-admin")
    st, d = patch(c, jid, {"priority_class": "high"}, tadmin)
    check(st == 200 and d["job"].get("priority") == 100,
          f"raised by a tenant-admin: priority 100: {st} {d if st != 200 else ''}")


def scenario_nice_lowers_a_jobs_priority(c):
    """api.md: `nice` is taken from the class's priority: a user may give its
    job a positive one (at submission or by an update), a negative one is for
    its tenant's admins (403 naming nice)."""
    alice = user(c, "upd-nice")
    _, jid = waiting(c, "nice", alice)
    st, d = patch(c, jid, {"nice": 5}, alice)
    check(st == 200 and d["job"].get("priority") == 5, f"nice 5 on class default (10): "
          f"priority 5: {st} {d if st != 200 else ''}")
    r = c.cli("update", str(jid), "--nice", "-1", token=alice)
    check(r.returncode == 5 and "nice" in r.stderr, f"a user's negative nice: 403 naming nice: "
          f"{r.returncode} {r.stderr}")
    st, d = c.call("POST", "/v1/jobs", dict(SPEC, name="greedy", nice=-3), alice)
    check(st == 403 and "nice" in str(d), f"a user submitting nice -3: 403: {st} {d}")
    tadmin = user(c, "upd-nice-admin", role="tenant-admin")
    st, d = patch(c, jid, {"nice": -3}, tadmin)
    check(st == 200 and d["job"].get("priority") == 13, f"a tenant-admin's nice -3: priority 13: "
          f"{st} {d if st != 200 else ''}")


def scenario_hold_and_release(c):
    """cli.md: `tessera hold ID...` holds pending jobs (state held, reason
    held) and the scheduler never starts them; `tessera release` (or PATCH
    hold: false) puts them back and they start."""
    first, b = waiting(c, "h-b")
    r = c.cli("hold", str(b))
    check(r.returncode == 0, f"tessera hold exits 0: {r.returncode} {r.stderr}")
    j = c.job(b)
    check(j.get("state") == "held" and j.get("reason") == "held",
          f"held, reason held: {j.get('state')} {j.get('reason')}")
    st, d = patch(c, b, {"dependency": None})
    check(st == 200, f"a held job's dependency goes: {st} {d if st != 200 else ''}")
    c.wait(lambda: c.job(b).get("reason") == "held", "the cycle keeps reason held", 5)
    check(c.job(b).get("state") == "held", "a held job is never started")
    r = c.cli("release", str(b))
    check(r.returncode == 0, f"tessera release exits 0: {r.returncode} {r.stderr}")
    c.wait_job(b, "running", 30, "the released job starts")
    st, d = patch(c, b, {"hold": True})
    check(st == 409, f"holding a running job: 409: {st} {d}")


def scenario_sbatch_hold_submits_held_and_arrays_release(c):
    """slurm.md: `sbatch --hold` submits the job held (reason held); an
    array's elements are each held, and `tessera release ID...` releases
    them, after which they run."""
    path = c.path("held.sh")
    with open(path, "w") as f:
        f.write("#!/bin/bash\n#SBATCH --account=team-a\n#SBATCH --gpus=1\n"
                "#SBATCH --time=5\n#SBATCH --hold\n#SBATCH --array=0-2\nsleep 300\n")
    r = c.cli("sbatch", path)
    ids = [int(t) for t in r.stdout.split() if t.isdigit()]
    check(r.returncode == 0 and len(ids) == 3, f"sbatch --hold submits 3 elements: "
          f"{r.stdout} {r.stderr}")
    if len(ids) != 3:
        return
    for jid in ids:
        j = c.job(jid)
        check(j.get("state") == "held" and j.get("reason") == "held",
              f"element {jid} is held, reason held: {j.get('state')} {j.get('reason')}")
    time.sleep(1.0)  # five scheduling cycles
    check(all(c.job(j).get("state") == "held" for j in ids), "no held element was started")
    r = c.cli("release", str(ids[0]))
    check(r.returncode == 0 and "3 of its 3 elements released" in r.stdout,
          f"tessera release ARRAY_ID releases every element: {r.returncode} {r.stdout} {r.stderr}")
    for jid in ids:
        c.wait_job(jid, "running", 30, f"released element {jid} starts")


def scenario_hold_and_release_an_array_and_its_elements(c):
    """cli.md: `tessera hold ARRAY_ID` holds every pending element of the
    array, `ARRAY_ID_INDEX` one element; several ids at once."""
    first = c.submit(dict(SPEC, name="arr-first"))
    st, d = c.call("POST", "/v1/jobs", dict(SPEC, name="arr", array_size=3,
                                             dependency=f"afterok:{first}"))
    ids = [j["id"] for j in d.get("jobs", [])] if st == 201 else []
    check(len(ids) == 3, f"an array of 3 is submitted: {st}")
    if len(ids) != 3:
        return
    r = c.cli("hold", str(ids[0]))
    check(r.returncode == 0 and "3 of its 3 elements held" in r.stdout,
          f"tessera hold ARRAY_ID: {r.returncode} {r.stdout} {r.stderr}")
    check(all(c.job(j).get("state") == "held" for j in ids), "every element is held")
    r = c.cli("release", f"{ids[0]}_1", f"{ids[0]}[2]")
    check(r.returncode == 0, f"tessera release ID_1 ID[2]: {r.returncode} {r.stderr}")
    states = [c.job(j).get("state") for j in ids]
    check(states == ["held", "pending", "pending"], f"only elements 1 and 2 released: {states}")
    st, d = c.call("POST", f"/v1/arrays/{first}/hold")
    check(st == 404, f"a job that is no array: 404: {st} {d}")


def scenario_cli_update_in_both_forms(c):
    """cli.md: `tessera update ID --time-limit D` and Slurm's words
    `tessera update job JobId=ID TimeLimit=T NumTasks=N` change the job."""
    _, jid = waiting(c, "cli")
    r = c.cli("update", str(jid), "--time-limit", "20m", "--tasks", "2")
    check(r.returncode == 0, f"update exits 0: {r.returncode} {r.stderr}")
    j = c.job(jid)
    check(j["spec"].get("time_limit") == 1200 and j["spec"]["tasks"][0]["count"] == 2,
          f"20 min, 2 tasks: {j['spec'].get('time_limit')} {j['spec']['tasks']}")
    r = c.cli("update", "job", f"JobId={jid}", "TimeLimit=1:30:00", "NumTasks=3")
    check(r.returncode == 0, f"Slurm's form exits 0: {r.returncode} {r.stderr}")
    j = c.job(jid)
    check(j["spec"].get("time_limit") == 5400 and j["spec"]["tasks"][0]["count"] == 3,
          f"90 min, 3 tasks: {j['spec'].get('time_limit')} {j['spec']['tasks']}")
    r = c.cli("update", str(jid), "--gpus", "99")
    check(r.returncode != 0 and "gpus" in r.stderr, f"a bad value fails naming the field: "
          f"{r.returncode} {r.stderr}")


def scenario_an_update_outlives_a_restart(c):
    """api.md: an update is stored before it is answered: after a restart of
    tesserad the job keeps its new limit and size. (Last: it restarts
    tesserad.)"""
    _, jid = waiting(c, "durable")
    st, d = patch(c, jid, {"time_limit": "7m", "tasks": 2})
    check(st == 200, f"PATCH answers 200: {st} {d if st != 200 else ''}")
    p = c.procs["tesserad"]
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=20)
    except Exception:
        check(False, "tesserad stops within 20 s of SIGTERM")
        return
    c._spawn("tesserad", [c.bins["tesserad"], "--config", c.path("tesserad.yaml")])
    if not wait_ready(c.url, 30):
        check(False, "tesserad is ready again after its restart")
        return
    j = c.job(jid)
    check(j.get("spec", {}).get("time_limit") == 420, f"its limit is still 420 s: {j.get('spec')}")
    check(j.get("gpus") == 2, f"its GPUs are still 2: {j.get('gpus')}")
    check("updated" in [e["kind"] for e in c.events(jid)], "its 'updated' event is stored")
    c.wait(lambda: all(c.node(n).get("state") == "up" for n in ("r-1", "r-2", "r-3", "r-4")),
           "the agents register with the restarted controller", 30)
