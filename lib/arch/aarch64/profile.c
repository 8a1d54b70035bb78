/* SPDX-License-Identifier: MIT */
/* The arm64 profile (include/vsched/profile.h). Data only, compiled on
 * every build: vsched_profile_get("aarch64") answers on any host. */
#include "../arch.h"

#define K VSCHED__PROFILE_KIND
#define B VSCHED_KIND_BIT

/* check_vcpu_requests() in arch/arm64/kvm/arm.c. The timers assert their
 * interrupt lines through the vgic (IRQ_PENDING only kicks). */
enum {
	A_VM_DEAD, A_SLEEP, A_VCPU_RESET, A_IRQ_PENDING, A_RECORD_STEAL,
	A_RELOAD_GICv4, A_RELOAD_PMU, A_RESYNC_PMU_EL0, A_SUSPEND, A_VTIMER, A_PTIMER,
};

static const struct vsched_profile_kind arm64_kinds[] = {
	K(A_VM_DEAD, "VM_DEAD", 0),
	/* vcpu_req_sleep(): woken by a signal, it asks to sleep again */
	VSCHED__PROFILE_KIND_RERAISE(A_SLEEP, "SLEEP", 0),
	K(A_VCPU_RESET, "VCPU_RESET", B(A_RELOAD_PMU)),
	K(A_IRQ_PENDING, "IRQ_PENDING", 0),
	K(A_RECORD_STEAL, "RECORD_STEAL", 0),
	K(A_RELOAD_GICv4, "RELOAD_GICv4", 0),
	K(A_RELOAD_PMU, "RELOAD_PMU", 0),
	K(A_RESYNC_PMU_EL0, "RESYNC_PMU_EL0", 0),
	K(A_SUSPEND, "SUSPEND", 0),
	K(A_VTIMER, "VTIMER", 0),
	K(A_PTIMER, "PTIMER", 0),
};

const struct vsched_profile vsched__profile_aarch64 = {
	.arch = "aarch64",
	/* KVM's default halt_poll_ns on arm64. */
	.poll_max_ns = 500000,
	.timer_semantics = VSCHED_TIMER_LEVEL,
	.timer_kind = A_VTIMER,
	.nkinds = VSCHED__PROFILE_NKINDS(arm64_kinds),
	.kinds = arm64_kinds,
	.blocking = "sync the virtual interrupt controller state (vgic_v4_put) and arm the "
		    "GICv4 doorbell, before polling, so that pending interrupts are visible "
		    "to the poll",
	.unblocking = "disarm the doorbell and reload the vgic state (vgic_v4_load)",
};
