"""Promises of identity on a live cluster (docs/agent-tasks.md "User",
docs/api.md "Tokens", docs/tesserad.md "oidc"): a task runs as exactly its
submitter's mapped Unix user and uid, for every role and every kind of
credential (admin token, tenant-admin and user tokens, an OpenID Connect ID
token); a credential without a mapping runs nothing; a user missing on the
node, a uid that differs from the mapping and uid 0 in a tenant that does
not allow root are each refused with the reason in the job.

The scenarios that run tasks as other users make throwaway Unix users with
useradd (and remove them after), so they need root and are skipped
without it, as the agents then can only run tasks as themselves.
"""
import os
import subprocess
import tempfile
import time

from cluster import Node
from harness import check
from oidc_issuer import Issuer

# Throwaway accounts: names and uids no real system uses.
USERS = {"tsid-alice": 41001, "tsid-bob": 41002, "tsid-carol": 41003}
GHOST = ("tsid-ghost", 41999)  # mapped, but never created on the node

KEYS = tempfile.mkdtemp(prefix="tessera-identity-keys-")
ISSUER = Issuer(KEYS)
ISSUER.url = "https://issuer.identity.test"
ISSUER.write_jwks(os.path.join(KEYS, "jwks.json"))

CLUSTER = {
    "nodes": [Node("r-1", leaf="l1"), Node("r-2", leaf="l1")],
    "tenants": """tenants:
  team-a:
    allow_root: false
    unix_users: [tsid-bob, tsid-carol]
    uid_range: [41000, 41999]
    guaranteed: {gpu: {H100-80GB: 8}}
  team-r: {allow_root: true, guaranteed: {gpu: {H100-80GB: 8}}}
""",
    "config": f"""scheduler: {{interval: 0.2s, min_runtime: 1s, grace: 2s, backoff: 1s}}
oidc:
  issuer: {ISSUER.url}
  audience: tessera
  jwks_file: {os.path.join(KEYS, "jwks.json")}
  role_claim: role
  unix_user_claim: unix_user
  unix_users: {{tsid-carol: {USERS["tsid-carol"]}}}
""",
}


def spec(tenant, name, command=("sh", "-c", "echo uid=$(id -u) user=$(id -un)")):
    return {"tenant": tenant, "name": name, "command": list(command), "workdir": "/tmp",
            "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 500, "memory_mib": 256}],
            "time_limit": "5m"}


def add_users():
    for name, uid in USERS.items():
        subprocess.run(["userdel", name], capture_output=True)
        r = subprocess.run(["useradd", "-M", "-u", str(uid), "-s", "/bin/sh", name],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"useradd {name} (uid {uid}): {r.stderr.strip()}")


def remove_users():
    for name in USERS:
        subprocess.run(["userdel", name], capture_output=True)


def ran_as(c, jid):
    """The uid the job's rank 0 printed, read from its agent's output."""
    j = c.wait_job(jid, ("completed", "failed"), 30)
    if not j:
        return None
    node = (j.get("placement") or [{}])[0].get("node", "r-1")
    out = c.output(node, jid)
    for word in out.split():
        if word.startswith("uid="):
            return int(word[4:])
    print(f"  job {jid}: state {j.get('state')} reason {j.get('reason')} why {j.get('why')!r} "
          f"output {out!r}")
    return None


def refusal(c, jid):
    """A refused job's reason and its events' text."""
    j = c.wait_job(jid, ("failed", "completed"), 30) or {}
    text = " ".join(str(e.get("detail", "")) + " " + str(e.get("data", ""))
                    for e in c.events(jid))
    return j.get("state"), str(j.get("reason")) + " " + str(j.get("why")), text


def scenario_every_credential_runs_as_its_mapped_uid(c):
    """agent-tasks.md: the task runs as exactly the Unix user and uid its
    submitter's credential maps, whatever the role or the kind of credential."""
    add_users()
    try:
        paths = {
            "admin": c.token("id-admin", "admin", unix_user="tsid-alice",
                             uid=USERS["tsid-alice"]),
            "tenant-admin": c.token("id-ta", "tenant-admin", "team-a", unix_user="tsid-bob",
                                    uid=USERS["tsid-bob"]),
        }
        # a user token the tenant-admin maps, within its tenant's unix_users and uid_range
        st, d = c.call("POST", "/v1/tokens", {"name": "id-user", "role": "user",
                                              "tenant": "team-a", "unix_user": "tsid-carol",
                                              "uid": USERS["tsid-carol"]}, paths["tenant-admin"])
        check(st == 201, f"a tenant-admin maps a user token within its tenant's mapping: {d}")
        paths["user"] = d["token"]["secret"] if st == 201 else None
        paths["oidc"] = ISSUER.token(ISSUER.claims(sub="carol", tenant="team-a", role="user",
                                                   unix_user="tsid-carol"))
        want = {"admin": USERS["tsid-alice"], "tenant-admin": USERS["tsid-bob"],
                "user": USERS["tsid-carol"], "oidc": USERS["tsid-carol"]}
        for path, tok in paths.items():
            jid = c.submit(spec("team-a", f"id-{path}"), token=tok)
            got = ran_as(c, jid) if isinstance(jid, int) else None
            check(got == want[path], f"{path} credential: id -u in the task is the mapped uid "
                  f"{want[path]} (got {got})")
            j = c.job(jid, tok) if isinstance(jid, int) else {}
            check(j.get("state") == "completed", f"{path}: the job completes: {j.get('state')}")
            check((j.get("run_as") or {}).get("uid") == want[path],
                  f"{path}: the job says what it runs as: {j.get('run_as')}")
    finally:
        remove_users()


scenario_every_credential_runs_as_its_mapped_uid.needs_root = True


def scenario_unmapped_credential_runs_nothing(c):
    """api.md: a token without a Unix identity cannot submit work that runs
    tasks on agent nodes, and a token's name maps no Unix user."""
    tok = c.token("root", "user", "team-r")
    st, d = c.call("POST", "/v1/jobs", spec("team-r", "named-root"), tok)
    err = d.get("error", {}) if isinstance(d, dict) else {}
    check(st == 403 and err.get("code") == "no_unix_identity" and
          "\"root\" has no Unix identity" in err.get("message", ""),
          f"a token named root without a mapping is refused with the reason: {st} {d}")
    st, d = c.call("GET", "/v1/jobs?owner=root")
    check(st == 200 and not d.get("jobs"), "and no job of its was made")
    idt = ISSUER.token(ISSUER.claims(sub="dave", tenant="team-a", role="user"))
    st, d = c.call("POST", "/v1/jobs", spec("team-a", "oidc-unmapped"), idt)
    check(st == 403, f"an ID token without a listed Unix user cannot submit either: {st}")


def scenario_missing_user_is_refused_with_reason(c):
    """agent-tasks.md: a user missing on the node is refused: the task does not
    start, and the job's reason and events say "user NAME: no such user on
    node NODE"."""
    tok = c.token("ghost", "user", "team-a", unix_user=GHOST[0], uid=GHOST[1])
    jid = c.submit(spec("team-a", "ghost"), token=tok)
    if not isinstance(jid, int):
        return
    state, reason, events = refusal(c, jid)
    want = f"user {GHOST[0]}: no such user on node r-"
    check(state == "failed" and (want in reason or want in events),
          f"the job fails, saying {want!r}: {state} / {reason} / {events[:300]}")


scenario_missing_user_is_refused_with_reason.needs_root = True


def scenario_uid_must_match_the_mapping(c):
    """agent-tasks.md: the user's uid on the node must be the mapped uid; a
    mismatch is refused with both uids named."""
    add_users()
    try:
        tok = c.token("wrong-uid", "user", "team-a", unix_user="tsid-bob", uid=41500)
        jid = c.submit(spec("team-a", "wrong-uid"), token=tok)
        if not isinstance(jid, int):
            return
        state, reason, events = refusal(c, jid)
        want = "user tsid-bob: has uid 41002 on node r-"
        check(state == "failed" and (want in reason or want in events) and "41500" in
              reason + events, f"refused naming both uids: {state} / {reason} / {events[:300]}")
    finally:
        remove_users()


scenario_uid_must_match_the_mapping.needs_root = True


def scenario_root_only_where_the_tenant_allows_it(c):
    """agent-tasks.md: a task mapped to uid 0 runs only in a tenant with
    allow_root: true; elsewhere it is refused with the reason."""
    tok_a = c.token("root-a", "user", "team-a", unix_user="root", uid=0)
    jid = c.submit(spec("team-a", "root-refused"), token=tok_a)
    if isinstance(jid, int):
        state, reason, events = refusal(c, jid)
        want = "user root: uid 0 (root), which tenant \"team-a\" does not allow"
        check(state == "failed" and (want in reason or want in events),
              f"root refused in team-a: {state} / {reason} / {events[:300]}")
    tok_r = c.token("root-r", "user", "team-r", unix_user="root", uid=0)
    jid = c.submit(spec("team-r", "root-allowed"), token=tok_r)
    if isinstance(jid, int):
        check(ran_as(c, jid) == 0, "root runs as uid 0 in team-r (allow_root: true)")


scenario_root_only_where_the_tenant_allows_it.needs_root = True


def scenario_expired_token_is_refused(c):
    """api.md: an expired token answers 401 "token expired"."""
    tok = c.token("brief", "user", "team-a", unix_user="tsid-bob", uid=41002, expires="1s")
    time.sleep(1.5)
    st, d = c.call("GET", "/v1/jobs", None, tok)
    check(st == 401 and d.get("error", {}).get("message") == "token expired",
          f"401 token expired: {st} {d}")
