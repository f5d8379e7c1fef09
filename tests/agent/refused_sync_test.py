#!/usr/bin/env python3
"""A sync the controller refuses as too large (413) is never sent again as
is (issue 24, finding 1): a real tessera-agent, running a real task, against
a small fake controller on loopback that asks for the task's output and
answers 413 to the first sync carrying the answer. The agent's next sync must carry, in place
of the answer, an error saying it was refused, and the agent must keep
syncing (the node is never left without a report). The fake also sends a
task outside the agent protocol, which the agent must refuse naming its field.

    refused_sync_test.py TESSERA_AGENT [FAKE_NVML FIXTURE]

Every wait is bounded.
"""
import http.server
import json
import os
import pwd
import subprocess
import sys
import tempfile
import threading
import time

AGENT = sys.argv[1]
FAKE = sys.argv[2] if len(sys.argv) > 3 and os.path.exists(sys.argv[2]) else None
FIXTURE = sys.argv[3] if FAKE else None
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import check, finish, stop_all, wait_for  # noqa: E402

TMP = tempfile.mkdtemp(prefix="tessera-refused-")
SEEN = []          # (path, body) of every request, in order
LOCK = threading.Lock()
STATE = {"refused": 0}


class Fake(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        with LOCK:
            SEEN.append((self.path, body))
            refuse = (self.path == "/v1/agent/sync" and body.get("logs")
                      and STATE["refused"] == 0)
            if refuse:
                STATE["refused"] += 1
        if refuse:
            out, code = {"error": {"code": "too_large", "message": "request body: larger "
                                   "than 1048576 bytes"}}, 413
        else:
            # the desired state: one task, and, once it runs, one output request
            # until a sync answers it
            with LOCK:
                running = any(t.get("job") == 5 and t.get("state") == "running"
                              for _, b in SEEN for t in b.get("tasks", []))
                answered = any(p == "/v1/agent/sync" and b.get("logs") for p, b in SEEN)
            logs = [{"id": 7, "job": 5, "rank": 0, "stream": "stdout", "tail": 1048576}] \
                if running and not answered else []
            task = {"job": 5, "rank": 0, "action": "run", "tenant": "t", "world_size": 1,
                    "command": ["/bin/sh", "-c", "echo hello; sleep 8"], "env": [], "gpus": [],
                    # the identity the task runs as: this test's own (docs/agent-protocol.md)
                    "user": pwd.getpwuid(os.getuid()).pw_name, "uid": os.getuid(),
                    "allow_root": True}
            # and one outside the protocol (world_size 0): never started, reported
            # failed naming the field (tessera/agent_proto.h)
            bad = dict(task, job=6, world_size=0)
            out, code = {"gen": len(SEEN), "drained": False, "lost_after_s": 30,
                         "tasks": [task, bad], "mig": [], "logs": logs}, 200
            time.sleep(0.2)  # a short long-poll
        data = json.dumps(out).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Fake)
threading.Thread(target=srv.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{srv.server_address[1]}"
tf = os.path.join(TMP, "node.token")
open(tf, "w").write("tsk_fake\n")
env = dict(os.environ)
if FAKE:
    env["TESSERA_FAKE_NVML_FIXTURE"] = FIXTURE
procs = [subprocess.Popen([AGENT, "--server", url, "--node", "n-1", "--token-file", tf,
                           "--state-dir", os.path.join(TMP, "n-1"), "--nvml",
                           FAKE or "/nonexistent/libnvidia-ml.so.1"],
                          stdout=subprocess.DEVNULL,
                          stderr=open(os.path.join(TMP, "agent.log"), "w"), env=env)]
try:
    def syncs_with_logs():
        with LOCK:
            return [b for p, b in SEEN if p == "/v1/agent/sync" and b.get("logs")]
    got = wait_for(lambda: len(syncs_with_logs()) >= 2 or None,
                   "the agent syncs again after the 413", timeout=20)
    bodies = syncs_with_logs()
    if len(bodies) >= 2:
        first, second = bodies[0]["logs"], bodies[1]["logs"]
        check(first != second, f"the refused body is not sent again as is: {first} -> {second}")
        check(len(second) == 1 and second[0].get("id") == 7 and "413" in second[0].get("error", "")
              and "data" not in second[0],
              f"the answer it carried says it was refused: {second}")
    n0 = len(SEEN)
    wait_for(lambda: len(SEEN) >= n0 + 3, "the agent keeps syncing", timeout=10)
    with LOCK:
        six = [t for p, b in SEEN if p == "/v1/agent/sync" for t in b.get("tasks", [])
               if t.get("job") == 6]
    check(six and six[-1].get("state") == "failed" and six[-1].get("launch") is True and
          "tasks[1].world_size: must be an integer in 1.." in six[-1].get("error", ""),
          f"a task outside the protocol is reported failed, naming its field: {six[-1:] }")
    log = open(os.path.join(TMP, "agent.log")).read()
    check("refused a sync as too large" in log, "the agent says so on stderr")
finally:
    stop_all(procs)
    srv.shutdown()
finish(TMP, ("agent.log",))
