#!/usr/bin/env python3
"""Flood lists follow the registered nodes (docs/network.md "How it is
built", "Teardown and restarts"): a real tesserad with `network: {isolation:
tenant}` and three real tessera-agents, each in its own network namespace
("node") bridged to the host. A team-a task runs on n0 while n2's agent is
stopped (SIGTERM); n2's agent comes back at the same address, and n0's VXLAN
floods to it without another task starting on n0; a task on n2 is reached
from n0's task, n0 speaking first. Then n2's agent stops and comes back at
another underlay address (--net-addr): n0's and n1's VXLANs drop the old
address and flood to the new one, and n0's task reaches a task on n2 again.

usage: rejoin_test.py TESSERAD AGENT CLI NVML FIXTURES   (root; 77 = skipped)
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)

import all_pairs_test as ap  # noqa: E402  (the prober, sh, ns_name)
from cluster import Cluster, Node  # noqa: E402
from harness import check, finish  # noqa: E402

TAG = f"rj{os.getpid() % 100000}"
BRIDGE = f"{TAG}br"
NET = "192.168.250"
GW = f"{NET}.254"
NODES = 3
MOVED = f"{NET}.13"  # n2's address once it comes back elsewhere
FLOOD_WAIT_S = 10  # "within a sync or two": the scheduler's 0.2 s cycle, then one answer

TENANTS_YAML = """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 16}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
"""

CONFIG = ("scheduler: {interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 3s, "
          "backoff: 1s}\nnetwork: {isolation: tenant, range: 10.80.0.0/12, tenant_prefix: 20}\n")

# a rank: answers TCP on 7000 and UDP on 7001 (all_pairs' prober), until the stop file
SERVER = r"""
import os, socket, sys, threading, time
ident = os.environ["TESSERA_JOB_ID"]
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("0.0.0.0", 7000)); t.listen(16)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 7001))
def tcp():
    while True:
        c, _ = t.accept(); c.sendall(ident.encode()); c.close()
def udp():
    while True:
        d, a = u.recvfrom(512); u.sendto(ident.encode(), a)
threading.Thread(target=tcp, daemon=True).start()
threading.Thread(target=udp, daemon=True).start()
print("ready", flush=True)
deadline = time.time() + 300
while time.time() < deadline and not os.path.exists(sys.argv[1]):
    time.sleep(0.2)
"""


class NetCluster(Cluster):
    """The harness's cluster with tesserad on the host bridge and each agent
    in its node's network namespace, at the underlay address addr[name]."""

    def __init__(self, bins):
        nodes = [Node(f"n{i}", "l1") for i in range(NODES)]
        super().__init__(bins, nodes=nodes, tenants=TENANTS_YAML, config=CONFIG, name="rejoin")
        self.url = f"http://{GW}:{self.port}"
        self.addr = {f"n{i}": f"{NET}.{i + 1}" for i in range(NODES)}

    def write(self, name, text):
        if name == "tesserad.yaml":
            text = text.replace("listen: 127.0.0.1:", f"listen: {GW}:")
        super().write(name, text)

    def _spawn(self, name, args, env=None):
        if name in self.addr:
            args = ["nsenter", f"--net=/run/netns/{TAG}-{name}", *args,
                    "--net-addr", self.addr[name]]
        super()._spawn(name, args, env)


def fabric():
    ap.sh("ip", "link", "add", BRIDGE, "type", "bridge")
    ap.sh("ip", "addr", "add", f"{GW}/24", "dev", BRIDGE)
    ap.sh("ip", "link", "set", BRIDGE, "up")
    for i in range(NODES):
        n = f"{TAG}-n{i}"
        ap.sh("ip", "netns", "add", n)
        ap.sh("ip", "link", "add", f"{TAG}h{i}", "type", "veth", "peer", "name", "u0", "netns", n)
        ap.sh("ip", "link", "set", f"{TAG}h{i}", "master", BRIDGE, "up")
        for cmd in (["ip", "addr", "add", f"{NET}.{i + 1}/24", "dev", "u0"],
                    ["ip", "link", "set", "u0", "up"], ["ip", "link", "set", "lo", "up"],
                    ["ip", "route", "add", "default", "via", GW]):
            ap.sh("nsenter", f"--net=/run/netns/{n}", *cmd)


def unfabric():
    for n in os.listdir("/run/netns"):
        if n.startswith(TAG):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


def fdb(c, node, flood=True):
    """The destinations of the flood entries (all-zero MAC; flood=False: of
    every entry, the learned MACs' too) of every VXLAN in node's agent's
    fabric namespace, sorted; None where it has none."""
    fab = "tsf-" + ap.ns_name(c.path(node), "")[3:11]
    if not os.path.exists(f"/run/netns/{fab}"):
        return None
    out = ap.sh("bridge", "-n", fab, "fdb", "show", check=False).stdout
    return sorted(l.split(" dst ")[1].split()[0] for l in out.splitlines()
                  if (l.startswith("00:00:00:00:00:00 ") or not flood) and " dst " in l)


def floods(c, node):
    return fdb(c, node)


def restart_agent(c, node, addr=None):
    """SIGTERM to node's agent (its last sync says it leaves), then, where
    addr is given, its node moved to that underlay address; then the agent
    again, at the node's (new) address, and its node up."""
    p = c.procs[node]
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    c.wait(lambda: c.node(node).get("state") not in ("up", None),
           f"{node} is out of service once its agent stopped (SIGTERM)", 15)
    if addr:
        ns = f"--net=/run/netns/{TAG}-{node}"
        ap.sh("nsenter", ns, "ip", "addr", "del", f"{c.addr[node]}/24", "dev", "u0")
        ap.sh("nsenter", ns, "ip", "addr", "add", f"{addr}/24", "dev", "u0")
        ap.sh("nsenter", ns, "ip", "route", "replace", "default", "via", GW)
        c.addr[node] = addr
    return p


def spawn_agent(c, node):
    i = int(node[1:])
    c._spawn(node, [c.bins["agent"], "--server", c.url, "--node", node, "--token-file",
                    c.path(node + ".token"), "--state-dir", c.path(node), "--nvml",
                    c.bins["nvml"]],
             dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=c.path(node + "-gpus.json")))
    return c.wait(lambda: c.node(node).get("state") == "up",
                  f"{node}'s agent registers again and its node is up", 30) is not None


def server(c, node, script, stop):
    jid = c.submit({"tenant": "team-a", "name": f"srv-{node}", "nodelist": node,
                    "tasks": [{"gpus": 0, "cpu_milli": 300}],
                    "command": ["/usr/bin/python3", script, stop]})
    c.wait_job(jid, ("running",), timeout=60)
    c.wait(lambda: "ready" in c.output(node, jid), f"job {jid} on {node} listens", 30)
    return jid


def overlay_addr(c, node, jid):
    ns = ap.ns_name(c.path(node), f"j{jid}-r0")
    out = ap.sh("nsenter", f"--net=/run/netns/{ns}", "ip", "-4", "-o", "addr", "show", "dev",
                "eth0", check=False).stdout
    return ns, (out.split()[3].split("/")[0] if out.split() else None)


def reach(src_ns, jid, addr):
    """One try of TCP, UDP and ICMP from namespace src_ns to addr: which
    answered as job jid."""
    res = json.loads(ap.sh("nsenter", f"--net=/run/netns/{src_ns}", sys.executable, "-c",
                           ap.PROBER, "src", "1.5", json.dumps({"dst": addr}),
                           timeout=60).stdout)["dst"]
    return {"tcp": res["tcp"] == str(jid), "udp": res["udp"] == str(jid), "icmp": res["icmp"]}


def expect_floods(c, want, what):
    """Each node in want has exactly want[node] as its flood list within
    FLOOD_WAIT_S (no task starting meanwhile)."""
    got = {}

    def same():
        got.update({n: floods(c, n) for n in want})
        return all(got[n] == sorted(v) for n, v in want.items())
    ok = c.wait(same, what, FLOOD_WAIT_S, step=0.3) is not None
    check(ok, f"{what}: {got} (want {want})")


def scenario(c, script, stop):
    a, n2 = c.addr, "n2"
    # n2 out of service (SIGTERM) before team-a's first task: n0's VXLAN is
    # made while only n1 is registered
    restart_agent(c, n2)
    s0 = server(c, "n0", script, stop)
    ns0, _ = overlay_addr(c, "n0", s0)
    expect_floods(c, {"n0": [a["n1"]]}, "n0's team-a VXLAN floods to n1 only while n2 is away")
    # n2 back at the same address: n0 floods to it with no task started on n0
    if not spawn_agent(c, n2):
        return
    expect_floods(c, {"n0": [a["n1"], a["n2"]]},
                  "n2 back (its agent restarted after SIGTERM): n0's VXLAN floods to it")
    s2 = server(c, n2, script, stop)
    _, at2 = overlay_addr(c, n2, s2)
    got = reach(ns0, s2, at2)  # n0's task speaks first: its ARP must be flooded to n2
    check(all(got.values()), f"a task on n0 reaches the task on the returned n2 ({at2}), "
          f"n0 first: {got}")
    # n1 gets a team-a task too: two old nodes to follow n2's move
    s1 = server(c, "n1", script, stop)
    expect_floods(c, {"n0": [a["n1"], a["n2"]], "n1": [a["n0"], a["n2"]]},
                  "n0 and n1 flood to the two other nodes")
    c.call("POST", f"/v1/jobs/{s2}/cancel")
    c.wait_job(s2, ("cancelled",), timeout=60)
    old = a[n2]
    restart_agent(c, n2, MOVED)
    expect_floods(c, {"n0": [a["n1"]], "n1": [a["n0"]]},
                  f"n2 stopped: n0 and n1 no longer flood to it ({old})")
    if not spawn_agent(c, n2):
        return
    expect_floods(c, {"n0": [a["n1"], MOVED], "n1": [a["n0"], MOVED]},
                  f"n2 back at {MOVED}: n0 and n1 flood to it, and not to {old}")
    check(old not in (fdb(c, "n0", flood=False) or []),
          f"n0's VXLAN keeps no entry at all (a MAC it learned) at {old}: "
          f"{fdb(c, 'n0', flood=False)}")
    s2b = server(c, n2, script, stop)
    _, at2b = overlay_addr(c, n2, s2b)
    got = reach(ns0, s2b, at2b)
    check(all(got.values()), f"a task on n0 reaches the task on n2 at its new address, n0 "
          f"first: {got}")
    for jid in (s0, s1, s2b):
        c.call("POST", f"/v1/jobs/{jid}/cancel")
    for jid in (s0, s1, s2b):
        c.wait_job(jid, ("cancelled",), timeout=60)
    c.wait(lambda: all(floods(c, n) is None for n in c.addr),
           "the fabric namespaces go with the tenants' last tasks", 30)


def main():
    if os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("nsenter") \
            or not shutil.which("bridge"):
        print("skip: needs root, nft, nsenter and bridge (iproute2)")
        return 77
    bins = dict(zip(("tesserad", "agent", "cli", "nvml", "fixtures"), sys.argv[1:6]))
    c = NetCluster(bins)
    try:
        fabric()
        if not c.start():
            finish(c.tmp, c.logs)
        c.write("srv.py", SERVER)
        scenario(c, c.path("srv.py"), c.path("stop"))
    finally:
        open(c.path("stop"), "w").close()
        c.stop()
        ap.sweep_namespaces([c.path(f"n{i}") for i in range(NODES)])
        unfabric()
    finish(c.tmp, c.logs)
    c.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
