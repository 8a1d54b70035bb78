#!/bin/sh
# The request order's cost, end to end through vsched-vmm: with one vCPU
# and the PMI workload, the validated order (PMU before NMI) services each
# PMI's NMI in the same pass and cancels no entry; the naive order (NMI
# first) cancels exactly one entry per PMI. Both must pass the guest's own
# checks (every NMI delivered).
# usage: check-order.sh VSCHED_VMM BACKEND
set -eu
vmm=$1
backend=$2
n=200
field() { # json key -> first numeric value
	sed -n "s/.*\"$2\":\([0-9][0-9]*\).*/\1/p" "$1"
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for order in validated naive; do
	rc=0
	"$vmm" --backend "$backend" --workload pmi --vcpus 1 --iterations $n \
		--order $order --json > "$tmp/$order.json" || rc=$?
	[ "$rc" = 77 ] && exit 77
	cat "$tmp/$order.json"
	[ "$rc" = 0 ] || { echo "FAIL: $order run exited $rc"; exit 1; }
done
v=$(field "$tmp/validated.json" cancelled_entries)
w=$(field "$tmp/naive.json" cancelled_entries)
echo "cancelled entries: validated $v, naive $w (PMIs: $n)"
[ "$v" -eq 0 ] || { echo "FAIL: the validated order cancelled entries"; exit 1; }
[ "$w" -eq $n ] || { echo "FAIL: the naive order should cancel one entry per PMI"; exit 1; }
echo OK
