"""Promises of jobs that run in container images (docs/images.md), on real
agents with a real registry: Debian's docker-registry on loopback (started
here, on the port the agents were told to pull from over plain http), small
images built from busybox with umoci and pushed with skopeo, tasks run by
Debian's runc. A job with `image:` runs its command inside the image: it
sees the image's files and not the node's, its exit code and output are the
job's; an image the registry does not know fails the job with reason
`image_not_found`; a malformed reference is refused at submission, naming
the field."""
import atexit
import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cluster import Node  # noqa: E402
from harness import check  # noqa: E402
from registry import Registry, StallFront, TokenFront, free_port  # noqa: E402

PORT, FRONT_PORT, LATE_PORT, STALL_PORT = free_port(), free_port(), free_port(), free_port()
REDIR_PORT = free_port()
PULL = ["--plain-http-registries", f"127.0.0.1:{PORT},127.0.0.1:{FRONT_PORT},127.0.0.1:{LATE_PORT},"
                                f"127.0.0.1:{STALL_PORT},127.0.0.1:{REDIR_PORT}"]
PULL_USER, PULL_PASS = "puller", "pull-pw-never-shown-7"
# host folders team-a may mount: one read-only, one read-write
HOST_RO, HOST_RW = tempfile.mkdtemp(prefix="tessera-ro-"), tempfile.mkdtemp(prefix="tessera-rw-")
os.chmod(HOST_RO, 0o755)
os.chmod(HOST_RW, 0o1777)
with open(os.path.join(HOST_RO, "in.txt"), "w") as _f:
    _f.write("from the node's folder\n")
os.chmod(os.path.join(HOST_RO, "in.txt"), 0o644)
atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in (HOST_RO, HOST_RW)])
TENANTS = f"""tenants:
  org:
    allow_root: true
    guaranteed: {{gpu: {{H100-80GB: 16}}}}
    teams:
      team-a:
        guaranteed: {{gpu: {{H100-80GB: 8}}}}
        mounts: [{HOST_RO}, {{path: {HOST_RW}, write: true}}]
      team-b: {{guaranteed: {{gpu: {{H100-80GB: 8}}}}, registries: [registry.example.com]}}
"""
# the agents preload a sharing shim into fractional tasks; the image checks
# refuse before it is ever loaded, so any readable file stands in for it
SHIM = os.path.join(HOST_RO, "libtessera-cuda.so")
with open(SHIM, "w") as _f:
    _f.write("a stand-in: never loaded\n")
os.chmod(SHIM, 0o644)
PULL += ["--shim", SHIM]
# r-2 gives a container's writable layer 64 MiB (the others the default)
CLUSTER = {"nodes": [Node("r-1", "l1", args=PULL),
                     Node("r-2", "l1", args=PULL + ["--container-write-mib", "64"]),
                     Node("s-1", "l1", cls="h8shared", args=PULL)],
           "tenants": TENANTS}
NEEDS = ("runc",) + tuple(t for t in ("docker-registry", "umoci", "skopeo", "busybox"))

_reg = {}


def registry():
    """The registry, started (and its images pushed) by the first scenario
    that needs it."""
    if "r" not in _reg:
        work = tempfile.mkdtemp(prefix="tessera-images-")
        r = Registry(work, PORT)
        atexit.register(lambda: (r.stop(), shutil.rmtree(work, ignore_errors=True)))
        r.push_busybox("team/tools:1", "inside the image", {"/etc/tool.conf": "mode=image\n"})
        front = TokenFront(r.base, PULL_USER, PULL_PASS, FRONT_PORT)
        atexit.register(front.stop)
        _reg["r"] = r
    return _reg["r"]


def spec(name, cmd, image, **kw):
    s = {"tenant": "team-a", "name": name, "tier": "guaranteed", "image": image,
         "command": ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else cmd,
         "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}],
         "time_limit": "5m"}
    s.update(kw)
    return s


def scenario_image_job_runs_inside_its_image(c):
    """images.md: a job with `image:` runs its command inside that image: it
    sees the image's files, not the node's, and its exit code and output are
    the job's."""
    r = registry()
    ref = f"{r.host}/team/tools:1"
    cmd = ("cat /marker /etc/tool.conf; test -e /etc/debian_version && echo node-files; "
           "echo rank=$RANK job=$TESSERA_JOB_ID; echo 0.25 >> $TESSERA_STEP_FILE && "
           "echo step-file-ok; exit 3")
    jid = c.submit(spec("in-image", cmd, ref))
    j = c.wait_job(jid, "failed", 90)
    if not j:
        return
    check(j.get("exit_code") == 3, f"its exit code is the command's: {j.get('exit_code')}")
    node = next((n for n in ("r-1", "r-2") if c.output(n, jid)), "r-1")
    out = c.output(node, jid)
    check("inside the image" in out and "mode=image" in out, f"it sees the image's files: {out!r}")
    check("node-files" not in out, f"and not the node's: {out!r}")
    check("rank=0" in out, f"with the task environment: {out!r}")
    check("step-file-ok" in out, f"and the task library's step file: {out!r}")
    # the same image again: from the node's store, and a clean exit completes
    jid2 = c.submit(spec("in-image-2", "cat /marker", ref))
    check(bool(c.wait_job(jid2, "completed", 60)), "a second job of the image completes")


scenario_image_job_runs_inside_its_image.needs_root = True
scenario_image_job_runs_inside_its_image.needs = NEEDS


def _mounts_under(path):
    with open("/proc/self/mountinfo") as f:
        return [l.split()[4] for l in f if l.split()[4].startswith(path + "/")]


def scenario_a_container_that_fills_its_root(c):
    """images.md: what a container task writes in its root goes to a
    filesystem of its own, of `--container-write-mib`: a task that fills it
    gets "No space left on device" and the node's state disk gets none of
    it; the filesystem goes with the task."""
    if not os.path.exists("/dev/loop-control") or not shutil.which("mkfs.ext4",
                                                                   path="/usr/sbin:/sbin"):
        print("  skipped: no loop devices or no mkfs.ext4 here (the layer stays on the disk)")
        return
    r = registry()
    bundles = c.path("r-2", "bundles")
    cmd = ("head -c 200000000 /dev/zero > /tmp/fill; echo write-ended-$?; "
           "echo size $(stat -c %s /tmp/fill); sleep 4")
    jid = c.submit(spec("fills-root", cmd, f"{r.host}/team/tools:1", nodelist="r-2"))
    if not c.wait_job(jid, "running", 90):
        return
    def fill_dev():  # <bundles>/<id>/scratch/upper/tmp/fill
        for root, _, files in os.walk(bundles):
            if "fill" in files and root.endswith("/upper/tmp"):
                bundle = root[:root.index("/upper/tmp")].rsplit("/scratch", 1)[0]
                return os.stat(os.path.join(root, "fill")).st_dev, bundle
        return None
    found = c.wait(fill_dev, "the task's file shows in its layer", 20)
    state_dev = os.stat(bundles).st_dev
    j = c.wait_job(jid, "completed", 60)
    out = c.output("r-2", jid)
    size = next((int(w[1]) for w in (l.split() for l in out.splitlines())
                 if len(w) == 2 and w[0] == "size" and w[1].isdigit()), -1)
    check(bool(j) and "write-ended-1" in out and 0 < size <= 64 << 20,
          f"its write failed within its 64 MiB: {out!r}")
    check(bool(found) and found[0] != state_dev,
          f"its layer is not on the state disk (its device {found}, the state disk's "
          f"{state_dev})")
    if found:
        gone = c.wait(lambda: not _mounts_under(found[1]) or None,
                      "its layer's filesystem is unmounted", 20)
        check(gone is not None, f"nothing of it stays mounted: {_mounts_under(found[1])}")


scenario_a_container_that_fills_its_root.needs_root = True
scenario_a_container_that_fills_its_root.needs = NEEDS


def scenario_exec_joins_the_container(c):
    """interactive.md: `tessera exec` into a container task runs inside the
    container: its files (mount namespace), its processes (pid namespace:
    the command sees itself in the container's /proc), its working
    directory and environment, as the task's user."""
    r = registry()
    jid = c.submit(spec("exec-in", "cd /etc && exec sleep 120", f"{r.host}/team/tools:1"))
    if not c.wait_job(jid, "running", 90):
        return
    # at once: the container may still be starting, its first process the
    # runtime's own init; the agent waits for the task's command to run
    # (it joined the runtime's init, with none of the task's environment)
    p = c.cli("exec", str(jid), "--", "/bin/sh", "-c", "cat /marker; echo rank=$RANK",
              timeout=30)
    check(p.returncode == 0 and "inside the image" in p.stdout and "rank=0" in p.stdout,
          f"an exec as the task starts joins the task, not the runtime: {p.returncode} "
          f"{p.stdout!r} {p.stderr!r}")
    out = ""
    for _ in range(40):  # the task's own `cd` may not have run yet
        p = c.cli("exec", str(jid), "--",
                  "/bin/sh", "-c", "cat /marker; pwd; test -d /proc/$$ && echo own-pid-seen; "
                  "cat /proc/1/cmdline | tr '\\0' ' '; echo; echo rank=$RANK",
                  timeout=30)
        out = p.stdout
        # its working directory is /etc once its shell ran `cd /etc` and `sleep`
        if p.returncode == 0 and "inside the image" in out and "sleep 120" in out:
            break
        time.sleep(0.5)
    check("inside the image" in out, f"exec sees the image's files: {p.returncode} {out!r} "
          f"{p.stderr!r}")
    check("own-pid-seen" in out, f"and is in the container's pid namespace: {out!r}")
    check("sleep 120" in out, f"whose first process is the task's: {out!r}")
    check("/etc\n" in out, f"in the task's working directory: {out!r}")
    check("rank=0" in out, f"with the task's environment: {out!r}")
    p = c.cli("exec", str(jid), "--", "/bin/sh", "-c", "exit 7", timeout=30)
    check(p.returncode == 7, f"its exit status is exec's: {p.returncode} {p.stderr!r}")
    c.call("POST", f"/v1/jobs/{jid}/cancel")


scenario_exec_joins_the_container.needs_root = True
scenario_exec_joins_the_container.needs = NEEDS


def scenario_exec_into_a_task_that_execs(c):
    """interactive.md: an exec gets the task's environment even when it
    lands while the task's process is exec'ing (a shell exec'ing its
    command): /proc reads an empty environment for that instant, and the
    agent reads it again rather than run the command with none."""
    r = registry()
    loop = 'exec /bin/sh -c "$0" "$0"'  # the same pid exec's itself, forever
    jid = c.submit(spec("exec-execs", ["/bin/sh", "-c", loop, loop], f"{r.host}/team/tools:1"))
    if not c.wait_job(jid, "running", 90):
        return
    bad = []
    for i in range(16):
        p = c.cli("exec", str(jid), "--", "/bin/sh", "-c", "echo rank=$RANK", timeout=30)
        if p.returncode != 0 or "rank=0" not in p.stdout:
            bad.append((i, p.returncode, p.stdout.strip(), p.stderr.strip()[-120:]))
    check(not bad, f"every exec has the task's environment: {bad}")
    c.call("POST", f"/v1/jobs/{jid}/cancel")


scenario_exec_into_a_task_that_execs.needs_root = True
scenario_exec_into_a_task_that_execs.needs = NEEDS


def _status_lines(text, keys=("CapEff", "CapBnd", "CapPrm", "NoNewPrivs")):
    return {k: v.strip() for k, _, v in (ln.partition(":") for ln in text.splitlines())
            if k in keys}


def scenario_exec_keeps_the_container_confinement(c):
    """interactive.md: `tessera exec` into a container runs under the
    container's own confinement, as its task: no new privileges and only the
    container's capabilities (Docker's default set), bounding set included.
    A session as root (here a tenant with allow_root) is no stronger than
    its task: it cannot mount, and cannot gain what the task lacks."""
    r = registry()
    jid = c.submit(spec("exec-root", "exec sleep 120", f"{r.host}/team/tools:1",
                        user="0:0"))
    if not c.wait_job(jid, "running", 90):
        return
    show = ("/bin/busybox grep -E '^(CapEff|CapBnd|CapPrm|NoNewPrivs)' /proc/$$/status; "
            "echo ---; /bin/busybox grep -E '^(CapEff|CapBnd|CapPrm|NoNewPrivs)' /proc/1/status")
    out = ""
    for _ in range(20):  # until the container's first process is the task's sleep
        p = c.cli("exec", str(jid), "--", "/bin/sh", "-c", show, timeout=30)
        out = p.stdout
        if p.returncode == 0 and "---" in out and "CapBnd" in out.split("---")[1]:
            break
        time.sleep(0.5)
    mine, task = (_status_lines(t) for t in (out.split("---") + ["", ""])[:2])
    check(bool(task) and mine.get("CapEff") == task.get("CapEff")
          and mine.get("CapBnd") == task.get("CapBnd") and mine.get("CapPrm") == task.get("CapPrm"),
          f"a root exec holds the task's capabilities and no more: exec {mine} task {task}")
    bnd = int(mine.get("CapBnd") or "ffffffffff", 16)
    check(not bnd & (1 << 21 | 1 << 16 | 1 << 19),  # CAP_SYS_ADMIN, _MODULE, _PTRACE
          f"the container's set, bounding set included, with none of the host's: {mine}")
    # no raw sockets: a root task on the node's network would read every tenant's traffic
    check(not bnd & (1 << 13) and not int(task.get("CapEff") or "0", 16) & (1 << 13),
          f"no CAP_NET_RAW, the task's or its exec's: {mine} {task}")
    check(mine.get("NoNewPrivs") == "1", f"with no new privileges, as the task: {mine}")
    p = c.cli("exec", str(jid), "--", "/bin/busybox", "mount", "-t", "tmpfs", "x", "/tmp",
              timeout=30)
    check(p.returncode != 0, f"a root exec cannot mount (no CAP_SYS_ADMIN): {p.returncode} "
          f"{p.stdout!r} {p.stderr!r}")
    c.call("POST", f"/v1/jobs/{jid}/cancel")


scenario_exec_keeps_the_container_confinement.needs_root = True
scenario_exec_keeps_the_container_confinement.needs = NEEDS


def scenario_oom_kill_in_a_container_is_reported(c):
    """images.md "Limits": a container task that allocates past its memory
    limit is OOM-killed in the container's own cgroup, and ends `oom` with
    the signal that ended it (not the runtime's exit status 137), with an
    event, as a bare task does."""
    r = registry()
    # the shell keeps a command substitution's whole output in its memory
    hog = "x=$(head -c 400000000 /dev/zero | tr '\\0' a); echo survived ${#x}"
    s = spec("in-image-hog", hog, f"{r.host}/team/tools:1")
    s["tasks"][0]["memory_mib"] = 64
    jid = c.submit(s)
    j = c.wait_job(jid, ("failed", "completed"), 90)
    if not j:
        return
    r0 = (j.get("ranks") or [{}])[0] or {}
    check(j.get("state") == "failed" and j.get("reason") == "oom",
          f"the job failed for oom: {j.get('state')} {j.get('reason')} {j.get('why')}")
    check(r0.get("end") == "oom" and r0.get("oom_kills", 0) >= 1 and r0.get("signal") == 9,
          f"rank 0 was OOM-killed (SIGKILL): {r0}")
    ev = [e for e in c.events(jid) if "OOM killer" in str(e)]
    check(bool(ev), f"an event says so: {[e.get('kind') for e in c.events(jid)]}")


scenario_oom_kill_in_a_container_is_reported.needs_root = True
scenario_oom_kill_in_a_container_is_reported.needs = NEEDS


def scenario_container_sees_only_its_gpus(c):
    """images.md "GPUs in a container": each agent writes its node's CDI spec
    to <state_dir>/cdi/tessera.json (a device per GPU), and a container task
    gets exactly its allocation's device nodes: with one GPU of eight it sees
    the /dev/nvidiaN of the GPU its CUDA_VISIBLE_DEVICES names (the runtime
    makes the nodes from config.json) and /dev/nvidiactl, no other GPU."""
    import json
    specs = {}
    for n in ("r-1", "r-2"):
        try:
            with open(c.path(n, "cdi", "tessera.json")) as f:
                specs[n] = cdi = json.load(f)
        except (OSError, ValueError) as e:
            check(False, f"{n} wrote its CDI spec: {e}")
            continue
        check(cdi.get("kind") == "nvidia.com/gpu" and cdi.get("cdiVersion") == "0.6.0",
              f"{n}'s spec is a CDI 0.6.0 nvidia.com/gpu one: {cdi.get('kind')}")
        names = [d.get("name") for d in cdi.get("devices", [])]
        check(names == [str(i) for i in range(8)], f"with a device per GPU: {names}")
    r = registry()
    jid = c.submit(spec("gpu-view", "ls /dev | grep nvidia; echo cvd=$CUDA_VISIBLE_DEVICES",
                        f"{r.host}/team/tools:1"))
    if not c.wait_job(jid, "completed", 90):
        return
    node = next((n for n in ("r-1", "r-2") if c.output(n, jid)), "r-1")
    out = c.output(node, jid)
    cvd = next((w[4:] for w in out.split() if w.startswith("cvd=")), "")
    mine = [d["name"] for d in specs.get(node, {}).get("devices", [])
            if f"CUDA_VISIBLE_DEVICES={cvd}" in d.get("containerEdits", {}).get("env", [])]
    check(len(mine) == 1, f"CUDA_VISIBLE_DEVICES names one GPU of {node}: {cvd!r} -> {mine}")
    nodes = sorted(w for w in out.split() if w.startswith("nvidia"))
    check(mine and nodes == sorted([f"nvidia{mine[0]}", "nvidiactl"]),
          f"it sees its GPU's node and the control node, no other: {nodes}")


scenario_container_sees_only_its_gpus.needs_root = True
scenario_container_sees_only_its_gpus.needs = NEEDS


def scenario_fractional_task_in_an_image_without_glibc_is_refused(c):
    """images.md "Fractional GPUs in a container": a fractional task whose
    image cannot load the sharing shim (the busybox image: a static binary,
    no glibc) is refused with a reason naming it, never run without its
    limits."""
    r = registry()
    s = spec("frac-static", "echo ran-without-limits", f"{r.host}/team/tools:1")
    s["tasks"][0]["gpu_fraction"] = 0.5
    jid = c.submit(s)
    j = c.wait_job(jid, ("failed", "completed"), 60)
    if not j:
        return
    why = j.get("why") or ""
    check(j.get("state") == "failed" and "shim_unloadable" in why and "no glibc" in why,
          f"it fails naming the shim and the image: {j.get('state')} {why!r}")
    check("ran-without-limits" not in c.output("s-1", jid), "its command never ran")


scenario_fractional_task_in_an_image_without_glibc_is_refused.needs_root = True
scenario_fractional_task_in_an_image_without_glibc_is_refused.needs = NEEDS


def scenario_unknown_image_fails_image_not_found(c):
    """images.md: an image or tag the registry does not know fails the job with
    reason `image_not_found`; nothing else is affected."""
    r = registry()
    jid = c.submit(spec("no-such-tag", "true", f"{r.host}/team/tools:nope"))
    j = c.wait_job(jid, "failed", 60)
    if not j:
        return
    check(j.get("reason") == "image_not_found", f"reason image_not_found: {j.get('reason')}")
    check("not found" in (j.get("why") or ""), f"why says so: {j.get('why')}")
    ok = c.submit(spec("still-fine", "cat /marker", f"{r.host}/team/tools:1"))
    check(bool(c.wait_job(ok, "completed", 60)), "another job of a known image still runs")


scenario_unknown_image_fails_image_not_found.needs_root = True
scenario_unknown_image_fails_image_not_found.needs = NEEDS


def scenario_bad_image_reference_refused_at_submission(c):
    """images.md: a reference that is not `host[:port]/repo[:tag]` or
    `@sha256:<digest>` is refused at submission (400), naming the field."""
    st, d = c.call("POST", "/v1/jobs", spec("bad-ref", "true", "busybox"))
    text = str(d)
    check(st == 400, f"400 for an image without its registry: {st}")
    check("image" in text and "registry" in text, f"the error names the field: {text}")


def scenario_tenant_registries_restrict_images(c):
    """images.md: a job whose image comes from a registry its tenant may not use
    is refused at submission (400), naming the field and the registries it may use."""
    registry()
    st, d = c.call("POST", "/v1/jobs", spec("elsewhere", "true", f"127.0.0.1:{PORT}/team/tools:1",
                                            tenant="team-b"))
    text = str(d)
    check(st == 400 and "image" in text and "registry.example.com" in text,
          f"400 naming image and the allowed registry: {st} {text}")
    st, d = c.call("POST", "/v1/jobs", spec("allowed", "true", "registry.example.com/t/x:1",
                                            tenant="team-b"))
    check(st == 201, f"an image from its registry is accepted: {st} {d}")
    st, d = c.call("POST", "/v1/jobs", spec("unrestricted", "true",
                                            f"127.0.0.1:{PORT}/team/tools:1", tenant="team-a",
                                            tasks=[{"count": 1, "gpus": 1}], command=["true"]))
    check(st == 201, f"a tenant without registries may use any: {st} {d}")


scenario_tenant_registries_restrict_images.needs_root = True
scenario_tenant_registries_restrict_images.needs = NEEDS


def scenario_private_registry_with_pull_secret(c):
    """images.md: a registry that wants credentials gets the job's
    `image_pull_secret`, a secret of the secret store holding `user:password`; its
    value is never shown by any read of the job, its events or its logs."""
    registry()
    private = f"127.0.0.1:{FRONT_PORT}/team/tools:1"
    st, d = c.call("PUT", "/v1/secrets/REG_PULL", {"value": f"{PULL_USER}:{PULL_PASS}",
                                                    "scope": "tenant", "tenant": "team-a"})
    check(st in (200, 201), f"the pull secret is stored: {st} {d}")
    jid = c.submit(spec("private", "cat /marker", private, image_pull_secret="REG_PULL",
                        nodelist="r-1"))
    j = c.wait_job(jid, "completed", 60)
    check(bool(j), "the job pulls from the private registry with its secret and completes")
    shown = str(c.job(jid)) + str(c.events(jid)) + c.output("r-1", jid) + c.output("r-2", jid)
    check(PULL_PASS not in shown, "the secret's value is in no read of the job")
    jid = c.submit(spec("no-secret", "true", private))
    j = c.wait_job(jid, "failed", 60)
    check(bool(j) and j.get("reason") == "image_auth" and "401" in str(j.get("why")),
          f"without it the registry refuses: image_auth: {j and (j.get('reason'), j.get('why'))}")
    st, d = c.call("PUT", "/v1/secrets/REG_WRONG", {"value": f"{PULL_USER}:wrong-{PULL_PASS}",
                                                     "scope": "tenant", "tenant": "team-a"})
    check(st in (200, 201), f"a wrong pull secret is stored: {st} {d}")
    jid = c.submit(spec("wrong-secret", "true", private, image_pull_secret="REG_WRONG"))
    j = c.wait_job(jid, "failed", 60)
    check(bool(j) and j.get("reason") == "image_auth" and PULL_PASS not in str(c.job(jid)),
          f"with a wrong one too: image_auth: {j and (j.get('reason'), j.get('why'))}")
    jid = c.submit(spec("no-such-tag", "true", f"127.0.0.1:{FRONT_PORT}/team/tools:nope",
                        image_pull_secret="REG_PULL"))
    j = c.wait_job(jid, "failed", 60)
    check(bool(j) and j.get("reason") == "image_not_found",
          f"a tag it does not know, with the right secret: image_not_found: "
          f"{j and j.get('reason')}")
    # the image is now on r-1: named there by its digest, without the secret,
    # it is still refused (every start asks the registry with the job's secret)
    req = urllib.request.Request(registry().base + "/v2/team/tools/manifests/1", method="HEAD")
    req.add_header("Accept", "application/vnd.oci.image.manifest.v1+json, "
                   "application/vnd.docker.distribution.manifest.v2+json, "
                   "application/vnd.oci.image.index.v1+json")
    with urllib.request.urlopen(req, timeout=10) as r:
        digest = r.headers.get("Docker-Content-Digest", "")
    check(digest.startswith("sha256:"), f"the registry names the image's digest: {digest!r}")
    pinned = f"127.0.0.1:{FRONT_PORT}/team/tools@{digest}"
    jid = c.submit(spec("by-digest", "cat /marker", pinned, nodelist="r-1"))
    j = c.wait_job(jid, ("completed", "failed"), 60)
    check(bool(j) and j.get("state") == "failed" and j.get("reason") == "image_auth",
          "another job naming the node's copy by digest, without the secret, is refused: "
          f"{j and (j.get('state'), j.get('reason'))}")
    st, d = c.call("POST", "/v1/jobs", spec("missing", "true", private,
                                            image_pull_secret="NO_SUCH"))
    check(st == 400 and "image_pull_secret" in str(d), f"an unknown secret: 400 naming it: {st}")


scenario_private_registry_with_pull_secret.needs_root = True
scenario_private_registry_with_pull_secret.needs = NEEDS


def scenario_mounts_only_what_the_tenant_allows(c):
    """images.md: `mounts` binds host folders into the image, read-only unless
    `write: true`; a folder its tenant may not mount, or may not write, is refused
    at submission (400), naming the field."""
    r = registry()
    ref = f"{r.host}/team/tools:1"
    cmd = ("cat /data/in.txt; (echo x > /data/new) 2>/dev/null && echo wrote-read-only; "
           "echo result > /out/r.txt && echo wrote-out")
    jid = c.submit(spec("mounted", cmd, ref, mounts=[{"host": HOST_RO, "path": "/data"},
                                                      {"host": HOST_RW, "path": "/out",
                                                       "write": True}]))
    j = c.wait_job(jid, "completed", 60)
    node = next((n for n in ("r-1", "r-2") if c.output(n, jid)), "r-1")
    out = c.output(node, jid)
    check(bool(j), "the job with its mounts completes")
    check("from the node's folder" in out, f"it reads the mounted folder: {out!r}")
    check("wrote-read-only" not in out and not os.path.exists(os.path.join(HOST_RO, "new")),
          f"and cannot write the read-only one: {out!r}")
    check(os.path.exists(os.path.join(HOST_RW, "r.txt")), "it wrote the read-write one")
    st, d = c.call("POST", "/v1/jobs", spec("etc", "true", ref,
                                            mounts=[{"host": "/etc", "path": "/hostetc"}]))
    check(st == 400 and "mounts[0].host" in str(d), f"a folder not allowed: 400 naming it: {st} {d}")
    st, d = c.call("POST", "/v1/jobs", spec("rw", "true", ref, mounts=[
        {"host": HOST_RO, "path": "/data", "write": True}]))
    check(st == 400 and "mounts[0].host" in str(d), f"writing a read-only one: 400: {st} {d}")
    st, d = c.call("POST", "/v1/jobs", spec("proc", "true", ref, mounts=[
        {"host": HOST_RO, "path": "/proc/x"}]))
    check(st == 400 and "mounts[0].path" in str(d), f"into /proc: 400 naming it: {st} {d}")


scenario_mounts_only_what_the_tenant_allows.needs_root = True
scenario_mounts_only_what_the_tenant_allows.needs = NEEDS


def scenario_a_mount_through_a_link_is_refused(c):
    """images.md: a mount whose host path holds a symbolic link is refused by the
    node's agent: the task fails, naming the mount and the link."""
    r = registry()
    link = os.path.join(HOST_RW, f"to-root-{os.getpid()}")
    os.symlink("/", link)  # what any user may do in a folder its tenant may mount
    try:
        jid = c.submit(spec("via-link", "cat /hostetc/hostname && echo read-the-node",
                            f"{r.host}/team/tools:1",
                            mounts=[{"host": f"{link}/etc", "path": "/hostetc"}]))
        j = c.wait_job(jid, ("failed", "completed"), 60)
        if not j:
            return
        why = j.get("why") or ""
        out = "".join(c.output(n, jid) for n in ("r-1", "r-2"))
        check(j.get("state") == "failed" and "mounts[0].host" in why and
              "is a symbolic link" in why and os.path.basename(link) in why,
              f"it fails naming the mount and the link: {j.get('state')} {why!r}")
        check("read-the-node" not in out, f"nothing of the node's /etc was read: {out!r}")
    finally:
        os.unlink(link)


scenario_a_mount_through_a_link_is_refused.needs_root = True
scenario_a_mount_through_a_link_is_refused.needs = NEEDS


def _digest(r, repo_tag):
    """The manifest digest the registry serves for repo_tag."""
    import subprocess
    out = subprocess.run(["skopeo", "inspect", "--tls-verify=false", "--raw",
                          f"docker://{r.host}/{repo_tag}"], check=True, capture_output=True).stdout
    import hashlib
    return "sha256:" + hashlib.sha256(out).hexdigest()


def scenario_data_images_mounted_read_only(c):
    """images.md: `data` names read-only files by digest; a container task sees each at its
    `path`, a bare task reads the node's copy, and `TESSERA_DATA_<i>` names where either way;
    nothing of them can be written."""
    r = registry()
    if "data" not in _reg:
        r.push_busybox("models/w:1", "weights image", {"/weights/w.bin": "W-0123\n"})
        _reg["data"] = f"{r.host}/models/w@{_digest(r, 'models/w:1')}"
    data = [{"ref": _reg["data"], "path": "/models/w"}]
    cmd = ("cat /models/w/weights/w.bin; echo env=$TESSERA_DATA_0; "
           "(echo x > /models/w/new) 2>/dev/null && echo wrote-data; echo done")
    jid = c.submit(spec("with-data", cmd, f"{r.host}/team/tools:1", data=data))
    j = c.wait_job(jid, "completed", 90)
    node = next((n for n in ("r-1", "r-2") if c.output(n, jid)), "r-1")
    out = c.output(node, jid)
    check(bool(j), f"the container job with data completes: {j and j.get('why')}")
    check("W-0123" in out and "env=/models/w" in out, f"it reads its data at its path: {out!r}")
    check("wrote-data" not in out and "done" in out, f"and cannot write it: {out!r}")
    # a bare task: the node's read-only copy, named by the same variable
    bare = {"tenant": "team-a", "name": "bare-data", "tier": "guaranteed", "data": data,
            "command": ["/bin/sh", "-c", 'cat "$TESSERA_DATA_0/weights/w.bin"; '
                        'touch "$TESSERA_DATA_0/x" 2>/dev/null && echo wrote-data; echo done'],
            "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 1000, "memory_mib": 1024}],
            "time_limit": "5m"}
    jid = c.submit(bare)
    j = c.wait_job(jid, "completed", 90)
    node = next((n for n in ("r-1", "r-2") if c.output(n, jid)), "r-1")
    out = c.output(node, jid)
    check(bool(j) and "W-0123" in out and "wrote-data" not in out and "done" in out,
          f"a bare task reads the node's read-only copy: {j and j.get('state')} {out!r}")
    # an unknown digest fails the job as an unknown image does
    gone = f"{r.host}/models/w@sha256:" + "0" * 64
    jid = c.submit(spec("no-data", "true", f"{r.host}/team/tools:1",
                        data=[{"ref": gone, "path": "/m"}]))
    j = c.wait_job(jid, "failed", 90)
    check(bool(j) and j.get("reason") == "image_not_found" and "data[0]" in str(j.get("why")),
          f"an unknown data digest: image_not_found naming data[0]: {j and j.get('why')}")


scenario_data_images_mounted_read_only.needs_root = True
scenario_data_images_mounted_read_only.needs = NEEDS


def scenario_data_spec_checked_at_submission(c):
    """images.md: A `data` entry whose `ref` is not pinned by digest, whose `path` is not a clean absolute path outside `/proc`, `/sys` and `/dev`, or whose registry its tenant may not use is refused at submission (400), naming the field."""
    ref = f"127.0.0.1:{PORT}/team/tools:1"
    pinned = f"127.0.0.1:{PORT}/models/w@sha256:" + "a" * 64
    cases = [([{"ref": ref, "path": "/m"}], "team-a", "data[0].ref", "digest"),
             ([{"ref": pinned, "path": "/proc/m"}], "team-a", "data[0].path", "/proc"),
             ([{"ref": pinned, "path": "m/../x"}], "team-a", "data[0].path", "absolute"),
             ([{"ref": pinned, "path": "/m"}, {"ref": pinned, "path": "/m"}], "team-a",
              "data[1].path", "twice"),
             ([{"ref": pinned}], "team-a", "data[0].path", "required"),
             ([{"ref": pinned, "path": "/m"}], "team-b", "data[0].ref", "registry.example.com")]
    for data, tenant, field, why in cases:
        st, d = c.call("POST", "/v1/jobs", spec("bad-data", "true", ref, tenant=tenant, data=data))
        check(st == 400 and field in str(d) and why in str(d),
              f"{data} for {tenant}: 400 naming {field} ({why}): {st} {d}")


def scenario_user_inside_the_image(c):
    """images.md: `user` runs a container task as the image's own `User` (`user: image`) or as the numbers given (`user: "uid[:gid]"`), within its tenant's rules; a value that is neither is refused at submission (400), naming the field."""
    r = registry()
    if "user" not in _reg:
        import subprocess
        layout = r.build("team-user-1", "an image with its User")
        subprocess.run(["umoci", "config", "--image", f"{layout}:team-user-1", "--config.user",
                        "4321:4322"], check=True, capture_output=True)
        _reg["user"] = r.push(layout, "team-user-1", "team/user:1")
    cmd = "echo uid=$(id -u) gid=$(id -g)"
    jid = c.submit(spec("as-numbers", cmd, f"{r.host}/team/tools:1", user="4242:4243"))
    j = c.wait_job(jid, "completed", 90)
    node = next((n for n in ("r-1", "r-2") if c.output(n, jid)), "r-1")
    out = c.output(node, jid)
    check(bool(j) and "uid=4242 gid=4243" in out, f"user: 4242:4243 runs as those: {out!r}")
    jid = c.submit(spec("as-image", cmd, _reg["user"], user="image"))
    j = c.wait_job(jid, "completed", 90)
    node = next((n for n in ("r-1", "r-2") if c.output(n, jid)), "r-1")
    out = c.output(node, jid)
    check(bool(j) and "uid=4321 gid=4322" in out, f"user: image runs as the image's User: {out!r}")
    st, d = c.call("POST", "/v1/jobs", spec("bad-user", "true", f"{r.host}/team/tools:1",
                                            user="alice"))
    check(st == 400 and "user" in str(d) and "uid[:gid]" in str(d),
          f"a name: 400 naming user: {st} {d}")
    bare = spec("bare-user", "true", f"{r.host}/team/tools:1", user="4242")
    del bare["image"]
    st, d = c.call("POST", "/v1/jobs", bare)
    check(st == 400 and "user" in str(d) and "only with an image" in str(d),
          f"without an image: 400 naming user: {st} {d}")


scenario_user_inside_the_image.needs_root = True
scenario_user_inside_the_image.needs = NEEDS


def scenario_output_note_of_a_container_user(c):
    """agent-tasks.md: a task whose output goes elsewhere names those files in
    `$TESSERA_OUTPUT_NOTE`; the agent reads them as the task's user's files
    only: in a container run as other numbers (`user: "uid:gid"`), the
    user its processes are, whose note and files the agent then reads."""
    r = registry()
    cmd = ('d=$(dirname "$TESSERA_OUTPUT_NOTE"); echo "$d/mine.log" > "$TESSERA_OUTPUT_NOTE"; '
           'exec > "$d/mine.log" 2>&1; echo "uid=$(id -u) Traceback: elsewhere"; exit 4')
    jid = c.submit(spec("note-as-numbers", cmd, f"{r.host}/team/tools:1", user="4242:4243"))
    j = c.wait_job(jid, "failed", 90)
    if not j:
        return
    check(j.get("exit_code") == 4, f"its exit code is the command's: {j.get('exit_code')}")
    check("uid=4242 Traceback: elsewhere" in (j.get("why") or ""),
          f"why quotes the last line of the file its note names: {j.get('why')!r}")


scenario_output_note_of_a_container_user.needs_root = True
scenario_output_note_of_a_container_user.needs = NEEDS


def scenario_output_note_names_the_containers_files(c):
    """agent-tasks.md: a container task's note names files as the container
    sees them: the agent reads them in the container's root or the bind that
    holds them, never the node's file of that name, and follows no link on
    the way."""
    r = registry()
    host = tempfile.mkdtemp(prefix="tessera-host-note-")
    atexit.register(lambda: shutil.rmtree(host, ignore_errors=True))
    with open(os.path.join(host, "x.log"), "w") as f:
        f.write("HOST-ONLY secret of the node\n")
    # root in the container (its tenant allows it): the node's file is root's too
    cmd = (f'mkdir -p {host} && echo "inside the container" > {host}/x.log && '
           f'echo "{host}/x.log" > "$TESSERA_OUTPUT_NOTE"; exit 3')
    jid = c.submit(spec("note-in-root", cmd, f"{r.host}/team/tools:1", user="0:0"))
    j = c.wait_job(jid, "failed", 90)
    why = (j or {}).get("why") or ""
    check(bool(j) and "inside the container" in why and "HOST-ONLY" not in why,
          f"the container's {host}/x.log is read, not the node's: {why!r}")
    # a link it made on the way (its / under another name) is not followed
    cmd = (f'ln -s / /up && echo "/up{host}/x.log" > "$TESSERA_OUTPUT_NOTE"; exit 3')
    jid = c.submit(spec("note-through-link", cmd, f"{r.host}/team/tools:1", user="0:0"))
    j = c.wait_job(jid, "failed", 90)
    why = (j or {}).get("why") or ""
    check(bool(j) and "HOST-ONLY" not in why and "code 3" in why,
          f"a name through a link is not read: {why!r}")
    # nor one that climbs out of its root
    cmd = (f'echo "/../../../..{host}/../{os.path.basename(host)}/x.log" > '
           f'"$TESSERA_OUTPUT_NOTE"; exit 3')
    jid = c.submit(spec("note-climbing-out", cmd, f"{r.host}/team/tools:1", user="0:0"))
    j = c.wait_job(jid, "failed", 90)
    why = (j or {}).get("why") or ""
    check(bool(j) and "HOST-ONLY" not in why and "code 3" in why,
          f"a name climbing out of its root is not read: {why!r}")


scenario_output_note_names_the_containers_files.needs_root = True
scenario_output_note_names_the_containers_files.needs = NEEDS


def scenario_a_registry_cannot_send_a_pull_to_the_nodes_own_services(c):
    """images.md: a pull connects to no loopback, link-local, unspecified or
    multicast address beyond the registries the agent was told of: a
    registry that redirects its manifest, or names a token service, on the
    node's own host fails the job saying so, and nothing there is called."""
    import http.server
    import threading
    hits = []

    class Sink(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            hits.append(self.path)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

    sink = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    target = f"http://127.0.0.2:{sink.server_address[1]}"

    class Front(http.server.BaseHTTPRequestHandler):
        """A tenant's registry: redirects manifests to the node's own host,
        and asks for a token from a service there for the other repository."""
        def log_message(self, *a):
            pass

        def do_GET(self):
            if "/token-repo/" in self.path:
                self.send_response(401)
                self.send_header("WWW-Authenticate",
                                 f'Bearer realm="{target}/token",service="s"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(302)
            self.send_header("Location", f"{target}/latest/meta-data{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

    front = http.server.ThreadingHTTPServer(("127.0.0.1", REDIR_PORT), Front)
    threading.Thread(target=front.serve_forever, daemon=True).start()
    try:
        for repo in ("redirect-repo", "token-repo"):
            jid = c.submit(spec(f"ssrf-{repo}", "true", f"127.0.0.1:{REDIR_PORT}/{repo}:1"))
            j = c.wait_job(jid, "failed", 90)
            why = (j or {}).get("why") or ""
            check(bool(j) and "127.0.0.2 is a loopback address" in why and
                  "--registry-allow" in why,
                  f"{repo}: the pull fails naming the refused address: {why!r}")
        check(not hits, f"nothing on the node's own host was called: {hits}")
    finally:
        front.shutdown()
        sink.shutdown()


scenario_a_registry_cannot_send_a_pull_to_the_nodes_own_services.needs_root = True
scenario_a_registry_cannot_send_a_pull_to_the_nodes_own_services.needs = NEEDS


def scenario_container_sees_no_agent_logs(c):
    """images.md: a container gets the task's own folder (its checkpoint
    acknowledgement), never the agent's log folder: its root does not see
    the node's logs and records, and a user of the image's own numbers
    writes its acknowledgement (agent-tasks.md); the folder goes with the
    task."""
    r = registry()
    logs = c.path("r-1", "logs")
    cmd = (f"ls {logs} && echo SEES-LOGS; ln -s /etc/passwd {logs}/j999-r0.out; "
           "id -u; echo mine=$TESSERA_CHECKPOINT_DONE")
    jid = c.submit(spec("no-logs", cmd, f"{r.host}/team/tools:1", nodelist="r-1"))
    j = c.wait_job(jid, "completed", 90)
    out = c.output("r-1", jid)
    check(bool(j) and "0\n" in out, f"the job runs as root in its image: {out!r}")
    check("SEES-LOGS" not in out and ".task" not in out and ".out" not in out,
          f"it does not see the agent's log folder: {out!r}")
    check(not os.path.lexists(os.path.join(logs, "j999-r0.out")),
          "nor plants a link in it")
    mine = c.path("r-1", "tasks", f"j{jid}-r0")
    check(f"mine={mine}/ckpt-done" in out, f"its acknowledgement is in its own folder: {out!r}")
    check(c.wait(lambda: not os.path.exists(mine), "its folder goes with the task", 10),
          f"{mine} removed")
    cmd = 'touch "$TESSERA_CHECKPOINT_DONE" && echo ACK-WRITTEN; id -u'
    jid = c.submit(spec("ack-as-4242", cmd, f"{r.host}/team/tools:1", user="4242:4243",
                        nodelist="r-1"))
    j = c.wait_job(jid, "completed", 90)
    out = c.output("r-1", jid)
    check(bool(j) and "ACK-WRITTEN" in out and "4242" in out,
          f"uid 4242 in its image writes its acknowledgement: {out!r}")


scenario_container_sees_no_agent_logs.needs_root = True
scenario_container_sees_no_agent_logs.needs = NEEDS


def scenario_container_sees_no_other_tasks_files(c):
    """agent-tasks.md, images.md: a container's step file, shim mark and
    output note are in the task's own folder, the one agent folder it gets;
    no folder shared by the node's tasks is bound into it: its root (which
    ignores a sticky bit) neither lists nor reaches another task's files."""
    r = registry()
    ref = f"{r.host}/team/tools:1"
    other = c.submit(spec("holds-files", "sleep 30", ref, nodelist="r-1"))
    if not c.wait_job(other, "running", 90):
        return
    steps, tasks = c.path("r-1", "steps"), c.path("r-1", "tasks")
    cmd = (f"ls -a {steps} && echo SEES-STEPS; echo tasks: $(ls {tasks}); "
           f"ls {tasks}/j{other}-r0 && echo SEES-ITS-FOLDER; id -u; "
           "echo step=$TESSERA_STEP_FILE note=$TESSERA_OUTPUT_NOTE; "
           "echo 0.5 >> $TESSERA_STEP_FILE && echo step-written")
    jid = c.submit(spec("sees-own-files", cmd, ref, nodelist="r-1"))
    j = c.wait_job(jid, "completed", 90)
    out = c.output("r-1", jid)
    mine = os.path.join(tasks, f"j{jid}-r0")
    check(bool(j) and "0\n" in out, f"the job runs as root in its image: {out!r}")
    check("SEES-STEPS" not in out and f"tasks: j{jid}-r0\n" in out and
          "SEES-ITS-FOLDER" not in out and f"j{other}-r0" not in out,
          f"it sees no other task's files, nor a folder of them (its own folder only): {out!r}")
    check(f"step={mine}/step-times note={mine}/output-note" in out and "step-written" in out,
          f"its step file and output note are in its own folder, and it writes there: {out!r}")
    c.call("POST", f"/v1/jobs/{other}/cancel")
    c.wait_job(other, "cancelled", 30)


scenario_container_sees_no_other_tasks_files.needs_root = True
scenario_container_sees_no_other_tasks_files.needs = NEEDS


def scenario_registry_down_job_waits_image_pull(c):
    """images.md: a job whose registry is down or slow is not failed: it waits,
    its reason `image_pull`, while the pull is tried again."""
    registry()
    jid = c.submit(spec("late", "cat /marker; sleep 15", f"127.0.0.1:{LATE_PORT}/team/late:1"))
    j = c.wait(lambda: (c.job(jid).get("reason") == "image_pull") and c.job(jid),
               "the job shows reason image_pull while its registry is down", 30)
    if not j:
        return
    check(j.get("state") == "running" and "image_pull" in j,
          f"started, its image coming: {j.get('state')} {j.get('image_pull')}")
    note = c.wait(lambda: (c.job(jid).get("image_pull") or {}).get("note"),
                  "its image_pull says why the last try failed", 20)
    check(bool(note) and str(LATE_PORT) in note, f"the note names the registry: {note!r}")
    r = c.cli("show", str(jid))
    check("Image pull:" in r.stdout and "last try: registry" in r.stdout,
          f"tessera show says it: {r.stdout[-400:]!r}")
    # the registry comes back with the image in it (pushed first: a registry
    # that came up empty would answer the next try's pull 404, not found)
    registry().push_busybox("team/late:1", "the registry came back")
    late = StallFront(registry().base, LATE_PORT, hold=False)
    atexit.register(late.stop)
    # running in its image: its pull is over, and so is the reason image_pull
    node = c.wait(lambda: next((n for n in ("r-1", "r-2") if c.output(n, jid)), None),
                  "the job runs in its image", 60)
    done = c.wait(lambda: (lambda j: j.get("state") == "running" and
                           j.get("reason") != "image_pull" and "image_pull" not in j)(c.job(jid)),
                  "its agent's next report ends the pull shown", 10)
    j = c.job(jid)
    check(node and done, f"while it runs, no pull shown: {j.get('state')} {j.get('reason')} "
          f"{j.get('image_pull')}")
    j = c.wait_job(jid, "completed", 60)
    check(bool(j), "once the registry is back the job runs and completes, never failed")
    node = next((n for n in ("r-1", "r-2") if c.output(n, jid)), "r-1")
    check("the registry came back" in c.output(node, jid), "in its image")
    check("image_pull" not in c.job(jid), "and no longer shows a pull")


scenario_registry_down_job_waits_image_pull.needs_root = True
scenario_registry_down_job_waits_image_pull.needs = NEEDS


def scenario_cancel_while_its_image_is_pulled(c):
    """images.md: a job cancelled while its image is still coming ends
    `cancelled` promptly: the pull is abandoned (its registry holding the
    layers), or its result ignored when it lands as the cancel does, or the
    task started by then is stopped; nothing of it waits on the registry."""
    r = registry()
    front = StallFront(r.base, STALL_PORT)
    atexit.register(front.stop)
    # images no node has yet (a pulled one is in the node's store for good)
    tag = os.urandom(4).hex()
    for k in range(3):
        r.push_busybox(f"team/stall-{tag}:{k}", f"stalled {k}")
    ref = [f"127.0.0.1:{STALL_PORT}/team/stall-{tag}:{k}" for k in range(3)]
    # 1: its layers held by the registry, then cancelled
    jid = c.submit(spec("stalled", "sleep 300", ref[0]))
    c.wait(lambda: front.held > 0 and c.job(jid).get("reason") == "image_pull",
           "the pull waits on its held layers, the job's reason image_pull", 30)
    c.call("POST", f"/v1/jobs/{jid}/cancel")
    j = c.wait_job(jid, "cancelled", 20, "cancelled while its layers are held: cancelled")
    check(bool(j) and front.held > 0, "ended while the registry still held its pull")
    ev = json.dumps(c.events(jid))
    check("launch-error" not in ev and "every rank stopped" in ev,
          f"its rank stopped, never failed to start: {ev[-300:]}")
    # 2: the layers let go just as the cancel lands: the pull's result is ignored
    front.go.clear()
    jid = c.submit(spec("stalled-2", "sleep 300", ref[1]))
    c.wait(lambda: front.held > 0 and c.job(jid).get("reason") == "image_pull",
           "the second pull waits on its held layers", 30)
    c.call("POST", f"/v1/jobs/{jid}/cancel")
    front.release()
    c.wait_job(jid, "cancelled", 20, "cancelled as its pull ends: cancelled")
    # 3: the pull ends just before the cancel (between the pull and the launch)
    jid = c.submit(spec("stalled-3", "sleep 300", ref[2]))
    c.wait(lambda: c.job(jid).get("state") == "running", "the third job starts", 30)
    c.call("POST", f"/v1/jobs/{jid}/cancel")
    c.wait_job(jid, "cancelled", 20, "cancelled once its image came: cancelled")
    # and the node takes the next job as before
    jid = c.submit(spec("after", "cat /marker", ref[2]))
    check(bool(c.wait_job(jid, "completed", 60)), "the node runs the next image job")


scenario_cancel_while_its_image_is_pulled.needs_root = True
scenario_cancel_while_its_image_is_pulled.needs = NEEDS


def scenario_cancel_before_its_agent_saw_the_job(c):
    """agent-protocol.md: a job cancelled after it was placed but before its
    agent heard of it (the agent was away: restarted, or its sync was in
    flight) ends `cancelled` once the agent is back: the agent reports a stop
    of a task it never had as stopped, nothing having run."""
    import signal
    r = registry()
    away = [(i, n) for i, n in enumerate(c.nodes) if n.agent]  # every node's
    for _, n in away:
        c.procs[n.name].send_signal(signal.SIGKILL)
        c.procs[n.name].wait()
    jids = [c.submit(spec("unseen", "sleep 300", f"{r.host}/team/tools:1")),
            c.submit({"tenant": "team-a", "name": "unseen-plain", "tier": "guaranteed",
                      "command": ["/bin/sleep", "300"],
                      "tasks": [{"count": 1, "gpus": 1, "cpu_milli": 1000,
                                 "memory_mib": 1024}]})]
    placed = c.wait(lambda: all(c.job(j).get("state") == "running" for j in jids),
                    "both jobs are placed while their agents are away", 5)
    for j in jids:
        c.call("POST", f"/v1/jobs/{j}/cancel")
    check(all(c.job(j).get("state") == "stopping" for j in jids) or not placed,
          f"cancelled, they wait for their ranks: {[c.job(j).get('state') for j in jids]}")
    fakes = os.path.dirname(c.bins["nvml"])
    for _, n in away:  # as Cluster.start_agent, with the token and GPUs they had
        c._spawn(n.name, [c.bins["agent"], "--server", c.url, "--node", n.name,
                          "--token-file", c.path(n.name + ".token"),
                          "--state-dir", c.path(n.name), "--nvml", c.bins["nvml"]]
                 + [a.replace("{fakes}", fakes) for a in n.args],
                 dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=c.path(n.name + "-gpus.json")))
    for j in jids:
        c.wait_job(j, "cancelled", 20, f"job {j}, cancelled before its agent saw it, ends "
                   "cancelled once the agent is back")


scenario_cancel_before_its_agent_saw_the_job.needs_root = True
scenario_cancel_before_its_agent_saw_the_job.needs = NEEDS
