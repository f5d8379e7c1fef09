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

usage: nics_test.py NETNS_TOOL     (root; exit 77 = skipped)
"""
import os
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


def setup(state, n, nics, check=True):
    return nsx(NODE, TOOL, "setup", state, tid(n), "4200", f"10.71.0.{n + 2}", "24", LOCAL,
               "nics=" + ",".join(nics), check=check)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)
    print("ok:", what)


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
        mine = links("ts-" + tid(0))
        expect(mine.get("vf0") and mine.get("vf1"),
               "task 0 holds vf0 and vf1, up, in its namespace")
        node = links(NODE)
        expect("vf0" not in node and "vf1" not in node and "vf2" in node,
               "the node keeps only vf2")

        r = setup(state, 1, ["vf2", "vf1"], check=False)
        refused = "net.nics[1]: \"vf1\": not in this node's network namespace"
        expect(r.returncode != 0 and refused in r.stderr,
               "a second task asking for vf1 is refused, naming it: " + r.stderr.strip())
        expect(not os.path.exists("/run/netns/ts-" + tid(1)) and "vf2" in links(NODE),
               "the refused task left no namespace and vf2 stayed")

        nsx(NODE, TOOL, "teardown", state, tid(0))
        node = links(NODE)
        expect(all(d in node for d in NICS) and not os.path.exists("/run/netns/ts-" + tid(0)),
               "teardown brings vf0 and vf1 back to the node")

        # as after kill -9: the state stays; a restarted agent adopts task 2 only
        setup(state, 0, ["vf0"])
        setup(state, 2, ["vf2"])
        out = nsx(NODE, TOOL, "start", state, tid(2)).stdout
        node = links(NODE)
        expect("removed=1" in out and "vf0" in node and "vf2" not in node,
               "a restarted agent returns the unadopted task's vf0 and leaves vf2 with task 2")
        expect(links("ts-" + tid(2)).get("vf2"), "task 2 still holds vf2")
        nsx(NODE, TOOL, "start", state)
        node = links(NODE)
        expect(all(d in node for d in NICS) and os.listdir(os.path.join(state, "net")) == [],
               "every NIC back and no state left")
        return 0
    finally:
        for n in os.listdir("/run/netns"):
            if n.startswith(TAG) or n.startswith("ts-" + TAG):
                subprocess.run(["ip", "netns", "del", n], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
