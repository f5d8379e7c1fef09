#!/usr/bin/env bash
# cli.sh - the command-line contract of tessera-alloc-replay and
# tessera-alloc-gen, as CTest runs it:
#
#   tests/alloc/cli.sh REPLAY_BIN GEN_BIN DATA_DIR
#
# Usage errors (no trace, unknown allocator, bad --capacity, unknown preset)
# exit 2; a trace that cannot be read exits 1 naming the file; a warm replay
# of the shipped excerpt prints every allocation matching the trace; a
# capacity too small is reported as an OOM at an event (exit 0: it is a
# result); --json is one JSON object with the documented keys; a generated
# trace replays through all three allocators. Every check counts; the last
# line is "N passed, M failed" and any failure exits 1.
set -uo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 REPLAY_BIN GEN_BIN DATA_DIR" >&2
  exit 2
fi
REPLAY=$1
GEN=$2
DATA=$3
EX=$DATA/medium_128_inference

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
pass() { passed=$((passed + 1)); }
fail() {
  failed=$((failed + 1))
  echo "FAIL: $*"
}

# expect_rc WANT DESCRIPTION -- command...: runs it, keeps stdout+stderr in $tmp/out
expect_rc() {
  local want=$1 what=$2
  shift 3
  "$@" >"$tmp/out" 2>&1
  local rc=$?
  if [ "$rc" -eq "$want" ]; then pass; else fail "$what: exit $rc, want $want"; cat "$tmp/out"; fi
}
expect_out() {
  if grep -q -- "$1" "$tmp/out"; then pass; else fail "$2: output lacks '$1'"; cat "$tmp/out"; fi
}

expect_rc 0 "replay --help" -- "$REPLAY" --help
expect_out "usage: tessera-alloc-replay" "replay --help"
expect_rc 2 "replay without a trace" -- "$REPLAY" --allocator tessera
expect_rc 2 "unknown allocator" -- "$REPLAY" "$EX.events.csv" --allocator jemalloc
expect_out "unknown allocator jemalloc" "unknown allocator"
expect_rc 2 "bad capacity" -- "$REPLAY" "$EX.events.csv" --allocator tessera --capacity 12Q
expect_out "--capacity: not a size" "bad capacity"
expect_rc 1 "missing trace" -- "$REPLAY" "$tmp/none.events.csv" --allocator tessera
expect_out "none.events.csv: cannot open" "missing trace"
expect_rc 1 "warm needs pytorch" -- "$REPLAY" "$EX.events.csv" --allocator tessera --warm \
  --segments "$EX.segments.csv"

expect_rc 0 "warm replay" -- "$REPLAY" "$EX.events.csv" --allocator pytorch --warm \
  --segments "$EX.segments.csv"
expect_out "addresses matching the trace: 674 of 674" "warm replay"
expect_out "segment_alloc: model 0 (0.0 MiB), trace 0 (0.0 MiB)" "warm replay"

expect_rc 0 "replay with a small capacity" -- "$REPLAY" "$EX.events.csv" --allocator tessera \
  --capacity 1660MiB
expect_out "OOM: yes, at event seq" "small capacity"
expect_rc 0 "replay with room" -- "$REPLAY" "$EX.events.csv" --allocator tessera --capacity 2G
expect_out "OOM: no" "replay with room"

expect_rc 0 "json" -- "$REPLAY" "$EX.events.csv" --allocator pytorch-expandable --json --time
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert {"peak_requested","peak_reserved","fragmentation","device_calls","calls_per_1000_ops","oom","median_pair_ns","calls"} <= set(d), d' "$tmp/out"; then
  pass
else
  fail "json: not one object with the documented keys"
fi

expect_rc 2 "unknown preset" -- "$GEN" --preset nope --out "$tmp/g"
expect_out "varlen-gpt2m" "unknown preset lists the presets"
expect_rc 0 "generate" -- "$GEN" --preset multi-4 --steps 2 --batch 2 --seq-max 256 --out "$tmp/g"
expect_out "g.events.csv:" "generate"
for a in tessera pytorch pytorch-expandable; do
  expect_rc 0 "replay generated ($a)" -- "$REPLAY" "$tmp/g.events.csv" --allocator "$a"
  expect_out "fragmentation:" "replay generated ($a)"
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
