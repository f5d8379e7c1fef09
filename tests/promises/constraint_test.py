"""Promises of node constraints on real agents (docs/job-spec.md
"constraint, nodelist, exclude"): a job runs only on the nodes its
constraint, nodelist and exclude allow, waits with reason `constraint` when
they are full, and a spec naming no such node is refused naming the field.

The cluster: r-1 and r-2 (4 H100 each, labels ib and pool=train) under leaf
l1, r-3 (4 H100, pool=infer) under l2. Tenant team-a is guaranteed all 12."""
import os
import tempfile

from cluster import H100, Node
from harness import check

H100_4 = dict(H100, gpus=4)


def four_gpus(fx):
    fx["gpus"] = fx["gpus"][:4]


TRAIN = ", labels: {ib: 'yes', pool: train}"
CLUSTER = {
    "nodes": [Node("r-1", "l1", cls="h4", fix=four_gpus, extra=TRAIN),
              Node("r-2", "l1", cls="h4", fix=four_gpus, extra=TRAIN),
              Node("r-3", "l2", cls="h4", fix=four_gpus, extra=", labels: {pool: infer}")],
    "classes": {"h4": H100_4},
    "tenants": """tenants:
  team-a: {guaranteed: {gpu: {H100-80GB: 12}}}
""",
}


def spec(name, gpus, cmd="sleep 300", **kw):
    return dict({"tenant": "team-a", "name": name, "command": ["/bin/sh", "-c", cmd],
                 "tasks": [{"count": 1, "gpus": gpus, "cpu_milli": 1000, "memory_mib": 1024}],
                 "time_limit": "10m"}, **kw)


def node_of(j):
    p = j.get("placement") or []
    return p[0].get("node") if p else None


def scenario_job_runs_only_where_its_constraint_allows(c):
    """job-spec.md: `constraint: pool=infer` runs on r-3 only; `nodelist:
    r-[2-3]` with `exclude: r-3` on r-2; `ib` (a label key) on r-1 or r-2."""
    a = c.submit(spec("infer", 1, constraint="pool=infer"))
    b = c.submit(spec("listed", 1, nodelist="r-[2-3]", exclude="r-3"))
    d = c.submit(spec("ib", 4, constraint="ib&H100-80GB"))
    ja = c.wait_job(a, "running", 30)
    jb = c.wait_job(b, "running", 30)
    jd = c.wait_job(d, "running", 30)
    check(ja and node_of(ja) == "r-3", f"pool=infer runs on r-3: {node_of(ja or {})}")
    check(jb and node_of(jb) == "r-2", f"nodelist r-[2-3] less r-3 runs on r-2: {node_of(jb or {})}")
    check(jd and node_of(jd) in ("r-1",), f"ib, 4 GPUs, runs on r-1 (r-2 has one taken): "
          f"{node_of(jd or {})}")
    j = c.job(a)
    check(j.get("spec", {}).get("constraint", "pool=infer") == "pool=infer",
          f"the spec keeps its constraint: {j.get('spec', {}).get('constraint')}")


def scenario_job_waits_for_its_constraint(c):
    """job-spec.md: a job whose allowed nodes are full waits with reason
    `constraint`, and `tessera explain` says so, while other nodes have room."""
    fill = c.submit(spec("fill", 4, nodelist="r-3"))
    c.wait_job(fill, "running", 30)
    w = c.submit(spec("waits", 1, constraint="pool=infer"))
    j = c.wait(lambda: (lambda j: j if j.get("reason") == "constraint" else None)(c.job(w)),
               "the job waits with reason constraint", 15)
    if not j:
        return
    check("constraint" in (j.get("why") or ""), f"why names the constraint: {j.get('why')}")
    r = c.cli("explain", str(w))
    check(r.returncode == 0 and "constraint" in r.stdout,
          f"tessera explain says it waits for its constraint: {r.stdout} {r.stderr}")
    c.call("POST", f"/v1/jobs/{fill}/cancel")
    c.wait_job(w, "running", 30, "it starts on r-3 once r-3 is free")


def scenario_bad_constraint_is_refused_naming_the_field(c):
    """job-spec.md: a constraint no node matches, a nodelist naming an unknown
    node and a malformed constraint are refused at submission, naming the
    field."""
    for kw, want in ((dict(constraint="pool=gpu"), "constraint: no node has the features"),
                     (dict(nodelist="r-[1-9]"), "nodelist: no node \"r-4\""),
                     (dict(exclude="r-[1-3]"), "exclude: leaves no node"),
                     (dict(constraint="a(b)"), "constraint: '(' at byte 1"),
                     (dict(reservation="maint-1"), "reservation: no reservation \"maint-1\"")):
        st, d = c.call("POST", "/v1/jobs", spec("bad", 1, **kw))
        check(st == 400 and want in str(d), f"{kw} refused with 400 naming it: {st} {d}")


def scenario_sbatch_directives_map_to_constraints(c):
    """slurm.md: `#SBATCH --constraint`, `-w` and `-x` map to the spec's
    constraint, nodelist and exclude."""
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False, dir=c.tmp) as f:
        f.write("#!/bin/bash\n#SBATCH --account=team-a\n#SBATCH --gpus=1\n"
                "#SBATCH --constraint=pool=train\n#SBATCH -w r-[1-3]\n#SBATCH -x r-1\n"
                "#SBATCH --time=5\nsleep 300\n")
    r = c.cli("sbatch", f.name)
    os.unlink(f.name)
    jid = next((int(t) for t in r.stdout.split() if t.isdigit()), None)
    check(r.returncode == 0 and jid, f"sbatch submits: {r.stdout} {r.stderr}")
    if not jid:
        return
    j = c.wait_job(jid, "running", 30)
    check(j and node_of(j) == "r-2", f"pool=train in r-[1-3] less r-1 is r-2: {node_of(j or {})}")
