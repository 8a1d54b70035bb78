#!/bin/sh
# valgrind memcheck on every unit test binary: no errors, no leaks.
# usage: memcheck.sh BUILD_DIR
set -eu
build=$1
status=0
for t in "$build"/test/test_*; do
	[ -x "$t" ] || continue
	case "$t" in *.cpp|*cxx*) continue ;; esac
	if VSCHED_UNDER_VALGRIND=1 valgrind -q --error-exitcode=99 --leak-check=full \
		--errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect \
		"$t" >"$t.memcheck.log" 2>&1; then
		echo "memcheck ok: ${t##*/}"
	else
		echo "memcheck FAILED: ${t##*/}"
		tail -40 "$t.memcheck.log"
		status=1
	fi
done
exit $status
