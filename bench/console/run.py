#!/usr/bin/python3
"""The web console at scale: first paint and the daemon's CPU with it open.

    bench/console/run.py BUILD_DIR [--nodes 1000] [--jobs 10000] [--watch 60] [--runs 3]

Starts tesserad (BUILD_DIR/tesserad, a Release build for figures that mean
something) on a virtual cluster of NODES nodes of 8 H100s in racks of 16
under 4 spines, 8 tenants, and submits JOBS one-GPU jobs of an hour (so
about 8 per node run and the rest wait), then drives headless Chromium
(chromium, chromium-driver, python3-selenium):

- first paint: from navigation to /ui/#/map (signed in) until every node of
  the map is drawn, median of RUNS loads (performance.now() in the page:
  fetching, JSON parsing and drawing included);
- CPU: tesserad's user+system time (from /proc) over WATCH seconds with no
  console, then over WATCH seconds with the map open and polling, then with
  the queue view open (it reads every active job), as a share of one core;
  and the size and time of the map's API calls.

Prints one JSON object. Bounded: submission is capped by its own count, each
wait by a deadline; on 2 cores the whole run takes about 3-4 minutes at the
default sizes.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "lib"))
from harness import free_port, http_call, stop_all, wait_ready  # noqa: E402

from selenium import webdriver  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("build")
ap.add_argument("--nodes", type=int, default=1000)
ap.add_argument("--jobs", type=int, default=10000)
ap.add_argument("--watch", type=float, default=60.0)
ap.add_argument("--runs", type=int, default=3)
a = ap.parse_args()
TMP = tempfile.mkdtemp(prefix="tessera-console-bench-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
TENANTS = [f"team-{i}" for i in range(8)]
RACK_NODES, SPINES = 16, 4
TICKS = os.sysconf("SC_CLK_TCK")

racks = (a.nodes + RACK_NODES - 1) // RACK_NODES
nodes = "\n".join(
    f"  - {{names: 'r{r:03d}-n[01-{min(RACK_NODES, a.nodes - r * RACK_NODES):02d}]', class: h100, "
    f"topology: {{spine: s{r % SPINES}, rack: r{r:03d}}}}}" for r in range(racks))
open(os.path.join(TMP, "cluster.yaml"), "w").write(f"""topology:
  levels: [spine, rack, node, gpu]
node_classes:
  h100: {{gpu_model: H100-80GB, gpus: 8, cpu_milli: 224000, memory_mib: 2097152}}
nodes:
{nodes}
""")
share = a.nodes * 8 // len(TENANTS)
open(os.path.join(TMP, "tenants.yaml"), "w").write(
    "tenants:\n" + "".join(f"  {t}: {{guaranteed: {{gpu: {{H100-80GB: {share}}}}}}}\n" for t in TENANTS))
open(os.path.join(TMP, "tesserad.yaml"), "w").write(f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
virtual_nodes: all
state_dir: state
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 5s}}
""")
log = open(os.path.join(TMP, "tesserad.log"), "ab")
procs = [subprocess.Popen([os.path.join(a.build, "tesserad"), "--config",
                          os.path.join(TMP, "tesserad.yaml")], stdout=log, stderr=log)]
pid = procs[0].pid


def cpu_s():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICKS


def call(method, path, body=None):
    return http_call(URL, method, path, admin, body, timeout=120)


out = {"nodes": a.nodes, "gpus": a.nodes * 8, "jobs": a.jobs}
driver = None
try:
    assert wait_ready(URL, 30), "tesserad did not start"
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    per = max(1, min(500, -(-a.jobs // (4 * len(TENANTS)))))  # every tenant gets work
    t0 = time.time()
    for k in range((a.jobs + per - 1) // per):
        n = min(per, a.jobs - k * per)
        st, d = call("POST", "/v1/jobs", {
            "tenant": TENANTS[k % len(TENANTS)], "name": f"bench-{k}", "tier": "guaranteed",
            "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 1000, "memory_mib": 4096}],
            "time_limit": "2h", "duration": "1h", "command": ["true"], "array_size": n})
        assert st in (200, 201), (st, d)
    out["submit_s"] = round(time.time() - t0, 1)
    deadline = time.time() + 120
    while time.time() < deadline:  # until the cluster is full
        st, d = call("GET", "/v1/nodes")
        free = sum(n["gpus_free"] for n in d["nodes"])
        if free < 8:
            break
        time.sleep(2)
    st, d = call("GET", "/v1/jobs?state=running&limit=1")
    time.sleep(6)  # a quiet cycle or two
    # the map's API calls, as the page makes them
    calls = {}
    for path in ["/v1/nodes", "/v1/tenants", "/v1/jobs?state=running&limit=1000"]:
        t = time.time()
        req = urllib.request.Request(URL + path, headers={"Authorization": "Bearer " + admin})
        body = urllib.request.urlopen(req, timeout=120).read()
        calls[path] = {"bytes": len(body), "ms": round(1000 * (time.time() - t), 1)}
    out["api_calls"] = calls
    c0, w0 = cpu_s(), time.time()
    time.sleep(a.watch)
    out["cpu_idle_core_share"] = round((cpu_s() - c0) / (time.time() - w0), 4)

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"]:
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    driver.set_script_timeout(60)
    driver.get(URL + "/ui/")
    driver.execute_script("sessionStorage.setItem('tessera.token', arguments[0])", admin)
    paints = []
    for _ in range(a.runs):
        driver.get("about:blank")
        driver.get(URL + "/ui/#/map")
        try:
            ms = driver.execute_async_script("""
            const want = arguments[0], done = arguments[1];
            (function wait() {
              if (document.querySelectorAll('.node').length >= want) {
                void document.body.offsetHeight;  /* style and layout done */
                done(performance.now());
              }
              else setTimeout(wait, 20);
            })();""", a.nodes)
        except Exception:
            driver.save_screenshot(os.path.join(TMP, "timeout.png"))
            print(driver.get_log("browser"), TMP, file=sys.stderr)
            raise
        paints.append(round(ms, 1))
    out["first_paint_ms"] = paints
    out["first_paint_ms_median"] = statistics.median(paints)
    # the console open on the map, polling, for WATCH seconds
    c0, w0 = cpu_s(), time.time()
    time.sleep(a.watch)
    out["cpu_console_core_share"] = round((cpu_s() - c0) / (time.time() - w0), 4)
    out["console_cost_core_share"] = round(out["cpu_console_core_share"] - out["cpu_idle_core_share"], 4)
    out["poll_interval_s"] = driver.execute_script("return (T.view.pollMs || POLL_MS) / 1000")
    # the queue (every active job, all pages) for WATCH seconds: the costliest view
    driver.get(URL + "/ui/#/queue")
    t = time.time()
    driver.execute_async_script("""
        const done = arguments[0];
        (function wait() {
          const c = document.getElementById('q-count');
          if (c && c.textContent) done(); else setTimeout(wait, 20);
        })();""")
    out["queue_first_paint_ms"] = round(1000 * (time.time() - t), 1)
    c0, w0 = cpu_s(), time.time()
    time.sleep(a.watch)
    out["cpu_queue_core_share"] = round((cpu_s() - c0) / (time.time() - w0), 4)
finally:
    if driver:
        driver.quit()
    stop_all(procs)
print(json.dumps(out, indent=1))
