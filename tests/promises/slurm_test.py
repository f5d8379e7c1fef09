"""Promises of Slurm batch scripts on real agents (docs/slurm.md): `srun` inside
a script runs its command as a step of the job's own tasks, and the dry run
warns of what would fail once the job runs (`module`, srun options a step
cannot honour)."""
import os

from harness import check


def script(c, name, text):
    path = c.path(name)
    with open(path, "w") as f:
        f.write(text)
    return path


def outputs(c, jid, ranks, stream="out"):
    return {r: "".join(c.output(n.name, jid, r, stream) for n in c.nodes) for r in ranks}


def scenario_srun_runs_a_step_in_the_jobs_tasks(c):
    """slurm.md: `srun CMD` runs CMD in each task, `-n N` in the first N, `-l`
    labels lines with the rank."""
    p = script(c, "steps.sh", """#!/bin/sh
#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=8 --account=team-a --time=5
srun -l sh -c 'echo "step rank=$SLURM_PROCID of $SLURM_STEP_NUM_TASKS"'
srun -n 1 echo only-the-first
srun --ntasks=1 --mpi=pmix -c 4 sh -c 'echo "first=$SLURM_PROCID"'
""")
    r = c.cli("sbatch", p)
    check(r.returncode == 0, f"tessera sbatch submits it: {r.returncode} {r.stdout} {r.stderr}")
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    if jid is None or not c.wait_job(jid, "completed", 30):
        return
    out = outputs(c, jid, (0, 1))
    check(out[0] == "0: step rank=0 of 2\nonly-the-first\nfirst=0\n",
          f"rank 0 ran every step, labelled where asked: {out[0]!r}")
    check(out[1] == "1: step rank=1 of 2\n", f"rank 1 ran the step of all tasks only: {out[1]!r}")


def scenario_srun_refuses_what_a_step_cannot_honour(c):
    """slurm.md: an srun option not in the table is refused naming it, and the
    dry run warns of the line first."""
    p = script(c, "bad.sh", """#!/bin/bash
#SBATCH --gpus=1 --account=team-a --time=5
module load cuda/12.4
srun --nodelist=r-9 true
""")
    d = c.cli("sbatch", "--dry-run", p)
    check(d.returncode == 0, f"the dry run reads it: {d.returncode} {d.stderr}")
    text = d.stdout + d.stderr
    check("bad.sh:3: module: a task has no `module` command" in text,
          f"the dry run warns of `module` with its line: {text[-800:]}")
    check("bad.sh:4: srun --nodelist=r-9: not available inside a Tessera job" in text,
          f"the dry run warns of the srun option with its line: {text[-800:]}")
    r = c.cli("sbatch", p)
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    if jid is None or not c.wait_job(jid, ("failed", "completed"), 30):
        return
    err = outputs(c, jid, (0,), "err")[0]
    check("srun: --nodelist: not available inside a Tessera job" in err,
          f"the step is refused naming the option: {err!r}")
    check(c.job(jid).get("state") == "failed", "the job fails")
