#!/usr/bin/env python3
"""Interactive sessions over HTTPS (docs/interactive.md): the client's and
the agent's upgraded streams through a controller serving TLS, each end
through libcurl's TLS (and the controller's through libmicrohttpd's), carry
a session both ways and end it: `tessera run` without a terminal gets the
command's output and exits with its status.

    sessions_tls_test.py TESSERAD AGENT CLI FAKE_NVML FIXTURES

A real tesserad with a self-signed certificate (openssl) and one real agent
that trusts it. Exits 77 (skipped) without openssl. Every wait is bounded."""
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
from cluster import Cluster, Node  # noqa: E402
from harness import check, finish  # noqa: E402


def main():
    if not shutil.which("openssl"):
        print("skipped: openssl is not installed")
        return 77
    tesserad, agent, cli, nvml, fixtures = sys.argv[1:6]
    bins = {"tesserad": tesserad, "agent": agent, "cli": cli, "nvml": nvml,
            "fixtures": fixtures}
    c = Cluster(bins, nodes=[Node("r-1", "l1")], name="sessions-tls")
    cert, key = c.path("cert.pem"), c.path("key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", key, "-out", cert], check=True, capture_output=True)
    c.nodes[0].args = ["--ca", cert]
    c.config = f"scheduler: {{interval: 0.2s}}\ntls: {{cert: {cert}, key: {key}}}\n"
    c.url = c.url.replace("http://", "https://")
    os.environ["SSL_CERT_FILE"] = cert  # this test's own API calls trust it too
    try:
        if c.start():
            env = dict(os.environ, TESSERA_URL=c.url, TESSERA_TOKEN=c.admin, HOME=c.tmp)
            r = subprocess.run([cli, "--ca", cert, "run", "--tenant", "team-a", "--", "/bin/sh",
                                "-c", "read x; echo tls-got-$x; exit 6"], input="zz\n", env=env,
                               text=True, capture_output=True, timeout=60)
            check("tls-got-zz" in r.stdout and r.returncode == 6,
                  f"a session over HTTPS carries stdin and output, and its status: "
                  f"{r.returncode} {r.stdout!r} {r.stderr!r}")
    finally:
        c.stop()
    finish(c.tmp, c.logs)
    c.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
