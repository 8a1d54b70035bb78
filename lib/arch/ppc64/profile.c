/* SPDX-License-Identifier: MIT */
/* The ppc64le profile (include/vsched/profile.h). Data only, compiled on
 * every build: vsched_profile_get("ppc64le") answers on any host. */
#include "../arch.h"

#define K VSCHED__PROFILE_KIND

/* Modelled on book3s HV: a TLB flush first, then the decrementer and
 * hypervisor decrementer, doorbells (msgsnd) and external interrupts. */
enum { P_TLB_FLUSH, P_DEC, P_HDEC, P_DOORBELL, P_EXTERNAL };

static const struct vsched_profile_kind ppc_kinds[] = {
	K(P_TLB_FLUSH, "TLB_FLUSH", 0),
	K(P_DEC, "DEC", 0),
	K(P_HDEC, "HDEC", 0),
	K(P_DOORBELL, "DOORBELL", 0),
	K(P_EXTERNAL, "EXTERNAL", 0),
};

const struct vsched_profile vsched__profile_ppc64le = {
	.arch = "ppc64le",
	/* KVM's default halt poll window on power (book3s HV). */
	.poll_max_ns = 10000,
	.timer_semantics = VSCHED_TIMER_DECREMENTER,
	.timer_kind = P_DEC,
	.nkinds = VSCHED__PROFILE_NKINDS(ppc_kinds),
	.kinds = ppc_kinds,
	.blocking = "mark the hardware thread idle (KVM_HWTHREAD_IN_IDLE) so that a wakeup "
		    "knows an IPI is needed",
	.unblocking = "back to KVM_HWTHREAD_IN_KERNEL; skip the store and sync when already "
		      "there",
};
