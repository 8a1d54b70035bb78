#!/bin/sh
# The Debian packages, end to end, from a clean clone of HEAD (uncommitted
# changes are not in it): dpkg-buildpackage -us -uc -b, lintian (any error
# or warning fails), install the four packages with apt, run each
# debian/tests test (the autopkgtest suite: the scripts themselves, from the
# clone's root, against the installed system, since autopkgtest proper
# wants a testbed of its own), then purge the packages, also on failure.
# Needs root (it installs packages) and debhelper, dpkg-dev, lintian.
# usage: package.sh [REPO]     (default: this checkout)
set -eu
repo=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
[ "$(id -u)" = 0 ] || { echo "package.sh: installs packages: run as root" >&2; exit 1; }
jobs=$(nproc 2>/dev/null || echo 2)
pkgs="libvsched0.3 libvsched-kvm0.3 libvsched-dev vsched-tools"
t0=$(date +%s)
# Each step with the wall time so far and the CPU time (user, system) its
# children used so far: on a shared runner the wall time alone says little.
step() {
	times >"$tmp/times" # in this shell: a $(times) subshell has no children
	echo "== package: $* ($(($(date +%s) - t0)) s; cpu $(tail -n 1 "$tmp/times"))"
}

tmp=$(mktemp -d)
installed=""
cleanup() {
	rc=$?
	if [ -n "$installed" ]; then
		step "purging $pkgs"
		dpkg --purge $pkgs >/dev/null || rc=1
		for p in $pkgs; do
			if dpkg -s "$p" >/dev/null 2>&1; then
				echo "package: FAIL: $p still installed"
				rc=1
			fi
		done
	fi
	rm -rf "$tmp"
	exit $rc
}
trap cleanup EXIT
trap 'exit 1' INT TERM

head=$(git -C "$repo" rev-parse HEAD)
step "clean clone of $head"
git clone -q --shared --no-checkout "$repo" "$tmp/vsched"
git -C "$tmp/vsched" checkout -q --detach "$head"
cd "$tmp/vsched"

step "dpkg-buildpackage -us -uc -b"
# noddebs: the -dbgsym packages are debhelper's own output, not checked here.
if ! DEB_BUILD_OPTIONS="noddebs parallel=$jobs" dpkg-buildpackage -us -uc -b \
	>"$tmp/build.log" 2>&1; then
	tail -60 "$tmp/build.log"
	echo "package: FAIL: dpkg-buildpackage"
	exit 1
fi
grep -E '^[0-9]+% tests passed' "$tmp/build.log" || true
changes=$(ls "$tmp"/vsched_*.changes)
ls "$tmp"/*.deb | sed 's|.*/|  |'

step "lintian"
# Tags at error or warning fail (an override needs a reason: debian/*.lintian-overrides).
# Shown: every tag down to pedantic. (Not --show-overrides: lintian then
# fails on the overridden warnings too.)
lintian --fail-on error,warning --display-info --pedantic \
	"$changes" >"$tmp/lintian.log" 2>&1 || {
	cat "$tmp/lintian.log"
	echo "package: FAIL: lintian"
	exit 1
}
grep -v '^N:' "$tmp/lintian.log" || true
if grep -qE '^[EW]: ' "$tmp/lintian.log"; then
	echo "package: FAIL: lintian errors or warnings"
	exit 1
fi
echo "lintian: no error, no warning; $(grep -c '^[IPX]: ' "$tmp/lintian.log" || true) info/pedantic/experimental tags (overrides: debian/*.lintian-overrides)"

step "installing the packages and the tests' dependencies"
for p in $pkgs; do
	if dpkg -s "$p" >/dev/null 2>&1; then
		echo "package: $p was installed before this run; it is replaced, and purged at the end"
	fi
done
# The tests' Depends (debian/tests/control), other than the packages.
deps=$(sed -n '/^Depends:/,/^[A-Z][a-z-]*:/p' debian/tests/control |
	grep -v '^Restrictions:' | sed 's/^Depends://; s/,/ /g' | tr -s ' \n' '\n\n' |
	grep -v -x -e '' $(for p in $pkgs; do printf ' -e %s' "$p"; done) | sort -u)
debs=""
for p in $pkgs; do
	debs="$debs $(ls "$tmp/${p}_"*.deb)"
done
installed=yes
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
	$debs $deps >"$tmp/apt.log" 2>&1 || {
	cat "$tmp/apt.log"
	echo "package: FAIL: apt-get install"
	exit 1
}
dpkg-query -W $pkgs

step "debian/tests against the installed packages"
# A source tree without any build output: the tests may use only what the
# packages installed.
debian/rules clean >/dev/null 2>&1
tests=$(sed -n 's/^Tests:[[:space:]]*//p' debian/tests/control)
for t in $tests; do
	mkdir -p "$tmp/autopkgtest-$t"
	echo "-- debian/tests/$t"
	AUTOPKGTEST_TMP="$tmp/autopkgtest-$t" "debian/tests/$t"
done

step "done: built, lint-clean, installed, $(echo $tests | wc -w) tests passed"
