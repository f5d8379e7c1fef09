#!/usr/bin/env python3
"""A tenant's queued jobs' specs have a budget of bytes (docs/tesserad.md,
limits.queued_spec_mib_per_tenant).

    queued_specs_test.py TESSERAD

Each queued job's spec is a row that its cancel, update or start writes
through the store's one committer, and an array stores one per element: a
1 MiB spec in an array of 100,000 was 100 GB to write at a cancel. Here the
budget is 2 MiB a tenant. Checked, on held jobs (they stay queued):

- an array of 5 elements of a 600 KB spec is refused, 413
  queued_specs_too_large naming the tenant and the budget; one of 3 is
  taken, and then one more job of 600 KB is refused;
- another tenant's jobs have their own budget;
- a cancelled job gives its bytes back;
- an array counts each element, and so does a large array's elements not
  yet jobs;
- an update that grows a queued job's spec past the budget is refused.
Every wait is bounded.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

TESSERAD = sys.argv[1]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import ADMIN_IDENTITY, check, finish, free_port, http_call, stop_all  # noqa: E402
from harness import wait_ready  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-queued-specs-")
PORT = free_port()
URL = f"http://127.0.0.1:{PORT}"


def write(name, text):
    with open(os.path.join(TMP, name), "w") as f:
        f.write(text)


write("cluster.yaml", """node_classes:
  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}
nodes:
  - {names: 'n[1-2]', class: g8}
""")
write("tenants.yaml", "tenants:\n  t: {}\n  u: {}\n  v: {}\n  w: {}\n")
write("tesserad.yaml", f"""listen: 127.0.0.1:{PORT}
cluster: cluster.yaml
tenants: tenants.yaml
state_dir: state
virtual_nodes: all
limits: {{requests_per_s: 100000, burst: 100000, queued_spec_mib_per_tenant: 2}}
scheduler: {{interval: 0.2s}}
""" + ADMIN_IDENTITY)


def spec(tenant, name, kb, n=1):
    # held, so that they stay queued; an array larger than 64 cannot be
    # submitted held (the large one below waits on a held job instead)
    s = {"tenant": tenant, "name": name, "hold": n <= 64, "command": ["true"],
         "tasks": [{"gpus": 1}], "env": {f"V{i}": "x" * 1000 for i in range(kb)}}
    if n > 1:
        s["array_size"] = n
    return s


proc = subprocess.Popen([TESSERAD, "--config", os.path.join(TMP, "tesserad.yaml")],
                        stdout=subprocess.DEVNULL, stderr=open(os.path.join(TMP, "log"), "w"))
try:
    check(wait_ready(URL, timeout=30), "tesserad is ready")
    admin = open(os.path.join(TMP, "state", "admin.token")).read().strip()

    def submit(s):
        return http_call(URL, "POST", "/v1/jobs", admin, s, timeout=60)

    st, d = submit(spec("t", "five", 600, 5))
    text = json.dumps(d)
    check(st == 413 and "queued_specs_too_large" in text and '\\"t\\"' in text and
          "limits.queued_spec_mib_per_tenant" in text and "2 MiB" in text,
          f"5 x 600 KB refused, naming the tenant and the budget: {st} {text[:400]}")
    st, d = submit(spec("t", "three", 600, 3))
    check(st == 201, f"3 x 600 KB taken ({st} {json.dumps(d)[:200]})")
    first = d["jobs"][0]["id"] if st == 201 else 0
    st, d = submit(spec("t", "fourth", 600))
    check(st == 413, f"one more of 600 KB is refused ({st})")
    st, d = submit(spec("u", "other", 600, 3))
    check(st == 201, f"tenant u has its own budget ({st})")
    st, d = http_call(URL, "POST", f"/v1/jobs/{first}/cancel", admin)
    check(st == 200, f"one of t's jobs cancelled ({st})")
    st, d = submit(spec("t", "fourth", 600))
    check(st == 201, f"its bytes are given back: one more of 600 KB taken ({st})")
    st, d = submit(spec("v", "huge", 0, 50000))
    m = re.search(r"50000 more of (\d+) bytes each", json.dumps(d))
    check(st == 413 and m, f"an array counts each element: {st} {json.dumps(d)[:300]}")
    each = int(m.group(1)) if m else 1000
    n = int(1.5 * 2**20 / each)  # a large array: 64 jobs, the rest elements not yet jobs
    # its elements made jobs later wait for a held job (they stay queued)
    st, d = submit(spec("v", "gate", 0))
    gate = d["jobs"][0]["id"] if st == 201 else 0
    large = dict(spec("v", "large", 0, n), dependency=f"afterok:{gate}")
    st, d = submit(large)
    check(st == 201 and n > 1000, f"{n} elements of {each} bytes taken ({st})")
    st, d = submit(spec("v", "more", 600))
    m = re.search(r"take (\d+) bytes", json.dumps(d))
    held = int(m.group(1)) if m else 0  # the gate's spec, and each element's with its dependency
    check(st == 413 and n * each <= held <= n * (each + 64) + 1000,
          f"the large array's elements not yet jobs count, each: {st} {json.dumps(d)[:300]}")

    # an update that grows a queued job's spec is held to the budget too
    st, d = submit(spec("w", "three", 600, 3))
    check(st == 201, f"tenant w: 3 x 600 KB taken ({st})")
    pad = spec("w", "pad", 0)
    pad["env"] = {"P": ""}
    st, d = submit(dict(pad, array_size=90000, hold=False))
    m = re.search(r"take (\d+) bytes; 90000 more of (\d+) bytes each", json.dumps(d))
    check(st == 413 and m, f"w's bytes read from a refusal: {json.dumps(d)[:300]}")
    held, each = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
    pad["env"] = {"P": "x" * (2 * 2**20 - held - each - 500)}
    st, d = submit(pad)
    check(st == 201, f"w filled to 500 bytes under its budget ({st} {json.dumps(d)[:200]})")
    padded = d["jobs"][0]["id"] if st == 201 else 0
    st, d = http_call(URL, "PATCH", f"/v1/jobs/{padded}", admin,
                      {"dependency": "afterany:" + ":".join([str(padded - 1)] * 100)})
    check(st == 413 and "queued_specs_too_large" in json.dumps(d),
          f"a dependency that grows the spec past the budget is refused: {st} {json.dumps(d)[:300]}")
    st, d = http_call(URL, "PATCH", f"/v1/jobs/{padded}", admin, {"nice": 5})
    check(st == 200, f"an update within it is taken ({st} {json.dumps(d)[:200]})")
finally:
    stop_all([proc])
finish(TMP, ["log"])
