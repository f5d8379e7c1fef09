"""Promises of interactive sessions through the controller
(docs/interactive.md): `tessera run` gives a real PTY on the node (tty,
echo, window size, ^C to the remote process group, the exit status),
streams stdin/stdout without a terminal; `tessera exec` runs a command in a
running task's cgroup and environment; `tessera port-forward` reaches a
server listening on the task's loopback; another tenant and another user
are refused; a node credential cannot open another node's session.

Each scenario_* runs on the default cluster of tests/lib/cluster.py (four
8-GPU H100 nodes; tenants team-a and team-b). Every wait is bounded."""
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

from cluster import pid_of
from term import Term, cli_env
from harness import check


def sleeper(name="held", tenant="team-a", cmd="echo pid=$$; exec sleep 120"):
    return {"tenant": tenant, "name": name, "tier": "guaranteed",
            "command": ["/bin/sh", "-c", cmd],
            "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 500, "memory_mib": 512}],
            "time_limit": "10m"}


def open_raw(c, path, body, token, secret=None):
    """An upgrade request by hand: (status, socket or None, body text)."""
    s = socket.create_connection(("127.0.0.1", c.port), timeout=10)
    data = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
            "Connection: Upgrade\r\nUpgrade: tessera-stream/1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n")
    if secret:
        head += f"X-Tessera-Session-Secret: {secret}\r\n"
    s.sendall(head.encode() + b"\r\n" + data)
    got = b""
    while b"\r\n\r\n" not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
    line = got.split(b"\r\n", 1)[0].decode(errors="replace")
    status = int(line.split()[1]) if len(line.split()) > 1 else 0
    if status == 101:
        return status, s, ""
    s.close()
    return status, None, got.decode(errors="replace")


def scenario_run_pty_tty_echo_resize_ctrl_c_exit_status(c):
    """interactive.md: `tessera run -- CMD` runs CMD on a real PTY on the node
    (tty names one), keys echo back, a window change reaches `stty size`, ^C
    stops the remote foreground process, and tessera exits with CMD's exit
    status."""
    t = Term(c, ["run", "--tenant", "team-a", "--", "/bin/sh"], rows=30, cols=100)
    t.send("echo ready-$((1+1))\n")
    check(t.expect("ready-2", 30), "the remote shell runs what is typed")
    t.send("tty\n")
    check(t.expect("/dev/pts/"), "tty in the session names a terminal")
    t.send("echo term=$TERM\n")
    check(t.expect("term=xterm-probe"), "the local terminal's TERM went with it")
    t.send("echo hello-$((6*7))\n")
    check(t.expect("hello-$((6*7))") and t.expect("hello-42"),
          "the keys echo and the command runs")
    t.check_size_ctrl_c_exit("the remote PTY")


def scenario_run_without_terminal_streams_stdin_stdout(c):
    """interactive.md: without a local terminal, stdin and stdout are
    streamed (no PTY) and the exit status is the command's."""
    r = subprocess.run([c.bins["cli"], "run", "--tenant", "team-a", "--", "/bin/sh", "-c",
                        "read x; echo got-$x; test -t 0 && echo on-tty; exit 3"],
                       input="abc\n", env=cli_env(c), text=True, capture_output=True,
                       timeout=60)
    check("got-abc" in r.stdout, f"stdin reached the command, its output came back: "
          f"{r.stdout!r} {r.stderr!r}")
    check("on-tty" not in r.stdout, "no PTY without a local terminal")
    check(r.returncode == 3, f"exit status 3: {r.returncode}")
    r = subprocess.run([c.bins["cli"], "srun", "--pty", "--tenant", "team-a", "--gres=gpu:1",
                        "/bin/sh", "-c", "echo via-srun-$CUDA_VISIBLE_DEVICES; exit 2"],
                       stdin=subprocess.DEVNULL, env=cli_env(c), text=True,
                       capture_output=True, timeout=60)
    check("via-srun-GPU" in r.stdout and r.returncode == 2,
          f"tessera srun --pty --gres=gpu:1 CMD reads as Slurm's: {r.returncode} {r.stdout!r} "
          f"{r.stderr!r}")
    # Slurm's everyday job options, read as tessera sbatch reads them
    r = subprocess.run([c.bins["cli"], "srun", "-p", "team-a", "-t", "10", "-N", "1", "-n", "1",
                        "-c", "2", "--mem=1G", "-J", "probe-srun", "--gres=gpu:H100-80GB:1",
                        "--pty", "/bin/sh", "-c", "echo gpus-$CUDA_VISIBLE_DEVICES; exit 4"],
                       stdin=subprocess.DEVNULL, env=cli_env(c), text=True,
                       capture_output=True, timeout=60)
    check("gpus-GPU" in r.stdout and r.returncode == 4,
          f"tessera srun -p -t -N -n -c --mem -J --gres=gpu:TYPE:N runs it: {r.returncode} "
          f"{r.stdout!r} {r.stderr!r}")
    st, d = c.call("GET", "/v1/jobs?state=failed&limit=1000")
    mine = [j for j in (d.get("jobs") or []) if j.get("name") == "probe-srun"]
    spec = (c.job(mine[0]["id"]).get("spec") or {}) if mine else {}
    task = (spec.get("tasks") or [{}])[0]
    check(spec.get("time_limit") == 600 and task.get("cpu_milli") == 2000 and
          task.get("memory_mib") == 1024 and task.get("gpu_model") == "H100-80GB",
          f"its spec has them: {spec.get('time_limit')} {task}")
    # a command the node cannot find: the job fails, and tessera run exits 127 as a shell
    for _ in range(2):  # either way: the end seen before the session, or the session refused
        r = subprocess.run([c.bins["cli"], "run", "-T", "--tenant", "team-a", "--",
                            "no-such-command-7731"], stdin=subprocess.DEVNULL, env=cli_env(c),
                           text=True, capture_output=True, timeout=60)
        check(r.returncode == 127 and "command not found: no-such-command-7731" in r.stderr,
              f"a command not found: exit 127 with the agent's reason: {r.returncode} "
              f"{r.stderr!r}")
    # salloc: a Slurm job, its variables set and srun running steps in it
    r = subprocess.run([c.bins["cli"], "salloc", "-T", "--tenant", "team-a", "--gres=gpu:1",
                        "--", "/bin/sh", "-c", 'echo "job=$SLURM_JOB_ID n=$SLURM_NTASKS"; '
                        'srun printenv SLURM_STEP_ID; echo srun-rc=$?'],
                       stdin=subprocess.DEVNULL, env=cli_env(c), text=True,
                       capture_output=True, timeout=90)
    check(r.returncode == 0 and "job=" in r.stdout and "job= " not in r.stdout and
          "n=1" in r.stdout and "\n0\n" in r.stdout and "srun-rc=0" in r.stdout,
          f"inside salloc, SLURM_JOB_ID is set and srun runs a step: {r.returncode} "
          f"{r.stdout!r} {r.stderr!r}")
    r = subprocess.run([c.bins["cli"], "srun", "-N", "2", "--tenant", "team-a", "true"],
                       stdin=subprocess.DEVNULL, env=cli_env(c), text=True,
                       capture_output=True, timeout=60)
    check(r.returncode == 2 and "one task" in r.stderr,
          f"more than one task is refused, saying so: {r.returncode} {r.stderr!r}")
    # a signal to tessera run goes on to the remote process group
    p = subprocess.Popen([c.bins["cli"], "run", "-T", "--tenant", "team-a", "--", "/bin/sh", "-c",
                          'trap "echo got-int; exit 9" INT; echo ready; '
                          "while :; do sleep 0.1; done"],
                         env=cli_env(c), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        check(line.strip() == "ready", f"the command runs: {line!r}")
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
        check("got-int" in out and p.returncode == 9,
              f"SIGINT reached the remote command, whose status is tessera's: {p.returncode} "
              f"{out!r} {err!r}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def scenario_exec_in_running_task(c):
    """interactive.md: `tessera exec JOB -- CMD` runs CMD in the running task's
    cgroup and environment, and exits with CMD's status."""
    jid = c.submit(sleeper("exec-target"))
    if not c.wait_job(jid, "running", 30):
        return
    pid = pid_of(c, jid)
    r = c.cli("exec", str(jid), "--", "/bin/sh", "-c",
              "echo step=$TESSERA_STEP_FILE; cat /proc/self/cgroup; exit 5")
    check(r.returncode == 5, f"exec exits with the command's status 5: {r.returncode} "
          f"{r.stderr!r}")
    check(f"j{jid}-r0" in r.stdout, f"the task's environment: {r.stdout!r}")
    if pid:
        mine = open(f"/proc/{pid}/cgroup").read().strip()
        check(mine in r.stdout, f"the task's cgroup ({mine}): {r.stdout!r}")
    t = Term(c, ["exec", str(jid), "--", "/bin/sh", "-c", "tty; stty size; exit 4"], 33, 90)
    check(t.expect("/dev/pts/") and t.expect("33 90"),
          "on a local terminal, exec runs on a PTY of the local window's size")
    check(t.wait(30) == 4, f"and exits with the command's status 4: {t.status}")
    t0 = time.time()
    t = Term(c, ["exec", str(jid), "--", "/bin/sh", "-c", "sleep 60 & echo bg-started; exit 3"])
    check(t.expect("bg-started") and t.wait(20) == 3 and time.time() - t0 < 20,
          f"exec ends with its command, though a background process keeps the PTY: {t.status}")
    p = subprocess.Popen([c.bins["cli"], "exec", str(jid), "--", "/bin/sh", "-c", "echo x; exit 2"],
                         env=cli_env(c), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        p.wait(20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    check(p.returncode == 2, f"exec ends with its command while stdin stays open: {p.returncode}")
    p.stdin.close()
    r = c.cli("exec", str(jid), "7", "--", "true")
    check(r.returncode == 4 and "rank" in r.stderr, f"a rank the job lacks is refused: "
          f"{r.returncode} {r.stderr!r}")


def scenario_port_forward_reaches_http_server_in_job(c):
    """interactive.md: `tessera port-forward JOB LOCAL:REMOTE` relays each
    local connection through the controller to the task's 127.0.0.1:REMOTE."""
    port = 20000 + os.getpid() % 20000
    www = c.path("www")
    os.makedirs(www, exist_ok=True)
    with open(os.path.join(www, "hello.txt"), "w") as f:
        f.write("served-from-the-job\n")
    jid = c.submit(sleeper("notebook", cmd=f"cd {www} && exec python3 -m http.server {port} "
                                             "--bind 127.0.0.1"))
    if not c.wait_job(jid, "running", 30):
        return
    p = subprocess.Popen([c.bins["cli"], "port-forward", str(jid), f"0:{port}"],
                         env=cli_env(c), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        line = p.stdout.readline()
        check(line.startswith("Forwarding from 127.0.0.1:"), f"it says where: {line!r}")
        local = int(line.split("127.0.0.1:")[1].split()[0])
        body = None
        for _ in range(50):  # the server in the job may still be starting
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{local}/hello.txt",
                                              timeout=10).read().decode()
                break
            except OSError:
                time.sleep(0.2)
        check(body == "served-from-the-job\n", f"the job's server answers: {body!r}")
        big = urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10).read()
        check(b"hello.txt" in big, "a second connection works too")
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def scenario_port_forward_refused_before_listening(c):
    """interactive.md: port-forward makes the checks of its sessions before it
    listens: a caller who may not open the job's sessions, a rank the job
    does not have, a job not running (yet) and another tenant's job are each
    refused at once, with the code exec gives them (5, 4, 4, 3), and nothing
    listens."""
    jid = c.submit(sleeper("fwd-private"))
    if not c.wait_job(jid, "running", 30):
        return
    peer = c.token("fwd-a2", "user", "team-a")
    other = c.token("fwd-b", "user", "team-b")
    held = c.submit(dict(sleeper("fwd-held"), hold=True))
    cases = [("another user of the tenant", [str(jid), "0:8888"], peer, 5, "owner"),
             ("a rank the job lacks", [str(jid), "3", "0:8888"], None, 4, "rank"),
             ("a job not running", [str(held), "0:8888"], None, 4, "not running"),
             ("another tenant's job", [str(jid), "0:8888"], other, 3, "")]
    for what, args, token, code, says in cases:
        try:
            r = c.cli("port-forward", *args, token=token, timeout=20)
        except subprocess.TimeoutExpired:
            check(False, f"{what}: port-forward listens instead of refusing")
            continue
        check(r.returncode == code and "Forwarding" not in r.stdout and says in r.stderr,
              f"{what}: refused at once, exit {code}: {r.returncode} {r.stdout!r} {r.stderr!r}")


def scenario_other_tenant_and_other_user_refused(c):
    """interactive.md: only the job's owner and admins open its sessions:
    another tenant's token sees no such job (404, as for every read of
    another tenant's job), another user of its tenant is refused (403)."""
    jid = c.submit(sleeper("private"))
    if not c.wait_job(jid, "running", 30):
        return
    other = c.token("sess-b", "user", "team-b")
    peer = c.token("sess-a2", "user", "team-a")
    body = {"kind": "exec", "command": ["true"]}
    st, s, text = open_raw(c, f"/v1/jobs/{jid}/sessions", body, other)
    check(st == 404 and s is None, f"another tenant: 404: {st} {text[-200:]!r}")
    st, s, text = open_raw(c, f"/v1/jobs/{jid}/sessions", body, peer)
    check(st == 403 and s is None, f"another user of the tenant: 403: {st} {text[-200:]!r}")
    r = c.cli("exec", str(jid), "--", "true", token=other)
    check(r.returncode == 3, f"the CLI says not found (exit 3): {r.returncode} {r.stderr!r}")


def scenario_node_cannot_open_another_nodes_session(c):
    """interactive.md: a node credential opens only its own node's sessions,
    and only with the session's secret."""
    jid = c.submit(sleeper("scoped"))
    if not c.wait_job(jid, "running", 30):
        return
    node = c.job(jid)["placement"][0]["node"]
    other = next(n.name for n in c.nodes if n.name != node)
    proc = c.procs[node]
    proc.send_signal(signal.SIGSTOP)  # its agent holds still while we look
    try:
        st, cs, _ = open_raw(c, f"/v1/jobs/{jid}/sessions", {"kind": "exec",
                                                              "command": ["true"]}, c.admin)
        check(st == 101, f"the client's side upgrades: {st}")
        mine = open(c.path(node + ".token")).read().strip()
        theirs = open(c.path(other + ".token")).read().strip()
        # the session, as the node's own desired state lists it (no report)
        from harness import http_call
        st, d = http_call(c.url, "POST", "/v1/agent/sync", mine, {"node": node, "gen": 0})
        sess = (d.get("sessions") or [{}])[0] if st == 200 else {}
        check(sess.get("id") and sess.get("secret"), f"the node's desired state names the "
              f"session: {st} {sess}")
        if sess.get("id"):
            st, s, text = open_raw(c, f"/v1/agent/stream/{sess['id']}", {}, theirs,
                                   sess["secret"])
            check(st == 404 and s is None, f"another node's credential: 404: {st} {text!r}")
            st, s, text = open_raw(c, f"/v1/agent/stream/{sess['id']}", {}, mine, "0" * 48)
            check(st == 403 and s is None, f"a wrong secret: 403: {st} {text!r}")
            st, s, text = open_raw(c, f"/v1/agent/stream/{sess['id']}", {}, c.admin,
                                   sess["secret"])
            check(st == 403 and s is None, f"an admin token is no node: 403: {st}")
        if cs:
            cs.close()
    finally:
        proc.send_signal(signal.SIGCONT)


def scenario_idle_interactive_job_is_reaped(c):
    """interactive.md: an interactive job is reaped by the idle policy like
    any job: its session ends and tessera says the job was stopped and held."""
    t0 = time.time()
    r = subprocess.run([c.bins["cli"], "run", "-T", "--tenant", "team-a", "--gpus", "1",
                        "--idle", "2s", "--", "/bin/sh", "-c", "echo started; sleep 60"],
                       env=cli_env(c), text=True, capture_output=True, timeout=60)
    check("started" in r.stdout, f"the session ran: {r.stdout!r}")
    check(r.returncode == 4 and "held" in r.stderr,
          f"tessera run ends saying the job was stopped and held: {r.returncode} {r.stderr!r}")
    check(time.time() - t0 < 40, f"within the idle window and its grace: {time.time() - t0:.1f} s")


def scenario_slow_client_slows_only_its_own_session(c):
    """interactive.md: a client that does not read stalls its own session
    only: another session of the same job and the API go on."""
    jid = c.submit(sleeper("flood"))
    if not c.wait_job(jid, "running", 30):
        return
    st, slow, _ = open_raw(c, f"/v1/jobs/{jid}/sessions",
                           {"kind": "exec", "command": ["/bin/sh", "-c", "exec cat /dev/zero"]},
                           c.admin)
    check(st == 101, f"the flooding session opens: {st}")
    try:
        time.sleep(1.0)  # its buffers fill: the agent's writes and the relay's wait
        r = c.cli("exec", str(jid), "--", "echo", "still-fine", timeout=30)
        check(r.returncode == 0 and "still-fine" in r.stdout,
              f"another session of the job works: {r.returncode} {r.stdout!r} {r.stderr!r}")
        check(c.job(jid).get("state") == "running", "the API answers")
        st, text = c.call("GET", "/metrics")
        n = [float(ln.split()[1]) for ln in (text if isinstance(text, str) else "").splitlines()
             if ln.startswith("tessera_sessions_open ")]
        check(n and n[0] >= 1, f"tessera_sessions_open counts the open session: {n}")
    finally:
        if slow:
            slow.close()
