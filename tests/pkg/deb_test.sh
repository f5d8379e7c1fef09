#!/usr/bin/env bash
# deb_test.sh - the Debian packages end to end (docs/install.md).
#
#   tests/pkg/deb_test.sh SOURCE_DIR
#
# Builds the four packages from a copy of the tree's tracked files (the same
# debian/rules as `make deb`; about a minute on 2 cores), runs lintian on them
# (no errors), unpacks them into a fresh root with dpkg -x, runs every
# program's --version from there (the changelog's version), and has
# systemd-analyze verify check the two units inside that root: any complaint
# fails the test, since verify exits 0 on unknown keys and bad values.
# Exits 77 (skipped) where dpkg-buildpackage's tools or systemd-analyze are
# missing; scripts/install-deps installs them.
set -euo pipefail

src=$(cd "${1:?usage: $0 SOURCE_DIR}" && pwd)
for tool in dpkg-deb dh lintian systemd-analyze; do
  command -v "$tool" >/dev/null || { echo "deb_test: $tool missing: skipped"; exit 77; }
done
work=$(mktemp -d /tmp/tessera-deb.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "deb_test: FAIL: $*" >&2; exit 1; }

# the tracked files as they are in the working tree (no build folders)
mkdir "$work/src"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  (cd "$src" && git ls-files -z | xargs -0 cp --parents -P -t "$work/src" 2>/dev/null) || true
  # files deleted in the working tree but still tracked are simply absent
else
  tar -C "$src" --exclude='./build*' --exclude=./.git -cf - . | tar -C "$work/src" -xf -
fi
[ -x "$work/src/debian/rules" ] || fail "debian/rules missing from the copy"

# what an earlier build left in debian/ (a copy without git's ignores)
(cd "$work/src" && debian/rules clean >"$work/clean.log" 2>&1) || fail "debian/rules clean failed"
start=$(date +%s)
if ! (cd "$work/src" && DEB_BUILD_OPTIONS="parallel=$(nproc)" DEB_OUT="$work/debs" \
      debian/rules binary >"$work/build.log" 2>&1); then
  tail -n 40 "$work/build.log" >&2
  fail "debian/rules binary failed"
fi
echo "deb_test: packages built in $(( $(date +%s) - start )) s"

version=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$src/debian/changelog")
debs=()
for p in tessera-controller tessera-agent tessera-client libtessera-cuda; do
  f="$work/debs/${p}_${version}_$(dpkg --print-architecture).deb"
  [ -f "$f" ] || fail "no package $p ($f)"
  debs+=("$f")
done

# lintian: errors fail (anything else it says is printed)
rc=0
lint=$(lintian --fail-on error "${debs[@]}" 2>&1) || rc=$?
grep -v 'running with root privileges' <<<"$lint" || true
[ "$rc" -eq 0 ] || fail "lintian reports errors"

root="$work/root"
mkdir "$root"
for f in "${debs[@]}"; do dpkg -x "$f" "$root"; done
for b in tesserad tessera-agent tessera tessera-sim; do
  [ -x "$root/usr/bin/$b" ] || fail "$b not in the packages"
  out=$("$root/usr/bin/$b" --version) || fail "$b --version exited $?"
  [ "$out" = "$b $version" ] || fail "$b --version said \"$out\", want \"$b $version\""
  echo "deb_test: $out"
done
for f in usr/share/man/man1/tessera.1.gz usr/share/man/man1/tessera-sim.1.gz \
         usr/share/man/man8/tesserad.8.gz usr/share/man/man8/tessera-agent.8.gz \
         etc/tessera/tesserad.yaml etc/default/tessera-agent \
         usr/lib/sysusers.d/tessera-controller.conf \
         "usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)/tessera/libtessera-cuda.so"; do
  [ -e "$root/$f" ] || fail "$f not in the packages"
done

units="$root/lib/systemd/system"
grep -qx 'KillMode=process' "$units/tessera-agent.service" || fail "agent unit: KillMode=process"
grep -qx 'KillSignal=SIGKILL' "$units/tessera-agent.service" || fail "agent unit: KillSignal=SIGKILL"
grep -qx 'Delegate=yes' "$units/tessera-agent.service" || fail "agent unit: Delegate=yes"
grep -qx 'ProtectSystem=strict' "$units/tesserad.service" || fail "controller unit: ProtectSystem"
# the units' dependencies (sysinit.target, ...) from the host, under the root
cp -an /lib/systemd/system/. "$units/" 2>/dev/null || true
out=$(systemd-analyze verify --man=no --root="$root" /lib/systemd/system/tesserad.service \
      /lib/systemd/system/tessera-agent.service 2>&1) || fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify complains: $out"
echo "deb_test: lintian clean, --version and systemd-analyze verify passed"
