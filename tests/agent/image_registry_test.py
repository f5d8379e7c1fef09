#!/usr/bin/env python3
"""The agent's registry client and image store against a real registry.

Starts Debian's docker-registry (the reference OCI distribution server) on a
free loopback port with its storage in a temporary directory, builds two
small images with umoci from Debian's static busybox, pushes them with
skopeo, and pulls them with `tessera-agent image-pull`:
  - a pull prepares the root filesystem, its layers unpacked as their bytes
    come; the second is served from the store;
  - an unknown tag fails as not found (exit 3), an unreachable registry as
    worth a retry (exit 4);
  - an image index resolves to its linux/amd64 manifest; a digest-pinned
    reference pulls the same image;
  - a blob the registry serves corrupted is discarded: nothing is stored,
    no staging tree is left;
  - a registry behind bearer-token authentication (a token service in front
    of it, here) is pulled with a pull secret; a wrong secret is refused and
    never printed;
  - the store's budget evicts the least recently used image no task uses,
    and an image larger than the budget is refused with the reason.
Skips (77) only where docker-registry, umoci, skopeo or busybox are missing.

usage: image_registry_test.py TESSERA_AGENT
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
from harness import unmount_under  # noqa: E402
from registry import Registry, TokenFront, free_port, missing_tools  # noqa: E402

AGENT = sys.argv[1]
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
SECRET_USER, SECRET_PASS = "alice", "pw-never-printed-42"


def pull(store, ref, *extra):
    p = subprocess.run([AGENT, "image-pull", "--store", store, "--plain-http", *extra, ref],
                       capture_output=True, text=True, timeout=120)
    return p.returncode, (json.loads(p.stdout) if p.returncode == 0 else None), p.stderr


def registry_get(base, path, accept=None):
    req = urllib.request.Request(base + path)
    if accept:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.read(), r.headers


def main():
    missing = missing_tools()
    if missing:
        print(f"SKIP: {', '.join(missing)} not installed (scripts/install-deps test)")
        return 77
    work = tempfile.mkdtemp(prefix="ts-imgreg-")
    reg = None
    front = None
    try:
        reg = Registry(work)
        host, base, storage = reg.host, reg.base, reg.storage
        reg.push_busybox("test/busy:1", "image one")
        reg.push_busybox("test/busy:2", "image two")
        store = os.path.join(work, "store")

        rc, one, err = pull(store, f"{host}/test/busy:1")
        assert rc == 0, err
        assert not one["cached"]
        with open(os.path.join(one["rootfs"], "marker")) as f:
            assert f.read() == "image one\n"
        assert os.access(os.path.join(one["rootfs"], "bin", "busybox"), os.X_OK)
        rc, again, err = pull(store, f"{host}/test/busy:1")
        assert rc == 0 and again["cached"] and again["digest"] == one["digest"], err
        print("pull, then from the store: ok")

        # straight from the registry (no peers), the layers are unpacked as
        # their bytes come, not once the blob is whole
        traced = os.path.join(work, "store-traced")
        p = subprocess.run([AGENT, "image-pull", "--store", traced, "--plain-http",
                            f"{host}/test/busy:1"], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, TESSERA_AGENT_IMAGE_TRACE="1"))
        assert p.returncode == 0 and "as the layers came" in p.stderr, p.stderr[-2000:]
        print("layers unpacked as they came from the registry: ok")

        rc, _, err = pull(store, f"{host}/test/busy:nope")
        assert rc == 3 and "not found" in err, (rc, err)
        rc, _, err = pull(store, f"{host}/test/other:1")
        assert rc == 3, (rc, err)
        rc, _, err = pull(store, f"127.0.0.1:{free_port()}/test/busy:1")
        assert rc == 4, (rc, err)
        print("unknown image -> 3, unreachable registry -> 4: ok")

        # an index whose first entry is another platform
        manifest, headers = registry_get(base, "/v2/test/busy/manifests/1",
                                         "application/vnd.oci.image.manifest.v1+json")
        mtype = headers["Content-Type"]
        digest = one["digest"]
        entry = {"mediaType": mtype, "digest": digest, "size": len(manifest)}
        index = {"schemaVersion": 2, "mediaType": INDEX_TYPE, "manifests": [
            dict(entry, platform={"architecture": "arm64", "os": "linux"}),
            dict(entry, platform={"architecture": "amd64", "os": "linux"})]}
        req = urllib.request.Request(f"{base}/v2/test/busy/manifests/multi",
                                     data=json.dumps(index).encode(), method="PUT",
                                     headers={"Content-Type": INDEX_TYPE})
        urllib.request.urlopen(req, timeout=10).close()
        rc, viaindex, err = pull(store, f"{host}/test/busy:multi")
        assert rc == 0 and viaindex["digest"] == digest, err
        rc, pinned, err = pull(store, f"{host}/test/busy@{digest}")
        assert rc == 0 and pinned["digest"] == digest, err
        print("index -> linux/amd64, digest-pinned: ok")

        # a corrupted layer blob: same size, other bytes
        m = json.loads(manifest)
        layer = m["layers"][-1]["digest"].split(":")[1]
        data = os.path.join(storage, "docker/registry/v2/blobs/sha256", layer[:2], layer, "data")
        with open(data, "rb") as f:
            good = f.read()
        with open(data, "wb") as f:
            f.write(bytes(b ^ 0x5a for b in good))
        fresh = os.path.join(work, "store-fresh")
        rc, _, err = pull(fresh, f"{host}/test/busy:1")
        assert rc == 1 and "digest" in err and "discarded" in err, (rc, err)
        assert not os.path.exists(os.path.join(fresh, "blobs/sha256", layer))
        assert os.listdir(os.path.join(fresh, "images")) == []
        assert os.listdir(os.path.join(fresh, "tmp")) == [], os.listdir(os.path.join(fresh, "tmp"))
        with open(data, "wb") as f:
            f.write(good)
        print("corrupted blob discarded, never stored: ok")

        # bearer tokens in front of the registry
        front = TokenFront(base, SECRET_USER, SECRET_PASS)
        fport = front.port
        secret = os.path.join(work, "secret")
        with open(secret, "w") as f:
            f.write(f"{SECRET_USER}:{SECRET_PASS}\n")
        tok_store = os.path.join(work, "store-token")
        rc, viatoken, err = pull(tok_store, f"127.0.0.1:{fport}/test/busy:1", "--auth-file",
                                 secret)
        assert rc == 0 and viatoken["digest"] == digest, err
        secret_ok = os.path.join(work, "secret-ok")
        shutil.copy(secret, secret_ok)
        with open(secret, "w") as f:
            f.write(f"{SECRET_USER}:wrong-{SECRET_PASS}\n")
        rc, out, err = pull(os.path.join(work, "store-token2"), f"127.0.0.1:{fport}/test/busy:1",
                            "--auth-file", secret)
        assert rc == 5 and SECRET_PASS not in err, (rc, err)
        rc, out, err = pull(os.path.join(work, "store-token3"), f"127.0.0.1:{fport}/test/busy:1")
        assert rc == 5, (rc, err)
        rc, out, err = pull(os.path.join(work, "store-token4"), f"127.0.0.1:{fport}/test/busy:9",
                            "--auth-file", secret_ok)
        assert rc == 3, (rc, err)
        print("bearer token with a pull secret; a wrong one or none refused (exit 5), never "
              "printed; an unknown tag behind it not found (exit 3): ok")

        # the budget: room for one image
        lru = os.path.join(work, "store-lru")
        rc, a, err = pull(lru, f"{host}/test/busy:1")
        assert rc == 0, err
        budget = int(a["store_bytes"] * 1.5)
        rc, b, err = pull(lru, f"{host}/test/busy:2", "--budget", str(budget))
        assert rc == 0, err
        assert not os.path.exists(os.path.dirname(a["rootfs"])), "the older image stayed"
        assert os.path.exists(b["rootfs"]) and b["store_bytes"] <= budget, b
        rc, _, err = pull(lru, f"{host}/test/busy:1", "--budget", "4096")
        assert rc == 1 and "budget" in err, (rc, err)
        print(f"budget {budget} bytes: least recently used image evicted; too big refused: ok")
        return 0
    finally:
        if front:
            front.stop()
        if reg:
            reg.stop()
        unmount_under(work)  # the image roots the CLI left mounted (docs/images.md)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
