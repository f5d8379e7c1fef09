"""Promises of elastic jobs on real agents (docs/scheduler.md "Elastic jobs",
docs/job-spec.md "Elastic jobs"): a real PyTorch DDP job (CPU, gloo, Debian's
python3-torch at /usr/bin/python3) grows from 2 to 4 ranks when GPUs are
free, shrinks back to 2 when guaranteed work arrives that lacks room, and
keeps its training progress across every resize through its checkpoint; one
task of 1 to 4 GPUs goes through `tessera submit` and `tessera show`.

The cluster: r-1, one node of 4 H100; team-a guaranteed 8 (so no
preemption, only the elastic rules, moves GPUs). A job is resized at most
once per reclaim_min_runtime (10 s here, time for
its first run to train before it grows)."""
import json
import os
import sys

from cluster import H100, Node
from harness import check

HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "..", "task", "train_ddp.py")
PYTHONPATH = os.path.abspath(os.path.join(HERE, "..", "..", "python"))
TORCH_PYTHON = "/usr/bin/python3"


def four_gpus(fx):
    fx["gpus"] = fx["gpus"][:4]


CLUSTER = {
    "nodes": [Node("r-1", "l1", cls="h4", fix=four_gpus)],
    "classes": {"h4": dict(H100, gpus=4)},
    "tenants": """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 8}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
""",
    "config": "scheduler: {interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 10s, "
              "grace: 20s, backoff: 1s}\n",
}


def progress(d):
    path = os.path.join(d, "progress.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.endswith("\n")]


def runs(lines):
    return [ln for ln in lines if ln["event"] == "start"]


def scenario_ddp_grows_and_shrinks(c):
    r = os.system(f"{TORCH_PYTHON} -c 'import torch.distributed' 2>/dev/null")
    check(r == 0, f"{TORCH_PYTHON} imports torch.distributed (python3-torch: "
          "scripts/install-deps)")
    if r != 0:
        return
    d = c.path("ddp")
    os.makedirs(d, exist_ok=True)
    os.chmod(d, 0o777)
    steps = 1500
    jid = c.submit({"tenant": "team-a", "name": "ddp", "tier": "guaranteed",
                    "command": [TORCH_PYTHON, TRAIN, "--steps", str(steps), "--dir", d,
                                "--step-sleep", "0.02"],
                    "env": {"PYTHONPATH": PYTHONPATH, "OMP_NUM_THREADS": "1"},
                    "tasks": [{"count": {"min": 2, "max": 4}, "gpus": 1, "cpu_milli": 500,
                               "memory_mib": 512}],
                    "time_limit": "1h", "checkpoint": {"signal": "SIGUSR1", "grace": "20s"}})
    if jid is None:
        return
    c.wait(lambda: any(x["world"] == 2 for x in runs(progress(d))),
           "the job starts at its minimum, 2 ranks", 60)
    job = c.job(jid)
    check(job.get("elastic", {}).get("min_gpus") == 2 and job["elastic"]["max_gpus"] == 4,
          f"its document shows its range, 2..4 GPUs: {job.get('elastic')}")
    c.wait(lambda: any(x["world"] == 4 for x in runs(progress(d))),
           "with 2 GPUs free it grows to 4 ranks (a checkpoint, a restart)", 90)
    c.wait(lambda: c.job(jid).get("elastic", {}).get("gpus") == 4 and
           c.job(jid).get("state") == "running", "its document shows it running at 4 GPUs", 30)
    lines = progress(d)
    grown = runs(lines)[-1]
    # the step the 2-rank run checkpointed at its resize signal (0 where a
    # loaded machine resized it before its first step: later runs, checked
    # below, resume from later steps)
    ckpt = [x["step"] for x in lines if x["event"] == "signal"]
    check(ckpt and grown["start"] == ckpt[-1],
          f"the 4-rank run resumes from the 2-rank run's step: {grown} (checkpointed at {ckpt})")
    check(grown["per_rank_batch"] == 16, f"its batch per rank adapts (64 / 4): {grown}")
    ev = c.events(jid)
    check(any("elastic resize from 2 to 4" in (e.get("detail") or "") for e in ev),
          f"an event says why: {[(e['kind'], e.get('detail')) for e in ev]}")
    at4 = max([x["step"] for x in progress(d) if x["event"] == "step" and x["world"] == 4],
              default=0)
    c.wait(lambda: max([x["step"] for x in progress(d) if x["event"] == "step" and
                        x["world"] == 4], default=0) >= at4 + 50,
           "it trains at 4 ranks", 60)
    # guaranteed work that lacks room: the extras go back first
    other = c.submit({"tenant": "team-a", "name": "needs-2", "tier": "guaranteed",
                      "command": ["/bin/sh", "-c", "sleep 15"],
                      "tasks": [{"count": 1, "gpus": 2, "cpu_milli": 500, "memory_mib": 512}]})
    c.wait_job(other, ("running", "completed"), 90, "the guaranteed job starts")
    c.wait(lambda: runs(progress(d))[-1]["world"] == 2,
           "the elastic job shrank back to 2 ranks", 60)
    ev = c.events(jid)
    check(any("elastic resize from 4 to 2" in (e.get("detail") or "") and
              "taken back" in (e.get("detail") or "") for e in ev),
          f"the shrink is a take-back for waiting work: {[e.get('detail') for e in ev]}")
    c.wait_job(jid, ("completed",), 180, "the elastic job finishes")
    lines = progress(d)
    rs = runs(lines)
    sig = [x for x in lines if x["event"] == "signal"]
    worlds = [x["world"] for x in rs]
    check(worlds[:3] == [2, 4, 2], f"its runs: 2, then 4, then 2 ranks: {worlds}")
    check(len(sig) == len(rs) - 1 and all(r2["start"] == s["step"] for s, r2 in zip(sig, rs[1:])),
          f"every run resumes at the step the last one checkpointed: "
          f"{[(s['step'], r2['start']) for s, r2 in zip(sig, rs[1:])]}")
    done = [x for x in lines if x["event"] == "done"]
    check(len(done) == 1 and done[0]["step"] == steps and
          done[0]["last_loss"] < done[0]["first_loss"] / 10,
          f"it trains to the end once, losing no progress: {done}")


def scenario_cli_submit_and_show_one_task_range(c):
    """One task of 1 to 4 GPUs through the CLI: `tessera submit -f` takes the
    range, `tessera show` gives it with the size the job runs at, it grows
    into the node's free GPUs, and a bad range is refused naming its field."""
    bad = c.path("bad.yaml")
    with open(bad, "w") as f:
        f.write("tenant: team-a\nname: bad\ncommand: 'true'\n"
                "tasks:\n  - {count: {min: 4, max: 2}, gpus: 1}\n")
    r = c.cli("submit", "-f", bad)
    check(r.returncode != 0 and "tasks[0].count.max: 2 is below min 4" in r.stderr,
          f"a bad range is refused naming its field: {r.returncode} {r.stderr!r}")
    path = c.path("one.yaml")
    with open(path, "w") as f:
        f.write("tenant: team-a\nname: one\ntier: guaranteed\ntime_limit: 10m\n"
                "command: 'trap \"exit 0\" USR1; sleep 120 & wait'\n"
                "tasks:\n  - {gpus: {min: 1, max: 4}, cpu_milli: 500, memory_mib: 512}\n")
    r = c.cli("submit", "-f", path)
    check(r.returncode == 0, f"tessera submit -f one.yaml exits 0: {r.returncode} {r.stderr}")
    if r.returncode != 0:
        return
    jid = int(r.stdout.split()[0])
    c.wait_job(jid, ("running",), 30, "it starts")
    show = c.cli("show", str(jid)).stdout
    check("range 1..4" in show, f"tessera show gives its range: {show!r}")
    c.wait(lambda: "4 GPUs now" in c.cli("show", str(jid)).stdout and
           c.job(jid).get("state") == "running", "it grows to 4 GPUs, tessera show says so", 60)
    place = c.job(jid).get("placement") or []
    check(len(place) == 1 and len(place[0]["gpus"]) == 4,
          f"one task holding 4 GPUs: {place}")


def scenario_grown_job_that_no_longer_fits_asks_for_less(c):
    """A job resized to 4 GPUs whose GPUs were taken while it stopped does not
    wait at 4: it asks for the size it had and runs again."""
    path = c.path("grow.yaml")
    with open(path, "w") as f:
        f.write("tenant: team-a\nname: grow\ntier: guaranteed\ntime_limit: 10m\n"
                "command: 'trap \"sleep 3; exit 0\" USR1; sleep 120 & wait'\n"
                "tasks:\n  - {gpus: {min: 1, max: 4}, cpu_milli: 500, memory_mib: 512}\n")
    r = c.cli("submit", "-f", path)
    check(r.returncode == 0, f"tessera submit -f grow.yaml exits 0: {r.returncode} {r.stderr}")
    if r.returncode != 0:
        return
    jid = int(r.stdout.split()[0])
    c.wait(lambda: c.job(jid).get("state") == "stopping" and
           c.job(jid).get("elastic", {}).get("resize_to") == 4,
           "it is resized to 4 GPUs and stops for it (3 s to checkpoint)", 60)
    other = c.submit({"tenant": "team-a", "name": "takes-2", "tier": "guaranteed",
                      "command": ["/bin/sh", "-c", "sleep 60"],
                      "tasks": [{"count": 1, "gpus": 2, "cpu_milli": 500, "memory_mib": 512}]})
    c.wait_job(other, ("running",), 30, "a 2-GPU job takes the free GPUs meanwhile")
    c.wait(lambda: c.job(jid).get("state") == "running" and
           c.job(jid).get("elastic", {}).get("gpus", 4) < 4,
           "the resized job, not fitting at 4 GPUs, runs again at the size it had", 30)
    check(c.job(jid).get("elastic", {}).get("gpus") in (1, 2),
          f"at 1 GPU (or 2, grown into what is left): {c.job(jid).get('elastic')}")


def scenario_speedup_from_step_times(c):
    """What more GPUs are worth comes from the step times a job reports: a
    job whose steps take as long at 4 GPUs as at 1 gives its extras to a job
    whose steps shrink with its GPUs (neither curve is known before it ran
    at two sizes; tesserad fits them, docs/scheduler.md "Elastic jobs")."""
    # one step's seconds appended every half second: the same at any size,
    # or 1 / its GPUs (CUDA_VISIBLE_DEVICES names them)
    loop = ("trap \"exit 0\" USR1; while :; do {}; sleep 0.5; done")
    flat = loop.format('echo 1.0 >> "$TESSERA_STEP_FILE"')
    scales = loop.format('n=$(echo "$CUDA_VISIBLE_DEVICES" | tr "," "\\n" | wc -l); '
                         'awk -v n="$n" "BEGIN {printf \\"%.6f\\\\n\\", 1 / n}" '
                         '>> "$TESSERA_STEP_FILE"')
    def job(name, cmd):
        return c.submit({"tenant": "team-a", "name": name, "tier": "guaranteed",
                         "time_limit": "1h", "command": ["/bin/sh", "-c", cmd],
                         "tasks": [{"count": 1, "gpus": {"min": 1, "max": 4},
                                    "cpu_milli": 500, "memory_mib": 512}]})
    f = job("flat", flat)
    gpus = lambda j: c.job(j).get("elastic", {}).get("gpus")
    c.wait(lambda: c.job(f).get("state") == "running" and gpus(f) == 4,
           "alone, the flat job grows to 4 GPUs (one size measured: linear)", 60)
    s = job("scales", scales)
    c.wait(lambda: c.job(s).get("state") == "running" and gpus(s) == 3 and
           c.job(f).get("state") == "running" and gpus(f) == 1,
           "the job that scales ends at 3 GPUs, the flat one at its minimum", 90)
