"""Promises of durable reservations (docs/scheduler.md "Reservations",
docs/api.md "Reservations", docs/cli.md `reservation`): an admin keeps nodes
for a tenant's jobs in a window of time, or for none (maintenance); the jobs
naming it start there inside the window, other jobs whose time limit would
run into it keep off those nodes, and the reservations outlive a restart of
tesserad.

The cluster: r-1 and r-2 (8 H100 each). Tenants team-a and team-b."""
import signal

from cluster import Node, wait_ready
from harness import USER_IDENTITY, check

CLUSTER = {"nodes": [Node("r-1", "l1"), Node("r-2", "l1")]}

TOKENS = {}


def tokens(c):
    if not TOKENS:
        TOKENS["alice"] = c.token("alice", "user", "team-a", **USER_IDENTITY)
        TOKENS["bob"] = c.token("bob", "user", "team-a", **USER_IDENTITY)
    return TOKENS


def spec(tenant, name, gpus=1, limit="5m", **kw):
    return dict({"tenant": tenant, "name": name, "command": ["/bin/sh", "-c", "sleep 300"],
                 "tasks": [{"count": 1, "gpus": gpus, "cpu_milli": 500, "memory_mib": 512}],
                 "time_limit": limit}, **kw)


def node_of(j):
    p = j.get("placement") or []
    return p[0].get("node") if p else None


def reservations(c):
    st, d = c.call("GET", "/v1/reservations")
    return {r["name"]: r for r in d.get("reservations", [])} if st == 200 else {}


def scenario_job_runs_in_its_reservation_others_keep_off(c):
    """scheduler.md: a reservation of r-1 for team-a starting in a few
    seconds: team-a's job naming it waits (reason reservation) until the
    window opens, then starts on r-1; team-b's job whose time limit runs into
    the window does not start on r-1, and a job without a node limit goes to
    r-2."""
    st, d = c.call("POST", "/v1/reservations", {"name": "train-a", "nodes": "r-1",
                                                "start": "6s", "duration": "10m",
                                                "tenant": "team-a"})
    check(st == 201, f"POST /v1/reservations answers 201: {st} {d}")
    if st != 201:
        return
    r = d["reservation"]
    check(r["state"] == "waiting" and r["tenant"] == "team-a" and r["nodes"] == "r-1",
          f"the answer is the reservation, waiting: {r}")
    start = r["start"]
    a = c.submit(spec("team-a", "in-window", reservation="train-a"))
    b = c.submit(spec("team-b", "crosses", nodelist="r-1", limit="10m"))
    free = c.submit(spec("team-b", "anywhere", limit="10m"))
    j = c.wait(lambda: (lambda j: j if j.get("reason") == "reservation" else None)(c.job(a)),
               "the job naming it waits with reason reservation", 5)
    if j:
        check("starts in" in (j.get("why") or ""), f"why says when it starts: {j.get('why')}")
    ja = c.wait_job(a, "running", 30, "the job naming the reservation starts once it opens")
    if ja:
        check(node_of(ja) == "r-1", f"it runs on the reserved node r-1: {node_of(ja)}")
        check((ja.get("start_time") or 0) >= start - 0.5,
              f"it starts inside the window: {ja.get('start_time')} >= {start}")
    jf = c.wait_job(free, "running", 15)
    check(jf and node_of(jf) == "r-2", f"a job of team-b without a node limit runs on r-2: "
          f"{node_of(jf or {})}")
    jb = c.job(b)
    check(jb.get("state") == "pending" and jb.get("reason") == "reservation",
          f"team-b's job limited to r-1, whose time limit crosses the window, waits with "
          f"reason reservation: {jb.get('state')} {jb.get('reason')} {jb.get('why')}")
    st, d = c.call("DELETE", "/v1/reservations/train-a")
    check(st == 204, f"DELETE answers 204: {st} {d}")
    check("train-a" not in reservations(c), "the deleted reservation is not listed")
    c.wait_job(b, "running", 15, "team-b's job starts on r-1 once the reservation is deleted")
    st, d = c.call("DELETE", "/v1/reservations/train-a")
    check(st == 404, f"deleting it again answers 404: {st} {d}")


def scenario_maintenance_window_drains_ahead(c):
    """scheduler.md: a maintenance reservation takes no jobs; its nodes drain
    ahead of it: a job whose time limit runs into the window waits, a job
    that ends before it starts."""
    st, d = c.call("POST", "/v1/reservations", {"name": "maint", "nodes": "r-2",
                                                "start": "2m", "duration": "1h",
                                                "maintenance": True})
    check(st == 201, f"a maintenance reservation is made: {st} {d}")
    long_ = c.submit(spec("team-a", "long", nodelist="r-2", limit="10m"))
    short = c.submit(spec("team-a", "short", nodelist="r-2", limit="30s"))
    c.wait_job(short, "running", 15, "a job that ends before the window starts on r-2")
    j = c.wait(lambda: (lambda j: j if j.get("reason") == "reservation" else None)(c.job(long_)),
               "a job whose time limit runs into the window waits with reason reservation", 10)
    check(j and j.get("state") == "pending", f"it stays pending: {j}")
    st, d = c.call("POST", "/v1/jobs", spec("team-a", "no", reservation="maint"))
    check(st == 400 and "reservation:" in str(d) and "maintenance" in str(d),
          f"a job naming a maintenance window is refused naming reservation: {st} {d}")
    c.cancel_all()  # before the window goes, so that the long job does not start
    st, d = c.call("DELETE", "/v1/reservations/maint")
    check(st == 204, f"the maintenance reservation is deleted: {st} {d}")


def scenario_who_may_use_it(c):
    """api.md: a job naming a reservation is accepted only if it exists and
    its tenant and user may use it; otherwise 400 naming reservation."""
    t = tokens(c)
    st, d = c.call("POST", "/v1/reservations", {"name": "alice-only", "nodes": "r-1",
                                                "start": "1h", "duration": "1h",
                                                "tenant": "team-a", "users": ["alice"]})
    check(st == 201, f"a reservation for alice of team-a: {st} {d}")
    for body, token, want in (
            (spec("team-b", "x", reservation="alice-only"), None, "reservation:"),
            (spec("team-a", "x", reservation="alice-only"), t["bob"], "reservation:"),
            (spec("team-a", "x", reservation="nope"), None,
             "reservation: no reservation \"nope\"")):
        st, d = c.call("POST", "/v1/jobs", body, token=token)
        check(st == 400 and want in str(d), f"{body['tenant']} refused naming it: {st} {d}")
    st, d = c.call("POST", "/v1/jobs", spec("team-a", "ok", reservation="alice-only"),
                   token=t["alice"])
    check(st == 201, f"alice's job naming it is accepted: {st} {d}")
    st, d = c.call("POST", "/v1/reservations", {"name": "x", "nodes": "r-2", "start": "1h",
                                                "duration": "1h", "tenant": "team-a"},
                   token=t["alice"])
    check(st == 403, f"a user may not create reservations: {st} {d}")


def scenario_bad_input_names_the_field(c):
    """api.md: bad reservations are refused naming the field: unknown node,
    a node in an overlapping reservation, end before start, a bad name, an
    unknown tenant or field."""
    base = {"name": "r", "nodes": "r-1", "start": "2h", "duration": "1h", "tenant": "team-a"}
    for kw, status, want in ((dict(nodes="r-9"), 400, "nodes: no node \"r-9\""),
                             (dict(start="3h", end="2h", duration=None), 400,
                              "end: must be after start"),
                             (dict(name="bad name!"), 400, "name:"),
                             (dict(tenant="team-z"), 400, "tenant: no tenant"),
                             (dict(start="soon"), 400, "start:"),
                             (dict(duration=-5), 400, "duration:"),
                             (dict(colour="red"), 400, "colour: unknown field"),
                             (dict(name="alice-only"), 409, "name: reservation"),
                             (dict(name="overlap", start="90m"), 409,
                              "nodes: r-1 is in reservation \"alice-only\"")):
        body = {k: v for k, v in dict(base, **kw).items() if v is not None}
        st, d = c.call("POST", "/v1/reservations", body)
        check(st == status and want in str(d), f"{kw} refused with {status}: {st} {d}")


def scenario_cli_creates_lists_and_deletes(c):
    """cli.md: `tessera reservation create|list|delete`."""
    r = c.cli("reservation", "create", "cli-1", "--nodes", "r-2", "--start", "3h",
              "--duration", "1h", "--tenant", "team-b")
    check(r.returncode == 0 and "cli-1" in r.stdout,
          f"create: {r.returncode} {r.stdout} {r.stderr}")
    r = c.cli("reservation", "list")
    check(r.returncode == 0 and "cli-1" in r.stdout and "team-b" in r.stdout,
          f"list shows it: {r.stdout} {r.stderr}")
    r = c.cli("reservation", "create", "cli-2", "--nodes", "r-9", "--start", "3h",
              "--duration", "1h", "--maintenance")
    check(r.returncode != 0 and "nodes:" in r.stderr, f"a bad one fails naming the field: "
          f"{r.returncode} {r.stderr}")
    r = c.cli("reservation", "delete", "cli-1")
    check(r.returncode == 0, f"delete: {r.returncode} {r.stdout} {r.stderr}")
    check("cli-1" not in reservations(c), "it is gone")


def scenario_reservations_outlive_a_restart(c):
    """scheduler.md: reservations are stored; after tesserad restarts they
    are there and jobs may still name them. (Last: it restarts tesserad.)"""
    before = reservations(c)
    check("alice-only" in before, f"the reservation is there before: {list(before)}")
    p = c.procs["tesserad"]
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=20)
    except Exception:
        check(False, "tesserad stops within 20 s of SIGTERM")
        return
    c._spawn("tesserad", [c.bins["tesserad"], "--config", c.path("tesserad.yaml")])
    if not wait_ready(c.url, 30):
        check(False, "tesserad is ready again after its restart")
        return
    after = reservations(c)
    check(after.get("alice-only") == before.get("alice-only"),
          f"the same reservation after the restart: {after.get('alice-only')}")
    st, d = c.call("POST", "/v1/jobs", spec("team-a", "after", reservation="alice-only"),
                   token=tokens(c)["alice"])
    check(st == 201, f"a job naming it is accepted after the restart: {st} {d}")
    c.wait(lambda: all(c.node(n).get("state") == "up" for n in ("r-1", "r-2")),
           "the agents register with the restarted controller", 30)
