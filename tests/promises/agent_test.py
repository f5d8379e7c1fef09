"""Promises of the node agent itself on a live cluster (docs/tessera-agent.md):
what it leaves behind when it stops."""
import os
import signal

from cluster import Node
from harness import check

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
