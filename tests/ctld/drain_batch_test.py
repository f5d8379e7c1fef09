#!/usr/bin/env python3
"""Concurrent drains and resumes are written together and each one counts.

    drain_batch_test.py TESSERAD

tesserad writes the drained-node list whole; whoever writes it takes every
drain and resume queued meanwhile with it (docs/tesserad.md, "Durable
writes"). 16 clients drain 64 virtual nodes at once, then resume the even
ones at once: every request is answered 200, the nodes end exactly as asked,
and a restart reads the same list back from the store. Every wait is bounded.
"""
import concurrent.futures
import os
import subprocess
import sys
import tempfile

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402
from harness import ctld_files  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-drains-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
NODES = [f"v-{i:02d}" for i in range(1, 65)]

ctld_files(TMP, PORT, ["{names: 'v-[01-64]', class: g8}"], "virtual_nodes: all\n")


def start():
    p = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "a"))
    check(wait_ready(URL), "tesserad is ready")
    return p


def states(admin):
    st, d = http_call(URL, "GET", "/v1/nodes", admin)
    return {n["name"]: n["state"] for n in d["nodes"]} if st == 200 else {}


def all_at_once(admin, names, action):
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        return list(ex.map(lambda n: http_call(URL, "POST", f"/v1/nodes/{n}/{action}",
                                               admin)[0], names))


proc = start()
try:
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    codes = all_at_once(admin, NODES, "drain")
    check(codes == [200] * len(NODES), f"64 concurrent drains answered 200 ({set(codes)})")
    check(set(states(admin).values()) == {"drained"}, "every node is drained")
    codes = all_at_once(admin, NODES[::2], "resume")
    check(codes == [200] * 32, f"32 concurrent resumes answered 200 ({set(codes)})")
    want = {n: "up" if i % 2 == 0 else "drained" for i, n in enumerate(NODES)}
    check(states(admin) == want, "the even nodes are up, the odd ones drained")
finally:
    stop_all([proc])
proc = start()
try:
    check(states(admin) == want, "a restart reads the same drained nodes back")
finally:
    stop_all([proc])
finish(TMP, ["log"])
