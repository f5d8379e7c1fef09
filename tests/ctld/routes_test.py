#!/usr/bin/env python3
"""The router against the route table (issue 25): methods, paths, numbers.

    routes_test.py TESSERAD

Starts tesserad on a virtual cluster and checks what the one route table
promises (docs/api.md "Conventions", "Limits on input"): a known path with
another method is a 405 whose Allow lists the path's methods (nodes,
/healthz, /readyz, /metrics included); an unknown path is a 404; ids,
cursors and limits are digits only, and +2, %202, 02 or a number past
2^63-1 is a 400 naming the parameter; every operation the document lists
is routed, each with an operationId and no catch-all response; and the
server bugs the schemathesis run (ctld/openapi_schemathesis) found stay fixed.
"""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import FAILS, check, free_port  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-routes-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
open(os.path.join(TMP, "cluster.yaml"), "w").write("""topology:
  levels: [leaf, node, gpu]
node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'a-[1-2]', class: g4, topology: {leaf: la}}
""")
open(os.path.join(TMP, "tenants.yaml"), "w").write("""tenants:
  team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
""")
open(os.path.join(TMP, "tesserad.yaml"), "w").write(f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
virtual_nodes: all
state_dir: state
""")


def call(method, path, token=None, body=None):
    """(status, headers, parsed body or text). path is sent as given."""
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    h = {"Authorization": "Bearer " + token} if token else {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        h["Content-Type"] = "application/json"
    c.request(method, path, body=data, headers=h)
    r = c.getresponse()
    txt = r.read().decode()
    c.close()
    try:
        return r.status, r.headers, json.loads(txt)
    except ValueError:
        return r.status, r.headers, txt


def message(d):
    return d.get("error", {}).get("message", "") if isinstance(d, dict) else ""


log = open(os.path.join(TMP, "tesserad.log"), "ab")
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=log, stderr=log)
try:
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(URL + "/readyz", timeout=2) as r:
                if r.status == 200:
                    break
        except Exception:
            time.sleep(0.1)
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()

    # methods: 405 with Allow on a known path, with or without a token
    for m in ("DELETE", "PUT", "POST", "PATCH"):
        st, h, _ = call(m, "/v1/nodes/a-1", admin)
        check(st == 405 and h.get("Allow") == "GET, HEAD", f"{m} /v1/nodes/a-1: 405 Allow GET ({st} "
              f"{h.get('Allow')})")
    for p in ("/healthz", "/readyz", "/metrics"):
        for tok in (None, admin):
            st, h, _ = call("POST", p, tok)
            check(st == 405 and h.get("Allow") == "GET, HEAD", f"POST {p} (token: {bool(tok)}): 405 "
                  f"Allow GET ({st} {h.get('Allow')})")
    st, h, _ = call("GET", "/v1/jobs/1/cancel", admin)
    check(st == 405 and h.get("Allow") == "POST", f"GET a POST-only job action: 405 ({st})")
    st, h, _ = call("DELETE", "/v1/jobs", admin)
    check(st == 405 and h.get("Allow") in ("POST, GET, HEAD", "GET, HEAD, POST"),
          f"DELETE /v1/jobs: 405 Allow GET and POST ({st} {h.get('Allow')})")
    st, h, _ = call("PUT", "/v1/secrets/events", admin)
    check(st == 405 and h.get("Allow") == "GET, HEAD", f"the fixed path wins: PUT /v1/secrets/events "
          f"405 Allow GET ({st} {h.get('Allow')})")
    # HEAD is GET without the body: the same status and headers, the same roles
    for p, tok in (("/v1/nodes/a-1", admin), ("/healthz", None), ("/metrics", admin),
                   ("/v1/jobs", None)):
        st, h, body = call("HEAD", p, tok)
        gst, gh, _ = call("GET", p, tok)
        n = int(h.get("Content-Length") or 0)
        check(st == gst and body == "" and n > 0 and h.get("Content-Type") ==
              gh.get("Content-Type"), f"HEAD {p}: {gst} as GET, its length, no body ({st} {n} "
              f"{body!r})")
    st, h, _ = call("HEAD", "/v1/jobs/1/cancel", admin)
    check(st == 405 and h.get("Allow") == "POST", f"HEAD a POST-only job action: 405 ({st})")
    for p in ("/v1/nope", "/v1/jobs/1/nope", "/v1/nodes/", "/v1//jobs", "/v1/jobs/1/cancel/x"):
        st, _, _ = call("GET", p, admin)
        check(st == 404, f"GET {p}: 404 ({st})")

    # a job to read
    spec = {"tenant": "team-a", "name": "r", "tasks": [{"count": 1, "gpus": 1}],
            "duration": "1h", "command": ["true"]}
    st, _, d = call("POST", "/v1/jobs", admin, spec)
    check(st == 201, f"submit: 201 ({st} {d})")
    jid = d["jobs"][0]["id"] if st == 201 else 1
    st, _, d = call("GET", f"/v1/jobs/{jid}", admin)
    check(st == 200 and d["job"]["id"] == jid, "the job reads by its id")

    # strict numbers: only the id as this API writes it reads the job
    for bad in (f"+{jid}", f"%20{jid}", f"0{jid}", f"{jid}%20", f"-{jid}", f"{jid}.0",
                f"0x{jid}", "0", "9223372036854775808", "99999999999999999999999"):
        st, _, d = call("GET", f"/v1/jobs/{bad}", admin)
        check(st == 400 and message(d).startswith("id:"), f"GET /v1/jobs/{bad}: 400 naming id "
              f"({st} {message(d)})")
    st, _, d = call("GET", "/v1/jobs/9223372036854775807", admin)
    check(st == 404, f"the largest id reads as no job: 404 ({st})")
    st, _, d = call("POST", f"/v1/arrays/+{jid}/cancel", admin)
    check(st == 400 and message(d).startswith("id:"), f"an array id with a sign: 400 ({st})")
    for q, param in (("cursor=18446744073709551617", "cursor"), ("cursor=01", "cursor"),
                     ("cursor=+1", "cursor"), ("cursor=%201", "cursor"),
                     ("cursor=9223372036854775808", "cursor"), ("limit=+5", "limit"),
                     ("limit=05", "limit"), ("limit=0", "limit"), ("limit=1001", "limit")):
        st, _, d = call("GET", f"/v1/jobs?{q}", admin)
        check(st == 400 and message(d).startswith(param + ":"),
              f"GET /v1/jobs?{q}: 400 naming {param} ({st} {message(d)})")
        st, _, d = call("GET", f"/v1/jobs/{jid}/events?{q}", admin)
        check(st == 400 and message(d).startswith(param + ":"),
              f"GET /v1/jobs/{{id}}/events?{q}: 400 naming {param} ({st})")
    st, _, d = call("GET", "/v1/jobs?cursor=0&limit=1000", admin)
    check(st == 200 and any(j["id"] == jid for j in d["jobs"]), "cursor=0 is the first page")
    st, _, d = call("GET", "/v1/secrets/events?cursor=18446744073709551617", admin)
    check(st == 400 and message(d).startswith("cursor:"), f"the secrets' audit cursor too ({st})")
    # a list of states: the job is listed under a list that holds its state,
    # and left out of one that does not; a wrong name is a 400 naming it, as
    # is an empty item
    st, _, d = call("GET", f"/v1/jobs/{jid}", admin)
    now = d["job"]["state"]
    other = [x for x in ("pending", "held", "running", "completed") if x != now][:2]
    st, _, d = call("GET", f"/v1/jobs?state={other[0]},{now}&limit=1000", admin)
    check(st == 200 and any(j["id"] == jid for j in d["jobs"]) and
          all(j["state"] in (other[0], now) for j in d["jobs"]),
          f"state={other[0]},{now} lists the {now} job, only those two states ({st})")
    st, _, d = call("GET", f"/v1/jobs?state={','.join(other)}&limit=1000", admin)
    check(st == 200 and not any(j["id"] == jid for j in d["jobs"]),
          f"state={','.join(other)} leaves the {now} job out ({st})")
    # newest first: the same jobs by id descending, the cursor paging below
    spec2 = dict(spec, name="r2")
    st, _, d2 = call("POST", "/v1/jobs", admin, spec2)
    jid2 = d2["jobs"][0]["id"] if st == 201 else 0
    st, _, d = call("GET", "/v1/jobs?order=newest&limit=1", admin)
    check(st == 200 and [j["id"] for j in d["jobs"]] == [jid2] and d["next_cursor"] == str(jid2),
          f"order=newest: the newest job first ({st} {d.get('jobs') and d['jobs'][0]['id']})")
    st, _, d = call("GET", f"/v1/jobs?order=newest&limit=1&cursor={jid2}", admin)
    check(st == 200 and [j["id"] for j in d["jobs"]] == [jid],
          f"and its cursor pages to the one before ({st})")
    st, _, d = call("GET", "/v1/jobs?order=latest", admin)
    check(st == 400 and message(d).startswith("order:"), f"order=latest: 400 naming order ({st})")
    for q, bad in (("pending,runing", "runing"), ("pending,", ""), ("", "")):
        st, _, d = call("GET", f"/v1/jobs?state={q}", admin)
        check(st == 400 and message(d).startswith(f'state: unknown state "{bad}"'),
              f"state={q}: 400 naming {bad!r} ({st} {message(d)})")
    # a query parameter the API does not read: a typo is refused, not ignored
    for path, param in (("/v1/jobs?stat=pending", "stat"), (f"/v1/jobs/{jid}?x=1", "x"),
                        ("/v1/nodes?state=up&limt=5", "limt")):
        st, _, d = call("GET", path, admin)
        check(st == 400 and message(d).startswith(param + ": unknown query parameter"),
              f"GET {path}: 400 naming {param} ({st} {message(d)})")

    # what the property-based run found: an empty Idempotency-Key and a
    # secret's tenant that is no string were taken
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=10)
    c.request("POST", "/v1/jobs", body=json.dumps(spec).encode(),
              headers={"Authorization": "Bearer " + admin, "Content-Type": "application/json",
                       "Idempotency-Key": ""})
    r = c.getresponse()
    d = json.loads(r.read().decode())
    c.close()
    check(r.status == 400 and "Idempotency-Key" in json.dumps(d), f"an empty Idempotency-Key: "
          f"400 naming it ({r.status})")
    st, _, d = call("PUT", "/v1/secrets/s1?tenant=team-a", admin,
                    {"value": "x", "scope": "tenant", "tenant": {}})
    check(st == 400 and message(d).startswith("tenant:"), f"a secret's tenant {{}}: 400 ({st} "
          f"{message(d)})")

    # roles from the table
    st, _, d = call("POST", "/v1/tokens", admin, {"name": "val", "role": "viewer",
                                                   "tenant": "team-a"})
    viewer = d["token"]["secret"] if st == 201 else None
    st, _, _ = call("POST", "/v1/nodes/a-1/drain", viewer)
    check(st == 403, f"a viewer may not drain: 403 ({st})")
    st, _, _ = call("POST", "/v1/agent/sync", admin, {})
    check(st == 403, f"admin is no node credential: 403 on /v1/agent/sync ({st})")

    # the document is the table
    st, _, doc = call("GET", "/v1/openapi.json", admin)
    check(st == 200 and doc.get("openapi", "").startswith("3.1"), "OpenAPI 3.1")
    ops = [(p, m, o) for p, ms in doc.get("paths", {}).items() for m, o in ms.items()]
    ids = [o.get("operationId") for _, _, o in ops]
    check(all(ids) and len(set(ids)) == len(ids), f"every operation has its own operationId "
          f"({len(ids)} operations)")
    check(not [1 for _, _, o in ops if "default" in o["responses"]], "no catch-all response")
    for p, m, o in ops:
        path = p.replace("{id}", str(jid)).replace("{name}", "a-1")
        st, h, _ = call(m.upper(), path)
        # without a token: routed (401, or the public answer), never 404/405
        check(st not in (404, 405), f"{m.upper()} {p} is routed ({st})")
        if o.get("security") == [{"bearer": []}] and p != "/metrics":
            check(st == 401, f"{m.upper()} {p} without a token: 401 ({st})")
    for name in ("submitJob", "setSecret", "createToken",
                 "replaceTenants"):
        o = next((o for _, _, o in ops if o["operationId"] == name), {})
        check("requestBody" in o, f"{name} declares its request body")
    o = next((o for _, _, o in ops if o["operationId"] == "getJob"), {})
    check("$ref" in json.dumps(o["responses"]["200"]) and "400" in o["responses"],
          "getJob declares its answer's schema and its errors")
finally:
    proc.terminate()
    proc.wait(timeout=20)
print(f"{len(FAILS)} failed" if FAILS else "all passed")
sys.exit(1 if FAILS else 0)
