"""Promises of the sharing shim's registration (docs/sharing.md "Never
without its limits"), on a real agent that preloads the built
libtessera-cuda.so into fractional tasks: a fractional task whose shim has
not registered within --shim-register seconds is stopped with reason
`shim_not_loaded`; one whose shim loaded (any dynamic program, a shell
included) runs on."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cluster import Node  # noqa: E402
from harness import check  # noqa: E402

REGISTER_S = 3
CLUSTER = {"nodes": [Node("s-1", "l1", cls="h8shared",
                          args=["--shim", "{fakes}/../libtessera-cuda.so",
                                "--shim-register", str(REGISTER_S)])]}
STATIC = "/bin/busybox"  # Debian's busybox-static: no dynamic loader, so no LD_PRELOAD


def spec(name, command):
    return {"tenant": "team-a", "name": name, "tier": "opportunistic", "command": command,
            "tasks": [{"count": 1, "gpus": 1, "gpu_fraction": 0.25, "cpu_milli": 500,
                       "memory_mib": 512}],
            # a sanitizer build's shim is preloaded into plain programs
            "env": {"ASAN_OPTIONS": "verify_asan_link_order=0:detect_leaks=0"},
            "time_limit": "5m"}


def is_static(path):
    """No PT_INTERP: the kernel runs it without the dynamic loader."""
    try:
        return b"ld-linux" not in open(path, "rb").read(4096)
    except OSError:
        return False


def scenario_static_fractional_task_is_stopped(c):
    """sharing.md: a fractional task whose shim has not registered within the
    agent's --shim-register seconds (a static program, which never reads
    LD_PRELOAD) is stopped and fails with reason `shim_not_loaded`, with an
    event."""
    if not is_static(STATIC):
        print(f"  ({STATIC} is not a static binary here: scripts/install-deps test)")
        return
    jid = c.submit(spec("static", [STATIC, "sleep", "60"]))
    j = c.wait_job(jid, ("failed", "completed"), 40)
    if not j:
        return
    r0 = (j.get("ranks") or [{}])[0] or {}
    check(j.get("state") == "failed" and j.get("reason") == "shim_not_loaded",
          f"the job failed for shim_not_loaded: {j.get('state')} {j.get('reason')} {j.get('why')}")
    check(r0.get("end") == "shim_not_loaded", f"rank 0 ended shim_not_loaded: {r0}")
    check(f"within {REGISTER_S} s" in (j.get("why") or ""), f"why says so: {j.get('why')}")
    ev = [e for e in c.events(jid) if "shim_not_loaded" in str(e)]
    check(bool(ev), f"an event says so: {[e.get('kind') for e in c.events(jid)]}")


def scenario_dynamic_fractional_task_runs_on(c):
    """sharing.md: the shim registers from its constructor, in any dynamic
    program that loads it (a shell wrapper too, before any CUDA call), so a
    task that never touches CUDA runs on past the registration time."""
    jid = c.submit(spec("dynamic", ["/bin/sh", "-c", f"sleep {REGISTER_S * 2}; echo done"]))
    j = c.wait_job(jid, ("failed", "completed"), 40)
    if not j:
        return
    check(j.get("state") == "completed",
          f"it completes: {j.get('state')} {j.get('reason')} {j.get('why')}")
    check("done" in c.output("s-1", jid), f"its output: {c.output('s-1', jid)!r}")


def scenario_adopted_fractional_task_is_still_watched(c):
    """sharing.md: an agent restarted while a fractional task runs adopts its
    mark and watches it for a full period: a static task is still stopped
    with reason `shim_not_loaded`, and its mark is removed with it."""
    if not is_static(STATIC):
        print(f"  ({STATIC} is not a static binary here: scripts/install-deps test)")
        return
    jid = c.submit(spec("static-adopted", [STATIC, "sleep", "60"]))
    if not c.wait_job(jid, "running", 20):
        return
    own = c.path("s-1", "tasks", f"j{jid}-r0")
    mark = os.path.join(own, "shim-loaded")
    marks = c.wait(lambda: [mark] if os.path.isfile(mark) else None, "its shim mark", 10) or []
    check(not os.path.exists(c.path("s-1", "steps")),
          "the agent makes no folder shared by its tasks: the mark is in the task's own")
    # files an older agent (which kept them in a steps folder shared by its
    # tasks) killed mid-start left: this agent removes them; what is not of
    # their names, or not a regular file, stays
    steps = c.path("s-1", "steps")
    os.makedirs(steps)
    orphans = ["j99-r0.shim.0123456789abcdef", "j99-r0.0123456789abcdef", "j99-r1-s2.output"]
    for n in orphans + ["notes.txt"]:
        with open(os.path.join(steps, n), "w") as f:
            f.write("x")
    outside = c.path("outside.txt")
    with open(outside, "w") as f:
        f.write("keep")
    os.symlink(outside, os.path.join(steps, "j98-r0.fedcba9876543210"))
    old = c.procs["s-1"]
    old.kill()  # kill -9 before the registration time is over: nothing cleaned up
    old.wait(10)
    c._spawn("s-1", old.args, dict(os.environ,  # the same agent again, as a restart does
                                   TESSERA_FAKE_NVML_FIXTURE=c.path("s-1-gpus.json")))
    j = c.wait_job(jid, ("failed", "completed"), 40)
    if not j:
        return
    check(j.get("reason") == "shim_not_loaded",
          f"the adopted task was stopped for shim_not_loaded: {j.get('state')} {j.get('reason')}")
    gone = c.wait(lambda: not any(os.path.exists(m) for m in marks) or None,
                  "its mark is removed", 45)
    check(bool(marks) and bool(gone), f"its mark {marks} is removed with it")
    left = sorted(os.listdir(steps))
    check(not any(n in left for n in orphans) and "notes.txt" in left and
          "j98-r0.fedcba9876543210" in left and open(outside).read() == "keep",
          f"the restarted agent removed the files no task record holds, and only those: {left}")



scenario_adopted_fractional_task_is_still_watched.needs_root = True
