"""Hostile tasks on a real agent (issue 24): a task that blocks where the
agent reads (a FIFO, a socket, a device node, links to /etc/shadow or to
another task's files), asks for a megabyte of its output, writes hundreds of
megabytes to stdout, fills the disk of its output, closes its output, forks
hundreds of processes, ignores every signal, leaves its process group with
setsid, spins a CPU, opens another GPU's device node or leaves 200,000 files
in its secrets folder. Each runs next to an ordinary task of another tenant
on the same node, and each scenario checks, from the controller's view:

- the agent keeps syncing: the largest gap between two syncs of the node
  while the hostile task runs is printed ("sync gap") and must stay under
  the agent's long-poll wait (1 s with tasks running) plus 1 s;
- the other task is untouched: it still runs, was never requeued, and its
  output kept growing;
- the hostile task itself ends as docs/agent-tasks.md says.

One node, h-1 (8 GPUs): every task lands on it. Every wait is bounded."""
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
import time

from cluster import Node
from harness import USER_IDENTITY, check

CLUSTER = {
    "nodes": [Node("h-1", "l1")],
    "tenants": """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 8}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 4}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 4}}}
""",
}
NODE = "h-1"
LONG_POLL_S = 1.0   # the agent's long-poll wait while tasks run (agent.h)
GAP_MAX_S = LONG_POLL_S + 1.0
MARK = f"{os.getpid() % 100000:05d}"
GAPS = {}


def spec(name, cmd, tenant="team-a", grace="3s"):
    return {"tenant": tenant, "name": name, "tier": "guaranteed",
            "command": ["/bin/sh", "-c", cmd],
            "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}],
            "time_limit": "10m", "checkpoint": {"signal": "SIGUSR1", "grace": grace}}


class SyncWatch:
    """The node's syncs as the controller sees them: its health.last_seen,
    polled every 50 ms; gap() is the largest time between two of them."""

    def __init__(self, c):
        self.c, self.seen, self.stop_ = c, [], threading.Event()
        self.th = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop_.is_set():
            try:
                h = self.c.node(NODE).get("health", {})
                t = h.get("last_seen")
                if t and (not self.seen or t != self.seen[-1]):
                    self.seen.append(t)
            except Exception:
                pass
            self.stop_.wait(0.05)

    def __enter__(self):
        self.t0 = time.time()
        self.th.start()
        return self

    def __exit__(self, *exc):
        self.stop_.set()
        self.th.join(5)
        self.t1 = time.time()

    def gap(self):
        """Largest gap between two syncs, counting the window's ends."""
        pts = [self.t0] + [t for t in self.seen if self.t0 <= t <= self.t1] + [self.t1]
        return max(b - a for a, b in zip(pts, pts[1:]))


class Neighbour:
    """Another tenant's ordinary task on the same node: a tick each 0.1 s."""

    def __init__(self, c):
        self.c = c
        self.jid = c.submit(spec("neighbour", 'i=0; while true; do i=$((i+1)); echo "tick $i"; '
                                 'sleep 0.1; done', tenant="team-b"))
        c.wait_job(self.jid, "running", 20, "the neighbour runs")
        self.ticks0 = self.ticks()

    def ticks(self):
        return self.c.output(NODE, self.jid).count("tick")

    def check_untouched(self, what, grow=True):
        j = self.c.job(self.jid)
        kinds = [e["kind"] for e in self.c.events(self.jid)]
        check(j.get("state") == "running" and "requeued" not in kinds and
              kinds.count("started") == 1,
              f"{what}: the other tenant's task still runs, started once, never requeued "
              f"({j.get('state')}, {kinds})")
        if grow:
            grew = self.c.wait(lambda: self.ticks() > self.ticks0 + 5, "its output grows", 5)
            check(bool(grew), f"{what}: the other tenant's task kept running ({self.ticks0} "
                  f"-> {self.ticks()} ticks)")
        self.c.call("POST", f"/v1/jobs/{self.jid}/cancel")


def hostile(c, what, cmd, end=("completed",), timeout=30, during=None, grace="3s", grow=True,
            token=None, extra=None):
    """Runs cmd as a hostile task next to a neighbour; checks the sync gap,
    the neighbour, and that the task reaches a state of end. during(c, jid),
    if given, runs while the hostile task runs; token submits it, extra
    joins its spec. Returns the job's id."""
    nb = Neighbour(c)
    with SyncWatch(c) as w:
        s = spec("".join(ch if ch.isalnum() else "-" for ch in what)[:40], cmd, grace=grace)
        jid = c.submit(dict(s, **(extra or {})), token)
        if during:
            c.wait_job(jid, ("running",) + tuple(end), 20)
            during(c, jid)
        j = c.wait_job(jid, end, timeout, f"{what}: the hostile task ends {'/'.join(end)}")
    gap = w.gap()
    GAPS[what] = gap
    print(f"  sync gap: {what}: {gap:.2f} s (long-poll {LONG_POLL_S:.0f} s; "
          f"delay {max(0.0, gap - LONG_POLL_S):.2f} s; {len(w.seen)} syncs seen)")
    check(gap < GAP_MAX_S, f"{what}: the agent kept syncing (largest gap {gap:.2f} s < "
          f"{GAP_MAX_S:.0f} s)")
    check(c.node(NODE).get("state") == "up", f"{what}: the node stays up")
    nb.check_untouched(what, grow)
    return jid if j else None


def procs_with(word):
    r = subprocess.run(["pgrep", "-f", word], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


# ---- the agent never trusts a task's files ------------------------------------------


def scenario_the_node_credential_is_kept_from_tasks(c):
    """tessera-agent.md: a --token-file others may read is made 0600 by the
    agent whose file it is, and said: a task of any tenant could otherwise read
    it and speak for the node (its tasks' secrets, its sessions)."""
    import signal
    path = c.path("h-1.token")
    agent = c.procs["h-1"]
    agent.send_signal(signal.SIGKILL)  # an upgrade's restart: its tasks stay
    agent.wait()
    os.chmod(path, 0o644)  # as an admin's umask may have left it
    before = len(open(c.path("h-1.log")).read())
    c._spawn("h-1", agent.args, dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=c.path("h-1-gpus.json")))
    made = c.wait(lambda: os.stat(path).st_mode & 0o077 == 0, "the agent makes it 0600", 20)
    check(bool(made), f"the node's token file is private: {oct(os.stat(path).st_mode & 0o777)}")
    log = open(c.path("h-1.log")).read()[before:]
    check("was readable by others (mode 0644): made 0600" in log,
          f"and the agent said it made it so: {log[-600:]!r}")
    c.wait(lambda: c.node("h-1").get("state") == "up", "the restarted agent registers", 30)


def scenario_a_fifo_as_step_file(c):
    """agent-tasks.md: a FIFO where the agent reads the step file blocks
    nothing."""
    hostile(c, "fifo step file",
            'rm -f "$TESSERA_STEP_FILE"; mkfifo "$TESSERA_STEP_FILE"; sleep 3')


def scenario_links_sockets_and_devices_as_step_file(c):
    """agent-tasks.md: links, sockets and device nodes where the agent
    reads are not followed nor read."""
    nbr = "$(dirname $(dirname $(dirname $TESSERA_STEP_FILE)))/logs"
    cmd = ('F="$TESSERA_STEP_FILE"; '
           'rm -f "$F"; ln -s /etc/shadow "$F"; sleep 1.2; '
           f'rm -f "$F"; ln -s "$(ls {nbr}/*.out | head -1)" "$F"; sleep 1.2; '
           f'rm -f "$F"; ln "$(ls {nbr}/*.out | head -1)" "$F" 2>/dev/null; sleep 1.2; '
           'rm -f "$F"; python3 -c "import socket,sys,time; s=socket.socket(socket.AF_UNIX); '
           's.bind(sys.argv[1]); s.listen(); time.sleep(1.2)" "$F"; '
           'rm -f "$F"; mknod "$F" c 5 0 2>/dev/null || mkfifo "$F"; sleep 1.2; '
           'rm -f "$F"; mkdir "$F"; sleep 1.2')
    hostile(c, "links sockets devices as step file", cmd)


# ---- a bounded agent protocol -------------------------------------------------------


def scenario_a_megabyte_of_output_asked_for(c):
    """agent-protocol.md: an answer that does not fit is cut with a note;
    the node keeps syncing."""
    got = {}

    def ask(c, jid):
        c.wait(lambda: os.path.getsize(c.path(NODE, "logs", f"j{jid}-r0.out")) >= 1100000
               if os.path.exists(c.path(NODE, "logs", f"j{jid}-r0.out")) else False,
               "the task printed 1.1 MB", 20)
        st, d = c.call("GET", f"/v1/jobs/{jid}/logs?tail=1048576")
        got["one"] = (st, d)
        # more requests at once than a node takes, and than one tenant's jobs
        # may hold of a node's (2 of 4): some wait their turn (429)
        res = []

        def one():
            res.append(c.call("GET", f"/v1/jobs/{jid}/logs?tail=1048576"))
        ths = [threading.Thread(target=one) for _ in range(10)]
        for t in ths:
            t.start()
        for t in ths:
            t.join(30)
        got["many"] = res
        c.call("POST", f"/v1/jobs/{jid}/cancel")

    hostile(c, "1 MiB log request", 'python3 -c "import sys; '
            '[sys.stdout.write(\'%07d \' % i + \'y\' * 92 + \'\\n\') for i in range(11000)]"; '
            'sleep 60', end=("cancelled",), during=ask)
    st, d = got.get("one", (0, {}))
    data = d.get("data", "") if isinstance(d, dict) else ""
    check(st == 200 and 0 < len(data) <= 262144 and "cut to its last" in d.get("note", "")
          and data.endswith("y\n") and d.get("size", 0) >= 1100000,
          f"a 1 MiB log request is answered, cut to 256 KiB with a note: {st} "
          f"{len(data)} bytes of {d.get('size') if isinstance(d, dict) else '?'}, ends "
          f"{data[-5:]!r}, note {d.get('note') if isinstance(d, dict) else d}")
    codes = sorted(s for s, _ in got.get("many", []))
    check(len(codes) == 10 and set(codes) <= {200, 429} and codes.count(200) >= 2,
          f"10 concurrent 1 MiB log requests: answered or told to wait (429): {codes}")


def scenario_hundreds_of_megabytes_to_stdout(c):
    """agent-protocol.md: a task writing 200 MB to stdout delays no sync."""
    def ask(c, jid):
        time.sleep(1.0)
        st, d = c.call("GET", f"/v1/jobs/{jid}/logs?tail=1048576")
        check(st in (200, 404), f"its output is answered while it writes: {st}")
    jid = hostile(c, "200 MB to stdout",
                  'python3 -c "import sys; b=(\'z\' * 1023 + \'\\n\') * 1024\n'
                  'for i in range(200): sys.stdout.write(b)"; sleep 1', during=ask)
    out = c.path(NODE, "logs", f"j{jid}-r0.out")
    if jid and os.path.exists(out):
        os.truncate(out, 0)  # the test's folder is kept: not 200 MB of it


def scenario_output_that_fills_its_disk(c):
    """agent-tasks.md: a task that fills the disk of its output delays no
    sync, and ends as it would; the other tasks of the node share that disk
    (here a 16 MiB disk, under the output cap of --output-keep-mib) but run
    on."""
    logs = c.path(NODE, "logs")
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs",
                                            logs], capture_output=True).returncode != 0:
        print("  skipped: no small tmpfs for the node's output (needs root and mount)")
        return
    try:
        jid = hostile(c, "output fills its disk",
                      'head -c 64000000 /dev/zero | tr "\\0" x; sleep 1; exit 0',
                      end=("completed", "failed"), grow=False)
        j = c.job(jid) if jid else {}
        ends = [e.get("detail") for e in (c.events(jid) if jid else [])
                if e["kind"] in ("failed", "completed")]
        # its exit file's room was taken at its start (launch_keeper.c): it
        # ends as it would, not "lost"
        check(j.get("state") == "completed",
              f"a full output disk: the task ends as it would, completed: {j.get('state')} "
              f"({ends})")
    finally:
        for f in os.listdir(logs):
            if f.endswith((".out", ".err")):
                os.truncate(os.path.join(logs, f), 0)
        c.cancel_all()
        subprocess.run(["umount", "-l", logs], capture_output=True)


def scenario_a_task_that_fills_its_own_folder(c):
    """agent-tasks.md: Where the agent runs as root the folder is a
    filesystem of its own, a 64 MiB tmpfs (16,384 files), so a task that
    fills it gets "No space left on device" there and the state disk, with
    every task's records, gets none of it"""
    state = os.path.dirname(c.path(NODE, "logs"))
    devs = []

    def look(c, jid):  # while it runs: where its folder's file is
        fill = os.path.join(state, "tasks", f"j{jid}-r0", "fill")
        c.wait(lambda: os.path.exists(fill) or None, "the task writes its folder", 10)
        try:
            devs.append((os.stat(fill).st_dev, os.stat(state).st_dev))
        except OSError as e:
            devs.append(str(e))
    jid = hostile(c, "fills its own folder",
                  'd=$(dirname "$TESSERA_STEP_FILE"); head -c 200000000 /dev/zero > $d/fill; '
                  'echo "write ended $?"; echo "size $(stat -c %s $d/fill)"; sleep 3; exit 0',
                  during=look)
    out = c.output(NODE, jid) if jid else ""
    size = next((int(w[1]) for w in (l.split() for l in out.splitlines())
                 if len(w) == 2 and w[0] == "size" and w[1].isdigit()), -1)
    check("write ended 1" in out and 60 << 20 <= size <= 64 << 20,
          f"its write failed at its folder's 64 MiB: {out!r}")
    check(bool(devs) and isinstance(devs[0], tuple) and devs[0][0] != devs[0][1],
          f"its file is not on the state disk (its device, the state folder's): {devs}")


def scenario_closed_stdout(c):
    """agent-tasks.md: a task that closes its output is reported as any
    other."""
    hostile(c, "closed stdout", "exec >&- 2>&-; sleep 2; exit 0")


# ---- processes ----------------------------------------------------------------------


def scenario_a_bounded_fork_bomb(c):
    """agent-tasks.md: when the task ends, what is left in its group (and
    cgroup) is killed."""
    word = f"sleep 40.{MARK}"
    hostile(c, "fork bomb (300 processes)",
            f'i=0; while [ $i -lt 300 ]; do {word} & i=$((i+1)); done; sleep 2; exit 0')
    left = c.wait(lambda: not procs_with(word) or None, "its 300 processes are killed", 15)
    check(left is not None or not procs_with(word),
          f"no process of the fork bomb is left ({len(procs_with(word))})")


def scenario_ignores_every_signal(c):
    """agent-tasks.md: SIGTERM, then SIGKILL after the grace: a task that
    ignores every signal is still stopped."""
    def cancel(c, jid):
        time.sleep(1.0)
        c.call("POST", f"/v1/jobs/{jid}/cancel")
    word = f"ignore.{MARK}"
    t0 = time.time()
    jid = hostile(c, "ignores every signal",
            'exec python3 -c "import signal, time\n'
            'for s in range(1, 32):\n'
            '    try: signal.signal(s, signal.SIG_IGN)\n'
            '    except (OSError, ValueError): pass\n'
            f'time.sleep(120)" {word}', end=("cancelled",), during=cancel, grace="2s")
    gone = c.wait(lambda: not procs_with(word), "the task that ignores every signal is "
                  "killed (checkpoint grace 2 s, then SIGTERM, then SIGKILL)", 20)
    print(f"  ignoring every signal: gone {time.time() - t0:.1f} s after its submission; "
          f"events {[e['kind'] for e in c.events(jid)] if jid else None}")
    check(bool(gone), "the task that ignores every signal is gone")


def scenario_setsid_escape(c):
    """agent-tasks.md: a process that leaves the task's process group is
    killed with the task's cgroup; without a cgroup it is not the task's."""
    word = f"sleep 50.{MARK}"
    rec = {}

    def look(c, jid):
        p = c.path(NODE, "logs", f"j{jid}-r0.task")
        c.wait(lambda: os.path.exists(p), "its record", 10)
        rec["isolated"] = "isolated 1" in (open(p).read() if os.path.exists(p) else "")
    hostile(c, "setsid escape", f"setsid {word} & sleep 2; exit 0", during=look)
    left = procs_with(word)
    if rec.get("isolated"):
        c.wait(lambda: not procs_with(word) or None, "the escaped process is killed", 10)
        check(not procs_with(word), "with a task cgroup, the escaped process is killed")
    else:
        print(f"  no task cgroup here: the escaped process is not the task's ({len(left)} left)")
    for p in procs_with(word):
        os.kill(p, 9)


NVIDIA_GPU_MAJOR = 195


def scenario_opens_another_gpus_device_node(c):
    """agent-tasks.md: with a task cgroup, opening another GPU's node fails
    with EPERM, its own opens (ENXIO here: no driver behind the node). The
    nodes are made with mknod (char 195:N), as /dev/nvidia<N> is."""
    d = tempfile.mkdtemp(prefix="ts-gpu-nodes-")
    os.chmod(d, 0o755)
    for i in range(8):
        os.mknod(os.path.join(d, f"nvidia{i}"), 0o666 | stat.S_IFCHR,
                 os.makedev(NVIDIA_GPU_MAJOR, i))
    script = ("import errno, os, time\n"
              "for i in range(8):\n"
              "    try:\n"
              f"        os.close(os.open('{d}/nvidia%d' % i, os.O_RDONLY)); print('gpu', i, 'ok')\n"
              "    except OSError as e:\n"
              "        print('gpu', i, errno.errorcode[e.errno])\n"
              "time.sleep(2)\n")
    rec = {}

    def look(c, jid):
        p = c.path(NODE, "logs", f"j{jid}-r0.task")
        c.wait(lambda: os.path.exists(p), "its record", 10)
        rec["filtered"] = "devices_isolated 1" in (open(p).read() if os.path.exists(p) else "")
        rec["gpus"] = ((c.job(jid).get("placement") or [{}])[0]).get("gpus") or []
    try:
        jid = hostile(c, "opens another GPU's node", f"exec python3 -c {shlex.quote(script)}",
                      during=look)
        if not jid:
            return
        mine = rec.get("gpus") or []
        seen = {int(w[1]): w[2] for w in (l.split() for l in c.output(NODE, jid).splitlines())
                if len(w) == 3 and w[0] == "gpu"}
        print(f"  its GPU {mine}; opening each node gives {seen}")
        check(len(mine) == 1 and len(seen) == 8, f"the task tried all 8 nodes: {seen}")
        if not rec.get("filtered"):
            print("  no device filter here (no task cgroup): every node opens as far as the "
                  "driver lets it")
            return
        check(seen.get(mine[0]) == "ENXIO", f"its own GPU's node opens (ENXIO: no driver): "
              f"{seen.get(mine[0])}")
        others = {i: e for i, e in seen.items() if i != mine[0]}
        check(set(others.values()) == {"EPERM"}, f"every other GPU's node is refused: {others}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


scenario_opens_another_gpus_device_node.needs_root = True


FILL_FILES = 200000   # files a task leaves in its secrets folder


def scenario_fills_its_secrets_folder(c):
    """agent-tasks.md: a task that leaves 200,000 files in its secrets folder delays
    no sync: the folder is moved aside when the task ends and emptied behind."""
    os.chmod(c.tmp, 0o711)  # the task's user reaches its folders
    user = c.token("filler", "user", "team-a", **USER_IDENTITY)
    r = c.cli("secrets", "set", "FILL_KEY", token=user, stdin="fill-value\n")
    check(r.returncode == 0, f"a secret for the task: {r.returncode} {r.stderr}")
    cmd = (f'cd "$TESSERA_SECRETS_DIR" && chmod 700 . && seq {FILL_FILES} | xargs touch && '
           f'mkdir -p d/e && touch d/e/f && echo "left $(find . -type f | wc -l) files"')
    jid = hostile(c, "fills its secrets folder", cmd, timeout=300, token=user,
                  extra={"secrets": [{"name": "FILL_KEY", "file": "key"}]})
    if jid is None:
        return
    out = c.output(NODE, jid)
    check(f"left {FILL_FILES + 2} files" in out, f"the task left its files: {out[-200:]!r}")
    folder = c.path(NODE, "secrets", f"j{jid}-r0")
    trash = c.path(NODE, "secrets", ".trash")
    check(not os.path.exists(folder), "its secrets folder is gone from its place")
    check(bool(c.wait(lambda: not os.path.exists(trash) or not os.listdir(trash),
                      "the trash is emptied behind", 120)),
          f"its files are removed behind: {os.listdir(trash) if os.path.exists(trash) else []}")


scenario_fills_its_secrets_folder.needs_root = True


def scenario_lists_and_reads_other_tasks_logs(c):
    """agent-tasks.md: the log folder is the agent's alone: a task of
    another user can neither list it nor read a log there (each its task's
    user's, 0600: a primary group shared with other tenants' users reads
    nothing); the image store is root's alone."""
    os.chmod(c.tmp, 0o711)  # the task's user reaches the log folder's parent
    lurker = c.token("lurker", "user", "team-a", unix_user="nobody", uid=65534)
    logs = c.path(NODE, "logs")
    cmd = (f'ls {shlex.quote(logs)} >/dev/null 2>&1 && echo LISTED; '
           f'for i in $(seq 1 400); do cat {shlex.quote(logs)}/j$i-r0.out 2>/dev/null; done '
           f'| grep -c tick | sed "s/^/READ /"; exit 0')
    jid = hostile(c, "lists and reads other tasks' logs", cmd, token=lurker,
                  extra={"workdir": "/tmp"})
    if jid is None:
        return
    out = c.output(NODE, jid)
    check("LISTED" not in out and "READ 0" in out,
          f"another user's task lists no log and reads none: {out[-200:]!r}")
    modes = {name: stat.S_IMODE(os.stat(c.path(NODE, name)).st_mode) for name in ("logs", "images")
             if os.path.exists(c.path(NODE, name))}
    logmode = stat.S_IMODE(os.stat(c.path(NODE, "logs", f"j{jid}-r0.out")).st_mode)
    check(modes.get("logs") == 0o711 and modes.get("images", 0o700) == 0o700 and logmode == 0o600,
          f"the log folder is 0711, the image store 0700, a log 0600: "
          f"{ {k: oct(v) for k, v in modes.items()} } {oct(logmode)}")


scenario_lists_and_reads_other_tasks_logs.needs_root = True


def scenario_a_workdir_or_command_in_a_closed_folder_tells_nothing(c):
    """agent-tasks.md: a task's workdir and command are looked at with its
    user's rights, never root's: a file, a folder and nothing in a folder
    closed to the user all read "Permission denied", so a job cannot learn
    what lies on the node where its user may not look."""
    os.chmod(c.tmp, 0o711)
    closed = c.path("closed-to-users")
    os.makedirs(os.path.join(closed, "a-folder"), exist_ok=True)
    with open(os.path.join(closed, "a-file"), "w") as f:
        f.write("secret\n")
    os.chmod(closed, 0o700)
    lurker = c.token("prober", "user", "team-a", unix_user="nobody", uid=65534)
    whys = {}
    for what in ("a-file", "a-folder", "nothing-there"):
        for field in ("workdir", "command"):
            path = os.path.join(closed, what)
            s = spec(f"probe-{field}", "true")
            if field == "workdir":
                s["workdir"] = path
            else:
                s.update(command=[path], workdir="/tmp")
            jid = c.submit(s, lurker)
            j = c.wait_job(jid, ("failed", "completed"), 30) if jid else None
            whys[(what, field)] = (j or {}).get("why") or ""
    for field in ("workdir", "command"):
        seen = {what: whys[(what, field)].replace(os.path.join(closed, what), "PATH")
                for what in ("a-file", "a-folder", "nothing-there")}
        check(len(set(seen.values())) == 1 and "Permission denied" in seen["a-file"],
              f"its {field} reads the same for a file, a folder and nothing: {seen}")


scenario_a_workdir_or_command_in_a_closed_folder_tells_nothing.needs_root = True


def scenario_spins_a_cpu(c):
    """agent-tasks.md: a task spinning a CPU delays no sync."""
    hostile(c, "spins a CPU", 'timeout 4 sh -c "while :; do :; done"; exit 0')
    report_gaps()


def report_gaps():
    """The largest gap between two syncs of the node, per hostile task."""
    print(f"  largest gap between two syncs of {NODE}, per hostile task (long-poll "
          f"{LONG_POLL_S:.0f} s, target < {GAP_MAX_S:.0f} s):")
    for k, v in GAPS.items():
        print(f"    {k:40s} {v:5.2f} s")
