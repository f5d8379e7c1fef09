"""harness.py - what the end-to-end tests of tesserad and its agents share:
a free loopback port, JSON over HTTP with a bearer token, a check that
records failures instead of stopping at the first, and a bounded wait.

The tests put tests/lib on sys.path and import from here.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

FAILS = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_call(url, method, path, token=None, body=None, headers=None, raw=None, timeout=30):
    """(status, answer): the answer parsed when it is JSON, else its text."""
    h = dict(headers or {})
    if token:
        h["Authorization"] = "Bearer " + token
    data = raw
    if body is not None:
        data = json.dumps(body).encode()
        h.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(url + path, data=data, method=method, headers=h)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            txt = r.read().decode()
            return r.status, (json.loads(txt) if txt.strip().startswith(("{", "[")) else txt)
    except urllib.error.HTTPError as e:
        txt = e.read().decode()
        try:
            return e.code, json.loads(txt)
        except ValueError:
            return e.code, txt


def check(cond, what):
    if not cond:
        FAILS.append(what)
        print("FAIL:", what)
    else:
        print("ok:", what)


def wait_for(pred, what, timeout=20.0, step=0.1):
    """pred's first true value, polled every step seconds; a failed check
    and None when timeout passes first."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(step)
    check(False, what + " (timed out)")
    return None


def wait_ready(url, timeout=20.0):
    """Until the tesserad at url answers /readyz, at most timeout seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/readyz", timeout=1)
            return True
        except Exception:
            time.sleep(0.1)
    return False


def stop_all(procs, timeout=15):
    """SIGTERM to every process (the last started first), then waits for
    each; what is still running after timeout seconds is killed."""
    for p in reversed(procs):
        p.send_signal(signal.SIGTERM)
    for p in reversed(procs):
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()


def finish(tmp, logs):
    """Ends a test: with failures, the end of each log in tmp and the list of
    what failed, exit status 1; else "all passed"."""
    if FAILS:
        for log in logs:
            print(f"--- {log}\n" + open(os.path.join(tmp, log)).read()[-2000:])
        print(f"{len(FAILS)} FAILED:", *FAILS, sep="\n  ")
        sys.exit(1)
    print("all passed")
