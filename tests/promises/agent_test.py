"""Promises of the node agent itself on a live cluster (docs/tessera-agent.md):
what it leaves behind when it stops, or when it is killed and restarted."""
import os
import signal

from cluster import Node
from harness import check, wait_ready

CLUSTER = {"nodes": [Node("r-1", leaf="l1"),
                     Node("s-1", leaf="l1", cls="h8shared",
                          args=["--sharing", "mps", "--mps-control",
                                "{fakes}/nvidia-cuda-mps-control"])]}


def mps_daemons(c, node):
    """The pids of live MPS control daemons named by pid files in node's folder."""
    out = []
    for root, _, files in os.walk(c.path(node, "mps")):
        for f in files:
            if f == "nvidia-cuda-mps-control.pid":
                try:
                    pid = int(open(os.path.join(root, f)).read().split()[0])
                    if "mps-control" in open(f"/proc/{pid}/cmdline").read():
                        out.append(pid)
                except (OSError, ValueError, IndexError):
                    pass
    return out


def scenario_an_mps_node_keeps_one_user_per_gpu(c):
    """agent-mig-mps.md: MPS runs one user's server a GPU at a time, so on an
    MPS node (`--sharing mps`) the scheduler gives another Unix user's share
    another GPU, never one where a different user's shares run; the same
    user's shares still pack onto one GPU."""
    other = c.token("mps-other", "user", "team-a", unix_user="nobody", uid=65534)

    def quarter(name, token=None):
        jid = c.submit({"tenant": "team-a", "name": name, "tier": "guaranteed",
                        "command": ["/bin/sh", "-c", "sleep 120"], "nodelist": "s-1",
                        "workdir": "/tmp",
                        "tasks": [{"count": 1, "gpus": 1, "gpu_fraction": 0.25,
                                   "cpu_milli": 500, "memory_mib": 512}],
                        "time_limit": "5m"}, token)
        j = c.wait_job(jid, "running", 30) if jid else None
        p = (j or {}).get("placement") or [{}]
        return jid, p[0].get("node"), tuple(p[0].get("gpus") or ())

    a = quarter("admin-1")
    b = quarter("nobody-1", other)
    a2 = quarter("admin-2")
    check(a[1] == b[1] == a2[1] == "s-1", f"all three run on the MPS node: {a} {b} {a2}")
    check(b[2] != a[2], f"another user's quarter gets another GPU: {a[2]} / {b[2]}")
    check(a2[2] == a[2], f"the same user's quarters share one: {a[2]} / {a2[2]}")
    # a controller restart: the running shares are restored before the
    # node's agent says it is MPS, and their GPUs stay their users'
    ctld = c.procs["tesserad"]
    ctld.send_signal(signal.SIGTERM)
    ctld.wait()
    c._spawn("tesserad", [c.bins["tesserad"], "--config", c.path("tesserad.yaml")])
    check(wait_ready(c.url, 30), "tesserad is back")
    c.wait(lambda: (c.node("s-1").get("health") or {}).get("source") == "agent",
           "the MPS node's agent registered again", 30)
    b2 = quarter("nobody-2", other)
    a3 = quarter("admin-3")
    check(b2[2] == b[2] and a3[2] == a[2],
          f"after the restart each user's quarter joins its own GPU: {b[2]}->{b2[2]}, "
          f"{a[2]}->{a3[2]}")
    for jid in (a[0], b[0], a2[0], b2[0], a3[0]):
        if jid:
            c.call("POST", f"/v1/jobs/{jid}/cancel", {})


def scenario_agent_stop_stops_its_mps_daemons(c):
    """tessera-agent.md: on SIGTERM the agent stops its tasks, and the MPS control
    daemons it started stop with it."""
    jid = c.submit({"tenant": "team-a", "name": "quarter", "tier": "opportunistic",
                    "command": ["/bin/sh", "-c", "sleep 300"],
                    "tasks": [{"count": 2, "gpus": 1, "gpu_fraction": 0.25,
                               "cpu_milli": 500, "memory_mib": 512}],
                    "time_limit": "10m"})
    if not c.wait_job(jid, "running", 30):
        return
    daemons = c.wait(lambda: mps_daemons(c, "s-1"), "an MPS control daemon runs for the task", 15)
    if not daemons:
        return
    p = c.procs["s-1"]
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except Exception:
        check(False, "the agent exits within 30 s of SIGTERM")
    c.wait(lambda: not mps_daemons(c, "s-1"), f"no MPS daemon of its is left: {daemons}", 10)


V1_CONTROLLERS = ("memory", "cpu", "cpuacct", "pids", "devices", "freezer")


def task_cgroup_dirs(record):
    """The directories of the cgroup a task record names: the cgroup2
    directory, or the cgroup v1 path under each mounted hierarchy."""
    kv = dict(line.split(" ", 1) for line in record.splitlines() if " " in line)
    path = kv.get("cgroup", "")
    if kv.get("isolated") != "1" or not path:
        return []
    if kv.get("cgroup_v1") != "1":
        return [path]
    dirs = set()
    for line in open("/proc/self/mountinfo"):
        fs = line.split(" - ", 1)[-1].split()
        if fs[0] == "cgroup" and set(fs[-1].split(",")) & set(V1_CONTROLLERS):
            dirs.add(line.split()[4] + path)
    return sorted(dirs)


def scenario_agent_killed_and_restarted_leaves_no_cgroup(c):
    """agent-tasks.md: an agent that adopts a task after a restart finds its
    cgroup from the record and removes it when it is done with the task."""
    jid = c.submit({"tenant": "team-a", "name": "outlives", "tier": "guaranteed",
                    "command": ["/bin/sh", "-c", "sleep 300"],
                    "tasks": [{"count": 1, "gpus": 8, "cpu_milli": 500, "memory_mib": 256}],
                    "time_limit": "10m"})
    if not c.wait_job(jid, "running", 30):
        return
    node = ((c.job(jid).get("placement") or [{}])[0]).get("node") or "r-1"
    rec_path = c.path(node, "logs", f"j{jid}-r0.task")
    if not c.wait(lambda: os.path.exists(rec_path), "its record", 10):
        return
    dirs = task_cgroup_dirs(open(rec_path).read())
    if not dirs:
        print("  no task cgroup here: nothing to remove")
    else:
        print(f"  its cgroup: {dirs}")
        check(all(os.path.isdir(d) for d in dirs), f"the task has its cgroup: {dirs}")
    old = c.procs[node]
    old.kill()  # kill -9: nothing cleaned up
    old.wait(10)
    check(all(os.path.isdir(d) for d in dirs), "the cgroup outlives the killed agent")
    c._spawn(node, old.args, dict(os.environ,  # the same agent again, as a restart does
                                  TESSERA_FAKE_NVML_FIXTURE=c.path(node + "-gpus.json")))
    c.wait(lambda: c.node(node).get("state") == "up", "the restarted agent's node is up", 30)
    c.call("POST", f"/v1/jobs/{jid}/cancel")
    c.wait_job(jid, "cancelled", 30)
    gone = c.wait(lambda: not any(os.path.exists(d) for d in dirs) or None,
                  "the adopting agent removes the task's cgroup", 15)
    check(bool(gone), f"no cgroup directory of the task is left: "
          f"{[d for d in dirs if os.path.exists(d)]}")
    agent_dirs = [os.path.dirname(d) for d in dirs if "/agent-" in d]
    check(not any(os.path.exists(d) for d in agent_dirs),
          f"nor the agent's own directory, with its last task: {agent_dirs}")


scenario_agent_killed_and_restarted_leaves_no_cgroup.needs_root = True
