#!/bin/sh
# vsched-bench --json: every line is one object with every field of the
# documented shape (bench, metric, unit, value, baseline, baseline_value,
# ratio, runs, min, max). Checks the shape on a tiny run, never the speed:
# `all`, then iothread, timedwait and fdsleep (not in `all`). The iothread
# and timedwait lines: every family x consumer x metric and every timeout x
# pair x metric is there; fdsleep's three metrics. A ratio is null (undefined)
# only where its baseline_value is 0. With one run a line's
# ratio is its value over its baseline_value (a ratio that is not, say one
# taken against another baseline or another run, fails; an identity of
# the printed numbers, not a speed): checked where both are at least 1,
# within 2% for the rounding of the printed figures.
# usage: check-json.sh VSCHED_BENCH
#        check-json.sh --lines FILE   (only the checks of each line, on
#        FILE's lines: no run, no counts, no coverage; to try the checks on
#        handcrafted lines)
set -eu
if [ "$1" = --lines ]; then
	out=$2
	min_ratios=0
else
	out=$(mktemp)
	trap 'rm -f "$out"' EXIT
	min_ratios=100
	"$1" --quick --json --runs 1 > "$out"
	# the benchmarks not in `all`, smoke runs of their own
	"$1" --quick --json --runs 1 iothread >> "$out"
	"$1" --quick --json --runs 1 timedwait >> "$out"
	"$1" --quick --json --runs 1 --fd-msgs 50 fdsleep >> "$out"
	lines=$(wc -l < "$out")
	[ "$lines" -gt 20 ] || { echo "FAIL: only $lines objects"; exit 1; }
fi
awk -v min_ratios="$min_ratios" '
function num(k,   i) {
	i = index($0, "\"" k "\": ")
	return i ? substr($0, i + length(k) + 4) + 0 : -1
}
{
	n++
	if ($0 !~ /^\{.*\}$/) { print "FAIL: not an object: " $0; bad = 1 }
	split("bench metric unit baseline", s, " ")
	for (i in s)
		if ($0 !~ ("\"" s[i] "\": \"[^\"]+\"")) { print "FAIL: " s[i] " missing in " $0; bad = 1 }
	split("value baseline_value runs min max", k, " ")
	for (i in k)
		if ($0 !~ ("\"" k[i] "\": -?[0-9][0-9.e+-]*[,}]")) { print "FAIL: " k[i] " missing in " $0; bad = 1 }
	# a ratio: a number, or null (undefined: bench.h) against a baseline of 0
	if ($0 ~ /"ratio": null[,}]/) {
		if (num("baseline_value") != 0) { print "FAIL: null ratio against a non-zero baseline: " $0; bad = 1 }
	} else if ($0 !~ /"ratio": -?[0-9][0-9.e+-]*[,}]/) { print "FAIL: ratio missing or not a number in " $0; bad = 1 }
	b[$0 ~ /"bench": "[a-z]+"/ ? substr($0, index($0, "\"bench\": \"") + 10, 8) : "?"]++
	if ($0 ~ /"ratio": (inf|nan)/ || $0 ~ /"value": (inf|nan|-nan)/) { print "FAIL: not a number: " $0; bad = 1 }
	v = num("value"); bv = num("baseline_value"); r = num("ratio")
	if (num("runs") == 1 && v >= 1 && bv >= 1 && $0 !~ /"ratio": null/) {
		q = v / bv; d = r - q
		if ((d < 0 ? -d : d) > 0.02 * (q > r ? q : r) + 0.002) {
			print "FAIL: ratio " r " is not value / baseline_value (" q "): " $0; bad = 1
		}
		nr++
	}
}
END {
	if (bad) exit 1
	if (nr < min_ratios) { print "FAIL: only " nr " ratios checked against value / baseline_value"; exit 1 }
	printf "%d objects, all with the ten fields; %d ratios are value / baseline_value\n", n, nr
}' "$out"
[ "$1" != --lines ] || exit 0
for bench in request wakeup pmi idle hook scale waiter timer policy iothread timedwait fdsleep; do
	grep -q "\"bench\": \"$bench\"" "$out" || { echo "FAIL: no $bench objects"; exit 1; }
done
# every iothread family for each consumer, every timedwait timeout per pair
for fam in io-exp-5us io-exp-50us io-exp-500us io-bimodal-2us-2ms io-pareto-10us-a1.2 \
	   io-periodic-100us io-phase-10us-1ms; do
	for c in vsched qemu epoll; do
		for m in wakeup_p50 wakeup_p99 consumer_cpu_per_msg kicks_per_msg \
			 consumer_syscalls_per_msg producer_notify_cpu_per_msg; do
			grep -q "\"metric\": \"$fam/$c/$m\"" "$out" ||
				{ echo "FAIL: no iothread $fam/$c/$m"; exit 1; }
		done
	done
done
for pair in fd nofd; do
	for to in 0 10 20 50 100 200 500 1000; do
		for m in cpu_per_call overshoot_median overshoot_p99; do
			grep -q "\"metric\": \"$pair/${to}us/$m\"" "$out" ||
				{ echo "FAIL: no timedwait $pair/${to}us/$m"; exit 1; }
		done
	done
done
for m in consumer_cpu_per_msg consumer_syscalls_per_msg consumer_sleeps_per_msg; do
	grep -q "\"bench\": \"fdsleep\", \"metric\": \"$m\", .*\"baseline\": \"epoll\"" "$out" ||
		{ echo "FAIL: no fdsleep $m against epoll"; exit 1; }
done
# the policy replay's waiter-style traces are judged against qemu
grep -q '"metric": "io-exp-50us/adaptive/mean_latency".*"baseline": "qemu"' "$out" ||
	{ echo "FAIL: io-* policy traces not against qemu"; exit 1; }
echo OK
