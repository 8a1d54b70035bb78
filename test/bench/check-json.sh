#!/bin/sh
# vsched-bench --json: every line is one object with every field of the
# documented shape (bench, metric, unit, value, baseline, baseline_value,
# ratio, runs, min, max). Checks the shape on a tiny run, never the speed.
# usage: check-json.sh VSCHED_BENCH
set -eu
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$1" --quick --json --runs 1 > "$out"
lines=$(wc -l < "$out")
[ "$lines" -gt 20 ] || { echo "FAIL: only $lines objects"; exit 1; }
awk '
{
	n++
	if ($0 !~ /^\{.*\}$/) { print "FAIL: not an object: " $0; bad = 1 }
	split("bench metric unit baseline", s, " ")
	for (i in s)
		if ($0 !~ ("\"" s[i] "\": \"[^\"]+\"")) { print "FAIL: " s[i] " missing in " $0; bad = 1 }
	split("value baseline_value ratio runs min max", k, " ")
	for (i in k)
		if ($0 !~ ("\"" k[i] "\": -?[0-9][0-9.e+-]*")) { print "FAIL: " k[i] " missing in " $0; bad = 1 }
	b[$0 ~ /"bench": "[a-z]+"/ ? substr($0, index($0, "\"bench\": \"") + 10, 8) : "?"]++
}
END {
	if (bad) exit 1
	printf "%d objects, all with the ten fields\n", n
}' "$out"
for bench in request wakeup pmi idle hook scale waiter timer policy; do
	grep -q "\"bench\": \"$bench\"" "$out" || { echo "FAIL: no $bench objects"; exit 1; }
done
echo OK
