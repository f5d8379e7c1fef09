#!/usr/bin/env python3
"""standby_server.py - a stand-in for a standby tesserad, for the CLI tests.

    tests/cli/standby_server.py PORT_FILE LEADER_URL|-|@FILE

Listens on 127.0.0.1 at an ephemeral port (written to PORT_FILE once
listening) and answers every request as a standby controller does
(docs/ha.md): 503 {"error": {"code": "standby", "message": ..., "leader":
LEADER_URL, or null for "-", or FILE's first line, read at each request, for
"@FILE": two standbys can name each other}}. GET /_debug/hits answers 200 {"hits": N},
how many other requests it was sent, so the tests can prove that the CLI's
tries are bounded and that it goes straight to the controller that answered
last. Python standard library only; it runs until killed.
"""
import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HITS = [0]
LOCK = threading.Lock()
LEADER = None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, fmt, *args):
        pass

    def send(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if self.path == "/_debug/hits":
            with LOCK:
                return self.send(200, {"hits": HITS[0]})
        with LOCK:
            HITS[0] += 1
        leader = LEADER
        if leader and leader.startswith("@"):
            with open(leader[1:]) as f:
                leader = f.readline().strip()
        self.send(503, {"error": {"code": "standby", "leader": leader,
                                  "message": "this controller is a standby"}})

    do_GET = do_POST = do_PUT = do_DELETE = answer


def main():
    global LEADER
    if len(sys.argv) != 3:
        sys.stderr.write("usage: standby_server.py PORT_FILE LEADER_URL|-|@FILE\n")
        return 2
    LEADER = None if sys.argv[2] == "-" else sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    tmp = sys.argv[1] + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(tmp, sys.argv[1])
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
