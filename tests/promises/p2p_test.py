"""Promises of images shared between agents (docs/images.md "Peer-to-peer"),
on a real tesserad (the tracker) and real agents' pull code: an image with a
12 MB random layer (three pieces of 4 MiB, twelve of 1 MiB: the tracker
says its piece size) in Debian's docker-registry on loopback,
behind a front that counts the blob bytes the registry sends. Nodes fetch
pieces from each other; the registry sends each piece about once; a peer
that serves corrupt pieces is caught by the piece's hash and the piece is
fetched again; nothing unverified reaches a root filesystem. The pulls of
the first scenarios are `tessera-agent image-pull` with the agent's P2P
options (one per node, each with its node credential), so that they run side
by side without a runtime; the last ones run jobs through real agents (a gang
sharing its image, a waiting job's image fetched ahead, a job placed on the
node that holds its image)."""
import atexit
import json
import signal
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from cluster import Node  # noqa: E402
from harness import check, unmount_under  # noqa: E402
from registry import CountingFront, Registry, free_port  # noqa: E402

PORT, FRONT_PORT = free_port(), free_port()
LAYER_BYTES = 12 << 20
P2P = ["--plain-http-registries", f"127.0.0.1:{FRONT_PORT}", "--p2p-listen", "127.0.0.1:0"]
# the agents' nodes give their link (cluster-format.md): a fetch ahead takes
# half of it, 800 Mbit/s / 8 / 2 bytes/s
NET = ", network: {bandwidth_mbit: 800}"
PREFETCH_BYTES_S = 800 * 1000 * 1000 // 8 // 2
CLUSTER = {"nodes": [Node("p-1", args=P2P, extra=NET), Node("p-2", args=P2P, extra=NET),
                     Node("p-3", args=P2P, extra=NET),
                     Node("q-1", agent=False), Node("q-2", agent=False),
                     Node("q-3", agent=False)],
           "config": "scheduler: {interval: 0.2s, grace: 2s}\n"}
NEEDS = ("docker-registry", "umoci", "skopeo", "busybox")

_reg = {}


def registry():
    """The registry and its counting front, with one image of a random
    layer, made by the first scenario that needs them."""
    if "r" not in _reg:
        work = tempfile.mkdtemp(prefix="tessera-p2p-")
        r = Registry(work, PORT)
        front = CountingFront(r.base, FRONT_PORT)
        atexit.register(lambda: (front.stop(), r.stop(), shutil.rmtree(work, ignore_errors=True)))
        r.push_busybox("team/big:1", "a big image", {"/data/blob": os.urandom(LAYER_BYTES)})
        _reg.update(r=r, front=front, work=work)
    return _reg["r"], _reg["front"]


def node_token(c, name):
    path = c.path(name + ".p2p.token")
    if not os.path.exists(path):
        st, d = c.call("POST", "/v1/tokens", {"name": name, "role": "node"})
        check(st == 201, f"a node token for {name}: {st}")
        with open(path, "w") as f:
            f.write(d["token"]["secret"] + "\n")
    return path


def pull(c, node, store, ref, linger=0.0, env=None, port=None):
    """A P2P pull as node, started (a Popen whose stdout is the JSON)."""
    args = [c.bins["agent"], "image-pull", "--store", store, "--plain-http",
            "--p2p-listen", f"127.0.0.1:{port or free_port()}", "--controller", c.url,
            "--node", node,
            "--token-file", node_token(c, node), "--linger", str(linger), ref]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, **(env or {})))


def finish(p, what, timeout=120):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    ok = p.returncode == 0
    check(ok, f"{what} pulls the image: exit {p.returncode} {err.strip()[-300:]}")
    try:
        return json.loads(out.strip().splitlines()[-1]) if ok else {}
    except (ValueError, IndexError):
        check(False, f"{what} prints its JSON: {out!r}")
        return {}


def first_line(p, what):
    """The JSON a lingering pull prints once it has the image (it goes on
    serving peers after); {} when it failed."""
    line = p.stdout.readline()  # bounded: the pull's own deadline, or its exit
    try:
        out = json.loads(line)
    except ValueError:
        p.kill()
        _, err = p.communicate()
        check(False, f"{what} pulls the image: exit {p.returncode} {err.strip()[-300:]}")
        return {}
    check(True, f"{what} pulls the image")
    return out


def blob_on_disk(store, rootfs):
    with open(os.path.join(rootfs, "data", "blob"), "rb") as f:
        return f.read()


def scenario_a_gang_takes_each_piece_from_the_registry_about_once(c):
    """images.md "Peer-to-peer": the nodes of a gang fetch each piece of a
    layer from the registry about once and the rest from each other; every
    node ends with the verified image."""
    r, front = registry()
    ref = f"127.0.0.1:{FRONT_PORT}/team/big:1"
    front.reset()
    stores = [tempfile.mkdtemp(prefix="tessera-p2p-store-") for _ in range(3)]
    atexit.register(lambda: [(unmount_under(s), shutil.rmtree(s, ignore_errors=True)) for s in stores])
    # each goes on serving its peers until all three have the image
    procs = [pull(c, f"q-{i + 1}", stores[i], ref, linger=120) for i in range(3)]
    outs = [first_line(p, f"node q-{i + 1}") for i, p in enumerate(procs)]
    for p in procs:
        p.kill()
        p.communicate()
    if not all(outs):
        return
    check(len({o["digest"] for o in outs}) == 1, "every node has the same image")
    peers = sum(o["from_peers"] for o in outs)
    reg = sum(o["from_registry"] for o in outs)
    check(peers >= LAYER_BYTES, f"the nodes took pieces from each other: {peers} bytes")
    layer = max(front.per_blob.values()) if front.per_blob else 0
    check(layer <= 1.4 * LAYER_BYTES,
          f"the registry sent the layer about once, not three times: {layer} bytes for a "
          f"layer of about {LAYER_BYTES} ({reg} counted by the nodes)")
    blobs = [blob_on_disk(s, o["rootfs"]) for s, o in zip(stores, outs)]
    check(all(b == blobs[0] for b in blobs) and len(blobs[0]) == LAYER_BYTES,
          "each root filesystem holds the image's file, byte for byte")


scenario_a_gang_takes_each_piece_from_the_registry_about_once.needs = NEEDS


def scenario_b_a_peer_serving_corrupt_pieces_costs_a_refetch(c):
    """images.md "Peer-to-peer": a piece from a peer is checked against the
    hash of the piece before it is used: a peer serving corrupt pieces costs
    a refetch, never a corrupt root filesystem, and is avoided after."""
    r, front = registry()
    ref = f"127.0.0.1:{FRONT_PORT}/team/big:1"
    s1, s2 = (tempfile.mkdtemp(prefix="tessera-p2p-store-") for _ in range(2))
    atexit.register(lambda: [(unmount_under(s), shutil.rmtree(s, ignore_errors=True)) for s in (s1, s2)])
    # the liar holds the image first (its own pieces from the registry are
    # good: it lies only when it serves), and lingers to serve it
    liar = pull(c, "q-1", s1, ref, linger=20, env={"TESSERA_AGENT_P2P_FAULTS": "corrupt"})
    c.wait(lambda: liar.poll() is not None or os.path.exists(os.path.join(s1, "images")) and
           any(os.scandir(os.path.join(s1, "images"))), "the lying node holds the image", 60)
    front.reset()
    honest = finish(pull(c, "q-2", s2, ref), "a node whose only peer lies")
    liar.kill()
    liar.communicate()
    if not honest:
        return
    check(honest["refetched"] > 0, f"the corrupt pieces were caught and fetched again: "
          f"{honest['refetched']} bytes refetched")
    check(honest["from_peers"] == 0, f"nothing from the lying peer was kept: "
          f"{honest['from_peers']} bytes")
    check(blob_on_disk(s2, honest["rootfs"]) == blob_on_disk(s1, _first_rootfs(s1)),
          "the root filesystem holds the image's file, byte for byte")


def _first_rootfs(store):
    imgs = os.path.join(store, "images")
    for e in os.scandir(imgs):
        if os.path.isdir(os.path.join(e.path, "rootfs")):
            return os.path.join(e.path, "rootfs")
    return imgs


scenario_b_a_peer_serving_corrupt_pieces_costs_a_refetch.needs = NEEDS


def scenario_c_a_peer_refuses_a_caller_without_a_token(c):
    """images.md "Peer-to-peer": an agent serves its pieces only to a node
    that presents a token the tracker issued it for that blob, and each peer
    the tracker names comes with a token good at that peer only."""
    r, front = registry()
    ref = f"127.0.0.1:{FRONT_PORT}/team/big:1"
    _piece_bytes(c)  # asked as q-3 with a made-up URL: before q-3's agent tells its own
    s1 = tempfile.mkdtemp(prefix="tessera-p2p-store-")
    atexit.register(lambda: (unmount_under(s1), shutil.rmtree(s1, ignore_errors=True)))
    port = free_port()
    args = [c.bins["agent"], "image-pull", "--store", s1, "--plain-http", "--p2p-listen",
            f"127.0.0.1:{port}", "--controller", c.url, "--node", "q-3", "--token-file",
            node_token(c, "q-3"), "--linger", "60", ref]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    try:
        json.loads(line)["digest"]
    except (ValueError, KeyError):
        check(False, f"the node pulled the image: {line!r}")
        p.kill()
        p.communicate()
        return
    import urllib.request
    import urllib.error
    blob, size = _layer_digest(s1)

    def at(port_, headers):  # piece 0 of the layer at the peer on port_: its status
        req = urllib.request.Request(f"http://127.0.0.1:{port_}/p2p/v1/blobs/{blob}/0",
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status
        except urllib.error.HTTPError as e:
            return e.code

    def status(headers):
        return at(port, headers)
    check(status({}) == 403, "a caller without a token is refused (403)")
    check(status({"X-Tessera-Node": "q-1", "X-Tessera-P2P-Token": "9999999999." + "0" * 64})
          == 403, "a made-up token is refused (403)")
    # the tracker gives node q-1 a token for that blob: q-1's own announce
    st, ans = _announce(c, "q-1", blob, size)
    tok3 = ({pe.get("node"): pe.get("token") for pe in ans.get("peers", [])}.get("q-3")
            if st == 200 else None)
    check(bool(tok3), f"the tracker answers a node's announce, naming q-3 with a token: {st}")
    check(st == 200 and "token" not in ans, "the answer carries no token good at any holder")
    if tok3:
        check(status({"X-Tessera-Node": "q-1", "X-Tessera-P2P-Token": tok3}) == 200,
              "the token the tracker issued q-1 for q-3 opens the piece for q-1")
        check(status({"X-Tessera-Node": "q-2", "X-Tessera-P2P-Token": tok3}) == 403,
              "and not for another node")
        # a token for the blob at any holder (the form trackers gave before
        # holder-bound tokens), made with the key the tracker gives its nodes:
        # good nowhere, so a port held while its agent is away gets nothing
        # it could use at another holder
        if ans.get("key"):
            import hashlib
            import hmac
            exp = int(time.time()) + 600
            mac = hmac.new(bytes.fromhex(ans["key"]), f"q-1|{blob}|{exp}".encode(),
                           hashlib.sha256).hexdigest()
            check(status({"X-Tessera-Node": "q-1", "X-Tessera-P2P-Token": f"{exp}.{mac}"}) == 403,
                  "a token for the blob at any holder is refused (403)")
    # a second holder: each peer the tracker names comes with a token good at
    # that peer only, so a process holding one node's port (its agent away)
    # learns nothing it could fetch elsewhere with
    port4 = free_port()
    s4 = tempfile.mkdtemp(prefix="tessera-p2p-store-")
    atexit.register(lambda: (unmount_under(s4), shutil.rmtree(s4, ignore_errors=True)))
    p4 = subprocess.Popen([c.bins["agent"], "image-pull", "--store", s4, "--plain-http",
                           "--p2p-listen", f"127.0.0.1:{port4}", "--controller", c.url,
                           "--node", "q-2", "--token-file", node_token(c, "q-2"), "--linger",
                           "60", ref], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p4.stdout.readline()
    st, ans = _announce(c, "q-1", blob, size)
    toks = {pe.get("node"): pe.get("token") for pe in ans.get("peers", [])} if st == 200 else {}
    check(bool(toks.get("q-3")) and bool(toks.get("q-2")) and toks["q-3"] != toks["q-2"],
          f"each peer named comes with its own token: {sorted(toks)}")
    if toks.get("q-3") and toks.get("q-2"):
        check(at(port, {"X-Tessera-Node": "q-1", "X-Tessera-P2P-Token": toks["q-3"]}) == 200 and
              at(port4, {"X-Tessera-Node": "q-1", "X-Tessera-P2P-Token": toks["q-2"]}) == 200,
              "each opens the piece at its own peer")
        check(at(port4, {"X-Tessera-Node": "q-1", "X-Tessera-P2P-Token": toks["q-3"]}) == 403 and
              at(port, {"X-Tessera-Node": "q-1", "X-Tessera-P2P-Token": toks["q-2"]}) == 403,
              "and not at another peer (403)")
    p4.kill()
    p4.communicate()
    st, bad = _announce(c, "q-1", blob, size, have="01")
    check(st == 400 and "have" in json.dumps(bad), f"a bad announce is refused naming the "
          f"field: {st} {bad}")
    st, bad = _announce(c, "q-1", blob, size, hashes={"99": "sha256:xyz"})
    check(st == 400 and "hashes" in json.dumps(bad), f"a bad piece hash is refused naming the "
          f"field: {st} {bad}")
    p.kill()
    p.communicate()


def _layer_digest(store):
    """The largest blob of the store (the layer) and its size."""
    d = os.path.join(store, "blobs", "sha256")
    name = max(os.listdir(d), key=lambda n: os.path.getsize(os.path.join(d, n)))
    return "sha256:" + name, os.path.getsize(os.path.join(d, name))


_piece = {}


def _piece_bytes(c):
    """The pieces' size, as the tracker answers it (include/tessera/
    p2p_proto.h: a build may set another), from a one-byte blob's announce."""
    if "bytes" not in _piece:
        st, a = _announce(c, "q-3", "sha256:" + os.urandom(32).hex(), 1, have="0")
        check(st == 200 and a.get("piece_bytes", 0) > 0, f"the tracker names its piece size: {a}")
        _piece["bytes"] = a.get("piece_bytes") or 4 << 20
    return _piece["bytes"]


def _pieces(c, size):
    return (size + _piece_bytes(c) - 1) // _piece_bytes(c)


def _announce(c, node, blob, size, have=None, hashes=None, bad=None, fetching=None,
              missing=None, url="http://127.0.0.1:1"):
    from harness import http_call
    with open(node_token(c, node)) as f:
        tok = f.read().strip()
    pieces = _pieces(c, size) if have is None else len(have)
    body = {"node": node, "url": url, "blob": blob, "size": size,
            "have": have if have is not None else "0" * pieces}
    if hashes is not None:
        body["hashes"] = hashes
    if bad is not None:
        body["bad"] = bad
    if missing is not None:
        body["missing"] = missing
    if fetching is not None:
        body["fetching"] = fetching
    return http_call(c.url, "POST", "/v1/agent/p2p", tok, body)


scenario_c_a_peer_refuses_a_caller_without_a_token.needs = NEEDS


def scenario_d_a_gang_of_agents_shares_its_image(c):
    """images.md "Peer-to-peer": agents started with --p2p-listen run a
    gang's ranks in an image whose layer came from the registry about once."""
    r, front = registry()
    front.reset()
    ref = f"127.0.0.1:{FRONT_PORT}/team/big:1"
    spec = {"tenant": "team-a", "name": "p2p-gang", "tier": "opportunistic", "image": ref,
            "command": ["/bin/sh", "-c", "test -s /data/blob && cat /marker"],
            "tasks": [{"count": 3, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}],
            "time_limit": "5m"}
    jid = c.submit(spec)
    j = c.wait_job(jid, ("completed", "failed"), 150)
    if not j:
        return
    check(j["state"] == "completed", f"the gang completes in its image: {j.get('state')} "
          f"{j.get('reason')}")
    layer = max(front.per_blob.values()) if front.per_blob else 0
    check(layer <= 1.4 * LAYER_BYTES, f"the registry sent the layer about once for three "
          f"nodes: {layer} bytes")


scenario_d_a_gang_of_agents_shares_its_image.needs_root = True
scenario_d_a_gang_of_agents_shares_its_image.needs = ("runc",) + NEEDS


def scenario_e_a_reserved_job_has_its_image_fetched_while_it_waits(c):
    """images.md "Fetched while the job waits": when a waiting job gets the
    reservation, the nodes its reservation plans it on fetch its image
    (event `prefetch` naming them), so that it is on their disk before the
    job starts."""
    r, _ = registry()
    # a fresh image, so that no node holds it yet
    ref2 = r.push_busybox("team/waits:1", "fetched ahead",
                          {"/data/blob": os.urandom(2 << 20)}).replace(
        f"127.0.0.1:{PORT}", f"127.0.0.1:{FRONT_PORT}")
    busy = c.submit({"tenant": "team-a", "name": "p2p-busy", "tier": "opportunistic",
                     "command": ["/bin/sh", "-c", "sleep 40"],
                     "tasks": [{"count": 3, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}],
                     "time_limit": "1m"})
    if not c.wait_job(busy, "running", 30):
        return
    waiting = c.submit({"tenant": "team-a", "name": "p2p-waits", "tier": "opportunistic",
                        "image": ref2, "command": ["/bin/sh", "-c", "cat /marker"],
                        "tasks": [{"count": 1, "gpus": 8, "cpu_milli": 1000,
                                   "memory_mib": 1024}],
                        "time_limit": "1m"})

    def prefetch_event():
        return next((e for e in c.events(waiting) if e["kind"] == "prefetch"), None)
    ev = c.wait(prefetch_event, "the waiting job's events say where its image is fetched", 30)
    if not ev:
        return
    nodes = ev["data"].get("nodes", "").split(",")
    check(nodes and all(n.startswith("p-") for n in nodes),
          f"the event names the nodes its reservation plans it on: {ev['detail']}")

    # each node says so as its fetch begins (waited for: the nodes' image
    # folders already hold the earlier scenarios' images, so a look at the
    # disk alone can come before the fetch has begun)
    line = f"prefetching its image {ref2} at {PREFETCH_BYTES_S} bytes/s"

    def logged():
        return all(line in open(c.path(n + ".log")).read() for n in nodes)
    check(bool(c.wait(logged, "each of those nodes fetches the image", 60)),
          f"at half the nodes' network.bandwidth_mbit ({PREFETCH_BYTES_S} bytes/s)")

    def on_disk():
        return all(os.path.isdir(os.path.join(c.path(n), "images", "images")) and
                   any(os.scandir(os.path.join(c.path(n), "images", "images"))) for n in nodes)
    check(bool(c.wait(on_disk, "the image is on those nodes' disks", 60)),
          "the image is fetched onto those nodes while the job waits")
    check(c.job(waiting)["state"] == "pending", "before the job starts")

    def ready():
        pf = c.job(waiting).get("image_prefetch") or {}
        return pf if pf.get("nodes") and set(pf.get("ready", [])) == set(pf["nodes"]) else None
    pf = c.wait(ready, "the job shows its image ready on those nodes", 30)
    check(bool(pf) and set(pf["nodes"]) == set(nodes),
          f"GET /v1/jobs/{{id}} shows image_prefetch with its nodes ready: {pf}")
    c.call("POST", f"/v1/jobs/{busy}/cancel")
    c.wait_job(waiting, "completed", 60)


scenario_e_a_reserved_job_has_its_image_fetched_while_it_waits.needs_root = True
scenario_e_a_reserved_job_has_its_image_fetched_while_it_waits.needs = ("runc",) + NEEDS


def scenario_f_a_job_lands_where_its_image_is(c):
    """images.md "Placement": of two free nodes the scheduler finds equal,
    a job goes to the one that already holds its image (learned from the
    agents' reports of an earlier job in that image), not to the first by
    node order, where a job without an image still goes."""
    r, _ = registry()
    ref3 = r.push_busybox("team/placed:1", "placed by its image",
                          {"/data/blob": os.urandom(1 << 20)}).replace(
        f"127.0.0.1:{PORT}", f"127.0.0.1:{FRONT_PORT}")
    one = {"tenant": "team-a", "tier": "opportunistic", "time_limit": "1m",
           "tasks": [{"count": 1, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}]}
    first = c.submit(dict(one, name="img-first", image=ref3, nodelist="p-2",
                          command=["/bin/sh", "-c", "cat /marker"]))
    j = c.wait_job(first, ("completed", "failed"), 90)
    if not j:
        return
    check(j["state"] == "completed", f"a job puts the image on p-2: {j.get('state')} "
          f"{j.get('reason')}")
    if j["state"] != "completed":
        return
    # p-3 busy: p-1 and p-2 are the two free nodes, p-2 holding the image
    block = c.submit(dict(one, name="img-block", nodelist="p-3",
                          command=["/bin/sh", "-c", "sleep 60"]))
    if not c.wait_job(block, "running", 30):
        return
    second = c.submit(dict(one, name="img-second", image=ref3,
                           command=["/bin/sh", "-c", "cat /marker"]))
    j = c.wait_job(second, ("running", "completed", "failed"), 60)
    node = (c.job(second).get("placement") or [{}])[0].get("node")
    check(node == "p-2", f"the job with the image lands on p-2, which holds it, not on "
          f"p-1: {node}")
    c.wait_job(second, ("completed", "failed"), 60)
    bare = c.submit(dict(one, name="img-bare", command=["/bin/sh", "-c", "sleep 30"]))
    c.wait_job(bare, "running", 60)
    node = (c.job(bare).get("placement") or [{}])[0].get("node")
    check(node == "p-1", f"a job without an image goes by node order, to p-1: {node}")
    for jid in (block, bare):
        c.call("POST", f"/v1/jobs/{jid}/cancel")
    c.wait_job(bare, ("cancelled", "completed", "failed"), 60)


scenario_f_a_job_lands_where_its_image_is.needs_root = True
scenario_f_a_job_lands_where_its_image_is.needs = ("runc",) + NEEDS


def scenario_g_an_evicted_image_is_forgotten(c):
    """images.md "Placement": an agent lists its image store in every sync,
    so when its store evicts an image (its budget, here a pull with a budget
    of one byte on p-2's store, as the agent's own pulls evict), the
    controller stops placing that image's jobs there: of the two free nodes
    the next job in that image goes by node order, to p-1."""
    r, _ = registry()
    ref4 = r.push_busybox("team/evicted:1", "evicted from p-2",
                          {"/data/blob": os.urandom(1 << 20)}).replace(
        f"127.0.0.1:{PORT}", f"127.0.0.1:{FRONT_PORT}")
    one = {"tenant": "team-a", "tier": "opportunistic", "time_limit": "1m",
           "tasks": [{"count": 1, "gpus": 8, "cpu_milli": 1000, "memory_mib": 1024}]}
    first = c.submit(dict(one, name="ev-first", image=ref4, nodelist="p-2",
                          command=["/bin/sh", "-c", "cat /marker"]))
    j = c.wait_job(first, ("completed", "failed"), 90)
    check(bool(j) and j["state"] == "completed",
          f"a job puts the image on p-2: {j and j.get('state')}")
    if not j or j["state"] != "completed":
        return
    store = os.path.join(c.path("p-2"), "images")
    before = set(os.listdir(os.path.join(store, "images")))
    other = r.push_busybox("team/evictor:1", "an image p-2 has not got")
    p = subprocess.run([c.bins["agent"], "image-pull", "--store", store, "--budget", "1",
                        "--plain-http", other], capture_output=True, text=True, timeout=120)
    after = set(os.listdir(os.path.join(store, "images")))
    check(p.returncode != 0 and len(after) < len(before),
          f"p-2's store evicts its unused images under a budget: {len(before)} -> "
          f"{len(after)} (exit {p.returncode})")
    # p-2's agent lists its store at its next sync: an idle agent's long poll
    # is TS_AGENT_WAIT_IDLE_S (10 s)
    time.sleep(12)
    block = c.submit(dict(one, name="ev-block", nodelist="p-3",
                          command=["/bin/sh", "-c", "sleep 60"]))
    if not c.wait_job(block, "running", 30):
        return
    second = c.submit(dict(one, name="ev-second", image=ref4,
                           command=["/bin/sh", "-c", "cat /marker"]))
    c.wait_job(second, ("running", "completed", "failed"), 60)
    node = (c.job(second).get("placement") or [{}])[0].get("node")
    check(node == "p-1", f"the job no longer goes to p-2, whose store evicted its image, but "
          f"by node order to p-1: {node}")
    c.wait_job(second, ("completed", "failed"), 60)
    c.call("POST", f"/v1/jobs/{block}/cancel")
    c.wait_job(block, ("cancelled", "completed", "failed"), 60)


scenario_g_an_evicted_image_is_forgotten.needs_root = True
scenario_g_an_evicted_image_is_forgotten.needs = ("runc",) + NEEDS


def scenario_h_a_dead_peers_registry_piece_goes_to_another_at_once(c):
    """images.md "Peer-to-peer": a peer that dies while it takes a piece
    from the registry is routed around at once: when a node finds its port
    refused and reports it, the tracker frees its grant, and the next node
    to ask is granted that piece, not after the grant's hold (CLAIM_S, 5 s)
    runs out. A blob of one piece: its only grant is the dead node's."""
    blob = "sha256:" + os.urandom(32).hex()
    size = _piece_bytes(c)
    st, a = _announce(c, "q-1", blob, size, fetching=[])
    check(st == 200 and a.get("grant") == 0, f"the first node is granted the piece: {st} {a}")
    st, a = _announce(c, "q-1", blob, size, fetching=[0])  # it is taking it now
    st, b = _announce(c, "q-2", blob, size, fetching=[])
    check(st == 200 and b.get("grant") == -1,
          f"a second node is not granted a piece another node takes: {st} {b.get('grant')}")
    # q-1 died mid-piece (killed: its port refuses); q-2 found out and says so
    t0 = time.monotonic()
    st, b = _announce(c, "q-2", blob, size, bad=["q-1"], fetching=[])
    took = time.monotonic() - t0
    check(st == 200 and b.get("grant") == 0,
          f"the node that reported the dead one is granted its piece at once "
          f"({took:.2f} s, the grant's hold is 5 s): {st} {b.get('grant')}")


scenario_h_a_dead_peers_registry_piece_goes_to_another_at_once.needs = ()


def scenario_i_a_node_without_the_trackers_key_says_busy(c):
    """images.md "Peer-to-peer": a node which has not yet been told the
    tracker's key (just started; the tracker may still name it as a holder
    from before) answers 503, as a busy one does, so that its askers ask
    again in a moment instead of avoiding it (a 403 had each of them avoid
    it for 10 s). Here: a node whose store already holds the image serves
    from its start without asking the tracker anything."""
    import urllib.request
    import urllib.error
    r, front = registry()
    ref = f"127.0.0.1:{FRONT_PORT}/team/big:1"
    s1 = tempfile.mkdtemp(prefix="tessera-p2p-store-")
    atexit.register(lambda: (unmount_under(s1), shutil.rmtree(s1, ignore_errors=True)))
    plain = subprocess.run([c.bins["agent"], "image-pull", "--store", s1, "--plain-http", ref],
                           capture_output=True, text=True, timeout=120)
    check(plain.returncode == 0, f"the store holds the image: {plain.stderr.strip()[-200:]}")
    if plain.returncode:
        return
    port = free_port()
    p = subprocess.Popen([c.bins["agent"], "image-pull", "--store", s1, "--plain-http",
                          "--p2p-listen", f"127.0.0.1:{port}", "--controller", c.url, "--node",
                          "q-2", "--token-file", node_token(c, "q-2"), "--linger", "10", ref],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = json.loads(p.stdout.readline())
        check(out.get("cached") is True, f"the image came from its own store: {out}")
        blob, _ = _layer_digest(s1)
        req = urllib.request.Request(f"http://127.0.0.1:{port}/p2p/v1/blobs/{blob}/0",
                                     headers={"X-Tessera-Node": "q-1",
                                              "X-Tessera-P2P-Token": "9999999999." + "0" * 64})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                status = resp.status
        except urllib.error.HTTPError as e:
            status = e.code
        check(status == 503, f"it answers 503 (ask again), not 403: {status}")
    except ValueError:
        check(False, "the node pulled the image")
    finally:
        p.kill()
        p.communicate()


scenario_i_a_node_without_the_trackers_key_says_busy.needs = NEEDS


def _peer_have(answer, node):
    """What the tracker's answer says node holds ("" when it is not named)."""
    return next((p["have"] for p in answer.get("peers", []) if p["node"] == node), "")


def scenario_j_a_peer_without_the_layer_is_not_here_not_bad(c):
    """images.md "Peer-to-peer": a peer that answers that it does not hold
    a layer the tracker named (404: it restarted, or evicted it) is reported
    as missing, not bad: the tracker stops naming it for that layer until
    it announces the layer again, and names it again at once when it does
    (a restarted node fetching the layer anew), where a report as bad kept
    it out for a minute."""
    blob = "sha256:" + os.urandom(32).hex()
    size = 3 * _piece_bytes(c)
    st, _ = _announce(c, "q-1", blob, size, have="111")
    st, a = _announce(c, "q-3", blob, size)
    check(st == 200 and _peer_have(a, "q-1") == "111", f"q-1 is named as a holder: {a}")
    st, _ = _announce(c, "q-2", blob, size, missing=["q-1"])  # q-1 said 404 to q-2
    st, a = _announce(c, "q-3", blob, size)
    check(st == 200 and _peer_have(a, "q-1") == "",
          f"once reported missing, q-1 is no longer named for the layer: {a.get('peers')}")
    st, _ = _announce(c, "q-1", blob, size, have="100")  # it fetches the layer anew
    st, a = _announce(c, "q-3", blob, size)
    check(st == 200 and _peer_have(a, "q-1") == "100",
          f"q-1 is named again at its next announce, not banned: {a.get('peers')}")
    st, bad = _announce(c, "q-3", blob, size, missing="q-1")
    check(st == 400 and "missing" in json.dumps(bad),
          f"a bad report is refused naming the field: {st} {bad}")


scenario_j_a_peer_without_the_layer_is_not_here_not_bad.needs = ()


def scenario_k_a_dead_grant_holder_without_pieces_is_reported(c):
    """images.md "Peer-to-peer": a node that dies while it takes a piece
    from the registry, before it holds any piece, is found by the nodes
    waiting for that piece (they probe the grant holders the tracker names
    with nothing to serve) and reported, so its grant goes at once, not
    after the grant's 5 s; nobody else asks such a node anything."""
    r, _ = registry()
    ref = r.push_busybox("team/probe:1", "a grant holder dies",
                         {"/data/blob": os.urandom(LAYER_BYTES)}).replace(
        f"127.0.0.1:{PORT}", f"127.0.0.1:{FRONT_PORT}")
    s0, s2 = (tempfile.mkdtemp(prefix="tessera-p2p-store-") for _ in range(2))
    atexit.register(lambda: [(unmount_under(s), shutil.rmtree(s, ignore_errors=True))
                             for s in (s0, s2)])
    plain = subprocess.run([c.bins["agent"], "image-pull", "--store", s0, "--plain-http", ref],
                           capture_output=True, text=True, timeout=120)
    check(plain.returncode == 0, f"the layer's digest, from a plain pull: "
          f"{plain.stderr.strip()[-200:]}")
    if plain.returncode:
        return
    blob, size = _layer_digest(s0)
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens: a node that died
    st, a = _announce(c, "q-1", blob, size, fetching=[], url=dead)
    g = a.get("grant", -1) if st == 200 else -1
    check(g >= 0, f"q-1 is granted a piece from the registry: {st} {a}")
    if g < 0:
        return
    _announce(c, "q-1", blob, size, fetching=[g], url=dead)  # taking it; then it dies
    t0 = time.monotonic()
    out = finish(pull(c, "q-2", s2, ref), "q-2")
    took = time.monotonic() - t0
    check(out.get("from_peers", -1) == 0, f"q-2 took every piece from the registry: {out}")
    # the tracker banned q-1 for the layer: named no longer, whatever it holds
    st, _ = _announce(c, "q-1", blob, size, have="1" + "0" * (_pieces(c, size) - 1), url=dead)
    st, a = _announce(c, "q-3", blob, size)
    check(st == 200 and _peer_have(a, "q-1") == "",
          f"q-2 probed q-1, found its port refused and reported it (pull {took:.1f} s; "
          f"the grant's hold is 5 s): peers {a.get('peers')}")


scenario_k_a_dead_grant_holder_without_pieces_is_reported.needs = NEEDS


def scenario_l_a_powered_off_holder_is_dropped_in_seconds(c):
    """images.md "Peer-to-peer": a node that holds pieces tells the tracker
    every second that it still serves; a node that powers off (frozen, its
    packets dropped: its askers' SYNs go unanswered, as a busy node's do)
    is no longer named within a few seconds, and its askers take its pieces
    from the registry, where each of them needed 20 silent connects (30 s)
    before it reported the node."""
    r, _ = registry()
    ref = r.push_busybox("team/poweroff:1", "a holder powers off",
                         {"/data/blob": os.urandom(LAYER_BYTES)}).replace(
        f"127.0.0.1:{PORT}", f"127.0.0.1:{FRONT_PORT}")
    s1, s2 = (tempfile.mkdtemp(prefix="tessera-p2p-store-") for _ in range(2))
    atexit.register(lambda: [(unmount_under(s), shutil.rmtree(s, ignore_errors=True))
                             for s in (s1, s2)])
    port = free_port()
    holder = pull(c, "q-1", s1, ref, linger=120, port=port)
    if not first_line(holder, "the holder q-1"):
        return
    blob, size = _layer_digest(s1)
    st, a = _announce(c, "q-3", blob, size)
    check(st == 200 and set(_peer_have(a, "q-1")) == {"1"}, f"q-1 is named as a holder: {a}")
    table = "tessera_p2p_poweroff"
    rules = (f"add table inet {table}\n"
             f"add chain inet {table} in {{ type filter hook input priority -10; }}\n"
             f"add chain inet {table} out {{ type filter hook output priority -10; }}\n"
             f"add rule inet {table} in tcp dport {port} drop\n"
             f"add rule inet {table} out tcp sport {port} drop\n")
    try:
        # power off: nothing runs there, nothing answers, nothing refuses
        holder.send_signal(signal.SIGSTOP)
        nft = subprocess.run(["nft", "-f", "-"], input=rules, capture_output=True, text=True)
        check(nft.returncode == 0, f"q-1's port drops every packet: {nft.stderr.strip()}")
        t0 = time.monotonic()
        asker = pull(c, "q-2", s2, ref)
        time.sleep(4.5)  # the tracker's LIVE_S (3 s) and a beat's period
        st, a = _announce(c, "q-3", blob, size)
        check(st == 200 and _peer_have(a, "q-1") == "",
              f"4.5 s after it powered off q-1 is no longer named (nobody has reported it "
              f"yet: its silence is a busy node's to its askers): {a.get('peers')}")
        out = finish(asker, "q-2, asking while q-1 is off")
        took = time.monotonic() - t0
        check(bool(out) and took < 9.0,
              f"q-2 takes the pieces from the registry in seconds (its layers verified "
              f"after {out.get('blobs_s', -1):.1f} s, returned within {took:.1f} s; 20 "
              f"silent connects, 1.5 s each, before a report): "
              f"{out.get('from_registry')} bytes from the registry")
    finally:
        subprocess.run(["nft", "delete", "table", "inet", table], capture_output=True)
        holder.send_signal(signal.SIGCONT)
        holder.kill()
        holder.communicate()


scenario_l_a_powered_off_holder_is_dropped_in_seconds.needs_root = True
scenario_l_a_powered_off_holder_is_dropped_in_seconds.needs = ("nft",) + NEEDS


def _have(pieces, held):
    """The have string of a blob of pieces with the pieces in held."""
    return "".join("1" if i in held else "0" for i in range(pieces))


def scenario_m_a_node_alone_holding_a_wanted_piece_is_granted_no_more(c):
    """images.md "Peer-to-peer": a node that alone holds a piece another
    node fetching the layer lacks is granted no more pieces from the
    registry until that piece is copied (the next grant goes to another
    node), so that its death costs the registry at most that piece and the
    one it is taking; a node fetching a layer alone is granted on, and a
    node that stopped announcing the layer for 10 s counts as gone from it."""
    blob = "sha256:" + os.urandom(32).hex()
    n = 5
    size = n * _piece_bytes(c)
    st, a = _announce(c, "q-1", blob, size, have=_have(n, {0}), fetching=[])
    g1 = a.get("grant", -1) if st == 200 else -1
    check(g1 > 0, f"a node fetching alone holds piece 0 and is granted another: {st} {a}")
    st, b = _announce(c, "q-2", blob, size, fetching=[])
    g2 = b.get("grant", -1) if st == 200 else -1
    check(g2 >= 0 and g2 not in (0, g1), f"a second node is granted a third piece: {st} {b}")
    # q-1 took its piece; q-2 lacks both of q-1's, which nobody else holds
    st, a = _announce(c, "q-1", blob, size, have=_have(n, {0, g1}), fetching=[])
    check(st == 200 and a.get("grant") == -1,
          f"q-1, alone holding two pieces q-2 lacks, is granted none: {st} {a.get('grant')}")
    # q-2 copied them (its own grant still being taken)
    st, b = _announce(c, "q-2", blob, size, have=_have(n, {0, g1}), fetching=[g2])
    st, a = _announce(c, "q-1", blob, size, have=_have(n, {0, g1}), fetching=[])
    g3 = a.get("grant", -1) if st == 200 else -1
    check(g3 >= 0 and g3 not in (0, g1, g2),
          f"once they are copied, q-1 is granted the next piece: {st} {a.get('grant')}")
    # a node that announced a layer and then stopped fetching it (its fetch
    # failed) holds nobody's grants back once FETCHING_S (10 s) has passed
    blob = "sha256:" + os.urandom(32).hex()
    _announce(c, "q-2", blob, size, fetching=[])
    st, a = _announce(c, "q-1", blob, size, have=_have(n, {0}), fetching=[])
    check(st == 200 and a.get("grant") == -1,
          f"q-1 alone holds a piece q-2 lacks: granted none: {st} {a.get('grant')}")
    time.sleep(10.5)
    st, a = _announce(c, "q-1", blob, size, have=_have(n, {0}), fetching=[])
    check(st == 200 and a.get("grant", -1) > 0,
          f"q-2 silent on the layer for 10 s: q-1 is granted on: {st} {a.get('grant')}")


scenario_m_a_node_alone_holding_a_wanted_piece_is_granted_no_more.needs = ()
