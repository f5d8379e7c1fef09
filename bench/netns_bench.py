#!/usr/bin/env python3
"""Tenant networks (docs/network.md): per-task setup time and overlay
throughput, measured in one run. Figures are printed; nothing is asserted
here beyond "the run worked": the targets are in the issue and docs.

1. Setup: in a fresh namespace standing for a node, netns_tool's `time`
   makes N task networks of one tenant one after another (namespace,
   macvlan, address, its own table; the first also the tenant's VXLAN and
   gateway) through
   the agent's own code, then removes them; p50/p99/max of each.
2. Throughput, in variants (VARIANTS): each two node namespaces joined by
   a bare veth pair (the underlay), at MTU 1500 or jumbo 9000, with or
   without GRO on the underlay veths. iperf3 (same flags) over each bare
   pair and between two tasks, one per node, over their tenant's VXLAN
   (MTU 1450 on a 1500 underlay, 1500 on a jumbo one), every measurement
   of every variant once per round, REPS rounds; medians. The baseline is
   a pristine bare pair (MTU 1500, default offloads, no agent started in
   its namespaces: the agent's nat table would put the underlay's own TCP
   through connection tracking), what a task's 1500-byte-class network
   would be without the overlay; each variant's
   overlay is also shown against its own underlay, the median of each
   round's ratio to that round's baseline, and Gbit per CPU-second of the
   two iperf3 processes (what a byte costs, whatever share of a shared
   machine a run gets); the load average before and after; and how steady
   the host was: the CPU its hypervisor gave other guests meanwhile (steal)
   and the bare pair's spread over the rounds, flagged over 20 %.
3. With --runs N the throughput part is run N times over the same nodes
   (each REPS rounds) and the two ratios that matter, overlay / baseline
   and per CPU-second overlay / baseline, are printed side by side per
   run, with their median over the runs: one run on a shared machine moves
   by a tenth, the median of several less.

   --affinity C,S pins the iperf3 client and server (iperf3 -A): 0,0 puts
   both ends and the whole stack on one CPU, the cost per byte without the
   machine's scheduling between two CPUs (which moves a 2-CPU VM's figures
   by half).

usage: netns_bench.py NETNS_TOOL [--tasks N] [--reps R] [--seconds S] [--runs N]
                      [--variants a,f] [--affinity C,S] [--json OUT]
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


AFFINITY = []  # iperf3 -A CLIENT,SERVER (--affinity): both processes pinned


def cpu_times():
    """The host's CPU time so far, from /proc/stat: (steal, all), in ticks."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (v[7] if len(v) > 7 else 0), sum(v[:8])


def iperf(src_ns, dst_ns, addr, seconds):
    srv = subprocess.Popen(["nsenter", f"--net=/run/netns/{dst_ns}", "iperf3", "-s", "-1",
                            "-B", addr], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):  # bounded wait for the listener
            if nsx(dst_ns, "ss", "-ltn", check=False).stdout.find(":5201") >= 0:
                break
            subprocess.run(["sleep", "0.1"])
        out = nsx(src_ns, "iperf3", "-c", addr, "-t", str(seconds), "-J", *AFFINITY,
                  timeout=seconds + 30).stdout
        end = json.loads(out)["end"]
        cpu = end.get("cpu_utilization_percent", {})
        # CPU-seconds of both iperf3 processes (their system time holds the
        # stack's work done on their behalf): what a byte costs whatever
        # share of the machine other work leaves this run
        cpu_s = (cpu.get("host_total", 0.0) + cpu.get("remote_total", 0.0)) / 100.0 * seconds
        return end["sum_received"]["bits_per_second"] / 1e9, cpu_s
    finally:
        srv.kill()
        srv.wait()


# (name, underlay MTU, GRO on the underlay veths, overlay MTU); "a" is the
# default site (1500-byte underlay, tasks at 1450) and its bare pair the baseline
# br_netfilter off: its bridge-nf-call-* off in the nodes (per network
# namespace). The tenants' bridges are in the agent's fabric namespace, which
# has it off whatever the node's setting (netns_fabric.c), so "on" and "off"
# should now be alike; the node's setting is other software's (container
# runtimes rely on it)
# (name, underlay MTU, GRO on the underlay veths, br_netfilter on, overlay MTU)
VARIANTS = [("a", 1500, False, True, 1450),
            ("b", 1500, True, True, 1450),     # GRO on the underlay: VXLAN packets aggregated
            ("c", 9000, False, True, 1500),    # jumbo underlay: tasks keep 1500
            ("d", 9000, True, True, 1500),
            ("e", 9000, True, False, 1500),
            ("f", 1500, False, False, 1450)]   # the default site without br_netfilter

# the baseline's pair: MTU 1500, default offloads, no agent in its namespaces
PRISTINE = "p"


def under(name, i):
    return f"192.168.{240 + ord(name) - ord('a')}.{i + 1}"


def fabrics(tmp):
    """The nodes' agents' fabric namespaces, tsf-<tag> (netns_fabric.c; tag:
    the FNV-1a of the state folder's real path), should their agents have
    left them."""
    return {fabric_of(os.path.join(tmp, d)) for d in (os.listdir(tmp) if os.path.isdir(tmp)
                                                       else [])}


def fabric_of(state_dir):
    """The fabric namespace of the agent whose state folder this is."""
    h = 2166136261
    for b in os.path.realpath(state_dir).encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    return f"tsf-{h:08x}"


def fabric(tool, tmp, name, mtu, gro, brnf=True, agent=True):
    """Two node namespaces joined by a bare veth pair u0 (the underlay);
    agent=False: no agent started in them, so none of its rules (the node's
    nat table turns connection tracking on for the underlay's own TCP)."""
    nodes = [f"{TAG}-{name}0", f"{TAG}-{name}1"]
    for n in nodes:
        sh("ip", "netns", "add", n)
    sh("ip", "link", "add", f"{TAG}x", "type", "veth", "peer", "name", "u0", "netns", nodes[1])
    sh("ip", "link", "set", f"{TAG}x", "netns", nodes[0])
    nsx(nodes[0], "ip", "link", "set", f"{TAG}x", "name", "u0")
    for i, n in enumerate(nodes):
        nsx(n, "ip", "link", "set", "u0", "mtu", str(mtu))
        nsx(n, "ip", "addr", "add", f"{under(name, i)}/24", "dev", "u0")
        nsx(n, "ip", "link", "set", "u0", "up")
        nsx(n, "ip", "link", "set", "lo", "up")
        if gro:
            nsx(n, "ethtool", "-K", "u0", "gro", "on")
        if not brnf:
            for t in ("iptables", "ip6tables", "arptables"):
                nsx(n, "sysctl", "-qw", f"net.bridge.bridge-nf-call-{t}=0", check=False)
        if agent:
            os.makedirs(f"{tmp}/{n}")
            nsx(n, tool, "start", f"{tmp}/{n}")
    return nodes


def measure(a, variants, runs):
    """One run of the throughput part: REPS rounds, each measuring every
    variant's bare pair and overlay once; its figures per variant."""
    for r in runs.values():
        r.update({"bare": [], "overlay": [], "bare_cpu": [], "overlay_cpu": []})
    for _ in range(a.reps):
        for name, r in runs.items():
            if name == PRISTINE:
                g, c = iperf(r["nodes"][0], r["nodes"][1], under(name, 1), a.seconds)
                r["bare"].append(g)
                r["bare_cpu"].append(c)
                continue
            g, c = iperf(r["nodes"][0], r["nodes"][1], under(name, 1), a.seconds)
            r["bare"].append(g)
            r["bare_cpu"].append(c)
            g, c = iperf(r["tasks"][0], r["tasks"][1], f"10.91.{r['k']}.3", a.seconds)
            r["overlay"].append(g)
            r["overlay_cpu"].append(c)
    # the baseline: the pristine pair (no agent, no rules), same MTU and
    # offloads as variant a's underlay
    base = statistics.median(runs[PRISTINE]["bare"])
    ba = runs[PRISTINE]["bare"]

    def per_cpu(r, which):  # Gbit per CPU-second, median over the rounds
        return statistics.median(g * a.seconds / c for g, c in zip(r[which], r[which + "_cpu"])
                                 if c > 0) if any(r[which + "_cpu"]) else 0.0
    base_eff = per_cpu(runs[PRISTINE], "bare")
    out = {"baseline": {"bare": ba, "bare_median": base, "gbit_per_cpu_s": base_eff}}
    for name, umtu, gro, brnf, omtu in variants:
        r = runs[name]
        mb, mo = statistics.median(r["bare"]), statistics.median(r["overlay"])
        out[name] = {
            "underlay_mtu": umtu, "gro": gro, "br_netfilter": brnf,
            "overlay_mtu": omtu, "bare": r["bare"],
            "overlay": r["overlay"], "bare_median": mb, "overlay_median": mo,
            "ratio_vs_own_underlay": mo / mb if mb else 0.0,
            "ratio_vs_baseline": mo / base if base else 0.0,
            # each round's overlay against the same round's baseline
            "ratio_vs_baseline_per_round_median": statistics.median(
                o / b for o, b in zip(r["overlay"], ba) if b),
            "gbit_per_cpu_s": per_cpu(r, "overlay"),
            "cpu_ratio_vs_baseline": per_cpu(r, "overlay") / base_eff if base_eff else 0.0}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tool")
    ap.add_argument("--tasks", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--variants", default="", help="comma-separated names (default: all)")
    ap.add_argument("--affinity", default="",
                    help="iperf3 -A client,server CPUs (e.g. 0,0: one CPU does both ends)")
    ap.add_argument("--json")
    a = ap.parse_args()
    if a.affinity:
        AFFINITY[:] = ["-A", a.affinity]
    pick = set(a.variants.split(",")) if a.variants else None
    variants = [v for v in VARIANTS if v[0] == "a" or not pick or v[0] in pick]
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("iperf3", "nft", "ethtool")):
        sys.exit("netns bench: needs root, iperf3, nft and ethtool (scripts/install-deps test)")
    tmp = tempfile.mkdtemp(prefix="tessera-netns-bench-")
    res = {}
    try:
        nodes = fabric(a.tool, tmp, "a", 1500, False)
        # 1. setup and teardown times
        out = nsx(nodes[0], a.tool, "time", f"{tmp}/{nodes[0]}", str(a.tasks), "4200",
                  "10.90.0", under("a", 0), timeout=600).stdout.split("\n")
        setup = [float(l.split()[1]) for l in out if l.startswith("setup_ms")]
        down = [float(l.split()[1]) for l in out if l.startswith("teardown_ms")]
        res["setup_ms"] = {"n": len(setup), "p50": pct(setup, 50), "p99": pct(setup, 99),
                           "max": max(setup), "first": setup[0]}
        res["teardown_ms"] = {"n": len(down), "p50": pct(down, 50), "p99": pct(down, 99),
                              "max": max(down)}
        # 2. throughput: each variant a pair of nodes; the bare underlay and the
        # overlay of each measured alternately, REPS rounds over all variants
        runs = {}
        for k, (name, umtu, gro, brnf, omtu) in enumerate(variants):
            ns = nodes if k == 0 else fabric(a.tool, tmp, name, umtu, gro, brnf)
            tasks = []
            for i, n in enumerate(ns):
                # the namespace's path is netns_tool's answer (its name carries the agent's tag)
                tasks.append(os.path.basename(nsx(n, a.tool, "setup", f"{tmp}/{n}", f"{TAG}{name}{i}", str(4300 + k),
                    f"10.91.{k}.{i + 2}", "24", under(name, i), f"mtu={omtu}", under(name, 1 - i)).stdout.strip()))
            runs[name] = {"nodes": ns, "tasks": tasks, "k": k}
        runs[PRISTINE] = {"nodes": fabric(a.tool, tmp, PRISTINE, 1500, False, agent=False)}
        res["load_before"] = os.getloadavg()[0]
        st0, all0 = cpu_times()
        res["runs"] = []
        for _ in range(max(1, a.runs)):
            res["runs"].append(measure(a, variants, runs))
        res["load_after"] = os.getloadavg()[0]
        st1, all1 = cpu_times()
        # a virtual machine's neighbours take CPU without the load average
        # showing it; the bare pair's own spread over rounds says the same
        res["steal_pct"] = 100.0 * (st1 - st0) / (all1 - all0) if all1 > all0 else 0.0
        res["throughput_gbps"] = res["runs"][0]
    finally:
        # each node's agent state removes its tasks' namespaces (named by its tag)
        for n in sorted(os.listdir("/run/netns")):
            if n.startswith(TAG) and os.path.isdir(f"{tmp}/{n}"):
                subprocess.run(["nsenter", f"--net=/run/netns/{n}", a.tool, "start",
                                f"{tmp}/{n}"], capture_output=True)
        for n in os.listdir("/run/netns"):
            if n.startswith(TAG) or n in fabrics(tmp):
                subprocess.run(["ip", "netns", "del", n], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    s, d, t = res["setup_ms"], res["teardown_ms"], res["throughput_gbps"]
    print(f"per-task network setup ({s['n']} tasks): p50 {s['p50']:.1f} ms, p99 {s['p99']:.1f} ms, "
          f"max {s['max']:.1f} ms (first, with its tenant's VXLAN and gateway: {s['first']:.1f} ms); target p99 <= 100 ms")
    print(f"teardown: p50 {d['p50']:.1f} ms, p99 {d['p99']:.1f} ms, max {d['max']:.1f} ms")
    loaded = os.path.exists("/proc/sys/net/bridge/bridge-nf-call-iptables")
    print("br_netfilter: " + ("loaded on this host (the variants with it on pay for it)" if loaded
                              else "not loaded on this host: 'on' and 'off' variants are alike"))
    print(f"iperf3 TCP, {a.seconds} s x {a.reps} rounds, interleaved (load average "
          f"{res['load_before']:.1f} before, {res['load_after']:.1f} after); baseline: bare veth, "
          f"MTU 1500, default offloads, no agent's rules, median {t['baseline']['bare_median']:.2f} "
          f"Gbit/s" + (f"; iperf3 -A {a.affinity}" if a.affinity else ""))
    bare = [g for r in res["runs"] for g in r["baseline"]["bare"]]
    spread = max(bare) / min(bare) - 1 if bare and min(bare) > 0 else 0.0
    res["baseline_spread"] = spread
    print(f"host: CPU stolen by other guests {res['steal_pct']:.1f} % of the throughput part; the bare "
          f"pair's rounds {min(bare):.2f}-{max(bare):.2f} Gbit/s (spread {100 * spread:.0f} %)" +
          ("; NOT STEADY (over 20 %): while the bare pair itself moves this much, the "
           "ratios below say more about the host than the path; run again" if spread > 0.20 else ""))
    for name, umtu, gro, brnf, omtu in variants:
        v = t[name]
        how = (" + GRO" if gro else "") + (", no br_netfilter" if not brnf else "")
        print(f"  {name}: underlay MTU {umtu}{how}, overlay MTU {omtu}: "
              f"underlay {v['bare_median']:.2f}, overlay {v['overlay_median']:.2f} Gbit/s; "
              f"overlay/baseline {v['ratio_vs_baseline']:.2f} (per round "
              f"{v['ratio_vs_baseline_per_round_median']:.2f}), overlay/own underlay "
              f"{v['ratio_vs_own_underlay']:.2f} (target >= 0.80); per CPU-second "
              f"{v['gbit_per_cpu_s']:.2f} Gbit, {v['cpu_ratio_vs_baseline']:.2f} of the baseline's")
    if len(res["runs"]) > 1:
        print(f"{len(res['runs'])} runs ({a.reps} rounds each), overlay / baseline and per "
              "CPU-second overlay / baseline, side by side; medians over the runs (target 0.80):")
        res["median_of_runs"] = {}
        for name, *_ in variants:
            rt = [r[name]["ratio_vs_baseline"] for r in res["runs"]]
            rc = [r[name]["cpu_ratio_vs_baseline"] for r in res["runs"]]
            res["median_of_runs"][name] = {"ratio_vs_baseline": statistics.median(rt),
                                           "cpu_ratio_vs_baseline": statistics.median(rc)}
            print(f"  {name}: throughput " + " ".join(f"{x:.2f}" for x in rt) +
                  f" -> median {statistics.median(rt):.2f}; per CPU-second " +
                  " ".join(f"{x:.2f}" for x in rc) + f" -> median {statistics.median(rc):.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
