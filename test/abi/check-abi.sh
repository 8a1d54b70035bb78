#!/bin/sh
# The ABI contract, with abigail (Debian's abigail-tools):
# - the hot vCPU layout of <vsched/inline.h> (struct vsched_vcpu_hot, which
#   VSCHED_INLINE hypervisors compile in) must not change at all: abidiff
#   of HOT_SO (test/abi/hot_layout.c) against hot-layout.abi;
# - libvsched.so may grow, but must not lose or incompatibly change an
#   exported function: abidiff against libvsched.abi fails on
#   ABIDIFF_ABI_INCOMPATIBLE_CHANGE (8) only.
# That the library's private struct vsched_vcpu has the same layout is
# checked when it compiles (static assertions in lib/internal.h).
# usage: check-abi.sh HOT_SO LIBVSCHED_SO [--update]
set -eu
dir=$(cd "$(dirname "$0")" && pwd)
hot=$1
lib=$2
if ! command -v abidiff >/dev/null 2>&1; then
	echo "FAIL: abidiff missing (Debian package abigail-tools)"
	exit 1
fi
if [ "${3:-}" = --update ]; then
	abidw --no-corpus-path --no-comp-dir-path "$hot" > "$dir/hot-layout.abi"
	abidw --no-corpus-path --no-comp-dir-path "$lib" > "$dir/libvsched.abi"
	echo "baselines written"
	exit 0
fi
status=0
if abidiff --no-added-syms "$dir/hot-layout.abi" "$hot"; then
	echo "ok: the hot vCPU layout matches hot-layout.abi"
else
	echo "FAIL: the hot vCPU layout (struct vsched_vcpu_hot) changed"
	status=1
fi
rc=0
abidiff --no-added-syms "$dir/libvsched.abi" "$lib" || rc=$?
if [ $((rc & 8)) -ne 0 ] || [ $((rc & 1)) -ne 0 ]; then
	echo "FAIL: libvsched.so's exported ABI lost or broke something (abidiff $rc)"
	status=1
else
	echo "ok: libvsched.so's exported ABI is compatible with libvsched.abi (abidiff $rc)"
fi
exit $status
