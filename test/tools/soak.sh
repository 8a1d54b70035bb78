#!/bin/sh
# Soak: run the stress tests in a loop for a given time, reporting the
# operations done and the longest time any request waited.
# usage: soak.sh SECONDS BUILD_DIR     (or: cmake --build build --target soak)
set -eu
total=${1:-3600}
build=${2:-build}
end=$(( $(date +%s) + total ))
rounds=0 posts=0 arms=0 worst=0
while [ "$(date +%s)" -lt "$end" ]; do
	out=$("$build/test/stress_requests" 60) || { echo "$out"; echo "SOAK FAILED"; exit 1; }
	p=$(echo "$out" | sed -n 's/^posts \([0-9]*\),.*/\1/p')
	w=$(echo "$out" | sed -n 's/.*longest wait \([0-9.]*\) ms.*/\1/p')
	out2=$("$build/test/stress_timers" 10) || { echo "$out2"; echo "SOAK FAILED"; exit 1; }
	a=$(echo "$out2" | sed -n 's/^arms \([0-9]*\),.*/\1/p')
	posts=$((posts + p)); arms=$((arms + a)); rounds=$((rounds + 1))
	worst=$(echo "$w $worst" | awk '{ print ($1 > $2) ? $1 : $2 }')
	echo "round $rounds: posts $posts, timer re-arms $arms, longest request wait ${worst} ms"
done
echo "SOAK OK: $rounds rounds, $posts posts, $arms timer re-arms, longest request wait ${worst} ms"
