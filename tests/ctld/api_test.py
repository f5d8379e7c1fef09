#!/usr/bin/env python3
"""End-to-end tests of tesserad over HTTP on loopback (docs/api.md).

    api_test.py TESSERAD [STORE_URL]

Starts tesserad on a virtual cluster in a temporary folder (SQLite, or the
given store URL, e.g. a PostgreSQL database), then checks authentication and
roles, submission (idempotency, every error at once, tenant isolation), the
scheduling loop (jobs run and finish on virtual nodes, borrowing and reclaim by
preemption with grace and requeue), cancel/hold/release, explain and events,
pagination, body and rate limits, metrics, and that a kill -9 loses no
acknowledged job. Every wait is bounded.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

TESSERAD = sys.argv[1]
STORE = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("TS_TEST_PG_URL")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import FAILS, check, free_port, http_call, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-api-")

CLUSTER = """topology:
  levels: [leaf, node, gpu]
node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'a-[1-2]', class: g4, topology: {leaf: la}}
  - {names: 'b-[1-2]', class: g4, topology: {leaf: lb}}
"""
TENANTS = """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 16}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 8}}}
"""


PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def call(method, path, token=None, body=None, headers=None, raw=None):
    return http_call(URL, method, path, token, body, headers, raw)
with open(os.path.join(TMP, "cluster.yaml"), "w") as f:
    f.write(CLUSTER)
with open(os.path.join(TMP, "tenants.yaml"), "w") as f:
    f.write(TENANTS)
with open(os.path.join(TMP, "tesserad.yaml"), "w") as f:
    f.write(f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
virtual_nodes: all
state_dir: state
limits: {{requests_per_s: 40, burst: 60}}
scheduler:
  interval: 200ms
  min_runtime: 1s
  reclaim_min_runtime: 0s
  grace: 1s
  backoff: 1s
""".replace("200ms", "0.2s"))


def start():
    args = [TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")]
    if STORE:
        args += ["--store", STORE]
    log = open(os.path.join(TMP, "tesserad.log"), "ab")
    p = subprocess.Popen(args, stdout=log, stderr=log)
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(URL + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return p
        except Exception:
            pass
        if p.poll() is not None:
            break
        time.sleep(0.1)
    print(open(os.path.join(TMP, "tesserad.log")).read())
    raise SystemExit("tesserad did not become ready")


def spec(tenant, name, gpus=4, count=1, tier="guaranteed", duration="1s", **kw):
    s = {"tenant": tenant, "name": name, "tier": tier,
         "tasks": [{"count": count, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 1024}],
         "time_limit": "1h", "duration": duration, "command": ["true"]}
    s.update(kw)
    return s


def job(tok, jid):
    st, d = call("GET", f"/v1/jobs/{jid}", tok)
    return d["job"] if st == 200 else None


proc = start()
try:
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    check(oct(os.stat(os.path.join(TMP, "state", "admin.token")).st_mode & 0o777) == "0o600",
          "the admin token file is readable by its owner only")
    # authentication
    check(call("GET", "/v1/jobs")[0] == 401, "no token: 401")
    check(call("GET", "/v1/jobs", "tsk_wrong")[0] == 401, "unknown token: 401")
    check(call("GET", "/healthz")[0] == 200, "healthz")
    toks = {}
    for name, role, tenant in [("alice", "user", "team-a"), ("bob", "user", "team-b"),
                               ("vera", "cluster-viewer", None), ("tam", "tenant-admin", "team-a")]:
        st, d = call("POST", "/v1/tokens", admin, {"name": name, "role": role, "tenant": tenant})
        check(st == 201 and d["token"]["secret"].startswith("tsk_"), f"token {name} created")
        toks[name] = d["token"]["secret"]
    st, _ = call("POST", "/v1/tokens", admin, {"name": "alice", "role": "user", "tenant": "team-a"})
    check(st == 409, "duplicate token name: 409")
    st, _ = call("POST", "/v1/tokens", toks["tam"], {"name": "x", "role": "admin"})
    check(st == 403, "tenant-admin cannot create an admin token")
    st, d = call("GET", "/v1/tokens", toks["alice"])
    check(st == 200 and [t["name"] for t in d["tokens"]] == ["alice"], "a user lists its own token only")

    # submission
    st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "first"),
                 headers={"Idempotency-Key": "k1"})
    check(st == 201 and len(d["jobs"]) == 1, "submit: 201")
    first = d["jobs"][0]["id"]
    st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "first"),
                 headers={"Idempotency-Key": "k1"})
    check(st == 200 and d["jobs"][0]["id"] == first, "a retried Idempotency-Key gives the same job")
    bad = spec("team-a", "bad name!", gpus=99)
    bad["wat"] = 1
    st, d = call("POST", "/v1/jobs", toks["alice"], bad)
    paths = [f["path"] for f in d.get("error", {}).get("fields", [])] if st == 400 else []
    check(st == 400 and len(paths) >= 3, f"bad spec: 400 with every error ({paths})")
    st, _ = call("POST", "/v1/jobs", toks["alice"], spec("team-b", "intruder"))
    check(st == 403, "submitting to another tenant: 403")
    st, _ = call("POST", "/v1/jobs", toks["vera"], spec("team-a", "v"))
    check(st == 403, "a viewer cannot submit")
    st, _ = call("GET", f"/v1/jobs/{first}", toks["bob"])
    check(st == 404, "another tenant's job is a 404")
    st, _ = call("GET", f"/v1/jobs/{first}", toks["vera"])
    check(st == 200, "a cluster-viewer reads any job")
    st, d = call("POST", "/v1/jobs", toks["alice"], raw=b"x" * (1 << 20 + 1) + b"xx",
                 headers={"Content-Type": "application/json"})
    check(st == 413, "a body above 1 MiB: 413")
    st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "huge", gpus=4, count=3,
                                                         tier="opportunistic",
                                                         topology={"required": "leaf"}))
    st2, d2 = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "over", gpus=4, count=3))
    check(st2 == 400 and d2["error"]["fields"][0]["path"] == "tasks" and
          "tenant team-a's guarantee is" in d2["error"]["message"],
          f"a guaranteed job above its tenant's guarantee is refused at submission: {st2} {d2}")
    huge = d["jobs"][0]["id"] if st == 201 else None

    # it runs and finishes on the virtual nodes
    wait_for(lambda: (job(toks["alice"], first) or {}).get("state") == "completed",
             "the first job completes")
    st, d = call("GET", f"/v1/jobs/{first}/events", toks["alice"])
    kinds = [e["kind"] for e in d["events"]] if st == 200 else []
    check(kinds[:3] == ["submitted", "started", "finished"], f"events {kinds}")
    if huge:
        wait_for(lambda: (job(toks["alice"], huge) or {}).get("reason") == "invalid",
                 "a gang larger than any leaf waits as invalid")
        st, d = call("GET", f"/v1/jobs/{huge}/explain", toks["alice"])
        check(st == 200 and d["explanation"] and "leaf" in d["explanation"], f"explain: {d}")
        st, d = call("POST", f"/v1/jobs/{huge}/cancel", toks["alice"])
        check(st == 200 and d["job"]["state"] == "cancelled", "cancel a pending job")
        st, _ = call("POST", f"/v1/jobs/{huge}/cancel", toks["alice"])
        check(st == 409, "cancelling twice: 409")

    # borrowing and reclaim: bob borrows everything, alice's guaranteed job takes 8 back
    st, d = call("POST", "/v1/jobs", toks["bob"], spec("team-b", "borrow", gpus=4, tier="opportunistic",
                                                       duration="60s", array_size=4))
    bids = [j["id"] for j in d["jobs"]] if st == 201 else []
    check(st == 201 and len(bids) == 4, "an array of 4 opportunistic jobs")
    wait_for(lambda: all((job(toks["bob"], b) or {}).get("state") == "running" for b in bids),
             "team-b borrows all 16 GPUs")
    time.sleep(1.2)  # past min_runtime
    st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "reclaim", gpus=4, count=2,
                                                         duration="2s"))
    rid = d["jobs"][0]["id"]
    wait_for(lambda: sum((job(toks["bob"], b) or {}).get("preemptions", 0) for b in bids) >= 2,
             "two borrowed jobs are preempted")
    wait_for(lambda: (job(toks["alice"], rid) or {}).get("state") in ("running", "completed"),
             "the guaranteed job starts on the reclaimed GPUs")
    st, d = call("GET", f"/v1/jobs/{bids[0]}/events", toks["bob"])
    st2, d2 = call("GET", f"/v1/jobs/{bids[-1]}/events", toks["bob"])
    allk = [e["kind"] for e in d["events"] + d2["events"]]
    check("preempted" in allk, f"a preempted event is recorded ({allk})")
    wait_for(lambda: "requeued" in [e["kind"] for b in bids for e in call("GET", f"/v1/jobs/{b}/events", toks["bob"])[1]["events"]],
             "the victim requeues after its grace")

    # hold / release
    st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "later", gpus=4, count=4,
                                                       tier="opportunistic", duration="1s"))
    lid = d["jobs"][0]["id"]
    st, d = call("POST", f"/v1/jobs/{lid}/hold", toks["alice"])
    check(st == 200 and d["job"]["state"] == "held", "hold")
    st, d = call("POST", f"/v1/jobs/{lid}/release", toks["alice"])
    check(st == 200 and d["job"]["state"] == "pending", "release")

    # pagination over an array of 250
    st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", "many", gpus=0, duration="1s",
                                                         array_size=250))
    check(st == 201 and len(d["jobs"]) == 250, "an array of 250")
    # (elements not yet jobs are one "arrays" entry on the first page: array_lazy.c)
    seen, cur, pages, rest = [], None, 0, 0
    while pages < 20:
        st, d = call("GET", "/v1/jobs?limit=100" + (f"&cursor={cur}" if cur else ""), toks["alice"])
        pages += 1
        seen += [j["id"] for j in d["jobs"]]
        rest += sum(a["pending"] for a in d.get("arrays", []))
        cur = d["next_cursor"]
        if not cur:
            break
    check(seen == sorted(set(seen)) and len(seen) + rest >= 250,
          f"pagination: {len(seen)} jobs in {pages} pages and {rest} elements not yet jobs")
    st, d = call("GET", "/v1/jobs?limit=0", toks["alice"])
    check(st == 400, "limit=0: 400")

    # nodes and tenants
    st, d = call("GET", "/v1/nodes", toks["vera"])
    check(st == 200 and len(d["nodes"]) == 4, "nodes")
    st, _ = call("POST", "/v1/nodes/a-1/drain", toks["alice"])
    check(st == 403, "a user cannot drain")
    st, d = call("POST", "/v1/nodes/a-1/drain", toks["vera"])
    msg = d.get("error", {}).get("message", "") if isinstance(d, dict) else ""
    check(st == 403 and "role cluster-viewer may not" in msg,
          f"a cluster-viewer's refusal names its role as its token does: {st} {msg!r}")
    st, d = call("POST", "/v1/nodes/a-1/drain", admin)
    check(st == 200 and d["node"]["state"] == "drained", "admin drains a node")
    st, d = call("POST", "/v1/nodes/a-1/resume", admin)
    check(st == 200 and d["node"]["state"] == "up", "and resumes it")
    st, d = call("POST", "/v1/nodes/b-2/drain", admin)
    st, d = call("GET", "/v1/tenants", toks["vera"])
    check(st == 200 and {t["name"] for t in d["tenants"]} >= {"team-a", "team-b"}, "tenants")
    # fair share is public within the cluster (api.md): a tenant's user reads every tenant
    st, d = call("GET", "/v1/tenants", toks["alice"])
    check(st == 200 and {t["name"] for t in d["tenants"]} >= {"team-a", "team-b"},
          "a tenant's user reads every tenant's guarantee, usage and share")
    st, d = call("GET", "/v1/usage", admin)
    check(st == 200 and any(u["tenant"] == "team-b" for u in d["usage"]), f"usage {d}")
    # a preempted run keeps counting: its "run-ended" event is in team-b's usage
    runs = [e for b in bids for e in call("GET", f"/v1/jobs/{b}/events", toks["bob"])[1]["events"]
            if e["kind"] == "run-ended"]
    ended_gpu_s = 0.0
    for e in runs:
        f = dict(kv.split("=") for kv in e["detail"].split())
        ended_gpu_s += (float(f["end"]) - float(f["start"])) * int(f["gpus"])
    b_hours = sum(u["gpu_hours"] for u in d["usage"] if u["tenant"] == "team-b")
    check(runs and b_hours * 3600 >= ended_gpu_s - 1e-6,
          f"usage counts preempted runs ({ended_gpu_s:.1f} GPU-s ended, {b_hours * 3600:.1f} counted)")
    st, d = call("GET", "/v1/openapi.json", toks["vera"])
    check(st == 200 and "/v1/jobs" in d["paths"], "openapi")

    # metrics
    st, txt = call("GET", "/metrics", admin)
    check(st == 200 and "tessera_scheduling_cycle_seconds_bucket" in txt
          and "tessera_preemptions_total" in txt, "metrics")
    import shutil
    if shutil.which("promtool"):
        pr = subprocess.run(["promtool", "check", "metrics"], input=txt.encode(),
                            capture_output=True, timeout=60)
        check(pr.returncode == 0, "promtool check metrics: " +
              (pr.stdout + pr.stderr).decode().strip()[:300])
    else:
        print("note: promtool not installed; metrics format not checked by it")

    # rate limit: 40/s, burst 60
    # 240 requests from 16 threads: even slowed tenfold they outrun 60 + 40/s
    import concurrent.futures
    t0 = time.time()
    with concurrent.futures.ThreadPoolExecutor(16) as ex:
        codes = list(ex.map(lambda _: call("GET", "/v1/tenants", toks["vera"])[0],
                            range(240)))
    took = time.time() - t0
    allowed = 60 + 40 * took
    check(429 in codes or 240 <= allowed,
          f"rate limit: {codes.count(429)} of 240 answered 429 in {took:.1f} s")

    # kill -9 loses nothing acknowledged
    acked = []
    for i in range(30):
        st, d = call("POST", "/v1/jobs", toks["alice"], spec("team-a", f"k{i}", gpus=0, duration="30s"))
        if st == 201:
            acked.append(d["jobs"][0]["id"])
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    proc = start()
    got = [job(toks["alice"], a) for a in acked]
    check(all(g is not None for g in got) and len(acked) == 30,
          f"after kill -9 all {len(acked)} acknowledged jobs are there")
    check(all(g["state"] in ("pending", "running", "completed") for g in got if g),
          "and they resume")
    st, d = call("GET", "/v1/nodes/b-2", admin)
    check(st == 200 and d["node"]["state"] == "drained", "a drain survives the restart")
finally:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
# HTTPS: the same daemon with tls.cert/tls.key (a self-signed certificate)
import shutil
import ssl
if shutil.which("openssl"):
    cert, key = os.path.join(TMP, "cert.pem"), os.path.join(TMP, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                    "-out", cert, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"], capture_output=True, timeout=60)
    tport = free_port()
    with open(os.path.join(TMP, "tls.yaml"), "w") as f:
        f.write(f"listen: 127.0.0.1:{tport}\ncluster: cluster.yaml\ntenants: tenants.yaml\n"
                f"virtual_nodes: all\nstate_dir: tls-state\ntls: {{cert: cert.pem, key: key.pem}}\n")
    tp = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tls.yaml")],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        ctx = ssl.create_default_context(cafile=cert)
        ok = False
        for _ in range(100):
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{tport}/healthz", context=ctx,
                                            timeout=2) as r:
                    ok = r.status == 200
                    break
            except Exception:
                time.sleep(0.1)
        check(ok, "HTTPS with tls.cert and tls.key")
        plain_refused = False
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{tport}/healthz", timeout=2)
        except Exception:
            plain_refused = True
        check(plain_refused, "plain HTTP to the HTTPS port gets no answer")
    finally:
        tp.terminate()
        tp.wait(timeout=10)
else:
    print("note: openssl not installed; HTTPS not checked")

if FAILS:
    print(open(os.path.join(TMP, "tesserad.log")).read()[-3000:])
    print(f"{len(FAILS)} FAILED:", *FAILS, sep="\n  ")
    sys.exit(1)
print("all passed")
