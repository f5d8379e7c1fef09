#!/usr/bin/env python3
"""The attained-service order (scheduler.order: las) in a running tesserad.

    las_test.py TESSERAD

One virtual node of 4 GPUs; levels sized for seconds (level 1 at 0.001
GPU-hours: a 4-GPU job passes it after 0.9 s). Bad scheduler.order,
scheduler.las, scheduler.reclaim_min_runtime and tenant order values are
refused naming the key. A long
job runs; a short job of the same team arrives, has attained nothing, and
time-shares: the long job is preempted (its event says time-sharing and its
data the cause), the short one starts and ends, the long one resumes. While
the long job waits, explain and the job carry its standing (level, GPU-hours
attained, jobs ahead), queue position and start estimate. Across a restart
of tesserad, the long job keeps the service it attained (rebuilt
from its run-ended events). A fifo tenant's jobs carry no level; a throttled array
runs at most its throttle of elements at once. Then a tenant at its guarantee
whose first level is split (scheduler.las.split_*): its opportunistic short
job time-shares its guaranteed long job under the split's limits of a
second (the cluster's are an hour), and is not preempted back by tier.
Every wait is bounded.
"""
import os
import subprocess
import sys
import tempfile
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, free_port, http_call, stop_all, wait_for, wait_ready  # noqa

TMP = tempfile.mkdtemp(prefix="tessera-las-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


write("cluster.yaml", """node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {name: n1, class: g4}
""")
TENANTS = """tenants:
  org:
    teams:
      team-a: {}
      team-f: {order: fifo}
"""
write("tenants.yaml", TENANTS)
BASE = f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
virtual_nodes: all
limits: {{requests_per_s: 100000, burst: 100000}}
"""
SCHED = "scheduler: {interval: 0.2s, min_runtime: 1s, grace: 1s, backoff: 0s, " \
        "las: {level_gpu_hours: 0.001, levels: 3, promote_factor: 0, split_gpu_hours: 0, " \
        "split_backlog: 2}}\n"
write("tesserad.yaml", BASE + SCHED)

for bad, key in [("scheduler: {order: sjf}\n", "scheduler.order"),
                 ("scheduler: {las: {levels: 99}}\n", "scheduler.las.levels"),
                 ("scheduler: {las: {promote_factor: -1}}\n", "scheduler.las.promote_factor"),
                 ("scheduler: {las: {level_gpu_hours: lots}}\n", "scheduler.las.level_gpu_hours"),
                 ("scheduler: {las: {split_gpu_hours: -1}}\n", "scheduler.las.split_gpu_hours"),
                 ("scheduler: {las: {split_backlog: -1}}\n", "scheduler.las.split_backlog"),
                 ("scheduler: {las: {speed: 3}}\n", "speed"),
                 ("scheduler: {las: {split_min_runtime: soon}}\n",
                  "scheduler.las.split_min_runtime"),
                 ("scheduler: {las: {split_max_preemptions_per_hour: 1001}}\n",
                  "scheduler.las.split_max_preemptions_per_hour"),
                 ("scheduler: {las: {split_cross_tier: maybe}}\n",
                  "scheduler.las.split_cross_tier"),
                 ("scheduler: {las: {split_horizon: later}}\n", "scheduler.las.split_horizon"),
                 ("scheduler: {las: {split_min_gpu_hours: -1}}\n",
                  "scheduler.las.split_min_gpu_hours"),
                 ("scheduler: {las: {split_mid_gpu_hours: soon}}\n",
                  "scheduler.las.split_mid_gpu_hours"),
                 ("scheduler: {fair_reclaim: yes}\n", "scheduler.fair_reclaim"),
                 ("scheduler: {fair_moves: often}\n", "scheduler.fair_moves"),
                 ("scheduler: {reclaim_min_runtime: soon}\n", "scheduler.reclaim_min_runtime"),
                 ("scheduler: {reclaim_min_runtime: -5s}\n", "scheduler.reclaim_min_runtime")]:
    write("bad.yaml", BASE + bad)
    r = subprocess.run([TESSERAD, "--config", os.path.join(TMP, "bad.yaml")],
                       capture_output=True, text=True, timeout=20)
    check(r.returncode != 0 and key in r.stderr, f"refused naming {key}: {r.stderr.strip()[:160]}")
write("bad-tenants.yaml", TENANTS.replace("order: fifo", "order: sideways"))
write("bad.yaml", BASE.replace("tenants.yaml", "bad-tenants.yaml") + SCHED)
r = subprocess.run([TESSERAD, "--config", os.path.join(TMP, "bad.yaml")],
                   capture_output=True, text=True, timeout=20)
check(r.returncode != 0 and "team-f.order" in r.stderr,
      f"a tenant's order is las or fifo: {r.stderr.strip()[:160]}")


def spec(tenant, name, duration, tier="opportunistic"):
    return {"tenant": tenant, "name": name, "tier": tier, "command": ["run"],
            "tasks": [{"gpus": 4, "cpu_milli": 1000, "memory_mib": 1024}],
            "time_limit": "1h", "duration": duration}


procs = []


def start(config="tesserad.yaml"):
    p = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, config)],
                         stdout=subprocess.DEVNULL,
                         stderr=open(os.path.join(TMP, "log"), "a"))
    procs.append(p)
    check(wait_ready(URL), "tesserad is ready")
    return p


try:
    proc = start()
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()

    def call(method, path, body=None):
        return http_call(URL, method, path, admin, body)

    def job(jid):
        return call("GET", f"/v1/jobs/{jid}")[1]["job"]

    def kinds(jid):
        return [e["kind"] for e in call("GET", f"/v1/jobs/{jid}/events")[1]["events"]]

    st, d = call("POST", "/v1/jobs", spec("team-a", "long", "30s"))
    check(st in (200, 201), f"long submitted ({st})")
    long_id = d["jobs"][0]["id"] if "jobs" in d else d["job"]["id"]
    wait_for(lambda: job(long_id)["state"] == "running", "long runs")
    time.sleep(2.5)  # past its minimum runtime and level 1 (0.9 s on 4 GPUs)
    st, d = call("POST", "/v1/jobs", spec("team-a", "short", "2s"))
    short_id = d["jobs"][0]["id"] if "jobs" in d else d["job"]["id"]

    ev = wait_for(lambda: [e for e in call("GET", f"/v1/jobs/{long_id}/events")[1]["events"]
                           if e["kind"] == "preempted"], "the long job is preempted")
    if ev:
        check("time-sharing" in (ev[0].get("detail") or ""),
              f"for time-sharing: {ev[0].get('detail')}")
        check(ev[0].get("data", {}).get("cause") == "time-sharing",
              f"its data says the cause: {ev[0].get('data')}")
        check(f"for job {short_id}" in (ev[0].get("detail") or ""), "for the short job")
    wait_for(lambda: "started" in kinds(short_id), "the short job starts")

    # while the long job waits: its standing, position and estimate
    def waiting_explain():
        st, e = call("GET", f"/v1/jobs/{long_id}/explain")
        return e if st == 200 and e.get("standing") else None
    e = wait_for(waiting_explain, "the waiting long job has a standing", timeout=10)
    if e:
        check(e["standing"].startswith("level ") and "ahead in team-a" in e["standing"],
              f"standing: {e['standing']}")
        ahead = int(e["standing"].split("; ")[1].split()[0])
        check(e["queue_position"]["tenant"] == ahead + 1 and e["queue_position"]["cluster"] >= 1,
              f"its position agrees with the jobs ahead: {e['queue_position']}")
        check(e["las"]["attained_gpu_hours"] > 0.001, f"it attained service: {e['las']}")
        check(isinstance(e.get("estimated_start"), dict), f"estimate: {e.get('estimated_start')}")

    wait_for(lambda: job(short_id)["state"] == "completed", "the short job completes", 15)
    wait_for(lambda: kinds(long_id).count("started") >= 2, "the long job resumes", 15)

    # its service survives a restart (rebuilt from its run-ended events; a
    # running job adds its current run, a second or two of 4 GPUs at most)
    before = job(long_id)["las"]["attained_gpu_hours"]
    check(before > 0.002, f"attained {before:.5f} GPU-h before the restart")
    stop_all([proc])
    procs.clear()
    proc = start()
    after = job(long_id)["las"]["attained_gpu_hours"]
    check(before - 1e-5 <= after <= before + 0.003,
          f"kept across the restart: {after:.5f} vs {before:.5f} GPU-h")

    tens = {t["name"]: t for t in call("GET", "/v1/tenants")[1]["tenants"]}
    check(tens["team-a"]["order"] == "las" and tens["team-f"]["order"] == "fifo",
          f"tenants show their order: {tens['team-a']['order']}, {tens['team-f']['order']}")
    # an array's throttle: at most 2 of its 5 one-GPU elements run at once
    call("POST", f"/v1/jobs/{long_id}/cancel")  # the node to itself
    arr = spec("team-f", "thr", "1s")
    arr["tasks"][0]["gpus"] = 1
    arr.update({"array_size": 5, "array_throttle": 2})
    st, d = call("POST", "/v1/jobs", arr)
    ids = [j["id"] for j in d.get("jobs", [])]
    check(st in (200, 201) and len(ids) == 5, f"a throttled array of 5 ({st})")
    most, why_seen, deadline = 0, "", time.time() + 25
    while ids and time.time() < deadline:
        # one list call: a snapshot of all five at one instant (a call per
        # element on a loaded host can see one end and another start)
        listed = call("GET", "/v1/jobs?limit=1000")[1].get("jobs", [])
        js = [j for j in listed if j["id"] in ids]
        most = max(most, sum(j["state"] in ("running", "stopping") for j in js))
        why_seen = why_seen or next((j["why"] for j in js if j["state"] == "pending" and
                                     "array throttle" in (j.get("why") or "")), "")
        if all(j["state"] == "completed" for j in js):
            break
        time.sleep(0.1)
    check(ids and all(job(i)["state"] == "completed" for i in ids), "every element completes")
    check(most == 2, f"at most 2 ran at once, and 2 did: {most}")
    check("at most 2" in why_seen, f"the others said why: {why_seen}")

    # a fifo tenant's jobs carry no level
    call("POST", "/v1/jobs", spec("team-f", "f1", "30s"))
    st, d = call("POST", "/v1/jobs", spec("team-f", "f2", "30s"))
    f2 = d["jobs"][0]["id"] if "jobs" in d else d["job"]["id"]
    e = wait_for(lambda: (lambda x: x if x.get("standing") else None)(
        call("GET", f"/v1/jobs/{f2}/explain")[1]), "the fifo job is ranked", 10)
    if e:
        check("(fifo)" in e["standing"] and e["las"]["level"] is None,
              f"fifo standing: {e['standing']}, las {e['las']}")

    # A split tenant's own limits and cross-tier time-sharing, as tesserad
    # runs by default (fair reclaim and moves, any fresh job splits, 10
    # preemptions an hour, across tiers, a mid step at a GPU-hour) but for a
    # step and a minimum runtime in seconds: team-g holds the node's 4 GPUs
    # as its guarantee, the cluster's minimum runtime is an hour, so only the
    # split keys let anything be preempted here. Its long
    # guaranteed job runs past the split step (18 GPU-s: 4.5 s of 4 GPUs);
    # its opportunistic short job (12 GPU-s, inside the step), the overflow a
    # tenant at its guarantee queues as opportunistic, time-shares it after a
    # second, not the hour. The long job does not take the GPUs back by its
    # tier while the short one stands at a lower level (the two would
    # preempt each other in turn): the short job starts once and ends, then
    # the long one resumes.
    stop_all(procs)
    procs.clear()
    write("tenants-g.yaml", "tenants:\n  org:\n    guaranteed: {gpu: {H100-80GB: 4}}\n"
          "    teams:\n      team-g: {guaranteed: {gpu: {H100-80GB: 4}}}\n")
    write("split.yaml", BASE.replace("tenants.yaml", "tenants-g.yaml").replace(
        "state_dir: state", "state_dir: state-split") +
        "scheduler: {interval: 0.2s, min_runtime: 1h, grace: 1s, backoff: 0s, "
        "las: {split_gpu_hours: 0.005, split_min_runtime: 1s}}\n")
    proc = start("split.yaml")
    admin = open(os.path.join(TMP, "state-split", "admin.token")).read().strip()
    st, d = call("POST", "/v1/jobs", spec("team-g", "long-g", "60s", "guaranteed"))
    long_id = d["jobs"][0]["id"] if "jobs" in d else d["job"]["id"]
    wait_for(lambda: job(long_id)["state"] == "running", "team-g's long job runs")
    time.sleep(6)  # past the split step
    st, d = call("POST", "/v1/jobs", spec("team-g", "short-g", "3s"))
    short_id = d["jobs"][0]["id"] if "jobs" in d else d["job"]["id"]
    ev = wait_for(lambda: [e for e in call("GET", f"/v1/jobs/{long_id}/events")[1]["events"]
                           if e["kind"] == "preempted"],
                  "the long job is time-shared within seconds, not the hour", 15)
    if ev:
        detail = ev[0].get("detail") or ""
        check("time-sharing" in detail and f"for job {short_id}" in detail, f"why: {detail}")
    wait_for(lambda: job(short_id)["state"] == "completed", "the short job completes", 20)
    check(kinds(short_id).count("started") == 1, f"once, not preempted back: {kinds(short_id)}")
    wait_for(lambda: kinds(long_id).count("started") >= 2, "the long job resumes", 20)
finally:
    stop_all(procs)
finish(TMP, ["log"])
