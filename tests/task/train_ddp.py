#!/usr/bin/env python3
"""An elastic PyTorch DDP job (CPU, gloo) as docs/scheduler.md "Elastic jobs"
describes one: every run reads its size from WORLD_SIZE, resumes from the
checkpoint the last run left (whatever its size was), adapts its per-rank
batch so the global batch stays the same, and on the checkpoint signal stops
every rank at the same step, saves once (rank 0) and acknowledges through
the task library (python/tessera_task). tests/promises/elastic_test.py runs it
on a live cluster that grows and shrinks it.

    train_ddp.py --steps N --dir DIR [--batch B] [--step-sleep SECONDS]

DIR holds ckpt.pt and progress.log (rank 0's JSON lines: "start" with the
run's world size and the step it resumes from, "step" every 10 steps,
"signal" with the step it stopped at, "done").
"""
import argparse
import datetime
import json
import os
import socket
import sys
import time

import tessera_task as tt

tt.install()  # first: the handler only sets a flag, read between steps

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, required=True)
ap.add_argument("--dir", required=True)
ap.add_argument("--batch", type=int, default=64)
ap.add_argument("--step-sleep", type=float, default=0.0)
a = ap.parse_args()

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
try:
    socket.gethostbyname(addr)
except OSError:  # a test node's name: its ranks are on this machine
    addr = "127.0.0.1"
dist.init_process_group("gloo", init_method=f"tcp://{addr}:{os.environ['MASTER_PORT']}",
                        rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
torch.set_num_threads(1)
torch.manual_seed(7)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
ddp = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
w_true = torch.linspace(-1.0, 1.0, 16).reshape(16, 1)
ckpt = os.path.join(a.dir, "ckpt.pt")
step, losses = 0, []
if os.path.exists(ckpt):
    st = torch.load(ckpt)
    model.load_state_dict(st["model"])
    opt.load_state_dict(st["opt"])
    step, losses = st["step"], st["losses"]
per_rank = a.batch // world  # the global batch stays a.batch at every size
log = open(os.path.join(a.dir, "progress.log"), "a", buffering=1) if rank == 0 else None


def note(**kv):
    if log:
        log.write(json.dumps(dict(kv, t=time.time())) + "\n")


note(event="start", world=world, per_rank_batch=per_rank, start=step,
     restarts=tt.restarts())
while step < a.steps:
    stop = torch.tensor([1 if tt.checkpoint_requested() else 0])
    dist.all_reduce(stop, op=dist.ReduceOp.MAX)  # every rank stops at the same step
    if stop.item():
        if rank == 0:
            tmp = ckpt + ".tmp"
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                        "losses": losses}, tmp)
            os.replace(tmp, ckpt)
            note(event="signal", world=world, step=step)
        dist.barrier()
        tt.checkpoint_done()
        dist.destroy_process_group()
        sys.exit(0)
    g = torch.Generator().manual_seed(1000003 + step)
    x = torch.randn(a.batch, 16, generator=g)
    y = x @ w_true + 0.1 * torch.randn(a.batch, 1, generator=g)
    mine = slice(rank * per_rank, (rank + 1) * per_rank)
    loss = torch.nn.functional.mse_loss(ddp(x[mine]), y[mine])
    opt.zero_grad()
    loss.backward()  # DDP averages the gradients over the ranks: the global batch's
    opt.step()
    full = loss.detach().clone()
    dist.all_reduce(full)
    losses.append(full.item() / world)
    step += 1
    if step % 10 == 0:
        note(event="step", world=world, step=step, loss=losses[-1])
    if a.step_sleep > 0:
        time.sleep(a.step_sleep)
note(event="done", world=world, step=step, first_loss=losses[0], last_loss=losses[-1])
dist.destroy_process_group()
