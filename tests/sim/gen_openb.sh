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
# (learning the mix online, as tesserad does) comes within half a point. Every check counts; the
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

# core-learned (no trace list: the cycle learns the mix online, as tesserad)
# within half a point of core on the default workload
timeout $RUN_TIMEOUT_S "$SIM" fgd --quiet --jobs 1 --nodes "$NODES" --pods "$BASE" \
  --policy core,core-learned --seeds 1 --json "$TMP/l.json" >/dev/null
check "core-learned within 0.5 points of core" python3 -c "
import json, sys
r = {x['policy']: x['alloc_pct_at_arrived_100']['mean'] for x in json.load(open('$TMP/l.json'))['results']}
sys.exit(0 if abs(r['core'] - r['core-learned']) < 0.5 else 1)"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
