#!/usr/bin/env python3
"""Submission of one large array to a live tesserad: the time of the POST
and the controller's RSS growth, for arrays of 1,000, 10,000 and 100,000
elements (issue 24, item 6a: 100,000 in under 1 s and under 50 MB).

    array_submit.py TESSERAD [RUNS] [BASELINE_TESSERAD]

Each run starts a fresh tesserad (SQLite store, 4 virtual 8-GPU nodes that
one 32-GPU job fills, so the array's elements wait), reads its VmRSS, posts
the array, reads VmRSS again at once and after 2 s of cycles, and stops it.
Prints every run and the median of RUNS per size. With BASELINE_TESSERAD
(e.g. a build of the main branch) the same runs are made on it and the
ratios printed beside. Every wait is bounded."""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

SIZES = [1000, 10000, 100000]


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def post(url, tok, path, body, timeout=120):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Authorization": "Bearer " + tok,
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read()


def one_run(tesserad, n):
    tmp = tempfile.mkdtemp(prefix="tessera-bench-array-")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(os.path.join(tmp, "cluster.yaml"), "w") as f:
        f.write("node_classes:\n  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, "
                "memory_mib: 524288}\nnodes:\n  - {names: 'n[1-4]', class: g8}\n")
    with open(os.path.join(tmp, "tenants.yaml"), "w") as f:
        f.write("tenants:\n  bench: {}\n")
    with open(os.path.join(tmp, "tesserad.yaml"), "w") as f:
        f.write(f"listen: 127.0.0.1:{port}\ncluster: cluster.yaml\ntenants: tenants.yaml\n"
                f"state_dir: state\nvirtual_nodes: all\n"
                f"limits: {{requests_per_s: 100000, burst: 100000}}\n"
                f"scheduler: {{interval: 0.2s}}\n")
    p = subprocess.Popen([tesserad, "--config", os.path.join(tmp, "tesserad.yaml")],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"))
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen(url + "/readyz", timeout=1).read()
                break
            except Exception:
                time.sleep(0.1)
        tok = open(os.path.join(tmp, "state", "admin.token")).read().strip()
        spec = {"tenant": "bench", "name": "fill", "tier": "opportunistic",
                "tasks": [{"count": 32, "gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}],
                "time_limit": "2h", "duration": "1h", "command": ["true"]}
        post(url, tok, "/v1/jobs", spec)
        time.sleep(1.0)
        spec = dict(spec, name="arr", array_size=n,
                    tasks=[{"gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}])
        before = rss_mb(p.pid)
        t0 = time.perf_counter()
        st, body = post(url, tok, "/v1/jobs", spec)
        dt = time.perf_counter() - t0
        at_once = rss_mb(p.pid)
        n_ids = len(json.loads(body)["jobs"])
        time.sleep(2.0)
        later = rss_mb(p.pid)
        if st != 201 or n_ids != n:
            raise SystemExit(f"array of {n}: answered {st} with {n_ids} jobs")
        return dt, at_once - before, later - before
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def measure(tesserad, runs, label):
    out = {}
    for n in SIZES:
        rows = [one_run(tesserad, n) for _ in range(runs)]
        for dt, g0, g2 in rows:
            print(f"{label} {n:7d} elements: submit {dt * 1e3:8.1f} ms, RSS +{g0:6.1f} MB "
                  f"at once, +{g2:6.1f} MB after 2 s")
        out[n] = tuple(statistics.median(r[k] for r in rows) for k in range(3))
    return out


def main():
    tesserad = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    base = sys.argv[3] if len(sys.argv) > 3 else None
    m = measure(tesserad, runs, "this")
    b = measure(base, runs, "baseline") if base else None
    print(f"median of {runs} runs:")
    for n in SIZES:
        dt, g0, g2 = m[n]
        line = (f"  {n:7d} elements: submit {dt * 1e3:8.1f} ms, RSS growth {g0:6.1f} MB "
                f"at once, {g2:6.1f} MB after 2 s")
        if b:
            bdt, bg0, bg2 = b[n]
            line += (f"  (baseline {bdt * 1e3:.1f} ms, {bg2:.1f} MB: x{bdt / dt:.1f} faster, "
                     f"x{bg2 / g2 if g2 > 0 else float('inf'):.1f} less memory)")
        print(line)
    dt, g0, g2 = m[100000]
    ok = dt < 1.0 and max(g0, g2) < 50
    print(f"  100000 elements: {dt:.2f} s (target < 1 s), {max(g0, g2):.1f} MB "
          f"(target < 50 MB): {'met' if ok else 'MISSED'}")


main()
