#!/usr/bin/env python3
"""Summarises bench/fidelity's JSON files: ours vs published for each baseline,
and tessera vs fgd, one line per workload."""
import csv
import json
import sys

NAMES = {"random": "Random", "dotprod": "DotProd", "clustering": "Clustering",
         "packing": "Packing", "bestfit": "BestFit", "fgd": "FGD"}
FIDELITY_POINTS = 1.0


def main():
    published = {}
    with open(sys.argv[1]) as f:
        for row in csv.DictReader(f):
            published[(row["workload"], row["policy"])] = float(row["alloc_pct_at_arrived100_mean"])
    docs = [json.load(open(p)) for p in sys.argv[2:]]
    print("fidelity: our mean GPU alloc % at arrived 100 minus the published mean (seeds 42-51)")
    print("%-28s" % "workload" + "".join("%11s" % p for p in NAMES))
    worst, misses = 0.0, []
    for d in docs:
        line = "%-28s" % d["workload"]
        for r in d["results"]:
            if r["policy"] not in NAMES:
                continue
            pub = published.get((d["workload"], NAMES[r["policy"]]))
            if pub is None:
                line += "%11s" % "-"
                continue
            diff = r["alloc_pct_at_arrived_100"]["mean"] - pub
            worst = max(worst, abs(diff))
            if abs(diff) > FIDELITY_POINTS:
                misses.append((d["workload"], r["policy"], diff))
            line += "%+11.2f" % diff
        print(line)
    print("largest |difference|: %.2f points; beyond %.1f: %s" % (
        worst, FIDELITY_POINTS, ", ".join("%s/%s %+.2f" % m for m in misses) or "none"))
    print()
    print("quality: core (tesserad's cycle; tessera if no core run) vs fgd, GPU alloc % at "
          "arrived 100 (mean +- sd over seeds)")
    print("%-28s %15s %15s %8s %s" % ("workload", "fgd", "core", "gain", "gain > both sd"))
    wins = 0
    for d in docs:
        res = {r["policy"]: r["alloc_pct_at_arrived_100"] for r in d["results"]}
        ours = "core" if "core" in res else "tessera"
        if "fgd" not in res or ours not in res:
            continue
        f, t = res["fgd"], res[ours]
        gain = t["mean"] - f["mean"]
        ok = gain > max(f["sd"], t["sd"])
        wins += ok
        print("%-28s %7.2f +- %-5.2f %7.2f +- %-5.2f %+8.2f %s" % (
            d["workload"], f["mean"], f["sd"], t["mean"], t["sd"], gain, "yes" if ok else "NO"))
    print("core ahead of fgd by more than the SD on %d of %d workloads" % (wins, len(docs)))


if __name__ == "__main__":
    main()
