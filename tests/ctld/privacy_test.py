#!/usr/bin/env python3
"""Privacy inside a tenant and the secret store (docs/secrets.md), against a
real tesserad on virtual nodes (SQLite; PostgreSQL too when TS_TEST_PG_URL
names a server: a database of its own is made and dropped).

    privacy_test.py TESSERAD

1. The role x field matrix: for a job alice submitted with an env value, a
   secret, a command holding a script, and for each caller (owner,
   same-tenant user, viewer, tenant-admin without and with the tenant's
   privacy policy, other tenant, admin, cluster-viewer), every field reads
   as the table ROWS says: env, command, script (anywhere in the answer),
   logs, secrets (names in the spec and GET /v1/secrets), events.
2. The secret API: values never read back; scopes; bad names and bodies
   are 400s naming the field; a job naming an unknown secret is a 400
   naming secrets[i]; audit events for set and delete.
3. A run that uses the secret, on n-2 served by a scripted agent (the
   agent protocol over HTTP): the value is in the desired state of the rank
   about to start and gone once it reports running; a secrets-used event
   names it; its output event is hidden from others, its logs 403. Then no
   plaintext: the SQLite file (and WAL), a pg_dump of the PostgreSQL store
   and the controller's log hold no secret value.
4. Keys: a controller whose key file is missing or wrong while secrets are
   stored refuses to start, naming the file; --rotate-secrets-key
   re-encrypts so that only the new key opens them; a key file others may
   read is refused.
Every wait is bounded.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

TESSERAD = sys.argv[1]
PG = os.environ.get("TS_TEST_PG_URL")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import (ADMIN_IDENTITY, USER_IDENTITY, with_root, check, finish, free_port,  # noqa: E402
                     http_call, stop_all,
                     wait_ready)

TMP = tempfile.mkdtemp(prefix="tessera-privacy-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
SECRET = "s3cr3t-VALUE-4f9a1c"        # a secret's value: never in an answer, log or store
ENV_VALUE = "env-value-77d2"          # an env value: the owner's, hidden from others
SCRIPT = "echo script-body-5e1b"      # the script inside the command

TENANTS = """tenants:
  t: {}
  p: {privacy: {admins_see_jobs: true}}
  u: {}
"""


def write(name, text, mode=0o644):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def pg_database():
    """A database of its own on TS_TEST_PG_URL's server (dropped at the end)."""
    if not PG:
        return None, None
    name = f"tessera_privacy_{os.getpid()}"
    subprocess.run(["psql", PG, "-qc", f"DROP DATABASE IF EXISTS {name}"], check=True,
                   capture_output=True)
    subprocess.run(["psql", PG, "-qc", f"CREATE DATABASE {name}"], check=True,
                   capture_output=True)
    return PG.rsplit("/", 1)[0] + "/" + name, name


STORE, PGDB = pg_database()
write("cluster.yaml", "topology:\n  levels: [node, gpu]\nnode_classes:\n"
      "  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}\n"
      "nodes:\n  - {names: 'n-[1-2]', class: g8}\n")
write("tenants.yaml", with_root(TENANTS))
CONFIG = write("tesserad.yaml", f"listen: 127.0.0.1:{PORT}\ncluster: cluster.yaml\n"
               "tenants: tenants.yaml\nvirtual_nodes: [n-1]\nstate_dir: state\n"
               "limits: {requests_per_s: 100000, burst: 100000}\n" + ADMIN_IDENTITY
               + (f"store: {STORE}\n" if STORE else ""))
KEY = os.path.join(TMP, "state", "secrets.key")
PROCS = []


def start(log="tesserad.log", expect_up=True):
    out = open(os.path.join(TMP, log), "a")
    p = subprocess.Popen([TESSERAD, "--config", CONFIG], stdout=out, stderr=subprocess.STDOUT)
    if expect_up:
        PROCS.append(p)
        if not wait_ready(URL, 30):
            check(False, "tesserad answers /readyz")
    return p


def stop():
    stop_all(PROCS)
    PROCS.clear()


def call(method, path, token=None, body=None):
    return http_call(URL, method, path, token, body)


def token(admin, name, role, tenant):
    body = {"name": name, "role": role, "tenant": tenant}
    if role in ("user", "tenant-admin"):
        body.update(USER_IDENTITY)  # submitters run tasks as a mapped Unix user
    st, ans = call("POST", "/v1/tokens", admin, body)
    check(st == 201, f"token {name} ({role} of {tenant}): 201, got {st} {ans}")
    return ans["token"]["secret"]


def submit(tok, tenant, name):
    spec = {"tenant": tenant, "name": name, "tasks": [{"count": 1, "gpus": 1}],
            "duration": "1h", "env": {"PLAIN": ENV_VALUE},
            "command": ["/bin/sh", "-c", SCRIPT], "secrets": ["API_KEY"]}
    st, ans = call("POST", "/v1/jobs", tok, spec)
    check(st == 201, f"submit {name} to {tenant}: 201, got {st} {ans}")
    return ans["jobs"][0]["id"] if st == 201 else 0


# ---- 1. the matrix -----------------------------------------------------------------------

# what each caller reads of alice's job: content (env, command, script, the
# spec's secret names, logs), and the events (listed, never with content)
FULL, HIDDEN, NONE = "full", "hidden", "404"
ROWS = [  # caller, tenant of the job, what it reads
    ("owner", "t", FULL), ("bob", "t", HIDDEN), ("viewer", "t", HIDDEN),
    ("tadmin", "t", HIDDEN), ("padmin", "p", FULL), ("other", "t", NONE),
    ("admin", "t", FULL), ("cviewer", "t", HIDDEN), ("pbob", "p", HIDDEN),
]


def read_as(who, tok, job):
    st, ans = call("GET", f"/v1/jobs/{job}", tok)
    if st == 404:
        return NONE, ans, st
    text = str(ans)
    spec = ans["job"]["spec"]
    shown = (spec["env"] == {"PLAIN": ENV_VALUE} and SCRIPT in spec["command"]
             and spec["secrets"] == [{"name": "API_KEY", "env": "API_KEY"}])
    hidden = (spec["env"] == "hidden" and spec["command"] == "hidden"
              and spec["secrets"] == "hidden" and ENV_VALUE not in text and SCRIPT not in text
              and set(ans["job"]["hidden"]) == {"env", "command", "secrets", "logs"})
    return FULL if shown else HIDDEN if hidden else "mixed: " + text[:300], ans, st


def matrix(tok, jobs):
    for who, tenant, want in ROWS:
        job = jobs[tenant]
        got, ans, st = read_as(who, tok[who], job)
        check(got == want, f"matrix {who} / job of {tenant}: env, command, script, secret "
              f"names read {want}, got {got}")
        check(SECRET not in str(ans), f"matrix {who}: no secret value in GET /v1/jobs/{job}")
        # the list says the same as the job
        st, lst = call("GET", f"/v1/jobs?tenant={tenant}", tok[who])
        mine = [j for j in lst.get("jobs", []) if j["id"] == job] if st == 200 else []
        lwant = [] if want == NONE else [want]
        lgot = [("hidden" if j["spec"]["env"] == "hidden" else FULL) for j in mine]
        check(lgot == lwant, f"matrix {who}: GET /v1/jobs lists it as {lwant}, got {lgot}")
        # logs: content too (this job has no output: 409 on a virtual node, 404 pending)
        st, lg = call("GET", f"/v1/jobs/{job}/logs", tok[who])
        lwant = {FULL: (409, 404), HIDDEN: (403,), NONE: (404,)}[want]
        check(st in lwant and (want != NONE or "does not exist" in lg["error"]["message"]),
              f"matrix {who}: logs answer {lwant}, got {st} {lg}")
        # events: metadata for every reader of the tenant, never content
        st, ev = call("GET", f"/v1/jobs/{job}/events", tok[who])
        check(st == (404 if want == NONE else 200), f"matrix {who}: events answer, got {st}")
        check(SECRET not in str(ev) and (want == FULL or ENV_VALUE not in str(ev)),
              f"matrix {who}: events carry no secret or env value")
        # the secret store: names to the tenant's users, never values
        st, sl = call("GET", "/v1/secrets" + ("?tenant=" + tenant if who in ("admin",) else ""),
                      tok[who])
        names = sorted((s["name"], s["scope"]) for s in sl.get("secrets", [])) if st == 200 else []
        swant = {"owner": [("API_KEY", "user")], "bob": [], "viewer": None,
                 "tadmin": [("API_KEY", "user")], "padmin": [("API_KEY", "user")],
                 "other": [], "admin": [("API_KEY", "user")], "cviewer": None,
                 "pbob": []}[who]
        check((st == 403 if swant is None else names == swant) and SECRET not in str(sl),
              f"matrix {who}: GET /v1/secrets lists {swant}, got {st} {sl}")


def api_checks(admin, tok, jobs):
    owner = tok["owner"]
    st, ans = call("PUT", "/v1/secrets/API_KEY", owner, {"value": "replaced-" + SECRET})
    check(st == 200 and "value" not in ans["secret"] and SECRET not in str(ans),
          f"a replaced secret: 200 without its value, got {st} {ans}")
    st, ans = call("PUT", "/v1/secrets/API_KEY", owner, {"value": SECRET})
    for body, field in [({}, "value"), ({"value": 3}, "value"), ({"value": "x", "k": 1}, "k"),
                        ({"value": "x", "scope": "team"}, "scope"),
                        ({"value": "x" * 16385}, "value")]:
        st, ans = call("PUT", "/v1/secrets/X", owner, body)
        msg = ans["error"]["message"] if st == 400 else ""
        check(st == 400 and msg.startswith(field), f"PUT {str(body)[:40]}: 400 naming "
              f"{field}, got {st} {msg}")
    st, ans = http_call(URL, "PUT", "/v1/secrets/X", owner, raw=b'{"value": "' + SECRET.encode())
    check(st == 400 and ans["error"]["message"].startswith("body") and SECRET not in str(ans),
          f"a body cut short: 400 that does not quote the value, got {st} {ans}")
    st, ans = call("PUT", "/v1/secrets/9bad", owner, {"value": "x"})
    check(st == 400 and ans["error"]["message"].startswith("name"), f"a bad name: 400, got {st}")
    st, ans = call("PUT", "/v1/secrets/T", tok["bob"], {"value": "x", "scope": "tenant"})
    check(st == 403, f"a user cannot set a tenant secret: 403, got {st}")
    st, ans = call("PUT", "/v1/secrets/T", tok["viewer"], {"value": "x"})
    check(st == 403, f"a viewer has no secrets: 403, got {st}")
    st, ans = call("PUT", "/v1/secrets/SHARED", tok["tadmin"], {"value": SECRET, "scope": "tenant"})
    check(st == 201 and ans["secret"]["scope"] == "tenant", f"tenant-admin sets a tenant secret: "
          f"201, got {st} {ans}")
    st, ans = call("GET", "/v1/secrets", tok["bob"])
    check(st == 200 and [s["name"] for s in ans["secrets"]] == ["SHARED"],
          f"bob lists the tenant's secret, not alice's: got {ans}")
    spec = {"tenant": "t", "name": "nosecret", "tasks": [{"count": 1, "gpus": 1}],
            "secrets": ["API_KEY", "MISSING"]}
    st, ans = call("POST", "/v1/jobs", tok["bob"], spec)
    check(st == 400 and ans["error"]["fields"][0]["path"] == "secrets[0]",
          f"bob cannot name alice's secret: 400 at secrets[0], got {st} {ans}")
    spec["secrets"] = ["SHARED", {"name": "SHARED", "file": "s.txt"}]
    st, ans = call("POST", "/v1/jobs", tok["bob"], spec)
    check(st == 201, f"bob names the tenant's secret as a variable and a file: 201, got {st} {ans}")
    spec["secrets"] = ["SHARED", "SHARED"]
    st, ans = call("POST", "/v1/jobs", tok["bob"], spec)
    check(st == 400 and "secrets[1]" in str(ans), f"a variable twice: 400 at secrets[1], got {st}")
    st, _ = call("DELETE", "/v1/secrets/SHARED?scope=tenant", tok["bob"])
    check(st == 403, f"bob cannot delete the tenant's secret: 403, got {st}")
    st, _ = call("DELETE", "/v1/secrets/SHARED?scope=tenant", tok["tadmin"])
    check(st == 204, f"tenant-admin deletes it: 204, got {st}")
    st, _ = call("DELETE", "/v1/secrets/SHARED?scope=tenant", tok["tadmin"])
    check(st == 404, f"deleted twice: 404, got {st}")
    st, _ = call("PUT", "/v1/secrets/API_KEY", admin, {"value": "x"})
    check(st == 400, f"an admin names the tenant: 400 without one, got {st}")
    # the audit: every set and delete, with who did it; never a value
    st, au = call("GET", "/v1/secrets/events", tok["tadmin"])
    kinds = [(e["kind"], e["data"].get("name"), e["data"].get("by")) for e in au.get("events", [])]
    check(st == 200 and kinds == [("secret-set", "API_KEY", "owner")] * 3 +
          [("secret-set", "SHARED", "tadmin"), ("secret-deleted", "SHARED", "tadmin")]
          and SECRET not in str(au), f"tenant-admin reads t's audit: {st} {kinds}")
    st, au = call("GET", "/v1/secrets/events?limit=2", admin)
    check(st == 200 and len(au["events"]) == 2 and au["next_cursor"],
          f"admin reads every tenant's audit, by pages: {st} {au}")
    st, au2 = call("GET", f"/v1/secrets/events?limit=1000&cursor={au['next_cursor']}", admin)
    every = au["events"] + au2.get("events", [])
    check(st == 200 and len(every) == 6 and au2["next_cursor"] is None and
          {e["data"]["tenant"] for e in every} == {"t", "p"},
          f"the next page goes on to the end, both tenants' events: {au2}")
    for who in ("owner", "viewer"):
        st, _ = call("GET", "/v1/secrets/events", tok[who])
        check(st == 403, f"{who} cannot read the audit: 403, got {st}")
    st, _ = call("GET", "/v1/secrets/events?limit=5x", admin)
    check(st == 400, f"a bad limit: 400, got {st}")


def agent_run(admin, tok):
    """A job that names the secret runs on n-2 through a scripted agent."""
    node = token(admin, "n-2", "node", None)
    st, d = call("POST", "/v1/agent/register", node, {"node": "n-2", "discovery": {}, "tasks": []})
    check(st == 200, f"n-2's agent registers: {st} {d}")
    gen = [d.get("gen", 0) if st == 200 else 0]

    def sync(tasks):
        st, d = call("POST", "/v1/agent/sync", node, {"node": "n-2", "gen": gen[0],
                                                      "tasks": tasks, "wait_s": 0.5})
        gen[0] = d.get("gen", gen[0]) if st == 200 else gen[0]
        return d.get("tasks", []) if st == 200 else []
    spec = {"tenant": "t", "name": "real", "tasks": [{"count": 1, "gpus": 8}],
            "command": ["/bin/sh", "-c", SCRIPT],
            "secrets": ["API_KEY", {"name": "API_KEY", "file": "key.txt"}]}
    st, ans = call("POST", "/v1/jobs", tok["owner"], spec)
    check(st == 201, f"a job naming the secret: {st} {ans}")
    job = ans["jobs"][0]["id"] if st == 201 else 0
    got = None
    deadline = time.time() + 20
    while time.time() < deadline and not got:
        got = [t for t in sync([]) if t["job"] == job]
    check(got and got[0].get("secrets") == [{"env": "API_KEY", "value": SECRET},
                                            {"file": "key.txt", "value": SECRET}],
          f"the rank about to start carries the values: {got and got[0].get('secrets')}")
    later = [t for t in sync([{"job": job, "rank": 0, "state": "running"}]) if t["job"] == job]
    later = [t for t in sync([{"job": job, "rank": 0, "state": "running"}]) if t["job"] == job]
    check(later and "secrets" not in later[0] and SECRET not in str(later),
          f"once it runs its desired state has no value: {later}")
    sync([{"job": job, "rank": 0, "state": "exited", "exit_code": 0,
           "output": {"stdout": "out " + ENV_VALUE + "\n", "stderr": ""}}])
    deadline = time.time() + 20
    while time.time() < deadline and call("GET", f"/v1/jobs/{job}", admin)[1].get(
            "job", {}).get("state") != "completed":
        sync([{"job": job, "rank": 0, "state": "exited", "exit_code": 0}])
    ev = call("GET", f"/v1/jobs/{job}/events", tok["owner"])[1].get("events", [])
    used = [e for e in ev if e["kind"] == "secrets-used"]
    check(used and used[0]["data"] == {"names": "API_KEY,API_KEY"} and SECRET not in str(ev),
          f"a secrets-used event names them, no value: {used}")
    out = [e for e in ev if e["kind"] == "output"]
    check(out and ENV_VALUE in out[0]["detail"], f"the owner reads its output event: {out}")
    ev = call("GET", f"/v1/jobs/{job}/events", tok["bob"])[1].get("events", [])
    out = [e for e in ev if e["kind"] == "output"]
    check(out and out[0]["detail"] == "hidden" and out[0]["data"] == {}
          and ENV_VALUE not in str(ev), f"bob sees the output event, hidden: {out}")
    st, lg = call("GET", f"/v1/jobs/{job}/logs", tok["owner"])
    check(st == 200 and ENV_VALUE in lg.get("data", ""), f"the owner reads the logs: {st} {lg}")
    st, lg = call("GET", f"/v1/jobs/{job}/logs", tok["bob"])
    check(st == 403 and ENV_VALUE not in str(lg), f"bob's logs: 403, got {st}")
    # a failed rank's last output line is quoted in the job's why, its
    # rank's reason, its failed event and its explanation: the owner's too
    st, ans = call("POST", "/v1/jobs", tok["owner"], dict(spec, name="fails", secrets=[]))
    job = ans["jobs"][0]["id"] if st == 201 else 0
    deadline = time.time() + 20
    while time.time() < deadline and not [t for t in sync([]) if t["job"] == job]:
        pass
    sync([{"job": job, "rank": 0, "state": "running"}])
    leak = "DB_PASSWORD=" + ENV_VALUE
    deadline = time.time() + 20
    while time.time() < deadline and call("GET", f"/v1/jobs/{job}", admin)[1].get(
            "job", {}).get("state") != "failed":
        sync([{"job": job, "rank": 0, "state": "exited", "exit_code": 1,
               "output": {"stdout": "", "stderr": leak + "\n"}}])
    for who, sees in (("owner", True), ("admin", True), ("bob", False), ("viewer", False),
                      ("tadmin", False), ("cviewer", False)):
        doc = call("GET", f"/v1/jobs/{job}", tok[who] if who != "admin" else admin)[1]
        lst = call("GET", "/v1/jobs?tenant=t", tok[who] if who != "admin" else admin)[1]
        ev = call("GET", f"/v1/jobs/{job}/events", tok[who] if who != "admin" else admin)[1]
        ex = call("GET", f"/v1/jobs/{job}/explain", tok[who] if who != "admin" else admin)[1]
        j = doc.get("job", {})
        failed = [e["detail"] for e in ev.get("events", []) if e["kind"] == "failed"]
        want = "last output: " + (leak if sees else "hidden")
        ranks = j.get("ranks") or [{}]
        check(want in (j.get("why") or "") and want in (ranks[0] or {}).get("reason", "")
              and failed and want in failed[0] and want in (ex.get("explanation") or ""),
              f"{who} reads a failed rank's last output as {want!r} in why, ranks, the "
              f"failed event and explain: {j.get('why')!r} {failed} {ex.get('explanation')!r}")
        if not sees:
            check(leak not in str(doc) + str(lst) + str(ev) + str(ex),
                  f"{who}: the output line is nowhere in the job, the list, events or explain")


def plaintext_checks():
    """No secret value in the store's files, a dump of it, or the log."""
    state = os.path.join(TMP, "state")
    files = [os.path.join(state, f) for f in os.listdir(state) if f.startswith("tessera.db")]
    if not STORE:
        check(files, "the SQLite files are there to read")
    data = b"".join(open(f, "rb").read() for f in files)
    check(not STORE and SECRET.encode() not in data and b"API_KEY" in data or STORE,
          f"{[os.path.basename(f) for f in files]}: the secret's name, not its value")
    if STORE:
        dump = subprocess.run(["pg_dump", STORE], capture_output=True, timeout=60).stdout
        check(b"API_KEY" in dump and SECRET.encode() not in dump,
              f"pg_dump ({len(dump)} bytes): the secret's name, not its value")
    log = open(os.path.join(TMP, "tesserad.log"), "rb").read()
    check(b"secret-set" in log and SECRET.encode() not in log,
          "the controller's log: audit lines, no secret value")


def key_checks():
    """Refusals without the key; rotation."""
    stop()
    os.rename(KEY, KEY + ".moved")
    p = start("nokey.log", expect_up=False)
    rc = p.wait(timeout=30)
    log = open(os.path.join(TMP, "nokey.log")).read()
    check(rc == 1 and "secrets_key_file" in log and "missing" in log and not os.path.exists(KEY),
          f"no key file with secrets stored: refused to start, naming it (rc {rc}): {log[-300:]}")
    subprocess.run([TESSERAD, "--gen-secrets-key", KEY], check=True, capture_output=True)
    check(oct(os.stat(KEY).st_mode & 0o777) == "0o600", "--gen-secrets-key: a 0600 file")
    p = start("wrongkey.log", expect_up=False)
    rc = p.wait(timeout=30)
    log = open(os.path.join(TMP, "wrongkey.log")).read()
    check(rc == 1 and "wrong key" in log and KEY in log, f"a wrong key: refused to start, "
          f"naming the file (rc {rc}): "
          f"{log[-300:]}")
    new = KEY + ".new"
    os.rename(KEY, new)
    os.rename(KEY + ".moved", KEY)
    r = subprocess.run([TESSERAD, "--config", CONFIG, "--rotate-secrets-key", KEY, new],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 0 and "re-encrypted" in r.stderr, f"rotation: {r.stderr}")
    p = start("oldkey.log", expect_up=False)  # the old key opens nothing now
    rc = p.wait(timeout=30)
    check(rc == 1, f"after rotation the old key is refused (rc {rc})")
    shutil.copy(new, KEY)
    os.chmod(KEY, 0o644)
    p = start("mode.log", expect_up=False)
    rc = p.wait(timeout=30)
    check(rc == 1 and "chmod 600" in open(os.path.join(TMP, "mode.log")).read(),
          f"a key file others may read: refused (rc {rc})")
    os.chmod(KEY, 0o600)
    start()  # the new key opens them
    return True


def main():
    start()
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    check(oct(os.stat(KEY).st_mode & 0o777) == "0o600", "the key file made at first start: 0600")
    tok = {"admin": admin}
    for name, role, tenant in [("owner", "user", "t"), ("bob", "user", "t"),
                               ("viewer", "viewer", "t"), ("tadmin", "tenant-admin", "t"),
                               ("other", "user", "u"), ("powner", "user", "p"),
                               ("pbob", "user", "p"), ("padmin", "tenant-admin", "p")]:
        tok[name] = token(admin, name, role, tenant)
    tok["cviewer"] = token(admin, "cviewer", "cluster-viewer", None)
    for who in ("owner", "powner"):
        st, ans = call("PUT", "/v1/secrets/API_KEY", tok[who], {"value": SECRET})
        check(st == 201 and ans["secret"] == {**ans["secret"], "name": "API_KEY", "scope": "user"}
              and SECRET not in str(ans), f"{who} sets a secret: 201 without its value, got {st}")
    jobs = {"t": submit(tok["owner"], "t", "mine"), "p": submit(tok["powner"], "p", "mine")}
    tok_p = dict(tok, owner=tok["powner"])
    matrix(tok, jobs)
    # the owner of p's job reads it in full too
    got, _, _ = read_as("powner", tok_p["owner"], jobs["p"])
    check(got == FULL, f"p's owner reads its job in full, got {got}")
    api_checks(admin, tok, jobs)
    agent_run(admin, tok)
    plaintext_checks()
    key_checks()
    st, ans = call("GET", "/v1/secrets", tok["owner"])
    check(st == 200 and [s["name"] for s in ans["secrets"]] == ["API_KEY"],
          f"after rotation and restart the secret is there: {st} {ans}")


try:
    main()
finally:
    stop()
    if PGDB:
        subprocess.run(["psql", PG, "-qc", f"DROP DATABASE IF EXISTS {PGDB}"],
                       capture_output=True)
finish(TMP, ["tesserad.log"])
