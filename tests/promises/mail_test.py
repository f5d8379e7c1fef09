"""Promises of mail about jobs' state changes on a live cluster
(docs/job-spec.md "notify", docs/tesserad.md "mail", docs/slurm.md): a job
whose notify names mail addresses gets a message through the configured
SMTP relay when it starts, ends or fails, as on asks; sbatch's --mail-type
and --mail-user map to it; a relay that refuses is retried; a relay that
hangs never holds up the controller. The relay is a small SMTP server of
this file, on loopback."""
import time

from cluster import DEFAULT_CONFIG
from harness import check
from smtp_relay import Relay

RELAY = Relay()
PORT = RELAY.port
MAILS, STATE, LOCK = RELAY.mails, RELAY.state, RELAY.lock  # (from, [to], text, over TLS)

CLUSTER = {"config": DEFAULT_CONFIG +
           f"mail: {{relay: 127.0.0.1:{PORT}, from: tessera@cluster.test}}\n"}

SPEC = {"tenant": "team-a", "name": "mailed", "tier": "guaranteed",
        "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 500, "memory_mib": 256}],
        "time_limit": "5m"}


def mails_for(jid):
    with LOCK:
        return [m for m in MAILS if f"X-Tessera-Job: {jid}\r\n" in m[2]]


def events_of(jid):
    return [m[2].split("X-Tessera-Event: ")[1].split("\r\n")[0] for m in mails_for(jid)]


def scenario_mail_on_begin_and_end(c):
    """job-spec.md: notify.mail gets a message when the job starts and when it
    ends, from mail.from to every address named, saying the job, its state
    and its exit code."""
    jid = c.submit(dict(SPEC, command=["true"], notify={
        "mail": ["alice@example.com", "ops@example.com"], "on": ["start", "end"]}))
    c.wait_job(jid, "completed", 30)
    got = c.wait(lambda: (lambda e: e if sorted(e) == ["end", "start"] else None)(events_of(jid)),
                 "a start and an end mail arrive", 30)
    if not got:
        return
    sender, rcpts, text, _ = mails_for(jid)[-1]
    check(sender == "<tessera@cluster.test>", f"from mail.from: {sender}")
    check(rcpts == ["<alice@example.com>", "<ops@example.com>"], f"to both addresses: {rcpts}")
    check(f"Subject: tessera job {jid} (mailed) " in text, f"the subject names the job: {text}")
    end = [m for m in mails_for(jid) if "X-Tessera-Event: end" in m[2]][0][2]
    check("state:     completed" in end and "exit code: 0" in end,
          f"the end mail says completed, exit code 0: {end}")


def scenario_mail_on_failure(c):
    """job-spec.md: on: [fail] mails a failure only, with the exit code."""
    ok = c.submit(dict(SPEC, name="fine", command=["true"],
                       notify={"mail": "bob@example.com", "on": ["fail"]}))
    bad = c.submit(dict(SPEC, name="broken", command=["/bin/sh", "-c", "exit 3"],
                        notify={"mail": "bob@example.com", "on": ["fail"]}))
    c.wait_job(ok, "completed", 30)
    c.wait_job(bad, "failed", 30)
    got = c.wait(lambda: events_of(bad) == ["fail"], "a failure mail arrives", 30)
    if got:
        text = mails_for(bad)[0][2]
        check("state:     failed" in text and "exit code: 3" in text,
              f"it says failed, exit code 3: {text}")
    time.sleep(1.0)
    check(events_of(ok) == [], f"no mail for the job that did not fail: {events_of(ok)}")


def scenario_sbatch_mail_type_and_user(c):
    """slurm.md: #SBATCH --mail-type=BEGIN,END and --mail-user map to
    notify.mail."""
    path = c.path("mailed.sh")
    with open(path, "w") as f:
        f.write("#!/bin/bash\n#SBATCH --account=team-a\n#SBATCH --gpus=1\n#SBATCH --time=5\n"
                "#SBATCH --mail-type=BEGIN,END\n#SBATCH --mail-user=carol@example.com\ntrue\n")
    r = c.cli("sbatch", path)
    ids = [int(t) for t in r.stdout.split() if t.isdigit()]
    check(r.returncode == 0 and ids, f"sbatch submits: {r.stdout} {r.stderr}")
    if not ids:
        return
    c.wait_job(ids[0], "completed", 30)
    got = c.wait(lambda: sorted(events_of(ids[0])) == ["end", "start"],
                 "BEGIN and END mails arrive", 30)
    if got:
        check(mails_for(ids[0])[0][1] == ["<carol@example.com>"], "to --mail-user")


def scenario_bad_addresses_are_refused(c):
    """job-spec.md: an address that is not user@domain is a 400 naming
    notify.mail."""
    for bad in ("not-an-address", "a b@example.com", "x@y>\r\nRCPT TO:<z@w"):
        st, d = c.call("POST", "/v1/jobs", dict(SPEC, command=["true"],
                                                 notify={"mail": [bad]}))
        check(st == 400 and "notify.mail" in str(d), f"{bad!r}: 400 naming notify.mail: {st} {d}")


def scenario_a_refusing_relay_is_retried(c):
    """job-spec.md: a relay that refuses (a temporary 4xx) is tried again
    with a backoff; the mail arrives."""
    with LOCK:
        STATE["refuse"] = 2
        STATE["tries"] = 0
    jid = c.submit(dict(SPEC, command=["true"], notify={"mail": "dave@example.com"}))
    c.wait_job(jid, "completed", 30)
    c.wait(lambda: events_of(jid) == ["end"], "the end mail arrives after two refusals", 30)
    with LOCK:
        tries = STATE["tries"]
    check(tries >= 3, f"the message was tried three times or more: {tries}")


def scenario_a_hanging_relay_never_holds_up_the_controller(c):
    """tesserad.md: mail is handed over by a thread of its own: with a relay
    that never answers, submissions and reads are answered as before."""
    with LOCK:
        STATE["hang"] = True
    try:
        jid = c.submit(dict(SPEC, command=["true"], notify={"mail": "erin@example.com",
                                                               "on": ["start", "end"]}))
        c.wait_job(jid, "completed", 30)
        t0 = time.time()
        for i in range(5):
            other = c.submit(dict(SPEC, name=f"busy-{i}", command=["true"]))
            c.job(other)
        took = time.time() - t0
        check(took < 10.0, f"5 submissions and reads while the relay hangs: {took:.2f} s")
    finally:
        with LOCK:
            STATE["hang"] = False
