"""Promises of secrets and privacy inside a tenant on real agents
(docs/secrets.md, docs/slurm.md): a secret reaches only the task that names
it, as a variable or a 0400 file of the task's user that goes when the task
ends, and is nowhere on disk in the clear; a job's content and output are its
owner's; tessera sbatch leaves credentials out of the exported environment."""
import hashlib
import os
import pwd

from cluster import Node
from harness import USER_IDENTITY, check

CLUSTER = {"nodes": [Node("r-1")],
           "tenants": "tenants:\n  team-a: {guaranteed: {gpu: {H100-80GB: 8}}}\n"
                      "  team-b: {guaranteed: {gpu: {H100-80GB: 0}}}\n"}

SECRET = "promise-s3cr3t-9c41d7"


def short_hash(v):
    return hashlib.sha256(v.encode()).hexdigest()[:16]


def plaintext_files(c, value):
    """The files under the cluster's folder (the controller's store, WAL and
    log; each agent's state: task records, logs, step files) holding value."""
    hits = []
    for root, _, files in os.walk(c.tmp):
        for f in files:
            p = os.path.join(root, f)
            try:
                if value.encode() in open(p, "rb").read():
                    hits.append(os.path.relpath(p, c.tmp))
            except OSError:
                pass
    return hits


def scenario_secret_reaches_only_its_task(c):
    """secrets.md: a secret named as a variable is in the task's environment, one
    named as a file is a 0400 file of the task's user, removed when the task
    ends; its value is on no disk in the clear."""
    os.chmod(c.tmp, 0o711)  # the task's user (nobody) reaches its folders
    nobody = c.token("nobody", "user", "team-a", unix_user="nobody", uid=pwd.getpwnam("nobody").pw_uid)
    r = c.cli("secrets", "set", "API_KEY", token=nobody, stdin=SECRET + "\n")
    check(r.returncode == 0 and "secret API_KEY created" in r.stdout and SECRET not in r.stdout,
          f"tessera secrets set reads the value from stdin: {r.returncode} {r.stdout} {r.stderr}")
    r = c.cli("secrets", token=nobody)
    check(r.returncode == 0 and "API_KEY" in r.stdout and SECRET not in r.stdout,
          f"tessera secrets lists its name, not its value: {r.stdout}")
    script = ('echo env=$(printf %s "$API_KEY" | sha256sum | cut -c1-16); '
              'echo file=$(sha256sum < "$TESSERA_SECRETS_DIR/key.txt" | cut -c1-16); '
              'stat -c "mode=%a user=%U" "$TESSERA_SECRETS_DIR/key.txt"; sleep 4')
    jid = c.submit({"tenant": "team-a", "name": "uses-secret", "time_limit": "5m",
                    "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 500, "memory_mib": 512}],
                    "command": ["/bin/sh", "-c", script],
                    "secrets": ["API_KEY", {"name": "API_KEY", "file": "key.txt"}]}, nobody)
    if not c.wait_job(jid, "running", 30):
        return
    folder = c.path("r-1", "secrets", f"j{jid}-r0")
    st = c.wait(lambda: os.path.exists(os.path.join(folder, "key.txt")) and
                os.stat(os.path.join(folder, "key.txt")), "the secret file is there while it runs",
                10)
    if st:
        check(oct(st.st_mode & 0o777) == "0o400" and st.st_uid == 65534,
              f"the file is 0400 and the task user's: {oct(st.st_mode)} uid {st.st_uid}")
        d = os.stat(folder)
        check(oct(d.st_mode & 0o777) == "0o500" and d.st_uid == 65534,
              f"its folder is 0500 and the task user's: {oct(d.st_mode)} uid {d.st_uid}")
    if not c.wait_job(jid, "completed", 30):
        return
    out = c.output("r-1", jid)
    want = short_hash(SECRET)
    check(f"env={want}" in out and f"file={want}" in out and "mode=400 user=nobody" in out,
          f"the task read the value from its variable and its file: {out!r}")
    c.wait(lambda: not os.path.exists(folder), "the task's secrets folder is gone once it ended",
           10)
    ev = c.events(jid, nobody)
    check(any(e["kind"] == "secrets-used" and e["data"].get("names") == "API_KEY,API_KEY"
              for e in ev), f"a secrets-used event names them: {[e['kind'] for e in ev]}")
    check(SECRET not in str(ev) and SECRET not in str(c.job(jid, nobody)),
          "the job and its events carry no value")
    tadmin = c.token("ta", "tenant-admin", "team-a", **USER_IDENTITY)
    r = c.cli("secrets", "events", token=tadmin)
    check(r.returncode == 0 and " secret-set " in r.stdout and " nobody " in r.stdout and
          SECRET not in r.stdout, f"tessera secrets events shows who set it: {r.stdout}")
    hits = plaintext_files(c, SECRET)
    check(hits == [], f"the value is in no file of the controller or the agent: {hits}")


scenario_secret_reaches_only_its_task.needs_root = True


def scenario_content_and_output_are_the_owners(c):
    """secrets.md: another user of the tenant reads the job's metadata, `hidden` for
    its command and env, 403 for its logs; the owner reads them all."""
    alice = c.token("alice", "user", "team-a", **USER_IDENTITY)
    bob = c.token("bob", "user", "team-a", **USER_IDENTITY)
    jid = c.submit({"tenant": "team-a", "name": "private", "time_limit": "5m",
                    "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 500, "memory_mib": 512}],
                    "env": {"PLAIN": "plain-value-31"},
                    "command": ["/bin/sh", "-c", "echo out-$PLAIN"]}, alice)
    if not c.wait_job(jid, "completed", 30):
        return
    r = c.cli("show", str(jid), token=bob)
    check(r.returncode == 0 and "Command:      hidden" in r.stdout and
          "Env:          hidden" in r.stdout and "plain-value-31" not in r.stdout,
          f"tessera show prints hidden to bob: {r.stdout}")
    r = c.cli("show", str(jid), token=alice)
    check(r.returncode == 0 and "Env:          PLAIN" in r.stdout and "echo out-" in r.stdout,
          f"tessera show prints the owner its command and env names: {r.stdout}")
    r = c.cli("logs", str(jid), token=bob)
    check(r.returncode == 5 and "out-plain" not in r.stdout,
          f"tessera logs refuses bob (exit 5): {r.returncode} {r.stderr}")
    r = c.cli("logs", str(jid), token=alice)
    check(r.returncode == 0 and "out-plain-value-31" in r.stdout,
          f"tessera logs prints the owner its output: {r.returncode} {r.stdout}")
    ev = c.events(jid, bob)
    check(ev and all(e["detail"] == "hidden" for e in ev if e["kind"] == "output") and
          "plain-value-31" not in str(ev), f"bob's events hide the output: {ev}")


def scenario_sbatch_leaves_credentials_out(c):
    """slurm.md: credential-looking variables are left out of ALL with a warning
    naming them; --export naming one is refused unless passed as a secret."""
    path = c.path("cred.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\n#SBATCH --gpus=1 --account=team-a --time=5\n"
                "echo hf=$(printf %s \"$HF_TOKEN\" | sha256sum | cut -c1-16) plain=$PLAIN_VAR\n")
    env = {"HF_TOKEN": "hf_" + SECRET, "AWS_SECRET_ACCESS_KEY": "aws-x", "PLAIN_VAR": "kept"}
    r = c.cli("sbatch", "--dry-run", path, env=env)
    text = r.stdout + r.stderr
    check(r.returncode == 0 and '"PLAIN_VAR"' in r.stdout and "HF_TOKEN\"" not in r.stdout
          and SECRET not in r.stdout and "aws-x" not in r.stdout,
          f"the dry run's env keeps PLAIN_VAR and leaves the credentials out: {r.stdout[-600:]}")
    check("left out 2 variables that look like credentials: AWS_SECRET_ACCESS_KEY, HF_TOKEN"
          in text, f"a warning names them: {r.stderr}")
    r = c.cli("sbatch", "--export=HF_TOKEN,PLAIN_VAR", path, env=env)
    check(r.returncode == 2 and "--export: HF_TOKEN looks like a credential" in r.stderr,
          f"--export naming one is refused, naming it: {r.returncode} {r.stderr}")
    carol = c.token("carol", "user", "team-a", **USER_IDENTITY)
    r = c.cli("secrets", "set", "HF_TOKEN", token=carol, stdin="hf_" + SECRET)
    check(r.returncode == 0, f"the credential goes to the secret store: {r.stderr}")
    r = c.cli("sbatch", "--secret", "HF_TOKEN", "--export=HF_TOKEN,PLAIN_VAR", path, env=env,
              token=carol)
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    check(r.returncode == 0 and jid, f"passed as a secret it is taken: {r.returncode} {r.stderr}")
    if jid is None or not c.wait_job(jid, "completed", 30):
        return
    out = c.output("r-1", jid)
    check(f"hf={short_hash('hf_' + SECRET)} plain=kept" in out,
          f"the task gets it from the secret store: {out!r}")
