#!/usr/bin/env python3
"""interactive.py - how fast an interactive session opens and echoes, on real
agents through the controller (docs/interactive.md; issue 27's targets: open
under 1 s p99 from submission on an idle cluster, keystroke echo under 50 ms
p99 on loopback).

A live cluster (tests/lib/cluster.py: tesserad and four tessera-agents on the
fake NVML, real processes) runs --sessions sessions one after the other, each
`tessera run -- /bin/sh -c 'echo ready; exec cat'` on a local PTY (so the
remote side is a PTY too):

  open   from starting `tessera run` (which submits the job, waits for it to
         run and opens the session) to "ready" on the local terminal
  echo   for each of --keys keystrokes: from writing one byte to the local
         terminal to reading it back (echoed by the remote PTY, relayed by
         the agent, the controller and the CLI both ways)
  local  the same keystroke echo through a local PTY running cat: the
         baseline, measured in the same run

Then ^D ends cat, the job completes and `tessera run` exits 0. Prints
p50/p99/max of each, writes them as JSON. Exits 1 when a target is missed.

    interactive.py --tesserad B/tesserad --agent B/tessera-agent --cli B/tessera \\
        --nvml B/fakes/libnvidia-ml.so.1 --fixtures tests/fakes [--sessions 30] [--keys 20]
"""
import argparse
import json
import os
import pty
import select
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "lib"))
from cluster import Cluster  # noqa: E402

OPEN_TARGET_S = 1.0
ECHO_TARGET_S = 0.050
WAIT_S = 30.0


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100.0 * len(xs) + 0.5)) - 1))] if xs else None


def read_until(fd, want, buf, deadline):
    while want not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([fd], [], [], left)
        if r:
            try:
                b = os.read(fd, 4096)
            except OSError:
                return None
            if not b:
                return None
            buf += b
    return buf[buf.index(want) + len(want):]


def spawn(argv, env):
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, env)
    return pid, fd


def echoes(fd, keys, buf=b""):
    out = []
    for i in range(keys):
        ch = bytes([ord("a") + i % 26])
        t0 = time.monotonic()
        os.write(fd, ch)
        buf = read_until(fd, ch, buf, time.monotonic() + WAIT_S)
        if buf is None:
            return out, None
        out.append(time.monotonic() - t0)
    return out, buf


def finish(pid, fd):
    os.write(fd, b"\r\x04")  # a line end, then end-of-file: cat ends
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                os.read(fd, 4096)
        except OSError:
            pass
        p, st = os.waitpid(pid, os.WNOHANG)
        if p:
            return os.waitstatus_to_exitcode(st)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return None


def run(a):
    c = Cluster({"tesserad": a.tesserad, "agent": a.agent, "cli": a.cli, "nvml": a.nvml,
                 "fixtures": a.fixtures}, name="bench-interactive")
    opens, echo, local = [], [], []
    try:
        if not c.start():
            return None
        env = dict(os.environ, TESSERA_URL=c.url, TESSERA_TOKEN=c.admin, HOME=c.tmp)
        for i in range(a.sessions):
            t0 = time.monotonic()
            pid, fd = spawn([a.cli, "run", "--tenant", "team-a" if i % 2 else "team-b",
                             "--name", f"bench-{i}", "--", "/bin/sh", "-c",
                             "echo ready; exec cat"], env)
            buf = read_until(fd, b"ready", b"", t0 + WAIT_S)
            if buf is None:
                print(f"session {i}: no 'ready' within {WAIT_S:g} s", file=sys.stderr)
                finish(pid, fd)
                return None
            opens.append(time.monotonic() - t0)
            time.sleep(0.05)  # cat is reading
            e, buf = echoes(fd, a.keys, buf)
            echo += e
            rc = finish(pid, fd)
            if buf is None or rc != 0:
                print(f"session {i}: echo or exit failed (exit {rc})", file=sys.stderr)
                return None
        pid, fd = spawn(["/bin/cat"], dict(os.environ))
        time.sleep(0.1)
        local, _ = echoes(fd, a.sessions * a.keys)
        finish(pid, fd)
    finally:
        c.stop()
        c.cleanup()
    return opens, echo, local


def main():
    ap = argparse.ArgumentParser()
    for k in ("tesserad", "agent", "cli", "nvml", "fixtures"):
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--keys", type=int, default=20)
    ap.add_argument("--json")
    a = ap.parse_args()
    got = run(a)
    if not got:
        print("interactive: the run failed", file=sys.stderr)
        return 1
    opens, echo, local = got
    res = {}
    for name, xs in (("open_s", opens), ("echo_s", echo), ("local_echo_s", local)):
        res[name] = {"n": len(xs), "p50": pct(xs, 50), "p99": pct(xs, 99), "max": max(xs)}
    res["echo_p50_vs_local"] = res["echo_s"]["p50"] / max(res["local_echo_s"]["p50"], 1e-9)
    print(f"interactive: {a.sessions} sessions, {a.keys} keystrokes each, real agents on loopback")
    print(f"  open (tessera run start -> first output): p50 {opens and res['open_s']['p50']:.3f} s"
          f"  p99 {res['open_s']['p99']:.3f} s  max {res['open_s']['max']:.3f} s"
          f"  (target p99 < {OPEN_TARGET_S:g} s)")
    print(f"  keystroke echo through the controller:    p50 {res['echo_s']['p50'] * 1000:.2f} ms"
          f"  p99 {res['echo_s']['p99'] * 1000:.2f} ms  max {res['echo_s']['max'] * 1000:.2f} ms"
          f"  (target p99 < {ECHO_TARGET_S * 1000:g} ms)")
    print(f"  keystroke echo, local PTY (baseline):     p50 "
          f"{res['local_echo_s']['p50'] * 1000:.3f} ms  p99 "
          f"{res['local_echo_s']['p99'] * 1000:.3f} ms; ratio p50 "
          f"{res['echo_p50_vs_local']:.1f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=2)
    ok = res["open_s"]["p99"] < OPEN_TARGET_S and res["echo_s"]["p99"] < ECHO_TARGET_S
    print("  targets met" if ok else "  TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
