"""cluster.py - a live Tessera cluster for end-to-end tests: a real tesserad
and one real tessera-agent per node on loopback, each agent over the fake
NVML (tests/fakes) with its own fixture, running real processes (as root
where the test runs as root, so with cgroups where the host has them).

    c = Cluster(bins, nodes=[Node("r-1", leaf="l1"), ...], tenants=..., config=...)
    c.start()
    jid = c.submit({"tenant": "team-a", ...})
    c.wait_job(jid, "completed")
    c.stop()

bins is a dict with tesserad, agent, cli (the tessera CLI), nvml (the fake
libnvidia-ml.so.1) and fixtures (tests/fakes). Every wait is bounded; a
failed expectation is a harness.check failure, so one scenario's failure
does not hide the next one's.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

from harness import (ADMIN_IDENTITY, check, free_port, http_call, stop_all, unmount_under,  # noqa: E501
                     wait_ready, with_root)

TERMINAL = ("completed", "failed", "cancelled", "timeout")

H100 = {"gpu_model": "H100-80GB", "gpus": 8, "cpu_milli": 64000, "memory_mib": 524288}
H100_SHARED = dict(H100, gpu_mode="shared")
A100_MIG = {"gpu_model": "A100-40GB", "gpus": 8, "cpu_milli": 64000, "memory_mib": 262144,
            "gpu_mode": "mig"}


def alive(pid):
    """Whether process pid runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return open(f"/proc/{pid}/stat").read().split(")")[1].split()[0] != "Z"
    except OSError:
        return False


def pid_of(c, jid, rank=0):
    """The pid a rank printed first ("pid=N"), read from its agent's log."""
    def find():
        for n in c.nodes:
            out = c.output(n.name, jid, rank)
            if out.startswith("pid="):
                return int(out.split()[0][4:])
        return None
    return c.wait(find, f"job {jid} rank {rank} prints its pid", 20)


class Node:
    """One node of the cluster file and its agent: cls names a node class
    (h8: 8 H100s, mig8: 8 A100-40GB in MIG mode, or one given in
    Cluster(classes=...)); fixture is the fake NVML's file (tests/fakes) and
    fix(fixture_dict) may change it before the agent reads it; args are
    extra agent arguments ("{fakes}" in one reads as the folder of the fake
    NVML, where the fake MPS control daemon is); agent=False leaves the node
    without an agent."""

    def __init__(self, name, leaf="l1", cls="h8", fixture="h100x8.json", fix=None,
                 args=(), agent=True, spine=None, extra="", server=None):
        self.name, self.leaf, self.cls, self.fixture = name, leaf, cls, fixture
        self.fix, self.args, self.agent, self.spine, self.extra = fix, list(args), agent, spine, extra
        self.server = server  # the controller URL its agent is given (default: the cluster's)


DEFAULT_TENANTS = """tenants:
  org:
    guaranteed: {gpu: {H100-80GB: 32}}
    teams:
      team-a: {guaranteed: {gpu: {H100-80GB: 16}}}
      team-b: {guaranteed: {gpu: {H100-80GB: 16}}}
"""

DEFAULT_CONFIG = "scheduler: {interval: 0.2s, min_runtime: 1s, reclaim_min_runtime: 0s, grace: 3s, backoff: 1s}\n"


class Cluster:
    def __init__(self, bins, nodes=None, tenants=DEFAULT_TENANTS, config=DEFAULT_CONFIG,
                 classes=None, name="cluster", port=None):
        self.bins = bins
        self.nodes = nodes if nodes is not None else [
            Node("r-1", "l1"), Node("r-2", "l1"), Node("r-3", "l2"), Node("r-4", "l2")]
        self.classes = dict({"h8": H100, "h8shared": H100_SHARED, "mig8": A100_MIG},
                            **(classes or {}))
        self.tenants, self.config = tenants, config
        self.tmp = tempfile.mkdtemp(prefix=f"tessera-{name}-")
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.procs = {}
        self.admin = None
        self.logs = []

    # ---- set-up -----------------------------------------------------------

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)

    def _cluster_yaml(self):
        levels = "[spine, leaf, node, gpu]" if any(n.spine for n in self.nodes) else \
            "[leaf, node, gpu]"
        out = [f"topology:\n  levels: {levels}\nnode_classes:\n"]
        for k, v in self.classes.items():
            out.append(f"  {k}: {json.dumps(v)}\n")
        out.append("nodes:\n")
        for n in self.nodes:
            topo = f"leaf: {n.leaf}" + (f", spine: {n.spine}" if n.spine else "")
            out.append(f"  - {{name: {n.name}, class: {n.cls}, topology: {{{topo}}}{n.extra}}}\n")
        return "".join(out)

    def start(self):
        self.write("cluster.yaml", self._cluster_yaml())
        # tasks run as their submitter's mapped Unix user: the admin token is
        # mapped to whoever runs the tests (root in CI, where the tenants
        # then allow root); docs/agent-tasks.md "User"
        self.write("tenants.yaml", with_root(self.tenants))
        self.write("tesserad.yaml", f"listen: 127.0.0.1:{self.port}\ncluster: cluster.yaml\n"
                   "tenants: tenants.yaml\nstate_dir: state\nnode_lost_after: 10s\n"
                   "limits: {requests_per_s: 100000, burst: 100000}\n" + ADMIN_IDENTITY +
                   self.config)
        self._spawn("tesserad", [self.bins["tesserad"], "--config", self.path("tesserad.yaml")])
        if not wait_ready(self.url, 30):
            check(False, "tesserad answers /readyz")
            return False
        self.admin = open(self.path("state", "admin.token")).read().strip()
        for i, n in enumerate(self.nodes):
            if n.agent:
                self.start_agent(n, i)
        want = [n.name for n in self.nodes if n.agent]
        return self.wait(lambda: all(self.node(x).get("state") == "up" for x in want),
                         f"the agents of {', '.join(want)} register and their nodes come up", 30)

    def start_agent(self, n, i):
        st, d = self.call("POST", "/v1/tokens", {"name": n.name, "role": "node"})
        if st != 201:
            check(False, f"a node token for {n.name}: {st} {d}")
            return
        self.write(n.name + ".token", d["token"]["secret"] + "\n")
        fx = json.load(open(os.path.join(self.bins["fixtures"], n.fixture)))
        for g in fx["gpus"]:  # UUIDs distinct per node
            g["uuid"] = g["uuid"][:-2] + f"{i + 1:02d}"
        if n.fix:
            n.fix(fx)
        self.write(n.name + "-gpus.json", json.dumps(fx))
        env = dict(os.environ, TESSERA_FAKE_NVML_FIXTURE=self.path(n.name + "-gpus.json"))
        fakes = os.path.dirname(self.bins["nvml"])  # the fake MPS control is beside it
        self._spawn(n.name, [self.bins["agent"], "--server", n.server or self.url, "--node", n.name,
                             "--token-file", self.path(n.name + ".token"),
                             "--state-dir", self.path(n.name), "--nvml", self.bins["nvml"]]
                    + [a.replace("{fakes}", fakes) for a in n.args], env)

    def _spawn(self, name, args, env=None):
        log = name + ".log"
        if log not in self.logs:
            self.logs.append(log)
        self.procs[name] = subprocess.Popen(args, stdout=subprocess.DEVNULL,
                                            stderr=open(self.path(log), "a"), env=env)

    def stop(self):
        stop_all(list(self.procs.values()))

    def cleanup(self):
        unmount_under(self.tmp)
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- the API ----------------------------------------------------------

    def call(self, method, path, body=None, token=None):
        """(status, answer) of one API call, as admin unless token is given."""
        return http_call(self.url, method, path, token or self.admin, body)

    def token(self, name, role, tenant=None, **extra):
        """A new token's secret (POST /v1/tokens as admin); extra fields go
        into the request as they are."""
        body = dict({"name": name, "role": role}, **extra)
        if tenant:
            body["tenant"] = tenant
        st, d = self.call("POST", "/v1/tokens", body)
        check(st == 201, f"token {name} ({role}) is made: {st} {d if st != 201 else ''}")
        return d["token"]["secret"] if st == 201 else None

    def cli(self, *args, token=None, stdin=None, env=None, timeout=60):
        """The tessera CLI against this cluster: CompletedProcess, text."""
        e = dict(os.environ, TESSERA_URL=self.url, TESSERA_TOKEN=token or self.admin,
                 HOME=self.tmp, XDG_CONFIG_HOME=self.path("xdg"))
        e.update(env or {})
        return subprocess.run([self.bins["cli"], *args], input=stdin, env=e, text=True,
                              capture_output=True, timeout=timeout)

    def submit(self, spec, token=None, expect=201):
        """The first job id of a submission (POST /v1/jobs); None, and a
        failed check, when the answer is not expect."""
        st, d = self.call("POST", "/v1/jobs", spec, token)
        check(st == expect, f"submission of {spec.get('name')} answers {expect}: {st} "
              f"{d if st != expect else ''}")
        return d["jobs"][0]["id"] if st == 201 and expect == 201 else d

    def job(self, jid, token=None):
        st, d = self.call("GET", f"/v1/jobs/{jid}", None, token)
        return d.get("job", {}) if st == 200 and isinstance(d, dict) else {}

    def node(self, name):
        st, d = self.call("GET", f"/v1/nodes/{name}")
        return d.get("node", {}) if st == 200 and isinstance(d, dict) else {}

    def events(self, jid, token=None):
        st, d = self.call("GET", f"/v1/jobs/{jid}/events", None, token)
        return d.get("events", []) if st == 200 and isinstance(d, dict) else []

    def wait(self, pred, what, timeout=30.0, step=0.2):
        """pred's first true value within timeout seconds; else a failed check
        and None."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                v = pred()
            except (KeyError, TypeError, IndexError):
                v = None
            if v:
                return v
            time.sleep(step)
        check(False, what + f" (not within {timeout:g} s)")
        return None

    def wait_job(self, jid, states, timeout=30.0, what=None):
        """The job once its state is one of states (a string or a tuple)."""
        states = (states,) if isinstance(states, str) else tuple(states)
        got = self.wait(lambda: (lambda j: j if j.get("state") in states else None)(self.job(jid)),
                        what or f"job {jid} reaches {'/'.join(states)}", timeout)
        if got is None:
            j = self.job(jid)
            print(f"  job {jid}: state={j.get('state')} reason={j.get('reason')} "
                  f"why={j.get('why')}")
            self.explain_stuck(jid, j)
        return got

    def explain_stuck(self, jid, j):
        """What a job that did not reach its state left behind: its events,
        its placement, and each placed node's agent files of it (its output,
        the keeper's record and exit files), so that a failure in CI says
        whether the task ran, ended, or was reported."""
        print(f"  events: {[(e.get('kind'), (e.get('detail') or '')[:80]) for e in self.events(jid)]}")
        st, m = self.call("GET", "/metrics")
        print("  " + " ".join(ln for ln in (m if isinstance(m, str) else "").splitlines()
                              if ln.startswith("tessera_agent_syncs_total")))
        for p in (j.get("placement") or []):
            name = p.get("node")
            nd = self.node(name)
            seen = (nd.get("health") or {}).get("last_seen")
            print(f"  on {name}: {nd.get('state')}, its agent last seen "
                  f"{time.time() - seen if seen else float('nan'):.1f} s ago")
            base = self.path(name)
            for root, _dirs, files in os.walk(base) if os.path.isdir(base) else ():
                for f in files:
                    if f"j{jid}" not in f and f"j{jid}" not in root:
                        continue
                    fp = os.path.join(root, f)
                    try:
                        head = open(fp, errors="replace").read(300).replace("\n", " | ")
                    except OSError as e:
                        head = f"({e})"
                    print(f"    {os.path.relpath(fp, base)}: {head}")

    def output(self, node, jid, rank=0, stream="out"):
        """What a rank wrote, from its agent's log folder ('' if none)."""
        p = self.path(node, "logs", f"j{jid}-r{rank}.{stream}")
        return open(p, errors="replace").read() if os.path.exists(p) else ""

    def cancel_all(self):
        """Cancels every job not yet ended and waits (bounded) until the
        cluster's GPUs are free again, so the next scenario starts clean."""
        st, d = self.call("GET", "/v1/jobs?limit=1000")
        for j in (d.get("jobs", []) if st == 200 else []):
            if j.get("state") not in TERMINAL:
                self.call("POST", f"/v1/jobs/{j['id']}/cancel")

        left = []

        def idle():
            st, d = self.call("GET", "/v1/jobs?limit=1000")
            left[:] = [j for j in (d.get("jobs", []) if st == 200 else [])
                       if j.get("state") not in TERMINAL]
            return st == 200 and not left
        if not self.wait(idle, "every job of the scenario ends after its cancel", 30):
            for j in left:
                print(f"  job {j.get('id')} {j.get('name')}: state={j.get('state')} "
                      f"reason={j.get('reason')} why={j.get('why')!r}")
