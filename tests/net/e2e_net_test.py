#!/usr/bin/env python3
"""Tenant networks end to end (docs/network.md): a real tesserad with
`network: {isolation: tenant}` and four real tessera-agents, each in its own
network namespace ("node") bridged to the host, where tesserad listens.
Three tenants each run one 4-rank job spread over the nodes; every rank
serves TCP and UDP, and the ranks meet through torch.distributed's gloo on
MASTER_ADDR as the agent set it (rank 0's overlay address). Checks: each
rank got its own namespace and an address of its tenant's block, every
intra-tenant pair connects over TCP/UDP/ICMP and no cross-tenant pair
does, the rendezvous works, an agent killed with SIGKILL and restarted keeps
its running tasks' networks, a restarted tesserad keeps the addresses, and
when the jobs end nothing is left (namespaces, links, bindings, counted).

usage: e2e_net_test.py TESSERAD AGENT CLI NVML FIXTURES   (root; 77 = skipped)
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

import all_pairs_test as ap  # noqa: E402  (the prober and the server)
from cluster import Cluster, Node  # noqa: E402
from harness import check, finish, wait_ready  # noqa: E402

TAG = f"en{os.getpid() % 100000}"
BRIDGE = f"{TAG}br"
GW = "192.168.252.254"
NODES = 4
TENANTS = ("team-a", "team-b", "team-c")

TENANTS_YAML = """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 32}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 8}}}
      team-c: {guaranteed: {gpu: {H100-80GB: 8}}, allow_host_network: true}
"""

# a service on the gateway host that only team-b's tasks may reach
STORE_PORT = 20000 + os.getpid() % 20000
CONFIG = ("scheduler: {interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 3s, "
          "backoff: 1s}\nnetwork: {isolation: tenant, range: 10.80.0.0/12, tenant_prefix: 20, "
          f"services: [\"{GW}:{{port}}/tcp\", "
          f"{{to: \"{GW}:{STORE_PORT}/tcp\", tenants: [team-b]}}], publish_from: [{GW}/32], "
          "publish_ports: 7100-7299, "
          "ib_partitions: true, ib_pkey_base: 0x1000, "
          f"ib_service_ports: [\"{0x100001 + 2 * 4 * 8:#018x}\"], "  # SERVICE_GUID, below
          f"ib_partitions_file: partitions.conf}}\n")

RANK = r"""
import os, socket, sys, threading, time
ident = os.environ["TESSERA_JOB_ID"] + "/" + os.environ["RANK"]
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("0.0.0.0", 7000)); t.listen(64)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("0.0.0.0", 7001))
def tcp():
    while True:
        c, _ = t.accept(); c.sendall(ident.encode()); c.close()
def udp():
    while True:
        d, a = u.recvfrom(512); u.sendto(ident.encode(), a)
threading.Thread(target=tcp, daemon=True).start()
threading.Thread(target=udp, daemon=True).start()
print("master", os.environ.get("MASTER_ADDR"), flush=True)
print("pkey", os.environ.get("NCCL_IB_PKEY"), flush=True)
import torch, torch.distributed as dist, datetime
dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                        timeout=datetime.timedelta(seconds=60))
x = torch.tensor([float(os.environ["RANK"]) + 1]); dist.all_reduce(x)
print("sum", int(x.item()), flush=True)
deadline = time.time() + 240
while time.time() < deadline and not os.path.exists(sys.argv[1]):
    time.sleep(0.2)
"""


class NetCluster(Cluster):
    """The harness's cluster with tesserad on the host bridge and each agent
    in its node's network namespace (nsenter: the network only)."""

    def __init__(self, bins):
        nodes = [Node(f"n{i}", "l1") for i in range(NODES)]
        super().__init__(bins, nodes=nodes, tenants=TENANTS_YAML, config=CONFIG, name="net")
        self.url = f"http://{GW}:{self.port}"

    def write(self, name, text):
        if name == "tesserad.yaml":
            text = text.replace("listen: 127.0.0.1:", f"listen: {GW}:")
            text = text.replace("{port}", str(self.port))
        super().write(name, text)

    def _spawn(self, name, args, env=None):
        if name.startswith("n") and name[1:].isdigit():
            i = int(name[1:])
            args = ["nsenter", f"--net=/run/netns/{TAG}-{name}", *args,
                    "--net-addr", f"192.168.252.{i + 1}", "--nic-map", self.path("nics"),
                    "--sysfs-root", self.path(f"sysfs-{name}")]
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
        for cmd in (["ip", "addr", "add", f"192.168.252.{i + 1}/24", "dev", "u0"],
                    ["ip", "link", "set", "u0", "up"], ["ip", "link", "set", "lo", "up"],
                    ["sysctl", "-qw", "net.ipv4.ip_forward=1"],  # services' answers come back
                    ["ip", "route", "add", "default", "via", GW]):
            ap.sh("nsenter", f"--net=/run/netns/{n}", *cmd)
        for g in range(8):  # stand-ins for the rail NICs of dedicated-NIC jobs
            ap.sh("nsenter", f"--net=/run/netns/{n}", "ip", "link", "add", f"rn{g}", "type",
                  "veth", "peer", "name", f"rn{g}p")


def unfabric():
    for n in os.listdir("/run/netns"):
        if n.startswith(TAG):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


def node_counts(c):
    """The agents' links, the addresses on them and the bindings, all nodes."""
    links = addrs = elems = 0
    for i in range(NODES):
        n_links, n_addrs, n_elems = ap.node_net(f"{TAG}-n{i}")
        links, addrs, elems = links + n_links, addrs + n_addrs, elems + n_elems
    return links, addrs, elems


def bad_configs(tesserad):
    """A bad network key stops tesserad naming the field and the reason."""
    import tempfile
    d = tempfile.mkdtemp(prefix="tessera-netcfg-")
    try:
        with open(os.path.join(d, "cluster.yaml"), "w") as f:
            f.write("nodes:\n  - {name: a, class: c}\nnode_classes:\n"
                    "  c: {gpu_model: H100-80GB, gpus: 8}\n")
        with open(os.path.join(d, "tenants.yaml"), "w") as f:
            f.write("tenants:\n  t: {}\n")
        for net, want in (("{isolation: bridge}", "network.isolation: must be host or tenant"),
                          ("{range: 10.0.0.0/30}", "network.range: must be an IPv4 range"),
                          ("{range: 10.0.0.0/16, tenant_prefix: 16}",
                           "network.tenant_prefix: 16: must be longer than the range's /16"),
                          ("{mtu: 100}", "network.mtu: must be 1280..9000"),
                          ("{vni_base: 16777000}", "network.vni_base: must be 1..16776192"),
                          ("{ib_pkey_base: 0x7c00}",
                           "network.ib_pkey_base: must be a partition key 0x0001..0x7bff"),
                          ("{ib_pkey_base: ' 12'}", "network.ib_pkey_base: must be a partition"),
                          ("{ib_partitions: true, range: 10.0.0.0/8, tenant_prefix: 28}",
                           "network.ib_partitions: network.range /8 in blocks of /28 is 1048576 "
                           "tenants, more than InfiniBand's 32766 partition keys"),
                          ("{ib_service_ports: ['0x10', 'mlx5_0']}",
                           "network.ib_service_ports[1]: must be a port GUID: 0x and 1..16 hex"),
                          ("{ib_service_ports: 0x10}",
                           "network.ib_service_ports: must be a list of at most 64 port GUIDs"),
                          ("{services: [nope]}", "network.services[0]: must be ADDR[/N]:PORT/tcp|udp"),
                          ("{services: [{to: '1.2.3.4:80/tcp', tenants: ['a b']}]}",
                           "network.services[0].tenants[0]: must be a tenant name"),
                          ("{services: [{to: '1.2.3.4:80/tcp'}]}",
                           "network.services[0]: needs both to: and tenants:")):
            with open(os.path.join(d, "t.yaml"), "w") as f:
                f.write(f"cluster: cluster.yaml\ntenants: tenants.yaml\nstate_dir: st\n"
                        f"network: {net}\n")
            p = subprocess.run([tesserad, "--config", os.path.join(d, "t.yaml")],
                               capture_output=True, text=True, timeout=20)
            check(p.returncode != 0 and want in p.stderr,
                  f"network: {net} is refused: {want} ({p.stderr.strip()[:200]})")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def key_bases(tesserad):
    """The partition key base is kept from an isolating cluster's first
    start, also while ib_partitions is off, so turning it on later keeps it;
    a cluster whose tenants had ordinals before (net.next in its store, as an
    upgraded one has) and turns partitions on keeps the keys they had
    (0x1000 + ordinal)."""
    import re
    import sqlite3
    import tempfile
    d = tempfile.mkdtemp(prefix="tessera-netkeys-")

    def start(net):
        with open(os.path.join(d, "t.yaml"), "w") as f:
            f.write(f"listen: 127.0.0.1:{20000 + os.getpid() % 20000}\ncluster: cluster.yaml\n"
                    f"tenants: tenants.yaml\nstate_dir: st\nnetwork: {net}\n")
        p = subprocess.Popen([os.path.abspath(tesserad), "--config", "t.yaml"], cwd=d,
                             stderr=subprocess.PIPE, text=True)
        lines = []
        for line in p.stderr:  # up to its listening line (or its end)
            lines.append(line)
            if "listening on" in line:
                break
        p.terminate()
        p.communicate(timeout=20)
        text = "".join(lines)
        m = re.findall(r"partition keys (0x[0-9a-f]+)\.\.0x[0-9a-f]+ \(([^)]*)\)", text)
        return (m[-1] if m else None), text
    try:
        with open(os.path.join(d, "cluster.yaml"), "w") as f:
            f.write("nodes:\n  - {name: a, class: c}\nnode_classes:\n  c: {gpu_model: H100-80GB, "
                    "gpus: 8, cpu_milli: 64000, memory_mib: 512000}\n")
        with open(os.path.join(d, "tenants.yaml"), "w") as f:
            f.write("tenants:\n  t: {}\n")
        off, text = start("{isolation: tenant, ib_partitions: false}")
        on, text2 = start("{isolation: tenant, ib_partitions: true}")
        check(off is None and on and on[1] == "kept in the store" and int(on[0], 16) >= 0x100,
              f"a partition key base kept while ib_partitions was off is the one used once it "
              f"is on: {on} ({text.strip()[:200]} / {text2.strip()[:200]})")
        shutil.rmtree(os.path.join(d, "st"))
        start("{isolation: host}")  # a store, then tenants' ordinals as before key bases
        db = sqlite3.connect(os.path.join(d, "st", "tessera.db"))
        db.execute("insert into settings (key, value) values ('net.next', '3')")
        db.commit()
        db.close()
        up, text = start("{isolation: tenant, ib_partitions: true}")
        check(up and up[0] == "0x1000" and up[1].startswith("its tenants' from before"),
              f"an upgraded cluster's tenants keep their keys from 0x1000: {up} "
              f"({text.strip()[:200]})")
    finally:
        shutil.rmtree(d, ignore_errors=True)


HCAS = NODES * 8
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"


def sim_guid(h):
    """ibsim's port GUID for the h-th HCA of the net file (node GUIDs from
    0x100000 in steps of 2, port 1 the node's + 1)."""
    return 0x100001 + 2 * h


SERVICE_GUID = sim_guid(HCAS)  # a shared service's port: the fabric's last HCA (CONFIG's)
IPOIB_BROADCAST = "ff12:401b:ffff::ffff:ffff"  # the default partition's IPoIB group


def ipoib_check(env, work, conf):
    """OpenSM left running (not one sweep) on the fabric: its subnet
    administrator lists the default partition's IPoIB broadcast group
    (saquery -g), which OpenSM makes only for a Default rule flagged ipoib;
    the shared service's port holds the default key as a full member
    (0xffff), a node's as a limited one (0x7fff, not 0xffff)."""
    sm = subprocess.Popen(["opensm", "-s", "0", "-P", conf, "-f",
                           os.path.join(work, "osm-ipoib.log")], env=env, cwd=work,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        groups = ""
        deadline = time.time() + 30
        while time.time() < deadline and IPOIB_BROADCAST not in groups:
            time.sleep(0.5)
            groups = subprocess.run(["saquery", "-g"], env=env, timeout=20, capture_output=True,
                                    text=True).stdout
        check(IPOIB_BROADCAST in groups,
              f"OpenSM makes the default partition's IPoIB broadcast group: {groups[-300:]!r}")

        def keys(route):
            q = subprocess.run(["smpquery", "-D", "pkeys", route, "1"], env=env, timeout=20,
                               capture_output=True, text=True)
            return {int(w, 16) for line in q.stdout.splitlines() for w in line.split()[1:]
                    if w.startswith("0x")}
        svc, node = keys(f"0,1,{HCAS + 1}"), keys("0,1,2")
        check(0xffff in svc and 0x7fff in node and 0xffff not in node,
              f"the shared service's port is a full member of the default partition, a "
              f"node's a limited one: {sorted(hex(k) for k in svc if k)} "
              f"{sorted(hex(k) for k in node if k)}")
    finally:
        sm.kill()
        sm.wait()


def opensm_check(conf, members, work):
    """ibsim simulates one switch with HCAS single-port HCAs H0.. (and one
    more, a shared service's); OpenSM (unmodified, under ibsim's umad
    preload) sweeps once with conf as its partitions.conf; smpquery reads
    each port's partition table back: each tenant key (members: key -> HCA
    indices) is on its members' ports, as a full member, and on no other
    port. Then ipoib_check."""
    if not all(shutil.which(t) for t in ("ibsim", "opensm", "smpquery", "saquery")) \
            or not os.path.exists(UMAD2SIM):
        print("skip: OpenSM on ibsim (needs opensm, ibsim-utils, infiniband-diags)")
        return
    os.makedirs(work, exist_ok=True)
    net = [f'Switch\t{HCAS + 2} "SW"'] + [f'[{h + 1}]\t"H{h}"[1]' for h in range(HCAS + 1)]
    net += [""]
    for h in range(HCAS + 1):
        net += [f'Hca\t1 "H{h}"', f'[1]\t"SW"[{h + 1}]', ""]
    with open(os.path.join(work, "net"), "w") as f:
        f.write("\n".join(net))
    sim = subprocess.Popen(["ibsim", "-s", "-n", os.path.join(work, "net")], cwd=work,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.time() + 10
        while time.time() < deadline and "ready" not in (sim.stdout.readline() or "ready"):
            pass
        env = dict(os.environ, LD_PRELOAD=UMAD2SIM, SIM_HOST="H0", OSM_TMP_DIR=work,
                   OSM_CACHE_DIR=work)
        r = subprocess.run(["opensm", "-o", "-s", "0", "-P", conf, "-f",
                            os.path.join(work, "osm.log")], env=env, cwd=work, timeout=60,
                           capture_output=True, text=True)
        check(r.returncode == 0 and "MASTER" in r.stdout,
              f"OpenSM sweeps the simulated fabric with tesserad's partitions.conf "
              f"(rc {r.returncode})")
        bad = []
        for h in range(HCAS):
            route = "0" if h == 0 else f"0,1,{h + 1}"
            q = subprocess.run(["smpquery", "-D", "pkeys", route, "1"], env=env, timeout=20,
                               capture_output=True, text=True)
            keys = {int(w, 16) for line in q.stdout.splitlines() for w in line.split()[1:]
                    if w.startswith("0x")}
            for key, hs in members.items():
                if (key | 0x8000 in keys) != (h in hs) or (h not in hs and key in keys):
                    bad.append(f"H{h} {key:#06x}: {sorted(hex(k) for k in keys if k)}")
        check(not bad and len(members) > 0,
              f"each port's partition table (smpquery pkeys) holds a tenant's key, full, on "
              f"its nodes' ports only ({HCAS} ports, {len(members)} keys): {bad[:4]}")
        ipoib_check(env, work, conf)
    finally:
        sim.kill()
        sim.wait()


def main():
    bad_configs(sys.argv[1])
    key_bases(sys.argv[1])
    if os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("nsenter") \
            or subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed as d; "
                               "assert d.is_gloo_available()"],
                              capture_output=True).returncode != 0:
        print("skip: needs root, nft, nsenter and torch with gloo in /usr/bin/python3")
        return 77
    bins = dict(zip(("tesserad", "agent", "cli", "nvml", "fixtures"), sys.argv[1:6]))
    c = NetCluster(bins)
    ids, nsn = {}, {}
    try:
        fabric()
        # every GPU its rail adapter, whose partition table holds each
        # tenant's key (full member): 0xffff, then tenant ordinal k at k + 1
        c.write("nics", "".join(f"{g} mlx5_{g}:1\n" for g in range(8)))
        # (and a GID 0 whose low half is the port GUID: ibsim's for HCA <node>*8+<gpu>
        # of the fabric opensm_check simulates)
        for i in range(NODES):
            for g in range(8):
                port = c.path(f"sysfs-n{i}", "class", "infiniband", f"mlx5_{g}", "ports", "1")
                os.makedirs(os.path.join(port, "pkeys"))
                os.makedirs(os.path.join(port, "gids"))
                for k, v in enumerate(["0xffff", "0x9000", "0x9001", "0x9002"]):
                    with open(os.path.join(port, "pkeys", str(k)), "w") as f:
                        f.write(v + "\n")
                with open(os.path.join(port, "gids", "0"), "w") as f:
                    gu = sim_guid(i * 8 + g)
                    f.write(f"fe80:0000:0000:0000:0000:0000:{gu >> 16:04x}:{gu & 0xffff:04x}\n")
                # the adapter's own network device (no VFs): rn<g> in the node
                os.makedirs(c.path(f"sysfs-n{i}", "class", "infiniband", f"mlx5_{g}", "device",
                                   "net", f"rn{g}"))
        if not c.start():
            finish(c.tmp, c.logs)
        script = c.path("rank.py")
        stop = c.path("stop")
        c.write("rank.py", RANK)
        jobs = {}
        for t in TENANTS:
            jobs[t] = c.submit({"tenant": t, "name": "gang",
                                "tasks": [{"count": 4, "gpus": 2, "gpu_model": "H100-80GB",
                                           "cpu_milli": 21000}],
                                "command": ["/usr/bin/python3", script, stop]})
        for t, jid in jobs.items():
            c.wait_job(jid, ("running",), timeout=60)
        ids.update({(t, r): f"j{jid}-r{r}" for t, jid in jobs.items() for r in range(4)})
        # each rank's namespace, named by its agent (its state folder's tag)
        nsn.update({k: ap.ns_name(c.path(node_of(c, jobs[k[0]], k[1])), tid)
                    for k, tid in ids.items()})
        got = c.wait(lambda: all("sum 10" in c.output(n, jobs[t], r)
                                 for (t, r) in ids for n in [node_of(c, jobs[t], r)]),
                     "every rank of every tenant's gang met through gloo on its overlay", 120)
        addr = {}
        for (t, r), tid in ids.items():
            out = ap.sh("nsenter", f"--net=/run/netns/{nsn[(t, r)]}", "ip", "-4", "-o", "addr", "show",
                        "dev", "eth0", check=False).stdout
            addr[(t, r)] = out.split()[3].split("/")[0] if out.split() else None
        check(all(addr.values()), f"each rank has its own namespace with an address: {addr}")
        def block(a):  # the /20 (network.tenant_prefix) an address is in
            o = [int(x) for x in a.split(".")]
            return ((o[0] << 24) | (o[1] << 16) | (o[2] << 8) | o[3]) >> 12
        blocks = {t: {block(addr[(t, r)]) for r in range(4) if addr[(t, r)]} for t in TENANTS}
        check(all(len(b) == 1 for b in blocks.values()) and
              len({next(iter(b)) for b in blocks.values() if b}) == len(TENANTS),
              f"each tenant's ranks share one block, no two tenants the same: {blocks}")
        masters = {t: c.output(node_of(c, jid, 1), jid, 1).split()[1:2] for t, jid in jobs.items()}
        check(all(masters[t] == [addr[(t, 0)]] for t in TENANTS),
              f"MASTER_ADDR is rank 0's overlay address: {masters}")
        # NCCL_IB_PKEY: the index of the tenant's key (0x1000 + its ordinal,
        # which its address block shows) in the adapter's table
        pk = {(t, r): c.output(node_of(c, jobs[t], r), jobs[t], r).split("pkey ")[-1].split()[:1]
              for (t, r) in ids}
        want = {(t, r): [str(block(addr[(t, r)]) - block("10.80.0.0") + 1)] for (t, r) in ids}
        check(pk == want, f"each rank's NCCL_IB_PKEY is its tenant's partition's index: {pk}")
        # partitions.conf: each tenant's key, its ranks' nodes' rail ports as full members
        conf = open(c.path("partitions.conf")).read() \
            if os.path.exists(c.path("partitions.conf")) else ""
        # the default partition: ports limited, the shared service full, IPoIB on
        ok = f"Default=0x7fff, ipoib : ALL=limited, SELF=full, 0x{SERVICE_GUID:016x}=full ;" \
            in conf.splitlines()
        for t in TENANTS:
            ordn = block(addr[(t, 0)]) - block("10.80.0.0")
            key = 0x1000 + ordn  # network.ib_pkey_base + the tenant's ordinal
            line = next((l for l in conf.splitlines() if l.startswith(f"tessera_{key:04x}=")), "")
            nodes = {int(node_of(c, jobs[t], r)[1:]) for r in range(4)}
            want = {f"0x{sim_guid(i * 8 + g):016x}" for i in nodes for g in range(8)}
            got = {m.split("=")[0].strip() for m in line.split(":", 1)[-1].rstrip(" ;").split(",")
                   if "=full" in m}
            ok = ok and line.startswith(f"tessera_{key:04x}=0x{key:04x}") and got == want
        check(ok, f"partitions.conf has each tenant's key with its nodes' ports as full members:\n"
              f"{conf}")
        # an unmodified OpenSM applies that file on a simulated fabric (ibsim)
        members = {}
        for t in TENANTS:
            ordn = block(addr[(t, 0)]) - block("10.80.0.0")
            nodes = {int(node_of(c, jobs[t], r)[1:]) for r in range(4)}
            members[0x1000 + ordn] = {i * 8 + g for i in nodes for g in range(8)}
        opensm_check(c.path("partitions.conf"), members, c.path("ibsim"))
        leak = miss = 0
        for (t, r), tid in ids.items():
            targets = {f"{t2}/{r2}": a for (t2, r2), a in addr.items() if (t2, r2) != (t, r) and a}
            res = json.loads(ap.sh("nsenter", f"--net=/run/netns/{nsn[(t, r)]}", sys.executable, "-c",
                                   ap.PROBER, f"{t}/{r}", "0.7", json.dumps(targets),
                                   timeout=60).stdout)
            for ident, rr in res.items():
                t2, r2 = ident.split("/")
                want = f"{jobs[t2]}/{r2}"
                for proto in ("tcp", "udp", "icmp"):
                    ok = rr[proto] if proto == "icmp" else rr[proto] == want
                    if t2 == t and not ok:
                        miss += 1
                        print(f"  {t}/{r} -> {ident} {proto}: no delivery")
                    if t2 != t and rr[proto]:
                        leak += 1
                        print(f"  {t}/{r} -> {ident} {proto}: CROSSED")
        check(miss == 0, f"every intra-tenant pair delivers over TCP, UDP, ICMP ({miss} missed)")
        check(leak == 0, f"no cross-tenant pair delivers ({leak} crossed)")
        # kill -9 of one agent, and a restart: its tasks keep their networks
        victim = node_of(c, jobs["team-a"], 0)
        c.procs[victim].send_signal(signal.SIGKILL)
        c.procs[victim].wait()
        c._spawn(victim, [bins["agent"], "--server", c.url, "--node", victim, "--token-file",
                          c.path(victim + ".token"), "--state-dir", c.path(victim), "--nvml",
                          bins["nvml"]],
                 dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=c.path(victim + "-gpus.json")))
        time.sleep(2)
        a0, a3 = addr[("team-a", 0)], addr[("team-a", 3)]
        ping = ap.sh("nsenter", f"--net=/run/netns/{nsn[('team-a', 3)]}", "ping", "-c", "1",
                     "-W", "2", a0, check=False).returncode == 0
        check(ping, f"after the agent's kill -9 and restart, its task {a0} still answers {a3}")
        # tesserad restarted: the same addresses in the desired state
        c.procs["tesserad"].send_signal(signal.SIGTERM)
        c.procs["tesserad"].wait(timeout=30)
        c._spawn("tesserad", [bins["tesserad"], "--config", c.path("tesserad.yaml")])
        check(wait_ready(c.url, 30), "tesserad comes back")
        # its allocations came back from the store: a new rank of team-a gets
        # the next free address of team-a's block, not one in use
        late = c.submit({"tenant": "team-a", "name": "late", "tasks": [{"gpus": 0}],
                         "command": ["/usr/sbin/ip", "-4", "-o", "addr", "show", "dev", "eth0"]})
        c.wait_job(late, ("completed",), timeout=60)
        text = "".join(c.output(n.name, late, 0) for n in c.nodes)  # ended: no placement
        check(" 10.80.0.5/20 " in text, f"after tesserad's restart a new team-a rank gets "
              f"10.80.0.5 (1-4 still held): {text.strip()}")
        # egress: to network.services (the controller) only
        import socket
        other = socket.socket()
        other.bind((GW, 0))
        other.listen(8)
        oport = other.getsockname()[1]
        store = socket.socket()
        store.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        store.bind((GW, STORE_PORT))
        store.listen(8)
        probe = ("import socket,sys\nfor p in sys.argv[1:]:\n try:\n"
                 "  socket.create_connection(('" + GW + "',int(p)),timeout=2).close();print(p,'open')\n"
                 " except OSError:\n  print(p,'closed')\n")
        eg = c.submit({"tenant": "team-b", "name": "egress", "tasks": [{"gpus": 0}],
                       "command": ["/usr/bin/python3", "-c", probe, str(c.port), str(oport),
                                   str(STORE_PORT)]})
        c.wait_job(eg, ("completed",), timeout=60)
        text = "".join(c.output(n.name, eg, 0) for n in c.nodes)
        check(f"{c.port} open" in text and f"{oport} closed" in text,
              f"a task reaches the controller (a service) and not another port of its host: "
              f"{text.strip()}")
        check(f"{STORE_PORT} open" in text,
              f"team-b's task reaches the service only team-b may: {text.strip()}")
        ega = c.submit({"tenant": "team-a", "name": "egress", "tasks": [{"gpus": 0}],
                        "command": ["/usr/bin/python3", "-c", probe, str(c.port),
                                    str(STORE_PORT)]})
        c.wait_job(ega, ("completed",), timeout=60)
        text = "".join(c.output(n.name, ega, 0) for n in c.nodes)
        other.close()
        store.close()
        check(f"{c.port} open" in text and f"{STORE_PORT} closed" in text,
              f"team-a's task reaches the controller but not team-b's service: {text.strip()}")
        # a published port: team-a's server's 7100/tcp at its node's address,
        # from this host (network.publish_from) only, not from another tenant's task
        srv = ("import socket\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
               "s.bind(('0.0.0.0',7100));s.listen(8)\nwhile True:\n"
               " c,_=s.accept();c.sendall(b'served');c.close()\n")
        sj = c.submit({"tenant": "team-a", "name": "serve", "tasks": [{"gpus": 0}],
                       "network": {"publish": ["7100/tcp"]},
                       "command": ["/usr/bin/python3", "-c", srv]})
        c.wait_job(sj, ("running",), timeout=60)
        names = [n.name for n in c.nodes]
        at = f"192.168.252.{names.index(node_of(c, sj, 0)) + 1}"

        def dial(addr, port):
            try:
                conn = socket.create_connection((addr, port), timeout=2)
                conn.settimeout(2)
                return conn.recv(16).decode()
            except OSError:
                return "closed"
        check(c.wait(lambda: dial(at, 7100) == "served",
                     "the published port answers at its node", 20),
              f"team-a's published 7100/tcp answers at its node's address {at}")
        dialler = ("import socket,sys\ntry:\n c=socket.create_connection((sys.argv[1],7100),timeout=2)\n"
                   " c.settimeout(2);print('got',c.recv(16).decode())\nexcept OSError:\n print('closed')\n")
        bj = c.submit({"tenant": "team-b", "name": "dial", "tasks": [{"gpus": 0}],
                       "command": ["/usr/bin/python3", "-c", dialler, at]})
        c.wait_job(bj, ("completed",), timeout=60)
        text = "".join(c.output(n.name, bj, 0) for n in c.nodes)
        check("closed" in text and "served" not in text,
              f"team-b's task cannot reach team-a's published port: {text.strip()}")
        st, _ = c.call("POST", f"/v1/jobs/{sj}/cancel")
        c.wait_job(sj, ("cancelled",), timeout=60)
        check(dial(at, 7100) == "closed", "the port is closed again once the server ended")
        # a node's port is one task's: two servers of 7200/tcp limited to n0
        # and n1 are placed one on each; a third waits naming the port, and
        # starts once one of them ends
        d = c.submit({"tenant": "team-a", "name": "serve2", "tasks": [{"count": 2, "gpus": 0}],
                      "topology": {"required": "node"}, "network": {"publish": ["7200/tcp"]},
                      "command": ["/bin/true"]}, expect=400)
        check("topology.required: a job publishing ports runs one task per node" in json.dumps(d),
              f"two tasks publishing a port on one node are refused naming the field: {d}")
        d = c.submit({"tenant": "team-a", "name": "serve2", "tasks": [{"count": 5, "gpus": 0}],
                      "network": {"publish": ["7200/tcp"]}, "command": ["/bin/true"]},
                     expect=400)
        check("network.publish: its 5 tasks need a node each" in json.dumps(d),
              f"five tasks publishing a port on four nodes are refused naming the field: {d}")
        serve = {"tenant": "team-a", "name": "serve2", "tasks": [{"gpus": 0}],
                 "nodelist": "n0,n1", "network": {"publish": ["7200/tcp"]},
                 "command": ["/usr/bin/python3", "-c", srv.replace("7100", "7200")]}
        s1, s2, s3 = (c.submit(serve) for _ in range(3))
        for jid in (s1, s2):
            c.wait_job(jid, ("running",), timeout=60)
        check({node_of(c, s1, 0), node_of(c, s2, 0)} == {"n0", "n1"},
              f"two jobs publishing 7200/tcp run on different nodes: "
              f"{node_of(c, s1, 0)}, {node_of(c, s2, 0)}")
        j3 = c.wait(lambda: (lambda x: x if "7200/tcp" in (x.get("why") or "") else None)(
            c.job(s3)), "the third server waits naming its port", 20) or {}
        check(j3.get("state") == "pending" and "network.publish: 7200/tcp is published by "
              "another task on every node its constraint, nodelist and exclude allow (2)"
              in (j3.get("why") or ""), f"the third waits, saying why: {j3.get('why')}")
        for jid in (s1, s2):
            ip = f"192.168.252.{names.index(node_of(c, jid, 0)) + 1}"
            check(c.wait(lambda: dial(ip, 7200) == "served", "a server answers", 20),
                  f"job {jid}'s 7200/tcp answers at its node {ip}")
        freed = node_of(c, s1, 0)
        c.call("POST", f"/v1/jobs/{s1}/cancel")
        c.wait_job(s3, ("running",), timeout=60)
        check(node_of(c, s3, 0) == freed, f"the third starts on the node the first freed: "
              f"{node_of(c, s3, 0)} (freed {freed})")
        for jid in (s2, s3):
            c.call("POST", f"/v1/jobs/{jid}/cancel")
        for jid in (s1, s2, s3):
            c.wait_job(jid, ("cancelled",), timeout=60)
        # host networking: only where the tenant allows it
        d = c.submit({"tenant": "team-a", "name": "hostnet", "tasks": [{"gpus": 0}],
                      "network": "host", "command": ["/bin/true"]}, expect=400)
        check("network" in json.dumps(d) and "does not allow host networking" in json.dumps(d),
              f"team-a's host-network job is refused naming the field: {d}")
        hj = c.submit({"tenant": "team-c", "name": "hostnet", "tasks": [{"gpus": 0}],
                       "network": "host",
                       "command": ["/usr/sbin/ip", "-4", "-o", "addr", "show", "dev", "u0"]})
        c.wait_job(hj, ("completed",), timeout=60)
        text = "".join(c.output(n.name, hj, 0) for n in c.nodes)
        check("192.168.252." in text, f"team-c's host-network job runs on its node's network: "
              f"{text.strip()[:120]}")
        # the jobs end: nothing is left
        open(stop, "w").close()
        for jid in jobs.values():
            c.wait_job(jid, ("completed",), timeout=60)
        left = c.wait(lambda: node_counts(c) == (0, 0, 0) and not any(
            n in nsn.values() for n in os.listdir("/run/netns")),
            "the ended ranks' namespaces, links, addresses and bindings are all gone", 30)
        print("links, addresses, bindings left:", node_counts(c))
        # dedicated NICs: each GPU's rail NIC moved into the task's namespace, and back
        d = c.submit({"tenant": "team-a", "name": "nics", "tasks": [{"gpus": 0}],
                      "network": {"mode": "host", "nics": "dedicated"},
                      "command": ["/bin/true"]}, expect=400)
        check("network.nics" in json.dumps(d), f"dedicated NICs with host networking are "
              f"refused naming the field: {d}")
        nj = c.submit({"tenant": "team-b", "name": "nics", "network": {"nics": "dedicated"},
                       "tasks": [{"gpus": 2, "gpu_model": "H100-80GB"}],
                       "command": ["/bin/sh", "-c",
                                   "/usr/sbin/ip -o link show; echo hca $NCCL_IB_HCA"]})
        c.wait_job(nj, ("completed",), timeout=60)
        text = "".join(c.output(n.name, nj, 0) for n in c.nodes)
        mine = sorted(l.split(": ")[1].split("@")[0] for l in text.splitlines()
                      if ": rn" in l)
        # its GPUs' rails (NCCL_IB_HCA, from the same map): mlx5_<g> for GPU g
        hca = text.split("hca ")[-1].split()[:1]
        want = sorted("rn" + h.split(":")[0][5:] for h in (hca[0].lstrip("=").split(",")
                                                             if hca else []))
        check(len(mine) == 2 and mine == want,
              f"a dedicated-NIC task holds its 2 GPUs' rail NICs {want}: {mine}")
        # the node's dedicated NICs as CDI 1.1 netDevices, for CDI runtimes
        cdi_path = os.path.join(c.path(c.nodes[0].name), "cdi", "tessera-net.json")
        spec = json.load(open(cdi_path)) if os.path.exists(cdi_path) else {}
        netdevs = sorted(d["containerEdits"]["netDevices"][0]["hostInterfaceName"]
                         for d in spec.get("devices", []))
        check(spec.get("cdiVersion") == "1.1.0" and netdevs == [f"rn{g}" for g in range(8)],
              f"the agent's CDI 1.1 spec lists its 8 rail NICs as netDevices: {netdevs}")
        back = c.wait(lambda: all(
            ap.sh("nsenter", f"--net=/run/netns/{TAG}-n{i}", "ip", "-o", "link", "show").stdout
            .count(": rn") == 16 for i in range(NODES)),
            "the ended task's NICs are back in their node's namespace", 30)
        del back
        del got, left
    finally:
        c.stop()
        for n in nsn.values():  # what a failed run left (the agents remove it otherwise)
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        unfabric()
    finish(c.tmp, c.logs)
    c.cleanup()
    return 0


def node_of(c, jid, rank):
    j = c.job(jid)
    pl = j.get("placement") or []
    return pl[rank]["node"] if rank < len(pl) else c.nodes[0].name


if __name__ == "__main__":
    sys.exit(main())
