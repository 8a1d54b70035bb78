#!/bin/sh
# Instructions per operation of the single-threaded paths, from callgrind
# (repeatable, unlike time on a shared machine), against the raw sequences.
# usage: bench/callgrind.sh [path/to/vsched-bench]
set -eu
bench=${1:-build/bench/vsched-bench}
out=$(mktemp)
trap 'rm -f "$out" "$out.txt"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" "$bench" instr >/dev/null 2>&1
callgrind_annotate --inclusive=yes "$out" > "$out.txt" 2>/dev/null
ir() { # function name -> inclusive Ir
	awk -v f="$1" '$0 ~ (":" f " \\[") { gsub(",", "", $1); print $1; exit }' "$out.txt"
}
n=100000
for pair in "vsched_service raw_service" "vsched_post raw_post" \
	    "vsched_vcpu_enter raw_enter_exit" "vsched_vcpu_exit -"; do
	set -- $pair
	a=$(ir "$1"); b=""
	[ "$2" = - ] || b=$(ir "$2")
	echo "$1 $a $2 ${b:-0}"
done | awk -v n=$n '
$1 == "vsched_service" { svc = $2; rsvc = $4 }
$1 == "vsched_post"    { post = $2; rpost = $4 }
$1 == "vsched_vcpu_enter" { ent = $2; rent = $4 }
$1 == "vsched_vcpu_exit"  { ex = $2 }
END {
	# vsched_service runs 2n times (n empty, n after a post); raw_service too.
	printf "%-34s %10s %10s %7s\n", "path", "vsched", "raw", "ratio"
	printf "%-34s %10.1f %10.1f %7.2f\n", "post (no kick), instructions", post / n, rpost / n, (post / n) / (rpost / n)
	printf "%-34s %10.1f %10.1f %7.2f\n", "service (avg of empty and one)", svc / (2 * n), rsvc / (2 * n), svc / rsvc
	printf "%-34s %10.1f %10.1f %7.2f\n", "enter + exit, instructions", (ent + ex) / n, rent / n, ((ent + ex) / n) / (rent / n)
}'
