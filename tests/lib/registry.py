"""registry.py - a real OCI registry on loopback and small images in it, for
the tests of container tasks: Debian's docker-registry (the reference
distribution server) with its storage in a temporary folder, images built
with umoci from Debian's static busybox and pushed with skopeo.

    r = Registry(workdir)            # started on a free loopback port
    r.push_busybox("test/busy:1", marker="image one")
    ... r.host (127.0.0.1:PORT) ...
    r.stop()
    front = TokenFront(r.base, "user", "password")  # bearer tokens in front of it
    ... 127.0.0.1:{front.port} ...
    front.stop()
"""
import base64
import http.server
import json
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

TOOLS = ("docker-registry", "umoci", "skopeo", "busybox")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def missing_tools():
    return [t for t in TOOLS if not shutil.which(t)]


def _run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


_started = {}


def busybox_registry(port, prefix):
    """The registry on port, started by the first caller (stopped and its
    folder removed at exit) with busybox pushed as team/tools:1 (its /marker
    says "inside the image"); the same Registry for every later call."""
    if port not in _started:
        import atexit
        import tempfile
        work = tempfile.mkdtemp(prefix=prefix)
        r = Registry(work, port)
        atexit.register(lambda: (r.stop(), shutil.rmtree(work, ignore_errors=True)))
        r.push_busybox("team/tools:1", "inside the image")
        _started[port] = r
    return _started[port]


class Registry:
    def __init__(self, work, port=None):
        self.work = work
        self.port = port or free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.base = f"http://{self.host}"
        self.storage = os.path.join(work, "registry")
        cfg = os.path.join(work, "registry.yml")
        with open(cfg, "w") as f:
            f.write(f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {self.storage}\n"
                    f"http:\n  addr: {self.host}\nlog:\n  level: error\n")
        self.proc = subprocess.Popen(["docker-registry", "serve", cfg], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                urllib.request.urlopen(self.base + "/v2/", timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("the registry did not start")

    def build(self, name, marker, files=None):
        """An OCI layout image with busybox (/bin/sh and its applets through
        it), /marker holding marker, and files {path: text}; returns the layout."""
        layout = os.path.join(self.work, "oci")
        if not os.path.exists(layout):
            _run(["umoci", "init", "--layout", layout])
        _run(["umoci", "new", "--image", f"{layout}:{name}"])
        bundle = os.path.join(self.work, "b-" + name)
        _run(["umoci", "unpack", "--image", f"{layout}:{name}", bundle])
        root = os.path.join(bundle, "rootfs")
        os.makedirs(os.path.join(root, "bin"), exist_ok=True)
        os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
        os.chmod(os.path.join(root, "tmp"), 0o1777)
        shutil.copy(shutil.which("busybox"), os.path.join(root, "bin", "busybox"))
        for applet in ("sh", "cat", "echo", "sleep", "ls", "test", "touch", "id", "env"):
            os.symlink("busybox", os.path.join(root, "bin", applet))
        with open(os.path.join(root, "marker"), "w") as f:
            f.write(marker + "\n")
        for path, text in (files or {}).items():
            full = os.path.join(root, path.lstrip("/"))
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb" if isinstance(text, bytes) else "w") as f:
                f.write(text)
        _run(["umoci", "repack", "--image", f"{layout}:{name}", bundle])
        _run(["umoci", "config", "--image", f"{layout}:{name}", "--config.env", "PATH=/bin",
              "--config.cmd", "/bin/sh", "--config.cmd", "-c", "--config.cmd", "cat /marker"])
        shutil.rmtree(bundle, ignore_errors=True)
        return layout

    def push_tree(self, repo_tag, fill, env="PATH=/usr/bin:/bin"):
        """An image of one layer holding what fill(rootfs) puts in an empty
        root (an image built from a node's own files, or from packages),
        pushed as repo_tag; returns the reference."""
        name = repo_tag.replace("/", "-").replace(":", "-")
        layout = os.path.join(self.work, "oci")
        if not os.path.exists(layout):
            _run(["umoci", "init", "--layout", layout])
        _run(["umoci", "new", "--image", f"{layout}:{name}"])
        bundle = os.path.join(self.work, "b-" + name)
        _run(["umoci", "unpack", "--image", f"{layout}:{name}", bundle])
        fill(os.path.join(bundle, "rootfs"))
        _run(["umoci", "repack", "--image", f"{layout}:{name}", bundle])
        _run(["umoci", "config", "--image", f"{layout}:{name}", "--config.env", env])
        shutil.rmtree(bundle, ignore_errors=True)
        return self.push(layout, name, repo_tag)

    def push(self, layout, name, repo_tag):
        _run(["skopeo", "copy", "--dest-tls-verify=false", f"oci:{layout}:{name}",
              f"docker://{self.host}/{repo_tag}"])
        return f"{self.host}/{repo_tag}"

    def push_busybox(self, repo_tag, marker, files=None):
        name = repo_tag.replace("/", "-").replace(":", "-")
        return self.push(self.build(name, marker, files), name, repo_tag)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


class CountingFront:
    """A registry's front that passes every request on (Range included) and
    counts what it sent: blob requests, blob body bytes, per digest. What a
    registry's egress is, for the tests of peer-to-peer pulls. stall(s)
    holds every blob request s seconds before it is passed on."""

    def __init__(self, upstream, port=None):
        self.port = port or free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.lock = threading.Lock()
        self.blob_requests, self.blob_bytes = 0, 0
        self.per_blob = {}
        self.delay = 0.0
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                if "/blobs/" in self.path and front.delay:
                    time.sleep(front.delay)
                req = urllib.request.Request(upstream + self.path)
                for h in ("Accept", "Range"):
                    if self.headers.get(h):
                        req.add_header(h, self.headers[h])
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        body, status = r.read(), r.status
                        ctype = r.headers.get("Content-Type", "")
                        extra = [(k, r.headers[k]) for k in ("Content-Range",
                                                             "Docker-Content-Digest")
                                 if r.headers.get(k)]
                except urllib.error.HTTPError as e:
                    body, status, ctype, extra = e.read(), e.code, "application/json", []
                if "/blobs/" in self.path and status in (200, 206):
                    with front.lock:
                        front.blob_requests += 1
                        front.blob_bytes += len(body)
                        d = self.path.rsplit("/", 1)[-1]
                        front.per_blob[d] = front.per_blob.get(d, 0) + len(body)
                try:
                    self.send_response(status)
                    for k, v in extra:
                        self.send_header(k, v)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self):
        with self.lock:
            self.blob_requests, self.blob_bytes, self.per_blob = 0, 0, {}

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class TokenFront:
    """A registry's front as token-authenticating registries have it: a 401
    with a Bearer challenge naming its /token realm, which gives a token for
    HTTP basic user:password; requests with the token go to the registry."""

    def __init__(self, upstream, user, password, port=None):
        self.port = port or free_port()
        token = "tok-" + base64.b16encode(os.urandom(8)).decode()
        realm = f"http://127.0.0.1:{self.port}/token"
        want = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, status, body=b"", ctype="application/json", extra=()):
                self.send_response(status)
                for k, v in extra:
                    self.send_header(k, v)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path.startswith("/token"):
                    if self.headers.get("Authorization") != want:
                        return self.reply(401)
                    return self.reply(200, json.dumps({"token": token}).encode())
                if self.headers.get("Authorization") != "Bearer " + token:
                    repo = self.path.split("/")[2:-2]
                    scope = f"repository:{'/'.join(repo)}:pull"
                    return self.reply(401, extra=[("WWW-Authenticate",
                                                   f'Bearer realm="{realm}",service="test",'
                                                   f'scope="{scope}"')])
                req = urllib.request.Request(upstream + self.path)
                if self.headers.get("Accept"):
                    req.add_header("Accept", self.headers["Accept"])
                try:
                    with urllib.request.urlopen(req, timeout=10) as r:
                        body, status = r.read(), r.status
                        ctype = r.headers.get("Content-Type", "")
                except urllib.error.HTTPError as e:
                    body, status, ctype = e.read(), e.code, "application/json"
                self.reply(status, body, ctype)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class StallFront:
    """A registry's front that passes manifests on but holds every blob
    request until release() (or hold_s, bounded): a registry slow to send
    an image's layers, so that a test can act while a pull is under way.
    held: how many blob requests are being held now. With hold=False it
    passes everything on at once: a registry that appears on its port with
    its images already there."""

    def __init__(self, upstream, port=None, hold_s=60.0, hold=True):
        self.port = port or free_port()
        self.go = threading.Event()
        if not hold:
            self.go.set()
        self.held = 0
        lock = threading.Lock()
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                if "/blobs/" in self.path:
                    with lock:
                        front.held += 1
                    front.go.wait(hold_s)
                    with lock:
                        front.held -= 1
                req = urllib.request.Request(upstream + self.path)
                if self.headers.get("Accept"):
                    req.add_header("Accept", self.headers["Accept"])
                try:
                    with urllib.request.urlopen(req, timeout=10) as r:
                        body, status = r.read(), r.status
                        ctype = r.headers.get("Content-Type", "")
                except urllib.error.HTTPError as e:
                    body, status, ctype = e.read(), e.code, "application/json"
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the puller gave up meanwhile
                    pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def release(self):
        self.go.set()

    def stop(self):
        self.go.set()
        self.server.shutdown()
        self.server.server_close()
