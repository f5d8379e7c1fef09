"""Promises of the node's CDI specification on real agents (docs/images.md
"GPUs in a container"): the agent rewrites it when a MIG reconfiguration
makes or destroys instances, so each instance the controller makes is a CDI
device of its own.

The cluster: m-1, an A100-40GB node whose two GPUs are in MIG mode (the fake
NVML's GPU 0 starting with a 3g/2g/1g layout, GPU 1 with none); the
controller's layout is seven 1g.5gb instances per GPU, reshaped for a
3g.20gb job."""
import json
import os

from cluster import Node
from harness import check

A100_MIG2 = {"gpu_model": "A100-40GB", "gpus": 2, "cpu_milli": 64000, "memory_mib": 262144,
             "gpu_mode": "mig", "mig_layout": ["1g.5gb"] * 7}


def both_mig(fx):
    fx["gpus"][1]["mig"] = {"mode": 1, "pending": 1, "instances": []}


CLUSTER = {
    "nodes": [Node("m-1", "l1", cls="mig2", fixture="a100-mig.json", fix=both_mig)],
    "classes": {"mig2": A100_MIG2},
    "tenants": """tenants:
  org:
    guaranteed: {gpu: {A100-40GB: 2}}
    teams:
      team-a: {guaranteed: {gpu: {A100-40GB: 2}}}
""",
}


def cdi_devices(c):
    """{name: NVIDIA_VISIBLE_DEVICES} of m-1's CDI spec ({} while unreadable)."""
    try:
        with open(c.path("m-1", "cdi", "tessera.json")) as f:
            spec = json.load(f)
    except (OSError, ValueError):
        return {}
    out = {}
    for d in spec.get("devices", []):
        env = (d.get("containerEdits") or {}).get("env") or []
        vis = [e.split("=", 1)[1] for e in env if e.startswith("NVIDIA_VISIBLE_DEVICES=")]
        out[d.get("name")] = vis[0] if vis else ""
    return out


def scenario_cdi_spec_follows_mig_reconfiguration(c):
    """images.md: After a MIG reconfiguration that makes or destroys instances the agent discovers its GPUs again and rewrites its CDI specification, so each instance is a device of its own, named `GPU:GI`."""
    jid = c.submit({"tenant": "team-a", "name": "mig-3g", "tier": "guaranteed",
                    "command": ["/bin/sh", "-c", "echo cvd=$CUDA_VISIBLE_DEVICES; sleep 300"],
                    "tasks": [{"count": 1, "mig_profile": "3g.20gb", "gpu_model": "A100-40GB",
                               "cpu_milli": 1000, "memory_mib": 1024}],
                    "time_limit": "10m"})
    if not c.wait_job(jid, "running", 60, "the 3g.20gb job runs on a reshaped GPU"):
        return
    cvd = [""]

    def its_instance():
        out = c.output("m-1", jid)
        got = [ln[4:] for ln in out.splitlines() if ln.startswith("cvd=")]
        cvd[0] = got[0] if got else ""
        return cvd[0].startswith("MIG-")
    c.wait(its_instance, "the task names its MIG instance", 30)
    c.wait(lambda: cvd[0] in cdi_devices(c).values(),
           f"m-1's CDI spec has a device for the job's instance {cvd[0]}", 30)
    devs = cdi_devices(c)
    mine = [n for n, v in devs.items() if v == cvd[0]]
    check(len(mine) == 1 and ":" in mine[0],
          f"one device, named GPU:GI, is the job's instance: {mine} of {sorted(devs)}")
    # every MIG device of the spec is an instance the GPUs hold now: the
    # fixture's first layout (3g/2g/1g on GPU 0) is gone where it was reshaped
    migs = sorted(n for n in devs if ":" in n)
    check(len(set(devs[n] for n in migs)) == len(migs) and len(migs) >= 2,
          f"each MIG instance is a device of its own: {migs}")


scenario_cdi_spec_follows_mig_reconfiguration.needs = ()
