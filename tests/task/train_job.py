#!/usr/bin/env python3
"""A small deterministic PyTorch training job (CPU) that uses the task
library (python/tessera_task) the way docs/task-library.md shows: it resumes
from its checkpoint when restarted, saves with torch.save and acknowledges
on the checkpoint signal, checkpoints every --period steps, and reports its
step times. tests/task/torch_preempt_test.py runs it under tesserad and a
real agent, and once uninterrupted to compare.

    train_job.py --steps N --out FILE [--period K] [--seed S] [--step-sleep SECONDS]
                 [--on-signal save|ignore] [--slow-rank R --slow-sleep SECONDS]

Determinism: one thread, a seeded model, and each step's batch drawn from a
generator seeded by (seed, step), so a run resumed at step k computes exactly
what an uninterrupted run computes from step k. The checkpoint holds the
model, the optimiser (momentum buffers), the step and the loss curve so far.

It appends JSON lines to <checkpoint dir>/progress-r<RANK>.log: "start" (the
process's start time, taken before torch is imported, the run and the step it
resumes from), one "step" per step, "signal" (when the checkpoint signal came
and when the checkpoint was durable) and "done".
"""
import time

T_START = time.time()  # noqa: E402 - before the imports: "the job runs again"

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import tessera_task as tt  # noqa: E402

tt.install()  # first: the handler only sets a flag, checked between steps

import torch  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--period", type=int, default=500)
ap.add_argument("--seed", type=int, default=7)
ap.add_argument("--step-sleep", type=float, default=0.0)
ap.add_argument("--on-signal", choices=("save", "ignore"), default="save")
ap.add_argument("--slow-rank", type=int, default=-1)
ap.add_argument("--slow-sleep", type=float, default=0.0)
a = ap.parse_args()

rank = int(os.environ.get("RANK", "0"))
ckdir = tt.checkpoint_dir()
if ckdir is None:
    sys.exit("train_job: TESSERA_CHECKPOINT_DIR is not set")
os.makedirs(ckdir, exist_ok=True)
ckpt = os.path.join(ckdir, f"ckpt-r{rank}.pt")
log = open(os.path.join(ckdir, f"progress-r{rank}.log"), "a", buffering=1)
sleep = a.slow_sleep if rank == a.slow_rank else a.step_sleep

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)
torch.manual_seed(a.seed)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
w_true = torch.linspace(-1.0, 1.0, 16).reshape(16, 1)
step, losses = 0, []
if tt.restarts() > 0 and os.path.exists(ckpt):
    st = torch.load(ckpt)
    model.load_state_dict(st["model"])
    opt.load_state_dict(st["opt"])
    step, losses = st["step"], st["losses"]
log.write(json.dumps({"event": "start", "t": T_START, "ready": time.time(),
                      "run": tt.restarts(), "from": step,
                      "last_stop": os.environ.get("TESSERA_LAST_STOP")}) + "\n")


def save(at):
    """The checkpoint, durable before it is named: temporary file, fsync,
    rename, fsync of the directory."""
    tmp = ckpt + ".tmp"
    with open(tmp, "wb") as f:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": at,
                    "losses": losses}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, ckpt)
    d = os.open(ckdir, os.O_RDONLY)
    os.fsync(d)
    os.close(d)


while step < a.steps:
    if tt.checkpoint_requested() and a.on_signal == "save":
        save(step)
        log.write(json.dumps({"event": "signal", "at": tt.requested_at(), "saved": time.time(),
                              "step": step}) + "\n")
        tt.checkpoint_done()
        sys.exit(0)
    t0 = time.monotonic()
    g = torch.Generator().manual_seed(a.seed * 1000003 + step)
    x = torch.randn(32, 16, generator=g)
    y = x @ w_true + 0.1 * torch.randn(32, 1, generator=g)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
    if sleep > 0:
        time.sleep(sleep)
    step += 1
    log.write(json.dumps({"event": "step", "step": step}) + "\n")
    tt.report_step(time.monotonic() - t0)
    if step % a.period == 0:
        save(step)

torch.save({"model": model.state_dict(), "losses": losses}, a.out + ".tmp")
os.replace(a.out + ".tmp", a.out)
log.write(json.dumps({"event": "done", "t": time.time(), "step": step}) + "\n")
