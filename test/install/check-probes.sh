#!/bin/sh
# The library carries every documented USDT probe. Exit 77 (skipped) when it
# was built without <sys/sdt.h>.
# usage: check-probes.sh LIBRARY HAVE_SDT
set -eu
lib=$1
if [ "${2:-0}" != 1 ] && [ "${2:-}" != ON ] && [ "${2:-}" != TRUE ]; then
	echo "built without sys/sdt.h: skipped"
	exit 77
fi
names=$(readelf -n "$lib" | awk '$1 == "Name:" { print $2 }' | sort -u)
status=0
for p in post kick wakeup block_begin block_end poll_won poll_lost window_change \
	 timer_fire timer_cancel entry_cancelled; do
	if printf '%s\n' "$names" | grep -qx "$p"; then
		echo "probe vsched:$p ok"
	else
		echo "FAIL: probe vsched:$p missing"
		status=1
	fi
done
exit $status
