#!/usr/bin/env python3
"""The HTTP API against its own OpenAPI document, property-based (issue 25).

    schemathesis_test.py TESSERAD

Starts tesserad on a virtual cluster (no agents) and runs schemathesis
(PyPI; scripts/install-deps test installs it) against docs/openapi.json as
the daemon serves it, three times: with no token, as a tenant's user and as
admin. Every phase (examples, coverage, fuzzing, stateful: the links),
positive and negative data, every check but positive_data_acceptance (a job
spec's schema is open on purpose: most random objects are not a job the
parser accepts, and it says so with a 400 naming the field). One worker:
Python 3.11's ast module is not thread-safe under hypothesis. Bounded:
TS_SCHEMATHESIS_EXAMPLES cases per operation (default 15) and
TS_SCHEMATHESIS_TIME seconds per role (default 40), seed TS_SCHEMATHESIS_SEED
(default 25). Exit 77 (skipped) when schemathesis is not installed. Any
failure fails the test, with schemathesis's report of it.
"""
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import free_port, http_call  # noqa: E402

EXAMPLES = os.environ.get("TS_SCHEMATHESIS_EXAMPLES", "15")
MAX_TIME_S = os.environ.get("TS_SCHEMATHESIS_TIME", "40")
SEED = os.environ.get("TS_SCHEMATHESIS_SEED", "25")
RUN_TIMEOUT_S = int(MAX_TIME_S) * 3 + 60
ST = ["import sys; from schemathesis.cli import schemathesis; sys.argv[0] = 'schemathesis'; "
      "schemathesis()"]

try:
    import schemathesis  # noqa: F401
except ImportError:
    print("SKIP: schemathesis is not installed (scripts/install-deps test installs it)")
    sys.exit(77)

TMP = tempfile.mkdtemp(prefix="tessera-st-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"
open(os.path.join(TMP, "cluster.yaml"), "w").write("""topology:
  levels: [leaf, node, gpu]
node_classes:
  g4: {gpu_model: H100-80GB, gpus: 4, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'a-[1-2]', class: g4, topology: {leaf: la}}
""")
open(os.path.join(TMP, "tenants.yaml"), "w").write("""tenants:
  team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
""")
# limits raised: the tester is one client sending as fast as it can
open(os.path.join(TMP, "tesserad.yaml"), "w").write(f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
virtual_nodes: all
state_dir: state
limits: {{requests_per_s: 100000, burst: 100000}}
scheduler: {{interval: 0.2s}}
""")

log = open(os.path.join(TMP, "tesserad.log"), "ab")
proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=log, stderr=log)
fails = 0
try:
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(URL + "/readyz", timeout=2) as r:
                if r.status == 200:
                    break
        except Exception:
            time.sleep(0.1)
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()
    st, d = http_call(URL, "POST", "/v1/tokens", admin,
                      {"name": "alice", "role": "user", "tenant": "team-a"})
    assert st == 201, (st, d)
    user = d["token"]["secret"]
    schema = os.path.join(TMP, "openapi.json")
    with urllib.request.urlopen(
            urllib.request.Request(URL + "/v1/openapi.json",
                                   headers={"Authorization": "Bearer " + admin})) as r:
        open(schema, "wb").write(r.read())
    # admin last: it may revoke tokens and replace the tenants
    for role, token in [("no token", None), ("user", user), ("admin", admin)]:
        args = [sys.executable, "-c", ST[0], "run", schema, "--url", URL,
                "--phases", "examples,coverage,fuzzing,stateful", "--mode", "all",
                "--checks", "all", "--exclude-checks", "positive_data_acceptance",
                "--max-examples", EXAMPLES, "--max-time", MAX_TIME_S, "--workers", "1",
                "--seed", SEED, "--generation-database", "none", "--no-color",
                "--request-timeout", "10", "--suppress-health-check", "all"]
        if token:
            args += ["-H", "Authorization: Bearer " + token]
        t0 = time.time()
        r = subprocess.run(args, cwd=TMP, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        out = r.stdout + r.stderr
        summary = out[out.rfind("SUMMARY"):] if "SUMMARY" in out else out[-3000:]
        tail = out[-8000:] if r.returncode else summary
        print(f"--- schemathesis as {role}: exit {r.returncode}, {time.time() - t0:.0f} s\n{tail}")
        if r.returncode != 0:
            fails += 1
    if proc.poll() is not None:
        print("FAIL: tesserad exited during the run")
        fails += 1
finally:
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=20)
if fails:
    # a sanitizer's report whole (its stacks name the bug), else the log's tail
    text = open(os.path.join(TMP, "tesserad.log"), errors="replace").read()
    at = text.find("==ERROR: ")
    print(text[max(0, at - 500):at + 20000] if at >= 0 else text[-3000:])
print(f"{'FAIL' if fails else 'PASS'}: schemathesis over three roles ({fails} failed)")
sys.exit(1 if fails else 0)
