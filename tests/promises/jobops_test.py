"""Promises of changing and following jobs on a live cluster (docs/cli.md
"logs"): tessera logs -f prints a task's output as it comes until the job ends."""
import os
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


def scenario_logs_follow_prints_everything_until_the_end(c):
    """cli.md: `tessera logs -f` prints the rank's output as it comes, every line
    once and in order, from before the job starts until it ends; then exits 0."""
    lines = 40
    script = f"for i in $(seq 1 {lines}); do echo line $i; sleep 0.1; done"
    jid = c.submit(dict(SPEC, command=["/bin/sh", "-c", script]))
    p = follow(c, jid)
    try:
        out, err = p.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        check(False, "logs -f ends within 90 s of a job that runs about 4 s")
    want = "".join(f"line {i}\n" for i in range(1, lines + 1))
    check(p.returncode == 0, f"logs -f exits 0 once the job ended: {p.returncode} {err!r}")
    check(out == want, f"logs -f printed every line once, in order: {out!r}")
    check(c.job(jid).get("state") == "completed", "the job completed")


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
