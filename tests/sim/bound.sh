#!/usr/bin/env bash
# bound.sh - `tessera-sim bound`, as CTest runs it:
#
#   tests/sim/bound.sh SIM_BIN DATA_DIR
#
# Proves: on two fixtures whose bound is known by hand the LP and the packing
# give it (three 600-milli shares on two 1-GPU nodes: a GPU holds one, so
# 1,200 of 2,000 milli, 60 %; two 1-GPU pods asking 3,000 milli-CPU on one
# 2-GPU node of 4,000: one fits, 50 %); on the small openb fixtures the
# packing never passes the bound and the command's own check calls it
# feasible; the packing it writes (--packing) is replayed here, outside the
# simulator, against the node list (CPU, memory, whole GPUs held by one pod,
# shares summing to at most one GPU) and sums to the packing % printed; the
# bound of the reported figure (bin%) is at most the bound and at least what
# every policy reaches on the small fixtures; bad
# options exit 2 naming the option; --place-cpu-pods gives the bound worked by
# hand for each count of CPU-only pods and places them all. The last line is
# "N passed, M failed".
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 SIM_BIN DATA_DIR" >&2
  exit 2
fi
SIM=$1
DATA=$2
RUN_TIMEOUT_S=120
. "$(dirname "$0")/lib.sh"

# expect_figures NAME BOUND PACKING: the "all" row of $tmp/out
expect_figures() {
  local row
  row=$(awk '$2 == "all" { print $3, $4 }' "$tmp/out")
  if [ "$rc" -ne 0 ]; then
    fail "$1: exit $rc"
  elif [ "$row" != "$2 $3" ]; then
    fail "$1: bound and packing \"$row\", expected \"$2 $3\""
  elif grep -v '^workload' "$tmp/out" | grep -v ' all ' | grep -qv 'feasible$'; then
    fail "$1: a seed's packing is not reported feasible"
  else
    pass
  fi
}

# replay NODES PODS PACKING: the packing checked against the node list by
# rules written here, independent of the simulator; prints the allocation %
# per seed, or a line starting "infeasible"
replay() {
  python3 - "$1" "$2" "$3" <<'PY'
import csv, collections, sys
nodes = {r["sn"]: r for r in csv.DictReader(open(sys.argv[1]))}
pods = {r["name"]: r for r in csv.DictReader(open(sys.argv[2]))}
cap = 1000 * sum(int(n["gpu"]) for n in nodes.values())
seeds = collections.OrderedDict()
for r in csv.DictReader(open(sys.argv[3])):
    s = seeds.setdefault(r["seed"], {"cpu": collections.Counter(), "mem": collections.Counter(),
                                     "gpu": collections.Counter(), "whole": set(), "milli": 0})
    if not r["node"]:
        continue
    p, n = pods[r["pod"]], nodes[r["node"]]
    s["cpu"][r["node"]] += int(p["cpu_milli"])
    s["mem"][r["node"]] += int(p["memory_mib"])
    gpus = [int(g) for g in r["gpus"].split("|") if g]
    if len(gpus) != int(p["num_gpu"]) or len(set(gpus)) != len(gpus):
        sys.exit("infeasible: %s holds GPUs %s" % (r["pod"], r["gpus"]))
    for g in gpus:
        if not 0 <= g < int(n["gpu"]):
            sys.exit("infeasible: %s: no GPU %d on %s" % (r["pod"], g, r["node"]))
        key = (r["node"], g)
        if key in s["whole"]:
            sys.exit("infeasible: %s: GPU %s already whole" % (r["pod"], key))
        if int(p["gpu_milli"]) >= 1000 and s["gpu"][key] > 0:
            sys.exit("infeasible: %s: GPU %s already shared" % (r["pod"], key))
        if int(p["gpu_milli"]) >= 1000:
            s["whole"].add(key)
        s["gpu"][key] += int(p["gpu_milli"])
        if s["gpu"][key] > 1000:
            sys.exit("infeasible: GPU %s over 1000 milli" % (key,))
    s["milli"] += int(p["num_gpu"]) * int(p["gpu_milli"])
    if s["cpu"][r["node"]] > int(n["cpu_milli"]) or s["mem"][r["node"]] > int(n["memory_mib"]):
        sys.exit("infeasible: %s over CPU or memory" % r["node"])
for seed, s in seeds.items():
    print(seed, "%.2f" % (100.0 * s["milli"] / cap))
PY
}

# expect_replay NAME NODES PODS: the written packing replays to the printed figures
expect_replay() {
  local got want
  got=$(replay "$2" "$3" "$tmp/packing.csv" 2>&1)
  want=$(awk '$2 != "all" && $1 != "workload" { print $2, $6 }' "$tmp/out")
  if [ "$got" != "$want" ]; then
    fail "$1: replayed packing \"$got\", printed \"$want\""
  else
    pass
  fi
}

# ---- bounds known by hand ----------------------------------------------------
for f in share:60.00 cpu:50.00; do
  name=${f%%:*}
  want=${f#*:}
  sim bound --nodes "$DATA/bound-$name-nodes.csv" --pods "$DATA/bound-$name-pods.csv" \
    --seeds 1-3 --packing "$tmp/packing.csv"
  expect_figures "$name fixture" "$want" "$want"
  expect_replay "$name fixture" "$DATA/bound-$name-nodes.csv" "$DATA/bound-$name-pods.csv"
done

# ---- the replay catches a packing that does not fit -------------------------
# the share fixture's third pod put on the GPU a first one holds: 1,200 milli
printf 'seed,arrival,pod,node,gpus\n1,0,share-0,bound-node-0,0\n1,1,share-1,bound-node-0,0\n' \
  >"$tmp/bad-packing.csv"
got=$(replay "$DATA/bound-share-nodes.csv" "$DATA/bound-share-pods.csv" "$tmp/bad-packing.csv" 2>&1)
case "$got" in
  infeasible*) pass ;;
  *) fail "replay of an overfull GPU: \"$got\", expected infeasible" ;;
esac

# ---- the small openb fixtures: packing <= bound, feasible both ways -----------
for pods in openb-pods-small openb-pods-multigpu-small; do
  sim bound --nodes "$DATA/openb-nodes-sim.csv" --pods "$DATA/$pods.csv" --seeds 1-3 \
    --packing "$tmp/packing.csv"
  if [ "$rc" -ne 0 ]; then
    fail "$pods: exit $rc"
    continue
  fi
  if awk '$1 != "workload" && $2 != "all" && ($6 > $5 + 0.005 || $NF != "feasible") { bad = 1 }
          END { exit !bad }' "$tmp/out"; then
    fail "$pods: a packing passes its bound or is not feasible"
  else
    pass
  fi
  expect_replay "$pods" "$DATA/openb-nodes-sim.csv" "$DATA/$pods.csv"
done

# ---- the bound of the figure the fgd experiment reports (bin%) --------------
# at most the bound at the bin's last event, seed by seed, and at least every
# policy's figure (mean over the same seeds)
for pods in openb-pods-small openb-pods-multigpu-small; do
  sim fgd --quiet --nodes "$DATA/openb-nodes-sim.csv" --pods "$DATA/$pods.csv" --seeds 1-3 \
    --policy core,fgd,bestfit,packing,clustering,dotprod,random --json "$tmp/fgd.json"
  if [ "$rc" -ne 0 ]; then
    fail "$pods: fgd exit $rc"
    continue
  fi
  sim bound --nodes "$DATA/openb-nodes-sim.csv" --pods "$DATA/$pods.csv" --seeds 1-3
  if [ "$rc" -ne 0 ]; then
    fail "$pods: bound exit $rc"
    continue
  fi
  got=$(python3 - "$tmp/out" "$tmp/fgd.json" <<'PY'
import json, sys
rows = [l.split() for l in open(sys.argv[1]) if not l.startswith("workload")]
seeds = [r for r in rows if r[1] != "all"]
bad = [f"seed {r[1]}: bin {r[9]} over bound {r[4]}" for r in seeds if float(r[9]) > float(r[4])]
bin_mean = sum(float(r[9]) for r in seeds) / len(seeds)
all_row = next(r for r in rows if r[1] == "all")
if abs(float(all_row[all_row.index("bin") + 1]) - bin_mean) > 0.006:
    bad.append(f"the all row's bin {all_row[all_row.index('bin') + 1]} is not the seeds' mean")
for r in json.load(open(sys.argv[2]))["results"]:
    m = r["alloc_pct_at_arrived_100"]["mean"]
    if m > bin_mean + 0.005:
        bad.append(f"{r['policy']} {m} over the bin bound {bin_mean:.2f}")
print("; ".join(bad) or "ok")
PY
)
  if [ "$got" = ok ]; then pass; else fail "$pods: $got"; fi
done

# ---- --place-cpu-pods: the bound of packings that place every CPU-only pod ----
# one node of 4,000 milli-CPU and 2 GPUs; 1-GPU pods of 2,000 CPU and CPU-only
# pods of 500: with m CPU-only pods arrived the bound is min(2, (4000 - 500 m)
# / 2000) GPUs of 2; without the option both GPU pods fit (100 %)
sim bound --nodes "$DATA/bound-cpu-nodes.csv" --pods "$DATA/bound-cpupods-pods.csv" \
  --seeds 1-6 --place-cpu-pods --packing "$tmp/packing.csv"
if [ "$rc" -ne 0 ]; then
  fail "place-cpu-pods: exit $rc"
else
  got=$(awk '$1 != "workload" && $2 != "all" { print $2, $5 }' "$tmp/out")
  want=$(python3 - "$tmp/packing.csv" <<'PY'
import csv, collections, sys
m, out = collections.Counter(), 0
for r in csv.DictReader(open(sys.argv[1])):
    if r["pod"].startswith("cpu-"):
        m[r["seed"]] += 1
        out += not r["node"]
for seed in sorted(m, key=int):
    print(seed, "%.2f" % (50.0 * min(2.0, (4000 - 500 * m[seed]) / 2000)))
if out:
    print("left out", out)
PY
)
  if [ "$got" = "$want" ]; then pass; else fail "place-cpu-pods: bounds \"$got\", expected \"$want\""; fi
  expect_replay "place-cpu-pods" "$DATA/bound-cpu-nodes.csv" "$DATA/bound-cpupods-pods.csv"
fi
sim bound --nodes "$DATA/bound-cpu-nodes.csv" --pods "$DATA/bound-cpupods-pods.csv" --seeds 1-6
expect_figures "CPU-only pods left out" 100.00 100.00

# ---- bad options -----------------------------------------------------------
expect_bad "no nodes" "--nodes: required" bound --pods "$DATA/bound-share-pods.csv"
expect_bad "no pods" "--pods: required" bound --nodes "$DATA/bound-share-nodes.csv"
expect_bad "bad seeds" "--seeds:" bound --nodes "$DATA/bound-share-nodes.csv" \
  --pods "$DATA/bound-share-pods.csv" --seeds 9-3
expect_bad "bad tune" "--tune:" bound --nodes "$DATA/bound-share-nodes.csv" \
  --pods "$DATA/bound-share-pods.csv" --tune 0
expect_bad "unknown option" "unknown option" bound --nodes "$DATA/bound-share-nodes.csv" \
  --pods "$DATA/bound-share-pods.csv" --policy core

finish
