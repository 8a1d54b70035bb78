#!/bin/sh
# Turn `vsched-bench --json` output into PNG plots (gnuplot).
# usage: bench/plot.sh RESULTS.json OUTDIR
set -eu
json=$1
out=$2
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

field() { # extract "key": value from each line on stdin
	sed -n "s/.*\"$1\": \"\{0,1\}\([^\",}]*\)\"\{0,1\}.*/\1/p"
}

# 1. Poll policies: latency / CPU frontier per trace.
grep '"bench": "policy"' "$json" > "$tmp/policy" || true
for tr in $(field metric < "$tmp/policy" | cut -d/ -f1 | sort -u); do
	for pol in none always-poll kvm kvm-reset adaptive; do
		lat=$(grep "\"metric\": \"$tr/$pol/mean_latency\"" "$tmp/policy" | field value)
		cpu=$(grep "\"metric\": \"$tr/$pol/poll_cpu_per_halt\"" "$tmp/policy" | field value)
		[ -n "$lat" ] && echo "$cpu $lat $pol" >> "$tmp/frontier_$tr"
	done
done
n=$(ls "$tmp"/frontier_* 2>/dev/null | wc -l)
if [ "$n" -gt 0 ]; then
	{
		echo "set terminal pngcairo size 1500,900 font ',10'"
		echo "set output '$out/policy-frontier.png'"
		echo "set multiplot layout 2,3 title 'Poll policies: poll CPU per halt vs mean wakeup latency (lower-left is better)'"
		for f in "$tmp"/frontier_*; do
			tr=${f##*/frontier_}
			echo "set title '$tr'; set xlabel 'poll CPU per halt (ns)'; set ylabel 'mean wakeup latency (ns)'"
			echo "set logscale x; set xrange [0.5:*]; unset key"
			echo "plot '$f' using (\$1 < 1 ? 1 : \$1):2 with points pt 7 ps 1.5, '' using (\$1 < 1 ? 1 : \$1):2:3 with labels offset 0,1"
		done
		echo "unset multiplot"
	} | gnuplot
fi

# 2. Wakeup round trips against their raw baselines (medians, min-max).
grep '"bench": "wakeup"' "$json" | while read -r l; do
	m=$(echo "$l" | field metric); v=$(echo "$l" | field value); b=$(echo "$l" | field baseline_value)
	lo=$(echo "$l" | field min); hi=$(echo "$l" | field max)
	echo "$m $v $lo $hi $b"
done > "$tmp/wakeup"
if [ -s "$tmp/wakeup" ]; then
	gnuplot <<GP
set terminal pngcairo size 900,500 font ',10'
set output '$out/wakeup.png'
set title 'Wakeup round trips: vsched (median, min-max over runs) vs raw baseline'
set style data histograms
set style fill solid 0.6
set logscale y
set ylabel 'ns per round trip'
set key top left
plot '$tmp/wakeup' using 2:xtic(1) title 'vsched', '' using 5 title 'raw baseline'
GP
fi

# 3. Cancelled entries: naive vs validated order.
l=$(grep '"bench": "pmi"' "$json" | head -n1 || true)
if [ -n "$l" ]; then
	v=$(echo "$l" | field value); b=$(echo "$l" | field baseline_value)
	printf 'naive(NMI-first) %s\nvalidated(PMI-first) %s\n' "$b" "$v" > "$tmp/pmi"
	gnuplot <<GP
set terminal pngcairo size 700,450 font ',10'
set output '$out/cancelled-entries.png'
set title 'Cancelled entries per 10 s, PMI handler raising NMI'
set style data histograms
set style fill solid 0.6
set logscale y
set yrange [1:*]
unset key
plot '$tmp/pmi' using 2:xtic(1)
GP
fi

# 4. Scale curves.
grep '"bench": "scale"' "$json" | while read -r l; do
	m=$(echo "$l" | field metric); v=$(echo "$l" | field value)
	n=$(echo "$m" | sed 's/.*_\([0-9]*\)_vcpus/\1/')
	echo "$n ${m%_*_vcpus} $v"
done > "$tmp/scale"
if [ -s "$tmp/scale" ]; then
	for k in wait_broadcast service_per_vcpu memory_per_vcpu; do
		grep " $k " "$tmp/scale" | sort -n > "$tmp/scale_$k"
	done
	gnuplot <<GP
set terminal pngcairo size 1400,450 font ',10'
set output '$out/scale.png'
set multiplot layout 1,3 title 'Scaling with vCPUs per VM (2 cores)'
set logscale x 2
set xlabel 'vCPUs'
unset key
set title 'WAIT broadcast (ns)'; set logscale y; plot '$tmp/scale_wait_broadcast' using 1:3 with linespoints pt 7
set title 'service, ns per vCPU'; unset logscale y; plot '$tmp/scale_service_per_vcpu' using 1:3 with linespoints pt 7
set title 'memory per vCPU (bytes)'; set yrange [0:*]; plot '$tmp/scale_memory_per_vcpu' using 1:3 with linespoints pt 7
unset multiplot
GP
fi
ls "$out"/*.png
