"""harness.py - what the end-to-end tests of tesserad and its agents share:
a free loopback port, JSON over HTTP with a bearer token, a check that
records failures instead of stopping at the first, and a bounded wait.

The tests put tests/lib on sys.path and import from here.
"""
import json
import socket
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
