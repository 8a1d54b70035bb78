#!/bin/sh
# Instructions per operation of the single-threaded paths, from callgrind
# (repeatable, unlike time on a shared machine), against the raw sequences.
# usage: bench/callgrind.sh [path/to/vsched-bench]
set -eu
bench=${1:-build/bench/vsched-bench}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
ir() { # function name -> its inclusive Ir: collect only inside it (so the
	# count does not depend on how the debug info splits inlined code
	# between source files)
	valgrind --tool=callgrind --callgrind-out-file="$out" \
		--toggle-collect="$1" "$bench" instr >/dev/null 2>&1
	awk '$1 == "totals:" || $1 == "summary:" { print $2; exit }' "$out"
}
n=100000
for pair in "vsched_service raw_service" "vsched_post raw_post" \
	    "vsched_vcpu_enter raw_enter_exit" "vsched_vcpu_exit -" \
	    "inl_service -" "inl_post -" "inl_enter -" "inl_exit -"; do
	set -- $pair
	a=$(ir "$1"); b=""
	[ "$2" = - ] || b=$(ir "$2")
	echo "$1 $a $2 ${b:-0}"
done | awk -v n=$n '
$1 == "vsched_service" { svc = $2; rsvc = $4 }
$1 == "vsched_post"    { post = $2; rpost = $4 }
$1 == "vsched_vcpu_enter" { ent = $2; rent = $4 }
$1 == "vsched_vcpu_exit"  { ex = $2 }
$1 == "inl_service" { isvc = $2 }
$1 == "inl_post"    { ipost = $2 }
$1 == "inl_enter"   { ient = $2 }
$1 == "inl_exit"    { iex = $2 }
END {
	# vsched_service runs 2n times (n empty, n after a post); raw_service too.
	printf "%-34s %10s %10s %7s\n", "path", "vsched", "raw", "ratio"
	printf "%-34s %10.1f %10.1f %7.2f\n", "post (no kick), instructions", post / n, rpost / n, (post / n) / (rpost / n)
	printf "%-34s %10.1f %10.1f %7.2f\n", "service (avg of empty and one)", svc / (2 * n), rsvc / (2 * n), svc / rsvc
	printf "%-34s %10.1f %10.1f %7.2f\n", "enter + exit, instructions", (ent + ex) / n, rent / n, ((ent + ex) / n) / (rent / n)
	# The VSCHED_INLINE variants (bench/request_inline.c): one function
	# per path, as the raw sequences; inl_post includes the call it makes
	# to the library when it must kick (never here: no kick).
	printf "%-34s %10.1f %10.1f %7.2f\n", "inline post (no kick)", ipost / n, rpost / n, ipost / rpost
	printf "%-34s %10.1f %10.1f %7.2f\n", "inline service (avg empty, one)", isvc / (2 * n), rsvc / (2 * n), isvc / rsvc
	printf "%-34s %10.1f %10.1f %7.2f\n", "inline enter + exit", (ient + iex) / n, rent / n, (ient + iex) / rent
}'
