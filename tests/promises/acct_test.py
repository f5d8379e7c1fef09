"""Promises of per-job accounting (docs/api.md "Accounting", docs/cli.md
`acct`): one row per job with its tenant, user, tier, GPU model, state and
exit code, as JSON, CSV or a table; a user sees its own rows, a tenant-admin
its tenant's, admin every one."""
import csv
import io
import json
import urllib.request

from cluster import Node
from harness import USER_IDENTITY, check

CLUSTER = {"nodes": [Node("r-1")],
           "tenants": "tenants:\n  team-a: {guaranteed: {gpu: {H100-80GB: 8}}}\n"
                      "  team-b: {guaranteed: {gpu: {H100-80GB: 0}}}\n"}

TOKENS = {}


def spec(tenant, name, command, gpus=1, tier="guaranteed"):
    return {"tenant": tenant, "name": name, "time_limit": "5m", "tier": tier,
            "tasks": [{"count": 1, "gpus": gpus, "cpu_milli": 500, "memory_mib": 512}],
            "command": ["/bin/sh", "-c", command]}


def tokens(c):
    if not TOKENS:
        TOKENS["alice"] = c.token("alice", "user", "team-a", **USER_IDENTITY)
        TOKENS["bob"] = c.token("bob", "user", "team-a", **USER_IDENTITY)
        TOKENS["ta"] = c.token("ta", "tenant-admin", "team-a", **USER_IDENTITY)
        TOKENS["carol"] = c.token("carol", "user", "team-b", **USER_IDENTITY)
    return TOKENS


def rows(c, query="", token=None):
    st, d = c.call("GET", "/v1/acct" + query, None, token)
    check(st == 200 and isinstance(d, dict), f"GET /v1/acct{query} answers 200: {st} {d}")
    return {r["id"]: r for r in d.get("jobs", [])} if st == 200 and isinstance(d, dict) else {}


def scenario_rows_say_who_what_and_how_it_ended(c):
    """api.md: a row per job: tenant, user, tier, GPU model, GPUs, state, exit
    code, times and GPU-hours; a user sees its own rows, a tenant-admin the
    tenant's, admin every one; a bad filter names its field."""
    t = tokens(c)
    ok = c.submit(spec("team-a", "ok", "sleep 1.2", gpus=2), t["alice"])
    bad = c.submit(spec("team-a", "bad", "exit 3"), t["bob"])
    other = c.submit(spec("team-b", "other", "true", tier="opportunistic"), t["carol"])
    for jid, state in ((ok, "completed"), (bad, "failed"), (other, "completed")):
        if not c.wait_job(jid, state, 30):
            return
    every = rows(c)
    check({ok, bad, other} <= set(every), f"admin sees every row: {sorted(every)}")
    r = every.get(ok, {})
    check(r.get("tenant") == "team-a" and r.get("user") == "alice" and
          r.get("tier") == "guaranteed" and r.get("gpu_model") == "H100-80GB" and
          r.get("gpus") == 2 and r.get("state") == "completed" and r.get("exit_code") == 0,
          f"the row of a completed job: {r}")
    check(r.get("elapsed_s", 0) >= 1.0 and
          abs(r.get("gpu_hours", 0) - 2 * r.get("elapsed_s", 0) / 3600) < 1e-6,
          f"its GPU-hours are its GPUs times its run: {r}")
    b = every.get(bad, {})
    check(b.get("state") == "failed" and b.get("exit_code") == 3 and b.get("user") == "bob",
          f"the row of a failed job has its exit code: {b}")
    check(b.get("signal") is None and b.get("reason") == "exit-code",
          f"no signal, and how it ended: {b}")
    mine = rows(c, token=t["alice"])
    check(set(mine) == {ok}, f"a user sees its own rows only: {sorted(mine)}")
    check(rows(c, "?owner=bob", t["alice"]) == {}, "a user asking for another's rows gets none")
    ta = rows(c, token=t["ta"])
    check(set(ta) == {ok, bad}, f"a tenant-admin sees its tenant's rows: {sorted(ta)}")
    check(set(rows(c, "?tenant=team-a&state=failed")) == {bad},
          "filters by tenant and state hold")
    o = rows(c, "?owner=carol")
    check(set(o) == {other} and o[other].get("tier") == "opportunistic",
          f"a filter by user holds; the row has its tier: {o}")
    before = rows(c, f"?from=1&to={r.get('submit', 0) - 3600:.0f}")
    check(not ({ok, bad, other} & set(before)), f"a window before the jobs has none: {before}")
    last = max((every.get(j, {}).get("end") or 0) for j in (ok, bad, other))
    after = rows(c, f"?from={last + 0.5:.3f}")
    check(not ({ok, bad, other} & set(after)), f"a window after they ended has none: {after}")
    st, d = c.call("GET", "/v1/acct?format=xml")
    check(st == 400 and "format" in str(d), f"a bad format names the field: {st} {d}")
    st, d = c.call("GET", "/v1/acct?state=done")
    check(st == 400 and "state" in str(d), f"a bad state names the field: {st} {d}")
    # paging: one row a page, every row once
    seen, cur = [], None
    for _ in range(20):
        st, d = c.call("GET", "/v1/acct?limit=1" + (f"&cursor={cur}" if cur else ""))
        if st != 200:
            break
        seen += [x["id"] for x in d["jobs"]]
        cur = d["next_cursor"]
        if not cur:
            break
    check(sorted(seen) == sorted(every), f"pages of one row give every row once: {seen}")
    killed = c.submit(spec("team-a", "killed", "kill -9 $$"), t["bob"])
    if c.wait_job(killed, "failed", 30):
        k = rows(c, "?owner=bob").get(killed, {})
        check(k.get("signal") == 9 and k.get("exit_code") is None,
              f"a job a signal ended has it in its row (sacct's 0:9): {k}")
        r = c.cli("acct", "--user", "bob")
        line = next((ln for ln in r.stdout.splitlines() if ln.split()[:1] == [str(killed)]), "")
        check("sig 9" in line, f"tessera acct shows it as tessera jobs does: {line!r}")


def scenario_a_requeued_job_counts_every_run(c):
    """api.md: a row's gpu_hours counts the runs a preemption or requeue
    ended too (its run-ended events), so a tenant's rows add up to its usage
    (they counted the last run only)."""
    import time
    jid = c.submit(spec("team-a", "twice", "sleep 300", gpus=2))
    if not c.wait_job(jid, "running", 30):
        return
    time.sleep(3)
    st, d = c.call("POST", f"/v1/jobs/{jid}/requeue", {})
    check(st == 200, f"the job is requeued: {st} {d}")
    j = c.wait(lambda: (lambda x: x if x.get("state") == "running" and
                        x.get("restarts", 0) >= 1 else None)(c.job(jid)),
               "it runs again", 60)
    if not j:
        return
    time.sleep(2)
    c.call("POST", f"/v1/jobs/{jid}/cancel", {})
    c.wait_job(jid, "cancelled", 30)
    ev = [e for e in c.events(jid) if e["kind"] == "run-ended"]
    first = ev[0]["detail"] if ev else ""
    s1 = float(first.split("start=")[1].split()[0]) if "start=" in first else 0
    e1 = float(first.split("end=")[1].split()[0]) if "end=" in first else 0
    row = rows(c).get(jid, {})
    last = (row.get("end") or 0) - (row.get("start") or 0)
    want = ((e1 - s1) + last) * 2 / 3600.0
    check(ev and row and abs(row.get("gpu_hours", 0) - want) < 1e-6 and e1 - s1 > 2,
          f"its GPU-hours count both runs: {row.get('gpu_hours')} (runs {e1 - s1:.1f} s and "
          f"{last:.1f} s on 2 GPUs: {want:.6f})")


def scenario_csv_export_and_cli(c):
    """api.md: ?format=csv answers text/csv with a header row; `tessera acct`
    prints a table, CSV or JSON, with the same filters."""
    t = tokens(c)
    jid = c.submit(spec("team-a", "export.job_1", "true"), t["alice"])
    if not c.wait_job(jid, "completed", 30):
        return
    req = urllib.request.Request(c.url + "/v1/acct?format=csv&owner=alice",
                                 headers={"Authorization": "Bearer " + c.admin})
    with urllib.request.urlopen(req, timeout=30) as resp:
        ctype, text = resp.headers.get("Content-Type", ""), resp.read().decode()
    check(ctype.startswith("text/csv"), f"the export is text/csv: {ctype}")
    table = list(csv.DictReader(io.StringIO(text)))
    row = next((x for x in table if x["id"] == str(jid)), {})
    check(text.startswith("id,tenant,user,name,tier,") and
          row.get("name") == "export.job_1" and row.get("user") == "alice" and
          row.get("state") == "completed" and row.get("exit_code") == "0",
          f"the CSV has a header and the job's row: {row} in {text!r}")
    r = c.cli("acct", "--user", "alice", "--format", "csv", token=t["ta"])
    cli_rows = list(csv.DictReader(io.StringIO(r.stdout)))
    check(r.returncode == 0 and any(x["id"] == str(jid) for x in cli_rows),
          f"tessera acct --format csv: {r.returncode} {r.stdout} {r.stderr}")
    r = c.cli("acct", "--tenant", "team-a", "--state", "completed", "--format", "json")
    try:
        ids = [x["id"] for x in json.loads(r.stdout)["jobs"]]
    except (ValueError, KeyError):
        ids = []
    check(r.returncode == 0 and jid in ids, f"tessera acct --format json: {r.stdout[-400:]}")
    r = c.cli("acct", "--from", "-1h", token=t["alice"])
    check(r.returncode == 0 and "GPU-HOURS" in r.stdout and str(jid) in r.stdout and
          "carol" not in r.stdout, f"tessera acct prints a table: {r.stdout} {r.stderr}")
    r = c.cli("acct", "--format", "xml")
    check(r.returncode == 2 and "--format" in r.stderr, f"a bad --format is refused: {r.stderr}")


def shares_json(c, token=None):
    """`tessera -o json shares --since -1h` as token: the run, and a reader
    of its row for (tenant, user or None for the tenant's own), {} if none."""
    r = c.cli("-o", "json", "shares", "--since", "-1h", token=token)
    try:
        rows = json.loads(r.stdout)["shares"]
    except (ValueError, KeyError):
        rows = []
    return r, lambda tn, us: next((x for x in rows if x["tenant"] == tn and x["user"] == us), {})


def scenario_shares_and_prio(c):
    """cli.md: `tessera shares` adds each user's GPU-hours and part of its
    tenant's to the tenants' fair share; `tessera prio` lists the pending
    jobs with their priority, tenant share and place in the queues."""
    t = tokens(c)
    done = c.submit(spec("team-a", "shared", "sleep 1", gpus=4), t["alice"])
    if not c.wait_job(done, "completed", 30):
        return
    r, row = shares_json(c)
    ta, al = row("team-a", None), row("team-a", "alice")
    check(r.returncode == 0 and "share" in ta and "order" in ta,
          f"tessera shares has the tenant's share and order: {r.stdout[-600:]} {r.stderr}")
    check(al.get("gpu_hours", 0) > 0 and 0 < al.get("fraction", 0) <= 1 and
          al["gpu_hours"] <= ta.get("gpu_hours", 0) + 1e-9,
          f"and each user's GPU-hours and part of the tenant's: {al} {ta}")
    r = c.cli("shares", token=t["alice"])
    check(r.returncode == 0 and "alice" in r.stdout and "bob" not in r.stdout,
          f"a user's shares show its own GPU-hours only: {r.stdout} {r.stderr}")
    check("e-0" not in r.stdout, f"shares to three decimals, not %g's e-notation: {r.stdout}")
    r, row = shares_json(c, t["alice"])
    ta, al, tb = row("team-a", None), row("team-a", "alice"), row("team-b", None)
    check(al.get("gpu_hours", 0) > 0 and ta.get("gpu_hours", 0) is None and
          tb.get("gpu_hours", 0) is None and al.get("fraction", 0) is None,
          f"a user's token reads no tenant's total (null, printed '-'), not a false 0 or a "
          f"fraction of 1: {ta} {al} {tb}")
    big = c.submit(spec("team-a", "big", "sleep 30", gpus=8), t["alice"])
    if not c.wait_job(big, "running", 30):
        return
    w1 = c.submit(spec("team-a", "wait1", "true", gpus=8), t["alice"])
    w2 = c.submit(spec("team-a", "wait2", "true", gpus=8), t["bob"])
    c.wait(lambda: all((c.job(j).get("queue_position") or {}).get("tenant") for j in (w1, w2)),
           "both waiting jobs are ranked", timeout=15)
    r = c.cli("-o", "json", "prio", "--tenant", "team-a")
    try:
        pj = {x["id"]: x for x in json.loads(r.stdout)["jobs"]}
    except (ValueError, KeyError):
        pj = {}
    check(r.returncode == 0 and set(pj) == {w1, w2},
          f"tessera prio lists the pending jobs: {r.stdout[-600:]} {r.stderr}")
    a, b = pj.get(w1, {}), pj.get(w2, {})
    check(a.get("position_tenant") == 1 and b.get("position_tenant") == 2 and
          a.get("user") == "alice" and "tenant_share" in a and "priority" in a,
          f"with their priority, tenant share and place in the queue: {a} {b}")
    r = c.cli("prio")
    check(r.returncode == 0 and "IN TENANT" in r.stdout and str(w2) in r.stdout,
          f"tessera prio prints a table: {r.stdout}")
