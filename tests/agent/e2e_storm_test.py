#!/usr/bin/env python3
"""Controller failures under a submit storm with real agents running real
tasks: a small run of bench/ha_failover.py, its counts checked.

    e2e_storm_test.py ha|single TESSERAD TESSERA_AGENT FAKE_NVML FIXTURE

`ha` (CTest agent/e2e_ha_storm): one PostgreSQL, three tesserad with `ha:`
(lease 3 s, renew 0.5 s), two agents given the three URLs, a two-node gang
and long tasks running, four clients submitting with Idempotency-Keys; the
leader is killed with SIGKILL twice, then cut off from PostgreSQL once
(a TCP proxy drops its connections), then PostgreSQL is stopped for 3 s.
Skipped (77) without PostgreSQL binaries.
`single` (CTest agent/e2e_crash_storm): one tesserad on SQLite, SIGKILLed
three times at random instants and restarted.

Checked: no acknowledged job lost, no key stored twice, no task started
twice (the agents' start log and each task's own line), the gang running
on its first processes after every failover, no controller exit but the
kills and the lost-lease exit 75, every failover measured and within the
lease + renew + slack, and (ha) every event and job stamped with the epoch
that wrote it and none of an older epoch stored after a newer epoch's, the cut-off leader gone before another led, nothing
acknowledged while the database was down, a leader again once it is back.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

MODE, TESSERAD, AGENT, FAKE, FIXTURE = sys.argv[1:6]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "lib"))
from harness import FAILS, check  # noqa: E402

LEASE, RENEW = 3.0, 0.5
SLACK_S = 8.0  # the controller's restore and clients' retries on a loaded machine
KILLS = 2 if MODE == "ha" else 3

out_json = os.path.join(tempfile.mkdtemp(prefix="tessera-storm-"), "result.json")
cmd = [sys.executable, os.path.join(ROOT, "bench", "ha_failover.py"), "--mode", MODE,
       "--tesserad", TESSERAD, "--agent", AGENT, "--fake", FAKE, "--fixture", FIXTURE,
       "--agents", "2", "--clients", "4", "--rate", "2", "--kills", str(KILLS),
       "--gap-min", "0.5", "--gap-max", "2", "--seed", "7", "--json", out_json]
if MODE == "ha":
    cmd += ["--controllers", "3", "--cuts", "1", "--db-down", "3", "--lease", str(LEASE),
            "--renew", str(RENEW)]
r = subprocess.run(cmd, timeout=280)
if r.returncode == 77:
    sys.exit(77)
if not os.path.exists(out_json):
    print(f"FAIL: bench/ha_failover.py ended with {r.returncode} and no result")
    sys.exit(1)
res = json.load(open(out_json))
shutil.rmtree(os.path.dirname(out_json), ignore_errors=True)

check(res["kills"] == KILLS, f"{KILLS} kills ({res['kills']})")
check(res["acknowledged"] > 0 and res["task_starts"] > 0,
      f"the storm ran: {res['acknowledged']} acknowledged, {res['task_starts']} task starts")
check(res["lost"] == 0, f"no acknowledged job lost ({res['lost_keys']})")
check(res["duplicated"] == 0 and res["conflicting_acks"] == 0,
      f"no key stored twice ({res['duplicated_keys']}, {res['conflicting_acks']} conflicting)")
check(res["refused"] == 0, f"no submission refused for good ({res['refused_examples']})")
check(res["started_twice"] == 0, f"no task started twice ({res['started_twice_tasks']})")
check(res["ran_twice"] == 0, f"no task ran twice ({res['ran_twice_keys']})")
check(res["gangs_broken"] == 0, "the gang ran on through every failover")
check(not res["crashes"], f"no controller crashed ({res['crashes']})")
check(not res["agents_exited"], f"every agent ran to the end ({res['agents_exited']})")
bound = (LEASE + RENEW if MODE == "ha" else 0) + SLACK_S
for x in res["rounds"]:
    check(x.get("ack_s") is not None and x["ack_s"] <= bound and
          x.get("start_s") is not None and x["start_s"] <= bound,
          f"round {x['round'] + 1} ({x['fault']}): acknowledged after {x.get('ack_s')} s, a task "
          f"started after {x.get('start_s')} s (bound {bound:g} s)")
if MODE == "ha":
    check(res["keys_retried"] > 0,
          f"keys were retried through the failovers ({res['keys_retried']}, "
          f"{res['keys_retried_already_stored']} already stored)")
    stamps = res["epochs_events"] + res["epochs_jobs"]
    check(all(r[0] >= 1 for r in stamps) and len(res["epochs_events"]) >= KILLS + 2 and
          len(res["epochs_jobs"]) >= KILLS + 2,
          f"every event and job records the epoch that wrote it (epoch, rows, first id, last "
          f"id: events {res['epochs_events']}, jobs {res['epochs_jobs']})")
    check(res["epoch_inversions"] == 0,
          f"no event or job of an older epoch after a newer one's ({res['epoch_inversions']})")
    check(res["cuts"] == 1 and res["cut_stopped_first"] == 1,
          "the cut-off leader exited before another led")
    db = res["db_down"]
    check(db["acknowledged_while_down"] == 0 and db["leader_after_s"] is not None,
          f"database down 3 s: nothing acknowledged, a leader again after "
          f"{db['leader_after_s']} s ({db['answers']})")
    check(set(db["answers"]) <= {"503 standby", "503 unavailable", "no answer"},
          f"database down: every answer a 503 ({db['answers']})")
print("all passed" if not FAILS else f"{len(FAILS)} FAILED")
sys.exit(1 if FAILS else 0)
