"""Promises of a job's life on real agents: gangs start whole with their rank
environment, cancel stops every rank, hold and release, requeue, drain and
resume, and an agent that goes silent requeues its jobs.

Each scenario_* runs on the default cluster of tests/lib/cluster.py (four
8-GPU H100 nodes, r-1 and r-2 under leaf l1, r-3 and r-4 under l2; tenants
team-a and team-b with 16 guaranteed GPUs each)."""
import time

from cluster import alive, pid_of
from harness import check


def spec(name, cmd, count=1, gpus=8, tier="guaranteed", tenant="team-a", **kw):
    return dict({"tenant": tenant, "name": name, "tier": tier,
                 "command": ["/bin/sh", "-c", cmd],
                 "tasks": [{"count": count, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 1024}],
                 "time_limit": "10m", "checkpoint": {"signal": "SIGUSR1", "grace": "3s"}}, **kw)


def pid_of_run(c, jid, rank=0):
    """The pid the latest run of a rank printed (the last "pid=N" line)."""
    for n in c.nodes:
        lines = [x for x in c.output(n.name, jid, rank).split("\n") if x.startswith("pid=")]
        if lines:
            return int(lines[-1][4:])
    return None


def scenario_gang_starts_whole_with_rank_environment(c):
    """job-spec.md: a gang's tasks start together, each with RANK, WORLD_SIZE
    and LOCAL_RANK (agent-tasks.md "Environment")."""
    jid = c.submit(spec("gang", 'echo "rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK"',
                        count=2))
    j = c.wait_job(jid, "completed", 30)
    if not j:
        return
    nodes = j["placement"] if isinstance(j.get("placement"), list) else []
    outs = sorted(c.output(n.name, jid, r).strip() for n in c.nodes for r in (0, 1)
                  if c.output(n.name, jid, r))
    check(outs == ["rank=0 world=2 local=0", "rank=1 world=2 local=0"],
          f"each rank of the gang saw its rank and the world size: {outs} ({nodes})")


def scenario_cancel_stops_every_rank(c):
    """cli.md: a cancelled running job is `stopping` until it has stopped; then
    `cancelled`, and no process of it is left."""
    jid = c.submit(spec("cancel-me", 'echo "pid=$$"; exec sleep 300', count=2))
    if not c.wait_job(jid, "running", 30):
        return
    pids = [pid_of(c, jid, r) for r in (0, 1)]
    r = c.cli("cancel", str(jid))
    check(r.returncode == 0 and "stopping" in r.stdout,
          f"tessera cancel exits 0 and the job is stopping: {r.returncode} {r.stdout} {r.stderr}")
    c.wait_job(jid, "cancelled", 20)
    # its GPUs are free once it reads cancelled, so no process of it may be left then
    check(all(p and not alive(p) for p in pids), f"no rank's process is left once it reads "
          f"cancelled: {[p for p in pids if p and alive(p)]}")
    kinds = [e["kind"] for e in c.events(jid)]
    check("cancel" in kinds, f"the cancel is an event: {kinds}")


def scenario_hold_and_release(c):
    """api.md: a held job is not started; released, it runs."""
    blocker = c.submit(spec("fill", "sleep 300", count=4, tenant="team-b", tier="opportunistic"))
    c.wait_job(blocker, "running", 30)
    jid = c.submit(spec("later", "echo ran", tier="opportunistic"))
    st, d = c.call("POST", f"/v1/jobs/{jid}/hold")
    check(st == 200 and d["job"]["state"] == "held", f"hold answers held: {st}")
    c.call("POST", f"/v1/jobs/{blocker}/cancel")
    time.sleep(1.5)  # a few cycles with free GPUs
    check(c.job(jid).get("state") == "held", "a held job stays held while GPUs are free")
    st, d = c.call("POST", f"/v1/jobs/{jid}/release")
    check(st == 200, f"release answers 200: {st} {d}")
    c.wait_job(jid, "completed", 30, "the released job runs and completes")


def scenario_requeue_runs_again(c):
    """api.md: requeue stops a running job and queues it again; it runs again
    (the events say `requeued`, then `started` a second time), its tasks
    seeing TESSERA_RESTARTS 1 (agent-tasks.md; it stayed 0 before)."""
    jid = c.submit(spec("again", 'echo "restarts=$TESSERA_RESTARTS"; echo "pid=$$"; '
                                 'exec sleep 300'))
    if not c.wait_job(jid, "running", 30):
        return
    first = c.wait(lambda: pid_of_run(c, jid), f"job {jid} rank 0 prints its pid", 20)
    st, d = c.call("POST", f"/v1/jobs/{jid}/requeue")
    check(st == 200, f"requeue answers 200: {st} {d}")

    def restarted():
        kinds = [e["kind"] for e in c.events(jid)]
        return kinds.count("started") >= 2 and c.job(jid).get("state") == "running"
    c.wait(restarted, "the requeued job starts a second time", 30)
    check(first and not alive(first), f"its first run's process was gone before it started "
          f"again: {first}")
    second = c.wait(lambda: (lambda p: p if p and p != first else None)(pid_of_run(c, jid)),
                    "the second run prints its own pid", 20)
    check(second and alive(second), f"the second run is a new process: {first} -> {second}")
    kinds = [e["kind"] for e in c.events(jid)]
    check("requeue" in kinds or "requeued" in kinds, f"the requeue is an event: {kinds}")
    # agent-tasks.md: TESSERA_RESTARTS counts a user's requeue, so the run resumes
    out = "".join(c.output(n.name, jid) for n in c.nodes)
    seen = [x for x in out.split("\n") if x.startswith("restarts=")]
    check(seen[:1] == ["restarts=0"] and seen[-1:] == ["restarts=1"],
          f"TESSERA_RESTARTS is 0, then 1 after the requeue: {seen}")
    check(c.job(jid).get("restarts") == 1, f"the job's restarts: {c.job(jid).get('restarts')}")


def scenario_drain_takes_no_work_and_resume_does(c):
    """cli.md: a drained node takes no work; `tessera resume` makes it take work
    again."""
    for n in ("r-1", "r-2", "r-3"):
        r = c.cli("drain", n)
        check(r.returncode == 0 and "drained" in r.stdout, f"tessera drain {n}: {r.stdout}")
    jid = c.submit(spec("one-node", 'echo "host=$(hostname)"; sleep 1', count=2,
                        tier="opportunistic"))
    time.sleep(2)
    j = c.job(jid)
    check(j.get("state") == "pending", f"a 2-node job waits while one node is up: {j.get('state')}")
    for n in ("r-1", "r-2", "r-3"):
        r = c.cli("resume", n)
        check(r.returncode == 0, f"tessera resume {n} exits 0: {r.returncode} {r.stderr}")
    c.wait_job(jid, "completed", 30, "after the resume the job runs and completes")
