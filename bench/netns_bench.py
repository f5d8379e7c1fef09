#!/usr/bin/env python3
"""Tenant networks (docs/network.md): per-task setup time and overlay
throughput, measured in one run. Figures are printed; nothing is asserted
here beyond "the run worked": the targets are in the issue and docs.

1. Setup: in a fresh namespace standing for a node, netns_tool's `time`
   makes N task networks of one tenant one after another (namespace, veth,
   address, bindings; the first also the tenant's bridge and VXLAN) through
   the agent's own code, then removes them; p50/p99/max of each.
2. Throughput: two node namespaces joined by a bare veth pair (the
   underlay, MTU 1500). iperf3 over that pair (the baseline), then between
   two tasks, one per node, over their tenant's VXLAN (the overlay's MTU is
   1450), alternating REPS times; medians and the ratio overlay/baseline.

usage: netns_bench.py NETNS_TOOL [--tasks N] [--reps R] [--seconds S] [--json OUT]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

TAG = f"nb{os.getpid() % 100000}"


def sh(*a, check=True, timeout=120):
    return subprocess.run(list(a), check=check, timeout=timeout, capture_output=True, text=True)


def nsx(ns, *a, **kw):
    return sh("nsenter", f"--net=/run/netns/{ns}", *a, **kw)


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def iperf(src_ns, dst_ns, addr, seconds):
    srv = subprocess.Popen(["nsenter", f"--net=/run/netns/{dst_ns}", "iperf3", "-s", "-1",
                            "-B", addr], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):  # bounded wait for the listener
            if nsx(dst_ns, "ss", "-ltn", check=False).stdout.find(":5201") >= 0:
                break
            subprocess.run(["sleep", "0.1"])
        out = nsx(src_ns, "iperf3", "-c", addr, "-t", str(seconds), "-J",
                  timeout=seconds + 30).stdout
        return json.loads(out)["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        srv.kill()
        srv.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--json")
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("iperf3") or not shutil.which("nft"):
        sys.exit("netns bench: needs root, iperf3 and nft (scripts/install-deps test)")
    tmp = tempfile.mkdtemp(prefix="tessera-netns-bench-")
    nodes = [f"{TAG}-a", f"{TAG}-b"]
    res = {}
    try:
        for n in nodes:
            sh("ip", "netns", "add", n)
        sh("ip", "link", "add", f"{TAG}x", "type", "veth", "peer", "name", "u0", "netns", nodes[1])
        sh("ip", "link", "set", f"{TAG}x", "netns", nodes[0])
        nsx(nodes[0], "ip", "link", "set", f"{TAG}x", "name", "u0")
        for i, n in enumerate(nodes):
            nsx(n, "ip", "addr", "add", f"192.168.253.{i + 1}/24", "dev", "u0")
            nsx(n, "ip", "link", "set", "u0", "up")
            nsx(n, "ip", "link", "set", "lo", "up")
            os.makedirs(f"{tmp}/{n}")
            nsx(n, a.tool, "start", f"{tmp}/{n}")
        # 1. setup and teardown times
        out = nsx(nodes[0], a.tool, "time", f"{tmp}/{nodes[0]}", str(a.tasks), "4200",
                  "10.90.0", "192.168.253.1", timeout=600).stdout.split("\n")
        setup = [float(l.split()[1]) for l in out if l.startswith("setup_ms")]
        down = [float(l.split()[1]) for l in out if l.startswith("teardown_ms")]
        res["setup_ms"] = {"n": len(setup), "p50": pct(setup, 50), "p99": pct(setup, 99),
                           "max": max(setup), "first": setup[0]}
        res["teardown_ms"] = {"n": len(down), "p50": pct(down, 50), "p99": pct(down, 99),
                              "max": max(down)}
        # 2. throughput: bare veth vs the overlay, alternating
        for i, n in enumerate(nodes):
            nsx(n, a.tool, "setup", f"{tmp}/{n}", f"{TAG}t{i}", "4300", f"10.91.0.{i + 2}", "24",
                f"192.168.253.{i + 1}", f"192.168.253.{2 - i}")
        bare, overlay = [], []
        for _ in range(a.reps):
            bare.append(iperf(nodes[0], nodes[1], "192.168.253.2", a.seconds))
            overlay.append(iperf(f"ts-{TAG}t0", f"ts-{TAG}t1", "10.91.0.3", a.seconds))
        mb, mo = statistics.median(bare), statistics.median(overlay)
        res["throughput_gbps"] = {"bare_veth": bare, "overlay": overlay, "bare_median": mb,
                                  "overlay_median": mo, "ratio": mo / mb if mb else 0.0}
        for i, n in enumerate(nodes):
            nsx(n, a.tool, "teardown", f"{tmp}/{n}", f"{TAG}t{i}")
    finally:
        for n in os.listdir("/run/netns"):
            if n.startswith(TAG) or n.startswith(f"ts-{TAG}") or n.startswith("ts-bench"):
                subprocess.run(["ip", "netns", "del", n], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    s, d, t = res["setup_ms"], res["teardown_ms"], res["throughput_gbps"]
    print(f"per-task network setup ({s['n']} tasks): p50 {s['p50']:.1f} ms, p99 {s['p99']:.1f} ms, "
          f"max {s['max']:.1f} ms (first, with bridge+VXLAN: {s['first']:.1f} ms); target p99 <= 100 ms")
    print(f"teardown: p50 {d['p50']:.1f} ms, p99 {d['p99']:.1f} ms, max {d['max']:.1f} ms")
    print(f"iperf3 TCP, {a.seconds} s x {a.reps}: bare veth median {t['bare_median']:.2f} Gbit/s, "
          f"overlay (VXLAN) median {t['overlay_median']:.2f} Gbit/s, ratio {t['ratio']:.2f} "
          f"(target >= 0.80)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
