#!/usr/bin/env python3
"""tesserad and real tessera-agent processes on the fake NVML, sharing GPUs:

- MIG: a node of two A100-40GB in MIG mode (the fixture's GPU 0 already
  carved, GPU 1 empty) gets the controller's layout applied through NVML
  (seen on the agent's /metrics); a 1g.5gb task runs with its MIG device's
  UUID in CUDA_VISIBLE_DEVICES; three 3g.20gb tasks, one more than the layout
  holds, make the controller's planner destroy idle instances so the third
  fits (dynamic MIG), each task on its own MIG device, attributed on
  /metrics to its tenant and job; a controller restart (kill -9) meanwhile
  binds the three instances again and they run to their end once;
- MPS: a shared H100 node whose agent runs with --sharing mps starts an MPS
  control daemon (the fake nvidia-cuda-mps-control) for the GPU its quarter-
  GPU tasks share, gives them the MPS variables, and quits it when they end.

    e2e_sharing_test.py TESSERAD TESSERA_AGENT FAKE_NVML FIXTURES_DIR
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import urllib.request

TESSERAD, AGENT, FAKE, FIXTURES = sys.argv[1:5]
MPS_CONTROL = os.path.join(os.path.dirname(FAKE), "nvidia-cuda-mps-control")
SHIM = os.path.abspath(os.path.join(os.path.dirname(os.path.dirname(FAKE)), "libtessera-cuda.so"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ADMIN_IDENTITY, with_root  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-e2e-share-")
PROCS = {}
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
MPORT = free_port()


def call(method, path, token, body=None):
    return http_call(URL, method, path, token, body)


def wait_for(pred, what, timeout=20.0):
    return harness_wait_for(pred, what, timeout, step=0.2)


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


write("cluster.yaml", """topology:
  levels: [leaf, node, gpu]
node_classes:
  a100-mig:
    gpu_model: A100-40GB
    gpus: 2
    cpu_milli: 64000
    memory_mib: 262144
    gpu_mode: mig
    mig_layout: [{profile: 2g.10gb, start: 0}, {profile: 1g.5gb, start: 2},
                 {profile: 3g.20gb, start: 4}]
  h100-shared: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288, gpu_mode: shared}
nodes:
  - {name: m-1, class: a100-mig, topology: {leaf: l1}}
  - {name: s-1, class: h100-shared, topology: {leaf: l1}}
""")
write("tenants.yaml", with_root("""tenants:
  team-a: {guaranteed: {gpu: {A100-40GB: 2, H100-80GB: 4}}}
  team-b: {guaranteed: {gpu: {A100-40GB: 0, H100-80GB: 4}}}
"""))
write("tesserad.yaml", f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 2s, backoff: 1s}}
""")

# the MIG node's fixture: GPU 1 switched to MIG mode, no instances yet
fx = json.load(open(os.path.join(FIXTURES, "a100-mig.json")))
fx["gpus"][1]["mig"] = {"mode": 1, "pending": 1, "instances": []}
json.dump(fx, open(os.path.join(TMP, "m-1-gpus.json"), "w"))
json.dump(json.load(open(os.path.join(FIXTURES, "h100x8.json"))),
          open(os.path.join(TMP, "s-1-gpus.json"), "w"))


def start(name, args, env=None):
    PROCS[name] = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                   stderr=open(os.path.join(TMP, name + ".log"), "a"), env=env)


def metrics():
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{MPORT}/metrics", timeout=5).read().decode()
    except Exception:
        return ""


def mig_rows(text):
    """(gpu, profile, tenant, job) of each MIG instance's FB_USED row"""
    out = []
    for line in text.splitlines():
        if line.startswith("DCGM_FI_DEV_FB_USED{") and "GPU_I_PROFILE" in line:
            lab = dict(re.findall(r'(\w+)="([^"]*)"', line))
            out.append((lab["gpu"], lab["GPU_I_PROFILE"], lab.get("tenant", ""), lab.get("job", "")))
    return sorted(out)


def out_lines(node, jid):
    d = os.path.join(TMP, node, "logs")
    return [open(os.path.join(d, f)).read() for f in sorted(os.listdir(d))
            if f.startswith(f"j{jid}-") and f.endswith(".out")] if os.path.isdir(d) else []


try:
    start("tesserad", [TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")])
    wait_ready(URL)
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    for node in ("m-1", "s-1"):
        st, d = call("POST", "/v1/tokens", admin, {"name": node, "role": "node"})
        write(node + ".token", d["token"]["secret"] + "\n")
        env = dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=os.path.join(TMP, node + "-gpus.json"))
        extra = (["--metrics-listen", f"127.0.0.1:{MPORT}"] if node == "m-1" else
                 ["--sharing", "mps", "--mps-control", MPS_CONTROL] +
                 (["--shim", SHIM] if os.path.exists(SHIM) else []))
        start(node, [AGENT, "--server", URL, "--node", node, "--token-file",
                     os.path.join(TMP, node + ".token"), "--state-dir", os.path.join(TMP, node),
                     "--nvml", FAKE] + extra, env)
    wait_for(lambda: all(call("GET", f"/v1/nodes/{n}", admin)[1]["node"]["state"] == "up"
                         for n in ("m-1", "s-1")), "both agents register")

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}", admin)[1]["job"]

    def submit(tenant, name, task, cmd):
        task = dict(task, cpu_milli=1000, memory_mib=1024)
        st, d = call("POST", "/v1/jobs", admin, {
            "tenant": tenant, "name": name, "tier": "opportunistic", "tasks": [task],
            "command": ["/bin/sh", "-c", cmd], "time_limit": "1h",
            # a sanitizer build's shim may be preloaded into the (plain) shell
            "env": {"ASAN_OPTIONS": "verify_asan_link_order=0:detect_leaks=0"}})
        check(st == 201, f"{name} accepted ({st}: {d if st != 201 else ''})")
        return d["jobs"][0]["id"]

    want = [("0", "1g.5gb", "", ""), ("0", "2g.10gb", "", ""), ("0", "3g.20gb", "", ""),
            ("1", "1g.5gb", "", ""), ("1", "2g.10gb", "", ""), ("1", "3g.20gb", "", "")]
    wait_for(lambda: mig_rows(metrics()) == want,
             "the agent makes both GPUs hold the controller's layout (GPU 1 carved from empty)")

    # a 1g.5gb task sees its MIG device
    small = submit("team-a", "small", {"count": 1, "mig_profile": "1g.5gb"},
                   'echo "gpus=$CUDA_VISIBLE_DEVICES"; sleep 2')
    wait_for(lambda: job(small)["state"] == "completed", "the 1g.5gb task runs and completes")
    outs = out_lines("m-1", small)
    check(len(outs) == 1 and re.match(r"gpus=MIG-[0-9a-f-]+\s*$", outs[0]),
          f"CUDA_VISIBLE_DEVICES is the MIG device's UUID: {outs}")

    # three 3g.20gb tasks: the layout holds two; the planner makes room for a third
    big = submit("team-a", "big", {"count": 3, "mig_profile": "3g.20gb"},
                 'echo "gpus=$CUDA_VISIBLE_DEVICES"; sleep 8')
    if not wait_for(lambda: job(big)["state"] == "running", "all three 3g.20gb tasks run (dynamic MIG)"):
        print("big:", job(big).get("reason"), job(big).get("why"))
    def attributed():
        mine = [r for r in mig_rows(metrics()) if r[1] == "3g.20gb" and r[3] == str(big)]
        return len(mine) == 3 and all(r[2] == "team-a" for r in mine)
    if not wait_for(attributed, f"three 3g.20gb instances on /metrics, each attributed to "
                    f"team-a's job {big}"):
        print("rows:", mig_rows(metrics()))
    node = call("GET", "/v1/nodes/m-1", admin)[1]["node"]
    check("mig_error" not in node, f"no MIG error on the node: {node.get('mig_error')}")
    # the controller restarts (kill -9): the planner's changes were not stored,
    # so the cluster file's layout comes back; the running 3g.20gb instance
    # wins over the idle instances in its way, and nothing is disturbed
    PROCS["tesserad"].send_signal(signal.SIGKILL)
    PROCS["tesserad"].wait(timeout=10)
    start("tesserad", [TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")])
    def running_again():
        try:
            st, d = call("GET", f"/v1/jobs/{big}", admin)
        except OSError:  # not listening yet
            return False
        return st == 200 and d["job"]["state"] == "running"
    wait_for(running_again, "after a controller restart the job still runs")
    node = call("GET", "/v1/nodes/m-1", admin)[1]["node"]
    check("mig_error" not in node and sum(1 for g in node["mig"] for i in g["instances"]
                                        if i["profile"] == "3g.20gb" and i["used"]) == 3,
          f"its three instances are bound again: {node['mig']}")
    wait_for(lambda: job(big)["state"] == "completed", "they complete")
    starts = [e for e in call("GET", f"/v1/jobs/{big}/events", admin)[1]["events"]
              if e["kind"] == "started"]
    check(len(starts) == 1, f"started once ({len(starts)})")
    uu = [o.strip() for o in out_lines("m-1", big)]
    check(len(uu) == 3 and len(set(uu)) == 3 and all(u.startswith("gpus=MIG-") for u in uu),
          f"each on its own MIG device: {uu}")

    # MPS: two quarter-GPU tasks on the shared node
    mps = submit("team-b", "infer", {"count": 2, "gpus": 1, "gpu_fraction": 0.25,
                                     "gpu_memory_mib": 2048},
                 'echo "pipe=$CUDA_MPS_PIPE_DIRECTORY pct=$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE '
                 'mem=$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"; '
                 'echo "shim=$LD_PRELOAD quota=$TESSERA_CUDA_MEM_LIMIT ledger=$TESSERA_CUDA_LEDGER '
                 'share=${TESSERA_CUDA_COMPUTE_PERCENT:-mps}" >&2; sleep 3')
    wait_for(lambda: job(mps)["state"] == "running", "the quarter-GPU tasks run")
    def control_logs():
        return [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(TMP, "s-1", "mps"))
                for f in fs if f == "control.log"]
    logs = wait_for(control_logs, "an MPS control daemon runs for the shared GPU") or []
    wait_for(lambda: job(mps)["state"] == "completed", "they complete")
    outs = [o.strip() for o in out_lines("s-1", mps)]
    check(len(outs) == 2 and all(re.match(r"pipe=\S+/pipe pct=25 mem=0=2048M$", o) for o in outs),
          f"each task has the MPS pipe, its 25 % of the SMs and its memory limit: {outs}")
    if os.path.exists(SHIM):
        d = os.path.join(TMP, "s-1", "logs")
        errs = sorted(open(os.path.join(d, f)).read().strip() for f in os.listdir(d)
                      if f.startswith(f"j{mps}-") and f.endswith(".err"))
        own = os.path.join(TMP, "s-1", "tasks", f"j{mps}-r")
        check(len(errs) == 2 and all(e.startswith(f"shim={SHIM} quota=2048M ledger={own}")
                                     and e.endswith("/cuda-ledger share=mps") for e in errs)
              and len({e.split("ledger=")[1] for e in errs}) == 2,
              f"the sharing shim is preloaded with each task's quota, one ledger per task, in "
              f"the task's own folder (never a name in the node's shared /dev/shm, which "
              f"another tenant's task could make first): {errs}")
    wait_for(lambda: all("quit" in open(p).read() for p in logs),
             "the daemon is told to quit once no task uses the GPU")
finally:
    stop_all(list(PROCS.values()))
finish(TMP, ("tesserad.log", "m-1.log", "s-1.log"))
