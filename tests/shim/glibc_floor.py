#!/usr/bin/env python3
"""The shim loads under a glibc as old as 2.17 (src/shim/glibc_floor.h).

Reads the dynamic symbol table of the built libtessera-cuda.so with
`objdump -T` and fails, naming each offender, if an imported symbol asks for
a GLIBC_x.y version above 2.17, or if the libraries that held the pthread and
dl functions before glibc 2.34 are not among its DT_NEEDED entries (an old
loader would then find no definition of them).
"""
import re
import subprocess
import sys

FLOOR = (2, 17)
OLD_HOMES = ("libdl.so.2", "libpthread.so.0")


def version_tuple(text):
    return tuple(int(x) for x in text.split("."))


def main():
    if len(sys.argv) != 2:
        print("usage: glibc_floor.py LIBTESSERA_CUDA_SO", file=sys.stderr)
        return 2
    lib = sys.argv[1]
    table = subprocess.run(["objdump", "-T", lib], check=True, capture_output=True,
                           text=True).stdout
    offenders = []
    imports = 0
    for line in table.splitlines():
        m = re.search(r"\(?GLIBC_([0-9.]+)\)?\s+(\S+)$", line)
        if not m:
            continue
        if "*UND*" in line:
            imports += 1
        if version_tuple(m.group(1)) > FLOOR:
            offenders.append(f"{m.group(2)}@GLIBC_{m.group(1)}")
    needed = subprocess.run(["objdump", "-p", lib], check=True, capture_output=True,
                            text=True).stdout
    missing = [n for n in OLD_HOMES if not re.search(r"NEEDED\s+" + re.escape(n), needed)]
    if imports == 0:
        print(f"{lib}: no versioned GLIBC import found; is this the right file?")
        return 1
    if offenders or missing:
        for o in offenders:
            print(f"{lib}: imports {o}, above GLIBC_{FLOOR[0]}.{FLOOR[1]}")
        for n in missing:
            print(f"{lib}: {n} is not NEEDED; glibc < 2.34 defines dl/pthread functions there")
        return 1
    print(f"{lib}: {imports} versioned glibc imports, none above GLIBC_2.17")
    return 0


if __name__ == "__main__":
    sys.exit(main())
