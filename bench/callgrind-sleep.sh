#!/bin/sh
# Instructions per message of a consumer whose every message is one sleep on
# an fd (vsched-bench fdsleep): the vsched waiter's wait against the
# hand-written epoll loop's, from callgrind (repeatable, unlike time on a
# shared machine), each in a run of its own that collects only inside its
# consumer's per-message function; then the vsched waiter's heaviest
# functions (inclusive, per message) and its clock reads per message.
# usage: bench/callgrind-sleep.sh [path/to/vsched-bench] [messages]
set -eu
bench=${1:-build/bench/vsched-bench}
n=${2:-2000}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() { # consumer function -> its callgrind file
	valgrind --tool=callgrind --callgrind-out-file="$dir/$1" \
		--toggle-collect="$1" "$bench" --runs 1 --fd-msgs "$n" fdsleep \
		>/dev/null 2>&1
}
ir() {
	awk '$1 == "totals:" || $1 == "summary:" { print $2; exit }' "$dir/$1"
}
run fdsleep_vsched_wait
run fdsleep_epoll_wait
v=$(ir fdsleep_vsched_wait)
e=$(ir fdsleep_epoll_wait)
awk -v v="$v" -v e="$e" -v n="$n" 'BEGIN {
	printf "%-40s %10s %10s %7s\n", "instructions per message", "vsched", "epoll", "ratio"
	printf "%-40s %10.1f %10.1f %7.2f\n", "one sleep and wake (consumer wait)", v / n, e / n, v / e
}'
echo
echo "vsched, inclusive instructions per message (top functions):"
callgrind_annotate --inclusive=yes "$dir/fdsleep_vsched_wait" 2>/dev/null |
	awk -v n="$n" '/^ *[0-9,]+ .*:[^ ]+/ {
		x = $1; gsub(",", "", x)
		f = $0; sub(/^ *[0-9,]+ +(\([^)]*\) +)?/, "", f); sub(/ \[.*$/, "", f)
		sub(/^.*\//, "", f)
		if (x / n >= 5 && $0 !~ /\([0-9,]+x\)$/ && !seen[f]++ && !(f ~ /libc-start|below main|run_fdsleep|vsched-bench.c:main|0x0/))
			printf "  %8.1f  %s\n", x / n, f
	}' | head -30
echo
echo "clock reads per message (calls, vsched consumer; CLOCK_MONOTONIC, and"
echo "CLOCK_THREAD_CPUTIME_ID, a syscall, in vsched__thread_cpu_ns):"
callgrind_annotate --tree=calling "$dir/fdsleep_vsched_wait" 2>/dev/null |
	awk -v n="$n" '/ > .*:(vsched__clock_now|vsched__thread_cpu_ns) / {
		c = $0; sub(/^.*\(/, "", c); sub(/x\).*$/, "", c); gsub(",", "", c)
		f = $0; sub(/^.*> +/, "", f); sub(/ .*$/, "", f); sub(/^.*:/, "", f)
		calls[f] += c
	} END { for (f in calls) printf "  %-24s %6.3f\n", f, calls[f] / n }'
