"""Promises of the site's prolog and epilog on real agents
(docs/tessera-agent.md "Prolog and epilog"): the agent runs --prolog before
a task starts and --epilog after it ended, with the job's identity in their
environment and their output in the agent log; a failing or timed-out
prolog fails the launch (prolog_failed) and drains the node with a reason; a
failing epilog drains it too; a hook that hangs never stops the agent's
exchange with the controller."""
import atexit
import os
import shutil
import stat
import tempfile
import time

from cluster import Node
from harness import check

HOOKS = tempfile.mkdtemp(prefix="tessera-hooks-")
atexit.register(shutil.rmtree, HOOKS, True)
HOOK = """#!/bin/sh
# {kind}: one line of the job's identity; fails or hangs on request
d={dir}
echo "{kind} job=$TESSERA_JOB_ID slurm=$SLURM_JOB_ID rank=$TESSERA_RANK user=$TESSERA_USER \
uid=$TESSERA_UID gpus=$TESSERA_GPUS node=$TESSERA_NODE exit=$TESSERA_EXIT_CODE" >> $d/{kind}.log
echo "{kind} output for the agent log"
[ -e $d/hang-{kind}-$TESSERA_NODE ] && sleep 60
[ -e $d/slow-{kind}-$TESSERA_NODE ] && sleep 1
[ -e $d/slower-{kind}-$TESSERA_NODE ] && sleep 2
[ -e $d/fail-{kind}-$TESSERA_NODE ] && exit 3
exit 0
"""
for kind in ("prolog", "epilog"):
    p = os.path.join(HOOKS, kind + ".sh")
    with open(p, "w") as f:
        f.write(HOOK.format(kind=kind, dir=HOOKS))
    os.chmod(p, stat.S_IRWXU | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
os.chmod(HOOKS, 0o755)

ARGS = ["--prolog", os.path.join(HOOKS, "prolog.sh"), "--epilog",
        os.path.join(HOOKS, "epilog.sh"), "--hook-timeout", "3"]
# r-5 runs at most 2 hooks at once: more epilogs wait for a slot
CLUSTER = {"nodes": [Node(n, "l1", args=ARGS) for n in ("r-1", "r-2", "r-3", "r-4")] +
           [Node("r-5", "l1", args=ARGS + ["--max-hooks", "2"])]}

SPEC = {"tenant": "team-a", "name": "hooked", "tier": "guaranteed",
        "tasks": [{"count": 1, "gpus": 2, "cpu_milli": 500, "memory_mib": 256}],
        "time_limit": "5m"}


def lines(kind):
    p = os.path.join(HOOKS, kind + ".log")
    return open(p).read().splitlines() if os.path.exists(p) else []


def flag(name):
    open(os.path.join(HOOKS, name), "w").close()


def unflag(name):
    try:
        os.unlink(os.path.join(HOOKS, name))
    except FileNotFoundError:
        pass


def on(node, command="true", **extra):
    return dict(SPEC, nodelist=node, command=["/bin/sh", "-c", command], **extra)


def resume(c, node):
    st, d = c.call("POST", f"/v1/nodes/{node}/resume")
    check(st == 200, f"{node} resumes: {st} {d if st != 200 else ''}")


def scenario_prolog_and_epilog_run_with_the_jobs_identity(c):
    """tessera-agent.md: the prolog runs before the task starts and the
    epilog after it ended, as root, with TESSERA_JOB_ID, SLURM_JOB_ID, the
    user, the GPUs and (epilog) the exit code; their output is in the agent
    log."""
    jid = c.submit(on("r-1", "exit 0"))
    c.wait_job(jid, "completed", 30)
    pro = c.wait(lambda: [x for x in lines("prolog") if f"job={jid} " in x],
                 "the prolog ran for the job", 10)
    epi = c.wait(lambda: [x for x in lines("epilog") if f"job={jid} " in x],
                 "the epilog ran for the job", 10)
    if not pro or not epi:
        return
    check(f"slurm={jid} " in pro[0] and "rank=0" in pro[0] and "node=r-1" in pro[0],
          f"the prolog sees the job, Slurm's id, rank and node: {pro[0]}")
    check(" user=" in pro[0] and "user= " not in pro[0], f"and the user: {pro[0]}")
    gpus = pro[0].split("gpus=")[1].split()[0]
    check(len(gpus.split(",")) == 2, f"and its 2 GPUs: {pro[0]}")
    check("exit=0" in epi[0], f"the epilog sees the exit code: {epi[0]}")
    log = open(c.path("r-1.log")).read()
    check("prolog output for the agent log" in log and "epilog output for the agent log" in log,
          "the hooks' output is in the agent log")
    check(c.node("r-1").get("state") == "up", "the node stays up")


def scenario_a_failing_prolog_fails_the_launch_and_drains_the_node(c):
    """tessera-agent.md: a prolog that fails fails its task's launch (the job
    fails with reason prolog_failed) and drains the node with the reason,
    until an admin resumes it."""
    flag("fail-prolog-r-2")
    try:
        jid = c.submit(on("r-2", "echo should-not-run"))
        j = c.wait_job(jid, "failed", 30)
        check(j and j.get("reason") == "prolog_failed", f"reason prolog_failed: {j and j.get('reason')}")
        ranks = (j or {}).get("ranks") or [{}]
        check(ranks[0].get("end") == "prolog_failed", f"the rank's end: {ranks[0]}")
        check(c.output("r-2", jid) == "", "the task never ran")
        n = c.wait(lambda: (lambda n: n if n.get("state") == "drained" else None)(c.node("r-2")),
                   "r-2 is drained", 15)
        check(n and "prolog" in (n.get("drain_reason") or "") and "code 3" in n["drain_reason"],
              f"the drain reason names the prolog and its exit: {n and n.get('drain_reason')}")
        other = c.submit(on("r-2"))
        time.sleep(1.0)  # five cycles
        check(c.job(other).get("state") == "pending", "nothing new is placed on r-2")
        c.call("POST", f"/v1/jobs/{other}/cancel")
    finally:
        unflag("fail-prolog-r-2")
    resume(c, "r-2")
    c.wait(lambda: c.node("r-2").get("state") == "up", "r-2 is up once resumed", 10)


def scenario_a_hung_prolog_is_killed_and_the_agent_keeps_syncing(c):
    """tessera-agent.md: a prolog still running after --hook-timeout is
    killed, the launch fails (prolog_failed) and the node is drained saying
    so; meanwhile the agent goes on exchanging with the controller."""
    flag("hang-prolog-r-3")
    try:
        jid = c.submit(on("r-3"))
        c.wait(lambda: [x for x in lines("prolog") if f"job={jid} " in x], "the prolog started", 10)
        seen0 = c.node("r-3").get("health", {}).get("last_seen", 0)
        time.sleep(1.5)  # within the hook's 3-s timeout
        seen1 = c.node("r-3").get("health", {}).get("last_seen", 0)
        check(seen1 > seen0, f"the agent syncs while its prolog hangs: {seen0} -> {seen1}")
        j = c.wait_job(jid, "failed", 30)
        check(j and j.get("reason") == "prolog_failed", f"reason prolog_failed: {j and j.get('reason')}")
        n = c.wait(lambda: (lambda n: n if n.get("state") == "drained" else None)(c.node("r-3")),
                   "r-3 is drained", 15)
        check(n and "timed out" in (n.get("drain_reason") or ""),
              f"the drain reason says it timed out: {n and n.get('drain_reason')}")
    finally:
        unflag("hang-prolog-r-3")
    resume(c, "r-3")


def scenario_a_failing_epilog_drains_the_node(c):
    """tessera-agent.md: an epilog that fails drains the node with the
    reason; the job's own end stays what it was."""
    flag("fail-epilog-r-4")
    try:
        jid = c.submit(on("r-4", "exit 0"))
        j = c.wait_job(jid, "completed", 30)
        check(j is not None, "the job completed as its task did")
        n = c.wait(lambda: (lambda n: n if n.get("state") == "drained" else None)(c.node("r-4")),
                   "r-4 is drained", 15)
        check(n and "epilog" in (n.get("drain_reason") or ""),
              f"the drain reason names the epilog: {n and n.get('drain_reason')}")
    finally:
        unflag("fail-epilog-r-4")
    resume(c, "r-4")


def scenario_the_steps_srun_runs_run_no_hook(c):
    """tessera-agent.md: the prolog runs before a rank's task and the epilog
    after it; the steps srun runs inside it run neither, as in Slurm."""
    path = c.path("hooked-steps.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n#SBATCH -N 1 --ntasks-per-node=1 --gpus-per-node=2 "
                "--account=team-a --time=5 -w r-1\nsrun true\nsrun true\n")
    r = c.cli("sbatch", path)
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    check(r.returncode == 0 and jid, f"tessera sbatch submits it: {r.stdout} {r.stderr}")
    if not jid or not c.wait_job(jid, "completed", 60):
        return
    st, d = c.call("GET", f"/v1/jobs/{jid}/steps")
    check(st == 200 and [s.get("exit_code") for s in d.get("steps", [])] == [0, 0],
          f"its two steps ran: {st} {d}")
    c.wait(lambda: [x for x in lines("epilog") if f"job={jid} " in x], "the epilog ran", 10)
    time.sleep(0.5)  # a step's epilog, were there one, would come with its end
    pro = [x for x in lines("prolog") if f"job={jid} " in x]
    epi = [x for x in lines("epilog") if f"job={jid} " in x]
    check(len(pro) == 1 and len(epi) == 1,
          f"one prolog and one epilog, the rank's, none for its steps: {pro} {epi}")


def six_ranks_waiting(c):
    """Three jobs of 2 ranks on r-5, each rank running until go-r-5 is
    flagged; their ids. Their prologs fit r-5's 2 slots, one job at a time."""
    go = os.path.join(HOOKS, "go-r-5")
    wait_go = f"echo up; while [ ! -e {go} ]; do sleep 0.1; done"
    jids = []
    for _ in range(3):
        jid = c.submit(on("r-5", wait_go, tasks=[
            {"count": 2, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}]))
        jids.append(jid)
        c.wait(lambda: all("up" in c.output("r-5", jid, r) for r in (0, 1)),
               f"job {jid}'s tasks run (their prologs done)", 30)
    return jids


def scenario_epilogs_beyond_the_running_hooks_wait_and_all_run(c):
    """tessera-agent.md: an epilog beyond the hooks already running waits for a slot and
    runs once one frees, oldest first: ending many tasks at once skips no epilog."""
    try:
        jids = six_ranks_waiting(c)
        flag("slow-epilog-r-5")
        flag("go-r-5")  # the 6 tasks end at once; each epilog takes a second
        for jid in jids:
            c.wait_job(jid, "completed", 30)
        want = {(j, r) for j in jids for r in ("0", "1")}

        def ran():
            return {(j, x.split("rank=")[1].split()[0]) for j in jids for x in lines("epilog")
                    if f"job={j} " in x and "node=r-5" in x}
        c.wait(lambda: ran() >= want, "an epilog ran for each of the 6 ranks", 30)
        check(ran() >= want, f"each rank's epilog ran, none skipped: {len(ran() & want)} of 6")
        log = open(c.path("r-5.log")).read()
        check("waits: 2 hooks run" in log, "the agent log says which epilogs waited")
        check(c.node("r-5").get("state") == "up", "the node stays up")
    finally:
        unflag("slow-epilog-r-5")
        unflag("go-r-5")


def scenario_waiting_epilogs_outlive_a_killed_agent(c):
    """tessera-agent.md: an agent killed while epilogs wait for a slot runs
    them after its restart, also for tasks whose ends the controller already
    took (their records gone): each once."""
    log = c.path("r-5.log")
    try:
        jids = six_ranks_waiting(c)
        flag("slower-epilog-r-5")
        flag("go-r-5")  # 6 ends at once on 2 slots, 2 s each: the last wait ~4 s
        for jid in jids:  # the controller took their ends: the agent forgets the tasks
            c.wait_job(jid, "completed", 30)
        ed = c.path("r-5", "epilogs")
        waiting = os.listdir(ed) if os.path.isdir(ed) else []
        old = c.procs["r-5"]
        old.kill()  # kill -9 with epilogs waiting
        old.wait(10)
        check(len(waiting) >= 1, f"epilogs wait when the agent is killed: {waiting}")
        unflag("slower-epilog-r-5")
        c._spawn("r-5", old.args, dict(os.environ,
                                       TESSERA_FAKE_NVML_FIXTURE=c.path("r-5-gpus.json")))
        want = {(j, r) for j in jids for r in ("0", "1")}

        def runs():
            return [(j, x.split("rank=")[1].split()[0]) for j in jids for x in lines("epilog")
                    if f"job={j} " in x and "node=r-5" in x]
        c.wait(lambda: set(runs()) >= want or None, "an epilog ran for each of the 6 ranks", 30)
        got = runs()
        check(set(got) >= want, f"each rank's epilog ran across the restart: "
              f"{len(set(got) & want)} of 6")
        check(len(got) == len(set(got)), f"each once: {sorted(got)}")
        check("waited when the last agent stopped" in open(log).read(),
              "the restarted agent says which epilogs it took over")
    finally:
        unflag("slower-epilog-r-5")
        unflag("go-r-5")
        if c.node("r-5").get("state") == "drained":
            resume(c, "r-5")


def scenario_prologs_beyond_the_running_hooks_wait_and_every_task_starts(c):
    """tessera-agent.md: a prolog beyond the hooks already running waits for
    a slot too, its task held: starting more tasks at once than there are
    slots drains no node and every task starts."""
    flag("slow-prolog-r-5")  # each prolog takes a second: 6 at once on 2 slots
    try:
        jid = c.submit(on("r-5", "echo up", tasks=[
            {"count": 6, "gpus": 1, "cpu_milli": 100, "memory_mib": 64}]))
        j = c.wait_job(jid, ("completed", "failed"), 60)
        check(j and j.get("state") == "completed",
              f"the job of 6 ranks completes: {j and (j.get('state'), j.get('reason'))}")
        ranks = {x.split("rank=")[1].split()[0] for x in lines("prolog")
                 if f"job={jid} " in x and "node=r-5" in x}
        check(ranks == {str(r) for r in range(6)}, f"a prolog ran for each rank: {sorted(ranks)}")
        check(all("up" in c.output("r-5", jid, r) for r in range(6)), "every rank's task ran")
        log = open(c.path("r-5.log")).read()
        check(f"prolog of job {jid} rank" in log and "waits: 2 hooks run" in log,
              "the agent log says which prologs waited")
        n = c.node("r-5")
        check(n.get("state") == "up", f"the node stays up: {n.get('state')} "
              f"{n.get('drain_reason')}")
    finally:
        unflag("slow-prolog-r-5")
        if c.node("r-5").get("state") == "drained":
            resume(c, "r-5")
