"""Promises of how a job ends on real agents, and that it says why: a time
limit stops the job with its checkpoint signal, then SIGKILL after the grace,
and it ends `timeout` with its reason and events; a task that ignores SIGTERM
is killed all the same; a rank's exit code, a signal, an OOM kill and a
command that cannot start reach the Job, its events, `tessera show` and
`tessera jobs`; a failed rank's output is there after it ended.

Each scenario_* runs on the default cluster of tests/lib/cluster.py (four
8-GPU H100 nodes; tenants team-a and team-b)."""
import os
import time

from cluster import alive, pid_of
from harness import check

# how much later than limit + grace a task may still exist: the agent acts on
# a deadline within its 50-ms wait floor, the rest is this test's polling
SLACK_S = 2.0


def spec(name, cmd, count=1, gpus=8, tenant="team-a", limit="10m", ckpt=None, **kw):
    s = {"tenant": tenant, "name": name, "tier": "guaranteed",
         "command": ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else cmd,
         "tasks": [{"count": count, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 1024}],
         "time_limit": limit}
    if ckpt:
        s["checkpoint"] = ckpt
    s.update(kw)
    return s


def memory_cgroups_here():
    """A memory controller the agent can limit with: a cgroup v1 memory
    hierarchy, or cgroup v2 offering memory (docs/agent-tasks.md "Isolation")."""
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fs = line.split(" - ", 1)[-1].split()
            if fs[0] == "cgroup" and "memory" in fs[-1].split(","):
                return True
            if fs[0] == "cgroup2":
                mnt = line.split()[4]
                ctl = os.path.join(mnt, "cgroup.controllers")
                if os.path.exists(ctl) and "memory" in open(ctl).read().split():
                    return True
    return False


def kinds(c, jid):
    return [e["kind"] for e in c.events(jid)]


def scenario_time_limit_checkpoint_signal_grace_then_kill(c):
    """job-spec.md: at its time limit every rank gets the job's checkpoint
    signal, SIGKILL after the grace; the job ends `timeout`, with its reason
    and a "time-limit" and a "timeout" event."""
    cmd = ('trap "echo got-usr1" USR1; echo "pid=$$"; '
           'while :; do sleep 0.1; done')
    t0 = time.time()
    jid = c.submit(spec("limited", cmd, limit="3s", ckpt={"signal": "SIGUSR1", "grace": "2s"}))
    if not c.wait_job(jid, "running", 30):
        return
    pid = pid_of(c, jid)
    start = c.job(jid).get("start_time") or t0
    gone = c.wait(lambda: pid and not alive(pid) and time.time(),
                  "the task is gone after its limit and grace", 3 + 2 + SLACK_S + 10)
    if gone:
        late = gone - (start + 3 + 2)
        check(late < SLACK_S, f"gone within grace + {SLACK_S:g} s of its limit ({late:+.2f} s)")
        check(gone - start >= 3 + 2 - 0.5,
              f"not killed before its grace ended ({gone - start:.2f} s after its start)")
    j = c.wait_job(jid, "timeout", 15)
    if not j:
        return
    check(j.get("reason") == "timeout", f"its reason is timeout: {j.get('reason')}")
    check("time limit 3s reached" in (j.get("why") or ""), f"why says so: {j.get('why')}")
    check(j.get("exit_code") is None and j.get("signal") == 9,
          f"ended by SIGKILL, no exit code of its own: {j.get('exit_code')} {j.get('signal')}")
    r0 = (j.get("ranks") or [{}])[0] or {}
    check(r0.get("end") == "timeout" and r0.get("node"), f"rank 0 ended at its limit: {r0}")
    check("got-usr1" in c.output(r0.get("node", "r-1"), jid),
          "the task got its checkpoint signal first")
    k = kinds(c, jid)
    check("time-limit" in k and "timeout" in k, f"time-limit and timeout events: {k}")
    ev = [e for e in c.events(jid) if e["kind"] == "time-limit"]
    check(ev and "time limit 3s reached" in (ev[0].get("detail") or ""),
          f"the time-limit event says so: {ev}")
    r = c.cli("show", str(jid))
    check(r.returncode == 0 and "timeout" in r.stdout and "time limit 3s reached" in r.stdout,
          f"tessera show says timeout and why: {r.stdout}")
    r = c.cli("jobs", "--state", "timeout")
    check(r.returncode == 0 and any(ln.split()[0] == str(jid) and "sig 9" in ln
                                    for ln in r.stdout.splitlines()[1:]),
          f"tessera jobs lists it with its exit: {r.stdout}")


def scenario_task_ignoring_sigterm_killed_after_grace(c):
    """job-spec.md: a job without a checkpoint signal gets SIGTERM at its
    limit; a task that ignores it is killed (SIGKILL) when the grace ends."""
    cmd = "trap '' TERM; echo \"pid=$$\"; while :; do sleep 0.1; done"
    jid = c.submit(spec("stubborn", cmd, count=2, limit="2s", ckpt={"grace": "1s"}))
    if not c.wait_job(jid, "running", 30):
        return
    pids = [pid_of(c, jid, r) for r in (0, 1)]
    start = c.job(jid).get("start_time") or time.time()
    gone = c.wait(lambda: all(p and not alive(p) for p in pids) and time.time(),
                  f"every rank is gone: {pids}", 2 + 1 + SLACK_S + 10)
    if gone:
        check(gone - (start + 2 + 1) < SLACK_S,
              f"gone within grace + {SLACK_S:g} s ({gone - start - 3:+.2f} s)")
    j = c.wait_job(jid, "timeout", 15)
    if not j:
        return
    ranks = j.get("ranks") or []
    check(len(ranks) == 2 and all(r and r.get("signal") == 9 and r.get("end") == "timeout"
                                  for r in ranks),
          f"both ranks were killed at their limit: {ranks}")
    check("SIGTERM, then SIGKILL after 1s" in (j.get("why") or ""),
          f"why names SIGTERM and the grace: {j.get('why')}")


def scenario_a_job_that_exits_0_on_its_time_limit(c):
    """api.md: `exit_code` is 0 when every rank exited 0: a job that saves and
    exits 0 on its time limit's signal ends `timeout` with exit code 0 (not
    null), and its reason says it exited on the signal, naming no SIGKILL
    that was never sent."""
    cmd = 'trap "echo saved; exit 0" USR1; while :; do sleep 0.1; done'
    jid = c.submit(spec("tidy", cmd, count=2, gpus=1, limit="2s",
                        ckpt={"signal": "SIGUSR1", "grace": "5s"}))
    j = c.wait_job(jid, "timeout", 30)
    if not j:
        return
    why = j.get("why") or ""
    check(j.get("exit_code") == 0 and j.get("signal") is None,
          f"its exit code is 0: {j.get('exit_code')} {j.get('signal')}")
    check("every rank exited 0 on it" in why and "SIGKILL" not in why,
          f"its reason says it exited on the signal: {why}")


def scenario_time_limit_holds_while_the_controller_is_down(c):
    """job-spec.md: each node's agent enforces the limit itself, so a
    controller outage never extends it. The controller is frozen (SIGSTOP)
    from just after the start; the agent's own rule for a lost controller
    would stop the task only after half of node_lost_after (5 s) and its
    termination grace, so a task gone at limit + grace is the time limit's."""
    import signal
    cmd = "trap '' TERM; echo \"pid=$$\"; while :; do sleep 0.1; done"
    jid = c.submit(spec("outage", cmd, limit="2s", ckpt={"grace": "1s"}))
    if not c.wait_job(jid, "running", 30):
        return
    pid = pid_of(c, jid)
    start = c.job(jid).get("start_time") or time.time()
    ctld = c.procs["tesserad"]
    ctld.send_signal(signal.SIGSTOP)
    try:
        gone = c.wait(lambda: pid and not alive(pid) and time.time(),
                      "the task is gone at its limit with the controller frozen", 15)
    finally:
        ctld.send_signal(signal.SIGCONT)
    if gone:
        check(gone - (start + 2 + 1) < SLACK_S,
              f"gone within grace + {SLACK_S:g} s with no controller "
              f"({gone - start - 3:+.2f} s)")
    j = c.wait_job(jid, "timeout", 30)
    check(bool(j) and (j.get("ranks") or [{}])[0].get("end") == "timeout",
          f"once back, the controller records the timeout: {j}")


def scenario_a_controller_restart_past_half_node_lost_after_reruns_nothing(c):
    """tessera-agent.md: cut off for half of node_lost_after, the agent stops
    its tasks, "which the controller requeues". A tesserad killed and started
    again 9 s later (node_lost_after 10 s) finds each agent's stopped tasks in
    its registration: the running job is requeued with the agent's reason,
    never started again on its old run behind the user's back, and a job
    that ended during the outage keeps its exit code, its end time and ran
    once (both were started again, silently, before; the end time was the
    restart's)."""
    import signal
    from harness import wait_ready
    runs, once = c.path("runs.txt"), c.path("once.txt")
    for f in (runs, once):
        open(f, "w").close()
        os.chmod(f, 0o666)
    long_id = c.submit(spec("long", f"echo run >> {runs}; sleep 300", gpus=1))
    short_id = c.submit(spec("short", f"echo run >> {once}; sleep 3; exit 3", gpus=1))
    if not (c.wait_job(long_id, "running", 30) and c.wait_job(short_id, "running", 30)):
        return
    c.wait(lambda: open(runs).read() and open(once).read(), "both tasks started", 15)
    ctld = c.procs["tesserad"]
    ctld.send_signal(signal.SIGKILL)
    ctld.wait()
    time.sleep(9)  # past half of node_lost_after (5 s) and the tasks' stop
    back = time.time()
    c._spawn("tesserad", [c.bins["tesserad"], "--config", c.path("tesserad.yaml")])
    check(wait_ready(c.url, 30), "tesserad is back")
    j = c.wait_job(short_id, "failed", 30)
    check(bool(j) and j.get("exit_code") == 3,
          f"the job that ended in the outage keeps its exit code: {j and j.get('exit_code')}")
    end, start = (j or {}).get("end_time") or 0, (j or {}).get("start_time") or 0
    check(start + 2 < end < back - 2, f"and its end time is when it ended (about 3 s after its "
          f"start), not when the controller came back: start {start:.1f}, end {end:.1f}, "
          f"back {back:.1f}")
    check(open(once).read() == "run\n", f"and ran once: {open(once).read()!r}")
    ev = c.wait(lambda: [e for e in c.events(long_id) if e["kind"] == "requeued"],
                "the running job is requeued", 30)
    check(bool(ev) and "controller_lost" in (ev[0].get("detail") or ""),
          f"its requeued event gives the agent's reason: {ev}")
    # a start whose shell has not written its line yet is not a silent start
    # (under load the requeued job's next run starts before its line is
    # written): a run line without a started event would be
    def counts():
        return (open(runs).read().count("run"),
                len([e for e in c.events(long_id) if e["kind"] == "started"]))
    c.wait(lambda: counts()[0] >= counts()[1], "each started run wrote its line", 15)
    lines, starts = counts()
    check(lines == starts, f"each start of it is a started event ({lines} runs, "
          f"{starts} started events)")


def scenario_a_killed_agent_s_tasks_stop_before_its_job_runs_elsewhere(c):
    """tessera-agent.md: an agent killed and not back within half of
    node_lost_after: its tasks' keepers stop them, as a cut-off agent does,
    before the controller declares the node lost and starts the job on
    another node, so the job never runs twice at once (it ran on both
    before, the old rank until an agent came back)."""
    import signal
    cmd = "echo \"pid=$$\"; while :; do sleep 0.2; done"
    jid = c.submit(spec("orphan", cmd, gpus=8))
    if not c.wait_job(jid, "running", 30):
        return
    pid = pid_of(c, jid)
    node = ((c.job(jid).get("placement") or [{}])[0]).get("node")
    if not pid or not node:
        check(False, f"the rank's pid and node: {pid} {node}")
        return
    agent = c.procs[node]
    agent.send_signal(signal.SIGKILL)
    agent.wait()
    killed, dead_at, elsewhere_at = time.time(), None, None
    while time.time() < killed + 30 and not (dead_at and elsewhere_at):
        if dead_at is None and not alive(pid):
            dead_at = time.time()
        j = c.job(jid)
        where = ((j.get("placement") or [{}])[0]).get("node")
        if elsewhere_at is None and j.get("state") == "running" and where and where != node:
            elsewhere_at = time.time()
        time.sleep(0.1)
    check(dead_at is not None, f"the rank on {node} stops with its agent gone")
    check(elsewhere_at is not None, "the job runs on another node once its node is lost")
    if dead_at and elsewhere_at:
        check(dead_at < elsewhere_at, f"the old rank was gone {elsewhere_at - dead_at:.1f} s "
              f"before the job ran elsewhere ({dead_at - killed:.1f} s after the kill)")
    # the agent back: it adopts the stopped task and the node takes work again
    c._spawn(node, agent.args, dict(os.environ,
                                    TESSERA_FAKE_NVML_FIXTURE=c.path(node + "-gpus.json")))
    c.wait(lambda: c.node(node).get("state") in ("up", "drained"), "the agent registers", 30)


def scenario_a_second_agent_for_a_node_is_refused(c):
    """agent-protocol.md: a second tessera-agent for a node (its own state
    directory, the node's token) is refused while the node's agent is heard
    from, naming both; it starts nothing (it started the node's job again on
    the same GPUs before)."""
    mark = "second-agent-probe-7731"
    jid = c.submit(spec("once", f"sleep 300; : {mark}", gpus=8))
    if not c.wait_job(jid, "running", 30):
        return
    node = ((c.job(jid).get("placement") or [{}])[0]).get("node")
    first = c.procs[node]
    args = list(first.args)
    args[args.index("--state-dir") + 1] = c.path(node + "-second")
    c._spawn(node + "-second", args, dict(os.environ,
                                          TESSERA_FAKE_NVML_FIXTURE=c.path(node + "-gpus.json")))
    log = c.path(node + "-second.log")
    said = c.wait(lambda: os.path.exists(log) and "another tessera-agent serves it" in
                  open(log).read(), "the second agent is refused, and says why", 20)
    check(bool(said), f"its log: {open(log).read()[-400:] if os.path.exists(log) else ''!r}")
    time.sleep(3)
    import subprocess
    n = len(subprocess.run(["pgrep", "-f", mark], capture_output=True,
                           text=True).stdout.split())
    check(n == 1, f"the job's task runs once, not again by the second agent ({n})")
    check(c.job(jid).get("state") == "running", "the job runs on")
    c.procs.pop(node + "-second").kill()


def scenario_an_agent_stopped_with_sigterm_says_so(c):
    """tessera-agent.md: SIGTERM stops the agent's tasks and takes the node out
    of service: its last sync reports them, so their job requeues at once
    (with the agent's reason) and runs elsewhere, not after node_lost_after;
    the node takes no work until an agent registers again."""
    import signal
    jid = c.submit(spec("moves", "sleep 300", gpus=8))
    if not c.wait_job(jid, "running", 30):
        return
    node = ((c.job(jid).get("placement") or [{}])[0]).get("node")
    agent = c.procs[node]
    t0 = time.time()
    agent.send_signal(signal.SIGTERM)
    agent.wait(30)
    ev = c.wait(lambda: [e for e in c.events(jid) if e["kind"] == "requeued"],
                "the job is requeued", 20)
    took = time.time() - t0
    check(bool(ev) and "agent_stopped" in (ev[0].get("detail") or ""),
          f"its requeued event gives the agent's reason: {ev}")
    check(took < 8, f"within seconds of the stop, not node_lost_after (10 s): {took:.1f} s")
    check(c.node(node).get("state") != "up", f"{node} takes no work: {c.node(node).get('state')}")
    j = c.wait_job(jid, "running", 30)
    where = ((j or {}).get("placement") or [{}])[0].get("node")
    check(bool(j) and where != node, f"the job runs elsewhere: {where}")
    c._spawn(node, agent.args, dict(os.environ,
                                    TESSERA_FAKE_NVML_FIXTURE=c.path(node + "-gpus.json")))
    c.wait(lambda: c.node(node).get("state") == "up", "the agent back, its node is up", 30)


def scenario_an_agent_stopped_while_no_controller_answers(c):
    """tessera-agent.md: an agent stopped (SIGTERM) while no controller
    answers keeps its stopped tasks' records, marked, for the next agent: at
    its registration the job is requeued with the agent's reason and runs
    again as a new run (TESSERA_RESTARTS 1), never the same run started again
    unseen (the records were dropped and the controller relaunched it)."""
    import signal
    from harness import wait_ready
    seen = c.path("restarts.txt")
    open(seen, "w").close()
    os.chmod(seen, 0o666)
    jid = c.submit(spec("left", f"echo $TESSERA_RESTARTS >> {seen}; sleep 300", gpus=8))
    if not c.wait_job(jid, "running", 30):
        return
    # its first run under way (under load the shell may not have begun yet)
    c.wait(lambda: open(seen).read().split() == ["0"], "its first run started", 30)
    node = ((c.job(jid).get("placement") or [{}])[0]).get("node")
    ctld = c.procs["tesserad"]
    ctld.send_signal(signal.SIGKILL)
    ctld.wait()
    agent = c.procs[node]
    agent.send_signal(signal.SIGTERM)
    agent.wait(30)
    c._spawn("tesserad", [c.bins["tesserad"], "--config", c.path("tesserad.yaml")])
    check(wait_ready(c.url, 30), "tesserad is back")
    c._spawn(node, agent.args, dict(os.environ,
                                    TESSERA_FAKE_NVML_FIXTURE=c.path(node + "-gpus.json")))
    ev = c.wait(lambda: [e for e in c.events(jid) if e["kind"] == "requeued"],
                "the job is requeued once the agent is back", 30)
    check(bool(ev) and "agent_stopped" in (ev[0].get("detail") or ""),
          f"its requeued event gives the agent's reason: {ev}")
    c.wait(lambda: open(seen).read().split() == ["0", "1"],
           f"it ran again as a new run: TESSERA_RESTARTS {open(seen).read().split()}", 30)
    j = c.job(jid)
    check(j.get("restarts") == 1, f"the job counts the restart: {j.get('restarts')}")


def scenario_exit_code_of_a_rank(c):
    """api.md: an ended job's `exit_code` and each rank's end (`ranks`); a
    failed job's reason names the rank, its node and its exit code."""
    cmd = 'if [ "$RANK" = 1 ]; then echo "bad input" >&2; exit 3; fi; sleep 30'
    jid = c.submit(spec("exit3", cmd, count=2))
    j = c.wait_job(jid, "failed", 30)
    if not j:
        return
    ranks = j.get("ranks") or [None, None]
    r1 = ranks[1] or {}
    check(j.get("exit_code") == 3, f"the job's exit_code is rank 1's: {j.get('exit_code')}")
    check(j.get("reason") == "exit-code", f"its reason is exit-code: {j.get('reason')}")
    check(r1.get("exit_code") == 3 and r1.get("end") == "exited" and r1.get("node"),
          f"rank 1 exited with 3 on its node: {r1}")
    why = j.get("why") or ""
    check(f"rank 1 on {r1.get('node')} exited with code 3" in why and "bad input" in why,
          f"why names the rank, node, code and its last output: {why}")
    failed = [e for e in c.events(jid) if e["kind"] == "failed"]
    check(failed and "exited with code 3" in (failed[0].get("detail") or "") and
          failed[0].get("data", {}).get("ranks_failed") == 1,
          f"the failed event says it: {failed}")
    r = c.cli("show", str(jid))
    check(r.returncode == 0 and "Exit code:" in r.stdout and "exited with code 3" in r.stdout,
          f"tessera show has the exit code and rank 1's end: {r.stdout}")
    r = c.cli("jobs")
    row = [ln.split() for ln in r.stdout.splitlines() if ln.split()[:1] == [str(jid)]]
    check(row and row[0][4] == "failed" and row[0][5] == "3",
          f"tessera jobs shows failed and exit 3: {row}")


def scenario_signal_is_shown(c):
    """api.md: a rank ended by a signal shows the signal, by number and name."""
    jid = c.submit(spec("segv", 'echo "about to crash"; kill -SEGV $$'))
    j = c.wait_job(jid, "failed", 30)
    if not j:
        return
    r0 = (j.get("ranks") or [{}])[0] or {}
    check(j.get("signal") == 11 and j.get("exit_code") is None,
          f"signal 11, no exit code: {j.get('signal')} {j.get('exit_code')}")
    check(r0.get("end") == "signal" and "SIGSEGV" in (r0.get("reason") or ""),
          f"rank 0 was killed by SIGSEGV: {r0}")
    check(j.get("reason") == "signal" and "killed by signal 11 (SIGSEGV)" in (j.get("why") or ""),
          f"reason and why: {j.get('reason')} {j.get('why')}")
    r = c.cli("jobs", "--state", "failed")
    check(any(ln.split()[:1] == [str(jid)] and "sig 11" in ln for ln in r.stdout.splitlines()),
          f"tessera jobs shows sig 11: {r.stdout}")


def scenario_launch_error_says_command_not_found(c):
    """agent-tasks.md: a command that is not found fails its job with
    "command not found: NAME" in its reason, not only a count of ranks."""
    jid = c.submit(spec("typo", ["pyhton", "train.py"]))
    j = c.wait_job(jid, "failed", 30)
    if not j:
        return
    why = j.get("why") or ""
    check("command not found: pyhton" in why, f"why says command not found: {why}")
    check(j.get("reason") == "launch", f"its reason is launch: {j.get('reason')}")
    r0 = (j.get("ranks") or [{}])[0] or {}
    check(r0.get("end") == "launch" and "command not found: pyhton" in r0.get("reason", ""),
          f"rank 0 could not start: {r0}")
    failed = [e for e in c.events(jid) if e["kind"] == "failed"]
    check(failed and "command not found: pyhton" in (failed[0].get("detail") or ""),
          f"the failed event says so: {failed}")
    r = c.cli("show", str(jid))
    check("command not found: pyhton" in r.stdout, f"tessera show says so: {r.stdout}")
    jid = c.submit(spec("nowhere", "true", workdir="/data/run"))
    j = c.wait_job(jid, "failed", 30)
    check(bool(j) and "could not start: workdir /data/run: No such file or directory"
          in (j.get("why") or ""), f"a missing workdir says so: {(j or {}).get('why')}")


def scenario_a_relative_command_runs_from_its_workdir(c):
    """agent-tasks.md: a command named by a relative path (`./train.sh`,
    `bin/run`) is found in the task's workdir, as a shell started there
    finds it."""
    wd = c.path("rel-wd")
    os.makedirs(os.path.join(wd, "bin"), exist_ok=True)
    for name in ("run.sh", "bin/run"):
        path = os.path.join(wd, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\necho \"relative $0 ok in $(pwd)\"\n")
        os.chmod(path, 0o755)
    os.chmod(wd, 0o755)
    os.chmod(os.path.join(wd, "bin"), 0o755)
    os.chmod(c.tmp, 0o755)
    for cmd in ("./run.sh", "bin/run"):
        jid = c.submit(spec("rel", [cmd], gpus=1, workdir=wd))
        j = c.wait_job(jid, ("completed", "failed"), 30)
        out = "".join(c.output(n.name, jid) for n in c.nodes)
        check(bool(j) and j.get("state") == "completed" and f"relative {cmd} ok in {wd}" in out,
              f"{cmd} from its workdir runs: {(j or {}).get('state')} {(j or {}).get('why')} "
              f"{out!r}")


def scenario_oom_kill_is_reported(c):
    """agent-tasks.md: a rank the kernel's OOM killer ended (its cgroup's
    memory.events on v2, memory.oom_control on v1) ends `oom` with the signal
    that ended it, and the job and its events say so."""
    s = spec("hog", ["python3", "-c", "x = bytearray(1 << 30); print('survived')"])
    s["tasks"][0]["memory_mib"] = 64
    jid = c.submit(s)
    j = c.wait_job(jid, ("failed", "completed"), 60)
    if not j:
        return
    r0 = (j.get("ranks") or [{}])[0] or {}
    if r0.get("end") != "oom" and not memory_cgroups_here():
        print("  (no memory cgroup here, v1 or v2: no OOM kill to see)")
        return
    check(j.get("state") == "failed" and j.get("reason") == "oom",
          f"the job failed for oom: {j.get('state')} {j.get('reason')} {j.get('why')}")
    check(r0.get("end") == "oom" and r0.get("oom_kills", 0) >= 1 and r0.get("signal") == 9,
          f"rank 0 was OOM-killed (SIGKILL): {r0}")
    check("OOM killer" in (j.get("why") or ""), f"why says so: {j.get('why')}")
    ev = [e for e in c.events(jid) if "OOM killer" in str(e)]
    check(bool(ev), f"an event says so: {kinds(c, jid)}")


scenario_oom_kill_is_reported.needs_root = True


def scenario_output_after_redirect_is_readable(c):
    """slurm.md: a rank's last output is readable with `tessera logs` after it
    ended, also when `--output` sent it to a file."""
    script = ("#!/bin/bash\n#SBATCH --account=team-a\n#SBATCH --gpus=1\n"
              "#SBATCH --output=slurm-%j.out\n#SBATCH --time=5:00\n"
              "echo step one done\necho 'Traceback: boom' >&2\nexit 2\n")
    wd = c.path("sbatch-wd")
    os.makedirs(wd, exist_ok=True)
    open(os.path.join(wd, "job.sh"), "w").write(script)
    r = c.cli("sbatch", "--chdir", wd, os.path.join(wd, "job.sh"))
    check(r.returncode == 0, f"sbatch submits: {r.returncode} {r.stdout} {r.stderr}")
    try:
        jid = int(r.stdout.split()[-1])
    except (ValueError, IndexError):
        return
    j = c.wait_job(jid, "failed", 30)
    if not j:
        return
    redirected = os.path.join(wd, f"slurm-{jid}.out")
    check(os.path.exists(redirected) and "Traceback: boom" in open(redirected).read(),
          f"--output got the output: {redirected}")
    r = c.cli("logs", str(jid))
    check(r.returncode == 0 and "Traceback: boom" in r.stdout,
          f"tessera logs shows it after the end: {r.returncode} {r.stdout} {r.stderr}")
    check("Traceback: boom" in (j.get("why") or ""), f"why quotes its last line: {j.get('why')}")


def scenario_a_running_job_whose_node_left_the_cluster_file(c):
    """tesserad.md: a job restored at start whose node is no longer in the
    cluster file fails, its reason naming the node (the message was built
    from freed memory: garbage, and on PostgreSQL a start that failed)."""
    import signal
    from harness import wait_ready
    others = ("r-1", "r-2", "r-3")
    for n in others:  # so that it lands on r-4 without naming it
        c.call("POST", f"/v1/nodes/{n}/drain", {})
    jid = c.submit(spec("on-r-4", "sleep 300", gpus=1))
    j = c.wait_job(jid, "running", 30)
    for n in others:
        c.call("POST", f"/v1/nodes/{n}/resume", {})
    if not j or (j.get("placement") or [{}])[0].get("node") != "r-4":
        check(False, f"the job runs on r-4: {j and j.get('placement')}")
        return
    whole = open(c.path("cluster.yaml")).read()
    ctld = c.procs["tesserad"]
    ctld.send_signal(signal.SIGKILL)
    ctld.wait()
    c.write("cluster.yaml", "".join(line for line in whole.splitlines(keepends=True)
                                    if "name: r-4," not in line))
    c._spawn("tesserad", [c.bins["tesserad"], "--config", c.path("tesserad.yaml")])
    check(wait_ready(c.url, 30), "tesserad starts without r-4")
    j = c.job(jid)
    check(j.get("state") == "failed" and 'placement[0]: node "r-4" is gone' in (j.get("why") or ""),
          f"the job fails naming its node: {j.get('state')} {j.get('why')!r}")
    # r-4 back, for what follows
    ctld = c.procs["tesserad"]
    ctld.send_signal(signal.SIGTERM)
    ctld.wait()
    c.write("cluster.yaml", whole)
    c._spawn("tesserad", [c.bins["tesserad"], "--config", c.path("tesserad.yaml")])
    check(wait_ready(c.url, 30), "tesserad is back with r-4")
