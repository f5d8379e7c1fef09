# lib.sh - what the simulator's shell tests share (sourced by cli.sh and
# bound.sh after they set SIM and RUN_TIMEOUT_S): a scratch folder removed
# at exit, the pass/fail counts, one bounded run of the simulator, the
# check of a refused run and the closing line "N passed, M failed".
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

pass() { passed=$((passed + 1)); }
fail() {
  failed=$((failed + 1))
  echo "FAIL: $*"
  if [ -s "$tmp/err" ]; then sed 's/^/  stderr: /' "$tmp/err" | head -n 5; fi
}

# sim ARGS...: runs the simulator; exit code in $rc, output in $tmp/out, $tmp/err
sim() {
  timeout "$RUN_TIMEOUT_S" "$SIM" "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# expect_bad NAME SUBSTRING ARGS...: exit 2, nothing on stdout, stderr has SUBSTRING
expect_bad() {
  local name=$1 want=$2
  shift 2
  sim "$@"
  if [ "$rc" -ne 2 ]; then
    fail "$name: exit $rc, expected 2"
  elif ! grep -qF -- "$want" "$tmp/err"; then
    fail "$name: stderr lacks \"$want\""
  elif [ -s "$tmp/out" ]; then
    fail "$name: printed a result on stdout"
  else
    pass
  fi
}

# finish: the counts; exit status 1 on any failure
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
