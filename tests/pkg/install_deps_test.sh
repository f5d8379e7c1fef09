#!/bin/sh
# scripts/install-deps: each make target's list holds what it needs and nothing
# of the test suite's (docs/install.md, "Packages a build needs").
set -u
D=${1:?repo}
fail=0
no() { echo "FAIL: $*"; fail=1; }
for t in build demo deb; do
  l=$("$D/scripts/install-deps" --list $t) || no "--list $t exits non-zero"
  for p in chromium chromium-driver python3-selenium python3-torch prometheus postgresql clang; do
    echo "$l" | grep -qx "$p" && no "$t installs $p, which only make test needs"
  done
  echo "$l" | grep -qx libmicrohttpd-dev || no "$t lacks libmicrohttpd-dev"
done
"$D/scripts/install-deps" --list demo | grep -qx lintian && no "demo installs lintian"
l=$("$D/scripts/install-deps" --list test)
for p in chromium python3-torch prometheus postgresql lintian libcmocka-dev cmake; do
  echo "$l" | grep -qx "$p" || no "test lacks $p"
done
"$D/scripts/install-deps" --list nonsense >/dev/null 2>&1; rc=$?
[ $rc = 2 ] || no "an unknown target exits 2, not $rc"
[ $fail = 0 ] && echo "1 passed, 0 failed" || { echo "0 passed, 1 failed"; exit 1; }
