"""harness.py - what the end-to-end tests of tesserad and its agents share:
a free loopback port, JSON over HTTP with a bearer token, a check that
records failures instead of stopping at the first, a bounded wait, and the
files of a small controller.

The tests put tests/lib on sys.path and import from here.
"""
import json
import os
import pwd
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

FAILS = []

# Tasks run as their submitter's mapped Unix identity (docs/agent-tasks.md
# "User"). The tests map the first admin token to whoever runs them (the
# agents they start run as that user too); when that is root, the tenants
# they submit to must allow root (allow_root: ALLOW_ROOT in tenants.yaml).
RUN_AS = pwd.getpwuid(os.getuid()).pw_name
RUN_UID = os.getuid()
ADMIN_IDENTITY = f"admin_unix_user: {RUN_AS}\n"
ALLOW_ROOT = "true" if os.getuid() == 0 else "false"
USER_IDENTITY = {"unix_user": RUN_AS, "uid": RUN_UID}  # for a user token's body


def with_root(tenants_yaml):
    """tenants_yaml with `allow_root: ALLOW_ROOT` in each organisation (their
    teams inherit it), for a test whose tasks run as RUN_AS; a document
    that already says allow_root is the test's own and is left as it is."""
    if "allow_root" in tenants_yaml:
        return tenants_yaml
    out = []
    for line in tenants_yaml.split("\n"):
        m = re.match(r"^  ([A-Za-z0-9._-]+):\s*(\{.*\})?\s*$", line)
        if m and m.group(2):
            inner = m.group(2)[1:-1].strip()
            line = f"  {m.group(1)}: {{allow_root: {ALLOW_ROOT}{', ' + inner if inner else ''}}}"
            out.append(line)
        elif m:
            out += [line, f"    allow_root: {ALLOW_ROOT}"]
        else:
            out.append(line)
    return "\n".join(out)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def ctld_files(d, port, nodes, extra="", config="tesserad.yaml", state="state"):
    """Writes in d the files of a controller of 8-GPU nodes and returns its
    configuration's path: cluster.yaml (levels node and gpu; nodes: the
    entries of its node list, of class g8 (H100-80GB) or a8 (A100-80GB)),
    tenants.yaml (one tenant, t, that allows root when the tests run as
    root) and the configuration (listening on port, its state in d/state,
    rate limits out of the way, the admin token mapped to the tests' Unix
    user, then extra's lines)."""
    open(os.path.join(d, "cluster.yaml"), "w").write(
        "topology:\n  levels: [node, gpu]\nnode_classes:\n"
        "  g8: {gpu_model: H100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}\n"
        "  a8: {gpu_model: A100-80GB, gpus: 8, cpu_milli: 64000, memory_mib: 524288}\n"
        "nodes:\n" + "".join(f"  - {n}\n" for n in nodes))
    open(os.path.join(d, "tenants.yaml"), "w").write(f"tenants:\n  t: {{allow_root: {ALLOW_ROOT}}}\n")
    path = os.path.join(d, config)
    open(path, "w").write(f"listen: 127.0.0.1:{port}\ncluster: cluster.yaml\n"
                          f"tenants: tenants.yaml\nstate_dir: {state}\n"
                          "limits: {requests_per_s: 100000, burst: 100000}\n" + ADMIN_IDENTITY +
                          extra)
    return path


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


def bench_ctld(binary, prefix, nodes, extra, tenants):
    """A tesserad for a bench (bench/*_load.py): in a new folder, the files
    of ctld_files with the tenants added, started and ready. Returns
    (process, url, admin token, folder); the caller kills the process and
    removes the folder."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    ctld_files(tmp, port, nodes, extra)
    with open(os.path.join(tmp, "tenants.yaml"), "a") as f:
        f.write("".join(f"  {t}: {{}}\n" for t in tenants))
    p = subprocess.Popen([binary, "--config", os.path.join(tmp, "tesserad.yaml")],
                         stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "log"), "w"))
    if not wait_ready(url):
        p.kill()
        p.wait()
        raise SystemExit(f"tesserad did not get ready (its log: {tmp}/log)")
    return p, url, open(os.path.join(tmp, "state", "admin.token")).read().strip(), tmp


def read_unparsed(url, path, token, timeout=120):
    """GETs path and reads the answer without parsing it: a bench's load
    clients, whose parse of a large answer would hold Python's GIL while
    the client being measured waits."""
    req = urllib.request.Request(url + path, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        while r.read(1 << 20):
            pass


def unmount_under(top):
    """Lazily unmounts every mount below the folder top, deepest first (the
    image roots an agent or the image-pull command left mounted there), so
    that top can be removed. Mounts elsewhere are never touched."""
    top = os.path.realpath(top) + "/"
    try:
        with open("/proc/self/mountinfo") as f:
            points = [ln.split()[4].replace("\\040", " ") for ln in f]
    except OSError:
        return
    for p in sorted((p for p in points if p.startswith(top)), key=len, reverse=True):
        subprocess.run(["umount", "-l", p], capture_output=True)


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


SANITIZER_MARKS = ("WARNING: ThreadSanitizer", "ERROR: AddressSanitizer",
                   "ERROR: LeakSanitizer", "runtime error:")


def finish(tmp, logs):
    """Ends a test: with failures, the end of each log in tmp and the list of
    what failed, exit status 1; else "all passed". A sanitizer's report in a
    log (a process under test built with TSan, ASan or UBSan) is a failure
    too, even when every check passed."""
    for log in logs:
        path = os.path.join(tmp, log)
        text = open(path, errors="replace").read() if os.path.exists(path) else ""
        for mark in SANITIZER_MARKS:
            k = text.find(mark)
            if k >= 0:
                check(False, f"{log}: a sanitizer report: {text[k:k + 1500]}")
                break
    if FAILS:
        for log in logs:
            print(f"--- {log}\n" + open(os.path.join(tmp, log)).read()[-2000:])
        print(f"{len(FAILS)} FAILED:", *FAILS, sep="\n  ")
        sys.exit(1)
    print("all passed")


PG_TEST_SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                              "scripts", "pg-test-server")


def pg_start(pgdir):
    """A throwaway PostgreSQL in pgdir (scripts/pg-test-server; its parent
    must be open to the postgres user): its URL, or SystemExit saying why."""
    r = subprocess.run([PG_TEST_SERVER, "start", pgdir], capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        print(r.stderr)
        raise SystemExit("cannot start PostgreSQL with scripts/pg-test-server")
    return r.stdout.strip()


def pg_stop(pgdir):
    """Stops the server pg_start started in pgdir and removes its data."""
    subprocess.run([PG_TEST_SERVER, "stop", pgdir], capture_output=True, timeout=60)


class TcpProxy:
    """A TCP relay on loopback to 127.0.0.1:port_to that can cut every
    connection through it and refuse new ones until resume() (a controller
    cut off from PostgreSQL, docs/ha.md). Its port is .port. One thread
    accepts, two pump each connection; all are daemons."""

    def __init__(self, port_to):
        import threading
        self.port_to = port_to
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(128)
        self.port = self.ls.getsockname()[1]
        self.cut = False
        self.socks = []
        self.mu = threading.Lock()
        self._thread = threading.Thread
        self._thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            with self.mu:
                if self.cut:
                    c.close()
                    continue
                try:
                    u = socket.create_connection(("127.0.0.1", self.port_to), timeout=5)
                    u.settimeout(None)
                except OSError:
                    c.close()
                    continue
                self.socks += [c, u]
            self._thread(target=self._pump, args=(c, u), daemon=True).start()
            self._thread(target=self._pump, args=(u, c), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut_all(self):
        """Drops every connection through it and refuses new ones."""
        with self.mu:
            self.cut = True
            for x in self.socks:
                try:
                    x.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                x.close()
            self.socks = []

    def resume(self):
        with self.mu:
            self.cut = False

    def close(self):
        self.ls.close()


class ScriptedNode:
    """A node whose agent is the test itself: a node credential made with
    the admin token, then register and sync calls that keep the answer's
    generation. tasks: the reports each sync sends (the test sets them)."""

    def __init__(self, url, admin, name, gpus=8, timeout=60):
        self.url, self.name, self.timeout = url, name, timeout
        st, d = http_call(url, "POST", "/v1/tokens", admin, {"name": name, "role": "node"})
        self.made = st == 201
        self.token = d["token"]["secret"] if self.made else ""
        self.gen, self.tasks = 0, []
        st, d = http_call(url, "POST", "/v1/agent/register", self.token,
                          {"node": name, "discovery": {"gpus": gpus}}, timeout=timeout)
        self.registered = st == 200
        if self.registered:
            self.gen = d.get("gen", 0)

    def sync(self, wait_s=0):
        """(status, answer) of one sync reporting self.tasks."""
        body = {"node": self.name, "gen": self.gen, "tasks": self.tasks, "wait_s": wait_s}
        st, d = http_call(self.url, "POST", "/v1/agent/sync", self.token, body,
                          timeout=self.timeout)
        if st == 200:
            self.gen = d["gen"]
        return st, d


def _read_every(url, path, token, stop_at, pause_s, out):
    lat = []
    while time.time() < stop_at:
        q = time.time()
        read_unparsed(url, path, token)
        lat.append(time.time() - q)
        time.sleep(pause_s)
    out.put(lat)


class LatencyReader:
    """A bench's other tenant: GETs path every pause_s until stop_at, in a
    process of its own (the bench's own parse of a large answer would hold
    this interpreter while the read being measured waits). summary() after
    stop_at: "n=N p50 X ms p99 Y ms max Z ms"."""

    def __init__(self, url, path, token, stop_at, pause_s=0.02):
        import multiprocessing
        self.out = multiprocessing.Queue()
        self.proc = multiprocessing.Process(target=_read_every,
                                            args=(url, path, token, stop_at, pause_s, self.out))
        self.proc.start()

    def summary(self):
        lat = sorted(self.out.get(timeout=120))
        self.proc.join()
        return (f"n={len(lat)} p50 {1000 * lat[len(lat) // 2]:.1f} ms "
                f"p99 {1000 * lat[int(len(lat) * 0.99)]:.1f} ms max {1000 * lat[-1]:.1f} ms")
