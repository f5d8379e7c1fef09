#!/usr/bin/env python3
"""All pairs across tenants on 4 namespace-nodes (docs/network.md).

Four "nodes", each a network namespace with an underlay address on a switch
(a bridge in a fifth namespace), each set up by the agent's network module
(netns_tool, the same code tessera-agent runs) in its own namespace with its
own state folder. 3 tenants x 4 tasks, rank r of each tenant on node r;
each tenant its own /24 block as the controller gives them, so a
cross-tenant packet goes to the tenant's gateway (a macvlan on its VXLAN on each node) and
only the policy stops it being routed on. Checks: every intra-tenant pair
connects over TCP, UDP and ICMP, no cross-tenant pair does; a spoofed
source address, an IPv6 flow and a broadcast do not cross; VXLAN
datagrams forged by an unprivileged process of a node (tenant 1's VNI, to
its own and another node's VXLAN port) reach no task; a gloo
rendezvous (torch.distributed) among a tenant's 4 ranks works over the
overlay when /usr/bin/python3 has torch; teardown leaves nothing (counted),
also after the agent's state is abandoned as by kill -9 and a restarted
agent reconciles. Everything made is removed even on failure.

usage: all_pairs_test.py NETNS_TOOL     (root; exit 77 = skipped)
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

TOOL = sys.argv[1]
NODES, TENANTS = 4, 3
VNI_BASE = 4100
TAG = f"ap{os.getpid() % 100000}"
SWITCH = f"{TAG}-sw"
PROBE_TIMEOUT_S = 0.7
RETRY_TIMEOUT_S = 3.0
DEADLINE_S = 200

SERVER = r"""
import socket, sys, threading
ident = sys.argv[1]
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind(("0.0.0.0", 7000)); t.listen(64)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
u.bind(("0.0.0.0", 7001))
log = open(sys.argv[2], "a", buffering=1)
def tcp():
    while True:
        c, _ = t.accept()
        try:
            c.sendall(ident.encode())
        finally:
            c.close()
def udp():
    while True:
        d, a = u.recvfrom(512)
        log.write(f"{a[0]} {d.decode(errors='replace')}\n")
        u.sendto(ident.encode(), a)
threading.Thread(target=tcp, daemon=True).start()
print("ready", flush=True)
udp()
"""

PROBER = r"""
import json, socket, subprocess, sys, threading
me, timeout = sys.argv[1], float(sys.argv[2])
targets = json.loads(sys.argv[3])
out = {}
def probe(ident, addr):
    r = {"tcp": None, "udp": None, "icmp": False}
    try:
        s = socket.create_connection((addr, 7000), timeout=timeout)
        s.settimeout(timeout)
        r["tcp"] = s.recv(64).decode()
        s.close()
    except OSError:
        pass
    try:
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.settimeout(timeout)
        u.sendto(("probe " + me).encode(), (addr, 7001))
        r["udp"] = u.recvfrom(64)[0].decode()
        u.close()
    except OSError:
        pass
    p = subprocess.run(["ping", "-c", "1", "-W", "1", addr], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    r["icmp"] = p.returncode == 0
    out[ident] = r
ts = [threading.Thread(target=probe, args=(i, a)) for i, a in targets.items()]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps(out))
"""

# a forged gratuitous ARP: "IP (argv[1]) is at my MAC", to everyone on eth0
ARP_SPOOF = r"""
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW); s.bind(("eth0", 0))
mac = s.getsockname()[4]
ip = socket.inet_aton(sys.argv[1])
bcast = b"\xff" * 6
arp = b"\x00\x01\x08\x00\x06\x04\x00\x02" + mac + ip + bcast + ip
for _ in range(3):
    try:
        s.send(bcast + mac + b"\x08\x06" + arp)
    except OSError as e:  # refused at the sender (its own table): as good as dropped
        print("forged ARP refused:", e)
"""

# a VXLAN datagram built by hand (tenant 1's VNI, an IPv4/UDP frame to its
# ranks' port 7001), sent from a node's own namespace as an unprivileged
# user to each VXLAN port given (a host-network task could do this)
INJECT = r"""
import socket, struct, sys
vni, src_ip = int(sys.argv[1]), sys.argv[2]
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff)
    return ~(s + (s >> 16)) & 0xffff
def mac(ip):
    return bytes([2, 0]) + socket.inet_aton(ip)
body = b"injected"
udp = struct.pack("!HHHH", 7777, 7001, 8 + len(body), 0) + body
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for arg in sys.argv[3:]:
    node, dst_ip = arg.split("=")
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0x4000, 64, 17, 0,
                     socket.inet_aton(src_ip), socket.inet_aton(dst_ip))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    frame = mac(dst_ip) + mac(src_ip) + b"\x08\x00" + ip + udp
    try:
        s.sendto(struct.pack("!II", 0x08000000, vni << 8) + frame, (node, 4789))
        print("sent")
    except PermissionError:  # the node's output chain drops it
        print("refused")
"""

# who has the gateway's address: a task's ARP request floods the overlay to
# every node of its tenant; the answers it gets within half a second, counted
ARP_WHO = r"""
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0806)); s.bind(("eth0", 0))
mac, me, gw = s.getsockname()[4], socket.inet_aton(sys.argv[1]), socket.inet_aton(sys.argv[2])
s.send(b"\xff" * 6 + mac + b"\x08\x06" + b"\x00\x01\x08\x00\x06\x04\x00\x01" + mac + me +
       b"\x00" * 6 + gw)
s.settimeout(0.1)
answers, end = 0, time.time() + 0.5
while time.time() < end:
    try:
        f = s.recv(128)
    except socket.timeout:
        continue
    answers += f[20:22] == b"\x00\x02" and f[28:32] == gw
print(answers)
"""

GANG = r"""
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                        timeout=__import__("datetime").timedelta(seconds=30))
x = torch.tensor([float(os.environ["RANK"]) + 1])
dist.all_reduce(x)
print("sum", int(x.item()), flush=True)
"""


def sh(*args, check=True, timeout=30, **kw):
    return subprocess.run(list(args), check=check, timeout=timeout, capture_output=True,
                          text=True, **kw)


def nsx(ns, *args, **kw):
    """args in ns's network namespace only: nsenter, not `ip netns exec`,
    whose private mount namespace would hide the namespaces made inside."""
    return sh("nsenter", f"--net=/run/netns/{ns}", *args, **kw)


def node_ns(i):
    return f"{TAG}-n{i}"


def under(i):
    return f"192.168.251.{i + 1}"


def task_id(k, r):
    return f"{TAG}t{k}r{r}"


STATES = []  # each node's state folder (main), whose tag names its tasks' namespaces


def ns_name(state_dir, tid):
    """A task's namespace as the agent names it (netns.c agent_net_ns_name):
    ts-<8 hex of the FNV-1a of its state folder's real path>-<task id>."""
    h = 2166136261
    for b in os.path.realpath(state_dir).encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    return f"ts-{h:08x}-{tid}"


def sweep_namespaces(state_dirs):
    """Removes what a failed run left of the agents' namespaces (their tasks'
    ts-<tag>-*, their fabric tsf-<tag>) for the agents of state_dirs."""
    tags = [ns_name(d, "")[3:11] for d in state_dirs]
    for n in os.listdir("/run/netns") if os.path.isdir("/run/netns") else []:
        if any(n.startswith(f"ts-{t}-") or n == f"tsf-{t}" for t in tags):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)


def task_ns(k, r):
    """Task (k, r)'s namespace: rank r is on node r."""
    return ns_name(STATES[r], task_id(k, r))


def mine(n):
    """Whether a namespace name is one of this module's tasks'."""
    return n.startswith("ts-") and n[12:].startswith(TAG + "t")


def task_addr(k, r):
    return f"10.70.{k}.{r + 2}"


class Fail(Exception):
    pass


# the agent's links: t<tag4>v|b|x|g... (and ts[vbx]... of agents before per-agent names)
AGENT_LINK = re.compile(r"^(t[0-9a-f]{4}[vbxg]|ts[vbx])[0-9a-f]")


def fabrics_of(ns):
    """The agents' fabric namespaces (tsf-<tag>: their tenants' bridges,
    VXLANs and the tasks' veths' host ends) serving node namespace ns: those
    with a link (a gateway's fabric end, a VXLAN) whose other side is in ns."""
    found = []
    for f in sorted(os.listdir("/run/netns")):
        if f.startswith("tsf-"):
            out = sh("ip", "-n", f, "-o", "-d", "link", "show", check=False).stdout
            if re.search(rf"link-netns {re.escape(ns)}( |$)", out, re.M):
                found.append(f)
    return found


def net_of(ns):
    """In namespace ns: the agents' links, the addresses on them, and the
    address bindings (bound4 elements) of every agent's bridge table."""
    out = nsx(ns, "ip", "-o", "link", "show").stdout
    ours = {l.split(": ")[1].split("@")[0] for l in out.splitlines()}
    ours = {n for n in ours if AGENT_LINK.match(n)}
    out = nsx(ns, "ip", "-o", "addr", "show").stdout
    addrs = sum(1 for l in out.splitlines() if l.split()[1] in ours)
    js = nsx(ns, "nft", "-j", "list", "sets", "bridge", check=False).stdout
    elems = 0
    for o in json.loads(js)["nftables"] if js else []:
        st = o.get("set")
        if st and st["table"].startswith("tessera") and st["name"] == "bound4":
            elems += len(st.get("elem", []))
    return len(ours), addrs, elems


def node_net(ns):
    """net_of the node namespace ns and of its agents' fabric namespaces."""
    links, addrs, elems = net_of(ns)
    for f in fabrics_of(ns):
        n_links, n_addrs, n_elems = net_of(f)
        links, addrs, elems = links + n_links, addrs + n_addrs, elems + n_elems
    return links, addrs, elems


def counts(state_dirs):
    """What the module made: task namespaces, tenant links, the addresses on
    them, bindings."""
    nss = [n for n in os.listdir("/run/netns") if mine(n)]
    links = addrs = elems = 0
    # a task's binding: its own table in its namespace (what its eth0 may send)
    for n in nss:
        js = nsx(n, "nft", "-j", "list", "tables", "netdev", check=False).stdout
        elems += sum(1 for o in (json.loads(js)["nftables"] if js else [])
                     if o.get("table", {}).get("name", "").startswith("tessera"))
    for i in range(NODES):
        n_links, n_addrs, n_elems = node_net(node_ns(i))
        links, addrs, elems = links + n_links, addrs + n_addrs, elems + n_elems
    files = sum(len(os.listdir(os.path.join(d, "net"))) for d in state_dirs
                if os.path.isdir(os.path.join(d, "net")))
    fabrics = sum(len(fabrics_of(node_ns(i))) for i in range(NODES))
    return {"namespaces": len(nss), "fabrics": fabrics, "links": links, "addresses": addrs,
            "bindings": elems, "state_files": files}


def make_fabric():
    sh("ip", "netns", "add", SWITCH)
    nsx(SWITCH, "ip", "link", "add", "br0", "type", "bridge")
    nsx(SWITCH, "ip", "link", "set", "br0", "up")
    for i in range(NODES):
        n = node_ns(i)
        sh("ip", "netns", "add", n)
        sh("ip", "link", "add", f"{TAG}u{i}", "type", "veth", "peer", "name", "u0", "netns", n)
        sh("ip", "link", "set", f"{TAG}u{i}", "netns", SWITCH)
        nsx(SWITCH, "ip", "link", "set", f"{TAG}u{i}", "master", "br0", "up")
        nsx(n, "ip", "addr", "add", f"{under(i)}/24", "dev", "u0")
        nsx(n, "ip", "link", "set", "u0", "up")
        nsx(n, "ip", "link", "set", "lo", "up")
        nsx(n, "sysctl", "-qw", "net.ipv4.ip_forward=1")  # published ports are forwarded


# tenant 0's rank 1 (node 1) serves: its TCP 7000 published at node 1's
# address, to node 0's address only
PUBLISHER = (0, 1)


def publish_args(k, r):
    return ("publish=7000/tcp", f"from={under(0)}/32") if (k, r) == PUBLISHER else ()


def setup(state, i, k, r):
    peers = [under(j) for j in range(NODES) if j != i]
    t0 = time.monotonic()
    nsx(node_ns(i), TOOL, "setup", state, task_id(k, r), str(VNI_BASE + k), task_addr(k, r),
        "24", under(i), *publish_args(k, r), *peers)
    return (time.monotonic() - t0) * 1000


def teardown_all(states):
    for i in range(NODES):
        nsx(node_ns(i), TOOL, "start", states[i], check=False)


def cleanup(procs, tmp):
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    fabrics = {"tsf-" + ns_name(d, "")[3:11] for d in STATES}  # each node agent's
    for n in os.listdir("/run/netns"):
        if n.startswith(TAG) or mine(n) or n in fabrics:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
    shutil.rmtree(tmp, ignore_errors=True)


def main():
    if os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("ip") \
            or not shutil.which("ping"):
        print("skip: needs root, ip, nft and ping")
        return 77
    start = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="tessera-net-")
    states = [os.path.join(tmp, f"node{i}") for i in range(NODES)]
    STATES[:] = states
    procs = []
    failures = []
    try:
        make_fabric()
        for i in range(NODES):
            os.makedirs(states[i])
            nsx(node_ns(i), TOOL, "start", states[i])
        before = counts(states)
        ms = [setup(states[r], r, k, r) for k in range(TENANTS) for r in range(NODES)]
        print(f"setup (each including its exec by the test): max {max(ms):.1f} ms")
        made = counts(states)
        print("made:", made)
        # each tenant's gateway on each node holds its address: a macvlan on
        # the tenant's VXLAN in the node's fabric; the tasks' macvlans are
        # only in their own namespaces (eth0), each with its own table
        want = {"namespaces": 12, "fabrics": NODES, "links": 2 * TENANTS * NODES,
                "addresses": TENANTS * NODES, "bindings": 12, "state_files": 12}
        if made != want:
            failures.append(f"made {made}, want {want}")
        # the fabric bridges without br_netfilter, whatever the node's setting
        if os.path.exists("/proc/sys/net/bridge/bridge-nf-call-iptables"):
            for i in range(NODES):
                for f in fabrics_of(node_ns(i)):
                    v = nsx(f, "sysctl", "-n", "net.bridge.bridge-nf-call-iptables").stdout.strip()
                    if v != "0":
                        failures.append(f"fabric {f}: bridge-nf-call-iptables {v}, want 0")
        # servers
        logs = {}
        for k in range(TENANTS):
            for r in range(NODES):
                logs[(k, r)] = os.path.join(tmp, f"udp-{k}-{r}.log")
                p = subprocess.Popen(["nsenter", "--net=/run/netns/" + task_ns(k, r), sys.executable,
                                      "-c", SERVER, f"{k}/{r}", logs[(k, r)]],
                                     stdout=subprocess.PIPE, text=True)
                procs.append(p)
                if p.stdout.readline().strip() != "ready":
                    raise Fail(f"server {k}/{r} did not start")
        # all pairs
        intra = cross = intra_ok = cross_leak = retried = 0
        for k in range(TENANTS):
            for r in range(NODES):
                targets = {f"{k2}/{r2}": task_addr(k2, r2) for k2 in range(TENANTS)
                           for r2 in range(NODES) if (k2, r2) != (k, r)}
                out = json.loads(nsx(task_ns(k, r), sys.executable, "-c", PROBER,
                                     f"{k}/{r}", str(PROBE_TIMEOUT_S), json.dumps(targets),
                                     timeout=60).stdout)
                # a peer of its own tenant that missed (first contact on a loaded
                # machine: ARP and the VXLAN's flood) is asked once more, slower
                missed = {i: targets[i] for i, res in out.items() if i.split("/")[0] == str(k)
                          and not (res["tcp"] == i and res["udp"] == i and res["icmp"])}
                if missed:
                    again = json.loads(nsx(task_ns(k, r), sys.executable, "-c", PROBER,
                                           f"{k}/{r}", str(RETRY_TIMEOUT_S), json.dumps(missed),
                                           timeout=60).stdout)
                    out.update(again)
                    retried += len(missed)
                for ident, res in out.items():
                    same = ident.split("/")[0] == str(k)
                    for proto in ("tcp", "udp", "icmp"):
                        ok = res[proto] == ident if proto != "icmp" else res[proto]
                        if same:
                            intra += 1
                            intra_ok += bool(ok)
                            if not ok:
                                failures.append(f"{k}/{r} -> {ident} {proto}: no delivery")
                        else:
                            cross += 1
                            if res[proto]:
                                cross_leak += 1
                                failures.append(f"{k}/{r} -> {ident} {proto}: CROSSED")
        print(f"intra-tenant: {intra_ok}/{intra} delivered ({retried} peers asked twice); "
              f"cross-tenant: {cross_leak}/{cross} delivered")
        # a spoofed source (another tenant's and a same-tenant peer's address),
        # a broadcast and IPv6 from tenant 0's rank 0
        src = task_ns(0, 0)
        nsx(src, "ip", "addr", "add", f"{task_addr(1, 0)}/32", "dev", "eth0")
        nsx(src, "ip", "addr", "add", f"{task_addr(0, 3)}/32", "dev", "eth0")
        spoof = ("import socket,sys\nfor a,d in [(sys.argv[1],sys.argv[2]),(sys.argv[3],sys.argv[4])]:\n"
                 " s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind((a,0))\n"
                 " s.sendto(b'spoofed',(d,7001))\n"
                 "b=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
                 "b.setsockopt(socket.SOL_SOCKET,socket.SO_BROADCAST,1)\n"
                 "b.sendto(b'broadcast',('10.70.0.255',7001))\n")
        nsx(src, sys.executable, "-c", spoof, task_addr(1, 0), task_addr(1, 1), task_addr(0, 3),
            task_addr(0, 1))
        time.sleep(0.5)
        for (k, r), path in logs.items():
            text = open(path).read() if os.path.exists(path) else ""
            if "spoofed" in text:
                failures.append(f"a spoofed datagram reached {k}/{r}")
            if "broadcast" in text and k != 0:
                failures.append(f"tenant 0's broadcast reached {k}/{r}")
        bcast = sum("broadcast" in open(p).read() for (k, r), p in logs.items()
                    if k == 0 and r != 0 and os.path.exists(p))
        if bcast != 3:
            failures.append(f"tenant 0's broadcast reached {bcast}/3 of its own ranks")
        print(f"spoofed datagrams delivered: 0 checked; tenant 0's broadcast reached "
              f"{bcast}/3 of its peers")
        # a process of node 0 that is not root (a host-network task) sends VXLAN
        # datagrams of tenant 1's VNI to node 1's and its own node's VXLAN port
        sends = nsx(node_ns(0), "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                    "/usr/bin/python3", "-c", INJECT, str(VNI_BASE + 1), task_addr(1, 2),
                    f"{under(1)}={task_addr(1, 1)}", f"{under(0)}={task_addr(1, 0)}").stdout
        time.sleep(0.5)
        injected = [f"{k}/{r}" for (k, r), path in logs.items()
                    if os.path.exists(path) and "injected" in open(path).read()]
        print(f"VXLAN datagrams a node's unprivileged process forged, delivered: "
              f"{len(injected)} (want 0) {injected}; at the sender: {sends.split()}")
        if injected:
            failures.append(f"a forged VXLAN datagram reached {injected}")
        # ARP spoofing: rank 0 claims rank 1's address; rank 2 (another node)
        # must keep rank 1's MAC for it
        victim_mac = nsx(task_ns(0, 2), "ip", "neigh", "show", task_addr(0, 1)).stdout
        nsx(src, sys.executable, "-c", ARP_SPOOF, task_addr(0, 1))
        time.sleep(0.3)
        after_mac = nsx(task_ns(0, 2), "ip", "neigh", "show", task_addr(0, 1)).stdout
        want_mac = "02:00:0a:46:00:03"  # task_addr(0, 1) = 10.70.0.3
        print(f"ARP entry for rank 1 at rank 2, before/after rank 0's forged ARP: "
              f"{victim_mac.split()[4:5]} / {after_mac.split()[4:5]}")
        if want_mac not in after_mac or want_mac not in victim_mac:
            failures.append(f"ARP spoofing changed rank 2's entry: {after_mac.strip()}")
        # every node's gateway has one MAC: only this node's may answer
        gw_answers = nsx(src, sys.executable, "-c", ARP_WHO, task_addr(0, 0),
                         "10.70.0.254").stdout.strip()
        print(f"answers to rank 0's ARP for its gateway: {gw_answers} (want 1: its own node's)")
        if gw_answers != "1":
            failures.append(f"{gw_answers} gateways answered rank 0's ARP, want 1")
        nsx(src, "ip", "addr", "del", f"{task_addr(1, 0)}/32", "dev", "eth0")
        nsx(src, "ip", "addr", "del", f"{task_addr(0, 3)}/32", "dev", "eth0")
        for r in (0, 1):
            nsx(task_ns(0, r), "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=0",
                check=False)
            nsx(task_ns(0, r), "ip", "-6", "addr", "add", f"fd00:70::{r + 1}/64",
                "dev", "eth0", "nodad", check=False)
        v6 = nsx(task_ns(0, 0), "ping", "-6", "-c", "1", "-W", "1", "fd00:70::2",
                 check=False).returncode == 0
        print(f"IPv6 between two ranks of one tenant: {'DELIVERED' if v6 else 'dropped'}")
        if v6:
            failures.append("IPv6 crossed the overlay")
        # a gloo rendezvous of tenant 1's 4 ranks, MASTER_ADDR its rank 0's address
        gang_ok = None
        if subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed as d; "
                           "assert d.is_gloo_available()"], capture_output=True).returncode == 0:
            env = dict(os.environ, MASTER_ADDR=task_addr(1, 0), MASTER_PORT="29555",
                       WORLD_SIZE="4", GLOO_SOCKET_IFNAME="eth0")
            gang = [subprocess.Popen(["nsenter", "--net=/run/netns/" + task_ns(1, r),
                                      "/usr/bin/python3", "-c", GANG],
                                     env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True) for r in range(NODES)]
            procs.extend(gang)
            outs = [g.communicate(timeout=90) for g in gang]
            gang_ok = all("sum 10" in o for o, _ in outs)
            print(f"gloo rendezvous + all_reduce across 4 nodes: {'ok' if gang_ok else 'FAILED'}")
            if not gang_ok:
                failures.append("gloo rendezvous failed: " + " | ".join(e[-300:] for _, e in outs))
        else:
            print("gloo rendezvous: skipped (no torch in /usr/bin/python3)")
        # published port: reachable from node 0's address only, TCP 7000 only
        dial = ("import socket,sys\ntry:\n s=socket.create_connection((sys.argv[1],int(sys.argv[2])),"
                "timeout=1.5);s.settimeout(1.5);print(s.recv(64).decode() or 'empty')\n"
                "except OSError as e:\n print('closed')\n")
        pub = under(1)
        seen = {
            "node 0": nsx(node_ns(0), sys.executable, "-c", dial, pub, "7000").stdout.strip(),
            "node 2": nsx(node_ns(2), sys.executable, "-c", dial, pub, "7000").stdout.strip(),
            "tenant 1's task on node 0": nsx(task_ns(1, 0), sys.executable, "-c", dial, pub,
                                             "7000").stdout.strip(),
            "tenant 0's own task on node 0": nsx(task_ns(0, 0), sys.executable, "-c", dial, pub,
                                                 "7000").stdout.strip()}
        print("published 7000/tcp of tenant 0's rank 1, dialled at node 1's address:", seen)
        if seen != {"node 0": "0/1", "node 2": "closed", "tenant 1's task on node 0": "closed",
                    "tenant 0's own task on node 0": "closed"}:
            failures.append(f"published port reached as {seen}, want only from node 0")
        again = nsx(node_ns(1), TOOL, "setup", states[1], "pub2", str(VNI_BASE), "10.70.0.40", "24",
                    under(1), "publish=7000/tcp", check=False)
        print("a second task publishing 7000/tcp on node 1:", again.stderr.strip())
        if again.returncode == 0 or "already published on this node by task" not in again.stderr:
            failures.append(f"a second publisher of 7000/tcp was not refused: {again.stderr}")
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        procs.clear()
        # teardown: a normal end for tenant 0, an abandoned agent (kill -9) for
        # the rest: a restarted agent keeps tenant 2's rank tasks and removes 1's
        for r in range(NODES):
            nsx(node_ns(r), TOOL, "teardown", states[r], task_id(0, r))
        left = nsx(node_ns(1), "nft", "-j", "list", "map", "inet",
                   "tessera_" + task_ns(0, 1)[3:11], "published").stdout
        elems = [o["map"].get("elem", []) for o in json.loads(left)["nftables"] if "map" in o]
        if elems != [[]]:
            failures.append(f"the publisher's teardown left its port mapped: {elems}")
        for r in range(NODES):
            out = nsx(node_ns(r), TOOL, "start", states[r], task_id(2, r)).stdout.strip()
            if out != "removed=1":
                failures.append(f"node {r}: restart reconcile said {out!r}, want removed=1")
        mid = counts(states)
        want = {"namespaces": 4, "fabrics": NODES, "links": 2 * NODES, "addresses": NODES,
                "bindings": 4, "state_files": 4}
        print("after restart, tenant 2 kept:", mid)
        if mid != want:
            failures.append(f"after the restart {mid}, want {want}")
        ok = nsx(task_ns(2, 0), "ping", "-c", "1", "-W", "1", task_addr(2, 3),
                 check=False).returncode == 0
        if not ok:
            failures.append("a kept task lost its network in the restart")
        teardown_all(states)
        after = counts(states)
        print("before:", before, "after:", after)
        if after != before or any(after.values()):
            failures.append(f"teardown left {after}")
        if time.monotonic() - start > DEADLINE_S:
            failures.append("over the time bound")
    except (Fail, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", "") or ""
        failures.append(f"{e} {detail}")
    finally:
        cleanup(procs, tmp)
    for f in failures:
        print("FAIL:", f)
    print("all pairs:", "ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
