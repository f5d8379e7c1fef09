#!/usr/bin/env python3
"""Who a credential is, over the API (docs/api.md "Tokens", docs/tesserad.md
"oidc"): the Unix identity a token carries and who may give it, token
expiry, and OpenID Connect ID tokens from an issuer this test serves on
loopback with its own keys (tests/lib/oidc_issuer.py, openssl), whose key
set tesserad finds through the issuer's discovery document.

    identity_test.py TESSERAD TESSERA_CLI

One tesserad with two agent nodes (no agent runs: tasks are not the point
here, tests/promises/identity_test.py runs them). Tenant t lets its
tenant-admin map alice and bob within uids 2000..2999; tenant u declares
nothing. Every wait is bounded.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

TESSERAD, CLI = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import RUN_AS, RUN_UID, check, finish, free_port, http_call  # noqa: E402
from harness import stop_all, wait_ready  # noqa: E402
from oidc_issuer import Issuer  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-identity-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
ISS = Issuer(TMP)
ISS.serve()


def write(name, text):
    open(os.path.join(TMP, name), "w").write(text)


write("cluster.yaml", """topology:
  levels: [node, gpu]
node_classes:
  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'r-[1-2]', class: g8}
""")
write("tenants.yaml", """tenants:
  t: {unix_users: [alice, bob], uid_range: [2000, 2999]}
  u: {}
""")
write("tesserad.yaml", f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
limits: {{requests_per_s: 100000, burst: 100000}}
oidc:
  issuer: {ISS.url}
  audience: tessera
  role_claim: role
  unix_user_claim: unix_user
  unix_users: {{alice: 2001, {RUN_AS}: {RUN_UID}}}
""")


def call(method, path, token, body=None):
    return http_call(URL, method, path, token, body, timeout=30)


def err(d):
    return d.get("error", {}).get("message", "") if isinstance(d, dict) else str(d)


def spec(tenant):
    return {"tenant": tenant, "name": "j", "command": ["true"],
            "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}]}


def mint(token, body):
    return call("POST", "/v1/tokens", token, body)


def mapping_rules(admin):
    st, d = mint(admin, {"name": "ta", "role": "tenant-admin", "tenant": "t"})
    check(st == 201 and d["token"]["unix_user"] is None and d["token"]["uid"] is None,
          "a token without a mapping says so (unix_user and uid null)")
    ta = d["token"]["secret"]
    st, d = mint(admin, {"name": "ua", "role": "tenant-admin", "tenant": "u"})
    ua = d["token"]["secret"]
    st, d = mint(admin, {"name": "alice", "role": "user", "tenant": "t", "unix_user": "alice",
                         "uid": 2001})
    check(st == 201 and d["token"]["unix_user"] == "alice" and d["token"]["uid"] == 2001,
          f"admin maps a user token: {st} {d}")
    check("warnings" not in d, f"the first token of uid 2001: no warning: {d}")
    # the same Unix identity in another tenant: created, with a warning naming it
    st, d = mint(admin, {"name": "alice-u", "role": "user", "tenant": "u", "unix_user": "alice",
                         "uid": 2001})
    w = d.get("warnings") or [""]
    check(st == 201 and len(w) == 1 and "also runs tasks of tenant \"t\"" in w[0] and
          "token \"alice\"" in w[0], f"uid 2001 in a second tenant warns, naming it: {st} {d}")
    st, d = mint(admin, {"name": "alice2", "role": "user", "tenant": "t", "unix_user": "alice",
                         "uid": 2001})
    check(st == 201 and "also runs tasks of tenant \"u\"" in str(d.get("warnings")),
          f"and a further token of t warns of u's: {d}")
    st, d = mint(admin, {"name": "x1", "role": "user", "tenant": "t", "unix_user": "alice"})
    check(st == 400 and err(d).startswith("uid:"), f"unix_user without uid: 400 naming uid: {d}")
    st, d = mint(admin, {"name": "x2", "role": "user", "tenant": "t", "unix_user": "Root!",
                         "uid": 5})
    check(st == 400 and err(d).startswith("unix_user:"), f"a bad Unix name: 400: {d}")
    st, d = mint(admin, {"name": "x3", "role": "user", "tenant": "t", "unix_user": "alice",
                         "uid": -1})
    check(st == 400 and err(d).startswith("uid:"), f"a negative uid: 400: {d}")
    st, d = mint(admin, {"name": "x4", "role": "viewer", "tenant": "t", "unix_user": "alice",
                         "uid": 2001})
    check(st == 400 and "runs no tasks" in err(d), f"a viewer has no Unix identity: {d}")
    # a tenant-admin, within its tenant's declared mapping only
    st, d = mint(ta, {"name": "bob", "role": "user", "tenant": "t", "unix_user": "bob",
                      "uid": 2002})
    check(st == 201 and d["token"]["uid"] == 2002, f"tenant-admin maps a listed user: {st} {d}")
    st, d = mint(ta, {"name": "x5", "role": "user", "tenant": "t", "unix_user": "carol",
                      "uid": 2003})
    check(st == 403 and "not among tenant \"t\"'s unix_users" in err(d),
          f"tenant-admin cannot map an unlisted user: {d}")
    st, d = mint(ta, {"name": "x6", "role": "user", "tenant": "t", "unix_user": "bob",
                      "uid": 4000})
    check(st == 403 and "outside tenant \"t\"'s uid_range [2000, 2999]" in err(d),
          f"tenant-admin cannot map a uid outside the range: {d}")
    st, d = mint(ta, {"name": "x7", "role": "user", "tenant": "t", "unix_user": "bob", "uid": 0})
    check(st == 403 and "only admin maps a token to uid 0" in err(d),
          f"tenant-admin never maps root: {d}")
    st, d = mint(ua, {"name": "x8", "role": "user", "tenant": "u", "unix_user": "bob",
                      "uid": 2002})
    check(st == 403 and "lets its tenant-admin map no Unix user" in err(d),
          f"a tenant that declares nothing: only admin maps: {d}")
    st, d = mint(ta, {"name": "root", "role": "user", "tenant": "t"})
    check(st == 201 and d["token"]["unix_user"] is None and d["token"]["name"] == "t.root",
          "a token named root is only a name (a tenant-admin's: t.root): it maps no Unix user")
    root_named = d["token"]["secret"]
    st, d = call("POST", "/v1/jobs", root_named, spec("t"))
    check(st == 403 and d["error"]["code"] == "no_unix_identity" and "\"t.root\" has no Unix "
          "identity" in err(d), f"a token without a mapping cannot submit: {st} {d}")
    return ta


def expiry(admin):
    st, d = mint(admin, {"name": "short", "role": "user", "tenant": "t", "unix_user": "alice",
                         "uid": 2001, "expires": "2s"})
    check(st == 201 and abs(d["token"]["expires"] - (time.time() + 2)) < 2,
          f"expires as a duration: {d}")
    short = d["token"]["secret"]
    st, _ = call("GET", "/v1/whoami", short)
    check(st == 200, "a token works before it expires")
    time.sleep(2.5)
    st, d = call("GET", "/v1/whoami", short)
    check(st == 401 and err(d) == "token expired", f"an expired token: 401 token expired: {d}")
    st, d = mint(admin, {"name": "later", "role": "viewer", "tenant": "t",
                         "expires": "2099-01-31T12:00:00+01:00"})
    check(st == 201 and d["token"]["expires"] == 4073540400.0,
          f"expires as RFC 3339 with an offset: {d}")
    for bad in ["2001-01-01T00:00:00Z", "yesterday", "2099-01-31T12:00:00", "0s"]:
        st, d = mint(admin, {"name": "bad", "role": "viewer", "tenant": "t", "expires": bad})
        check(st == 400 and err(d).startswith("expires:"), f"expires {bad!r}: 400: {d}")
    st, d = call("GET", "/v1/tokens", admin)
    row = [t for t in d["tokens"] if t["name"] == "later"]
    check(row and row[0]["expires"] == 4073540400.0, "the list shows expires")


def oidc(admin):
    def tok(kid="k1", **kw):
        c = ISS.claims(sub="alice", tenant="t", role="user", unix_user="alice")
        c.update(kw)
        return ISS.token({k: v for k, v in c.items() if v is not None}, kid=kid)

    st, d = call("GET", "/v1/whoami", tok())
    check(st == 200 and d == {"name": "oidc:alice", "role": "user", "tenant": "t",
                              "unix_user": "alice", "uid": 2001, "expires": d.get("expires")},
          f"an RS256 ID token maps its claims: {st} {d}")
    st, d = call("GET", "/v1/whoami", tok(kid="e1"))
    check(st == 200 and d.get("name") == "oidc:alice", f"an ES256 ID token: {st} {d}")
    cases = [
        ("a bad signature", ISS.token(ISS.claims(sub="alice", tenant="t"), tamper=True),
         "ID token: bad signature"),
        ("another audience", tok(aud="someone-else"), "ID token: aud: not for this audience"),
        ("an expired token", tok(exp=int(time.time()) - 3600), "ID token: expired at"),
        ("a token not yet valid", tok(nbf=int(time.time()) + 3600), "not valid before"),
        ("another issuer", tok(iss="https://evil.test"), "ID token: iss:"),
        ("an unknown kid", None, "ID token: no RS256 key \"k-gone\""),
        ("an unlisted Unix user", tok(unix_user="mallory"),
         "Unix user \"mallory\" is not among oidc.unix_users"),
        ("an unknown tenant", tok(tenant="nope"), "claim tenant: \"nope\" is not a tenant"),
        ("a node role", tok(role="node"), "claim role: \"node\" is not a role"),
    ]
    ISS.add_key("k-gone", publish=False)
    cases[5] = (cases[5][0], tok(kid="k-gone"), cases[5][2])
    for what, t, reason in cases:
        st, d = call("GET", "/v1/whoami", t)
        check(st == 401 and reason in err(d), f"{what}: 401 with the reason: {st} {err(d)}")
    # the issuer rotates its keys: an unknown kid makes tesserad read the set again
    time.sleep(1.1)
    before = ISS.fetches
    ISS.add_key("k2")
    st, d = call("GET", "/v1/whoami", tok(kid="k2"))
    check(st == 200 and ISS.fetches == before + 1,
          f"a rotated key is fetched once and then accepted: {st} {err(d)} "
          f"({ISS.fetches - before} fetches)")
    # an ID token submits like a token, its job owned by oidc:alice
    st, d = call("POST", "/v1/jobs", tok(), spec("t"))
    check(st == 201 and d["jobs"][0]["owner"] == "oidc:alice", f"an ID token submits: {st} {d}")
    st, d = call("GET", "/v1/whoami", tok(unix_user=None))
    check(st == 200 and d["unix_user"] is None, "an ID token without the claim maps no Unix user")
    st, d = call("POST", "/v1/jobs", tok(unix_user=None), spec("t"))
    check(st == 403 and d["error"]["code"] == "no_unix_identity",
          f"... and cannot submit work for agents: {st} {err(d)}")


def cli_login():
    home = os.path.join(TMP, "home")
    os.makedirs(home)
    env = dict(os.environ, HOME=home, XDG_CONFIG_HOME="", TESSERA_URL=URL, TESSERA_TOKEN="")
    good = ISS.token(ISS.claims(sub="alice", tenant="t", role="user", unix_user="alice"))
    r = subprocess.run([CLI, "login", "--id-token", "-"], input=good + "\n", env=env,
                       capture_output=True, text=True, timeout=30)
    kept = os.path.join(home, ".config", "tessera", "id-token")
    check(r.returncode == 0 and "signed in as oidc:alice" in r.stdout and
          "unix user alice" in r.stdout, f"tessera login --id-token -: {r.stdout} {r.stderr}")
    check(os.path.exists(kept) and os.stat(kept).st_mode & 0o777 == 0o600,
          "the ID token is kept 0600")
    r = subprocess.run([CLI, "-o", "json", "jobs"], env=env, capture_output=True, text=True,
                       timeout=30)
    check(r.returncode == 0 and "oidc:alice" in r.stdout,
          f"later commands use the kept ID token: {r.returncode} {r.stderr}")
    bad = ISS.token(ISS.claims(sub="alice", tenant="t"), tamper=True)
    r = subprocess.run([CLI, "login", "--id-token", "-"], input=bad, env=env,
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 5 and "bad signature" in r.stderr,
          f"login with a bad token exits 5 with the reason: {r.returncode} {r.stderr}")
    r = subprocess.run([CLI, "tokens", "create", "x", "--role", "user", "--unix-user", "a"],
                       env=env, capture_output=True, text=True, timeout=30)
    check(r.returncode == 2 and "go together" in r.stderr, "CLI: --unix-user needs --uid")


def bad_config():
    """An oidc section that names its keys twice is refused at start."""
    write("bad.yaml", open(os.path.join(TMP, "tesserad.yaml")).read().replace(
        "  audience: tessera\n", "  audience: tessera\n  jwks_url: http://x/k\n  jwks_file: k\n"))
    r = subprocess.run([TESSERAD, "--config", os.path.join(TMP, "bad.yaml")],
                       capture_output=True, text=True, timeout=30)
    check(r.returncode != 0 and "oidc: jwks_file or jwks_url, not both" in r.stderr,
          f"oidc with two key sources is refused naming it: {r.stderr.strip()}")


bad_config()
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "w"))
try:
    check(wait_ready(URL), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    st, d = call("GET", "/v1/whoami", admin)
    check(st == 200 and d["name"] == "admin" and d["unix_user"] is None,
          f"the first admin token maps nobody without admin_unix_user: {d}")
    mapping_rules(admin)
    expiry(admin)
    oidc(admin)
    cli_login()
    st, d = call("GET", "/v1/tokens", admin)
    print(json.dumps([(t["name"], t["unix_user"], t["uid"]) for t in d["tokens"]]))
finally:
    stop_all([proc])
    ISS.stop()
finish(TMP, ["log"])
