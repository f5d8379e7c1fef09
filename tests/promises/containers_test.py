"""Promises of what users bring in container images (docs/images.md), on real
agents, runc and a registry on loopback (Debian's docker-registry), images
built here with umoci and pushed with skopeo:

- real PyTorch training in an image built from the node's own python3 and
  Debian's python3-torch, preempted: the checkpoint signal reaches the
  process in the container, it saves into its job's checkpoint folder (bound
  in by the agent), and the next run in the image resumes from it to the
  same parameters, bit for bit, as an uninterrupted run;
- `srun` in a Slurm batch script that runs in an image;
- a fractional task in an image whose glibc is older than the node's
  (Debian 11's libc6 and dash, fetched with apt from Debian's archive into a
  cache): the sharing shim loads there and the task runs with its limits."""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cluster import DEFAULT_CONFIG, Node  # noqa: E402
from harness import check  # noqa: E402
from registry import busybox_registry, free_port  # noqa: E402
from term import Term  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
PORT = free_port()
PULL = ["--plain-http-registries", f"127.0.0.1:{PORT}"]
NEEDS = ("runc", "docker-registry", "umoci", "skopeo", "busybox")
TORCH_PY = "/usr/bin/python3"  # Debian's python3 with python3-torch (scripts/install-deps)
# the checkpoint root tesserad names (TESSERA_CHECKPOINT_DIR's root)
CKPT = tempfile.mkdtemp(prefix="tessera-ckpt-")
atexit.register(lambda: shutil.rmtree(CKPT, ignore_errors=True))
# the shim the agent preloads: a sanitizer build's own carries its runtime
# (which needs the node's glibc), so the plain copy built beside it
_args = [a for a in sys.argv[1:] if not a.startswith("-")]
_build = os.path.dirname(os.path.dirname(os.path.abspath(_args[4]))) if len(_args) > 4 else ""
SHIM = next((p for p in (os.path.join(_build, "libtessera_cuda_floor.so"),
                         os.path.join(_build, "libtessera-cuda.so")) if os.path.exists(p)), "")
REGISTER_S = 3
CLUSTER = {"nodes": [Node("r-1", "l1", args=PULL),
                     Node("s-1", "l1", cls="h8shared",
                          args=PULL + ["--shim", SHIM, "--shim-register", str(REGISTER_S)])],
           "tenants": """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 16}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 8}}}
      team-b: {}
""",
           "config": DEFAULT_CONFIG.replace("grace: 3s, backoff: 1s", "grace: 20s, backoff: 0s")
           + f"checkpoint_dir: {CKPT}\n"}
# Debian 11's C library (2.31, older than Debian 12's 2.36) and shell, kept
# between runs: fetched once with apt from Debian's archive
OLD_SUITE = "bullseye"
OLD_CACHE = os.path.join(os.environ.get("TESSERA_TEST_CACHE", "/var/tmp/tessera-test-cache"),
                         f"{OLD_SUITE}-debs")
OLD_PACKAGES = ("libc6", "dash")

def registry():
    return busybox_registry(PORT, "tessera-containers-")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


# ---- PyTorch in an image ------------------------------------------------------

def torch_files():
    """The host files an image needs to run tests/task/train_job.py: python3.11
    and its standard library, the packages `import torch` loads, and every
    library their programs and extension modules link."""
    probe = ("import os, sys, argparse, json, torch\n"
             "print(sys.executable, os.path.dirname(os.__file__))\n"
             "for m in list(sys.modules.values()):\n"
             "    f = getattr(m, '__file__', None) or ''\n"
             "    if f.startswith('/usr/lib/python3/dist-packages/'):\n"
             "        print('/'.join(f.split('/')[:6]))\n")
    # -s: without the user's site-packages (pip --user installs there), so
    # every module resolves from the system's folders, as inside the image
    r = run([TORCH_PY, "-s", "-c", probe], timeout=120)
    if r.returncode != 0:
        return None
    lines = r.stdout.split()
    exe = os.path.realpath(lines[0])
    trees = [lines[1]] + sorted(set(lines[2:]))
    objs = [exe]
    for t in trees:
        for d, _, fs in os.walk(t):
            objs += [os.path.join(d, f) for f in fs if ".so" in f]
    libs = set()
    for o in objs:
        out = run(["ldd", o]).stdout
        for ln in out.splitlines():
            w = ln.split()
            if "=>" in w and len(w) > 2 and w[2].startswith("/"):
                libs.add(w[2])
            elif w and w[0].startswith("/"):
                libs.add(w[0])
    return [exe] + trees + sorted(libs)


def fill_torch(files):
    def fill(root):
        lst = os.path.join(os.path.dirname(root), "files.txt")
        with open(lst, "w") as f:
            f.write("\n".join(p.lstrip("/") for p in files) + "\n")
        # -h: a library's name in the image holds its file, as the loader asks
        subprocess.run(f"tar -C / --exclude=__pycache__ -chf - --files-from={lst} 2>/dev/null "
                       f"| tar -C {root} -xf -", shell=True, check=True)
        os.makedirs(os.path.join(root, "bin"), exist_ok=True)
        shutil.copy(shutil.which("busybox"), os.path.join(root, "bin", "busybox"))
        os.symlink("busybox", os.path.join(root, "bin", "sh"))
        os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
        os.chmod(os.path.join(root, "tmp"), 0o1777)
        os.makedirs(os.path.join(root, "opt"), exist_ok=True)
        shutil.copy(os.path.join(ROOT, "tests", "task", "train_job.py"), os.path.join(root, "opt"))
        shutil.copytree(os.path.join(ROOT, "python", "tessera_task"),
                        os.path.join(root, "opt", "python", "tessera_task"),
                        ignore=shutil.ignore_patterns("__pycache__"))
    return fill


def progress(jid):
    path = os.path.join(CKPT, "team-b", str(jid), "progress-r0.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.endswith("\n")]


def steps_done(lines):
    return max([ln["step"] for ln in lines if ln["event"] == "step"], default=0)


SAME = """import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
same = a["model"].keys() == b["model"].keys() and all(
    torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
print("params", same, "losses", a["losses"] == b["losses"], len(a["losses"]), len(b["losses"]))
"""


def scenario_pytorch_preempted_in_an_image_resumes(c):
    """images.md "Checkpoints": a PyTorch job in an image, preempted mid-run by
    guaranteed work: the checkpoint signal reaches its process in the
    container, it saves into its job's checkpoint folder (TESSERA_CHECKPOINT_DIR,
    bound into the container at the same path), acknowledges, is requeued, and
    its next run in the image resumes from that checkpoint: no step computed
    twice, final parameters and loss curve bit-identical to an uninterrupted
    run of the same program."""
    files = torch_files()
    if files is None:
        check(False, f"{TORCH_PY} imports torch (Debian's python3-torch: scripts/install-deps)")
        return
    ref = registry().push_tree("team/torch:1", fill_torch(files))
    steps = 3000
    base_out = os.path.join(c.tmp, "base.pt")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TESSERA_")}
    env.update(PYTHONPATH=os.path.join(ROOT, "python"), OMP_NUM_THREADS="1",
               TESSERA_CHECKPOINT_DIR=os.path.join(c.tmp, "base-ckpt"))
    r = run([TORCH_PY, os.path.join(ROOT, "tests", "task", "train_job.py"), "--steps",
             str(steps), "--out", base_out], env=env, timeout=300)
    check(r.returncode == 0, f"the uninterrupted run on the node completes: {r.stderr[-500:]}")
    train = (f"exec /usr/bin/python3.11 /opt/train_job.py --steps {steps} --step-sleep 0.003 "
             "--out $TESSERA_CHECKPOINT_DIR/final.pt")
    jid = c.submit({"tenant": "team-b", "name": "torch-in-image", "tier": "opportunistic",
                    "image": ref, "command": ["/bin/sh", "-c", train], "nodelist": "r-1",
                    "env": {"PYTHONPATH": "/opt/python", "OMP_NUM_THREADS": "1"},
                    "tasks": [{"count": 1, "gpus": 8, "cpu_milli": 2000, "memory_mib": 4096}],
                    "time_limit": "1h", "checkpoint": {"signal": "SIGUSR1", "grace": "20s"}})
    if not c.wait(lambda: steps_done(progress(jid)) >= 300,
                  "the job trains in its image past step 300", 180):
        print("  job:", c.job(jid), c.output("r-1", jid, stream="err")[-2000:])
        return
    rid = c.submit({"tenant": "team-a", "name": "reclaim", "tier": "guaranteed",
                    "command": ["/bin/sh", "-c", "sleep 0.5"], "nodelist": "r-1",
                    "tasks": [{"count": 1, "gpus": 8, "cpu_milli": 1000, "memory_mib": 512}],
                    "time_limit": "5m"})
    j = c.wait_job(jid, ("completed", "failed"), 150)
    if not j:
        return
    check(j.get("state") == "completed", f"the job completes: {j.get('state')} {j.get('why')} "
          f"{j.get('ranks')} {c.output('r-1', jid, stream='err')[-1500:]!r}")
    check(c.job(rid).get("state") == "completed", "the guaranteed work ran")
    ev = c.events(jid)
    if j.get("state") != "completed":
        print("  events:", [(e.get("time"), e.get("kind"), e.get("detail")) for e in ev],
              "progress:", [ln for ln in progress(jid) if ln["event"] != "step"])
    check(any(e.get("kind") == "requeued" and "checkpointed" in (e.get("detail") or "")
              for e in ev), f"preempted, its checkpoint acknowledged, requeued: "
          f"{[str(e.get('kind')) + ':' + str(e.get('detail')) for e in ev]}")
    lines = progress(jid)
    starts = [ln for ln in lines if ln["event"] == "start"]
    sig = [ln for ln in lines if ln["event"] == "signal"]
    check(len(starts) == 2 and len(sig) == 1,
          f"two runs in the image, one checkpoint signal: starts={starts} signals={sig}")
    if len(starts) == 2 and len(sig) == 1:
        s = sig[0]["step"]
        check(0 < s < steps, f"the signal came mid-run, at step {s}")
        check(starts[1]["run"] == 1 and starts[1]["from"] == s and
              starts[1]["last_stop"] == "checkpointed",
              f"the second run resumes from step {s}: {starts[1]}")
        n = sum(1 for ln in lines if ln["event"] == "step")
        check(n == steps, f"no step computed twice ({n} steps for {steps})")
        print(f"  signal to saved {sig[0]['saved'] - sig[0]['at']:.2f} s, to running again "
              f"{starts[1]['t'] - sig[0]['at']:.2f} s")
    final = os.path.join(CKPT, "team-b", str(jid), "final.pt")
    cmp = run([TORCH_PY, "-c", SAME, final, base_out], timeout=120)
    check(cmp.stdout.startswith("params True losses True"),
          f"final parameters and loss curve bit-identical to the uninterrupted run: "
          f"{cmp.stdout} {cmp.stderr[-300:]}")


scenario_pytorch_preempted_in_an_image_resumes.needs_root = True
scenario_pytorch_preempted_in_an_image_resumes.needs = NEEDS


# ---- srun in an image -----------------------------------------------------------

def scenario_srun_inside_an_image(c):
    """images.md "srun in an image": a Slurm batch script that runs in an image
    (`#SBATCH --container-image=`) finds `srun` on its PATH; its steps run in
    the job's tasks, in the image, and srun exits with the step's status."""
    ref = f"{registry().host}/team/tools:1"
    path = c.path("in-image.sh")
    with open(path, "w") as f:
        f.write(f"""#!/bin/sh
#SBATCH -n 1 --gpus=1 --account=team-a --time=5 --container-image={ref}
# the test build's CLI carries AddressSanitizer, whose leak check needs ptrace
export ASAN_OPTIONS=detect_leaks=0
echo "script sees: $(cat /marker)"
srun sh -c 'echo "step $SLURM_STEP_ID sees: $(cat /marker)"'
echo "srun-rc=$?"
srun sh -c 'exit 3'
echo "failed-rc=$?"
""")
    r = c.cli("sbatch", path)
    check(r.returncode == 0, f"tessera sbatch submits it: {r.returncode} {r.stdout} {r.stderr}")
    jid = next((int(w) for w in r.stdout.split() if w.isdigit()), None)
    if jid is None:
        return
    j = c.wait_job(jid, ("completed", "failed"), 90)
    out = "".join(c.output(n.name, jid) for n in c.nodes)
    err = "".join(c.output(n.name, jid, stream="err") for n in c.nodes)
    if not j:
        print("  out:", out, "err:", err[-1500:])
        return
    check(j.get("state") == "completed", f"the job completes: {j.get('why')} {err[-1500:]!r}")
    check("script sees: inside the image" in out, f"the script runs in the image: {out!r}")
    check("step 0 sees: inside the image" in out and "srun-rc=0" in out,
          f"srun runs a step in the image and exits 0: {out!r} {err[-800:]!r}")
    check("failed-rc=3" in out, f"and exits with a failed step's status: {out!r}")


scenario_srun_inside_an_image.needs_root = True
scenario_srun_inside_an_image.needs = NEEDS


# ---- an interactive job in an image ----------------------------------------------

def scenario_interactive_run_in_an_image_has_a_terminal(c):
    """interactive.md: `tessera run --image REF -- CMD` gives CMD a real
    terminal inside the container (tty names one in the container's own
    /dev/pts), a shell there shows its prompt, the window's size and its
    changes reach it, ^C stops the foreground command, and tessera exits
    with CMD's status."""
    ref = f"{registry().host}/team/tools:1"
    t = Term(c, ["run", "--tenant", "team-a", "--image", ref, "--",
                 "/bin/sh", "-i"], rows=30, cols=100)
    t.send("echo in-$(cat /marker | tr ' ' -)\n")
    check(t.expect("in-inside-the-image", 90), "the shell runs in the image")
    t.send("tty\n")
    check(t.expect("/dev/pts/0"), "tty names the container's own terminal")
    t.check_size_ctrl_c_exit("the container's terminal")


scenario_interactive_run_in_an_image_has_a_terminal.needs_root = True
scenario_interactive_run_in_an_image_has_a_terminal.needs = NEEDS


# ---- the sharing shim in an image with an older glibc --------------------------

def old_debs():
    """Debian 11's libc6 and dash as .deb files (fetched into OLD_CACHE once, with
    apt from Debian's archive on its own lists); None when the archive cannot
    be reached."""
    have = [f for f in os.listdir(OLD_CACHE)] if os.path.isdir(OLD_CACHE) else []
    if all(any(f.startswith(p + "_") for f in have) for p in OLD_PACKAGES):
        return [os.path.join(OLD_CACHE, f) for f in have if f.endswith(".deb")]
    work = tempfile.mkdtemp(prefix="tessera-apt-")
    try:
        for d in ("lists/partial", "cache/archives/partial", "etc"):
            os.makedirs(os.path.join(work, d))
        with open(os.path.join(work, "etc", "sources.list"), "w") as f:
            f.write(f"deb [signed-by=/usr/share/keyrings/debian-archive-{OLD_SUITE}-stable.gpg] "
                    f"http://deb.debian.org/debian {OLD_SUITE} main\n")
        open(os.path.join(work, "status"), "w").close()
        opts = [f"-oDir::Etc::SourceList={work}/etc/sources.list",
                "-oDir::Etc::SourceParts=/nonexistent", f"-oDir::State::Lists={work}/lists",
                f"-oDir::Cache={work}/cache", f"-oDir::State::status={work}/status",
                "-oDebug::NoLocking=1", "-oAcquire::Retries=2", "-qq"]
        r = run(["apt-get"] + opts + ["update"], timeout=240)
        if r.returncode == 0:
            r = run(["apt-get"] + opts + ["download"] + list(OLD_PACKAGES), cwd=work,
                    timeout=240)
        if r.returncode != 0:
            print(f"  (Debian's archive not reached: {r.stderr.strip()[-300:]})")
            return None
        os.makedirs(OLD_CACHE, exist_ok=True)
        for f in os.listdir(work):
            if f.endswith(".deb"):
                shutil.move(os.path.join(work, f), os.path.join(OLD_CACHE, f))
        return [os.path.join(OLD_CACHE, f) for f in os.listdir(OLD_CACHE) if f.endswith(".deb")]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fill_old(debs):
    def fill(root):
        for d in debs:
            subprocess.run(["dpkg-deb", "-x", d, root], check=True)
        os.makedirs(os.path.join(root, "tmp"), exist_ok=True)
        os.chmod(os.path.join(root, "tmp"), 0o1777)
        if not os.path.lexists(os.path.join(root, "bin", "sh")):
            os.symlink("dash", os.path.join(root, "bin", "sh"))
        # busybox's applets for what dash has no builtin for (static: it never
        # loads the shim, the shell before it does)
        shutil.copy(shutil.which("busybox"), os.path.join(root, "bin", "busybox"))
        for applet in ("sleep", "head"):
            os.symlink("busybox", os.path.join(root, "bin", applet))
    return fill


def scenario_fractional_task_in_an_old_glibc_image(c):
    """images.md "Fractional GPUs in a container": the sharing shim is built to
    load with a glibc as old as 2.17; in an image whose glibc (Debian 11's
    2.31) is older than the one it was built on, a fractional task loads it
    (its shell has it mapped, and it registers with the agent: the task is not
    stopped as `shim_not_loaded`) and runs to its end."""
    if not SHIM:
        check(False, "the build has a plain libtessera-cuda.so (libtessera_cuda_floor.so)")
        return
    debs = old_debs()
    if debs is None:
        print("  skipped: no old glibc to test with")
        return
    ref = registry().push_tree("team/oldglibc:1", fill_old(debs), env="PATH=/bin:/usr/bin")
    prog = ("/lib/x86_64-linux-gnu/libc.so.6 | head -1; "
            "while read -r l; do case $l in *tessera*) echo shim-mapped; break;; esac; "
            f"done < /proc/$$/maps; sleep {REGISTER_S * 2}; echo done")
    jid = c.submit({"tenant": "team-a", "name": "old-glibc", "tier": "guaranteed", "image": ref,
                    "command": ["/bin/sh", "-c", prog],
                    "tasks": [{"count": 1, "gpus": 1, "gpu_fraction": 0.25, "cpu_milli": 500,
                               "memory_mib": 512}], "time_limit": "5m"})
    j = c.wait_job(jid, ("completed", "failed"), 90)
    if not j:
        return
    out = c.output("s-1", jid)
    check("release version 2.31" in out, f"the image's glibc is Debian 11's 2.31: {out!r}")
    check(j.get("state") == "completed",
          f"it completes, not stopped: {j.get('state')} {j.get('reason')} {j.get('why')} "
          f"{c.output('s-1', jid, stream='err')[-600:]!r}")
    check("shim-mapped" in out and "done" in out, f"with the shim loaded in it: {out!r}")


scenario_fractional_task_in_an_old_glibc_image.needs_root = True
scenario_fractional_task_in_an_old_glibc_image.needs = NEEDS + ("apt-get", "dpkg-deb")
