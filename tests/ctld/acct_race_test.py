#!/usr/bin/env python3
"""Accounting reads while jobs end.

    acct_race_test.py TESSERAD

GET /v1/acct?steps=true reads its page's rows under the controller's lock
and their steps after, with the lock released (an ended job's steps are a
store read each). A row kept for that second part must not point into a job
held in memory: a job that ends meanwhile leaves memory, and its row was
read after it was freed (an ASan build of tesserad aborted on
`GET /v1/acct?steps=true` while virtual jobs ended). Here 60 one-GPU jobs
of 0.3 s run on 16 virtual GPUs, so jobs start and end in every cycle,
while two clients read the accounting with steps, as JSON and as CSV, for
at most 10 s (bounded in count too). Every answer is 200, every row of a
job that ran names its GPU model, and tesserad is alive at the end with no
sanitizer report in its log.
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, ctld_files, finish, free_port, http_call, stop_all, wait_ready  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-acct-race-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
ctld_files(TMP, PORT, ["{names: 'v-[1-2]', class: g8}"],
           "virtual_nodes: all\nscheduler: {interval: 0.02s}\n")
log = open(os.path.join(TMP, "log"), "w")
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=log)
bad = []
answers = [0]


def reader(admin, fmt, until):
    n = 0
    while time.monotonic() < until and n < 2000:
        n += 1
        try:
            st, d = http_call(URL, "GET", f"/v1/acct?steps=true&limit=1000&format={fmt}",
                              admin, timeout=30)
        except OSError as e:  # the controller went away
            bad.append(f"{fmt}: {e}")
            return
        if st != 200:
            bad.append(f"{fmt}: {st} {str(d)[:200]}")
            return
        answers[0] += 1
        if fmt == "json":
            for row in d.get("jobs", []) if isinstance(d, dict) else []:
                if row.get("start") is not None and row.get("gpu_model") != "H100-80GB":
                    bad.append(f"job {row.get('id')} ran but reads gpu_model "
                               f"{row.get('gpu_model')!r}")
                    return


try:
    check(wait_ready(URL, timeout=30), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    for k in range(3):
        st, d = http_call(URL, "POST", "/v1/jobs", admin,
                          {"name": f"short{k}", "tenant": "t", "array_size": 20,
                           "tasks": [{"gpus": 1}], "duration": 0.3})
        check(st in (200, 201), f"an array of 20 short jobs is accepted ({st})")
    until = time.monotonic() + 10
    threads = [threading.Thread(target=reader, args=(admin, fmt, until))
               for fmt in ("json", "csv")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    check(not bad, f"every accounting read answers 200 with its jobs' GPU model: {bad[:3]}")
    check(answers[0] >= 10, f"the readers were answered ({answers[0]} answers)")
    check(proc.poll() is None, "tesserad is alive after the reads")
    st, d = http_call(URL, "GET", "/v1/acct?limit=1000", admin)
    ran = [r for r in d.get("jobs", []) if r.get("start") is not None] \
        if st == 200 and isinstance(d, dict) else []
    check(len(ran) >= 16, f"jobs ran and ended while they were read ({len(ran)} ran)")
finally:
    if proc.poll() is None:
        stop_all([proc])
    log.close()
finish(TMP, ["log"])
