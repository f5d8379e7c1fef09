#!/usr/bin/env bash
# gen_openb.sh - tessera-sim gen-openb and `fgd --policy core`, as CTest runs
# them:
#
#   tests/sim/gen_openb.sh SIM_BIN REPO_DIR
#
# On the shipped openb default workload (data/openb): each generator option
# reaches the fraction it asks for (multi-GPU share of GPU demand, pinned
# share of GPU pods, GPU shares among GPU pods, CPU-only share of pods)
# within one pod; the same seed writes the same file and another seed a
# different one; bad options exit 2 naming the option. Then `fgd --policy
# core` (tesserad's cycle per pod) prints exactly the figures of the tessera
# scorer for the same seeds on a generated workload, and `core-learned`
# (learning the mix online, as tesserad does) comes within half a point.
# --share-milli draws share sizes uniformly from its range; --halves turns
# that fraction of the one-GPU pods into 500-milli shares, CPU and memory kept.
# gen-cluster: 2/4/8-GPU nodes keep the cluster's GPUs and each model's CPU
# per GPU; --cpu-per-gpu and --mem-per-gpu scale them; --models gives the
# model mix; bad options exit 2 naming the option. Every check counts; the
# last line is "N passed, M failed" and any failure exits 1.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 SIM_BIN REPO_DIR" >&2
  exit 2
fi
SIM=$1
BASE=$2/data/openb/openb_pod_list_default.csv
NODES=$2/data/openb/openb_node_list_gpu_node.csv
RUN_TIMEOUT_S=120
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
fail=0
check() { # name, then a command that must succeed
  local name=$1
  shift
  if "$@"; then
    pass=$((pass + 1))
  else
    echo "FAIL: $name" >&2
    fail=$((fail + 1))
  fi
}

# fraction FILE KIND: the measured fraction of a generated file
fraction() {
  python3 - "$1" "$2" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
gpu = [r for r in rows if int(r["num_gpu"]) > 0]
dem = lambda r: int(r["num_gpu"]) * int(r["gpu_milli"])
k = sys.argv[2]
if k == "multigpu":
    v = sum(dem(r) for r in gpu if int(r["num_gpu"]) > 1) / sum(dem(r) for r in gpu)
elif k == "gpuspec":
    v = sum(1 for r in gpu if r["gpu_spec"]) / len(gpu)
elif k == "gpushare":
    v = sum(1 for r in gpu if int(r["gpu_milli"]) < 1000) / len(gpu)
else:
    v = sum(1 for r in rows if int(r["num_gpu"]) == 0) / len(rows)
print("%.4f %d" % (v, len(rows)))
PY
}

near() { # measured, wanted, pods: within one pod's worth (multi-GPU: one 8-GPU pod)
  python3 -c "import sys; m, w, n = float('$1'), float('$2'), int('$3'); sys.exit(0 if abs(m - w) <= 8.0 / n * 8 + 1e-9 else 1)"
}

for spec in "multigpu 0.40" "gpuspec 0.30" "gpushare 0.60" "cpu 0.25"; do
  set -- $spec
  out=$TMP/$1.csv
  check "gen-openb --$1 $2 exits 0" \
    timeout $RUN_TIMEOUT_S "$SIM" gen-openb --pods "$BASE" --out "$out" --seed 3 "--$1" "$2"
  read -r got n < <(fraction "$out" "$1")
  check "gen-openb --$1 $2 reaches it (got $got)" near "$got" "$2" "$n"
done

timeout $RUN_TIMEOUT_S "$SIM" gen-openb --pods "$BASE" --out "$TMP/a.csv" --seed 5 --multigpu 0.3 --gpuspec 0.2
timeout $RUN_TIMEOUT_S "$SIM" gen-openb --pods "$BASE" --out "$TMP/b.csv" --seed 5 --multigpu 0.3 --gpuspec 0.2
timeout $RUN_TIMEOUT_S "$SIM" gen-openb --pods "$BASE" --out "$TMP/c.csv" --seed 6 --multigpu 0.3 --gpuspec 0.2
check "same seed, same file" cmp -s "$TMP/a.csv" "$TMP/b.csv"
check "another seed, another file" bash -c "! cmp -s '$TMP/a.csv' '$TMP/c.csv'"

bad_exit() { # expected message, then the arguments
  local want=$1
  shift
  local msg
  msg=$("$SIM" gen-openb "$@" 2>&1 >/dev/null)
  local rc=$?
  [ $rc -eq 2 ] && [[ "$msg" == *"$want"* ]]
}
check "--multigpu 1.5 is refused" bad_exit "--multigpu" --pods "$BASE" --out "$TMP/x.csv" --multigpu 1.5
check "--cpu abc is refused" bad_exit "--cpu" --pods "$BASE" --out "$TMP/x.csv" --cpu abc
check "--seed -1 is refused" bad_exit "--seed" --pods "$BASE" --out "$TMP/x.csv" --seed -1
check "unknown option is refused" bad_exit "--bogus" --pods "$BASE" --out "$TMP/x.csv" --bogus 1
check "missing --out is refused" bad_exit "--out" --pods "$BASE"

# core = the tessera scorer, figure for figure (the table minus the name and speed)
timeout $RUN_TIMEOUT_S "$SIM" fgd --quiet --jobs 1 --nodes "$NODES" --pods "$TMP/a.csv" \
  --policy tessera,core --seeds 1 >"$TMP/t.txt"
figures() { awk -v p="$1" '$1 == p { $1 = ""; $NF = ""; print }' "$TMP/t.txt"; }
check "core row printed" test -n "$(figures core)"
check "core gives the tessera scorer's figures" test "$(figures core)" = "$(figures tessera)"
# and on 4-GPU nodes, where the scorer's scale follows the largest node
"$SIM" gen-cluster --nodes "$NODES" --out "$TMP/g4n.csv" --gpus-per-node 4
timeout $RUN_TIMEOUT_S "$SIM" fgd --quiet --jobs 1 --nodes "$TMP/g4n.csv" --pods "$TMP/a.csv" \
  --policy tessera,core --seeds 1 >"$TMP/t.txt"
check "core gives the tessera scorer's figures on 4-GPU nodes" \
  test -n "$(figures core)" -a "$(figures core)" = "$(figures tessera)"
# and on a cluster short of CPU, where a pod that asks no GPU goes first to a
# node with no fully free GPU
"$SIM" gen-cluster --nodes "$NODES" --out "$TMP/c60n.csv" --cpu-per-gpu 0.6
timeout $RUN_TIMEOUT_S "$SIM" fgd --quiet --jobs 1 --nodes "$TMP/c60n.csv" --pods "$TMP/a.csv" \
  --policy tessera,core --seeds 1 >"$TMP/t.txt"
check "core gives the tessera scorer's figures on a cluster short of CPU" \
  test -n "$(figures core)" -a "$(figures core)" = "$(figures tessera)"

# core-learned (no trace list: the cycle learns the mix online, as tesserad)
# within half a point of core on the default workload
timeout $RUN_TIMEOUT_S "$SIM" fgd --quiet --jobs 1 --nodes "$NODES" --pods "$BASE" \
  --policy core,core-learned --seeds 1 --json "$TMP/l.json" >/dev/null
check "core-learned within 0.5 points of core" python3 -c "
import json, sys
r = {x['policy']: x['alloc_pct_at_arrived_100']['mean'] for x in json.load(open('$TMP/l.json'))['results']}
sys.exit(0 if abs(r['core'] - r['core-learned']) < 0.5 else 1)"

# ---- --share-milli: share sizes uniform in LO..HI, steps of 10 -------------
"$SIM" gen-openb --pods "$BASE" --out "$TMP/su.csv" --seed 5 --share-milli 100-900
check "--share-milli 100-900: every share in 100..900, a multiple of 10, mean 480-520" \
  python3 -c "
import csv, sys
m = [int(r['gpu_milli']) for r in csv.DictReader(open('$TMP/su.csv'))
     if r['num_gpu'] == '1' and int(r['gpu_milli']) < 1000]
sys.exit(not (m and all(100 <= x <= 900 and x % 10 == 0 for x in m) and
              480 <= sum(m) / len(m) <= 520 and len(set(m)) == 81))"
for v in 0-5 900-100 5 100-1000; do
  "$SIM" gen-openb --pods "$BASE" --out "$TMP/su.csv" --share-milli $v 2>"$TMP/err"
  rc=$?
  check "--share-milli $v exits 2 naming the option" \
    test "$rc" = 2 -a -n "$(grep -F -- "--share-milli" "$TMP/err")"
done

# ---- --halves: one-GPU pods turned into 500-milli shares ------------------
"$SIM" gen-openb --pods "$BASE" --out "$TMP/h0.csv" --seed 5 --cpu 0.25
"$SIM" gen-openb --pods "$BASE" --out "$TMP/h5.csv" --seed 5 --cpu 0.25 --halves 0.5
check "--halves 0.5: half the one-GPU pods become 500-milli shares, CPU and memory kept" \
  python3 -c "
import collections, csv, sys
def rows(p):
    return list(csv.DictReader(open(p)))
a, b = rows('$TMP/h0.csv'), rows('$TMP/h5.csv')
one = lambda rs: [r for r in rs if r['num_gpu'] == '1' and int(r['gpu_milli']) == 1000]
half = lambda rs: [r for r in rs if r['num_gpu'] == '1' and int(r['gpu_milli']) == 500]
res = lambda rs, f: collections.Counter((r['cpu_milli'], r['memory_mib']) for r in f(rs))
n1, h0 = len(one(a)), len(half(a))
ok = len(a) == len(b) and abs(len(half(b)) - h0 - n1 / 2) <= 1 and \\
    len(one(b)) + len(half(b)) == n1 + h0 and \\
    res(a, one) + res(a, half) == res(b, one) + res(b, half)
sys.exit(not ok)"
"$SIM" gen-openb --pods "$BASE" --out "$TMP/h.csv" --halves 1.5 2>"$TMP/err"
rc=$?
check "--halves 1.5 exits 2 naming the option" \
  test "$rc" = 2 -a -n "$(grep -F -- "--halves" "$TMP/err")"

# ---- gen-cluster: cluster variants keep the GPUs and reshape the nodes ------
# cluster FILE: GPUs, nodes, CPU milli per GPU, memory MiB per GPU, models,
# and how many models have more than one node not of the --gpus-per-node size
cluster() {
  python3 - "$1" "${2:-0}" <<'PY'
import csv, collections, sys
rows = list(csv.DictReader(open(sys.argv[1])))
g = sum(int(r["gpu"]) for r in rows)
odd = collections.Counter(r["model"] for r in rows if int(sys.argv[2]) and int(r["gpu"]) != int(sys.argv[2]))
share = collections.Counter()
for r in rows:
    share[r["model"]] += int(r["gpu"])
print(g, len(rows), round(sum(int(r["cpu_milli"]) for r in rows) / g),
      round(sum(int(r["memory_mib"]) for r in rows) / g),
      ",".join("%s:%.2f" % (m, share[m] / g) for m in sorted(share)),
      sum(1 for m in odd if odd[m] > 1))
PY
}
read -r g0 n0 c0 m0 _ _ < <(cluster "$NODES")
for G in 2 4 8; do
  "$SIM" gen-cluster --nodes "$NODES" --out "$TMP/c$G.csv" --gpus-per-node $G
  read -r g n c m _ odd < <(cluster "$TMP/c$G.csv" $G)
  check "gen-cluster $G-GPU nodes keep the $g0 GPUs" test "$g" = "$g0"
  check "gen-cluster $G-GPU nodes: at most one other node per model" test "$odd" = 0
  check "gen-cluster $G-GPU nodes keep CPU per GPU within 1 %" \
    python3 -c "import sys; sys.exit(abs($c - $c0) > 0.01 * $c0)"
done
"$SIM" gen-cluster --nodes "$NODES" --out "$TMP/cpu.csv" --cpu-per-gpu 0.6 --mem-per-gpu 1.5
read -r g n c m _ _ < <(cluster "$TMP/cpu.csv")
check "gen-cluster --cpu-per-gpu 0.6 keeps the nodes" test "$g $n" = "$g0 $n0"
check "gen-cluster --cpu-per-gpu 0.6 gives 60 % of the CPU (1 %)" \
  python3 -c "import sys; sys.exit(abs($c - 0.6 * $c0) > 0.01 * $c0)"
check "gen-cluster --mem-per-gpu 1.5 gives 150 % of the memory (1 %)" \
  python3 -c "import sys; sys.exit(abs($m - 1.5 * $m0) > 0.01 * $m0)"
"$SIM" gen-cluster --nodes "$NODES" --out "$TMP/mix.csv" --models T4:0.5,G2:0.25,V100M32:0.25
read -r g _ _ _ mix _ < <(cluster "$TMP/mix.csv")
check "gen-cluster --models gives the mix" test "$g $mix" = "$g0 G2:0.25,T4:0.50,V100M32:0.25"
for bad in "--gpus-per-node 0=--gpus-per-node" "--gpus-per-node 17=--gpus-per-node" \
           "--cpu-per-gpu 0=--cpu-per-gpu" "--mem-per-gpu x=--mem-per-gpu" \
           "--models T4:0.5=--models" "--models K80:1=--models" "--frob 1=unknown option"; do
  "$SIM" gen-cluster --nodes "$NODES" --out "$TMP/bad.csv" ${bad%%=*} 2>"$TMP/err"
  rc=$?
  check "gen-cluster ${bad%%=*} exits 2 naming ${bad#*=}" \
    test "$rc" = 2 -a -n "$(grep -F -- "${bad#*=}" "$TMP/err")"
done

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
