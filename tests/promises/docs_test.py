"""Promises of several docs that no other test checked, on a live cluster
(docs/promises.md names the sentence behind each scenario): the metrics'
waiting reasons, the CLI's empty lists and node table, a task's working
directory and environment, that real nodes ignore a job's `duration`, and
that tenants replaced through the API outlive a restart of tesserad."""
import os
import re
import signal
import time

from cluster import Node
from harness import check, http_call, wait_ready

CLUSTER = {"nodes": [Node("r-1", leaf="l1"), Node("r-2", leaf="l1")]}

METRICS_MD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                          "metrics.md")


def metrics_doc():
    """docs/metrics.md's series table: {name: its row}."""
    rows = {}
    for line in open(METRICS_MD):
        m = re.match(r"^\| `(tessera_[a-z_]+)` \|", line)
        if m:
            rows[m.group(1)] = line
    return rows


def job_spec(name, command, gpus=1, **kw):
    s = {"tenant": "team-a", "name": name, "command": command,
         "tasks": [{"count": 1, "gpus": gpus, "cpu_milli": 500, "memory_mib": 256}],
         "time_limit": "10m"}
    s.update(kw)
    return s


def node_of(job):
    place = job.get("placement") or [{}]
    return place[0].get("node")


def output(c, jid):
    """What rank 0 of job jid wrote on stdout, on whichever node it ran
    (an ended job's placement is cleared)."""
    return "".join(c.output(n, jid) for n in ("r-1", "r-2"))


def scenario_an_empty_list_prints_no_jobs(c):
    """cli.md: an empty list prints `no jobs` on stderr and nothing on stdout."""
    r = c.cli("jobs", "--state", "held")
    check(r.returncode == 0, f"tessera jobs of an empty list exits 0: {r.returncode} {r.stderr}")
    check(r.stdout == "", f"nothing on stdout: {r.stdout!r}")
    check(r.stderr.strip() == "no jobs", f"'no jobs' on stderr: {r.stderr!r}")


def scenario_every_waiting_reason_is_always_present(c):
    """metrics.md: every reason of tessera_jobs_waiting is present, at 0 on an
    idle cluster; tesserad.md: /metrics needs a token by default (issue 24:
    it names every tenant), which an admin's is."""
    st, _ = http_call(c.url, "GET", "/metrics")
    check(st == 401, f"/metrics without a token answers 401 by default: {st}")
    st, text = http_call(c.url, "GET", "/metrics", c.admin)
    check(st == 200 and isinstance(text, str), f"/metrics with an admin token answers 200: {st}")
    got = set(re.findall(r'^tessera_jobs_waiting\{reason="([a-z-]+)"\} ', str(text), re.M))
    row = metrics_doc().get("tessera_jobs_waiting", "")
    said = set(re.findall(r"`([a-z-]+)`", row.split("|")[4] if row.count("|") > 4 else ""))
    check(said and said == got, f"tessera_jobs_waiting has every reason metrics.md lists, and "
          f"no other; not served {sorted(said - got)}, not listed {sorted(got - said)}")
    # every series the page serves is in metrics.md's table (its agents' are agent-metrics.md's)
    served = set(re.findall(r"^# TYPE (tessera_[a-z_]+) ", str(text), re.M))
    unlisted = sorted(served - set(metrics_doc()))
    check(not unlisted, f"every series served is in metrics.md: not listed {unlisted}")


def scenario_nodes_count_their_jobs(c):
    """cli.md: JOBS in `tessera nodes` counts the jobs on the node."""
    jid = c.submit(job_spec("counted", ["/bin/sh", "-c", "sleep 300"]))
    j = c.wait_job(jid, "running", 30)
    if not j:
        return
    mine = node_of(j)
    r = c.cli("nodes")
    check(r.returncode == 0, f"tessera nodes exits 0: {r.returncode} {r.stderr}")
    rows = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines()[1:] if ln.strip()}
    other = "r-2" if mine == "r-1" else "r-1"
    check(rows.get(mine, ["?"])[-1] == "1", f"JOBS of {mine} is 1: {rows.get(mine)}")
    check(rows.get(other, ["?"])[-1] == "0", f"JOBS of {other} is 0: {rows.get(other)}")


def scenario_task_workdir_and_environment(c):
    """job-spec.md: workdir is the tasks' working directory and env is every
    task's; agent-tasks.md: the agent's variables replace a job variable of
    the same name (CUDA_VISIBLE_DEVICES is empty for a task without GPUs),
    and PATH, HOME, USER and LOGNAME are set only when the job did not set
    them."""
    show = ("pwd; echo FOO=$FOO; echo CVD=[$CUDA_VISIBLE_DEVICES]; echo HOME=$HOME; "
            "echo USER=$USER/$LOGNAME; echo PATH=$PATH")
    jid = c.submit(job_spec("env", ["/bin/sh", "-c", show], gpus=0, workdir="/tmp",
                            env={"FOO": "bar", "CUDA_VISIBLE_DEVICES": "all",
                                 "HOME": "/nonexistent-home", "USER": "someone",
                                 "LOGNAME": "someone"}))
    j = c.wait_job(jid, "completed", 30)
    if not j:
        return
    out = output(c, jid).splitlines()
    want = ["/tmp", "FOO=bar", "CVD=[]", "HOME=/nonexistent-home", "USER=someone/someone"]
    check(out[:5] == want,
          f"workdir, env, an empty CUDA_VISIBLE_DEVICES and the job's HOME, USER, LOGNAME: {out}")
    check("PATH=/usr/local/bin:/usr/bin:/bin" in out, f"the default PATH: {out}")
    jid = c.submit(job_spec("path", ["/bin/sh", "-c", "echo PATH=$PATH"], gpus=0,
                            env={"PATH": "/opt/x/bin:/usr/bin:/bin"}))
    j = c.wait_job(jid, "completed", 30)
    if j:
        out = output(c, jid).splitlines()
        check(out == ["PATH=/opt/x/bin:/usr/bin:/bin"], f"the job's own PATH is kept: {out}")


def scenario_real_nodes_ignore_duration(c):
    """job-spec.md: `duration` is for virtual nodes; real nodes ignore it."""
    jid = c.submit(job_spec("long", ["/bin/sh", "-c", "sleep 3; echo done"], duration="1s"))
    j = c.wait_job(jid, "running", 30)
    if not j:
        return
    started = time.time()
    while time.time() - started < 2.0:
        state = c.job(jid).get("state")
        if state != "running":
            check(False, f"a job whose duration is 1 s runs on past it: {state} after "
                  f"{time.time() - started:.1f} s")
            return
        time.sleep(0.2)
    j = c.wait_job(jid, "completed", 20)
    if j:
        out = output(c, jid)
        check(out == "done\n", f"its command ran to its end: {out!r}")


TENANTS_API = {"tenants": {"org": {
    "guaranteed": {"gpu": {"H100-80GB": 32}},
    "teams": {"team-a": {"guaranteed": {"gpu": {"H100-80GB": 16}}},
              "team-b": {"guaranteed": {"gpu": {"H100-80GB": 16}}},
              "team-c": {}}}}}


BAD_TENANTS = """tenants:
  org:
    wieght: 2
    guaranteed: {gpu: {H100-80GB: 32}}
    teams:
      team-a: {guaranteed: {gpu: {A100: 1}}}
      team-b: {order: newest}
"""


def scenario_a_bad_tenants_file_says_every_error_and_changes_nothing(c):
    """cli.md, tenants-format.md: `tessera quota set` with a file of several
    errors prints every one, each with its line and key path, and changes
    nothing: the tenants in force stay."""
    st, d = c.call("GET", "/v1/tenants")
    before = sorted((t["name"], str(t["guaranteed"])) for t in d.get("tenants", []))
    path = c.path("bad-tenants.yaml")
    with open(path, "w") as f:
        f.write(BAD_TENANTS)
    r = c.cli("quota", "set", "-f", path)
    want = ['tenants: 3 errors; nothing changed (400 invalid)',
            '  tenants:3: tenants.org: unknown key "wieght"',
            '  tenants:6: tenants.org.teams.team-a.guaranteed.gpu: unknown GPU model "A100"',
            '  tenants:7: tenants.org.teams.team-b.order: must be las or fifo, got "newest"']
    check(r.returncode == 4 and all(w in r.stderr for w in want),
          f"exit 4 and every error with its line: {r.returncode} {r.stderr!r}")
    st, d = c.call("GET", "/v1/tenants")
    after = sorted((t["name"], str(t["guaranteed"])) for t in d.get("tenants", []))
    check(st == 200 and after == before, f"the tenants in force stay: {after} (was {before})")


def scenario_tenants_set_through_the_api_outlive_a_restart(c):
    """tesserad.md: once tenants are changed through the API the stored
    version wins over the tenants file, and each start says so. (Last: it
    restarts tesserad.)"""
    st, d = c.call("PUT", "/v1/tenants", TENANTS_API)
    check(st == 200, f"PUT /v1/tenants answers 200: {st} {d if st != 200 else ''}")
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
    st, d = c.call("GET", "/v1/tenants")
    names = sorted(t["name"] for t in d.get("tenants", [])) if st == 200 else []
    check("team-c" in names, f"the tenants set through the API, not the file's: {names}")
    log = open(c.path("tesserad.log")).read()
    check("tenants.yaml not read: the tenants set through the API" in log,
          f"and its start says the file is not read: {log[-600:]!r}")
    c.wait(lambda: all(c.node(n).get("state") == "up" for n in ("r-1", "r-2")),
           "the agents register with the restarted controller", 30)
