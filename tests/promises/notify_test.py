"""Promises of job webhooks (docs/job-spec.md "notify"): a job's start and end
are POSTed to its notify.url, signed with HMAC-SHA256 under its tenant's
NOTIFY_KEY, retried after a failed answer; a receiver that hangs delays no
job's start."""
import hashlib
import hmac
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cluster import DEFAULT_CONFIG, Node
from harness import USER_IDENTITY, check

# the receivers here are on the controller's own host: 127.0.0.1 admitted,
# the rest of loopback not (scenario_a_webhook_to_the_controllers_host)
CLUSTER = {"nodes": [Node("r-1")],
           "tenants": "tenants:\n  team-a: {guaranteed: {gpu: {H100-80GB: 8}}}\n"
                      "  team-b: {guaranteed: {gpu: {H100-80GB: 8}}}\n",
           "config": DEFAULT_CONFIG + "webhooks: {allow: [127.0.0.1/32]}\n"}

KEY = "webhook-key-7f3a"

# a test build of tesserad reads this: a queue of 2 webhooks, to see it fill
os.environ["TESSERAD_NOTIFY_QUEUE"] = "2"


class Receiver:
    """A webhook receiver on loopback: records every POST; answers 500 to the
    first `fail_first` of them; with hang set, holds every request until
    released."""

    def __init__(self, fail_first=0, hang=False, host="127.0.0.1"):
        self.got, self.fail_first, self.hang = [], fail_first, hang
        self.release = threading.Event()
        self.lock = threading.Lock()
        rx = self

        class H(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with rx.lock:
                    rx.got.append((dict(self.headers), body))
                    n = len(rx.got)
                if rx.hang:
                    rx.release.wait(20)
                code = 500 if n <= rx.fail_first else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.srv = ThreadingHTTPServer((host, 0), H)
        self.srv.daemon_threads = True
        self.url = f"http://{host}:{self.srv.server_address[1]}/hook"
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def bodies(self):
        with self.lock:
            return [(h, json.loads(b)) for h, b in self.got]

    def close(self):
        self.release.set()
        self.srv.shutdown()
        self.srv.server_close()


def spec(name, command, notify=None, tenant="team-a", gpus=1):
    s = {"tenant": tenant, "name": name, "time_limit": "5m",
         "tasks": [{"count": 1, "gpus": gpus, "cpu_milli": 500, "memory_mib": 512}],
         "command": ["/bin/sh", "-c", command]}
    if notify:
        s["notify"] = notify
    return s


def metric(c, name):
    st, text = c.call("GET", "/metrics")
    for line in (text if isinstance(text, str) else "").splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def scenario_webhook_is_signed_and_retried(c):
    """job-spec.md: start and end are POSTed, signed under the tenant's
    NOTIFY_KEY; a 500 is retried."""
    ta = c.token("ta", "tenant-admin", "team-a", **USER_IDENTITY)
    r = c.cli("secrets", "set", "NOTIFY_KEY", "--scope", "tenant", token=ta, stdin=KEY)
    check(r.returncode == 0, f"the tenant's NOTIFY_KEY is set: {r.returncode} {r.stderr}")
    rx = Receiver(fail_first=1)
    try:
        jid = c.submit(spec("hooked", "exit 4", {"url": rx.url, "on": ["start", "end"]}))
        if not c.wait_job(jid, "failed", 30):
            return
        c.wait(lambda: sum(1 for _, b in rx.bodies() if b.get("event") == "fail") >= 1,
               "the end's webhook arrives", timeout=20)
        got = rx.bodies()
        events = [b.get("event") for _, b in got]
        check(events.count("start") == 2 and events[0] == "start",
              f"the start was POSTed again after the receiver's 500: {events}")
        check(events.count("fail") == 1 and "end" not in events,
              f"a failed job's end is sent once, as fail: {events}")
        for h, raw in rx.got:
            want = "sha256=" + hmac.new(KEY.encode(), raw, hashlib.sha256).hexdigest()
            check(h.get("X-Tessera-Signature") == want,
                  f"the body is signed with HMAC-SHA256 under NOTIFY_KEY: {h} {raw!r}")
        end = next((b for _, b in got if b.get("event") == "fail"), {})
        check(end.get("job") == jid and end.get("state") == "failed" and
              end.get("exit_code") == 4 and end.get("tenant") == "team-a" and
              end.get("name") == "hooked", f"the end's document says how it ended: {end}")
        check((metric(c, "tessera_webhooks_delivered_total") or 0) >= 2,
              "tessera_webhooks_delivered_total counts them")
    finally:
        rx.close()


def scenario_hanging_receiver_delays_no_start(c):
    """job-spec.md: a receiver that never answers holds up no job: the jobs
    behind it start while it still holds the first webhook; a full queue
    drops, counts and logs."""
    rx = Receiver(hang=True)
    try:
        ids = [c.submit(spec(f"h{i}", "sleep 30", {"url": rx.url, "on": ["start"]}))
               for i in range(6)]
        plain = c.submit(spec("plain", "sleep 30"))
        for jid in ids + [plain]:
            c.wait_job(jid, "running", 30)
        with rx.lock:
            held = len(rx.got)
        check(held >= 1 and not rx.release.is_set(),
              f"every job started while the receiver held its first webhook ({held} held)")
        dropped = metric(c, "tessera_webhooks_dropped_total") or 0
        check(dropped >= 1, f"the webhooks past the full queue are dropped and counted: {dropped}")
        log = open(c.path("tesserad.log")).read()
        check("webhook dropped, tenant team-a already has 1 waiting in the queue of 2" in log,
              f"and the drop is logged: {log[-600:]}")
    finally:
        rx.close()


def scenario_one_tenants_webhooks_leave_room_for_anothers(c):
    """job-spec.md: one tenant's calls take at most half the queue: with
    team-a's receiver hanging and its webhooks past its half dropped, team-b's
    webhook is still queued, and delivered while team-a's receiver still
    holds its call: a hanging receiver delays only its own tenant's calls."""
    rx_a, rx_b, rx_p = Receiver(hang=True), Receiver(), Receiver()
    try:
        # the queue is first made idle: the earlier scenarios' calls are
        # still being tried; a probe's delivery (first in, first out) says
        # they are done
        p = c.submit(spec("probe", "sleep 30", {"url": rx_p.url, "on": ["start"]}, gpus=0))
        c.wait(lambda: any(bd.get("job") == p for _, bd in rx_p.bodies()),
               "the probe's webhook is delivered: the queue is idle", timeout=60)
        # no GPUs: the earlier scenarios' jobs still hold them, and these
        # must start (and queue their webhooks) together
        ids = [c.submit(spec(f"q{i}", "sleep 30", {"url": rx_a.url, "on": ["start"]}, gpus=0))
               for i in range(4)]
        for jid in ids:
            c.wait_job(jid, "running", 30)
        c.wait(lambda: len(rx_a.got) >= 1, "team-a's first webhook is held by its receiver",
               timeout=20)
        b = c.submit(spec("b", "sleep 30", {"url": rx_b.url, "on": ["start"]}, tenant="team-b",
                          gpus=0))
        c.wait_job(b, "running", 30)
        c.wait(lambda: any(bd.get("job") == b for _, bd in rx_b.bodies()),
               "team-b's webhook is delivered, not dropped behind team-a's", timeout=15)
        check(not rx_a.release.is_set() and len(rx_a.got) >= 1,
              "while team-a's receiver still holds its call: not delayed behind it")
        rx_a.release.set()  # team-a's receiver answers from now on
    finally:
        for rx in (rx_a, rx_b, rx_p):
            rx.close()


def scenario_a_webhook_to_the_controllers_host_is_not_made(c):
    """job-spec.md: a webhook is not made to the controller's own host
    (loopback), a link-local address (a cloud's instance metadata) or an
    unspecified or multicast one, unless tesserad.yaml's webhooks.allow
    admits it: it is given up at once, counted and logged; one to an
    admitted address is made."""
    rx, ok = Receiver(host="127.0.0.2"), Receiver()
    try:
        failed0 = metric(c, "tessera_webhooks_failed_total") or 0
        # one call each (this file's queue holds 2, one a tenant)
        jid = c.submit(spec("ssrf", "true", {"url": rx.url, "on": ["end"]}, gpus=0))
        good = c.submit(spec("fine", "true", {"url": ok.url, "on": ["end"]}, tenant="team-b",
                             gpus=0))
        c.wait_job(jid, "completed", 30)
        c.wait(lambda: any(bd.get("job") == good for _, bd in ok.bodies()),
               "a webhook to an admitted address is made", 30)
        c.wait(lambda: (metric(c, "tessera_webhooks_failed_total") or 0) >= failed0 + 1 or None,
               "the refused call is given up at once (no retries) and counted", 5)
        check(not rx.got, f"nothing reached 127.0.0.2 (loopback, not admitted): {len(rx.got)}")
        log = open(c.path("tesserad.log")).read()
        check("127.0.0.2 is a loopback address" in log and "webhooks.allow" in log,
              f"the log says why: {log[-400:]}")
    finally:
        rx.close()
        ok.close()


def own_address():
    """One of this host's addresses other than loopback (None: it has none)."""
    import subprocess
    out = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"],
                         capture_output=True, text=True).stdout.split()
    return next((w.split("/")[0] for i, w in enumerate(out) if out[i - 1:i] == ["inet"]), None)


def scenario_a_webhook_to_the_controllers_own_address_is_not_made(c):
    """job-spec.md: not to the controller's own host by its other addresses
    either (its services bound to every address): a malicious-tenant probe's
    webhook to the host's own non-loopback address was delivered."""
    addr = own_address()
    if not addr:
        print("  no address but loopback here: nothing to check")
        return
    rx = Receiver(host=addr)
    try:
        failed0 = metric(c, "tessera_webhooks_failed_total") or 0
        jid = c.submit(spec("own-addr", "true", {"url": rx.url, "on": ["end"]}, gpus=0))
        c.wait_job(jid, "completed", 30)
        c.wait(lambda: (metric(c, "tessera_webhooks_failed_total") or 0) >= failed0 + 1 or None,
               "the refused call is given up at once and counted", 10)
        time.sleep(0.5)
        check(not rx.got, f"nothing reached {addr}, the host's own: {len(rx.got)}")
        log = open(c.path("tesserad.log")).read()
        check(f"{addr} is an address of the calling host itself" in log,
              f"the log says why: {log[-400:]}")
    finally:
        rx.close()


def scenario_bad_webhooks_allow_is_refused(c):
    """tesserad.md: an entry of webhooks.allow that is not an address or a
    range is refused at start, naming it."""
    import subprocess
    bad = c.path("bad-webhooks.yaml")
    with open(c.path("tesserad.yaml")) as f:
        text = f.read()
    for entry, shown in (("10.0.0.0/33", "webhooks.allow[1]"), ("localhost", "webhooks.allow[1]")):
        with open(bad, "w") as f:
            f.write(text.replace("allow: [127.0.0.1/32]", f"allow: [127.0.0.1/32, {entry}]"))
        try:  # refused while it reads its configuration, before it listens
            r = subprocess.run([c.bins["tesserad"], "--config", bad], capture_output=True,
                               text=True, timeout=15)
        except subprocess.TimeoutExpired:
            check(False, f"tesserad with webhooks.allow {entry} exits at once")
            continue
        check(r.returncode != 0 and shown in r.stderr and entry in r.stderr,
              f"{entry} refused naming {shown}: {r.returncode} {r.stderr.strip()[:300]}")


def scenario_bad_notify_is_refused(c):
    """job-spec.md: a notify.url that is not http(s) or an unknown notify.on
    is refused naming the field."""
    for bad, field in (({"url": "ftp://x/y"}, "notify.url"),
                       ({"url": "http://127.0.0.1:9/x", "on": ["sometimes"]}, "notify.on")):
        st, d = c.call("POST", "/v1/jobs", spec("bad", "true", bad))
        check(st == 400 and field in json.dumps(d), f"{bad} is refused naming {field}: {st} {d}")
