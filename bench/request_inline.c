/* SPDX-License-Identifier: MIT */
/*
 * The request paths as a hypervisor that opts in to the inline fast paths
 * compiles them (<vsched/inline.h>): each in a function of its own, the
 * same call structure as bench/request.c's raw sequences, for the request
 * bench (time) and instr (bench/callgrind.sh finds them by these names:
 * keep them).
 */
#define VSCHED_INLINE
#include "bench.h"

NOINLINE int inl_post(struct vsched_vcpu *v)
{
	return vsched_post(v, K_A);
}

NOINLINE int inl_service(struct vsched_vcpu *v)
{
	return vsched_service(v);
}

NOINLINE int inl_enter(struct vsched_vcpu *v)
{
	return vsched_vcpu_enter(v);
}

NOINLINE int inl_exit(struct vsched_vcpu *v)
{
	return vsched_vcpu_exit(v);
}
