#!/usr/bin/env python3
"""Dedicated NICs moved into a task's namespace and back (docs/network.md).

A "node" is a network namespace holding links that stand in for the VFs or
rail NICs sysfs would name: dummy links, or where the kernel lacks them one
end of a veth pair (either moves between namespaces as a VF does; unlike a
VF it would be destroyed with the namespace, which is why the module moves
devices back itself). The agent's network module (netns_tool,
the code tessera-agent runs) sets tasks up in that node. Checks: a task's
NICs are in its namespace and up, and gone from the node's; a second task
asking for a NIC already taken is refused, naming it, and leaves nothing;
teardown brings the NICs back; so does a restarted agent's reconcile for a
task it does not adopt (as after kill -9), while one it adopts keeps them.
An older agent's task on its tenant's bridge holds that tenant's new tasks
off until it ends, and its teardown removes the bridge.

usage: nics_test.py NETNS_TOOL     (root; exit 77 = skipped)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

TOOL = sys.argv[1]
TAG = f"nc{os.getpid() % 100000}"
NODE = f"{TAG}-n0"
LOCAL = "192.168.252.1"
NICS = ["vf0", "vf1", "vf2"]


def sh(*args, check=True):
    return subprocess.run(list(args), check=check, timeout=30, capture_output=True, text=True)


def nsx(ns, *args, check=True):
    """args in ns's network namespace only (nsenter, not `ip netns exec`,
    whose private mount namespace would hide the namespaces made inside)."""
    return sh("nsenter", f"--net=/run/netns/{ns}", *args, check=check)


def links(ns):
    out = nsx(ns, "ip", "-o", "link", "show").stdout
    return {l.split(": ")[1].split("@")[0]: ("UP" in l.split(": ")[2].split(">")[0])
            for l in out.splitlines()}


def tid(n):
    return f"{TAG}t{n}"


def ns_name(state_dir, task_id):
    """The task's namespace as the agent names it (netns.c agent_net_ns_name)."""
    h = 2166136261
    for b in os.path.realpath(state_dir).encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    return f"ts-{h:08x}-{task_id}"


def setup(state, n, nics, check=True):
    return nsx(NODE, TOOL, "setup", state, tid(n), "4200", f"10.71.0.{n + 2}", "24", LOCAL,
               "nics=" + ",".join(nics), check=check)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


def upgraded(state):
    """A task an agent before the macvlans left (its veth a port of its
    tenant's bridge in the fabric, the VXLAN on the bridge): a new task of
    that tenant is refused, naming the VNI, until it ends; its teardown
    removes its veth, the bridge and the VXLAN; then the tenant's tasks
    start on macvlans."""
    h = int(ns_name(state, "x")[3:11], 16)
    t4, fab = f"t{(h ^ (h >> 16)) & 0xffff:04x}", f"tsf-{h:08x}"
    nsx(NODE, TOOL, "setup", state, tid(7), "4210", "10.75.0.2", "24", LOCAL)  # the fabric
    old_ns, veth, br, vx = ns_name(state, tid(8)), f"{t4}v0000beef", f"{t4}b4211", f"{t4}x4211"
    sh("ip", "netns", "add", old_ns)
    nsx(NODE, "ip", "link", "add", vx, "netns", fab, "type", "vxlan", "id", "4211", "local",
        LOCAL, "dstport", "4789")
    sh("ip", "-n", fab, "link", "add", br, "type", "bridge")
    sh("ip", "-n", fab, "link", "set", vx, "master", br)
    sh("ip", "-n", fab, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns",
       old_ns)
    sh("ip", "-n", fab, "link", "set", veth, "master", br)
    with open(os.path.join(state, "net", tid(8)), "w") as f:
        f.write(f"{veth} 4211 10.76.0.2 02:00:0a:4c:00:02\n")
    refused = nsx(NODE, TOOL, "setup", state, tid(9), "4211", "10.76.0.3", "24", LOCAL,
                  check=False)
    expect(refused.returncode != 0 and "net.vni: 4211" in refused.stderr and
           "before the macvlans" in refused.stderr and br in links(fab),
           f"a new task of a tenant whose older task is on its bridge is refused, naming the "
           f"VNI, and the bridge stays: {refused.stderr.strip()}")
    nsx(NODE, TOOL, "teardown", state, tid(8))
    left = set(links(fab)) & {veth, br, vx}
    expect(not os.path.exists("/run/netns/" + old_ns) and not left,
           f"the older task's teardown removes its namespace, veth, bridge and VXLAN {left}")
    nsx(NODE, TOOL, "setup", state, tid(9), "4211", "10.76.0.3", "24", LOCAL)
    kind = nsx(ns_name(state, tid(9)), "ip", "-d", "-o", "link", "show", "eth0").stdout
    expect(" macvlan mode bridge " in kind, "then the tenant's new task starts on a macvlan")
    nsx(NODE, TOOL, "teardown", state, tid(9))
    nsx(NODE, TOOL, "teardown", state, tid(7))
    expect(not os.path.exists("/run/netns/" + fab), "the last teardown removes the fabric")


def main():
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nft", "nsenter")):
        print("skipped: needs root, iproute2, nftables and nsenter")
        return 77
    dummy = subprocess.run(["ip", "link", "add", f"{TAG}probe", "type", "dummy"],
                           capture_output=True).returncode == 0
    if dummy:
        sh("ip", "link", "del", f"{TAG}probe")
    tmp = tempfile.mkdtemp(prefix="ts-nics-")
    state = os.path.join(tmp, "agent")
    other = os.path.join(tmp, "other-agent")
    os.makedirs(state)
    try:
        sh("ip", "netns", "add", NODE)
        nsx(NODE, "ip", "link", "set", "lo", "up")
        nsx(NODE, "ip", "link", "add", "u0", "type", "veth", "peer", "name", "u0p")
        nsx(NODE, "ip", "addr", "add", f"{LOCAL}/24", "dev", "u0")
        nsx(NODE, "ip", "link", "set", "u0", "up")
        for d in NICS:
            if dummy:
                nsx(NODE, "ip", "link", "add", d, "type", "dummy")
            else:
                nsx(NODE, "ip", "link", "add", d, "type", "veth", "peer", "name", d + "p")
        nsx(NODE, TOOL, "start", state)

        setup(state, 0, ["vf0", "vf1"])
        mine = links(ns_name(state, tid(0)))
        expect(mine.get("vf0") and mine.get("vf1"),
               "task 0 holds vf0 and vf1, up, in its namespace")
        node = links(NODE)
        expect("vf0" not in node and "vf1" not in node and "vf2" in node,
               "the node keeps only vf2")

        r = setup(state, 1, ["vf2", "vf1"], check=False)
        refused = "net.nics[1]: \"vf1\": not in this node's network namespace"
        expect(r.returncode != 0 and refused in r.stderr,
               "a second task asking for vf1 is refused, naming it: " + r.stderr.strip())
        gone1 = not os.path.exists("/run/netns/" + ns_name(state, tid(1)))
        expect(gone1 and "vf2" in links(NODE),
               "the refused task left no namespace and vf2 stayed")

        nsx(NODE, TOOL, "teardown", state, tid(0))
        node = links(NODE)
        gone0 = not os.path.exists("/run/netns/" + ns_name(state, tid(0)))
        expect(all(d in node for d in NICS) and gone0,
               "teardown brings vf0 and vf1 back to the node")

        # as after kill -9: the state stays; a restarted agent adopts task 2 only
        setup(state, 0, ["vf0"])
        setup(state, 2, ["vf2"])
        out = nsx(NODE, TOOL, "start", state, tid(2)).stdout
        node = links(NODE)
        expect("removed=1" in out and "vf0" in node and "vf2" not in node,
               "a restarted agent returns the unadopted task's vf0 and leaves vf2 with task 2")
        expect(links(ns_name(state, tid(2))).get("vf2"), "task 2 still holds vf2")
        nsx(NODE, TOOL, "start", state)
        node = links(NODE)
        expect(all(d in node for d in NICS) and os.listdir(os.path.join(state, "net")) == [],
               "every NIC back and no state left")

        # two agents of one host (two clusters): the same task id, two namespaces,
        # each agent its own gateways, VXLANs and tables; neither agent's
        # teardown nor restart touches the other's
        os.makedirs(other)
        nsx(NODE, TOOL, "start", other)
        nsx(NODE, TOOL, "setup", state, tid(5), "4201", "10.72.0.2", "24", LOCAL)
        nsx(NODE, TOOL, "setup", other, tid(5), "4202", "10.73.0.2", "24", LOCAL)
        a, b = ns_name(state, tid(5)), ns_name(other, tid(5))
        expect(a != b and os.path.exists("/run/netns/" + a) and os.path.exists("/run/netns/" + b),
               f"the same task id under two agents: two namespaces {a} {b}")
        tables = nsx(NODE, "nft", "list", "tables").stdout.split()
        mine_tables = sorted(t for t in tables if t.startswith("tessera_"))
        bridges = sorted(n for n in links(NODE) if re.match(r"^t[0-9a-f]{4}b\d+$", n))
        expect(len(mine_tables) == 4 and len(bridges) == 2 and bridges[0][:5] != bridges[1][:5],
               f"two agents, two pairs of tables {mine_tables} and gateways of their own "
               f"prefixes {bridges}")
        nsx(NODE, TOOL, "teardown", state, tid(5))
        nsx(NODE, TOOL, "teardown", state, tid(5))  # again: nothing of its own is left
        expect(not os.path.exists("/run/netns/" + a) and os.path.exists("/run/netns/" + b),
               "one agent's teardown removes its own and leaves the other agent's")
        addr = nsx(b, "ip", "-4", "-o", "addr", "show", "dev", "eth0").stdout
        expect("10.73.0.2/24" in addr, f"which keeps its address: {addr.strip()}")
        out = nsx(NODE, TOOL, "start", state).stdout
        # its binding is its task's own table (what its eth0 may send), its
        # VXLAN's chains are in its fabric namespace's netdev table (netns_fabric.c)
        otag = ns_name(other, "x")[3:11]
        bound = nsx(b, "nft", "list", "table", "netdev", "tessera_" + otag, check=False).stdout
        chains = nsx("tsf-" + otag, "nft", "list", "table", "netdev", "tessera_" + otag,
                     check=False).stdout
        expect("removed=0" in out and os.path.exists("/run/netns/" + b) and "10.73.0.2" in bound
               and "chain xi4202" in chains and "chain xo4202" in chains,
               "a restart of the first agent removes nothing of the other's, not even its "
               "bindings and its VXLAN's chains")
        nsx(NODE, TOOL, "teardown", other, tid(5))
        expect(not os.path.exists("/run/netns/" + b), "the other agent removes its own")
        upgraded(state)
        return 0
    finally:
        fabrics = {"tsf-" + ns_name(d, "x")[3:11] for d in (state, other)}
        for n in os.listdir("/run/netns"):
            if n.startswith(TAG) or (n.startswith("ts-") and n[12:].startswith(TAG + "t")) \
                    or n in fabrics:
                subprocess.run(["ip", "netns", "del", n], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
