#!/usr/bin/env python3
"""Segments of a PyTorch memory snapshot, as CSV, for tessera-alloc-replay --segments.

    bench/alloc_snapshot.py SNAPSHOT.pickle OUT.segments.csv

A snapshot (torch.cuda.memory._dump_snapshot) is a pickle of plain Python
values. It is read with an unpickler that refuses every global, so a file
that tries to build an object fails instead of running code. Writes one row
per segment at dump time: addr,total_size,stream,pool,is_expandable.
"""
import pickle
import sys


class PlainUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("refusing global %s.%s" % (module, name))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], "rb") as f:
        snap = PlainUnpickler(f).load()
    with open(sys.argv[2], "w") as out:
        out.write("addr,total_size,stream,pool,is_expandable\n")
        for s in sorted(snap["segments"], key=lambda s: s["address"]):
            out.write("%d,%d,%d,%s,%d\n" % (s["address"], s["total_size"], s["stream"],
                                             s["segment_type"], 1 if s["is_expandable"] else 0))


if __name__ == "__main__":
    main()
