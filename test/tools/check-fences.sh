#!/bin/sh
# Each fence of the kick protocol compiles to the intended instruction:
# disassemble the built library and look inside the functions that carry
# the Dekker pair (post: RMW then fence; enter and block: mode write then
# fence; kick: fence). With INLINE_BIN (test_hotpath_inline), the same for
# the VSCHED_INLINE fast paths compiled into a program: its hot_post and
# hot_enter wrap the inline vsched_post() and vsched_vcpu_enter().
# usage: check-fences.sh LIBRARY ARCH [OBJDUMP [INLINE_BIN]]
# ARCH is the backend's name in the arch table (CMakeLists.txt); an arch of
# the table without expectations here fails: a port adds its line.
set -eu
lib=$1
arch=$2
objdump=${3:-objdump}
dis=$(mktemp)
trap 'rm -f "$dis"' EXIT
inl=${4:-}
"$objdump" -d --no-show-raw-insn "$lib" > "$dis"
[ -z "$inl" ] || "$objdump" -d --no-show-raw-insn "$inl" >> "$dis"
body() { awk -v f="<$1>:" '$2 == f { on = 1; next } on && /^$/ { exit } on' "$dis"; }
# An unoptimised build (-O0) keeps the static inline helpers out of line
# (vsched__mode_of, a one-line mask, has no copy of its own at any -O
# level above) and its fences sit in them: there a function is read with
# the functions it calls (call, bl, brasl, jal: each arch's mnemonic), five
# calls deep (the post's fence is four down on arm64: vsched_post,
# vsched__post_fast, vsched__post_bit, vsched__mb_after_rmw, vsched__mb).
# An optimised build is read as it is, so that a fence left only in a
# callee (a slow path) is not taken for the function's own.
if grep -q '<vsched__mode_of>:' "$dis"; then depth=5; else depth=0; fi
callees() {
	body "$1" | sed -nE 's/.*[[:space:]](callq?|bl|brasl|jalr?)[[:space:]].*<([A-Za-z0-9_.]+)(\+0x[0-9a-f]+)?>.*/\2/p' | sort -u
}
reach() { # function depth
	body "$1"
	[ "$2" -gt 0 ] || return 0
	for c in $(callees "$1"); do reach "$c" $(($2 - 1)); done
}
case "$arch" in
x86_64)
	post='lock (bts|or|cmpxchg)'   # the RMW is the full barrier
	enter='xchg'                    # the mode exchange is the full barrier
	kick='lock add'                 # vsched__mb: locked add to the stack
	;;
aarch64)
	post='dmb[[:space:]]+ish'; enter='dmb[[:space:]]+ish'; kick='dmb[[:space:]]+ish' ;;
ppc64le)
	post='(^|[[:space:]])(hw)?sync'; enter='(^|[[:space:]])(hw)?sync'; kick='(^|[[:space:]])(hw)?sync' ;;
s390x) # bcr 14,0 (z196+) or bcr 15,0, the serializing no-branch:
	# objdump names them bnor %r0 and br %r0
	post='(^|[[:space:]])(bnor|br|bcr[[:space:]]+1[45],)[[:space:]]*%?r?0([^0-9]|$)'
	enter=$post; kick=$post ;;
*)
	echo "FAIL: no fence expectations for arch '$arch' (add them to $0)"; exit 1 ;;
esac
status=0
check() { # function pattern what
	if reach "$1" "$depth" | grep -Eq "$2"; then
		echo "ok: $1 has $3"
	else
		echo "FAIL: $1 lacks $3 ($2)"
		status=1
	fi
}
check vsched_post "$post" "the post's store-load fence"
check vsched_vcpu_enter "$enter" "the entry's store-load fence"
check vsched_vcpu_kick "$kick" "the event kick's full fence"
if [ -n "$inl" ]; then
	check hot_post "$post" "the inline post's store-load fence"
	check hot_enter "$enter" "the inline entry's store-load fence"
fi
# power: lwsync does not order store->load; the Dekker fences must be sync.
# GCC's seq_cst RMW already starts with a sync (sync; l[dw]arx; st[dw]cx.;
# isync), which the patterns above find even when the fence after the RMW
# is gone or is an lwsync: so here a sync must follow the store-conditional
# (optimised builds, where the RMW and its fence are in the function).
case "$arch" in ppc64le)
	for f in vsched_post vsched_vcpu_enter ${inl:+hot_post hot_enter}; do
		[ "$depth" -eq 0 ] || continue
		if ! body $f | awk '/[[:space:]]st[bhwd]cx\./ { rmw = 1; next }
			rmw && /(^|[[:space:]])(hw)?sync([[:space:]]|$)/ { ok = 1 }
			END { exit !ok }'; then
			echo "FAIL: no sync after the RMW's store-conditional in $f"; status=1
		fi
	done ;;
esac
# x86-64: the barrier after the post's RMW must stop only the compiler, in
# a way that keeps the flags: an empty asm clobbers them, and the inline
# post then copies the old bit out of `lock bts`'s carry (setb, movzbl,
# test) instead of branching on it (3 of its 11 instructions).
case "$arch" in x86_64)
	if [ -n "$inl" ] && [ "$depth" -eq 0 ] &&
	   body hot_post | grep -Eq '[[:space:]]set(b|c|nae)[[:space:]]'; then
		echo "FAIL: hot_post copies the RMW's carry out (setb) instead of branching on it"
		status=1
	fi ;;
esac
exit $status
