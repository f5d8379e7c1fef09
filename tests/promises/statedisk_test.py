"""Promises of the node's state disk under container tasks that write
(docs/images.md "Running it"), on a real agent whose state disk is a small
filesystem of its own (a 320 MiB tmpfs mounted here), with a real registry
(Debian's docker-registry), images built with umoci and pushed with skopeo,
tasks run by Debian's runc. Each container's writable layer is bounded, but
layers are sparse: two tasks that write theirs together could fill the disk
that holds every task's records, and a task's output could fill it alone.
The agent keeps each task's output within --output-keep-mib, and a reserve
free: under it, the task whose files take the most is stopped
(`disk_pressure`), and a neighbour's exit status is still recorded."""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cluster import Node  # noqa: E402
from harness import check  # noqa: E402
from registry import busybox_registry, free_port  # noqa: E402

PORT = free_port()
DISK_MIB, LAYER_MIB, RESERVE_MIB, WRITE_MIB, KEEP_MIB = 320, 200, 80, 150, 16
STATE = tempfile.mkdtemp(prefix="tessera-statedisk-")
if os.geteuid() == 0:  # else the scenario is skipped: the folder stands in
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MIB}m", "tessera-statedisk",
                    STATE], check=False)


def _unmount():
    subprocess.run(["umount", "-l", STATE], capture_output=True)
    shutil.rmtree(STATE, ignore_errors=True)


atexit.register(_unmount)
TENANTS = """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 8}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 4}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 4}}}
"""
AGENT = ["--plain-http-registries", f"127.0.0.1:{PORT}", "--state-dir", STATE,
         "--container-write-mib", str(LAYER_MIB), "--disk-reserve-mib", str(RESERVE_MIB),
         "--output-keep-mib", str(KEEP_MIB)]
CLUSTER = {"nodes": [Node("d-1", "l1", args=AGENT)], "tenants": TENANTS}
NEEDS = ("runc", "docker-registry", "umoci", "skopeo", "busybox", "mkfs.ext4")
def registry():
    return busybox_registry(PORT, "tessera-statedisk-reg-")


def spec(tenant, name, cmd, image):
    return {"tenant": tenant, "name": name, "tier": "guaranteed", "image": image,
            "command": ["/bin/sh", "-c", cmd],
            "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 500, "memory_mib": 512}],
            "time_limit": "5m"}


def _free_mib():
    v = os.statvfs(STATE)
    return v.f_bavail * v.f_frsize // (1024 * 1024)


def scenario_a_layer_that_fills_the_state_disk_is_stopped(c):
    """images.md: under the reserve the agent stops the running container
    task whose layer takes the most of the disk, and its job fails with
    reason `disk_pressure`, its event giving the free space, the reserve and
    the layer's size; a neighbour runs on and its exit status is recorded, the
    disk gets its room back and the node takes new work."""
    r = registry()
    img = f"{r.host}/team/tools:1"
    quiet = c.submit(spec("team-b", "neighbour", "sleep 20; exit 3", img))
    # 1 MiB every 20 ms, a busy writer: two of them pass the reserve
    write = (f"i=0; while [ $i -lt {WRITE_MIB} ]; do /bin/busybox dd if=/dev/zero bs=1M "
             "count=1 2>/dev/null >> /tmp/fill || break; i=$((i+1)); /bin/busybox usleep 20000; "
             "done; echo wrote $i; sleep 120")
    if not c.wait_job(quiet, "running", 90):
        return
    low = [_free_mib()]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            low[0] = min(low[0], _free_mib())
            time.sleep(0.05)

    th = threading.Thread(target=watch, daemon=True)
    th.start()
    writers = [c.submit(spec("team-a", f"writer-{k}", write, img)) for k in (1, 2)]
    stopped = None
    deadline = time.time() + 90
    while time.time() < deadline and stopped is None:
        for jid in writers:
            j = c.job(jid)
            if j.get("state") == "failed":
                stopped = j
        time.sleep(0.5)
    check(stopped is not None and stopped.get("reason") == "disk_pressure",
          f"a writer is stopped with reason disk_pressure: {stopped}")
    why = (stopped or {}).get("why") or ""
    check(f"reserve of {RESERVE_MIB} MiB" in why and "(writable layer, output) took" in why,
          f"its why gives the reserve and its layer: {why!r}")
    j = c.wait_job(quiet, ("failed", "completed"), 60)
    check(bool(j) and j.get("exit_code") == 3,
          f"the neighbour ran on and its exit status is recorded: "
          f"{j.get('state') if j else None} {(j or {}).get('exit_code')} {(j or {}).get('why')!r}")
    back = c.wait(lambda: _free_mib() >= RESERVE_MIB // 2 or None,
                  "the stopped layer's space comes back", 30)
    stop.set()
    th.join()
    print(f"state disk: {low[0]} MiB free at the least, {_free_mib()} MiB now")
    check(bool(back), f"the state disk has room again: {_free_mib()} MiB free")
    after = c.submit(spec("team-b", "after", "echo fine", img))
    j = c.wait_job(after, ("completed", "failed"), 60)
    check(bool(j) and j.get("state") == "completed",
          f"and the node takes new work: {(j or {}).get('state')} {(j or {}).get('why')!r}")
    for jid in writers:
        c.call("POST", f"/v1/jobs/{jid}/cancel")


scenario_a_layer_that_fills_the_state_disk_is_stopped.needs_root = True
scenario_a_layer_that_fills_the_state_disk_is_stopped.needs = NEEDS


def scenario_a_disk_filled_from_outside_stops_no_task(c):
    """agent-tasks.md: a state disk filled from outside the tasks' files (a
    bare task writing in a shared folder of the same disk, which no file of
    its counts) stops no task: the largest would be an innocent one. It runs
    on, and the agent says why it stopped nothing."""
    r = registry()
    img = f"{r.host}/team/tools:1"
    # its layer's 40 MiB synced, so the disk sees them (an innocent with files
    # to lose: the largest task's)
    innocent = c.submit(spec("team-b", "innocent", "/bin/busybox dd if=/dev/zero of=/tmp/fill "
                             "bs=1M count=40 2>/dev/null; /bin/busybox sync; echo wrote; "
                             "sleep 120", img))
    if not c.wait_job(innocent, "running", 90):
        return
    log = os.path.join(STATE, "logs", f"j{innocent}-r0.out")
    c.wait(lambda: os.path.exists(log) and "wrote" in open(log).read() or None,
           "the innocent task wrote 40 MiB in its layer", 30)
    time.sleep(6)  # a sample of the disk after it
    # the filler: this test, in a folder of the state disk no task owns
    scratch = os.path.join(STATE, "scratch-fill")
    need = _free_mib() - RESERVE_MIB // 2
    with open(scratch, "wb") as f:
        for _ in range(max(0, need)):
            f.write(b"\0" * (1 << 20))
            f.flush()
    low = _free_mib()
    time.sleep(4)  # the agent's checks, every 0.2 s, under the reserve
    j = c.job(innocent)
    said = open(c.path("d-1.log"), errors="replace").read()
    os.remove(scratch)
    check(low < RESERVE_MIB and j.get("state") == "running",
          f"under the reserve ({low} MiB free < {RESERVE_MIB}), the innocent task runs on: "
          f"{j.get('state')} {j.get('why')!r}")
    check("filled from outside the tasks' files" in said and "no task stopped" in said,
          "the agent says why it stopped nothing")
    c.call("POST", f"/v1/jobs/{innocent}/cancel")
    c.wait_job(innocent, ("cancelled",), 30)


scenario_a_disk_filled_from_outside_stops_no_task.needs_root = True
scenario_a_disk_filled_from_outside_stops_no_task.needs = NEEDS


def scenario_a_task_that_floods_its_output_keeps_its_tail(c):
    """agent-tasks.md: a task's stdout past --output-keep-mib loses its older
    part, not the disk: the log keeps its size and its last lines, and takes
    at most that much of the state disk."""
    mark = "the-last-line-of-the-flood"
    jid = c.submit({"tenant": "team-b", "name": "flood", "tier": "guaranteed",
                    "command": ["/bin/sh", "-c", "yes 0123456789abcdef | head -c 100000000; "
                                f"echo; echo {mark}; sleep 60"],
                    "tasks": [{"count": 1, "gpus": 0, "cpu_milli": 500, "memory_mib": 256}],
                    "time_limit": "5m"})
    if not c.wait_job(jid, "running", 60):
        return
    log = os.path.join(STATE, "logs", f"j{jid}-r0.out")

    def tail():
        try:
            with open(log, "rb") as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
                return f.read().decode(errors="replace")
        except OSError:
            return ""
    c.wait(lambda: mark in tail() or None, "the flood's last line is written", 60)
    time.sleep(0.5)  # the agent's next look at it
    st = os.stat(log)
    used = st.st_blocks * 512 // (1024 * 1024)
    print(f"log: {st.st_size // (1024 * 1024)} MiB long, {used} MiB on the disk")
    check(st.st_size >= 100000000 and mark in tail(),
          f"the log keeps its length and its last lines: {st.st_size} bytes")
    check(used <= KEEP_MIB, f"and takes at most --output-keep-mib of the disk: {used} MiB")
    check(c.job(jid).get("state") == "running", "the task runs on")
    c.call("POST", f"/v1/jobs/{jid}/cancel")


scenario_a_task_that_floods_its_output_keeps_its_tail.needs_root = True


def scenario_ended_tasks_logs_go_first(c):
    """agent-tasks.md: the output logs of ended tasks the agent no longer has
    go after --output-keep-hours, and first of all under the state disk's
    reserve, oldest first, before any running task is stopped."""
    logs = os.path.join(STATE, "logs")

    def put(name, mib, age_h=0.0):
        p = os.path.join(logs, name)
        with open(p, "wb") as f:
            for _ in range(mib):
                f.write(b"x" * (1 << 20))
        t = time.time() - age_h * 3600
        os.utime(p, (t, t))
        return p
    # ages: one past --output-keep-hours (24), two under it (and over the
    # minute in which a starting task's logs are never taken for an ended one's)
    stale, fresh = put("j9998-r0.out", 1, 48), put("j9997-r0.out", 1, 0.1)
    gone = c.wait(lambda: not os.path.exists(stale) or None,
                  "an ended task's log older than --output-keep-hours (24) goes", 30)
    check(bool(gone) and os.path.exists(fresh), "a younger one stays, until the disk needs it")
    big = put("j9996-r0.err", WRITE_MIB, 0.05)
    r = registry()
    write = (f"/bin/busybox dd if=/dev/zero of=/tmp/fill bs=1M count={WRITE_MIB} 2>/dev/null; "
             "echo wrote; sleep 60")
    jid = c.submit(spec("team-a", "writer-3", write, f"{r.host}/team/tools:1"))
    c.wait(lambda: not os.path.exists(big) or None,
           "under the reserve, the ended task's log goes", 60)
    time.sleep(2)
    j = c.job(jid)
    check(j.get("state") == "running" and not os.path.exists(big) and not os.path.exists(fresh),
          f"before any running task is stopped: {j.get('state')} {j.get('why')!r}")
    c.call("POST", f"/v1/jobs/{jid}/cancel")


scenario_ended_tasks_logs_go_first.needs_root = True
scenario_ended_tasks_logs_go_first.needs = NEEDS
