"""Promises of the scheduler on real agents: no preemption without need
(docs/scheduler.md step 6), the preemptor's tier in the event, gangs compact
first (docs/job-spec.md, topology).

The cluster: r-1 (8 H100) and r-2 (4 H100) under leaf l1, r-3 (4 H100) under
l2, and m-1, an A100-40GB node in MIG mode whose two GPUs start with seven
idle 1g.5gb instances each. Tenants: team-a and team-b guaranteed 8 H100 and
1 A100 each, team-c nothing (it only borrows). Loans may go
back at once (reclaim_min_runtime 0 s), the case where a preemption that is
not needed would happen soonest."""
import time

from cluster import H100, Node
from harness import check, http_call

H100_4 = dict(H100, gpus=4)
A100_MIG2 = {"gpu_model": "A100-40GB", "gpus": 2, "cpu_milli": 64000, "memory_mib": 262144,
             "gpu_mode": "mig", "mig_layout": ["1g.5gb"] * 7}


def four_gpus(fx):
    fx["gpus"] = fx["gpus"][:4]


def both_mig(fx):
    """The fake NVML's A100 node: GPU 1 in MIG mode too (the agent then
    makes both hold the controller's layout)."""
    fx["gpus"][1]["mig"] = {"mode": 1, "pending": 1, "instances": []}


CLUSTER = {
    "nodes": [Node("r-1", "l1"), Node("r-2", "l1", cls="h4", fix=four_gpus),
              Node("r-3", "l2", cls="h4", fix=four_gpus),
              Node("m-1", "l2", cls="mig2", fixture="a100-mig.json", fix=both_mig)],
    "classes": {"h4": H100_4, "mig2": A100_MIG2},
    "tenants": """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 16, A100-40GB: 2}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8, A100-40GB: 1}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 8, A100-40GB: 1}}}
      team-c: {}
""",
    "config": "scheduler: {interval: 0.2s, min_runtime: 1s, grace: 2s, backoff: 1s, "
              "reclaim_min_runtime: 0s}\n",
}


def spec(name, tenant, tier, task, cmd="sleep 300", **kw):
    return dict({"tenant": tenant, "name": name, "tier": tier,
                 "command": ["/bin/sh", "-c", cmd],
                 "tasks": [dict({"count": 1, "cpu_milli": 1000, "memory_mib": 1024}, **task)],
                 "time_limit": "10m", "checkpoint": {"signal": "SIGUSR1", "grace": "2s"}}, **kw)


def nodes_of(j):
    return [p.get("node") for p in (j.get("placement") or [])]


def preempted(c, jid):
    return [e for e in c.events(jid) if e["kind"] == "preempted"]


def hold_still(c, jids, seconds):
    """Polls for `seconds`: every job of jids stays running and none is
    preempted; the first problem, or None."""
    def problem():
        for jid in jids:
            j = c.job(jid)
            if j.get("state") != "running" or j.get("preemptions", 0) > 0 or preempted(c, jid):
                return f"job {jid}: {j.get('state')}, preemptions {j.get('preemptions')}"
        return None
    bad = [None]

    def moved():
        bad[0] = problem()
        return bad[0]
    deadline = time.time() + seconds
    while time.time() < deadline and not moved():
        time.sleep(0.2)
    return bad[0]


def scenario_mig_reshape_before_preemption(c):
    """scheduler.md: a MIG job that finds no free instance waits for idle
    instances to be destroyed rather than preempt running work."""
    nb = c.submit(spec("notebook", "team-b", "opportunistic", {"mig_profile": "3g.20gb", "gpu_model": "A100-40GB"}))
    j = c.wait_job(nb, "running", 30, "the opportunistic 3g.20gb notebook runs (a reshape "
                   "made its room)")
    if not j:
        return
    g = c.submit(spec("train", "team-a", "guaranteed", {"mig_profile": "3g.20gb", "gpu_model": "A100-40GB"}))
    c.wait_job(g, "running", 30, "the guaranteed 3g.20gb job runs on reshaped idle instances")
    j = c.job(nb)
    check(j.get("state") == "running" and j.get("preemptions") == 0 and not preempted(c, nb),
          f"the notebook was not preempted: {j.get('state')}, {j.get('preemptions')} "
          f"preemptions, events {[e['kind'] for e in c.events(nb)]}")


def scenario_opportunistic_jobs_do_not_preempt_each_other(c):
    """scheduler.md: two tenants' opportunistic jobs never take each other's
    room in a loop. team-b's 8-GPU job holds r-1 within team-b's guarantee;
    team-c's loans hold r-2 and r-3; team-a's 8-GPU job, within its own
    guarantee, could start only on r-1. Before, it took team-b's job as a
    loan, which then took the room back, and so on."""
    b = c.submit(spec("b-8", "team-b", "opportunistic", {"gpus": 8}))
    if not c.wait_job(b, "running", 30):
        return
    loans = [c.submit(spec(f"c-4-{k}", "team-c", "opportunistic", {"gpus": 4})) for k in (1, 2)]
    for jid in loans:
        c.wait_job(jid, "running", 30)
    a = c.submit(spec("a-8", "team-a", "opportunistic", {"gpus": 8}))
    bad = hold_still(c, [b], 8.0)
    check(bad is None, f"team-b's job runs on, never preempted, while team-a's waits: {bad}")
    ja = c.job(a)
    check(ja.get("state") == "pending" and not preempted(c, b),
          f"team-a's job waits ({ja.get('state')}: {ja.get('why')})")


def owed(c, tenant):
    """tessera_guarantee_deficit_gpus of tenant on /metrics (None: absent)."""
    st, text = http_call(c.url, "GET", "/metrics", c.admin)
    key = f'tessera_guarantee_deficit_gpus{{tenant="{tenant}"}} '
    for line in str(text).splitlines() if st == 200 else []:
        if line.startswith(key):
            return float(line[len(key):])
    return None


def scenario_owed_gpus_metric_and_explain(c):
    """metrics.md and scheduler.md ("The guarantee"): while team-a's 8-GPU
    job waits within team-a's unused guarantee, tessera_guarantee_deficit_gpus
    says team-a is owed 8 GPUs (team-b, at its guarantee, 0) and explain says
    so beside why it waits; once it runs, 0. team-b's 8-GPU job holds r-1
    within team-b's guarantee and team-c's loans hold r-2 and r-3: nothing
    can be taken back or moved for it (team-b's job is as big as it)."""
    b = c.submit(spec("b-8", "team-b", "opportunistic", {"gpus": 8}))
    if not c.wait_job(b, "running", 30):
        return
    loans = [c.submit(spec(f"c-4-{k}", "team-c", "opportunistic", {"gpus": 4})) for k in (1, 2)]
    for jid in loans:
        c.wait_job(jid, "running", 30)
    check(owed(c, "team-a") == 0.0 and owed(c, "team-b") == 0.0 and owed(c, "team-c") is None,
          f"nobody is owed anything before team-a asks: team-a {owed(c, 'team-a')}, team-b "
          f"{owed(c, 'team-b')}, team-c (guaranteed nothing, no series) {owed(c, 'team-c')}")
    a = c.submit(spec("a-8", "team-a", "guaranteed", {"gpus": 8}))
    got = c.wait(lambda: owed(c, "team-a") == 8.0,
                 "team-a is owed 8 GPUs while its 8-GPU job waits", 10)
    check(bool(got) and owed(c, "team-b") == 0.0,
          f"team-a owed {owed(c, 'team-a')}, team-b {owed(c, 'team-b')}")
    st, ex = c.call("GET", f"/v1/jobs/{a}/explain", token=c.admin)
    check(st == 200 and ex.get("tenant_owed_gpus") == 8.0 and ex.get("reason"),
          f"explain names what team-a is owed beside why the job waits: {st} {ex}")
    r = c.cli("explain", str(a))
    check(r.returncode == 0 and "owed 8 GPUs" in r.stdout,
          f"tessera explain says the tenant is owed 8 GPUs: {r.stdout!r} {r.stderr!r}")
    c.call("POST", f"/v1/jobs/{b}/cancel", token=c.admin)
    c.wait_job(a, "running", 30, "team-a's job runs once team-b's job is gone")
    got = c.wait(lambda: owed(c, "team-a") == 0.0, "team-a is owed nothing once it runs", 10)
    check(bool(got), f"team-a owed {owed(c, 'team-a')} once its job runs")


def scenario_preemption_event_names_the_preemptors_tier(c):
    """api.md: a `preempted` event's data names the preemptor's own tier and
    the cause. team-c's loans hold r-2 and r-3; team-a's opportunistic 4-GPU
    job, within team-a's guarantee, takes one back."""
    hog = c.submit(spec("b-8", "team-b", "guaranteed", {"gpus": 8}))
    c.wait_job(hog, "running", 30)
    loans = [c.submit(spec(f"c-4-{k}", "team-c", "opportunistic", {"gpus": 4})) for k in (1, 2)]
    for jid in loans:
        c.wait_job(jid, "running", 30)
    a = c.submit(spec("a-4", "team-a", "opportunistic", {"gpus": 4}))
    c.wait_job(a, "running", 30, "team-a's opportunistic job takes a loan back and runs")
    ev = c.wait(lambda: [e for jid in loans for e in preempted(c, jid)],
                "one of team-c's loans has a preempted event", 10)
    if not ev:
        return
    d = ev[0].get("data", {})
    check(d.get("for_job") == a and d.get("tier") == "opportunistic" and
          d.get("cause") == "reclaim" and "opportunistic, reclaim" in ev[0].get("detail", ""),
          f"the event names the preemptor's tier, opportunistic, and the cause: {ev[0]}")


def scenario_preemption_event_hides_the_other_tenant(c):
    """api.md: a reader who may not see the preempting job's tenant reads
    `for another tenant's TIER work`, without the job or its tenant."""
    hog = c.submit(spec("b-8", "team-b", "guaranteed", {"gpus": 8}))
    c.wait_job(hog, "running", 30)
    loans = [c.submit(spec(f"c-4-{k}", "team-c", "opportunistic", {"gpus": 4})) for k in (1, 2)]
    for jid in loans:
        c.wait_job(jid, "running", 30)
    a = c.submit(spec("a-4", "team-a", "guaranteed", {"gpus": 4}))
    c.wait_job(a, "running", 30, "team-a's job takes a loan back and runs")
    victim = c.wait(lambda: next((jid for jid in loans if preempted(c, jid)), None),
                    "one of team-c's loans is preempted", 10)
    if not victim:
        return
    viewer = c.token("c-viewer", "viewer", "team-c")
    ev = [e for e in c.events(victim, viewer) if e["kind"] == "preempted"]
    text = str(ev)
    check(ev and "team-a" not in text and f"job {a}" not in text and
          "for_job" not in ev[0]["data"] and "for_tenant" not in ev[0]["data"] and
          ev[0]["detail"].startswith("for another tenant's guaranteed work (reclaim); signal"),
          f"team-c's viewer reads another tenant's guaranteed work, not who: {ev}")
    ev = [e for e in c.events(victim) if e["kind"] == "preempted"]
    check(ev and ev[0]["data"].get("for_job") == a, f"an admin still reads the job: {ev}")


def scenario_a_preemptor_waiting_out_the_grace_says_when(c):
    """cli.md explain: a job waiting for the jobs preempted for it to stop
    says by when they stop and has that as its start estimate, in every
    cycle of the grace (after the first it read "Start: unknown", "not
    planned")."""
    hog = c.submit(spec("b-8", "team-b", "guaranteed", {"gpus": 8}))
    c.wait_job(hog, "running", 30)
    # loans that neither acknowledge nor stop: they hold their room for the
    # whole 20-s grace
    slow = dict(spec("c-4", "team-c", "opportunistic", {"gpus": 4}, cmd="trap '' USR1 TERM; sleep 300"),
                checkpoint={"signal": "SIGUSR1", "grace": "20s"})
    loans = [c.submit(dict(slow, name=f"c-4-{k}")) for k in (1, 2)]
    for jid in loans:
        c.wait_job(jid, "running", 30)
    a = c.submit(spec("a-4", "team-a", "guaranteed", {"gpus": 4}))
    c.wait(lambda: c.job(a).get("reason") == "preempting", "team-a's job preempts a loan", 15)
    time.sleep(3)  # past the cycle that preempted
    j = c.job(a)
    est = j.get("estimated_start") or {}
    why = j.get("why") or ""
    check(j.get("reason") == "preempting" and "they stop by" in why,
          f"its why says when its victims stop: {why}")
    check(isinstance(est.get("time"), (int, float)) and est["time"] > time.time(),
          f"and its start estimate is that time: {est}")
    c.wait_job(a, "running", 40, "it runs once the grace ended")
    for jid in loans + [hog]:
        c.call("POST", f"/v1/jobs/{jid}/cancel", {})


def scenario_two_preemptors_each_start_on_their_own_victims_room(c):
    """scheduler.md step 6: when two preemptors' victims stop in different
    cycles, each starts on its own victims' room. team-c borrows r-1 (8),
    then r-2 and r-3 (4 each). team-a's 4-GPU job takes back the youngest
    loan, which ignores its signal and holds its room for a 10-s grace;
    team-b's takes back the other, which stops at once. Before, team-a's
    job, first in the order, started on the other's room as it was freed,
    and team-b's, its victim gone and no room, stopped team-c's 8-GPU job
    as well."""
    big = c.submit(spec("c-8", "team-c", "opportunistic", {"gpus": 8}))
    c.wait_job(big, "running", 30)
    fast = c.submit(spec("c-fast", "team-c", "opportunistic", {"gpus": 4}))
    c.wait_job(fast, "running", 30)
    time.sleep(1)
    slow = c.submit(dict(spec("c-slow", "team-c", "opportunistic", {"gpus": 4},
                              cmd="trap '' USR1 TERM; sleep 300"),
                         checkpoint={"signal": "SIGUSR1", "grace": "10s"}))
    c.wait_job(slow, "running", 30)
    was_slow, was_fast = nodes_of(c.job(slow)), nodes_of(c.job(fast))
    a = c.submit(spec("a-4", "team-a", "guaranteed", {"gpus": 4}))
    if not c.wait(lambda: preempted(c, slow), "team-a's job takes the youngest loan back", 15):
        return
    b = c.submit(spec("b-4", "team-b", "guaranteed", {"gpus": 4}))
    c.wait_job(b, "running", 30, "team-b's job runs once its victim stopped")
    c.wait_job(a, "running", 30, "team-a's job runs once its own victim's grace ended")
    ja, jb = c.job(a), c.job(b)
    check(was_slow != was_fast and nodes_of(ja) == was_slow and nodes_of(jb) == was_fast,
          f"each on its own victim's node: team-a's on {nodes_of(ja)} (its victim's "
          f"{was_slow}), team-b's on {nodes_of(jb)} ({was_fast})")
    check(not preempted(c, big) and c.job(big).get("state") == "running",
          f"team-c's 8-GPU job is not stopped as well: {c.job(big).get('state')}, "
          f"{preempted(c, big)}")
    for jid in (a, b, big, fast, slow):
        c.call("POST", f"/v1/jobs/{jid}/cancel", {})


def scenario_gang_is_compact_by_default(c):
    """job-spec.md: a 2 x 4-GPU gang whose spec names no topology level goes
    on one node (r-1, whole) rather than on r-2 and r-3, in two leaves; asked
    for `any`, it is packed by best fit on the two 4-GPU nodes."""
    g = c.submit(spec("gang", "team-a", "guaranteed", {"count": 2, "gpus": 4}))
    j = c.wait_job(g, "running", 30)
    if j:
        check(nodes_of(j) == ["r-1", "r-1"], f"both ranks on r-1: {nodes_of(j)}")
    c.cancel_all()
    g2 = c.submit(spec("gang-any", "team-a", "guaranteed", {"count": 2, "gpus": 4},
                       topology={"required": "any"}))
    j = c.wait_job(g2, "running", 30)
    if j:
        check(sorted(nodes_of(j)) == ["r-2", "r-3"],
              f"asked for any: one rank on each 4-GPU node: {nodes_of(j)}")
