#!/usr/bin/env python3
"""Published ports never take what a node serves itself (docs/network.md,
"Published ports"): a real tesserad with `network: {isolation: tenant,
publish_ports: 30000-30999}` and two real tessera-agents, each in its own
network namespace ("node") bridged to the host, where tesserad listens.

Checks: a port outside network.publish_ports (22/tcp, ssh) and the VXLAN
port (4789/udp) are refused at submission, naming network.publish[i]; on
n0, where a stand-in for the node's own service listens on 30022/tcp and
one is bound on 30053/udp, and the agent's --metrics-listen is 30555/tcp,
a job publishing any of them fails at launch saying what holds it, no
mapping is left, and the node's own service still answers at its port; a
job publishing a free port of the range runs and is reached at its node
from publish_from. The configuration refuses a tenant range of loopback,
multicast, link-local or reserved addresses and a bad publish_ports,
naming the field; a service for a tenant that is not one stops tesserad,
and a tenants replacement (PUT /v1/tenants) that would remove a tenant a
service names is refused (409), the tenants left as they were.

usage: publish_test.py TESSERAD AGENT CLI NVML FIXTURES   (root; 77 = skipped)
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))

sys.path.insert(0, HERE)

import all_pairs_test as ap  # noqa: E402  (sweep_namespaces)
from cluster import Cluster, Node  # noqa: E402
from harness import check, finish, http_call, with_root  # noqa: E402

TAG = f"pp{os.getpid() % 100000}"
BRIDGE = f"{TAG}br"
NET = "192.168.249"
GW = f"{NET}.254"
NODES = 2
TENANTS_YAML = """tenants:
  org:
    teams:
      team-a: {}
      team-b: {}
"""
SERVICE_PORT = 20000 + os.getpid() % 20000
CONFIG = ("scheduler: {interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 3s, "
          "backoff: 1s}\nnetwork: {isolation: tenant, range: 10.96.0.0/12, tenant_prefix: 20, "
          f"services: [{{to: \"{GW}:{SERVICE_PORT}/tcp\", tenants: [team-b]}}], "
          f"publish_from: [{GW}/32], publish_ports: 30000-30999}}\n")
SERVER = ("import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
          "s.bind(('0.0.0.0',int(sys.argv[1])));s.listen(8)\nwhile True:\n"
          " c,_=s.accept();c.sendall(sys.argv[2].encode());c.close()\n")
UDP_SERVER = ("import socket,sys\nu=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
              "u.bind(('0.0.0.0',int(sys.argv[1])))\nwhile True:\n"
              " d,a=u.recvfrom(64);u.sendto(sys.argv[2].encode(),a)\n")


def sh(*args, check_rc=True):
    return subprocess.run(list(args), check=check_rc, timeout=30, capture_output=True, text=True)


def nsx(i, *args, check_rc=True):
    return sh("nsenter", f"--net=/run/netns/{TAG}-n{i}", *args, check_rc=check_rc)


class NetCluster(Cluster):
    """The harness's cluster with tesserad on the host bridge and each agent
    in its node's network namespace; n0's agent serves metrics on 30555."""

    def __init__(self, bins):
        nodes = [Node(f"n{i}", "l1") for i in range(NODES)]
        super().__init__(bins, nodes=nodes, tenants=TENANTS_YAML, config=CONFIG, name="publish")
        self.url = f"http://{GW}:{self.port}"

    def write(self, name, text):
        if name == "tesserad.yaml":
            text = text.replace("listen: 127.0.0.1:", f"listen: {GW}:")
        super().write(name, text)

    def _spawn(self, name, args, env=None):
        if name.startswith("n") and name[1:].isdigit():
            i = int(name[1:])
            args = ["nsenter", f"--net=/run/netns/{TAG}-{name}", *args,
                    "--net-addr", f"{NET}.{i + 1}"]
            if i == 0:
                args += ["--metrics-listen", f"{NET}.1:30555"]
        super()._spawn(name, args, env)


def fabric():
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "addr", "add", f"{GW}/24", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    for i in range(NODES):
        sh("ip", "netns", "add", f"{TAG}-n{i}")
        sh("ip", "link", "add", f"{TAG}h{i}", "type", "veth", "peer", "name", "u0", "netns",
           f"{TAG}-n{i}")
        sh("ip", "link", "set", f"{TAG}h{i}", "master", BRIDGE, "up")
        for cmd in (["ip", "addr", "add", f"{NET}.{i + 1}/24", "dev", "u0"],
                    ["ip", "link", "set", "u0", "up"], ["ip", "link", "set", "lo", "up"],
                    ["sysctl", "-qw", "net.ipv4.ip_forward=1"],
                    ["ip", "route", "add", "default", "via", GW]):
            nsx(i, *cmd)


def unfabric():
    for n in os.listdir("/run/netns") if os.path.isdir("/run/netns") else ():
        if n.startswith(TAG):
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)


def dial(addr, port, udp=False):
    try:
        if udp:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.settimeout(2)
            u.sendto(b"x", (addr, port))
            return u.recvfrom(64)[0].decode()
        conn = socket.create_connection((addr, port), timeout=2)
        conn.settimeout(2)
        return conn.recv(64).decode()
    except OSError:
        return "closed"


def bad_configs(tesserad):
    """A tenant range no task network can be, a bad publish_ports, and a
    service for a tenant that is not one stop tesserad naming the field."""
    d = tempfile.mkdtemp(prefix="tessera-pubcfg-")
    try:
        with open(os.path.join(d, "cluster.yaml"), "w") as f:
            f.write("nodes:\n  - {name: a, class: c}\nnode_classes:\n"
                    "  c: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 512000}\n")
        with open(os.path.join(d, "tenants.yaml"), "w") as f:
            f.write("tenants:\n  t: {}\n  team-a: {}\n")
        for net, want in (
                ("{range: 127.0.0.0/8}", "network.range: 127.0.0.0/8 overlaps 127.0.0.0/8, loopback"),
                ("{range: 224.0.0.0/8}", "network.range: 224.0.0.0/8 overlaps 224.0.0.0/4, multicast"),
                ("{range: 0.0.0.0/8}", "network.range: 0.0.0.0/8 overlaps 0.0.0.0/8"),
                ("{range: 169.254.0.0/16, tenant_prefix: 24}",
                 "network.range: 169.254.0.0/16 overlaps 169.254.0.0/16, link-local"),
                ("{range: 240.0.0.0/12}", "network.range: 240.0.0.0/12 overlaps 240.0.0.0/4"),
                ("{publish_ports: 32767-30000}",
                 "network.publish_ports: must be a port range LO-HI within 1..65535"),
                ("{publish_ports: 0-100}", "network.publish_ports: must be a port range"),
                ("{publish_ports: [30000, 32767]}", "network.publish_ports: must be a port range"),
                ("{isolation: tenant, services: [{to: '1.2.3.4:80/tcp', tenants: [team-a, team-z]}]}",
                 "network.services[0].tenants[1]: \"team-z\" is no tenant")):
            with open(os.path.join(d, "t.yaml"), "w") as f:
                f.write(f"listen: 127.0.0.1:{20000 + (os.getpid() + 7) % 20000}\n"
                        f"cluster: cluster.yaml\ntenants: tenants.yaml\nstate_dir: st\n"
                        f"network: {net}\n")
            try:
                p = subprocess.run([tesserad, "--config", os.path.join(d, "t.yaml")],
                                   capture_output=True, text=True, timeout=20)
                rc, err = p.returncode, p.stderr
            except subprocess.TimeoutExpired:
                rc, err = 0, "(still running after 20 s: accepted)"
            check(rc != 0 and want in err, f"network: {net} is refused: {want} ({err.strip()[-240:]})")
            shutil.rmtree(os.path.join(d, "st"), ignore_errors=True)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def refused_at_launch(c, port, what):
    """A job publishing port on n0 fails at launch saying what holds it."""
    jid = c.submit({"tenant": "team-a", "name": "takeover", "tasks": [{"gpus": 0}],
                    "nodelist": "n0", "network": {"publish": [port]},
                    "command": ["/usr/bin/python3", "-c", SERVER, "30022", "TASK"]})
    j = c.wait_job(jid, ("failed",), timeout=20) or c.job(jid)  # "running" comes first
    why = j.get("why") or ""
    check(j.get("state") == "failed" and j.get("reason") == "launch" and
          f"net.publish[0]: {port}: {what}" in why,
          f"a job publishing {port} on n0 fails at launch naming it: {j.get('state')} "
          f"{j.get('reason')} {why}")
    elems = nsx(0, "nft", "list", "ruleset", check_rc=False).stdout
    check(f"{port.split('/')[0]} :" not in elems and f". {port.split('/')[0]} " not in elems,
          f"no mapping of {port} is left on n0")


def scenario(c):
    # outside the range, and the VXLAN port: refused at submission
    d = c.submit({"tenant": "team-a", "name": "ssh", "tasks": [{"gpus": 0}],
                  "network": {"publish": ["30100/tcp", "22/tcp"]}, "command": ["/bin/true"]},
                 expect=400)
    check("network.publish[1]" in json.dumps(d) and "22/tcp is outside the ports this cluster "
          "lets jobs publish, 30000-30999" in json.dumps(d),
          f"22/tcp is refused at submission naming network.publish[1]: {d}")
    d = c.submit({"tenant": "team-a", "name": "vxlan", "tasks": [{"gpus": 0}],
                  "network": {"publish": ["4789/udp"]}, "command": ["/bin/true"]}, expect=400)
    check("network.publish[0]" in json.dumps(d) and "VXLAN" in json.dumps(d),
          f"4789/udp is refused at submission naming network.publish[0]: {d}")
    # the node's own services on n0: TCP 30022, UDP 30053, the agent's metrics on 30555
    own = [subprocess.Popen(["nsenter", f"--net=/run/netns/{TAG}-n0", sys.executable, "-c", src,
                             port, "NODE"]) for src, port in ((SERVER, "30022"),
                                                              (UDP_SERVER, "30053"))]
    try:
        at = f"{NET}.1"
        check(c.wait(lambda: dial(at, 30022) == "NODE" and dial(at, 30053, udp=True) == "NODE",
                     "the node's own services answer", 10),
              "n0's own 30022/tcp and 30053/udp answer before")
        refused_at_launch(c, "30022/tcp", "this node serves it itself (tcp 0.0.0.0:30022 listening)")
        refused_at_launch(c, "30053/udp", "this node serves it itself (udp 0.0.0.0:30053 bound)")
        refused_at_launch(c, "30555/tcp", "this node's agent serves it (--metrics-listen")
        check(dial(at, 30022) == "NODE" and dial(at, 30053, udp=True) == "NODE",
              "n0's own 30022/tcp and 30053/udp still answer after the refused jobs")
        # a free port of the range: published, reached at the node from publish_from
        jid = c.submit({"tenant": "team-a", "name": "serve", "tasks": [{"gpus": 0}],
                        "nodelist": "n0", "network": {"publish": ["30100/tcp"]},
                        "command": ["/usr/bin/python3", "-c", SERVER, "30100", "TASK"]})
        c.wait_job(jid, ("running",), timeout=60)
        check(c.wait(lambda: dial(at, 30100) == "TASK", "the published port answers", 20),
              "a job's published 30100/tcp answers at n0 from publish_from")
        check(dial(at, 30022) == "NODE", "n0's own 30022/tcp still answers beside it")
        c.call("POST", f"/v1/jobs/{jid}/cancel")
        c.wait_job(jid, ("cancelled",), timeout=60)
    finally:
        for p in own:
            p.kill()
            p.wait()
    # a tenant a service names may not go
    st, d = http_call(c.url, "PUT", "/v1/tenants", c.admin,
                      raw=with_root("tenants:\n  org:\n    teams:\n      team-a: {}\n").encode(),
                      headers={"Content-Type": "application/yaml"})
    check(st == 409 and "would leave tesserad.yaml's network.services[0].tenants[0]: \\\"team-b\\\" "
          "is no tenant" in json.dumps(d),
          f"a tenants replacement removing team-b, which a service names, is refused: {st} {d}")
    st, d = c.call("GET", "/v1/tenants")
    names = {t.get("name") for t in (d.get("tenants") or [])} if st == 200 else set()
    check("team-b" in names, f"the tenants are left as they were: {sorted(names)}")


def main():
    bad_configs(sys.argv[1])
    if os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("nsenter"):
        print("skip: needs root, nft and nsenter")
        finish(tempfile.gettempdir(), [])
        return 77
    bins = dict(zip(("tesserad", "agent", "cli", "nvml", "fixtures"), sys.argv[1:6]))
    c = NetCluster(bins)
    try:
        fabric()
        if c.start():
            scenario(c)
    finally:
        c.stop()
        ap.sweep_namespaces([c.path(f"n{i}") for i in range(NODES)])
        unfabric()
    finish(c.tmp, c.logs)
    c.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
