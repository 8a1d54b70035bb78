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

# 1. Poll policies: per trace, the frontier of fixed windows (0-200 us, a
# line in window order), kvm and adaptive as points; lower-left is better.
grep '"bench": "policy"' "$json" > "$tmp/policy" || true
traces=$(field metric < "$tmp/policy" | cut -d/ -f1 | awk '!seen[$0]++')
n=0
for tr in $traces; do
	n=$((n + 1))
	for pol in none fixed-1us fixed-2us fixed-5us fixed-10us fixed-20us fixed-50us \
		fixed-100us always-poll kvm kvm-reset adaptive; do
		lat=$(grep "\"metric\": \"$tr/$pol/mean_latency\"" "$tmp/policy" | field value)
		cpu=$(grep "\"metric\": \"$tr/$pol/poll_cpu_per_halt\"" "$tmp/policy" | field value)
		[ -n "$lat" ] || continue
		case $pol in
		kvm | kvm-reset | adaptive) f=$tmp/pt_$n ;;
		*) f=$tmp/fr_$n ;;
		esac
		echo "$cpu $lat $pol" >> "$f"
	done
	: >> "$tmp/pt_$n"
	: >> "$tmp/fr_$n"
	echo "$tr" > "$tmp/name_$n"
done
if [ "$n" -gt 0 ]; then
	cols=6
	rows=$(( (n + cols - 1) / cols ))
	{
		echo "set terminal pngcairo size 2100,$((rows * 330 + 60)) font ',8'"
		echo "set output '$out/policy-frontier.png'"
		echo "set multiplot layout $rows,$cols title 'Poll policies: poll CPU per halt (us) vs mean wakeup latency (us); line: fixed windows 0-200 us; lower-left is better'"
		i=1
		while [ "$i" -le "$n" ]; do
			echo "set title '$(cat "$tmp/name_$i")'; unset key"
			echo "set logscale x; set xrange [0.01:*]"
			echo "plot '$tmp/fr_$i' using (\$1 < 10 ? 0.01 : \$1 / 1000):(\$2 / 1000) with linespoints pt 6 ps 0.8 lc rgb 'gray50', '$tmp/pt_$i' using (\$1 < 10 ? 0.01 : \$1 / 1000):(\$2 / 1000):(strcol(3) eq 'adaptive' ? 1 : (strcol(3) eq 'kvm' ? 2 : 3)) with points pt 7 ps 1.2 lc variable, '' using (\$1 < 10 ? 0.01 : \$1 / 1000):(\$2 / 1000):3 with labels offset 0,0.8 font ',7'"
			i=$((i + 1))
		done
		echo "unset multiplot"
	} | gnuplot
fi

# 2. Wakeup round-trip distributions (quantiles), vsched against raw.
for kind in polled blocked; do
	for q in p10 p50 p90 p99 p99.9; do
		l=$(grep "\"metric\": \"${kind}_round_trip_$q\"" "$json" || true)
		[ -n "$l" ] || continue
		echo "${q#p} $(echo "$l" | field value) $(echo "$l" | field baseline_value)"
	done > "$tmp/dist_$kind"
done
if [ -s "$tmp/dist_polled" ]; then
	gnuplot <<GP
set terminal pngcairo size 1200,450 font ',10'
set output '$out/wakeup.png'
set multiplot layout 1,2 title 'Wakeup round trips: distribution (quantiles of one timed run)'
set logscale y
set xlabel 'percentile'; set ylabel 'ns per round trip'; set key top left
set xtics ('10' 0, '50' 1, '90' 2, '99' 3, '99.9' 4)
set title 'polled'
plot '$tmp/dist_polled' using 0:2 with linespoints pt 7 title 'vsched', '' using 0:3 with linespoints pt 5 title 'raw spin ping-pong'
set title 'blocked (futex)'
plot '$tmp/dist_blocked' using 0:2 with linespoints pt 7 title 'vsched', '' using 0:3 with linespoints pt 5 title 'raw futex ping-pong'
unset multiplot
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
