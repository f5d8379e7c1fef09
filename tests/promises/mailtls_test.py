"""Promises of mail through a relay that requires STARTTLS (docs/tesserad.md
"mail"): with `starttls: true` tesserad upgrades the connection and
verifies the relay's certificate against `ca_file`; mail reaches the relay
only over TLS. The relay (tests/lib/smtp_relay.py) refuses MAIL before
STARTTLS; its certificate is made here for 127.0.0.1."""
import os
import subprocess
import tempfile

from cluster import DEFAULT_CONFIG
from harness import check
from smtp_relay import Relay

CERTS = tempfile.mkdtemp(prefix="tessera-mailtls-")
CERT, KEY = os.path.join(CERTS, "relay.pem"), os.path.join(CERTS, "relay.key")
subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                "-keyout", KEY, "-out", CERT], capture_output=True, timeout=60, check=True)
RELAY = Relay(tls=(CERT, KEY))

CLUSTER = {"config": DEFAULT_CONFIG +
           f"mail: {{relay: 127.0.0.1:{RELAY.port}, from: tessera@cluster.test, "
           f"starttls: true, ca_file: {CERT}}}\n"}


def scenario_mail_goes_over_starttls(c):
    """tesserad.md: `starttls: true` requires STARTTLS, the relay's certificate
    verified against `ca_file`: a job's mail reaches the relay over TLS."""
    jid = c.submit({"tenant": "team-a", "name": "tls-mailed", "tier": "guaranteed",
                    "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 500, "memory_mib": 256}],
                    "time_limit": "5m", "command": ["/bin/true"],
                    "notify": {"mail": "alice@example.com", "on": ["end"]}})
    if not c.wait_job(jid, "completed", 30):
        return

    def got():
        with RELAY.lock:
            return [m for m in RELAY.mails if f"X-Tessera-Job: {jid}\r\n" in m[2]] or None
    mails = c.wait(got, "the end's mail reaches the relay", 30) or []
    check(bool(mails) and all(m[3] for m in mails),
          f"it came over TLS: {[(m[0], m[1], m[3]) for m in mails]}")
    check(bool(mails) and "<alice@example.com>" in mails[0][1],
          f"to the job's address: {mails[0][1] if mails else None}")


def scenario_bad_mail_config_is_refused(c):
    """tesserad.md: `ca_file` without `starttls: true` is refused, naming the
    field."""
    bad = c.path("bad-mail.yaml")
    with open(c.path("tesserad.yaml")) as f:
        text = f.read()
    with open(bad, "w") as f:
        f.write(text.replace("starttls: true, ", ""))
    try:  # refused while it reads its configuration, before it listens
        r = subprocess.run([c.bins["tesserad"], "--config", bad], capture_output=True,
                           text=True, timeout=15)
    except subprocess.TimeoutExpired:
        check(False, "tesserad with ca_file but no starttls exits at once")
        return
    check(r.returncode != 0 and "mail.ca_file" in r.stderr and "starttls" in r.stderr,
          f"refused naming mail.ca_file: {r.returncode} {r.stderr.strip()[:300]}")
