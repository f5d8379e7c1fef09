#!/usr/bin/env python3
"""Cold start of a gang's image with peer-to-peer pieces against a plain pull
from the registry, on the issue's scaled physics (docs/images.md
"Peer-to-peer"): every node and the registry behind a 100 Mbit/s link
(`tc tbf` on both ends of each veth), a 40 MB image of random content, so
the line-rate bound for one node is 3.2 s as for 10 GB at 25 GbE.

Light mode: one `tessera-agent image-pull` per node namespace, with the
agent's own P2P code (listener, tracker client, piece fetcher, verification,
store and unpack), against a real tesserad (the tracker) on the host and
Debian's docker-registry in a namespace of its own. A rank could exec when
its pull returns: the image is verified and unpacked. Full agents with runc
per namespace do not fit two shared cores at 64 nodes; this drives the same
fetch code.

Printed: per N, last rank ready after the allocation (all pulls started at
once) against the 3.2 s bound, registry egress (the registry veth's own tx
counter) as a multiple of the image's size, bytes from peers, the tracker's
load (tesserad's CPU-seconds, requests answered per second of the run); the plain pull
at the sizes of BASELINE (the same run; others: N x 3.2 s, the line-rate
model, marked so); then the faults at FAULT_N nodes: a peer killed
mid-transfer, the same peer started first and killed as it fetches from
the registry (it holds a grant of the tracker then), a peer powered off
mid-transfer (frozen with SIGSTOP and every packet of its namespace dropped
by nft: its askers' SYNs go unanswered), a peer serving corrupt pieces, the registry restarted mid-transfer, each with the bytes refetched,
the ranks' own share of the registry's egress (the rest is the extra peer's)
and every rank's root checked. Per N, the median node's CPU-seconds are
split into the fetch (until its last blob was verified), the rest (the
unpack and mkfs.erofs) and user space (the rest is the kernel's).

Everything it makes is named p2p*: namespaces p2p-hub, p2p-reg, p2p-n<i>;
bridge p2pbr; veths p2pv*/p2pr*; addresses 10.197.0.0/16. Removed at exit.

Full mode (--full N, with --nvml and --fixtures): a gang of N ranks run
through real agents, one per node namespace (each with --p2p-listen, its
image store, runc), the job submitted to the same tesserad: the last and
the median rank's seconds after the allocation (the job's `started`
event) until its agent learned of the task, its pull's steps, the image
ready, the runtime's start and the task's exec (the rank prints
/proc/uptime, CLOCK_BOOTTIME, at its start). Its agents trace always
(TESSERA_AGENT_IMAGE_TRACE); their logs are kept in /tmp/p2p-full-N.

usage: image_p2p.py BUILD_DIR [--nodes 8,16,32,64] [--baseline 8,16]
                   [--fault-n 8]
                   [--faults killed,killed-origin,poweroff,corrupt,registry]
                   [--full N --nvml LIB --fixtures DIR] [--json OUT]
With P2P_TRACE=1 the pulls trace their steps (TESSERA_AGENT_IMAGE_TRACE:
each piece, the blob's check, its fsync, the unpack, mkfs.erofs, the mount)
and each P2P run prints the median rank's step times; each run's per-node stderr is kept in /tmp/p2p-trace-N-MODE
(a fault's in /tmp/p2p-trace-N-fault-WORDS, with t0: the ranks' start on
CLOCK_MONOTONIC) and the registry's access log in /tmp/p2p-registry.log.
"""
import argparse
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from cluster import Cluster, Node  # noqa: E402
from registry import Registry, free_port  # noqa: E402

RATE = "100mbit"
IMAGE_BYTES = 40 * 1000 * 1000
LINE_S = IMAGE_BYTES * 8 / 100e6          # 3.2 s
HUB, REG = "p2p-hub", "p2p-reg"
REG_ADDR, HOST_ADDR = "10.197.0.2", "10.197.0.1"
REG_PORT, PEER_PORT = 5000, 7070
RUN_TIMEOUT_S = 300
KILL_LEAD_S = 0.5   # killed-origin: the doomed peer starts this much before the ranks
POWER_OFF_RULES = ("table inet p2poff {\n"
                   " chain in { type filter hook input priority -10; policy drop; }\n"
                   " chain out { type filter hook output priority -10; policy drop; }\n}\n")


def sh(*a, check=True, timeout=60):
    return subprocess.run([str(x) for x in a], check=check, timeout=timeout,
                          capture_output=True, text=True)


def proc_cpu_s(pid):
    """CPU-seconds (user + system) of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def softirq_s():
    """The machine's CPU-seconds in softirq so far (the veths, the bridge and
    tbf forward there), all CPUs."""
    with open("/proc/stat") as f:
        v = f.readline().split()
    return int(v[7]) / os.sysconf("SC_CLK_TCK")


def tracker_requests(c):
    """The requests tesserad (the tracker) has answered so far: its
    tessera_http_responses_total, every status class."""
    st, txt = c.call("GET", "/metrics")
    if st != 200 or not isinstance(txt, str):
        return 0
    return sum(int(float(line.split()[-1])) for line in txt.splitlines()
               if line.startswith("tessera_http_responses_total{"))


def ns_of(i):
    return f"p2p-n{i}"


def addr_of(i):
    return f"10.197.{1 + i // 250}.{1 + i % 250}"


def shape(ns, dev):
    """100 Mbit/s out of dev (in namespace ns, or the host's when None)."""
    pre = ["ip", "netns", "exec", ns] if ns else []
    sh(*pre, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate", RATE, "burst",
       "64kb", "latency", "50ms")


def link(ns, dev, peer, addr):
    """A veth from namespace ns (dev, with addr/16) to the hub's bridge
    (peer), shaped on both ends."""
    sh("ip", "link", "add", dev, "netns", ns, "type", "veth", "peer", "name", peer, "netns", HUB)
    sh("ip", "-n", ns, "addr", "add", f"{addr}/16", "dev", dev)
    sh("ip", "-n", ns, "link", "set", dev, "up")
    sh("ip", "-n", ns, "link", "set", "lo", "up")
    sh("ip", "-n", HUB, "link", "set", peer, "master", "p2pbr", "up")
    shape(ns, dev)
    shape(HUB, peer)


NEIGH = "/proc/sys/net/ipv4/neigh/default/gc_thresh"


def neigh_room(n):
    """The kernel's neighbour (ARP) table is one for all namespaces, 1,024
    entries at most by default (gc_thresh3): n nodes that each talk to the
    others, the registry and the host hold about n * (n + 2), 4,224 at 64,
    and past the cap a node's new neighbours fail to resolve ("neighbor
    table overflow!" in dmesg), so its connections to the registry time out
    and its announces to the tracker go unanswered (a 64-node run: 10 to 32
    of the 64 pulls failed their manifest, 2 nodes took the whole image
    from the registry, 5.8x egress). Raised for the run to twice that, the
    values before returned for Net.close to restore."""
    want = 2 * n * (n + 2)
    old = {}
    for k, v in (("3", want), ("2", want // 2)):
        with open(NEIGH + k) as f:
            old[k] = int(f.read())
        if old[k] < v:
            with open(NEIGH + k, "w") as f:
                f.write(f"{v}\n")
    return old


class Net:
    def __init__(self, n):
        self.n = n
        self.made = []
        self.neigh = neigh_room(n + 2)
        sh("ip", "netns", "add", HUB)
        self.made.append(HUB)
        sh("ip", "-n", HUB, "link", "add", "p2pbr", "type", "bridge")
        # the hub is the switch between the nodes: frames it forwards skip
        # iptables (br_netfilter, when some other test loaded it, would run
        # every one of them through the hub's empty rule sets: CPU this
        # machine's two cores would then not give the nodes)
        for fam in ("iptables", "ip6tables", "arptables"):
            sh("ip", "netns", "exec", HUB, "sysctl", "-qw", f"net.bridge.bridge-nf-call-{fam}=0",
               check=False)
        sh("ip", "-n", HUB, "link", "set", "p2pbr", "up")
        # the host (tesserad, the tracker: control traffic, not shaped)
        sh("ip", "link", "add", "p2pvhost", "type", "veth", "peer", "name", "p2prhost", "netns",
           HUB)
        sh("ip", "addr", "add", f"{HOST_ADDR}/16", "dev", "p2pvhost")
        sh("ip", "link", "set", "p2pvhost", "up")
        sh("ip", "-n", HUB, "link", "set", "p2prhost", "master", "p2pbr", "up")
        sh("ip", "netns", "add", REG)
        self.made.append(REG)
        link(REG, "p2pvreg", "p2prreg", REG_ADDR)
        for i in range(n):
            sh("ip", "netns", "add", ns_of(i))
            self.made.append(ns_of(i))
            link(ns_of(i), "p2pv0", f"p2pr{i}", addr_of(i))

    def reg_tx(self):
        out = sh("ip", "-n", REG, "-s", "-j", "link", "show", "dev", "p2pvreg").stdout
        return json.loads(out)[0]["stats64"]["tx"]["bytes"]

    def close(self):
        sh("ip", "link", "del", "p2pvhost", check=False)
        for ns in reversed(self.made):
            sh("ip", "netns", "del", ns, check=False)
        for k, v in sorted(self.neigh.items()):  # 2 back before 3, as they were raised in reverse
            with open(NEIGH + k, "w") as f:
                f.write(f"{v}\n")


class BenchCluster(Cluster):
    """tesserad on every host address: the node namespaces reach it over
    the hub's bridge."""

    def write(self, name, text):
        if name == "tesserad.yaml":
            text = text.replace("listen: 127.0.0.1:", "listen: 0.0.0.0:")
        super().write(name, text)


class RegistryInNs:
    """docker-registry serving in namespace REG; restartable."""

    def __init__(self, work):
        self.work = work
        self.cfg = os.path.join(work, "registry.yml")
        with open(self.cfg, "w") as f:
            f.write(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: "
                    f"{work}/registry\nhttp:\n  addr: {REG_ADDR}:{REG_PORT}\n"
                    "log:\n  level: info\n  accesslog:\n    disabled: false\n")
        self.proc = None
        self.start()

    def start(self):
        log = open(os.path.join(self.work, "registry.log"), "a")
        self.proc = subprocess.Popen(["ip", "netns", "exec", REG, "docker-registry", "serve",
                                      self.cfg], stdout=log, stderr=log)
        for _ in range(100):
            if sh("curl", "-sf", f"http://{REG_ADDR}:{REG_PORT}/v2/", check=False).returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("the registry did not start")

    def restart_after(self, down_s):
        self.proc.kill()
        self.proc.wait()
        time.sleep(down_s)
        self.start()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class FullCluster(BenchCluster):
    """tesserad and one real agent per node namespace (its node's address
    for its peers, the host's for the controller), tracing its steps."""

    def _spawn(self, name, args, env=None):
        if name.startswith("n") and name[1:].isdigit():
            # its network namespace only: `ip netns exec` would give it a
            # sysfs of its own, without the cgroup hierarchy runc needs
            args = ["nsenter", f"--net=/run/netns/{ns_of(int(name[1:]))}"] + args
            env = dict(env or os.environ, TESSERA_AGENT_IMAGE_TRACE="1")
        super()._spawn(name, args, env)


# what a full-mode agent's trace says, in order: (name, the line's start)
FULL_STEPS = (("learned", "task j"), ("manifest", "manifest"),
              ("all held", "pieces all held"), ("mounted", "renamed and mounted"),
              ("image ready", None), ("bundle ready", None), ("runtime started", None))


def boottime_minus_monotonic():
    return time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()


def full_gang(b, n, ref, result):
    """A gang of n ranks, one a node, through real agents (--full)."""
    port = free_port()
    url = f"http://{HOST_ADDR}:{port}"
    args = ["--plain-http-registries", f"{REG_ADDR}:{REG_PORT}"]
    nodes = [Node(f"n{i}", args=args + ["--p2p-listen", f"{addr_of(i)}:{PEER_PORT}"],
                  server=url) for i in range(n)]
    gpus = 8 * n  # the team's guarantee holds the whole gang
    tenants = (f"tenants:\n  org:\n    guaranteed: {{gpu: {{H100-80GB: {gpus}}}}}\n"
               f"    teams:\n      team-a: {{guaranteed: {{gpu: {{H100-80GB: {gpus}}}}}}}\n")
    c = FullCluster({"tesserad": b["tesserad"], "agent": b["agent"], "nvml": b["nvml"],
                     "fixtures": b["fixtures"]}, nodes=nodes, tenants=tenants, name="p2p-full",
                    port=port, config="scheduler: {interval: 0.2s, grace: 2s}\n")
    try:
        if not c.start():
            print(f"{n:>4} {'full':>9} the agents did not come up", flush=True)
            return
        jid = c.submit({"tenant": "team-a", "name": "p2p-full", "image": ref, "command": ["/bin/sh", "-c", "cat /proc/uptime"],
                        "tasks": [{"count": n, "gpus": 8, "cpu_milli": 1000,
                                   "memory_mib": 1024}], "time_limit": "5m"})
        j = c.wait_job(jid, ("completed", "failed", "cancelled"), RUN_TIMEOUT_S)
        mono_of_wall = time.time() - time.monotonic()
        boot = boottime_minus_monotonic()
        st, ev = c.call("GET", f"/v1/jobs/{jid}/events?limit=1000")
        started = [e["time"] for e in ev.get("events", []) if e.get("kind") == "started"]
        if not j or j.get("state") != "completed" or not started:
            print(f"{n:>4} {'full':>9} the gang did not complete: "
                  f"{j and j.get('state')} {j and j.get('reason')}", flush=True)
            return
        t_alloc = started[0] - mono_of_wall
        per = {name: [] for name, _ in FULL_STEPS}
        per["exec"] = []
        for i in range(n):
            at = {}
            with open(c.path(f"n{i}.log"), errors="replace") as f:
                for line in f:
                    if not line.startswith("image-trace "):
                        continue
                    _, t, ev_ = line.rstrip("\n").split(None, 2)
                    for name, prefix in FULL_STEPS:
                        hit = ev_.endswith(name) if prefix is None else \
                            ev_.startswith(prefix) and (name != "learned" or
                                                         ev_.endswith("learned"))
                        if hit and name not in at:
                            at[name] = float(t) - t_alloc
            rank = None
            for name in os.listdir(c.path(f"n{i}", "logs")):
                if name.startswith(f"j{jid}-r") and name.endswith(".out"):
                    rank = name
            if rank:
                with open(c.path(f"n{i}", "logs", rank)) as f:
                    words = f.read().split()
                if words:
                    at["exec"] = float(words[0]) - boot - t_alloc
            for k, v in at.items():
                per[k].append(v)
        med = {k: sorted(v)[len(v) // 2] for k, v in per.items() if v}
        last = max(per["exec"]) if len(per["exec"]) == n else float("inf")
        print(f"{n:>4} {'full':>9} {last:>12.1f} {last / LINE_S:>8.1f} "
              f"{med.get('exec', float('nan')):>9.1f}   (real agents and runc; "
              f"{len(per['exec'])} of {n} ranks exec'd)", flush=True)
        print(f"{'':>4} {'':>9} the median rank's seconds after the allocation: " +
              ", ".join(f"{k} {v:.2f}" for k, v in med.items()), flush=True)
        result["runs"].append({"n": n, "mode": "full", "last_s": last,
                               "median_s": med.get("exec"), "after_allocation_s": med,
                               "load1": os.getloadavg()[0]})
    finally:
        c.stop()
        keep = f"/tmp/p2p-full-{n}"
        shutil.rmtree(keep, ignore_errors=True)
        os.makedirs(keep)
        for i in range(n):
            if os.path.exists(c.path(f"n{i}.log")):
                shutil.copy(c.path(f"n{i}.log"), keep)
            if os.path.isdir(c.path(f"n{i}", "logs")):
                shutil.copytree(c.path(f"n{i}", "logs"), os.path.join(keep, f"n{i}-logs"))
        c.cleanup()


def build_image(work):
    """The 40 MB random image pushed to the registry; its reference and the
    sha256 of its big file."""
    data = os.urandom(IMAGE_BYTES)

    class W:
        pass
    w = W()
    w.work = work
    layout = Registry.build(w, "big", "p2p bench", {"/data/blob": data})
    sh("skopeo", "copy", "--dest-tls-verify=false", f"oci:{layout}:big",
       f"docker://{REG_ADDR}:{REG_PORT}/bench/big:1", timeout=300)
    return f"{REG_ADDR}:{REG_PORT}/bench/big:1", hashlib.sha256(data).hexdigest()


def run_gang(b, nodes, ref, p2p, stores, extra=None, during=None, lead_s=0.0):
    """Starts one pull per node at once; returns (seconds until each is
    ready, their JSON, whether all succeeded). extra: {node: env} of peers
    that take part but are not ranks (their readiness is not waited for),
    started lead_s before the ranks (whose clock starts with them)."""
    procs = {}
    done, outs = {}, {}
    extra = extra or {}
    t0 = None
    for i in list(extra) + list(nodes):
        if i in nodes and t0 is None:
            time.sleep(lead_s if extra else 0.0)
            t0 = time.monotonic()
            if os.environ.get("P2P_TRACE"):
                with open(os.path.join(stores, "t0"), "w") as f:
                    f.write(f"{t0}\n")
        store = os.path.join(stores, f"n{i}")
        args = ["ip", "netns", "exec", ns_of(i), b["agent"], "image-pull", "--store", store,
                "--plain-http"]
        if p2p:
            args += ["--p2p-listen", f"{addr_of(i)}:{PEER_PORT}", "--controller",
                     f"http://{HOST_ADDR}:{b['port']}", "--node", f"n{i}", "--token-file",
                     b["tokens"][i], "--linger", str(RUN_TIMEOUT_S)]
        env = dict(os.environ, **extra.get(i, {}))
        if os.environ.get("P2P_TRACE"):
            env["TESSERA_AGENT_IMAGE_TRACE"] = "1"
        errf = open(os.path.join(stores, f"n{i}.err"), "w")
        procs[i] = subprocess.Popen(args + [ref], stdout=subprocess.PIPE,
                                    stderr=errf, text=True, env=env)

    def reader(i):
        line = procs[i].stdout.readline()
        done[i] = time.monotonic() - t0
        try:
            outs[i] = json.loads(line)
        except ValueError:
            with open(os.path.join(stores, f"n{i}.err")) as f:
                outs[i] = {"error": f.read()[-300:]}
    ths = [threading.Thread(target=reader, args=(i,), daemon=True) for i in nodes]
    for t in ths:
        t.start()
    if during:
        during(procs)
    for t in ths:
        t.join(RUN_TIMEOUT_S)
    for p in procs.values():
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.wait()
    ok = all(i in outs and "digest" in outs[i] for i in nodes)
    return [done.get(i, float("inf")) for i in nodes], outs, ok


# the steps of a pull, as its trace names them (src/agent/image_pull.c's
# agent_image_trace), each from the step before it
STEPS = (("manifest", "manifest"), ("first piece", None), ("all held", "pieces all held"),
         ("check", "whole blob checked"), ("fsync", "synced"), ("unpack", "unpacked"),
         ("write", "written"), ("mkfs", "packed"), ("size", "sized"),
         ("mount", "renamed and mounted"))


def trace_steps(stores, nodes, t0):
    """The median rank's seconds in each step of its pull (P2P_TRACE), from
    the ranks' start; a step a rank's trace lacks is left out."""
    per = {name: [] for name, _ in STEPS}
    for i in nodes:
        at = {}
        try:
            with open(os.path.join(stores, f"n{i}.err")) as f:
                lines = [line.split(None, 2) for line in f if line.startswith("image-trace ")]
        except OSError:
            continue
        for _, t, ev in lines:
            ev = ev.strip()
            for name, prefix in STEPS:
                if prefix is None:  # the first piece in, from peers or the registry
                    hit = ev.startswith("piece ") and ev.endswith(("(answer 0)", "(rc 0)"))
                else:
                    hit = ev.startswith(prefix) or (prefix == "synced" and ev.endswith(prefix))
                if hit and name not in at:
                    at[name] = float(t) - t0
        prev = 0.0
        for name, _ in STEPS:
            if name in at:
                per[name].append(at[name] - prev)
                prev = at[name]
    return {k: sorted(v)[len(v) // 2] for k, v in per.items() if v}


def verify_roots(stores, nodes, outs, want):
    """Every rank's /data/blob hashed: from its unpacked root, or from its
    EROFS image mounted here (the pull mounted it in its own namespace's
    mount table, gone with it)."""
    bad = 0
    for i in nodes:
        root = outs[i]["rootfs"]
        path = os.path.join(root, "data", "blob")
        mnt = None
        if not os.path.exists(path):
            mnt = tempfile.mkdtemp(prefix="p2p-verify-")
            img = os.path.join(os.path.dirname(root), "rootfs.erofs")
            if sh("mount", "-t", "erofs", "-o", "ro,loop", img, mnt, check=False).returncode:
                bad += 1
                os.rmdir(mnt)
                continue
            path = os.path.join(mnt, "data", "blob")
        h = hashlib.sha256()
        try:
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        finally:
            if mnt:
                sh("umount", mnt, check=False)
                os.rmdir(mnt)
        bad += h.hexdigest() != want
    return bad


def unmount_under(top):
    """The image roots `image-pull` left mounted under top (docs/images.md)."""
    with open("/proc/self/mounts") as f:
        points = [line.split()[1] for line in f if line.split()[1].startswith(top + "/")]
    for p in sorted(points, reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)


def fresh(stores):
    unmount_under(stores)
    shutil.rmtree(stores, ignore_errors=True)
    os.makedirs(stores)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--nodes", default="8,16,32,64")
    ap.add_argument("--baseline", default="8,16")
    ap.add_argument("--fault-n", type=int, default=8)
    ap.add_argument("--faults", default="killed,killed-origin,poweroff,corrupt,registry",
                    help="which faults run, of killed, killed-origin, poweroff, corrupt, "
                    "registry")
    ap.add_argument("--full", type=int, default=0,
                    help="a gang of this many ranks through real agents and runc")
    ap.add_argument("--nvml", help="the fake NVML library (--full)")
    ap.add_argument("--fixtures", help="its fixtures' folder, tests/fakes (--full)")
    ap.add_argument("--json")
    a = ap.parse_args()
    sizes = [int(x) for x in a.nodes.split(",") if x]
    base_sizes = [int(x) for x in a.baseline.split(",") if x]
    nmax = max(sizes + base_sizes + ([a.fault_n + 2] if a.fault_n > 0 else []) + [a.full])
    build = os.path.abspath(a.build)
    b = {"agent": os.path.join(build, "tessera-agent"),
         "tesserad": os.path.join(build, "tesserad"),
         "nvml": os.path.abspath(a.nvml or os.path.join(build, "fakes", "libnvidia-ml.so.1")),
         "fixtures": os.path.abspath(a.fixtures or os.path.join(
             os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fakes"))}
    work = tempfile.mkdtemp(prefix="p2p-bench-")
    stores = os.path.join(work, "stores")
    net = reg = c = None
    result = {"line_rate_bound_s": LINE_S, "image_bytes": IMAGE_BYTES, "runs": []}
    try:
        net = Net(nmax)
        reg = RegistryInNs(work)
        ref, want = build_image(work)
        c = BenchCluster({"tesserad": b["tesserad"], "agent": b["agent"]},
                         nodes=[Node(f"n{i}", agent=False) for i in range(nmax)],
                         name="p2p-bench")
        c.start()
        b["port"] = c.port
        b["tokens"] = {}
        for i in range(nmax):
            st, d = c.call("POST", "/v1/tokens", {"name": f"n{i}", "role": "node"})
            path = os.path.join(work, f"n{i}.token")
            with open(path, "w") as f:
                f.write(d["token"]["secret"] + "\n")
            b["tokens"][i] = path
        print(f"image {IMAGE_BYTES / 1e6:.0f} MB random, links {RATE}: line-rate bound "
              f"{LINE_S:.1f} s; light mode (image-pull per namespace, real tesserad tracker)")
        print(f"{'N':>4} {'mode':>9} {'last ready s':>12} {'x bound':>8} {'median s':>9} "
              f"{'egress x image':>15} {'from peers MB':>14} {'last blob s':>11} "
              f"{'CPU s/node':>10} {'CPU s all':>9} {'all/cores s':>11} {'tracker':>8} "
              f"{'req/s':>6} "
              f"{'softirq':>8} {'CPU s/node fetch/rest/user':>26}")

        def one(n, p2p, label):
            fresh(stores)
            tx0 = net.reg_tx()
            ctld0, sirq0 = proc_cpu_s(c.procs["tesserad"].pid), softirq_s()
            req0 = tracker_requests(c)
            times, outs, ok = run_gang(b, range(n), ref, p2p, stores)
            ctld_cpu = proc_cpu_s(c.procs["tesserad"].pid) - ctld0
            # less the two /metrics reads themselves
            reqs = tracker_requests(c) - req0 - 1
            sirq = softirq_s() - sirq0
            steps = {}
            if os.environ.get("P2P_TRACE"):
                with open(os.path.join(stores, "t0")) as f:
                    steps = trace_steps(stores, range(n), float(f.read()))
                keep = f"/tmp/p2p-trace-{n}-{label}"
                shutil.rmtree(keep, ignore_errors=True)
                shutil.copytree(stores, keep, ignore=shutil.ignore_patterns("blobs", "images", "tmp"))
            egress = (net.reg_tx() - tx0) / IMAGE_BYTES
            last = max(times)
            med = sorted(times)[len(times) // 2]
            peers = sum(o.get("from_peers", 0) for o in outs.values()) / 1e6
            # what the pulls cost the machine: each pull's own CPU-seconds
            # (mkfs.erofs included; the kernel's veth, bridge and tbf work in
            # softirq is not in them), and the least wall time the machine's
            # cores need for that much
            blobs = max(o.get("blobs_s", 0) for o in outs.values())
            cpus = sorted(o.get("cpu_s", 0) for o in outs.values())
            cpu_all = sum(cpus)

            def node_median(key):
                v = sorted(key(o) for o in outs.values() if "cpu_s" in o) or [0.0]
                return v[len(v) // 2]
            # the median node's CPU until its last blob was verified (the
            # fetch: pieces, hashes, the tracker), after it (the unpack and
            # mkfs.erofs), and in user space (the rest is the kernel's)
            split = (node_median(lambda o: o.get("blobs_cpu_s", 0)),
                     node_median(lambda o: o["cpu_s"] - o.get("blobs_cpu_s", 0)),
                     node_median(lambda o: o.get("user_s", 0)))
            cores = len(os.sched_getaffinity(0))
            print(f"{n:>4} {label:>9} {last:>12.1f} {last / LINE_S:>8.1f} {med:>9.1f} "
                  f"{egress:>15.2f} {peers:>14.0f} {blobs:>11.1f} {cpus[len(cpus) // 2]:>10.2f} "
                  f"{cpu_all:>9.1f} {cpu_all / cores:>11.1f} {ctld_cpu:>8.1f} {reqs / last:>6.0f} "
                  f"{sirq:>8.1f} "
                  f"{'%.2f / %.2f / %.2f' % split:>26}"
                  f"{'' if ok else '  (FAILED: ' + str([o.get('error') for o in outs.values() if 'error' in o][:2]) + ')'}",
                  flush=True)
            result["runs"].append({"n": n, "mode": label, "last_s": last, "median_s": med,
                                   "first_s": min(times),
                                   "egress_x": egress, "from_peers_mb": peers, "ok": ok,
                                   "last_blob_s": blobs, "cpu_s_median": cpus[len(cpus) // 2],
                                   "cpu_s_all": cpu_all, "cores": cores,
                                   "tracker_cpu_s": ctld_cpu, "tracker_requests": reqs,
                                   "softirq_s": sirq,
                                   "cpu_s_fetch_median": split[0],
                                   "cpu_s_rest_median": split[1],
                                   "cpu_s_user_median": split[2],
                                   "load1": os.getloadavg()[0]})
            if steps:
                print(f"{'':>4} {'':>9} the median rank's steps, s: " +
                      ", ".join(f"{k} {v:.2f}" for k, v in steps.items()), flush=True)
                result["runs"][-1]["steps_s"] = steps
            return last
        for n in sorted(set(sizes) | set(base_sizes)):
            if n in sizes:
                lp = one(n, True, "p2p")
            if n in base_sizes:
                lb = one(n, False, "registry")
                if n in sizes:
                    print(f"{'':>4} {'':>9} plain pull / p2p at N={n}: {lb / lp:.1f}x")
            else:
                print(f"{n:>4} {'registry':>9} {n * LINE_S:>12.1f} {n:>8.1f}   (model: N x "
                      f"{LINE_S:.1f} s, not measured)")
        # faults, at fault_n ranks plus one extra peer where it is the fault
        n = a.fault_n
        if n > 0:  # --fault-n 0: none
            print(f"faults at N={n} (p2p):")

            def fault(label, extra=None, during=None, lead_s=0.0):
                fresh(stores)
                tx0 = net.reg_tx()
                ctld0, req0 = proc_cpu_s(c.procs["tesserad"].pid), tracker_requests(c)
                times, outs, ok = run_gang(b, range(n), ref, True, stores, extra, during,
                                           lead_s)
                egress = (net.reg_tx() - tx0) / IMAGE_BYTES
                ctld_cpu = proc_cpu_s(c.procs["tesserad"].pid) - ctld0
                reqs = tracker_requests(c) - req0 - 1
                if os.environ.get("P2P_TRACE"):
                    keep = f"/tmp/p2p-trace-{n}-fault-{'-'.join(label.split()[2:4])}"
                    shutil.rmtree(keep, ignore_errors=True)
                    shutil.copytree(stores, keep, ignore=shutil.ignore_patterns("blobs", "images", "tmp"))
                bad = verify_roots(stores, range(n), outs, want) if ok else n
                refetched = sum(o.get("refetched", 0) for o in outs.values()) / 1e6
                # the ranks' own bytes from the registry: the rest of the
                # egress is the extra peer's (and what was cut mid-transfer)
                ranks_reg = sum(o.get("from_registry", 0) for o in outs.values()) / IMAGE_BYTES
                # the fetch's end against the last rank's: where the time went
                blobs = max((o.get("blobs_s", 0) for o in outs.values()), default=0)
                print(f"  {label:<34} last ready {max(times):6.1f} s (last blob {blobs:.1f} s), "
                      f"every rank verified: "
                      f"{'yes' if ok and bad == 0 else 'NO'}, refetched {refetched:.1f} MB, "
                      f"registry egress {egress:.2f}x (ranks {ranks_reg:.2f}x), "
                      f"tracker {ctld_cpu:.1f} CPU s "
                      f"{reqs / max(times):.0f} req/s", flush=True)
                result["runs"].append({"n": n, "mode": "fault:" + label, "last_s": max(times),
                                       "ok": ok and bad == 0, "refetched_mb": refetched,
                                       "egress_x": egress, "ranks_registry_x": ranks_reg,
                                       "last_blob_s": blobs,
                                       "tracker_cpu_s": ctld_cpu, "tracker_requests": reqs})

            def kill_peer(procs):
                time.sleep(LINE_S / 2)
                procs[n].send_signal(signal.SIGKILL)
            def power_off(procs):
                # a node that vanishes: frozen, and every packet to or from
                # its namespace dropped (no RST: its askers' SYNs go
                # unanswered, as a busy node's do)
                time.sleep(LINE_S / 2)
                procs[n].send_signal(signal.SIGSTOP)
                subprocess.run(["ip", "netns", "exec", ns_of(n), "nft", "-f", "-"],
                               input=POWER_OFF_RULES, capture_output=True, text=True,
                               timeout=30)
            faults = a.faults.split(",")
            if "killed" in faults:
                fault("a peer killed mid-transfer", {n: {}}, kill_peer)
            if "killed-origin" in faults:
                # the worst time to die: the peer started first, so it holds
                # one of the registry's two grants when it is killed, and
                # the piece waits for the tracker to free it
                fault("a peer killed as it fetches from the registry", {n: {}}, kill_peer,
                      lead_s=KILL_LEAD_S)
            if "poweroff" in faults:
                try:
                    fault("a peer powered off mid-transfer", {n: {}}, power_off)
                finally:
                    sh("ip", "netns", "exec", ns_of(n), "nft", "delete", "table", "inet",
                       "p2poff", check=False)
            if "corrupt" in faults:
                fault("a peer serving corrupt pieces", {n: {"TESSERA_AGENT_P2P_FAULTS": "corrupt"}})
            if "registry" in faults:
                fault("the registry restarted mid-transfer", None,
                      lambda procs: (time.sleep(LINE_S / 3), reg.restart_after(1.0)))
        if a.full > 0:
            full_gang(b, a.full, ref, result)
    finally:
        if c:
            c.stop()
            c.cleanup()
        if reg:
            reg.stop()
        if net:
            net.close()
        if os.environ.get("P2P_TRACE") and os.path.exists(os.path.join(work, "registry.log")):
            shutil.copy(os.path.join(work, "registry.log"), "/tmp/p2p-registry.log")
        unmount_under(work)
        shutil.rmtree(work, ignore_errors=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
