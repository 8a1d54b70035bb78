#!/bin/sh
# vsched-bench's command line (session 29's trial): bad values of every
# kind of option end the program with status 2 before anything runs, a
# trace file that is named and cannot be replayed too, --json output is
# JSON whatever a trace file is called, a trace line of any length is one
# line, and --live keeps to its time budget on a long halt. Exit statuses
# and shapes only, never speed.
# usage: check-cli.sh VSCHED_BENCH
set -eu
b=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
model="--wake-ns 1000 --polled-ns 100 --sleep-cpu-ns 500"
# expect STATUS ARGS...: the run's exit status is STATUS
expect() {
	want=$1
	shift
	set +e
	"$b" "$@" > "$dir/out" 2> "$dir/err"
	got=$?
	set -e
	if [ "$got" != "$want" ]; then
		echo "FAIL: vsched-bench $*: status $got, expected $want"
		sed 's/^/  /' "$dir/err" | head -5
		fail=1
	fi
}
# numbers: not a whole number, out of range, or 0 where 0 means nothing
for v in nan inf 1e30 abc -5 0 1000000001; do
	expect 2 --quick --family exp-2us --wake-ns "$v" --polled-ns 100 --sleep-cpu-ns 500 policy
done
expect 2 --quick --family exp-2us --polled-ns 0.5 --wake-ns 1000 --sleep-cpu-ns 500 policy
expect 2 --quick --family exp-2us $model --sleep-cpu-ns x policy
expect 2 --quick --family exp-2us $model --seed abc policy
expect 2 --quick --family exp-2us $model --seed -1 policy
expect 0 --quick --family exp-2us $model --seed 7 policy
expect 2 --runs 0 request
# --family selects generated traces: one that matches none, or given with
# --trace or --files-only (which replay no generated trace), is a usage
# error, as an unmatched --io-family is (they replayed nothing, status 1)
expect 2 --quick --family no-such-family $model policy
expect 2 --quick --runs 1 --io-family no-such-family iothread
printf '1000\n2000\n' > "$dir/two.txt"
expect 2 --quick --family exp-2us $model --trace "$dir/two.txt" policy
expect 2 --quick --family exp-2us $model --files-only policy
# one benchmark a run, "all" included (all NAME ran NAME alone)
expect 2 --quick --runs 1 all request
expect 2 --quick --runs 1 request all
expect 2 --quick --runs 1 --fd-msgs 0 fdsleep
expect 2 --quick --runs 1 --io-family io-periodic-100us --hog 1 --contention 0 iothread
# trace files: a named file that is missing or holds no halt; a halt over
# the 1,000 s the replay takes
expect 2 --quick $model --trace "$dir/missing.txt" policy
printf '# only a comment\n' > "$dir/empty.txt"
expect 2 --quick $model --trace "$dir/empty.txt" policy
printf '1000\n18446744073709551615\n2000\n' > "$dir/huge.txt"
expect 2 --quick $model --trace "$dir/huge.txt" policy
# halts of 0 ns: every ratio is defined or n/a, never nan (J/inc was)
printf '0\n0\n0\n' > "$dir/zeros.txt"
expect 0 --quick $model --latency-weight 0 --trace "$dir/zeros.txt" policy
if grep -qi nan "$dir/out"; then
	echo "FAIL: a trace of 0 ns halts printed nan"
	fail=1
fi
# a line longer than any buffer, its comment included, is one line
{ printf '1000 # '; head -c 1000 /dev/zero | tr '\0' x; printf '\n2000\n3000\n'; } > "$dir/long.txt"
expect 0 --quick $model --trace "$dir/long.txt" policy
grep -q '^long ' "$dir/out" || { echo "FAIL: the long-line trace was not replayed"; fail=1; }
# --json: a trace named with a quote, a backslash and a tab
name=$(printf 'q"u\\o\tte')
printf '1000\n2000\n3000\n' > "$dir/$name.txt"
expect 0 --json --quick $model --trace "$dir/$name.txt" policy
if ! python3 -c 'import json, sys
n = 0
for l in open(sys.argv[1]):
    json.loads(l); n += 1
assert n > 0' "$dir/out" 2> "$dir/err"; then
	echo "FAIL: --json with a quoted trace name is not JSON"
	head -3 "$dir/err"
	fail=1
fi
expect 0 --json --quick --runs 1 instr
if [ -s "$dir/out" ]; then
	echo "FAIL: instr --json printed a line that is not JSON on stdout"
	fail=1
fi
# --live: a 10 s halt after a short one is beyond --quick's 0.2 s budget a
# policy; the run replays the short one only (before, each policy ran
# all three, the 10 s halt whole). The count, not the run's time.
printf '1000\n10000000000\n1000\n' > "$dir/slow.txt"
expect 0 --quick --live $model --trace "$dir/slow.txt" policy
grep -q '^slow: --live replays the first 1 of 3 halts' "$dir/out" ||
	{ echo "FAIL: --live did not stop at its budget"; fail=1; }
[ "$fail" = 0 ] && echo "vsched-bench command line: ok"
exit "$fail"
