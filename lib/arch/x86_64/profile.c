/* SPDX-License-Identifier: MIT */
/* The x86-64 profile (include/vsched/profile.h). Data only, compiled on
 * every build: vsched_profile_get("x86_64") answers on any host. */
#include "../arch.h"

#define K VSCHED__PROFILE_KIND
#define B VSCHED_KIND_BIT

/* KVM's vcpu_enter_guest() order since "Service NMI requests after PMI
 * requests in VM-Enter path" (2023): SMI, PMU, PMI, then NMI. The guest
 * timer (LAPIC TSC-deadline) and KVM_REQ_EVENT come after the request block. */
enum {
	X_VM_DEAD, X_MMU_FREE_OBSOLETE_ROOTS, X_MIGRATE_TIMER, X_MASTERCLOCK_UPDATE,
	X_GLOBAL_CLOCK_UPDATE, X_CLOCK_UPDATE, X_MMU_SYNC, X_LOAD_MMU_PGD, X_TLB_FLUSH,
	X_TLB_FLUSH_CURRENT, X_REPORT_TPR_ACCESS, X_TRIPLE_FAULT, X_APF_HALT,
	X_STEAL_UPDATE, X_SMI, X_PMU, X_PMI, X_NMI, X_IOAPIC_EOI_EXIT, X_SCAN_IOAPIC,
	X_LOAD_EOI_EXITMAP, X_APIC_PAGE_RELOAD, X_HV_STIMER, X_APICV_UPDATE,
	X_APF_READY, X_TIMER, X_EVENT,
};

static const struct vsched_profile_kind x86_kinds[] = {
	K(X_VM_DEAD, "VM_DEAD", 0),
	K(X_MMU_FREE_OBSOLETE_ROOTS, "MMU_FREE_OBSOLETE_ROOTS", 0),
	K(X_MIGRATE_TIMER, "MIGRATE_TIMER", 0),
	K(X_MASTERCLOCK_UPDATE, "MASTERCLOCK_UPDATE", B(X_CLOCK_UPDATE)),
	K(X_GLOBAL_CLOCK_UPDATE, "GLOBAL_CLOCK_UPDATE", B(X_CLOCK_UPDATE)),
	K(X_CLOCK_UPDATE, "CLOCK_UPDATE", 0),
	K(X_MMU_SYNC, "MMU_SYNC", 0),
	K(X_LOAD_MMU_PGD, "LOAD_MMU_PGD", 0),
	K(X_TLB_FLUSH, "TLB_FLUSH", 0),
	K(X_TLB_FLUSH_CURRENT, "TLB_FLUSH_CURRENT", 0),
	K(X_REPORT_TPR_ACCESS, "REPORT_TPR_ACCESS", 0),
	K(X_TRIPLE_FAULT, "TRIPLE_FAULT", 0),
	K(X_APF_HALT, "APF_HALT", 0),
	K(X_STEAL_UPDATE, "STEAL_UPDATE", 0),
	K(X_SMI, "SMI", B(X_EVENT)),
	K(X_PMU, "PMU", B(X_PMI)),
	K(X_PMI, "PMI", B(X_NMI)),
	K(X_NMI, "NMI", B(X_EVENT)),
	K(X_IOAPIC_EOI_EXIT, "IOAPIC_EOI_EXIT", B(X_EVENT)),
	K(X_SCAN_IOAPIC, "SCAN_IOAPIC", B(X_LOAD_EOI_EXITMAP)),
	K(X_LOAD_EOI_EXITMAP, "LOAD_EOI_EXITMAP", 0),
	K(X_APIC_PAGE_RELOAD, "APIC_PAGE_RELOAD", 0),
	/* kvm_hv_process_stimers(): a one-shot that expired as it started
	 * is marked pending again (stimer_mark_pending) */
	VSCHED__PROFILE_KIND_RERAISE(X_HV_STIMER, "HV_STIMER", B(X_EVENT)),
	K(X_APICV_UPDATE, "APICV_UPDATE", B(X_EVENT)),
	K(X_APF_READY, "APF_READY", 0),
	K(X_TIMER, "TIMER", B(X_EVENT)),
	K(X_EVENT, "EVENT", 0),
};

const struct vsched_profile vsched__profile_x86_64 = {
	.arch = "x86_64",
	/* KVM's default halt_poll_ns on x86. */
	.poll_max_ns = 200000,
	.timer_semantics = VSCHED_TIMER_ONESHOT,
	.timer_kind = X_TIMER,
	.nkinds = VSCHED__PROFILE_NKINDS(x86_kinds),
	.kinds = x86_kinds,
	.blocking = "stop the AVIC / arm the posted-interrupt wakeup vector, so that an "
		    "interrupt posted while the vCPU polls or sleeps wakes it",
	.unblocking = "disarm the posted-interrupt wakeup vector, restart the AVIC",
};
