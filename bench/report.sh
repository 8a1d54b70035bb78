#!/bin/sh
# Render `vsched-bench --json` output as a markdown table.
# usage: bench/report.sh RESULTS.json
set -eu
echo "| bench | metric | value | baseline | baseline value | ratio | runs | min | max |"
echo "|---|---|---|---|---|---|---|---|---|"
sed -e 's/^{//' -e 's/}$//' "$1" | awk -F', "' '
{
	for (i = 1; i <= NF; i++) {
		split($i, kv, "\": ")
		k = kv[1]; gsub(/"/, "", k); v = kv[2]; gsub(/"/, "", v)
		f[k] = v
	}
	printf "| %s | %s | %s %s | %s | %s | %s | %s | %s | %s |\n", f["bench"], f["metric"],
	       f["value"], f["unit"], f["baseline"], f["baseline_value"], f["ratio"], f["runs"],
	       f["min"], f["max"]
}'
