"""Promises of Slurm batch scripts on real agents (docs/slurm.md): `srun` inside
a script runs its command as a step of the job's own tasks, and the dry run
warns of what would fail once the job runs (`module`, srun options a step
cannot honour)."""
import os
import subprocess

from harness import check


def script(c, name, text):
    path = c.path(name)
    with open(path, "w") as f:
        f.write(text)
    return path


def outputs(c, jid, ranks, stream="out"):
    return {r: "".join(c.output(n.name, jid, r, stream) for n in c.nodes) for r in ranks}


def scenario_srun_steps_fan_out_through_the_controller(c):
    """slurm.md "Steps": the script runs in rank 0 only; `srun CMD` runs CMD in
    the job's tasks on every node, each step with its own id, exit status and
    accounting; srun exits with the step's status, and a step after a failed
    one runs."""
    p = script(c, "steps.sh", """#!/bin/sh
#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=8 --account=team-a --time=5
echo "script in rank $SLURM_PROCID"
srun -l sh -c 'echo "step=$SLURM_STEP_ID procid=$SLURM_PROCID of $SLURM_STEP_NUM_TASKS gpus=$CUDA_VISIBLE_DEVICES"'
srun -n1 false
echo "false-rc=$?"
srun -n 1 sh -c 'echo "after the failed step: $SLURM_STEP_ID"; exit 3'
echo "exit3-rc=$?"
srun --ntasks-per-node=1 -N 2 hostname >/dev/null && echo "hostname-ok"
srun -N 3 true
echo "n3-rc=$?"
""")
    r = c.cli("sbatch", p)
    check(r.returncode == 0, f"tessera sbatch submits it: {r.returncode} {r.stdout} {r.stderr}")
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    if jid is None or not c.wait_job(jid, ("completed", "failed"), 60):
        print("  steps:", c.call("GET", f"/v1/jobs/{jid}/steps?step=0")[1], outputs(c, jid, (0, 1)),
              outputs(c, jid, (0,), "err"))
        return
    err = outputs(c, jid, (0,), "err")[0]
    check(c.job(jid).get("state") == "completed",
          f"the job completes: {c.job(jid).get('why')}; stderr {err[-1500:]!r}")
    out = outputs(c, jid, (0, 1))
    check(out[0].startswith("script in rank 0\n"), f"the script ran in rank 0: {out[0]!r}")
    check("script in rank" not in out[1], f"and not in rank 1: {out[1]!r}")
    check("0: step=0 procid=0 of 2 gpus=" in out[0] and "1: step=0 procid=1 of 2 gpus=" in out[0],
          f"step 0 ran in both nodes' tasks, labelled, its output in the job's: {out[0]!r}")
    check("false-rc=1\n" in out[0], f"srun exits with a failed step's status: {out[0]!r}")
    check("after the failed step: 2\n" in out[0] and "exit3-rc=3\n" in out[0],
          f"a step after a failed one runs, with the next id: {out[0][-300:]!r} {err!r}")
    check("hostname-ok" in out[0], f"-N 2 --ntasks-per-node=1 runs: {out[0]!r}")
    check("n3-rc=1\n" in out[0] and "nodes: 3 nodes asked; the job holds 2" in err,
          f"a step larger than the job is refused, srun exits 1 and says why: {err!r}")
    st = c.call("GET", f"/v1/jobs/{jid}/steps")[1]
    steps = st.get("steps", []) if isinstance(st, dict) else []
    check([s.get("exit_code") for s in steps] == [0, 1, 3, 0],
          f"the steps API lists 4 steps with their exit codes: {st}")
    check([s.get("ntasks") for s in steps] == [2, 1, 1, 2] and
          all(s.get("state") in ("completed", "failed") and s.get("end") for s in steps),
          f"each step has its tasks, state and end: {steps}")
    check(len(steps) == 4 and len(steps[0].get("nodes", [])) == 2 and
          steps[0].get("gpu_seconds", 0) > 0,
          f"step 0 ran on 2 nodes and is accounted in GPU-seconds: {steps[:1]}")
    one = c.call("GET", f"/v1/jobs/{jid}/steps?step=1")[1]
    check(isinstance(one, dict) and one.get("step", {}).get("exit_code") == 1 and
          one["step"].get("name") == f"{jid}.1", f"one step of the ended job, from its events: {one}")
    viewer = c.token("steps-viewer", "viewer", "team-a")
    st, d = c.call("GET", f"/v1/jobs/{jid}/steps", token=viewer)
    check(st == 200 and len(d.get("steps", [])) == 4 and
          all(s.get("command") == [] for s in d["steps"]),
          f"a viewer reads the steps without their commands: {st} {d}")
    t = c.cli("steps", str(jid))
    check(t.returncode == 0 and f"{jid}.0" in t.stdout and f"{jid}.3" in t.stdout,
          f"`tessera steps` lists JOB.STEP rows: {t.stdout} {t.stderr}")
    st, acct = c.call("GET", "/v1/acct?steps=true")
    row = next((r for r in acct.get("jobs", []) if r.get("id") == jid), {}) if st == 200 else {}
    check([s.get("name") for s in row.get("steps", [])] == [f"{jid}.{k}" for k in range(4)] and
          [s.get("exit_code") for s in row.get("steps", [])] == [0, 1, 3, 0] and
          all(s.get("end") and s.get("gpu_hours", 0) > 0 for s in row.get("steps", [])),
          f"accounting has a JOB.STEP row a step, with its end, exit and GPU-hours: {st} {row}")
    a = c.cli("acct", "--steps", "--format", "csv")
    check(a.returncode == 0 and f"\n{jid}.1," in a.stdout and f"\n{jid}.3," in a.stdout,
          f"`tessera acct --steps` exports them: {a.stdout!r} {a.stderr}")
    ev = c.call("GET", f"/v1/jobs/{jid}/events?limit=100")[1]
    kinds = [e.get("kind") for e in ev.get("events", [])] if isinstance(ev, dict) else []
    e = c.cli("events", str(jid))
    check(e.returncode == 0 and f"step {jid}.1 failed after" in e.stdout and "exit 1;" in e.stdout
          and f"step {jid}.0: sh ..., 2 task(s) on r-1 ..." in e.stdout,
          f"`tessera events` words the steps' starts and ends: {e.stdout[-900:]} {e.stderr}")
    check(kinds.count("step-started") == 4 and kinds.count("step-ended") == 4,
          f"each step's start and end are job events: {kinds}")


def scenario_parallel_sruns_each_get_their_own_step(c):
    """slurm.md "Steps": sruns started at once from one script (`srun ... &`)
    are each their own step. Each step's start is written with the
    controller's lock released; two posts of one job in that window took
    the same id, and the second wrote past the room the first was given
    (a heap overflow at every power of two). 12 at once: 12 steps, ids
    0..11, each completed with its own output."""
    p = script(c, "parallel.sh", """#!/bin/sh
#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=8 --account=team-a --time=5
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do srun -n1 sh -c "echo par-$i" & done
wait
echo all-done
""")
    r = c.cli("sbatch", p)
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    check(jid is not None, f"tessera sbatch submits it: {r.returncode} {r.stdout} {r.stderr}")
    if jid is None or not c.wait_job(jid, ("completed", "failed"), 90):
        return
    out = outputs(c, jid, (0,))[0]
    check("all-done" in out and all(f"par-{i}\n" in out for i in range(1, 13)),
          f"every srun ran its command: {out!r}")
    st = c.call("GET", f"/v1/jobs/{jid}/steps")[1]
    steps = st.get("steps", []) if isinstance(st, dict) else []
    check(sorted(s.get("id") for s in steps) == list(range(12)) and
          all(s.get("state") == "completed" for s in steps),
          f"12 steps, ids 0..11, each completed: {[(s.get('id'), s.get('state')) for s in steps]}")


def scenario_step_credential_is_scoped_to_its_job(c):
    """slurm.md "Steps": the step credential in a batch job's task starts and
    reads that job's steps only; a spec job has none to start (409)."""
    p = script(c, "cred.sh", """#!/bin/sh
#SBATCH -n 1 --gpus=1 --account=team-a --time=5
echo "$TESSERA_STEP_TOKEN" > "$SLURM_SUBMIT_DIR/cred-$SLURM_JOB_ID"
sleep 30
""")
    r = c.cli("sbatch", p)
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    if jid is None or not c.wait_job(jid, "running", 30):
        return
    path = os.path.join(os.getcwd(), f"cred-{jid}")
    tok = c.wait(lambda: open(path).read().strip() if os.path.exists(path) else None,
                 "the task wrote its step credential", 20)
    if not tok:
        return
    os.unlink(path)
    check(tok.startswith("tsstep_"), f"a task of a batch job has a step credential: {tok[:12]}")
    st, d = c.call("GET", f"/v1/jobs/{jid}/steps", token=tok)
    check(st == 200 and d.get("steps") == [], f"it reads its job's steps: {st} {d}")
    st, d = c.call("POST", f"/v1/jobs/{jid}/steps", {"command": ["true"], "ntasks": 2},
                   token=tok)
    check(st == 400 and "ntasks" in str(d), f"a step larger than the job is refused naming "
          f"ntasks: {st} {d}")
    st, d = c.call("GET", "/v1/jobs", token=tok)
    check(st == 403, f"any other route answers 403: {st} {d}")
    st, d = c.call("GET", f"/v1/jobs/{jid + 1000}/steps", token=tok)
    check(st == 403, f"another job's steps answer 403: {st} {d}")
    st, d = c.call("GET", f"/v1/jobs/{jid}/steps", token=tok[:-2] + ("00" if tok[-2:] != "00" else "11"))
    check(st == 401, f"a forged credential answers 401: {st}")
    c.call("POST", f"/v1/jobs/{jid}/cancel")
    c.wait_job(jid, "cancelled", 30)


def scenario_running_step_ends_with_its_jobs_run(c):
    """slurm.md "Steps": a step still running when the job's run ends is
    cancelled with it, its tasks stopped; the run after a requeue starts its
    steps again, their ids going on."""
    p = script(c, "long.sh", """#!/bin/sh
#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=8 --account=team-a --time=5
srun sleep 299.5
""")
    r = c.cli("sbatch", p)
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    if jid is None:
        return

    def step_state(k):
        st, d = c.call("GET", f"/v1/jobs/{jid}/steps?step={k}")
        return d.get("step", {}) if st == 200 else {}
    if not c.wait(lambda: all(t.get("state") == "running" for t in step_state(0).get("tasks", [{}])),
                  "step 0 runs in both tasks", 30):
        return
    st, d = c.call("POST", f"/v1/jobs/{jid}/requeue")
    check(st == 200, f"the job is requeued: {st} {d}")
    s0 = c.wait(lambda: (lambda s: s if s.get("state") == "cancelled" else None)(step_state(0)),
                "step 0 is cancelled with the run", 30)
    check(bool(s0) and "run ended" in (s0 or {}).get("reason", ""),
          f"with its reason: {s0}")
    s1 = c.wait(lambda: (lambda s: s if s.get("state") == "running" else None)(step_state(1)),
                "the next run starts its step again, as step 1", 60)
    check(bool(s1) and s1.get("ntasks") == 2, f"step 1 runs in both tasks: {s1}")
    c.call("POST", f"/v1/jobs/{jid}/cancel")
    c.wait_job(jid, "cancelled", 30)
    # the step's command is this scenario's own (sleep 299.5): none may be left
    gone = c.wait(lambda: subprocess.run(["pgrep", "-f", "sleep 299.5"],
                                         capture_output=True).returncode != 0,
                  "no step task is left running after the cancel", 30)
    check(bool(gone), "the step's tasks are stopped with the job")


def scenario_an_output_file_that_cannot_be_opened_says_why(c):
    """slurm.md `--output`: a file that cannot be opened (its folder missing)
    fails the job with the shell's reason in its why and its logs, not "no
    stderr was recorded" (the note named the files that never opened)."""
    missing = c.path("no-such-folder", "o-%j")
    p = script(c, "nodir.sh", f"""#!/bin/sh
#SBATCH --account=team-a --time=5 --gpus=1
#SBATCH --output={missing}.out --error={missing}.err
echo never
""")
    r = c.cli("sbatch", p)
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    check(jid is not None, f"tessera sbatch submits it: {r.returncode} {r.stdout} {r.stderr}")
    j = jid and c.wait_job(jid, ("completed", "failed"), 60)
    if not j:
        return
    why = j.get("why") or ""
    check(j.get("state") == "failed" and "no-such-folder" in why,
          f"the job fails naming the file it could not open: {j.get('state')} {why!r}")
    r = c.cli("logs", str(jid), "--stderr")
    check(r.returncode == 0 and "no-such-folder" in r.stdout,
          f"tessera logs --stderr shows the shell's reason: {r.returncode} {r.stdout!r} "
          f"{r.stderr!r}")


def scenario_a_python_script_knows_its_file(c):
    """slurm.md: a python script runs as the file it was at submit: __file__
    and sys.argv[0] name it (absolute, from the submit directory), its
    arguments follow, and its tracebacks name its lines (__file__ was
    undefined and sys.argv[0] "-c" before)."""
    p = script(c, "where.py", """#!/usr/bin/env python3
#SBATCH --account=team-a --time=5 --gpus=1
import sys
from pathlib import Path
print("file", __file__, Path(__file__).name, __name__)
print("argv", sys.argv)
""")
    os.chmod(p, 0o644)
    r = c.cli("sbatch", p, "one", "two")
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    check(jid is not None, f"tessera sbatch submits it: {r.returncode} {r.stdout} {r.stderr}")
    j = jid and c.wait_job(jid, ("completed", "failed"), 60)
    if not j:
        return
    out = outputs(c, jid, (0,))[0]
    check(j.get("state") == "completed", f"it completes: {j.get('state')} {j.get('why')}")
    check(f"file {p} where.py __main__" in out, f"__file__ is the script's path: {out!r}")
    check(f"argv ['{p}', 'one', 'two']" in out, f"sys.argv[0] too, then its arguments: {out!r}")


def scenario_plain_job_runs_in_every_task(c):
    """slurm.md "Steps": a job submitted as a spec (not from sbatch) runs its
    command in every task, as before, and has no steps."""
    jid = c.submit({"tenant": "team-a", "name": "plain", "tier": "guaranteed",
                    "command": ["/bin/sh", "-c", "echo rank=$RANK"],
                    "tasks": [{"count": 2, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}],
                    "time_limit": "5m"})
    if jid is None or not c.wait_job(jid, ("completed", "failed"), 30):
        return
    out = outputs(c, jid, (0, 1))
    check(out[0] == "rank=0\n" and out[1] == "rank=1\n", f"both ranks ran it: {out}")
    st = c.call("GET", f"/v1/jobs/{jid}/steps")[1]
    check(isinstance(st, dict) and st.get("steps") == [], f"no steps: {st}")
    jid = c.submit({"tenant": "team-a", "name": "plain2", "tier": "guaranteed",
                    "command": ["/bin/sh", "-c", "sleep 30"],
                    "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}],
                    "time_limit": "5m"})
    if jid is None or not c.wait_job(jid, "running", 30):
        return
    st, d = c.call("POST", f"/v1/jobs/{jid}/steps", {"command": ["true"]})
    check(st == 409 and d.get("error", {}).get("code") == "not_a_batch_job",
          f"a spec job has no steps to start: {st} {d}")
    c.call("POST", f"/v1/jobs/{jid}/cancel")
    c.wait_job(jid, "cancelled", 30)


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


def scenario_running_step_survives_a_controller_restart(c):
    """slurm.md "Steps": a step running while tesserad restarts runs on: the
    controller rebuilds it from its events, the agents' reports settle it,
    and srun, which waits for a controller that does not answer, exits with
    the step's status; the next step gets the next id. (Last: it restarts
    tesserad.)"""
    import signal
    import time
    from harness import wait_ready
    p = script(c, "survive.sh", """#!/bin/sh
#SBATCH -N 2 --ntasks-per-node=1 --gpus-per-node=8 --account=team-a --time=5
srun -l sh -c 'sleep 6; echo "step $SLURM_STEP_ID done"; exit 4'
echo "srun-rc=$?"
srun -n 1 sh -c 'echo "next=$SLURM_STEP_ID"'
""")
    r = c.cli("sbatch", p)
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    if jid is None:
        check(False, f"submitted: {r.stdout} {r.stderr}")
        return

    def step0():
        st, d = c.call("GET", f"/v1/jobs/{jid}/steps?step=0")
        return d.get("step", {}) if st == 200 else {}
    if not c.wait(lambda: all(t.get("state") == "running" for t in step0().get("tasks", [{}])),
                  "step 0 runs in both tasks", 30):
        return
    ctld = c.procs["tesserad"]
    ctld.send_signal(signal.SIGKILL)
    ctld.wait(timeout=20)
    time.sleep(1.0)
    c._spawn("tesserad", [c.bins["tesserad"], "--config", c.path("tesserad.yaml")])
    if not wait_ready(c.url, 30):
        check(False, "tesserad is ready again after its restart")
        return
    s = step0()
    check(s.get("state") in ("running", "failed"),
          f"after the restart the step is known, still running (or ended): {s}")
    j = c.wait_job(jid, ("completed", "failed"), 60)
    if not j:
        return
    out = outputs(c, jid, (0,))[0]
    err = outputs(c, jid, (0,), "err")[0]
    check("0: step 0 done" in out and "1: step 0 done" in out,
          f"both of its tasks ran to their end: {out!r} {err!r}")
    check("srun-rc=4\n" in out, f"srun exits with the step's status: {out!r} {err!r}")
    check("next=1\n" in out, f"the next step gets the next id: {out!r}")
    s = step0()
    check(s.get("state") == "failed" and s.get("exit_code") == 4,
          f"the step's end is the tasks': {s}")
