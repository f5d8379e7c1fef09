#!/usr/bin/env python3
"""One tenant's reads of a path that costs the controller its whole queue
(/metrics, a pending job's explain) while another tenant reads one small
job: the other's read latency, with NARRAYS arrays of 100 pending jobs
queued (99,000 at 990: under the default cap of 100,000 a tenant).

    read_load.py TESSERAD NARRAYS PATH   (bench/read-load BUILD_DIR [NARRAYS] [PATH])

PATH may name LAST (the last job submitted) or FIRSTP (job 20, pending).
Two threads call PATH for 10 s; the other tenant's reader, in its own
process, GETs its job every 20 ms.
"""
import os
import shutil
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from harness import LatencyReader, bench_ctld, http_call, read_unparsed  # noqa: E402

BIN, NA, PATH = sys.argv[1], int(sys.argv[2]), sys.argv[3]


def spec(name, tenant, size=1):
    s = {"tenant": tenant, "name": name, "command": ["run"], "time_limit": "1h",
         "duration": "1h", "tasks": [{"gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}]}
    if size > 1:
        s["array_size"] = size
    return s


def main():
    p, url, tok, tmp = bench_ctld(BIN, "rl-", ["{names: 'n-[1-1]', class: g8}"],
                                  "virtual_nodes: all\nscheduler: {interval: 0.2s, backoff: 0s}\n",
                                  ["team-a", "team-b"])
    try:
        st, d = http_call(url, "POST", "/v1/jobs", tok, spec("small", "team-b"))
        small = d["jobs"][0]["id"]
        t0 = time.time()
        for i in range(NA):
            st, d = http_call(url, "POST", "/v1/jobs", tok, spec(f"a{i}", "team-a", 100))
            assert st == 201, (st, str(d)[:200])
        last = d["jobs"][-1]["id"]
        print(f"submitted {NA * 100} in {time.time() - t0:.1f} s; last {last}", flush=True)
        time.sleep(3)
        path = PATH.replace("LAST", str(last)).replace("FIRSTP", "20")
        stop = time.time() + 10
        other = LatencyReader(url, f"/v1/jobs/{small}", tok, stop)
        n = [0]

        def hammer():
            while time.time() < stop:
                read_unparsed(url, path, tok)
                n[0] += 1

        ts = [threading.Thread(target=hammer) for _ in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        print(f"{PATH}: {n[0]} calls in 10 s; other GET {other.summary()}")
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
