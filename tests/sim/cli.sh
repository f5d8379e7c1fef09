#!/usr/bin/env bash
# cli.sh - tessera-sim's command-line contract, as CTest runs it:
#
#   tests/sim/cli.sh SIM_BIN DATA_DIR
#
# Proves what a user and a script rely on: bad input (malformed node or pod
# CSV, unknown option or policy, bad --seeds, missing --nodes) exits 2 before
# anything runs, with a message naming file:line: field so the bad row can be
# found; a tiny valid run (2 seeds, all seven policies, on the small openb
# fixtures) exits 0 and prints one table row per policy; --json has the shape
# the plotting scripts read; and the results are a function of the seed alone
# (identical --csv for the same seed, for --jobs 1 and --jobs 2). For
# `replay`: bad inputs (unequal nodes, unknown tenant, guarantees beyond the
# cluster, ...) exit 2 naming the field; a run with tenants writes --json,
# --series, --plot and --jobs-out of the documented shape (the SVG must
# parse as XML; a row per job agreeing with the JSON), and a --jobs-out that
# cannot be opened or written exits 1 naming it;
# the Philly fixture gives the same figures by --vc-nodes and by
# --cluster/--tenants; a Pollux run has no tenants. Every check counts; the
# the Pollux job model (--job-model pollux) refuses bad options and gives
# the pinned figures on tests/data/pollux-tiny. The
# last line is "N passed, M failed" and any failure exits 1.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 SIM_BIN DATA_DIR" >&2
  exit 2
fi
SIM=$1
DATA=$2
RUN_TIMEOUT_S=120
POLICIES=random,dotprod,clustering,packing,bestfit,fgd,tessera
NODES=$DATA/openb-nodes-sim.csv
PODS=$DATA/openb-pods-small.csv

. "$(dirname "$0")/lib.sh"

for f in "$NODES" "$PODS"; do
  if [ ! -f "$f" ]; then
    echo "cli.sh: missing fixture $f" >&2
    exit 2
  fi
done

# ---- malformed node lists ---------------------------------------------------
NH="sn,cpu_milli,memory_mib,gpu,model"
printf 'sn,cpu_milli,gpu,model\nn1,1000,2,T4\n' >"$tmp/n-missing.csv"
printf '%s\nn1,1000,1024,2,T4\nn2,1000,lots,2,T4\n' "$NH" >"$tmp/n-nan.csv"
printf '%s\nn1,-64000,1024,2,T4\n' "$NH" >"$tmp/n-neg.csv"
printf '%s\nn1,1000,1024,2,T4\nn2,1000,1024,2,K80\n' "$NH" >"$tmp/n-model.csv"
: >"$tmp/n-empty.csv"
printf '%s\nn1,1000,1024,0,\n' "$NH" >"$tmp/n-nogpu.csv"
good_pods=(--pods "$PODS" --policy fgd --seeds 1 --quiet)
expect_bad "nodes: missing column" "n-missing.csv:1: header: missing column \"memory_mib\"" \
  fgd --nodes "$tmp/n-missing.csv" "${good_pods[@]}"
expect_bad "nodes: non-number" "n-nan.csv:3: memory_mib: not a whole number" \
  fgd --nodes "$tmp/n-nan.csv" "${good_pods[@]}"
expect_bad "nodes: negative" "n-neg.csv:2: cpu_milli: must not be negative" \
  fgd --nodes "$tmp/n-neg.csv" "${good_pods[@]}"
expect_bad "nodes: unknown model" "n-model.csv:3: model: unknown GPU model \"K80\"" \
  fgd --nodes "$tmp/n-model.csv" "${good_pods[@]}"
expect_bad "nodes: empty file" "n-empty.csv:1: header: empty file" \
  fgd --nodes "$tmp/n-empty.csv" "${good_pods[@]}"
expect_bad "nodes: no GPUs" "n-nogpu.csv: the cluster has no GPUs" \
  fgd --nodes "$tmp/n-nogpu.csv" "${good_pods[@]}"
expect_bad "nodes: no such file" "$tmp/nope.csv: cannot open" \
  fgd --nodes "$tmp/nope.csv" "${good_pods[@]}"

# ---- malformed pod lists -------------------------------------------------------
PH="name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec"
printf 'name,cpu_milli,memory_mib,num_gpu\np1,1000,1024,1\n' >"$tmp/p-missing.csv"
printf '%s\np1,1000,1024,1,500,\np2,1000,1024,x,500,\n' "$PH" >"$tmp/p-nan.csv"
printf '%s\np1,1000,-1,1,500,\n' "$PH" >"$tmp/p-neg.csv"
printf '%s\np1,1000,1024,1,1000,T4|K80\n' "$PH" >"$tmp/p-model.csv"
printf '%s\np1,1000,1024,1,1500,\n' "$PH" >"$tmp/p-milli.csv"
: >"$tmp/p-empty.csv"
good_nodes=(--nodes "$NODES" --policy fgd --seeds 1 --quiet)
expect_bad "pods: missing column" "p-missing.csv:1: header: missing column \"gpu_milli\"" \
  fgd --pods "$tmp/p-missing.csv" "${good_nodes[@]}"
expect_bad "pods: non-number" "p-nan.csv:3: num_gpu: not a whole number" \
  fgd --pods "$tmp/p-nan.csv" "${good_nodes[@]}"
expect_bad "pods: negative" "p-neg.csv:2: memory_mib: must not be negative" \
  fgd --pods "$tmp/p-neg.csv" "${good_nodes[@]}"
expect_bad "pods: unknown model" "p-model.csv:2: gpu_spec: unknown GPU model \"K80\"" \
  fgd --pods "$tmp/p-model.csv" "${good_nodes[@]}"
expect_bad "pods: gpu_milli > 1000" "p-milli.csv:2: gpu_milli: 1500 is larger than 1000" \
  fgd --pods "$tmp/p-milli.csv" "${good_nodes[@]}"
expect_bad "pods: empty file" "p-empty.csv:1: header: empty file" \
  fgd --pods "$tmp/p-empty.csv" "${good_nodes[@]}"

# ---- bad command lines -----------------------------------------------------------
both=(--nodes "$NODES" --pods "$PODS")
expect_bad "no arguments" "usage:"
expect_bad "unknown experiment" "unknown experiment \"inflate\"" inflate "${both[@]}" --policy fgd
expect_bad "unknown option" "unknown option \"--bogus\"" fgd "${both[@]}" --policy fgd --bogus 1
expect_bad "option without value" "--seeds: needs a value" fgd "${both[@]}" --policy fgd --seeds
expect_bad "unknown policy" "unknown policy \"nope\"" fgd "${both[@]}" --policy fgd,nope
expect_bad "empty policy list" "--policy: empty list" fgd "${both[@]}" --policy ,
for s in "5-3" "abc" "-1" "1-" "1,,x" "" "1-2000"; do
  expect_bad "bad --seeds \"$s\"" "--seeds: expected" fgd "${both[@]}" --policy fgd --seeds "$s"
done
expect_bad "missing --nodes" "--nodes: required" fgd --pods "$PODS" --policy fgd
expect_bad "missing --pods" "--pods: required" fgd --nodes "$NODES" --policy fgd
expect_bad "missing --policy" "--policy: required" fgd "${both[@]}"
expect_bad "bad --jobs" "--jobs: must be 1..64" fgd "${both[@]}" --policy fgd --jobs 0
expect_bad "bad --tune" "--tune: must be a number" fgd "${both[@]}" --policy fgd --tune x

# ---- a tiny valid run --------------------------------------------------------------
sim fgd "${both[@]}" --policy "$POLICIES" --seeds 1-2 --quiet --json "$tmp/run.json" \
  --csv "$tmp/run.csv"
if [ "$rc" -ne 0 ]; then
  fail "valid run: exit $rc, expected 0"
else
  pass
  # one row per policy, in the order given, each with 2 seeds and a number
  rows=$(awk 'NR > 2 { print $1 ":" $2 ":" ($3 ~ /^[0-9.]+$/) }' "$tmp/out" | paste -sd' ')
  want=$(echo "$POLICIES" | tr ',' '\n' | sed 's/$/:2:1/' | paste -sd' ')
  if [ "$rows" = "$want" ] && [ "$(wc -l <"$tmp/out")" -eq 9 ]; then
    pass
  else
    fail "valid run: table rows \"$rows\", expected \"$want\""
  fi
  if head -n 1 "$tmp/out" | grep -qF "workload openb-pods-small, 352 GPUs"; then
    pass
  else
    fail "valid run: table title \"$(head -n 1 "$tmp/out")\""
  fi
fi

# ---- --json shape --------------------------------------------------------------------
if python3 - "$tmp/run.json" "$POLICIES" <<'EOF'; then pass; else fail "--json: wrong shape"; fi
import json, sys

d = json.load(open(sys.argv[1]))
policies = sys.argv[2].split(",")
assert isinstance(d["workload"], str) and d["workload"] == "openb-pods-small", d["workload"]
assert type(d["cluster_gpus"]) is int and d["cluster_gpus"] == 352, d["cluster_gpus"]
res = d["results"]
assert isinstance(res, list) and [r["policy"] for r in res] == policies, res
def num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)
for r in res:
    assert r["seeds"] == [1, 2], r["seeds"]
    for k in ("alloc_pct_at_arrived_100", "frag_pct_at_arrived_100", "frag_ratio_at_arrived_100"):
        assert num(r[k]["mean"]) and num(r[k]["sd"]) and r[k]["sd"] >= 0, (k, r[k])
    assert 0 < r["alloc_pct_at_arrived_100"]["mean"] <= 100, r["alloc_pct_at_arrived_100"]
    assert num(r["pods_per_s"]) and r["pods_per_s"] > 0
    for c in ("alloc_pct", "frag_pct"):
        curve = r["curve"][c]
        assert isinstance(curve, list) and len(curve) == 131, (c, len(curve))
        assert all(v is None or num(v) for v in curve), c
        assert num(curve[100]), (c, curve[100])
EOF

# ---- determinism ---------------------------------------------------------------------
det() { # det OUT JOBS SEEDS
  sim fgd "${both[@]}" --policy "$POLICIES" --seeds "$3" --quiet --jobs "$2" --csv "$1"
  [ "$rc" -eq 0 ] || fail "determinism run (jobs $2, seeds $3): exit $rc"
}
det "$tmp/a.csv" 1 7-8
det "$tmp/b.csv" 1 7-8
det "$tmp/c.csv" 2 7-8
det "$tmp/d.csv" 2 9-10
if [ -s "$tmp/a.csv" ] && cmp -s "$tmp/a.csv" "$tmp/b.csv"; then
  pass
else
  fail "same seed, two runs: --csv differs"
fi
if [ -s "$tmp/a.csv" ] && cmp -s "$tmp/a.csv" "$tmp/c.csv"; then
  pass
else
  fail "same seed, --jobs 1 vs --jobs 2: --csv differs"
fi
# the rows have one line per policy, seed and bin; other seeds give other numbers
if [ "$(wc -l <"$tmp/a.csv")" -eq $((1 + 7 * 2 * 131)) ] &&
  ! cmp -s <(cut -d, -f2,4- "$tmp/a.csv") <(cut -d, -f2,4- "$tmp/d.csv"); then
  pass
else
  fail "--csv: expected 1835 lines, and different seeds to give different results"
fi

# ---- replay: inputs, outputs, and the same figures by either route ----------------
PJ=$DATA/replay-philly-small.csv
JOBS=$DATA/replay-jobs-small.csv
TEN=$DATA/replay-tenants-small.yaml
CL=$DATA/replay-cluster-small.yaml
ours=(--jobs "$JOBS" --tenants "$TEN" --cluster "$CL")
expect_bad "replay: unequal nodes" "the same GPUs on every node" \
  replay --jobs "$JOBS" --tenants "$TEN" --cluster "$DATA/cluster-small.yaml" --policy fifo
expect_bad "replay: --cluster and --nodes" "--cluster: give either" \
  replay "${ours[@]}" --nodes 4 --policy fifo
expect_bad "replay: bad --checkpoint-s" "--checkpoint-s: must be a number" \
  replay "${ours[@]}" --policy tessera --checkpoint-s -5
expect_bad "replay: guarantees beyond the cluster" "guarantees add up to 16 GPUs, the cluster has 8" \
  replay --jobs "$JOBS" --tenants "$TEN" --nodes 2 --gpus-per-node 4 --policy tessera
printf 'name,submit_s,gpus,duration_s,tenant\na,0,1,10,vision\nb,5,1,10,audio\n' >"$tmp/j-ten.csv"
expect_bad "replay: unknown tenant" "j-ten.csv:3: tenant: \"audio\" is not one of the 2 tenants" \
  replay --jobs "$tmp/j-ten.csv" --tenants "$TEN" --cluster "$CL" --policy fifo
expect_bad "replay: --tenants on Pollux" "--tenants: only for" \
  replay --jobs "$DATA/replay-pollux-small.csv" --tenants "$TEN" --policy fifo
expect_bad "replay: missing tenants file" "nope.yaml: cannot open" \
  replay --jobs "$JOBS" --tenants "$tmp/nope.yaml" --policy fifo
printf 'tenants:\n  lab:\n    guaranteed:\n      gpu: {T4: 8}\n    teams:\n      vision:\n        guaranteed:\n          gpu: {T4: 8}\n      speech: {}\n' >"$tmp/t0.yaml"
expect_bad "replay: siloed tenant too small" "tenants.speech: guaranteed 0 GPUs, job eval-c needs 1" \
  replay --jobs "$JOBS" --tenants "$tmp/t0.yaml" --cluster "$CL" --policy tessera,srtf
expect_bad "replay: bad --load" "--load: must be a number in [0.01, 100]" \
  replay "${ours[@]}" --policy fifo --load 0

expect_bad "replay: unknown --sched field" "--sched: unknown field in \"speed=3\"" \
  replay "${ours[@]}" --policy tessera --sched speed=3
expect_bad "replay: --sched without =" "--sched: expected NAME=VALUE" \
  replay "${ours[@]}" --policy tessera --sched fair_reclaim
expect_bad "replay: bad --sched value" "--sched: las_split_cross_tier: must be true or false" \
  replay "${ours[@]}" --policy tessera --sched las_split_cross_tier=yes
expect_bad "replay: --sched out of range" "--sched: max_preemptions_hour: must be an integer" \
  replay "${ours[@]}" --policy tessera --sched max_preemptions_hour=2.5

# --sched reaches tessera's scheduler: no victim searches, no preemption (one by default)
sim replay "${ours[@]}" --policy tessera --checkpoint-s 600 --json "$tmp/s0.json"
sim replay "${ours[@]}" --policy tessera --checkpoint-s 600 --sched max_preemptors_cycle=0 \
  --json "$tmp/s1.json"
if [ "$rc" -eq 0 ] && python3 - "$tmp/s0.json" "$tmp/s1.json" <<'PY'; then pass; else fail "replay --sched: exit $rc, or it did not reach the scheduler"; fi
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
assert a["sched"] == [] and b["sched"] == ["max_preemptors_cycle=0"], (a["sched"], b["sched"])
assert a["results"][0]["preemptions"] >= 1 and b["results"][0]["preemptions"] == 0
PY

# --load 2: the same jobs arriving twice as fast (submit times halved)
sim replay "${ours[@]}" --policy tessera --load 2 --series "$tmp/l.csv" --json "$tmp/l.json"
if [ "$rc" -eq 0 ] && python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["load"] == 2' "$tmp/l.json" &&
  grep -q '^tessera,jobs,150,' "$tmp/l.csv"; then
  pass
else
  fail "replay --load 2: exit $rc, or no event at 150 s (train-e, submitted at 300)"
fi

sim replay "${ours[@]}" --policy fifo,sjf,srtf,tessera --checkpoint-s 600 \
  --json "$tmp/r.json" --series "$tmp/r.csv" --plot "$tmp/r.svg" --jobs-out "$tmp/j.csv"
if [ "$rc" -ne 0 ]; then
  fail "replay with tenants: exit $rc, expected 0"
else
  pass
fi
if python3 - "$tmp/r.json" "$tmp/r.csv" "$tmp/r.svg" "$tmp/j.csv" "$JOBS" <<'PY'; then pass; else fail "replay outputs: wrong shape"; fi
import csv, json, sys
import xml.etree.ElementTree as ET

d = json.load(open(sys.argv[1]))
assert set(d) >= {"jobs_file", "set", "results"} and d["set"] is None, d.keys()
assert d["checkpoint_s"] == 600 and d["cluster"] == {"nodes": 4, "gpus_per_node": 4}, d
want = {"policy", "jobs", "avg_jct_s", "p50_jct_s", "p99_jct_s", "avg_queue_s", "utilization_pct",
        "jain", "preemptions", "lost_gpu_s", "max_wait_s", "makespan_s", "tenants"}
res = d["results"]
assert [r["policy"] for r in res] == ["fifo", "sjf", "srtf", "tessera"], res
assert [r["mode"] for r in res] == ["siloed", "siloed", "siloed", "shared"], res
for r in res:
    assert want <= set(r), want - set(r)
    assert r["jobs"] == 6 and 0 < r["jain"] <= 1 and r["deficit_gpu_s"] >= 0, r
    assert [t["name"] for t in r["tenants"]] == ["vision", "speech"], r["tenants"]
    for t in r["tenants"]:
        assert {"name", "avg_jct_s", "share_vs_guarantee"} <= set(t), t
tessera = res[3]
assert tessera["deficit_gpu_s"] == 0, tessera
assert tessera["tenants"][0]["share_vs_guarantee"] > 1, tessera  # vision borrowed

rows = list(csv.reader(open(sys.argv[2])))
assert rows[0] == ["policy", "workload", "t_s", "busy_gpus", "utilization_pct", "queue_jobs",
                   "held_vision", "held_speech"], rows[0]
assert {r[0] for r in rows[1:]} == {"fifo", "sjf", "srtf", "tessera"}
for r in rows[1:]:
    busy, held = float(r[3]), float(r[6]) + float(r[7])
    assert r[1] == "jobs" and abs(busy - held) < 1e-6 and 0 <= float(r[4]) <= 100, r

root = ET.parse(sys.argv[3]).getroot()
assert root.tag == "{http://www.w3.org/2000/svg}svg", root.tag

# --jobs-out: a row per job and policy, by submission (ties in file order), agreeing with the json
jobs = list(csv.reader(open(sys.argv[4])))
assert jobs[0] == ["policy", "workload", "job", "tenant", "gpus", "submit_s", "work_s", "finish_s",
                   "jct_s", "queue_s", "starts", "preemptions", "lost_work_s"], jobs[0]
names = [r[0] for r in sorted(list(csv.reader(open(sys.argv[5])))[1:], key=lambda r: float(r[1]))]
for r in res:
    mine = [j for j in jobs[1:] if j[0] == r["policy"]]
    assert [j[2] for j in mine] == names, (r["policy"], mine)
    for j in mine:
        sub, work, fin, jct, q = map(float, j[5:10])
        assert j[1] == "jobs" and j[3] in ("vision", "speech"), j
        assert abs(fin - sub - jct) < 1e-2 and 0 <= q <= jct and jct >= work - 1e-2, j
        assert int(j[10]) >= 1 and int(j[11]) >= 0 and float(j[12]) >= 0, j
    assert abs(sum(float(j[8]) for j in mine) / len(mine) - r["avg_jct_s"]) < 1, r["policy"]
    assert sum(int(j[11]) for j in mine) == r["preemptions"], r["policy"]
text = " ".join("".join(e.itertext()) for e in root.iter("{http://www.w3.org/2000/svg}text"))
for word in ("tessera (shared)", "fifo (siloed)", "GPU utilisation (%)", "queue (jobs waiting)",
             "GPUs held per tenant", "vision", "speech", "time (minutes)"):
    assert word in text, word
PY

# --jobs-out that cannot be written: exit 1 naming it, before anything runs
sim replay "${ours[@]}" --policy fifo --jobs-out "$tmp/no/such/dir/j.csv"
if [ "$rc" -eq 1 ] && grep -qF -- "--jobs-out: $tmp/no/such/dir/j.csv" "$tmp/err" && [ ! -s "$tmp/out" ]; then
  pass
else
  fail "replay --jobs-out to a missing directory: exit $rc, expected 1 naming it"
fi

# --jobs-out whose writes fail (a full device): exit 1 naming it
if [ -w /dev/full ]; then
  sim replay "${ours[@]}" --policy fifo --jobs-out /dev/full
  if [ "$rc" -eq 1 ] && grep -qF -- "/dev/full: cannot write" "$tmp/err"; then
    pass
  else
    fail "replay --jobs-out /dev/full: exit $rc, expected 1 naming it"
  fi
fi

# Philly: the VC file, or a cluster and tenants file saying the same, give the same replay
sim replay --jobs "$PJ" --vc-nodes "$DATA/replay-philly-vc-small.csv" --policy fifo,srtf,tessera \
  --json "$tmp/p1.json"
rc1=$rc
sim replay --jobs "$PJ" --cluster "$DATA/replay-philly-cluster-small.yaml" \
  --tenants "$DATA/replay-philly-tenants-small.yaml" --policy fifo,srtf,tessera --json "$tmp/p2.json"
if [ "$rc1" -eq 0 ] && [ "$rc" -eq 0 ] &&
  python3 -c 'import json,sys; a,b=(json.load(open(f))["results"] for f in sys.argv[1:]); assert a==b and len(a)==3' \
    "$tmp/p1.json" "$tmp/p2.json"; then
  pass
else
  fail "replay: Philly by --vc-nodes and by --cluster/--tenants differ (exit $rc1, $rc)"
fi

# Pollux: no tenants: jain null, tenants empty, a series per workload without tenant columns
sim replay --jobs "$DATA/replay-pollux-small.csv" --set workloads --policy fifo,tessera --nodes 2 \
  --json "$tmp/x.json" --series "$tmp/x.csv" --plot "$tmp/x.svg"
if [ "$rc" -eq 0 ] && python3 - "$tmp/x.json" "$tmp/x.csv" "$tmp/x.svg" <<'PY'; then pass; else fail "replay pollux: outputs"; fi
import csv, json, sys
import xml.etree.ElementTree as ET

d = json.load(open(sys.argv[1]))
for r in d["results"]:
    assert r["jain"] is None and r["tenants"] == [] and r["mode"] == "pooled", r
rows = list(csv.reader(open(sys.argv[2])))
assert rows[0] == ["policy", "workload", "t_s", "busy_gpus", "utilization_pct", "queue_jobs"]
assert {r[1] for r in rows[1:]} == {w["name"] for w in d["results"][0]["workloads"]}
ET.parse(sys.argv[3])
PY

# ---- replay --job-model pollux: the tiny profile fixture, and bad options ----------
PT=$DATA/pollux-tiny
expect_bad "pollux: bad jobs kind" "--jobs-kind: must be rigid, elastic or elastic-tuned" \
  replay --job-model pollux --profiles "$PT/profiles" --workloads "$PT/workloads" --jobs-kind flexible
expect_bad "pollux: unknown job model" "--job-model: must be pollux" \
  replay --job-model gandiva --profiles "$PT/profiles" --workloads "$PT/workloads"
expect_bad "pollux: no profiles" "--profiles: required" \
  replay --job-model pollux --workloads "$PT/workloads"
expect_bad "pollux: unknown policy" "--policy: unknown policy" \
  replay --job-model pollux --profiles "$PT/profiles" --workloads "$PT/workloads" --policy tiresias,gandiva
expect_bad "pollux: empty profiles" "no application folders" \
  replay --job-model pollux --profiles "$tmp/none" --workloads "$PT/workloads"
sim replay --job-model pollux --profiles "$PT/profiles" --workloads "$PT/workloads" --nodes 2 \
  --jobs-out "$tmp/pm.csv"
if [ "$rc" -ne 0 ]; then
  fail "pollux: tiny run exit $rc"
elif ! grep -qE '^mean +8069\.83 +23098 ' "$tmp/out"; then
  fail "pollux: tiny run's mean row is not the pinned 8069.83 s / 23098 s"
elif [ "$(wc -l < "$tmp/pm.csv")" -ne 7 ]; then
  fail "pollux: --jobs-out has not a header and 6 jobs"
else
  pass
fi

finish
