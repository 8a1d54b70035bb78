#!/bin/sh
# vsched-vmm with no --backend (auto) asked for what only KVM runs: the
# in-kernel irqchip, the governor, the fault workload. Where /dev/kvm
# runs guests they run (status 0, or 1 where a guest fails); where it does
# not, each is a skip, status 77, never 2 (a bad command line: session 29's
# trial). The same requests with --backend sim stay status 2.
# usage: check-auto.sh VSCHED_VMM
set -u
v=$1
fail=0
kvm=0
if "$v" --backend kvm --workload pingpong --iterations 10 > /dev/null 2>&1; then
	kvm=1
fi
for args in "--irqchip kernel --workload pingpong --iterations 10" \
	    "--irqchip kernel --governor --workload pingpong --iterations 10" \
	    "--irqchip both --workload pingpong --iterations 10"; do
	# shellcheck disable=SC2086
	"$v" $args > /dev/null 2>&1
	rc=$?
	if [ "$kvm" = 0 ] && [ "$rc" != 77 ]; then
		echo "FAIL: vsched-vmm $args without /dev/kvm: status $rc, expected 77"
		fail=1
	elif [ "$kvm" = 1 ] && { [ "$rc" = 2 ] || [ "$rc" = 77 ]; }; then
		echo "FAIL: vsched-vmm $args with /dev/kvm: status $rc"
		fail=1
	fi
	# shellcheck disable=SC2086
	"$v" --backend sim $args > /dev/null 2>&1
	rc=$?
	if [ "$rc" != 2 ]; then
		echo "FAIL: vsched-vmm --backend sim $args: status $rc, expected 2"
		fail=1
	fi
done
if [ "$kvm" = 0 ]; then
	"$v" --workload fault > /dev/null 2>&1
	rc=$?
	[ "$rc" = 77 ] || { echo "FAIL: vsched-vmm --workload fault without /dev/kvm: status $rc, expected 77"; fail=1; }
fi
[ "$fail" = 0 ] && echo "vsched-vmm auto backend: ok (kvm=$kvm)"
exit "$fail"
