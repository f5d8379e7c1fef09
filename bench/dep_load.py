#!/usr/bin/env python3
"""A hostile dependency against the cycle: one held job H, an array of SPAN
elements waiting on it (afterok:H), and NJ jobs whose dependency names the
array K times. Prints the cycles run in 10 s and the latency of reading one
job meanwhile (every read waits for the lock the cycle holds).

    dep_load.py TESSERAD K NJ SPAN     (bench/dep-load BUILD_DIR runs 580 20 50000
                                        and 1 200 50000)
"""
import os, shutil, sys, time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from harness import bench_ctld, http_call
BIN = sys.argv[1]; K = int(sys.argv[2]); NJ = int(sys.argv[3]); SPAN = int(sys.argv[4])
p, URL, tok, TMP = bench_ctld(BIN, "depb-", ["{names: 'n-[1-1]', class: g8}"],
                              "virtual_nodes: all\nscheduler: {interval: 0.2s, backoff: 0s}\n",
                              ["team-a"])
try:
    def spec(name, dep=None, arr=0):
        s = {"tenant": "team-a", "name": name, "command": ["run"], "time_limit": "1h", "duration": "1h",
             "tasks": [{"gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}]}
        if dep: s["dependency"] = dep
        if arr: s["array_size"] = arr
        return s
    st, d = http_call(URL, "POST", "/v1/jobs", tok, spec("h")); h = d["jobs"][0]["id"]
    http_call(URL, "POST", f"/v1/jobs/{h}/hold", tok, {})
    st, d = http_call(URL, "POST", "/v1/jobs", tok, spec("arr", f"afterok:{h}", SPAN)); a = d["jobs"][0]["id"]
    dep = "afterany:" + ":".join([str(a)] * K)
    for i in range(NJ):
        st, d = http_call(URL, "POST", "/v1/jobs", tok, spec(f"x{i}", dep))
        assert st == 201, (st, d)
    def m():
        st, t = http_call(URL, "GET", "/metrics", tok)
        s = c = 0
        for l in t.splitlines():
            if l.startswith("tessera_scheduling_cycle_seconds_sum "): s = float(l.split()[1])
            if l.startswith("tessera_scheduling_cycle_seconds_count "): c = float(l.split()[1])
        return s, c
    time.sleep(3)
    s0, c0 = m(); t0 = time.time()
    lat = []
    while time.time() - t0 < 10:
        q = time.time(); http_call(URL, "GET", f"/v1/jobs/{h}", tok); lat.append(time.time() - q); time.sleep(0.05)
    s1, c1 = m()
    lat.sort()
    print(f"{os.path.basename(BIN)} K={K} jobs={NJ} span={SPAN} dep chars={len(dep)}: cycles {c1-c0:.0f} in 10 s, mean cycle {1000*(s1-s0)/max(1,c1-c0):.1f} ms; GET p50 {1000*lat[len(lat)//2]:.1f} ms p99 {1000*lat[int(len(lat)*0.99)]:.1f} ms max {1000*lat[-1]:.1f}")
finally:
    p.kill(); p.wait(); shutil.rmtree(TMP, ignore_errors=True)
