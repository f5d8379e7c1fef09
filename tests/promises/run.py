#!/usr/bin/env python3
"""run.py - runs one file of promise scenarios against a live cluster.

    run.py AREA_test.py TESSERAD AGENT CLI FAKE_NVML FIXTURES [-k NAME] [--list]

The file's functions named scenario_* run in the order they are written,
each given the same live Cluster (tests/lib/cluster.py): a real tesserad and
real tessera-agents. A file shapes its cluster with CLUSTER, a dict of
Cluster's keyword arguments (nodes, tenants, config, classes). A scenario
that needs root (Unix users, cgroups) sets NEEDS_ROOT on itself
(scenario_x.needs_root = True) and is skipped without it; one that needs
programs names them (scenario_x.needs = ("runc",)) and is skipped, saying
which, where one is not installed. Between two
scenarios every job still active is cancelled, so each starts on an idle
cluster. The run closes with "N passed, N failed, N skipped"; a sanitizer
report in any log of the cluster fails the run.

tests/promises/README.md says how to add a scenario; docs/promises.md lists
the promise each one checks.
"""
import importlib.util
import os
import shutil
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "lib"))
import harness  # noqa: E402
from cluster import Cluster  # noqa: E402


def load(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def scenarios(mod):
    fns = [v for k, v in vars(mod).items() if k.startswith("scenario_") and callable(v)]
    return sorted(fns, key=lambda f: f.__code__.co_firstlineno)


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("-")]
    only = argv[argv.index("-k") + 1] if "-k" in argv else None
    if only in args:
        args.remove(only)
    mod = load(args[0])
    todo = scenarios(mod)
    if "--list" in argv:
        print("\n".join(f.__name__ for f in todo))
        return 0
    bins = dict(zip(("tesserad", "agent", "cli", "nvml", "fixtures"), args[1:6]))
    if only:
        todo = [f for f in todo if f.__name__ == only]
    c = Cluster(bins, name=os.path.basename(args[0])[:-8], **getattr(mod, "CLUSTER", {}))
    passed, failed, skipped = [], [], []
    try:
        if not c.start():
            harness.finish(c.tmp, c.logs)
        for fn in todo:
            if getattr(fn, "needs_root", False) and os.geteuid() != 0:
                print(f"== {fn.__name__}: skipped (needs root)")
                skipped.append(fn.__name__)
                continue
            lack = [p for p in getattr(fn, "needs", ()) if not shutil.which(p)]
            if lack:
                print(f"== {fn.__name__}: skipped (needs {', '.join(lack)}: "
                      "scripts/install-deps test)")
                skipped.append(fn.__name__)
                continue
            print(f"== {fn.__name__}")
            before, t0 = len(harness.FAILS), time.time()
            try:
                fn(c)
            except Exception:
                traceback.print_exc()
                harness.check(False, f"{fn.__name__} raised")
            ok = len(harness.FAILS) == before
            (passed if ok else failed).append(fn.__name__)
            print(f"== {fn.__name__}: {'passed' if ok else 'FAILED'} ({time.time() - t0:.1f} s)")
            c.cancel_all()
    finally:
        c.stop()
    print(f"{len(passed)} passed, {len(failed)} failed, {len(skipped)} skipped")
    harness.finish(c.tmp, c.logs)  # exits 1 on any failure or sanitizer report
    c.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
