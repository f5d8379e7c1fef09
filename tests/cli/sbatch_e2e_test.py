#!/usr/bin/env python3
"""Slurm batch scripts end to end: `tessera sbatch` against a real tesserad
with two real tessera-agent processes on loopback (the fake NVML: eight
H100s each), the scripts really run.

    sbatch_e2e_test.py TESSERA TESSERAD TESSERA_AGENT FAKE_NVML FIXTURE

A 2-node script (-N 2 --gres=gpu:8) runs once, in rank 0, as Slurm's
batch step: it sees Slurm's variables (SLURM_JOB_ID = the job's id,
SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS, SLURM_JOB_NAME,
SLURM_SUBMIT_DIR), its arguments, and writes where --output points ("%j"
and "%t" filled in); its `srun` step runs in both ranks, each with its own
8 GPUs, and their output lands in the script's. A one-task script also knows
its node (SLURM_NNODES, SLURM_JOB_NODELIST). An --array of 3 indices
creates 3 jobs that all complete. A refused directive submits nothing.
"""
import json
import os
import pwd
import subprocess
import sys
import tempfile
import urllib.request

CLI, TESSERAD, AGENT, FAKE, FIXTURE = (os.path.abspath(a) for a in sys.argv[1:6])
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ADMIN_IDENTITY, with_root  # noqa: E402
from harness import wait_for as harness_wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-sbatch-e2e-")
PROCS = []
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
CLI_TIMEOUT_S = 30


def call(method, path, token, body=None):
    return http_call(URL, method, path, token, body)


def wait_for(pred, what, timeout=30.0):
    return harness_wait_for(pred, what, timeout, step=0.2)


open(os.path.join(TMP, "cluster.yaml"), "w").write("""topology:
  levels: [leaf, node, gpu]
node_classes:
  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'r-[1-2]', class: g8, topology: {leaf: l1}}
""")
open(os.path.join(TMP, "tenants.yaml"), "w").write(with_root("""tenants:
  team-a: {guaranteed: {gpu: {H100-80GB: 16}}}
"""))
open(os.path.join(TMP, "tesserad.yaml"), "w").write(f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
{ADMIN_IDENTITY}limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 5s, backoff: 1s}}
""")


def start(args, log, env=None):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(TMP, log), "w"), env=env)
    PROCS.append(p)
    return p


def sbatch(admin, *args):
    env = {"PATH": "/usr/bin:/bin", "HOME": TMP, "TESSERA_URL": URL, "TESSERA_TOKEN": admin,
           "E2E_MARK": "from-the-submit-shell"}
    r = subprocess.run([CLI, "sbatch"] + list(args), capture_output=True, text=True, env=env,
                       cwd=TMP, timeout=CLI_TIMEOUT_S)
    return r.returncode, r.stdout.split(), r.stderr


def script(name, text):
    path = os.path.join(TMP, name)
    open(path, "w").write(text)
    return path


def task_out(jid, rank):
    for node in ("r-1", "r-2"):
        p = os.path.join(TMP, node, "logs", f"j{jid}-r{rank}.out")
        if os.path.exists(p):
            return open(p).read()
    return ""


try:
    start([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")], "tesserad.log")
    wait_ready(URL)
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    for node in ("r-1", "r-2"):
        st, d = call("POST", "/v1/tokens", admin, {"name": node, "role": "node"})
        tf = os.path.join(TMP, node + ".token")
        open(tf, "w").write(d["token"]["secret"] + "\n")
        fx = json.load(open(FIXTURE))
        for g in fx["gpus"]:  # distinct UUIDs per node
            g["uuid"] = g["uuid"][:-2] + ("01" if node == "r-1" else "02")
        json.dump(fx, open(os.path.join(TMP, node + "-gpus.json"), "w"))
        env = dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=os.path.join(TMP, node + "-gpus.json"))
        start([AGENT, "--server", URL, "--node", node, "--token-file", tf,
               "--state-dir", os.path.join(TMP, node), "--nvml", FAKE], node + ".log", env)
    wait_for(lambda: all(call("GET", f"/v1/nodes/{n}", admin)[1]["node"]["state"] == "up"
                         for n in ("r-1", "r-2")), "both agents register and their nodes come up")

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}", admin)[1]["job"]

    # a 2-node gang from a batch script
    two = script("two.sh", """#!/bin/bash
#SBATCH --job-name=two-nodes
#SBATCH --account=team-a
#SBATCH --nodes=2
#SBATCH --gres=gpu:8
#SBATCH --time=10
#SBATCH --output=out-%j-%t.log
echo "script procid=$SLURM_PROCID ntasks=$SLURM_NTASKS job=$SLURM_JOB_ID"
echo "name=$SLURM_JOB_NAME dir=$SLURM_SUBMIT_DIR pwd=$(pwd) arg=$1 mark=$E2E_MARK"
echo "nnodes=$SLURM_NNODES nodelist=$SLURM_JOB_NODELIST"
srun sh -c 'echo "procid=$SLURM_PROCID localid=$SLURM_LOCALID ntasks=$SLURM_NTASKS job=$SLURM_JOB_ID gpus=$(echo "$CUDA_VISIBLE_DEVICES" | tr , " " | wc -w)"'
""")
    rc, ids, err = sbatch(admin, two, "first-arg")
    check(rc == 0 and len(ids) == 1, f"sbatch prints the job's id (rc {rc}, {ids}, {err})")
    jid = int(ids[0]) if rc == 0 and ids else 0
    wait_for(lambda: job(jid)["state"] == "completed", "the 2-node script runs and completes")
    p = os.path.join(TMP, f"out-{jid}-0.log")
    text = open(p).read() if os.path.exists(p) else ""
    check(f"script procid=0 ntasks=2 job={jid}" in text,
          f"the script runs in rank 0 with Slurm's variables: {text!r}")
    check(f"name=two-nodes dir={TMP} pwd={TMP} arg=first-arg mark=from-the-submit-shell"
          in text, "the script: name, submit dir, workdir, argument, exported env")
    check("nnodes=2 nodelist=r-1,r-2" in text, f"the script sees the job's nodes: {text!r}")
    for r in (0, 1):
        check(f"procid={r} localid=0 ntasks=2 job={jid} gpus=8" in text,
              f"the step's task {r} sees Slurm's variables and its 8 GPUs: {text!r}")
    check(not os.path.exists(os.path.join(TMP, f"out-{jid}-1.log")),
          "rank 1 ran no script of its own")
    check(task_out(jid, 0) == "", "--output took the output from the agent's log")

    # one task: its node is the job's node list
    one = script("one.sh", """#!/bin/sh
#SBATCH -A team-a -G 1 -t 5
echo "nnodes=$SLURM_NNODES nodelist=$SLURM_JOB_NODELIST ntasks=$SLURM_NTASKS"
""")
    rc, ids, err = sbatch(admin, one)
    jid1 = int(ids[0]) if rc == 0 and ids else 0
    wait_for(lambda: job(jid1)["state"] == "completed", "the one-task script completes")
    ran_on = [n for n in ("r-1", "r-2")
              if os.path.exists(os.path.join(TMP, n, "logs", f"j{jid1}-r0.out"))]
    out1 = task_out(jid1, 0)
    check(len(ran_on) == 1 and f"nnodes=1 nodelist={ran_on[0]} ntasks=1" in out1,
          f"one task knows its node ({ran_on}): {out1!r}")

    # --dependency: the command line's wins over the script's; an unknown id is refused
    dep = script("dep.sh", f"""#!/bin/sh
#SBATCH -A team-a -t 5 --dependency=afternotok:{jid1}
echo dependent
""")
    rc, ids, err = sbatch(admin, f"--dependency=afterok:{jid1}", dep)
    jdep = int(ids[0]) if rc == 0 and ids else 0
    check(rc == 0 and job(jdep)["spec"]["dependency"] == f"afterok:{jid1}",
          f"--dependency reaches the spec ({rc}, {err})")
    wait_for(lambda: job(jdep)["state"] == "completed", "the dependent script runs")
    rc, ids, err = sbatch(admin, "-d", "afterok:999999", dep)
    check(rc != 0 and not ids and "dependency" in err and "999999" in err,
          f"a dependency on an unknown job is refused ({rc}: {err.strip()})")

    # an array of 3 indices: 3 jobs
    arr = script("arr.sh", """#!/bin/bash
#SBATCH -A team-a --array=1-5:2%2 -t 5
echo "count=$SLURM_ARRAY_TASK_COUNT min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX"
echo "array=$SLURM_ARRAY_JOB_ID task=$SLURM_ARRAY_TASK_ID"
""")
    rc, ids, err = sbatch(admin, arr)
    check(rc == 0 and len(ids) == 3 and "not enforced" not in err,
          f"an array of 3 indices is 3 jobs, its throttle taken as is ({ids}, {err})")
    if ids:
        sp = job(int(ids[0]))["spec"]
        check(sp.get("array_throttle") == 2 and sp.get("array_size") == 3,
              f"its spec carries the throttle: {sp.get('array_size')}, {sp.get('array_throttle')}")
    aids = [int(i) for i in ids] if rc == 0 else []
    wait_for(lambda: all(job(a)["state"] == "completed" for a in aids), "the array's jobs complete")
    check(all("count=3 min=1 max=5" in task_out(a, 0) for a in aids),
          "every element sees the array's size and bounds")
    check([task_out(a, 0).split("\n")[1] for a in aids] ==
          [f"array={aids[0]} task={t}" for t in (1, 3, 5)],
          "each element sees the array's id and its own Slurm index (1, 3, 5)")

    # refused: nothing submitted
    before = len(call("GET", "/v1/jobs?limit=1000", admin)[1]["jobs"])
    bad = script("bad.sh", "#!/bin/sh\n#SBATCH -A team-a\n#SBATCH --dependency=afterok:1+5\n")
    rc, ids, err = sbatch(admin, bad)
    check(rc == 2 and "--dependency: \"afterok:1+5\": a delay after '+' is not supported" in err,
          f"a refused directive: exit 2 ({err})")
    after = len(call("GET", "/v1/jobs?limit=1000", admin)[1]["jobs"])
    check(after == before, "and nothing was submitted")

    # no --account: a tenant's user submits to its token's tenant, as with
    # tessera run; an admin's token has no tenant, so the error stays
    plain = script("plain.sh", "#!/bin/sh\necho plain\n")
    rc, ids, err = sbatch(admin, "--dry-run", plain)
    check(rc == 2 and "tenant: give #SBATCH --account" in err,
          f"an admin names the tenant: exit 2 naming it ({rc} {err!r})")
    ident = {"unix_user": pwd.getpwuid(os.getuid()).pw_name, "uid": os.getuid()}
    st, d = call("POST", "/v1/tokens", admin, dict(ident, name="sb-user", role="user",
                                                    tenant="team-a"))
    user = d["token"]["secret"] if st == 201 else admin
    rc, ids, err = sbatch(user, plain)
    j = job(int(ids[-1])) if rc == 0 and ids and ids[-1].isdigit() else {}
    check(rc == 0 and j.get("tenant") == "team-a",
          f"a user's script without --account goes to the token's tenant: {rc} {ids} {err!r}")
finally:
    stop_all(PROCS)
finish(TMP, ["tesserad.log", "r-1.log", "r-2.log"])
