#!/usr/bin/env python3
"""Two clusters on one host and one L2 (docs/network.md, "VNIs"): two real
tesserads, each with two real tessera-agents, where each "host" (a network
namespace bridged to this machine) runs one agent of each cluster, so both
clusters' VXLAN devices share its UDP port 4789 and its underlay address.
Both give the same tenant name its first ordinal. Checks: each tesserad
gives its tenants VNIs of its own (cluster A chose its base at random, B has
network.vni_base: 1) and keeps them in its store across a restart; both
clusters' gangs run (with one VNI per host and port, the second cluster's
VXLAN device could not be made); every intra-cluster pair delivers over
TCP, UDP and ICMP and no pair across the clusters does (0 cross
deliveries); after the restart a new rank of A still reaches the old ones.

Both clusters' nodes are also on one InfiniBand fabric (each agent its own
eight rail adapters in a fake sysfs, distinct port GUIDs) with
network.ib_partitions: the same checks for partition keys (A's base chosen
at random, B's network.ib_pkey_base: 1, both kept and a changed one
refused); each cluster's partitions.conf holds only its own partition, and
the two files put together make one unmodified OpenSM (on Debian's ibsim)
give each cluster's key to its own nodes' ports and no other; each rank's
NCCL_IB_PKEY is its key's index in its adapters' tables, host-network tasks
too.

usage: clusters_test.py TESSERAD AGENT CLI NVML FIXTURES   (root; 77 = skipped)
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
sys.path.insert(0, HERE)

import all_pairs_test as ap  # noqa: E402  (the prober, the server)
import e2e_net_test as e2e  # noqa: E402  (OpenSM on ibsim)
from cluster import Cluster, Node  # noqa: E402
from harness import check, finish, wait_ready  # noqa: E402

TAG = f"vc{os.getpid() % 100000}"
BRIDGE = f"{TAG}br"
GW = "192.168.251.254"
HOSTS = 2
RANKS = 2

TENANTS_YAML = """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 16}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 16}}, allow_host_network: true}
"""

BASE = ("scheduler: {interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 3s, "
        "backoff: 1s}\n")
IB = "ib_partitions: true, ib_partitions_file: partitions.conf"
# both clusters name the fabric's shared service (ibsim's last HCA,
# e2e.SERVICE_GUID): OpenSM takes a port's last membership of a key, so a
# later file's `ALL=limited` would make it a limited member again
SVC = f"ib_service_ports: [\"{e2e.SERVICE_GUID:#018x}\"]"
CONFIGS = {"a": BASE + f"network: {{isolation: tenant, range: 10.80.0.0/12, {IB}, {SVC}, "
                       "tenant_prefix: 20}\n",
           "b": BASE + f"network: {{isolation: tenant, range: 10.96.0.0/12, {IB}, {SVC}, "
                       "tenant_prefix: 20, vni_base: 1, ib_pkey_base: 1}\n"}
# where each cluster's key sits in its adapters' tables (NCCL_IB_PKEY)
PKEY_INDEX = {"a": 1, "b": 2}

RANK = "import os\n" + ap.SERVER.replace(
    "log = open(sys.argv[2], \"a\", buffering=1)", "log = open(os.devnull, \"a\")").replace(
    "ident = sys.argv[1]", "ident = os.environ['TESSERA_JOB_ID'] + '/' + os.environ['RANK']")


class TwoHostCluster(Cluster):
    """The harness's cluster, tesserad on the host bridge, agent i in host i's
    namespace (nsenter: the network only) beside the other cluster's."""

    def __init__(self, bins, key):
        self.key = key
        nodes = [Node(f"{key}{i}", "l1") for i in range(HOSTS)]
        super().__init__(bins, nodes=nodes, tenants=TENANTS_YAML, config=CONFIGS[key],
                         name=f"vni{key}")
        self.url = f"http://{GW}:{self.port}"

    def write(self, name, text):
        if name == "tesserad.yaml":
            text = text.replace("listen: 127.0.0.1:", f"listen: {GW}:")
        super().write(name, text)

    def _spawn(self, name, args, env=None):
        if name != "tesserad":
            i = int(name[1:])
            args = ["nsenter", f"--net=/run/netns/{TAG}-h{i}", *args,
                    "--net-addr", f"192.168.251.{i + 1}", "--nic-map", self.path("nics"),
                    "--sysfs-root", self.path(f"sysfs-{name}")]
        super()._spawn(name, args, env)

    def hca(self, i, g):
        """The fabric's index of agent i's adapter for GPU g (A's first)."""
        return (0 if self.key == "a" else HOSTS * 8) + i * 8 + g

    def adapters(self):
        """Each agent eight rail adapters, whose port GUIDs (GID 0's low
        half) are those ibsim gives the fabric's HCAs (e2e.sim_guid)."""
        self.write("nics", "".join(f"{g} mlx5_{g}:1\n" for g in range(8)))
        for i in range(HOSTS):
            for g in range(8):
                port = self.path(f"sysfs-{self.key}{i}", "class", "infiniband", f"mlx5_{g}",
                                 "ports", "1")
                os.makedirs(os.path.join(port, "pkeys"), exist_ok=True)
                os.makedirs(os.path.join(port, "gids"), exist_ok=True)
                gu = e2e.sim_guid(self.hca(i, g))
                with open(os.path.join(port, "gids", "0"), "w") as f:
                    f.write(f"fe80:0000:0000:0000:0000:0000:{gu >> 16:04x}:{gu & 0xffff:04x}\n")

    def tables(self, key):
        """What the subnet manager gives its ports: the default key, and
        this cluster's tenant key (full) at PKEY_INDEX."""
        for i in range(HOSTS):
            for g in range(8):
                d = self.path(f"sysfs-{self.key}{i}", "class", "infiniband", f"mlx5_{g}",
                              "ports", "1", "pkeys")
                vals = ["0xffff", "0x0000", "0x0000"]
                vals[PKEY_INDEX[self.key]] = f"{0x8000 | key:#06x}"
                for k, v in enumerate(vals):
                    with open(os.path.join(d, str(k)), "w") as f:
                        f.write(v + "\n")

    def pkeys(self):
        """The partition keys its log names, the last time it said."""
        text = open(self.path("tesserad.log")).read()
        m = re.findall(r"tenants' partition keys 0x([0-9a-f]+)\.\.0x([0-9a-f]+) \(([^)]*)\)",
                       text)
        return (int(m[-1][0], 16), int(m[-1][1], 16), m[-1][2]) if m else None

    def partitions(self):
        p = self.path("partitions.conf")
        return open(p).read() if os.path.exists(p) else ""

    def vnis(self):
        """The VNI range its log names, the last time it said (first, last)."""
        text = open(self.path("tesserad.log")).read()
        m = re.findall(r"tenants' VNIs (\d+)\.\.(\d+) \(([^)]*)\)", text)
        return (int(m[-1][0]), int(m[-1][1]), m[-1][2]) if m else None


def fabric():
    ap.sh("ip", "link", "add", BRIDGE, "type", "bridge")
    ap.sh("ip", "addr", "add", f"{GW}/24", "dev", BRIDGE)
    ap.sh("ip", "link", "set", BRIDGE, "up")
    for i in range(HOSTS):
        n = f"{TAG}-h{i}"
        ap.sh("ip", "netns", "add", n)
        ap.sh("ip", "link", "add", f"{TAG}h{i}", "type", "veth", "peer", "name", "u0", "netns", n)
        ap.sh("ip", "link", "set", f"{TAG}h{i}", "master", BRIDGE, "up")
        for cmd in (["ip", "addr", "add", f"192.168.251.{i + 1}/24", "dev", "u0"],
                    ["ip", "link", "set", "u0", "up"], ["ip", "link", "set", "lo", "up"],
                    ["ip", "route", "add", "default", "via", GW]):
            ap.sh("nsenter", f"--net=/run/netns/{n}", *cmd)


def unfabric():
    for n in os.listdir("/run/netns"):
        if n.startswith(TAG):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


def placement(c, jid):
    return [p["node"] for p in (c.job(jid).get("placement") or [])]


def rank_addrs(c, jid, ns):
    """rank -> its eth0 address, read in its namespace."""
    out = {}
    for r, node in enumerate(placement(c, jid)):
        n = ap.ns_name(c.path(node), f"j{jid}-r{r}")
        ns[(c.key, jid, r)] = n
        text = ap.sh("nsenter", f"--net=/run/netns/{n}", "ip", "-4", "-o", "addr", "show",
                     "dev", "eth0", check=False).stdout.split()
        out[r] = text[3].split("/")[0] if len(text) > 3 else None
    return out


def probe_all(ns, addr):
    """Every rank probes every other: (intra-cluster misses, cross deliveries)."""
    miss = leak = 0
    for me, n in ns.items():
        targets = {f"{k[0]}/{k[1]}/{k[2]}": a for k, a in addr.items() if k != me and a}
        p = ap.sh("nsenter", f"--net=/run/netns/{n}", sys.executable, "-c", ap.PROBER,
                  "/".join(map(str, me)), "0.7", json.dumps(targets), timeout=60, check=False)
        if p.returncode != 0:
            print(f"  {me}: the prober failed: {p.stderr.strip()[-300:]}")
        res = json.loads(p.stdout) if p.returncode == 0 else {
            i: {"tcp": None, "udp": None, "icmp": False} for i in targets}
        for ident, rr in res.items():
            key, jid, r = ident.split("/")
            want = f"{jid}/{r}"
            for proto in ("tcp", "udp", "icmp"):
                ok = rr[proto] if proto == "icmp" else rr[proto] == want
                if key == me[0] and not ok:
                    miss += 1
                    print(f"  {me} -> {ident} {proto}: no delivery")
                if key != me[0] and rr[proto]:
                    leak += 1
                    print(f"  {me} -> {ident} {proto}: CROSSED")
    return miss, leak


def tenant_line(conf, key):
    """The GUIDs of the full members of key's partition in a partitions.conf."""
    line = next((ln for ln in conf.splitlines() if ln.startswith(f"tessera_{key:04x}=")), None)
    if line is None:
        return None
    return {m.split("=")[0].strip() for m in line.split(":", 1)[-1].rstrip(" ;").split(",")
            if "=full" in m}


def ib_fabric(cs, jobs, pk):
    """Each cluster's partitions.conf holds its own key only, with its ranks'
    nodes' ports; both files together make OpenSM give each key to its own
    cluster's ports; each rank's NCCL_IB_PKEY is its key's index."""
    got = {k: c.wait(lambda c=c, k=k: tenant_line(c.partitions(), pk[k][0]), 
                     f"cluster {k}'s partitions.conf lists its tenant", 20)
           for k, c in cs.items()}
    confs = {k: c.partitions() for k, c in cs.items()}
    for k, c in cs.items():
        want = {f"0x{e2e.sim_guid(c.hca(i, g)):016x}" for i in range(HOSTS) for g in range(8)}
        lines = [ln for ln in confs[k].splitlines() if ln and not ln.startswith("#")]
        svc = f", {e2e.SERVICE_GUID:#018x}=full"
        check(got[k] == want and len(lines) == 2 and
              lines[0] == f"Default=0x7fff, ipoib : ALL=limited, SELF=full{svc} ;",
              f"cluster {k}'s partitions.conf holds the default partition's rule (its shared "
              f"services full members) and its own partition only, its key {pk[k][0]:#06x} "
              f"with its ranks' 16 ports:\n{confs[k]}")
    both = cs["a"].path("partitions-both.conf")
    with open(both, "w") as f:  # what a site gives its one subnet manager
        f.write(confs["a"] + confs["b"])
    members = {pk[k][0]: {c.hca(i, g) for i in range(HOSTS) for g in range(8)}
               for k, c in cs.items()}
    e2e.opensm_check(both, members, cs["a"].path("ibsim"))
    for k, c in cs.items():
        outs = {r: c.output(node, jobs[k], r) for r, node in enumerate(placement(c, jobs[k]))}
        check(all(f"pkey={PKEY_INDEX[k]}" in o for o in outs.values()) and len(outs) == RANKS,
              f"cluster {k}'s ranks get NCCL_IB_PKEY={PKEY_INDEX[k]}, their key's index: {outs}")


def host_network_pkeys(cs, pk):
    """A host-network task gets its tenant's key index too, and its node's
    ports join the tenant's partition while it runs."""
    hj = {k: c.submit({"tenant": "team-a", "name": "hostnet", "network": "host",
                       "tasks": [{"gpus": 1, "gpu_model": "H100-80GB"}],
                       "command": ["/bin/sh", "-c", 'echo "pkey=$NCCL_IB_PKEY"; exec sleep 60']})
          for k, c in cs.items()}
    nodes, listed = {}, {}
    for k, c in cs.items():  # its node, while it runs (an ended job has no placement)
        c.wait_job(hj[k], ("running",), timeout=60)
        nodes[k] = (placement(c, hj[k]) or [f"{k}0"])[0]
    for k, c in cs.items():
        i = int(nodes[k][1:])
        want = {f"0x{e2e.sim_guid(c.hca(i, g)):016x}" for g in range(8)}
        listed[k] = c.wait(lambda c=c, k=k: tenant_line(c.partitions(), pk[k][0]) == want,
                           f"cluster {k}'s host-network task's node's ports join its partition",
                           20)
    for k, c in cs.items():
        out = c.wait(lambda c=c, k=k: c.output(nodes[k], hj[k]), "its output", 10) or ""
        check(listed[k] and f"pkey={PKEY_INDEX[k]}" in out,
              f"cluster {k}'s host-network task gets NCCL_IB_PKEY={PKEY_INDEX[k]} and its "
              f"node's ports are in its tenant's partition: {out.strip()}")
        c.call("POST", f"/v1/jobs/{hj[k]}/cancel")
    for k, c in cs.items():
        c.wait_job(hj[k], ("cancelled",), timeout=60)


def main():
    if os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("nsenter"):
        print("skip: needs root, nft and nsenter")
        return 77
    bins = dict(zip(("tesserad", "agent", "cli", "nvml", "fixtures"), sys.argv[1:6]))
    cs = {k: TwoHostCluster(bins, k) for k in ("a", "b")}
    ns = {}
    try:
        fabric()
        for c in cs.values():
            c.adapters()
            if not c.start():
                finish("/", [c.path(log) for log in c.logs])
        v = {k: c.vnis() for k, c in cs.items()}
        print("VNIs:", v)
        check(v["a"] and v["b"] and v["b"][:2] == (1, 256) and v["a"][0] >= 4096 and
              (v["a"][1] < v["b"][0] or v["b"][1] < v["a"][0]),
              f"each cluster's tenants have VNIs of their own (a: chosen, b: vni_base 1): {v}")
        pk = {k: c.pkeys() for k, c in cs.items()}
        print("partition keys:", pk)
        check(pk["a"] and pk["b"] and pk["b"][:2] == (1, 256) and pk["a"][0] >= 0x100 and
              pk["a"][2] == "chosen now, kept" and pk["a"][0] != pk["b"][0],
              f"each cluster's tenants have partition keys of their own (a: chosen, "
              f"b: ib_pkey_base 1): {pk}")
        for k, c in cs.items():
            c.tables(pk[k][0] if pk[k] else 0)
        jobs = {}
        for k, c in cs.items():
            c.write("rank.py", RANK)
            jobs[k] = c.submit({"tenant": "team-a", "name": "gang",
                                "tasks": [{"count": RANKS, "gpus": 8, "gpu_model": "H100-80GB"}],
                                "command": ["/bin/sh", "-c", 'echo "pkey=$NCCL_IB_PKEY"; '
                                            'exec /usr/bin/python3 "$0"', c.path("rank.py")]})
        for k, c in cs.items():
            c.wait_job(jobs[k], ("running",), timeout=60)
        addr = {}
        ok = cs["a"].wait(lambda: all(
            all(rank_addrs(c, jobs[k], ns).values()) for k, c in cs.items()),
            "every rank of both clusters has its namespace and address", 30)
        for k, c in cs.items():
            for r, a in rank_addrs(c, jobs[k], ns).items():
                addr[(k, jobs[k], r)] = a
        check(ok, f"both clusters' gangs run on the shared hosts, one rank on each: {addr}")
        cs["a"].wait(lambda: probe_all({m: n for m, n in ns.items() if m[0] == "a"},
                                       addr)[0] == 0, "cluster a's ranks answer", 20)
        miss, leak = probe_all(ns, addr)
        pairs = len(ns) * (len(ns) - 1) * 3
        print(f"pairs x protocols: {pairs}, intra missed {miss}, crossed {leak}")
        check(miss == 0, f"every intra-cluster pair delivers over TCP, UDP, ICMP ({miss} missed)")
        check(leak == 0, f"no pair across the clusters delivers ({leak} crossed of "
                         f"{pairs // 2})")
        ib_fabric(cs, jobs, pk)
        # a restarted tesserad keeps its VNIs (the store), so its new ranks
        # join the old ones' segments
        a = cs["a"]
        a.procs["tesserad"].send_signal(signal.SIGTERM)
        a.procs["tesserad"].wait(timeout=30)
        # ... and refuses a network.vni_base that differs from the one it keeps
        conf = open(a.path("tesserad.yaml")).read()
        with open(a.path("other.yaml"), "w") as f:
            f.write(conf.replace("tenant_prefix: 20}", "tenant_prefix: 20, vni_base: 5000}"))
        p = subprocess.run([bins["tesserad"], "--config", a.path("other.yaml")],
                           capture_output=True, text=True, timeout=30)
        want = f"network.vni_base: 5000, but this cluster's tenants have had their VNIs from " \
               f"{v['a'][0]}"
        check(p.returncode != 0 and want in p.stderr,
              f"a changed network.vni_base is refused: {p.stderr.strip()[-240:]}")
        with open(a.path("other.yaml"), "w") as f:
            f.write(conf.replace("tenant_prefix: 20}", "tenant_prefix: 20, ib_pkey_base: 0x7000}"))
        p = subprocess.run([bins["tesserad"], "--config", a.path("other.yaml")],
                           capture_output=True, text=True, timeout=30)
        want = f"network.ib_pkey_base: 0x7000, but this cluster's tenants have had their " \
               f"partition keys from {pk['a'][0]:#06x}"
        check(p.returncode != 0 and want in p.stderr,
              f"a changed network.ib_pkey_base is refused: {p.stderr.strip()[-240:]}")
        a._spawn("tesserad", [bins["tesserad"], "--config", a.path("tesserad.yaml")])
        check(wait_ready(a.url, 30), "cluster a's tesserad comes back")
        after = a.vnis()
        check(after and after[:2] == v["a"][:2] and after[2] == "kept in the store",
              f"after a restart cluster a keeps its VNIs: {v['a']} -> {after}")
        after = a.pkeys()
        check(after and after[:2] == pk["a"][:2] and after[2] == "kept in the store",
              f"after a restart cluster a keeps its partition keys: {pk['a']} -> {after}")
        first = addr[("a", jobs["a"], 0)]
        late = a.submit({"tenant": "team-a", "name": "late", "tasks": [{"gpus": 0}],
                         "command": ["/usr/bin/ping", "-c", "1", "-W", "2", first]})
        a.wait_job(late, ("completed", "failed"), timeout=60)
        check(a.job(late).get("state") == "completed",
              f"a rank started after the restart reaches {first} on its tenant's segment")
        for k, c in cs.items():
            c.call("POST", f"/v1/jobs/{jobs[k]}/cancel")
        for k, c in cs.items():
            c.wait_job(jobs[k], ("cancelled",), timeout=60)
        host_network_pkeys(cs, pk)
    finally:
        for c in cs.values():
            c.stop()
        for n in ns.values():
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        for c in cs.values():  # an agent stopped with tasks leaves its fabric namespace
            for node in c.nodes:
                fab = ap.ns_name(c.path(node.name), "x").replace("ts-", "tsf-")[:12]
                subprocess.run(["ip", "netns", "del", fab], capture_output=True)
        unfabric()
    finish("/", [c.path(log) for c in cs.values() for log in c.logs])  # exits on a failure
    for c in cs.values():
        c.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
