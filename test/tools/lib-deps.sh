#!/bin/sh
# Which lib/ source calls functions defined in which other lib/ source: the
# file dependency picture, from the object files (nm: defined vs undefined
# vsched_/vsched__ symbols), and the call circles in it (a file that calls
# back, directly or through others, into a file that calls it).
# usage: test/tools/lib-deps.sh [build-dir]     (after a build; exits 1
# on a circle, so ctest's lib_no_call_circles keeps the picture acyclic)
set -eu
dir=${1:-build}
objs=$(find "$dir/CMakeFiles" -path '*/vsched_objects.dir/lib/*.o' | sort)
[ -n "$objs" ] || { echo "no lib objects under $dir" >&2; exit 1; }
for o in $objs; do
	f=${o#*/vsched_objects.dir/}; f=${f%.o}
	nm "$o" | awk -v f="$f" 'NF == 3 && $3 ~ /^vsched_/ && $2 ~ /^[TDBR]$/ { print "D", f, $3 }
				$1 == "U" && $2 ~ /^vsched_/ { print "U", f, $2 }'
done | awk '
$1 == "D" { def[$3] = $2 }
$1 == "U" { use[++n] = $2 " " $3 }
END {
	for (i = 1; i <= n; i++) {
		split(use[i], a, " ")
		if ((a[2] in def) && def[a[2]] != a[1]) edge[a[1] " -> " def[a[2]]] = 1
	}
	for (e in edge) print e
}' | sort > "${TMPDIR:-/tmp}/lib-deps.$$"
echo "# calls between lib/ sources (caller -> callee)"
cat "${TMPDIR:-/tmp}/lib-deps.$$"
echo "# circles"
# tsort reports a cycle on stderr when the graph has one.
circles=$(awk '{ print $1, $3 }' "${TMPDIR:-/tmp}/lib-deps.$$" | tsort 2>&1 >/dev/null |
	sed 's/^tsort: //' || true)
rm -f "${TMPDIR:-/tmp}/lib-deps.$$"
if [ -n "$circles" ]; then
	printf '%s\n' "$circles"
	echo "FAIL: a lib/ source calls back into one that calls it"
	exit 1
fi
echo "none"
