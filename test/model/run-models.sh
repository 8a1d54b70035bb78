#!/bin/sh
# Run every Spin model and its broken variants. A correct model must verify
# with no error; every broken variant must be caught (an error found). A
# REACH_ variant asserts that a case never happens: its failure proves the
# model reaches that case.
# usage: run-models.sh [model-dir]
set -eu
dir=$(cd "${1:-$(dirname "$0")}" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
command -v spin >/dev/null || { echo "spin not installed (apt-get install spin)"; exit 1; }

status=0
# model  variant-define  expectation
cat > "$work/plan" <<'PLAN'
kick.pml - pass
kick.pml ANY_GEN pass
kick.pml NO_POSTER_FENCE fail
kick.pml NO_VCPU_FENCE fail
kick.pml RECHECK_BEFORE_MODE fail
kick.pml BROKEN_IDLE_SKIP fail
kick.pml REACH_STOP_NEWGEN fail
kick.pml REACH_STOP_REARM fail
wait.pml - pass
wait.pml ACK_ON_EXITING fail
wait.pml NO_GEN fail
wait.pml REACH_LOST_TO_KICKER fail
timer.pml - pass
timer.pml REARM_LOAD_STORE fail
timer.pml FIRE_NO_CAS fail
timer.pml LEVEL_LATCH fail
timer.pml CTL_SPLIT fail
timer.pml ARM_OLD_LATE fail
timer.pml ARM_STALE_CLOCK fail
timer.pml REACH_FALL_RISE fail
timer.pml STEP_BACK pass
timer.pml NO_UNLATCH fail
timer.pml UNLATCH_STALE_CLOCK fail
timer.pml REACH_STEP_UNLATCH fail
kvm.pml - pass
kvm.pml CLEAR_LATE fail
kvm.pml SIGNAL_ONLY fail
kvm.pml RUN_ON_CANCEL fail
sleeper.pml - pass
sleeper.pml NO_CLAIM pass
sleeper.pml WAKER_USE_EVFD fail
sleeper.pml SPLIT_MECH fail
sleeper.pml NO_GRACE_PERIOD fail
sleeper.pml NO_DESTROYED_CHECK fail
sleeper.pml CLAIM_LOAD_STORE fail
destroy.pml - pass
destroy.pml ARM_XCHG fail
destroy.pml LEAVE_XCHG fail
destroy.pml DESTROY_XCHG fail
destroy.pml ARM_IGNORES_OLD fail
destroy.pml POLL_STORE fail
destroy.pml CALLOUT_NO_FENCE fail
destroy.pml REACH_ASLEEP_AFTER_DESTROY fail
needskick.pml - pass
needskick.pml HOOK_AFTER_RECHECK fail
needskick.pml LOOK_AFTER_RECHECK fail
payload.pml - pass
payload.pml NO_QUIESCE fail
payload.pml NO_RECHECK fail
payload.pml COUNT_OUT_EARLY fail
PLAN

while read -r model variant expect; do
	def=""
	[ "$variant" = "-" ] || def="-D$variant"
	# A variant that must fail stops at its first error: its search is
	# short, and compiling pan.c unoptimised halves the compile, which is
	# most of its time (a loaded host once took the whole test past its
	# ctest timeout).
	opt=-O2
	[ "$expect" = "fail" ] && opt=-O0
	rm -f "$work/out.txt"
	( cd "$work" && spin -a $def "$dir/$model" >/dev/null &&
	  ${CC:-cc} $opt -DSAFETY -w -o pan pan.c &&
	  ./pan -m200000 > out.txt 2>&1 ) || true
	errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$work/out.txt" | head -n1)
	states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$work/out.txt" | head -n1)
	if [ -z "$errors" ]; then
		got=broken
	elif [ "$errors" -eq 0 ]; then
		got=pass
	else
		got=fail
	fi
	if [ "$got" = "$expect" ]; then verdict=ok; else verdict=WRONG; status=1; fi
	printf '%-10s %-22s expect %-4s got %-4s states %-10s %s\n' \
		"$model" "$variant" "$expect" "$got" "${states:-?}" "$verdict"
	rm -f "$work"/pan* "$work"/*.trail
done < "$work/plan"
exit $status
