#!/usr/bin/env python3
"""fake_server.py - a stand-in for tesserad for the CLI tests.

    tests/cli/fake_server.py PORT_FILE [--tls CERT KEY]

Serves a small in-memory subset of docs/api.md on 127.0.0.1 at an ephemeral
port (written to PORT_FILE once listening): canned jobs, nodes, tenants and
tokens, pagination by cursor, the error shape with field errors, and a few
jobs and nodes that misbehave on purpose so the CLI's exit codes can be
proved. Python standard library only; it runs until killed.

Tokens: tsk_admin (admin), tsk_user (user of team-a: other tenants' jobs are
404), tsk_viewer (viewer: writes are 403); anything else is 401.
Misbehaving ids: job 500 answers 500, job 501 answers 200 with HTML, job 502
answers after SLOW_S seconds, job 503 redirects; node "busy" is rate limited.
GET /_debug/last (no token) returns the headers and query of the last /v1
request, so the tests can check what the CLI sent.
"""
import json
import os
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

SLOW_S = 3
BODY_MAX_BYTES = 1 << 20
NOW = time.time()
TOKENS = {"tsk_admin": ("admin", None), "tsk_user": ("user", "team-a"),
          "tsk_viewer": ("viewer", None)}
STATES = ["pending", "held", "running", "stopping", "completed", "failed", "cancelled"]
LOCK = threading.Lock()


def job(jid, name, tenant, owner, state, gpus, model=None, submit_ago=180, start_ago=None,
        end_ago=None, reason=None, why=None, placement=None):
    return {"id": jid, "name": name, "tenant": tenant, "owner": owner, "state": state,
            "tier": "guaranteed", "priority": 0, "gpus": gpus, "gpu_model": model,
            "submit_time": NOW - submit_ago,
            "start_time": None if start_ago is None else NOW - start_ago,
            "end_time": None if end_ago is None else NOW - end_ago,
            "preemptions": 0, "reason": reason, "why": why,
            "placement": placement or [], "spec": {"name": name, "tenant": tenant}}


JOBS = {j["id"]: j for j in [
    job(42, "train", "team-a", "alice", "pending", 16, submit_ago=180, reason="capacity",
        why="needs 16 whole GPUs, 8 free in the cluster"),
    job(43, "eval", "team-a", "bob", "running", 6, model="H100", submit_ago=400,
        start_ago=60, placement=[{"node": "r1-n03", "gpus": [0, 1, 2, 3]},
                                 {"node": "r1-n04", "gpus": [5, 7]}]),
    job(44, "no", "team-b", "carol", "completed", 1, submit_ago=3 * 86400,
        start_ago=3 * 86400 - 10, end_ago=2 * 86400),
    job(45, "0123", "team-b", "dave", "pending", 2, submit_ago=30, reason="quota",
        why="waits: over quota # team-b"),
    job(46, "sweep-\u00e9t\u00e9", "team-a", "alice", "held", 1, submit_ago=7200),
]}
# the controller's queue position and start estimate, when it gives them
JOBS[42]["queue_position"] = {"tenant": 1, "cluster": 3}
JOBS[42]["estimated_start"] = {"time": NOW + 1500, "basis": "reservation"}
JOBS[45]["queue_position"] = {"tenant": 1, "cluster": 4}
JOBS[45]["estimated_start"] = {"reason": "not planned: only the first job that lacks room is planned"}
# the server's own rendering of a job's GPUs, which the CLI prints as it is
JOBS[46]["gpus_text"] = "4\u00d70.25 H100-80GB (1 GPU)"
EVENTS = {42: [{"id": 1, "time": NOW - 180, "kind": "submitted", "detail": None},
               {"id": 2, "time": NOW - 170, "kind": "pending", "detail": "capacity"},
               {"id": 3, "time": NOW - 100, "kind": "reserved", "detail": "at +25m"}],
          43: [{"id": 4, "time": NOW - 60, "kind": "run-ended",
                "detail": f"start={NOW - 3720:.3f} end={NOW - 60:.3f} gpus=4 model=H100 tier=0",
                "data": {"start": NOW - 3720, "end": NOW - 60, "gpus": 4, "model": "H100",
                         "tier": "guaranteed"}},
               {"id": 5, "time": NOW - 50, "kind": "preempted", "detail": "for job 7 ...",
                "data": {"for_job": 7, "for_tenant": "team-b", "tier": "guaranteed",
                         "cause": "reclaim", "signal": 15, "grace_s": 30.0,
                         "lost_gpu_s": 1800.0}}]}
NODES = {n["name"]: n for n in [
    {"name": "r1-n01", "state": "up", "virtual": False, "gpu_model": "A100-80GB", "gpus": 8,
     "gpus_free": 4, "cpu_milli": 96000, "cpu_free_milli": 48500, "memory_mib": 1048576,
     "memory_free_mib": 524288, "mig": [], "jobs": [43], "labels": {"rack": "r1"}},
    {"name": "r1-n02", "state": "drained", "drain_reason": "health: xid 79: GPU has fallen off the bus",
     "virtual": False, "gpu_model": "A100-80GB",
     "gpus": 8, "gpus_free": 8, "cpu_milli": 96000, "cpu_free_milli": 96000,
     "memory_mib": 1048576, "memory_free_mib": 1048576, "mig": [], "jobs": [], "labels": {}},
    {"name": "v1", "state": "up", "virtual": True, "gpu_model": None, "gpus": 1,
     "gpus_free": 0, "cpu_milli": 8000, "cpu_free_milli": 2000, "memory_mib": 65536,
     "memory_free_mib": 1024,
     "mig": [{"gpu": 0, "instances": [{"profile": "3g.40gb", "start": 0, "used": True},
                                      {"profile": "1g.10gb", "start": 4, "used": False}]}],
     "jobs": [45, 46], "labels": {"zone": "edge", "weird": "a: b",
                                       "breaks": "a\u2028b\u0085c\ufeffd\x7f"}},
]}
TENANTS = [
    {"name": "team-a", "parent": None, "weight": 1, "share": 0.5, "usage_share": 1.25,
     "guaranteed": {"gpu": {"A100-80GB": 16}, "cpu_milli": 64000, "memory_mib": 262144},
     "usage": {"gpu": {"A100-80GB": 20, "H100": 2}, "cpu_milli": 70000, "memory_mib": 1024}},
    {"name": "team-b", "parent": "org", "weight": 0.5, "share": 0.25, "usage_share": 0,
     "guaranteed": {"gpu": {"H100": 8}, "cpu_milli": 0, "memory_mib": 0},
     "usage": {"gpu": {}, "cpu_milli": 0, "memory_mib": 0}},
    {"name": "students", "parent": None, "weight": 1, "share": 2.9e-08, "usage_share": 0,
     "guaranteed": {"gpu": {}, "cpu_milli": 0, "memory_mib": 0},
     "usage": {"gpu": {}, "cpu_milli": 0, "memory_mib": 0}},
]
TOKEN_LIST = [
    {"name": "ops", "role": "admin", "tenant": None, "created": NOW - 10 * 86400,
     "revoked": None, "unix_user": None, "uid": None, "expires": None},
    {"name": "ci", "role": "user", "tenant": "team-a", "created": NOW - 3600,
     "revoked": NOW - 60, "unix_user": "ci", "uid": 2001, "expires": NOW + 86400},
]
IDEMPOTENT = {}
LAST = {}
NEXT_ID = [100]


class Answer(Exception):
    def __init__(self, status, code, message, fields=None, headers=None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.fields, self.headers = fields, headers or {}


def visible(role_tenant, j):
    return role_tenant[1] is None or j["tenant"] == role_tenant[1]


def page(items, query, key, default_limit):
    try:
        limit = int(query.get("limit", [str(default_limit)])[0])
        start = int(query.get("cursor", ["c0"])[0][1:])
    except ValueError:
        raise Answer(400, "invalid", "bad limit or cursor", [{"path": "limit", "reason": "must be 1..1000"}])
    if not 1 <= limit <= 1000:
        raise Answer(400, "invalid", "bad limit", [{"path": "limit", "reason": "must be 1..1000"}])
    end = start + limit
    return {key: items[start:end], "next_cursor": f"c{end}" if end < len(items) else None}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("fake_server: " + (fmt % args) + "\n")

    def send(self, status, obj=None, headers=None, raw=None):
        body = raw if raw is not None else (b"" if obj is None else json.dumps(obj).encode())
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.handle_any("GET")

    def do_POST(self):
        self.handle_any("POST")

    def do_PUT(self):
        self.handle_any("PUT")

    def do_DELETE(self):
        self.handle_any("DELETE")

    def handle_any(self, method):
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if url.path == "/_debug/last":
            return self.send(200, LAST)
        if url.path == "/healthz":
            return self.send(200, raw=b"ok")
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        with LOCK:
            LAST.clear()
            LAST.update({"method": method, "path": url.path, "query": query,
                         "content_type": self.headers.get("Content-Type"),
                         "idempotency_key": self.headers.get("Idempotency-Key"),
                         "authorization": self.headers.get("Authorization"),
                         "body_bytes": len(body), "body": body.decode(errors="replace")})
        try:
            auth = self.headers.get("Authorization", "")
            if not auth.startswith("Bearer ") or auth[7:] not in TOKENS:
                raise Answer(401, "unauthenticated", "no token, or an unknown or revoked token")
            who = TOKENS[auth[7:]]
            if parts[:1] != ["v1"]:
                raise Answer(404, "not_found", "no such path")
            with LOCK:
                status, obj, headers = self.route(method, parts[1:], query, body, who)
            self.send(status, obj, headers)
        except Answer as a:
            err = {"code": a.code, "message": a.message}
            if a.fields:
                err["fields"] = a.fields
            self.send(a.status, {"error": err}, a.headers)
        except SlowAnswer:
            time.sleep(SLOW_S)
            self.send(200, {"job": JOBS[42]})
        except RawAnswer as r:
            self.send(r.status, headers=r.headers, raw=r.body)

    def route(self, method, p, query, body, who):
        role = who[0]
        writes = method != "GET"
        if writes and role == "viewer":
            raise Answer(403, "forbidden", "role viewer may not change anything")
        if p == ["jobs"] and method == "POST":
            return self.submit(body, who)
        if p == ["jobs"] and method == "GET":
            if "state" in query and query["state"][0] not in STATES:
                raise Answer(400, "invalid", "bad query", [
                    {"path": "state", "reason": "must be one of " + ", ".join(STATES)}])
            items = [j for j in sorted(JOBS.values(), key=lambda j: j["id"]) if visible(who, j)
                     and all(j[k] == query[k][0] for k in ("tenant", "state", "owner")
                             if k in query)]
            return 200, page(items, query, "jobs", 100), None
        if len(p) >= 2 and p[0] == "jobs":
            return self.job(method, p, query, who)
        if p == ["nodes"] and method == "GET":
            return 200, {"nodes": list(NODES.values())}, None
        if len(p) >= 2 and p[0] == "nodes":
            return self.node(method, p, role)
        if p == ["tenants"] and method == "GET":
            return 200, {"tenants": TENANTS}, None
        if p == ["tenants"] and method == "PUT":
            if role != "admin":
                raise Answer(403, "forbidden", "only an admin sets quotas")
            if b"wieght" in body:
                raise Answer(400, "invalid", "the tenants file is invalid", [
                    {"path": "tenants.team-a", "reason": 'unknown key "wieght"'},
                    {"path": "tenants.team-b.guaranteed.gpu[A100]",
                     "reason": 'unknown GPU model "A100"'}])
            return 200, {"tenants": TENANTS}, None
        if p == ["usage"] and method == "GET":
            for k in ("from", "to"):
                if k in query:
                    try:
                        float(query[k][0])
                    except ValueError:
                        raise Answer(400, "invalid", "bad time", [{"path": k, "reason": "must be Unix seconds"}])
            return 200, {"usage": [
                {"tenant": "team-a", "tier": "guaranteed", "gpu_model": "A100-80GB",
                 "gpu_hours": 1234.5},
                {"tenant": "team-a", "tier": "opportunistic", "gpu_model": "H100",
                 "gpu_hours": 10.25},
                {"tenant": "team-b", "tier": "guaranteed", "gpu_model": None, "gpu_hours": 0}]}, None
        if p == ["tokens"]:
            return self.tokens(method, body, who)
        if len(p) == 2 and p[0] == "tokens" and method == "DELETE":
            if role != "admin":
                raise Answer(403, "forbidden", "only an admin revokes tokens")
            for t in TOKEN_LIST:
                if t["name"] == p[1]:
                    t["revoked"] = time.time()
                    return 204, None, None
            raise Answer(404, "not_found", f"no such token {p[1]}")
        if p and p[0] == "secrets":
            return self.secrets(method, p, query, body, role)
        raise Answer(405 if p and p[0] in ("jobs", "nodes", "tenants", "usage", "tokens") else 404,
                     "method_not_allowed" if p else "not_found", "no such method or path")

    def submit(self, body, who):
        ctype = self.headers.get("Content-Type", "")
        if ctype not in ("application/json", "application/yaml"):
            raise Answer(400, "invalid", f"unsupported content type {ctype}")
        if len(body) > BODY_MAX_BYTES:
            raise Answer(413, "too_large", "body above 1 MiB")
        if b"gpus: 98" in body:  # as tesserad says several: its message joins the fields
            raise Answer(400, "invalid", "tasks[0].gpus: must be 0..16; name: required", [
                {"path": "tasks[0].gpus", "reason": "must be 0..16"},
                {"path": "name", "reason": "required"}])
        if b"gpus: 99" in body or b'"gpus": 99' in body:
            raise Answer(400, "invalid", "the job spec is invalid", [
                {"path": "tasks[0].gpus", "reason": "must be 0..16"},
                {"path": "name", "reason": "required"}])
        key = self.headers.get("Idempotency-Key")
        if key and key in IDEMPOTENT:
            return 200, {"jobs": [JOBS[i] for i in IDEMPOTENT[key]]}, None
        count = 1
        if ctype == "application/json":
            try:
                spec = json.loads(body)
            except ValueError as e:
                raise Answer(400, "invalid", f"malformed JSON: {e}")
            count = len(spec) if isinstance(spec, list) else 1
        else:
            count = max(1, sum(1 for line in body.decode().splitlines()
                               if line.startswith("- name:")))
        ids = []
        for _ in range(count):
            NEXT_ID[0] += 1
            JOBS[NEXT_ID[0]] = job(NEXT_ID[0], "new", who[1] or "team-a", "admin", "pending", 1,
                                   submit_ago=0)
            ids.append(NEXT_ID[0])
        if key:
            IDEMPOTENT[key] = ids
        return 201, {"jobs": [JOBS[i] for i in ids]}, None

    def job(self, method, p, query, who):
        try:
            jid = int(p[1])
        except ValueError:
            raise Answer(404, "not_found", f"no such job {p[1]}")
        if jid == 500:
            raise Answer(500, "internal", "the store failed")
        if jid == 501:
            raise RawAnswer(200, b"<html>proxy error</html>")
        if jid == 502:
            raise SlowAnswer()
        if jid == 503:
            raise RawAnswer(302, b"", {"Location": "http://elsewhere.invalid/v1/jobs/503"})
        j = JOBS.get(jid)
        if not j or not visible(who, j):
            raise Answer(404, "not_found", f"no such job {jid}")
        action = p[2] if len(p) > 2 else None
        if method == "GET" and action is None:
            return 200, {"job": j}, None
        if method == "GET" and action == "explain":
            pending = j["state"] == "pending"
            return 200, {"job_id": jid, "state": j["state"], "reason": j["reason"],
                         "explanation": j["why"],
                         "reserved_at": NOW + 1500 if jid == 42 and pending else None}, None
        if method == "GET" and action == "events":
            return 200, page(EVENTS.get(jid, []), query, "events", 2), None
        if method == "GET" and action == "logs":
            rank = int(query.get("rank", ["0"])[0])
            if rank > 1:
                raise Answer(400, "invalid", "rank: the job has ranks 0..1")
            stream = query.get("stream", ["stdout"])[0]
            return 200, {"job": jid, "rank": rank, "stream": stream, "live": True,
                         "data": f"rank {rank} {stream} line 1\nline 2"}, None
        allowed = {"cancel": ("pending", "held", "running"), "hold": ("pending",),
                   "release": ("held",), "requeue": ("running", "failed")}
        after = {"cancel": "cancelled", "hold": "held", "release": "pending",
                 "requeue": "pending"}
        if method == "POST" and action in allowed:
            if j["state"] not in allowed[action]:
                raise Answer(409, "conflict", f"job {jid} is {j['state']}: cannot {action} it")
            j["state"] = "stopping" if action == "cancel" and j["state"] == "running" \
                else after[action]
            return 200, {"job": j}, None
        raise Answer(405, "method_not_allowed", "no such method")

    def node(self, method, p, role):
        if p[1] == "busy":
            raise Answer(429, "rate_limited", "too many requests", headers={"Retry-After": "7"})
        n = NODES.get(p[1])
        if not n:
            raise Answer(404, "not_found", f"no such node {p[1]}")
        if method == "GET" and len(p) == 2:
            return 200, {"node": n}, None
        if method == "POST" and len(p) == 3 and p[2] in ("drain", "resume"):
            if role != "admin":
                raise Answer(403, "forbidden", "only an admin drains or resumes nodes")
            # a node whose health still fails stays drained after a resume
            sick = n.get("drain_reason", "").startswith("health:")
            n["state"] = "drained" if p[2] == "drain" or sick else "up"
            return 200, {"node": n}, None
        raise Answer(405, "method_not_allowed", "no such method")

    def secrets(self, method, p, query, body, role):
        """The secret store (docs/api.md "Secrets"): never a value back."""
        if p == ["secrets", "events"] and method == "GET":
            if role not in ("admin", "tenant-admin"):
                raise Answer(403, "forbidden", "the secrets' audit is for admin and tenant-admin")
            return 200, {"events": [
                {"id": 3, "time": NOW - 60, "kind": "secret-set",
                 "detail": "tenant=team-a scope=user owner=alice name=K by=alice",
                 "data": {"tenant": "team-a", "scope": "user", "owner": "alice", "name": "K",
                          "by": "alice"}}], "next_cursor": None}, None
        if len(p) == 1 and method == "GET":
            return 200, {"secrets": [
                {"name": "WANDB_API_KEY", "scope": "user", "tenant": "team-a", "owner": "alice",
                 "updated": time.time() - 3 * 3600 - 60},
                {"name": "HF_TOKEN", "scope": "tenant", "tenant": "team-a", "owner": None,
                 "updated": time.time() - 60}]}, None
        if len(p) == 2 and method == "PUT":
            d = json.loads(body)
            if d.get("scope") == "tenant" and role == "user":
                raise Answer(403, "forbidden", "scope: only admin and tenant-admin change the "
                             "tenant's secrets (role user)")
            return (201 if p[1] != "HF_TOKEN" else 200), {"secret": {
                "name": p[1], "scope": d.get("scope") or "user", "tenant": "team-a",
                "owner": "ops", "updated": time.time()}}, None
        if len(p) == 2 and method == "DELETE":
            if p[1] == "NOPE":
                raise Answer(404, "not_found", 'secret "NOPE" (scope user) does not exist')
            return 204, None, None
        raise Answer(405, "method_not_allowed", "no such method")

    def tokens(self, method, body, who):
        if method == "GET":
            return 200, {"tokens": TOKEN_LIST if who[0] == "admin" else []}, None
        if method != "POST":
            raise Answer(405, "method_not_allowed", "no such method")
        if self.headers.get("Content-Type") != "application/json":
            raise Answer(400, "invalid", "tokens are created with JSON")
        try:
            req = json.loads(body)
        except ValueError as e:
            raise Answer(400, "invalid", f"malformed JSON: {e}")
        unknown = set(req) - {"name", "role", "tenant", "unix_user", "uid", "expires"}
        if unknown:
            raise Answer(400, "invalid", "unknown fields",
                         [{"path": k, "reason": "unknown field"} for k in sorted(unknown)])
        if who[0] not in ("admin", "tenant-admin"):
            raise Answer(403, "forbidden", "only admins create tokens")
        if any(t["name"] == req.get("name") for t in TOKEN_LIST):
            raise Answer(409, "conflict", f"token {req.get('name')} exists")
        tok = {"name": req["name"], "role": req["role"], "tenant": req.get("tenant"),
               "created": time.time(), "revoked": None, "unix_user": req.get("unix_user"),
               "uid": req.get("uid"), "expires": None}
        TOKEN_LIST.append(tok)
        return 201, {"token": dict(tok, secret="tsk_" + req["name"] + "_s3cr3t")}, None


class SlowAnswer(Exception):
    pass


class RawAnswer(Exception):
    def __init__(self, status, body, headers=None):
        super().__init__(status)
        self.status, self.body, self.headers = status, body, headers or {}


def main():
    if len(sys.argv) not in (2, 5) or (len(sys.argv) == 5 and sys.argv[2] != "--tls"):
        sys.stderr.write("usage: fake_server.py PORT_FILE [--tls CERT KEY]\n")
        return 2
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    if len(sys.argv) == 5:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[3], sys.argv[4])
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, sys.argv[1])
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
