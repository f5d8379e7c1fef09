#!/usr/bin/env python3
"""Token names are namespaced, not first come, first served (issue 24): a
tenant-admin's tokens are named in its tenant's namespace ("team-a.ci"),
so the same name in two tenants is fine and a tenant-admin squats neither a
person's name (the cluster's namespace, which only admin gives) nor another
tenant's, nor a node's; a name in a tenant's namespace is only ever that
tenant's token; revoking by name names the tenant.

    token_names_test.py TESSERAD
"""
import os
import subprocess
import sys
import tempfile

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-token-names-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
open(os.path.join(TMP, "cluster.yaml"), "w").write(
    "topology:\n  levels: [node, gpu]\nnode_classes:\n"
    "  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}\n"
    "nodes:\n  - {name: n-1, class: g8}\n")
open(os.path.join(TMP, "tenants.yaml"), "w").write(
    "tenants:\n  team-a: {}\n  team-b: {}\n  x: {}\n  x.y: {}\n")
open(os.path.join(TMP, "tesserad.yaml"), "w").write(
    f"listen: 127.0.0.1:{PORT}\ncluster: cluster.yaml\ntenants: tenants.yaml\n"
    "state_dir: state\nlimits: {requests_per_s: 100000, burst: 100000}\n")


def call(method, path, token=None, body=None):
    return http_call(URL, method, path, token, body, timeout=10)


def mint(by, name, role, tenant=None):
    body = {"name": name, "role": role}
    if tenant:
        body["tenant"] = tenant
    st, d = call("POST", "/v1/tokens", by, body)
    tok = d.get("token", {}) if isinstance(d, dict) else {}
    msg = d.get("error", {}).get("message", "") if isinstance(d, dict) else ""
    return st, tok, msg


proc = None
try:
    proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(TMP, "tesserad.log"), "w"))
    check(wait_ready(URL), "tesserad starts")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    ta = mint(admin, "ta", "tenant-admin", "team-a")[1].get("secret", "")
    tb = mint(admin, "tb", "tenant-admin", "team-b")[1].get("secret", "")
    tx = mint(admin, "tx", "tenant-admin", "x")[1].get("secret", "")

    # ---- a tenant-admin's tokens live in its tenant's namespace ------------------------
    st, a_ci, _ = mint(ta, "ci", "user", "team-a")
    check(st == 201 and a_ci.get("name") == "team-a.ci" and a_ci.get("tenant") == "team-a",
          f"team-a's tenant-admin names its token ci: stored as team-a.ci ({st} {a_ci})")
    st, b_ci, _ = mint(tb, "ci", "viewer", "team-b")
    check(st == 201 and b_ci.get("name") == "team-b.ci",
          f"team-b's tenant-admin names one ci too: team-b.ci ({st})")
    st, d, _ = mint(ta, "team-a.bot", "viewer", "team-a")
    check(st == 201 and d.get("name") == "team-a.bot",
          f"a name already in its namespace is kept as given ({d.get('name')})")
    st, d, _ = mint(ta, "ci", "viewer", "team-a")
    check(st == 409, f"the same name twice in one tenant: 409 ({st})")
    st, d = call("GET", "/v1/whoami", a_ci.get("secret"))
    check(st == 200 and d.get("name") == "team-a.ci", f"the token is team-a.ci ({d})")

    # ---- no squatting: a person's name, another tenant's, a node's ---------------------
    st, squat, _ = mint(ta, "alice", "user", "team-a")
    check(st == 201 and squat.get("name") == "team-a.alice",
          f"a tenant-admin's alice is team-a.alice ({squat.get('name')})")
    st, alice, _ = mint(admin, "alice", "user", "team-b")
    check(st == 201 and alice.get("name") == "alice",
          f"so admin still gives alice her name, in the cluster's namespace ({st})")
    st, _, msg = mint(ta, "n-1", "viewer", "team-a")
    check(st == 400 and "node's name" in msg, f"a node's name stays the node's ({st} {msg})")
    st, _, msg = mint(tx, "y.ci", "viewer", "x")
    check(st == 400 and 'tenant "x.y"' in msg,
          f"tenant x's admin cannot reach into tenant x.y's namespace ({st} {msg})")
    st, _, msg = mint(ta, "c" * 60, "viewer", "team-a")
    check(st == 400 and msg.startswith("name:") and "team-a." in msg,
          f"a name too long with its tenant's prefix: 400 naming name ({st} {msg})")

    # ---- a tenant's namespace is only that tenant's, whoever creates --------------------
    st, _, msg = mint(admin, "team-a.x", "user", "team-b")
    check(st == 400 and 'tenant "team-a"\'s namespace' in msg,
          f"admin cannot give team-b a name in team-a's namespace ({st} {msg})")
    st, _, msg = mint(admin, "team-a.prom", "scrape")
    check(st == 400 and "namespace" in msg, f"nor a cluster token ({st} {msg})")
    st, d, _ = mint(admin, "team-a.lead", "tenant-admin", "team-a")
    check(st == 201 and d.get("name") == "team-a.lead",
          f"admin gives team-a a name in team-a's namespace ({st})")

    # ---- revoking by name says which tenant ---------------------------------------------
    st, _ = call("DELETE", "/v1/tokens/team-a.ci", admin)
    check(st == 204, f"admin revokes team-a.ci ({st})")
    check(call("GET", "/v1/whoami", a_ci.get("secret"))[0] == 401, "team-a.ci no longer works")
    check(call("GET", "/v1/whoami", b_ci.get("secret"))[0] == 200, "team-b.ci still works")
    st, d = call("GET", "/v1/tokens", ta)
    names = sorted(t["name"] for t in d.get("tokens", [])) if st == 200 else []
    check(st == 200 and "team-b.ci" not in names and "team-a.alice" in names
          and all(n.startswith("team-a.") or n == "ta" for n in names),
          f"team-a's tenant-admin lists its tenant's tokens ({names})")
finally:
    stop_all([proc] if proc else [])
finish(TMP, ("tesserad.log",))
