#!/bin/sh
# The shared library exports only vsched_* symbols (and at least some).
# usage: check-symbols.sh LIBRARY [MIN_COUNT]
set -eu
lib=$1
defined=$(readelf --dyn-syms -W "$lib" |
	awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && ($5 == "GLOBAL" || $5 == "WEAK") { print $8 }' |
	sed 's/@.*//' | sort -u)
bad=$(printf '%s\n' "$defined" | grep -v '^vsched_' | grep -v '^VSCHED_\(KVM_\)\?0$' || true)
count=$(printf '%s\n' "$defined" | grep -c '^vsched_' || true)
echo "exported vsched_* symbols: $count"
if [ -n "$bad" ]; then
	echo "FAIL: exported symbols outside vsched_*:"
	printf '%s\n' "$bad"
	exit 1
fi
[ "$count" -ge "${2:-41}" ] || { echo "FAIL: too few exported symbols"; exit 1; }
echo OK
