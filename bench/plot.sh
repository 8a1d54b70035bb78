#!/bin/sh
# Turn `vsched-bench --json` output into PNG plots (gnuplot).
# usage: bench/plot.sh RESULTS.json OUTDIR
set -eu
if ! command -v gnuplot >/dev/null 2>&1; then
	echo "bench/plot.sh: needs gnuplot (Debian: apt-get install gnuplot-nox)" >&2
	exit 127
fi
json=$1
out=$2
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

field() { # extract "key": value from each line on stdin
	sed -n "s/.*\"$1\": \"\{0,1\}\([^\",}]*\)\"\{0,1\}.*/\1/p"
}

# 1. Poll policies on the (CPU per halt, mean latency) plane, one panel per
# trace; lower-left is better. Gray: the fixed-window frontier in window
# order (none = 0, fixed-1us..fixed-100us, always-poll = 200 us); blue: the
# cpu_budget_pct sweep (adaptive-b0, adaptive-dflt = 100, -b200, -b400,
# -b1000); orange disc: adaptive-dflt, the library default; kvm and qemu,
# the incumbents (qemu for io-* traces, kvm for the others), as points.
# CPU per halt counts polls and each sleep's CPU (cpu_per_halt); a JSON
# without it (older runs) falls back to poll_cpu_per_halt, drawn from 0.01 us
# (log scale). One PNG per trace family (policy-<group>.png), and every
# trace in one (policy-frontier.png).
# The cost model shows in the none row: its latency is the sleeping wake,
# its CPU the sleep's.
grep '"bench": "policy"' "$json" > "$tmp/policy" || true
xm=cpu_per_halt
grep -q "/$xm\"" "$tmp/policy" || xm=poll_cpu_per_halt
mkdir "$tmp/pol"
awk -v xm="$xm" -v d="$tmp/pol" '
function group(t) {
	if (t ~ /^io-/) return "io"
	if (t ~ /^exp-/ || t == "slow") return "exp"
	if (t ~ /^pareto-/ || t == "heavy-tailed") return "pareto"
	if (t ~ /^bimodal/ || t == "bursty") return "bimodal"
	if (t ~ /^(periodic-|cycle-|phase)/ || t == "constant") return "periodic"
	return "other"
}
# one series: the policies in pol[1..n] (those present), labelled lab[]
# where a point is apart from the last labelled one
function series(t, i, f, n, pol, lab,    k, key, x, y, lx, ly, s) {
	lx = -1
	for (k = 1; k <= n; k++) {
		key = t SUBSEP pol[k]
		if (!((key) in c) || !((key) in l)) continue
		x = c[key] / 1000; y = l[key] / 1000
		if (x < 0.01) x = 0.01	# poll CPU 0 (no sleep CPU counted)
		s = "-"
		if (lab[k] != "" && (lx < 0 || (x > lx * 1.08 || x < lx / 1.08) ||
		    y - ly > 0.6 || ly - y > 0.6)) {
			s = lab[k]; lx = x; ly = y
		}
		print x, y, s > (d "/" i "." f)
		if (x < xmin[i]) xmin[i] = x
		if (x > xmax[i]) xmax[i] = x
		if (y > ymax[i]) ymax[i] = y
	}
	close(d "/" i "." f)
}
{
	m = $0; sub(/.*"metric": "/, "", m); sub(/".*/, "", m)
	v = $0; sub(/.*"value": /, "", v); sub(/[,}].*/, "", v)
	if (split(m, a, "/") != 3) next
	if (a[3] == xm) c[a[1], a[2]] = v
	else if (a[3] == "mean_latency") l[a[1], a[2]] = v
	else next
	if (!(a[1] in seen)) { seen[a[1]] = 1; ord[++nt] = a[1] }
}
END {
	nf = split("none fixed-1us fixed-2us fixed-5us fixed-10us fixed-20us " \
		   "fixed-50us fixed-100us always-poll", fp, " ")
	split("0 1 2 5 10 20 50 100 200", fl, " ")
	nk = split("adaptive-b0 adaptive-dflt adaptive-b200 adaptive-b400 " \
		   "adaptive-b1000", kp, " ")
	split("0 100 200 400 1000", kl, " ")
	one[1] = ""
	for (i = 1; i <= nt; i++) {
		t = ord[i]
		xmin[i] = 1e30; xmax[i] = 0; ymax[i] = 0
		series(t, i, "fr", nf, fp, fl)
		series(t, i, "kn", nk, kp, kl)
		p[1] = "kvm"; series(t, i, "kvm", 1, p, one)
		p[1] = "qemu"; series(t, i, "qemu", 1, p, one)
		p[1] = "adaptive-dflt"; series(t, i, "dflt", 1, p, one)
		if (xmax[i] == 0) continue
		# the frame: x log-padded, y from 0 with room for labels
		print t, xmin[i] / 1.3, xmax[i] * 1.3, ymax[i] * 1.15 > (d "/" i ".frame")
		# generated families (a digit in the name) first, then files
		o = (t ~ /[0-9]/) ? 0 : 1
		print o, i >> (d "/order." group(t))
		print o, i >> (d "/order.frontier")
		if ((t SUBSEP "none") in l && !wake) {
			wake = l[t, "none"] / 1000; sleep = c[t, "none"] / 1000
			print wake, sleep > (d "/model")
		}
	}
}' "$tmp/policy"
for f in "$tmp"/pol/order.*; do
	[ -e "$f" ] || continue
	sort -s -n -k1,1 "$f" | cut -d' ' -f2 > "$tmp/pol/group.${f##*.}"
done

# panels GROUP TITLE COLS WIDTH: one PNG, a panel per trace of the group,
# COLS to a row; the title and a shared key on top.
panels() {
	g=$1 gt=$2 cols=$3 w=$4
	[ -s "$tmp/pol/group.$g" ] || return 0
	k=$(wc -l < "$tmp/pol/group.$g")
	rows=$(( (k + cols - 1) / cols ))
	h=$((rows * 280 + 95))
	model=
	[ -s "$tmp/pol/model" ] && model=$(awk -v xm="$xm" '{
		printf "; cost model: sleeping wake %.3g us", $1
		if (xm == "cpu_per_halt") printf ", sleep CPU %.3g us", $2 }' "$tmp/pol/model")
	xl='CPU per halt (us)' xd="CPU per halt (polls and each sleep's CPU)"
	[ "$xm" = cpu_per_halt ] || xl='poll CPU per halt (us)' xd='poll CPU per halt'
	{
		printf '%s\n' "set terminal pngcairo size $w,$h font ',8' noenhanced" \
			"set output '$out/policy-$g.png'" \
			"set multiplot title \"Poll policies, $gt\\n$xd against mean wakeup latency, lower-left is better$model\" font ',10'" \
			"set logscale x" \
			"set xtics ('<=0.01' 0.01, '0.1' 0.1, '0.2' 0.2, '0.5' 0.5, '1' 1, '2' 2, '3' 3, '5' 5, '10' 10, '20' 20, '30' 30, '50' 50, '100' 100, '200' 200, '300' 300, '500' 500)" \
			"set xtics add ('' 4 1, '' 6 1, '' 7 1, '' 8 1, '' 9 1, '' 40 1, '' 60 1, '' 70 1, '' 80 1, '' 90 1, '' 400 1)" \
			"set xlabel '$xl' offset 0,0.5; set ylabel 'mean latency (us)' offset 1.5,0" \
			"set grid xtics ytics lc rgb 'gray85'" \
			"unset key"
		j=0
		while read -r i; do
			read -r t x0 x1 y1 < "$tmp/pol/$i.frame"
			for f in fr kn kvm qemu dflt; do : >> "$tmp/pol/$i.$f"; done
			# the panel's margins, in pixels: 55 left (y label),
			# 12 right, 22 above (title), 38 below (x label)
			echo "$j $cols $w $h" | awk '{
				cw = ($3 - 10) / $2; c = $1 % $2; r = int($1 / $2)
				printf "set lmargin at screen %.4f; set rmargin at screen %.4f\n",
					(10 + c * cw + 55) / $3, (10 + (c + 1) * cw - 12) / $3
				printf "set tmargin at screen %.4f; set bmargin at screen %.4f\n",
					1 - (95 + r * 280 + 22) / $4, 1 - (95 + (r + 1) * 280 - 38) / $4
			}'
			printf '%s\n' "set title '$t' offset 0,-0.7; set xrange [$x0:$x1]; set yrange [0:$y1]"
			d=$tmp/pol/$i
			printf '%s %s %s %s %s %s %s\n' "plot '$d.fr' using 1:2 with linespoints pt 6 ps 0.6 lc rgb 'gray55'," \
				"'' using 1:2:(strcol(3) eq '-' ? '' : strcol(3)) with labels offset 0,0.55 font ',6' tc rgb 'gray40'," \
				"'$d.kn' using 1:2 with linespoints pt 7 ps 0.5 lw 1.5 lc rgb '#3060c0'," \
				"'' using 1:2:(strcol(3) eq '-' ? '' : strcol(3)) with labels offset 0,-0.6 font ',6' tc rgb '#3060c0'," \
				"'$d.dflt' using 1:2 with points pt 7 ps 2.2 lc rgb '#ff9020'," \
				"'$d.kvm' using 1:2 with points pt 9 ps 1.3 lc rgb '#c00000'," \
				"'$d.qemu' using 1:2 with points pt 4 ps 1.6 lw 2 lc rgb '#008000'"
			j=$((j + 1))
		done < "$tmp/pol/group.$g"
		# the key: an empty plot over the whole image
		printf '%s\n' "set lmargin at screen 0; set rmargin at screen 1" \
			"set tmargin at screen 1; set bmargin at screen 0" \
			"unset title; unset xlabel; unset ylabel; unset tics; unset grid; unset border; unset logscale" \
			"set xrange [0:1]; set yrange [0:1]" \
			"set key at screen 0.5, screen $(echo "$h" | awk '{ printf "%.4f", 1 - 68 / $1 }') center center horizontal maxrows 1 samplen 2 width 2 font ',9'" \
			"plot NaN with linespoints pt 6 ps 0.6 lc rgb 'gray55' title 'fixed window, us', NaN with linespoints pt 7 ps 0.5 lw 1.5 lc rgb '#3060c0' title 'cpu_budget_pct, %', NaN with points pt 7 ps 2.2 lc rgb '#ff9020' title 'adaptive-dflt', NaN with points pt 9 ps 1.3 lc rgb '#c00000' title 'kvm', NaN with points pt 4 ps 1.6 lw 2 lc rgb '#008000' title 'qemu'" \
			"unset multiplot"
	} | gnuplot
}
panels exp 'exponential gaps (exp-*; slow = exp 2 ms)' 4 1100
panels pareto 'Pareto gaps (pareto-*; heavy-tailed)' 4 1100
panels bimodal 'bimodal and bursty gaps (bimodal-*; bimodal; bursty)' 3 1000
panels periodic 'periodic, cyclic and phase-shift gaps (periodic-*; constant; cycle-*; phase*)' 4 1100
panels io 'I/O-thread (waiter) gaps (io-*; incumbent qemu)' 4 1100
panels other 'other traces' 4 1100
panels frontier 'every trace' 6 1600

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
