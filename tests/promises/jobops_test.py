"""Promises of changing and following jobs on a live cluster (docs/cli.md
"logs"): tessera logs -f prints a task's output as it comes until the job ends."""
import os
import pwd
import signal
import subprocess

from harness import check

SPEC = {"tenant": "team-a", "name": "talker", "tier": "guaranteed",
        "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 500, "memory_mib": 256}],
        "time_limit": "5m"}


def follow(c, jid, *extra):
    """tessera logs -f JOB as a running process (text pipes)."""
    env = dict(os.environ, TESSERA_URL=c.url, TESSERA_TOKEN=c.admin, HOME=c.tmp,
               XDG_CONFIG_HOME=c.path("xdg"))
    return subprocess.Popen([c.bins["cli"], "logs", str(jid), "-f", *extra], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def follow_to_end(c, jid, timeout, runs_s):
    """tessera logs -f JOB run to its end: (exit code, stdout, stderr)."""
    p = follow(c, jid)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        check(False, f"logs -f ends within {timeout} s of a job that runs about {runs_s} s")
    return p.returncode, out, err


def scenario_logs_follow_prints_everything_until_the_end(c):
    """cli.md: `tessera logs -f` prints the rank's output as it comes, every line
    once and in order, from before the job starts until it ends; then exits 0."""
    lines = 40
    script = f"for i in $(seq 1 {lines}); do echo line $i; sleep 0.1; done"
    jid = c.submit(dict(SPEC, command=["/bin/sh", "-c", script]))
    rc, out, err = follow_to_end(c, jid, 90, 4)
    want = "".join(f"line {i}\n" for i in range(1, lines + 1))
    check(rc == 0, f"logs -f exits 0 once the job ended: {rc} {err!r}")
    check(out == want, f"logs -f printed every line once, in order: {out!r}")
    check(c.job(jid).get("state") == "completed", "the job completed")


def scenario_logs_follow_keeps_up_with_a_long_line_and_a_burst(c):
    """cli.md: `tessera logs -f` reads on from where the last answer ended, at
    once again while the file holds more than one answer carries: a 600 KiB
    line and 1 MiB written within a second are printed whole, every byte once
    (each was skipped before, "faster than one answer carries")."""
    script = ("sleep 6; head -c 600000 /dev/zero | tr '\\0' x; echo; seq 1 150000; "
              "echo end; sleep 6")
    jid = c.submit(dict(SPEC, command=["/bin/sh", "-c", script]))
    rc, out, err = follow_to_end(c, jid, 120, 12)
    want = "x" * 600000 + "\n" + "".join(f"{i}\n" for i in range(1, 150001)) + "end\n"
    check(rc == 0, f"logs -f exits 0 once the job ended: {rc} {err!r}")
    check(err == "", f"nothing on stderr: {err[:300]!r}")
    check(len(out) == len(want), f"logs -f printed {len(out)} bytes of {len(want)}")
    check(out == want, "logs -f printed every byte once, in order")


def scenario_logs_follow_stops_on_ctrl_c(c):
    """cli.md: Ctrl-C stops `tessera logs -f` at once (exit 130), with no
    error message; the job goes on."""
    jid = c.submit(dict(SPEC, command=["/bin/sh", "-c", "echo started; sleep 300"]))
    if not c.wait_job(jid, "running", 30):
        return
    p = follow(c, jid)
    first = p.stdout.readline()
    check(first == "started\n", f"logs -f printed the output so far: {first!r}")
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        check(False, "logs -f stops within 10 s of Ctrl-C")
    check(p.returncode == 130, f"logs -f exits 130 on Ctrl-C: {p.returncode}")
    check(err == "", f"nothing on stderr: {err!r}")
    check(c.job(jid).get("state") == "running", "the job still runs")


def scenario_logs_follow_of_no_job_fails(c):
    """cli.md: `tessera logs -f` of a job that does not exist says so (exit 3)."""
    r = c.cli("logs", "987654", "-f", timeout=30)
    check(r.returncode == 3, f"exit 3: {r.returncode} {r.stderr!r}")
    check("987654" in r.stderr, f"the message names the job: {r.stderr!r}")


def user(c, name, role="user", tenant="team-a"):
    """A token mapped to the Unix user running the tests (as the admin's is)."""
    return c.token(name, role, tenant, unix_user=pwd.getpwuid(os.getuid()).pw_name,
                   uid=os.getuid())


def job(name, tenant="team-a", command="sleep 300"):
    return dict(SPEC, name=name, tenant=tenant, command=["/bin/sh", "-c", command])


def scenario_cancel_takes_several_ids(c):
    """cli.md: several ids (`tessera cancel 41 42 50_3`, as `scancel 41 42`) are all
    checked before any is sent, each is tried, and the exit code is the last
    failure's."""
    a, b, keep = (c.submit(job(n)) for n in ("c-a", "c-b", "c-keep"))
    r = c.cli("cancel", str(a), "x7", str(b))
    check(r.returncode == 2, f"a bad id: usage error, nothing sent: {r.returncode} {r.stderr!r}")
    check(c.job(a).get("state") not in ("cancelled", "stopping"), "a is not cancelled by it")
    r = c.cli("cancel", str(a), "987654", str(b))
    check(r.returncode == 3, f"exit 3 for the job that does not exist: {r.returncode} {r.stderr!r}")
    for jid in (a, b):
        check(c.wait_job(jid, "cancelled", 30), f"job {jid} named beside it is cancelled")
    check(c.job(keep).get("state") in ("pending", "running"), "the job not named goes on")


def scenario_bulk_cancel_by_user_and_state(c):
    """cli.md: `tessera cancel` with filters cancels, in one call, every active job
    they all match that the caller may see; the others go on."""
    alice = user(c, "alice")
    bob = user(c, "bob")
    a_run = c.submit(job("a-run"), token=alice)
    b_run = c.submit(job("b-run"), token=bob)
    if not c.wait_job(a_run, "running", 30) or not c.wait_job(b_run, "running", 30):
        return
    a_held = c.submit(dict(job("a-held"), dependency=f"afterok:{a_run}"), token=alice)
    st, _ = c.call("POST", f"/v1/jobs/{a_held}/hold", token=alice)
    check(st == 200, f"a-held is held: {st}")
    # only held jobs of alice: her running one goes on
    r = c.cli("cancel", "--user", "alice", "--state", "held", token=alice)
    check(r.returncode == 0 and f"jobs {a_held}" in r.stdout,
          f"cancel --user alice --state held names the held job: {r.returncode} {r.stdout!r} "
          f"{r.stderr!r}")
    c.wait_job(a_held, "cancelled", 10)
    check(c.job(a_run).get("state") == "running", "alice's running job goes on")
    # every job of alice's, not bob's
    r = c.cli("cancel", "-u", "alice", token=alice)
    check(r.returncode == 0 and "1 cancelled" in r.stdout, f"one more cancelled: {r.stdout!r}")
    c.wait_job(a_run, "cancelled", 30)
    check(c.job(b_run).get("state") == "running", "bob's job goes on")
    kinds = [e["kind"] for e in c.events(a_run)]
    check("cancel" in kinds, f"the cancel is an event of the job: {kinds}")


def scenario_bulk_cancel_scoped_to_the_callers_tenant(c):
    """api.md: `POST /v1/jobs/cancel` acts on the jobs the caller may see: a user
    on its tenant's, an admin across tenants; a viewer may not."""
    user = globals()["user"](c, "ua")
    a = c.submit(job("shared", "team-a"), token=user)
    b = c.submit(job("shared", "team-b"))
    other = c.submit(job("other", "team-b"))
    if not all(c.wait_job(j, "running", 30) for j in (a, b, other)):
        return
    st, d = c.call("POST", "/v1/jobs/cancel", {"tenant": "team-b"}, token=user)
    check(st == 403 and "tenant" in d.get("error", {}).get("message", str(d)),
          f"a team-a user may not cancel team-b's jobs (403 naming tenant): {st} {d}")
    st, d = c.call("POST", "/v1/jobs/cancel", {"name": "shared"}, token=user)
    check(st == 200 and d.get("jobs") == [a], f"a user's cancel by name takes its tenant's "
          f"job only: {st} {d}")
    c.wait_job(a, "cancelled", 30)
    check(c.job(b).get("state") == "running", "team-b's job of that name goes on")
    viewer = c.token("va", "viewer", "team-a")
    st, d = c.call("POST", "/v1/jobs/cancel", {"name": "other"}, token=viewer)
    check(st == 403, f"a viewer may not cancel: {st}")
    st, d = c.call("POST", "/v1/jobs/cancel", {"name": "shared", "tenant": "team-b"})
    check(st == 200 and d.get("jobs") == [b], f"an admin cancels across tenants: {st} {d}")
    c.wait_job(b, "cancelled", 30)
    check(c.job(other).get("state") == "running", "the job no filter matched goes on")


def scenario_a_user_manages_its_own_jobs_only(c):
    """api.md: a user cancels, holds, releases and requeues its own jobs only
    (403 for another user's, one by one, by filter or as an array); its
    tenant's tenant-admins and admins anyone's; each such event names who
    did it, and a job cancelled while it waits reads reason `cancel`."""
    alice, bob = user(c, "alice2"), user(c, "bob2")
    tadmin = user(c, "tadmin2", "tenant-admin")
    run = c.submit(job("a2-run"), token=alice)
    arr = c.submit(dict(job("a2-arr"), array_size=2), token=alice)
    if not c.wait_job(run, "running", 30):
        return
    for action in ("cancel", "requeue", "hold", "release"):
        st, d = c.call("POST", f"/v1/jobs/{run}/{action}", token=bob)
        msg = d.get("error", {}).get("message", "") if isinstance(d, dict) else ""
        check(st == 403 and "alice2" in msg, f"bob may not {action} alice's job: 403 naming "
              f"its owner: {st} {msg!r}")
    st, d = c.call("POST", f"/v1/arrays/{arr}/cancel", token=bob)
    check(st == 403, f"bob may not cancel alice's array: {st} {d}")
    st, d = c.call("POST", "/v1/jobs/cancel", {"state": "running"}, token=bob)
    check(st == 200 and d.get("jobs") == [], f"bob's cancel by state takes only his own "
          f"(none): {st} {d}")
    st, d = c.call("POST", "/v1/jobs/cancel", {"user": "alice2"}, token=bob)
    check(st == 403 and "user" in d.get("error", {}).get("message", ""),
          f"bob may not cancel by alice's name: 403 naming user: {st} {d}")
    check(c.job(run).get("state") == "running", "alice's job goes on")
    # a pending job cancelled by its owner: reason cancel, why and event say who
    wait = c.submit(dict(job("a2-wait"), dependency=f"afterok:{run}"), token=alice)
    st, _ = c.call("POST", f"/v1/jobs/{wait}/cancel", token=alice)
    j = c.job(wait)
    ev = [e for e in c.events(wait) if e["kind"] == "cancel"]
    check(st == 200 and j.get("state") == "cancelled" and j.get("reason") == "cancel" and
          j.get("why") == "cancelled by alice2", f"a waiting job cancelled reads reason cancel, "
          f"why 'cancelled by alice2': {st} {j.get('state')} {j.get('reason')} {j.get('why')}")
    check(ev and ev[0].get("data", {}).get("by") == "alice2",
          f"its cancel event names who: {ev}")
    # her tenant's tenant-admin may
    st, _ = c.call("POST", f"/v1/jobs/{run}/cancel", token=tadmin)
    c.wait_job(run, "cancelled", 30)
    ev = [e for e in c.events(run) if e["kind"] == "cancel"]
    check(st == 200 and ev and ev[0].get("data", {}).get("by") == "tadmin2",
          f"the tenant-admin cancels it, and the event says so: {st} {ev}")
    st, d = c.call("POST", f"/v1/arrays/{arr}/cancel", token=alice)
    check(st == 200, f"alice cancels her own array: {st} {d}")


def scenario_bulk_cancel_refuses_bad_filters(c):
    """api.md: a bulk cancel with no filter, an unknown one or a bad value is
    refused (400) naming the field."""
    for body, field in (({}, "filter"), ({"owner": "x"}, "owner"),
                        ({"state": "completed"}, "state"), ({"name": 7}, "name"),
                        ({"array": -1}, "array")):
        st, d = c.call("POST", "/v1/jobs/cancel", body)
        msg = d.get("error", {}).get("message", "") if isinstance(d, dict) else ""
        check(st == 400 and msg.startswith(field), f"{body}: 400 naming {field}: {st} {msg!r}")


def scenario_bulk_cancel_of_an_array_by_name(c):
    """api.md: `name` matches an array's elements (`NAME[i]`) too, and `array`
    that is no array's id is refused (404 not_an_array)."""
    first = c.submit(dict(job("sweep"), array_size=3))
    lone = c.submit(job("sweep-2"))
    if not c.wait_job(first + 2, "running", 30) or not c.wait_job(lone, "running", 30):
        return
    st, d = c.call("POST", "/v1/jobs/cancel", {"name": "sweep", "state": "running"})
    check(st == 200 and sorted(d.get("jobs", [])) == [first, first + 1, first + 2],
          f"name sweep: the array's 3 running elements cancelled, not sweep-2: {st} {d}")
    for k in range(3):
        c.wait_job(first + k, "cancelled", 30)
    check(c.job(lone).get("state") == "running", "a job of another name goes on")
    st, d = c.call("POST", "/v1/jobs/cancel", {"name": "sweep", "array": lone})
    check(st == 404 and d.get("error", {}).get("code") == "not_an_array",
          f"array: a lone job is no array's id (404 not_an_array): {st} {d}")
