#!/usr/bin/env python3
"""Connections are bounded for everyone (issue 24, finding 3): a client
holding a valid token used to lose every limit on its connections - no
request deadline, no cap - even after a 429 or its token's revocation, so 16
viewer connections trickling bytes held the server.

    conns_test.py TESSERAD

1. 16 connections of one viewer token, each after one whole request,
   trickle the next request's headers a line each 0.5 s: at most
   limits.connections_per_token (4) of them are kept (the others are told
   429 and closed), and those lose their connection at
   limits.request_timeout (2 s) however they trickle; /healthz and an admin
   are answered meanwhile;
2. a token's revocation puts its connections back under their address's
   cap (limits.connections_per_client, 6): 4 connections of a revoked token
   and 4 slow ones of the same address keep at most 6;
3. an agent's long-poll (a request read whole, waiting for its answer) is
   not cut by the deadline;
4. every answer carries X-Content-Type-Options: nosniff;
5. /metrics (every tenant's series) needs a token by default: a scrape
   token (which may read nothing else), an admin or a cluster-viewer; a
   tenant's viewer reads its tenant's page (tests/ctld/metrics_scope_test.py);
6. a tenant is bounded as a whole: its tokens together hold at most
   limits.connections_per_tenant (6) connections (the next told 429 naming
   the limit), and its tenant-admin makes at most limits.tokens_per_tenant
   (5) live tokens (429 too_many_tokens; an admin still may).
Every wait is bounded.
"""
import os
import re
import select
import urllib.error
import socket
import sys
import tempfile
import threading
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-conns-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
PER_TOKEN, PER_CLIENT, PER_TENANT, TOKENS = 4, 6, 6, 5

open(os.path.join(TMP, "cluster.yaml"), "w").write(
    "topology:\n  levels: [node, gpu]\nnode_classes:\n"
    "  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}\n"
    "nodes:\n  - {name: n-1, class: g8}\n")
open(os.path.join(TMP, "tenants.yaml"), "w").write("tenants:\n  t: {}\n")
open(os.path.join(TMP, "tesserad.yaml"), "w").write(
    f"listen: 127.0.0.1:{PORT}\ncluster: cluster.yaml\ntenants: tenants.yaml\n"
    "state_dir: state\nnode_lost_after: 30s\n"
    f"limits: {{requests_per_s: 100000, burst: 100000, connections_per_client: {PER_CLIENT}, "
    f"connections_per_token: {PER_TOKEN}, request_timeout: 2s, "
    f"connections_per_tenant: {PER_TENANT}, tokens_per_tenant: {TOKENS}}}\n")


def call(method, path, token=None, body=None, timeout=5):
    return http_call(URL, method, path, token, body, timeout=timeout)


def vouched(token, src):
    """A connection from src that made one whole request with token; the
    socket and the status answered (0: none)."""
    s = socket.socket()
    s.settimeout(3.0)
    s.bind((src, 0))
    s.connect(("127.0.0.1", PORT))
    s.sendall(f"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n"
              .encode())
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        head, _, rest = got.partition(b"\r\n\r\n")
        n = [int(x.split(b":")[1]) for x in head.split(b"\r\n")
             if x.lower().startswith(b"content-length:")]
        while n and len(rest) < n[0]:
            chunk = s.recv(65536)
            if not chunk:
                break
            rest += chunk
    except OSError:
        pass
    parts = got.split(b" ")
    return s, int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def alive(socks):
    n = 0
    for s in socks:
        if s.fileno() < 0:
            continue
        r, _, _ = select.select([s], [], [], 0)
        if r:
            try:
                if not s.recv(65536):
                    s.close()
                    continue
            except OSError:
                s.close()
                continue
        n += 1
    return n


def trickle(socks, first=False):
    for s in socks:
        if s.fileno() >= 0:
            try:
                s.sendall(b"GET /v1/jobs HTTP/1.1\r\n" if first else b"X-Slow: 1\r\n")
            except OSError:
                s.close()


proc = None
try:
    import subprocess
    proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                            stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(TMP, "tesserad.log"), "w"))
    check(wait_ready(URL), "tesserad starts")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    toks = {}
    for name in ("viewer-1", "viewer-2"):
        st, d = call("POST", "/v1/tokens", admin, {"name": name, "role": "viewer", "tenant": "t"})
        toks[name] = d["token"]["secret"] if st == 201 else ""

    # ---- 1. one token's 16 trickling connections ---------------------------------------
    pairs = [vouched(toks["viewer-1"], "127.0.0.2") for _ in range(16)]
    codes = sorted(st for _, st in pairs)
    socks = [s for s, _ in pairs]
    check(codes.count(200) == PER_TOKEN and codes.count(429) == 16 - PER_TOKEN,
          f"1. one token's 16 connections: {PER_TOKEN} served, the rest told 429: {codes}")
    time.sleep(0.3)
    trickle(socks, first=True)
    t_start = time.time()
    held = alive(socks)
    check(held <= PER_TOKEN, f"1. one token holds {held} of 16 connections (cap {PER_TOKEN})")
    t0 = time.time()
    hz = call("GET", "/healthz")[0]
    api = call("GET", "/v1/tenants", admin)[0]
    check(hz == 200 and api == 200 and time.time() - t0 < 1.0,
          f"1. /healthz and an admin are answered meanwhile ({hz}, {api}, "
          f"{time.time() - t0:.2f} s)")
    while time.time() - t_start < 4.0:  # past request_timeout (2 s), trickling all along
        trickle(socks)
        time.sleep(0.5)
    left = alive(socks)
    check(left == 0, f"1. a token's trickle does not move the 2 s deadline: {left} still open "
          "after 4 s")
    for s in socks:
        s.close()

    # ---- 2. a revocation puts a token's connections back under the address's cap ----------
    mine = [vouched(toks["viewer-2"], "127.0.0.3")[0] for _ in range(PER_TOKEN)]
    slow = []
    for _ in range(PER_CLIENT - 2):
        s = socket.socket()
        s.bind(("127.0.0.3", 0))
        s.connect(("127.0.0.1", PORT))
        slow.append(s)
    time.sleep(0.3)
    before = alive(mine + slow)
    check(before == PER_TOKEN + PER_CLIENT - 2,
          f"2. before the revocation: {before} connections from one address "
          f"({PER_TOKEN} with a token)")
    st, _ = call("DELETE", "/v1/tokens/viewer-2", admin)
    check(st == 204, f"2. viewer-2 is revoked ({st})")
    time.sleep(0.5)
    after = alive(mine + slow)
    check(after <= PER_CLIENT, f"2. after it: {after} connections of that address left "
          f"(cap {PER_CLIENT})")
    for s in mine + slow:
        s.close()

    # ---- 2b. slow anonymous connections do not lock their address out -----------------
    # (a malicious-tenant probe held an address's cap with tokenless slow sockets: every
    # other client behind it - a node's tasks and agent, a login node - was refused)
    held = []
    for _ in range(PER_CLIENT):
        s = socket.socket()
        s.bind(("127.0.0.4", 0))
        s.connect(("127.0.0.1", PORT))
        s.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\n")  # never finished
        held.append(s)
    time.sleep(0.3)
    served = 0
    for _ in range(3):  # each new client makes room by the oldest slow one
        s, st = vouched(toks["viewer-1"], "127.0.0.4")
        served += st == 200
        s.close()
    check(served == 3, f"2b. a client behind an address held by {PER_CLIENT} slow anonymous "
          f"connections is served: {served} of 3")
    check(alive(held) <= PER_CLIENT - 1, f"2b. the oldest slow one made room: "
          f"{alive(held)} of {PER_CLIENT} left")
    for s in held:
        s.close()

    # ---- 4. every answer says nosniff ---------------------------------------------------
    import urllib.request
    for path, tok in (("/healthz", None), ("/readyz", None), ("/metrics", None),
                      ("/v1/jobs", None), ("/v1/jobs", admin), ("/ui/", None)):
        req = urllib.request.Request(URL + path, headers={"Authorization": "Bearer " + tok}
                                     if tok else {})
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                h = r.headers.get("X-Content-Type-Options")
        except urllib.error.HTTPError as e:
            h = e.headers.get("X-Content-Type-Options")
        check(h == "nosniff", f"4. {path} ({'a token' if tok else 'no token'}) answers with "
              f"X-Content-Type-Options: nosniff ({h})")

    # ---- 5. /metrics needs a token that may read every tenant ------------------------------
    st, d = call("POST", "/v1/tokens", admin, {"name": "prom", "role": "scrape"})
    prom = d["token"]["secret"] if st == 201 else ""
    check(st == 201 and d["token"]["role"] == "scrape", f"5. admin makes a scrape token ({st})")
    st, d = call("POST", "/v1/tokens", admin, {"name": "prom2", "role": "scrape", "tenant": "t"})
    check(st == 400 and "tenant" in d["error"]["message"], f"5. a scrape token has no tenant "
          f"({st})")
    st, txt = call("GET", "/metrics", prom)
    check(st == 200 and "tessera_jobs" in str(txt), f"5. the scrape token reads /metrics ({st})")
    st, txt = call("GET", "/metrics")
    check(st == 401, f"5. /metrics without a token: 401 by default ({st})")
    st, d = call("GET", "/metrics", toks["viewer-1"])
    check(st == 200 and 'tenant="t"' in str(d) and "tessera_http_responses_total" not in str(d),
          f"5. a viewer of one tenant reads its tenant's series only: {st}")
    st, d = call("GET", "/v1/jobs", prom)
    check(st == 403, f"5. a scrape token reads /metrics only: GET /v1/jobs {st}")

    # ---- 6. a tenant's tokens and connections are bounded together ---------------------
    st, d = call("POST", "/v1/tokens", admin, {"name": "boss", "role": "tenant-admin",
                                               "tenant": "t"})
    boss = d["token"]["secret"] if st == 201 else ""
    made = []  # live in t now: viewer-1 and boss
    for k in range(TOKENS):
        st, d = call("POST", "/v1/tokens", boss, {"name": f"v{k}", "role": "viewer",
                                                  "tenant": "t"})
        made.append((st, d))
    codes = [st for st, _ in made]
    check(codes == [201] * (TOKENS - 2) + [429] * 2,
          f"6. a tenant-admin makes tokens until its tenant holds {TOKENS} live: {codes}")
    last = made[-1][1]
    check(isinstance(last, dict) and last.get("error", {}).get("code") == "too_many_tokens" and
          "limits.tokens_per_tenant" in last["error"]["message"],
          f"6. then 429 too_many_tokens naming the limit: {last}")
    st, _ = call("POST", "/v1/tokens", admin, {"name": "by-admin", "role": "viewer",
                                               "tenant": "t"})
    check(st == 201, f"6. an admin still may ({st})")
    pairs = [vouched(toks["viewer-1"], "127.0.0.4") for _ in range(PER_TOKEN)]
    v0 = made[0][1]["token"]["secret"] if made[0][0] == 201 else ""
    pairs += [vouched(v0, "127.0.0.5") for _ in range(PER_TOKEN)]
    codes = sorted(st for _, st in pairs)
    check(codes.count(200) == PER_TENANT and codes.count(429) == 2 * PER_TOKEN - PER_TENANT,
          f"6. two tokens of one tenant hold {PER_TENANT} connections together, the rest "
          f"told 429: {codes}")
    other = vouched(admin, "127.0.0.6")
    check(other[1] == 200, f"6. another tenant's (the admin's) are not counted: {other[1]}")
    for s, _ in pairs + [other]:
        s.close()

    for key, bad in (("connections_per_tenant", "0"), ("tokens_per_tenant", "lots")):
        cfg = os.path.join(TMP, f"bad-{key}.yaml")
        with open(os.path.join(TMP, "tesserad.yaml")) as f, open(cfg, "w") as g:
            g.write(re.sub(rf"{key}: \d+", f"{key}: {bad}", f.read()))
        r = subprocess.run([TESSERAD, "--config", cfg], capture_output=True, text=True,
                           timeout=15)
        check(r.returncode != 0 and f"limits.{key}" in r.stderr and "1..1000000" in r.stderr,
              f"6. limits.{key}: {bad} is refused at start, naming it: {r.stderr.strip()[:200]}")

    # ---- 3. a long-poll is not cut by the request deadline -------------------------------
    st, d = call("POST", "/v1/tokens", admin, {"name": "n-1", "role": "node"})
    node = d["token"]["secret"] if st == 201 else ""
    st, d = call("POST", "/v1/agent/register", node, {"node": "n-1", "tasks": []})
    gen = d.get("gen", 0) if isinstance(d, dict) else 0
    t0 = time.time()
    st, d = call("POST", "/v1/agent/sync", node, {"node": "n-1", "gen": gen, "tasks": [],
                                                  "wait_s": 3.5}, timeout=10)
    took = time.time() - t0
    check(st == 200 and took > 3.0, f"3. a 3.5 s long-poll outlives the 2 s request deadline "
          f"({st} after {took:.1f} s)")
finally:
    stop_all([proc] if proc else [])
finish(TMP, ("tesserad.log",))
