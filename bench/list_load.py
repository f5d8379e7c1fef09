#!/usr/bin/env python3
"""One tenant listing its own jobs with large specs while another reads one
small job: the other's read latency (the list's specs are parsed; under the
lock, every reader and the cycle wait for it).

    list_load.py TESSERAD NJOBS KB     (bench/list-load BUILD_DIR: 200 jobs, 500 KB)
"""
import os, sys, time, threading, shutil
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "lib"))
from harness import bench_ctld, http_call, read_unparsed
BIN = sys.argv[1]; NJ = int(sys.argv[2]); KB = int(sys.argv[3])
p, URL, tok, TMP = bench_ctld(BIN, "lb-", ["{names: 'n-[1-1]', class: g8}"],
                              "virtual_nodes: all\nscheduler: {interval: 0.2s, backoff: 0s}\n",
                              ["team-a", "team-b"])
try:
    big = {f"V{i}": "x" * 1000 for i in range(KB)}
    def spec(name, tenant, env=None):
        s = {"tenant": tenant, "name": name, "command": ["run"], "time_limit": "1h", "duration": "1h",
             "tasks": [{"gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}]}
        if env: s["env"] = env
        return s
    st, d = http_call(URL, "POST", "/v1/jobs", tok, spec("small", "team-b")); small = d["jobs"][0]["id"]
    for i in range(NJ):
        st, d = http_call(URL, "POST", "/v1/jobs", tok, spec(f"big{i}", "team-a", big))
        assert st == 201, (st, str(d)[:200])
    stop = time.time() + 10
    def lister():
        while time.time() < stop:
            read_unparsed(URL, f"/v1/jobs?tenant=team-a&limit={NJ}", tok)
    ts = [threading.Thread(target=lister) for _ in range(2)]
    for t in ts: t.start()
    lat = []
    while time.time() < stop:
        q = time.time(); http_call(URL, "GET", f"/v1/jobs/{small}", tok); lat.append(time.time() - q); time.sleep(0.02)
    for t in ts: t.join()
    lat.sort()
    print(f"{os.path.basename(BIN)} {NJ} jobs x {KB} KB specs, 2 listers: small GET n={len(lat)} p50 {1000*lat[len(lat)//2]:.1f} ms p99 {1000*lat[int(len(lat)*0.99)]:.1f} ms max {1000*lat[-1]:.1f}")
finally:
    p.kill(); p.wait(); shutil.rmtree(TMP, ignore_errors=True)
