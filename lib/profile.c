/* SPDX-License-Identifier: MIT */
/* The arch profiles (include/vsched/profile.h). */
#include <string.h>

#include "internal.h"

#ifndef VSCHED_PROFILE_DEFAULT /* CMake sets it from the target processor */
#define VSCHED_PROFILE_DEFAULT "x86_64"
#endif

#define B(k) VSCHED_KIND_BIT(k)

/* x86: KVM's vcpu_enter_guest() order since "Service NMI requests after PMI
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

#define K(id, name, raise) { id, name, (id) * 10, 0, raise }

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
	K(X_HV_STIMER, "HV_STIMER", B(X_EVENT)),
	K(X_APICV_UPDATE, "APICV_UPDATE", B(X_EVENT)),
	K(X_APF_READY, "APF_READY", 0),
	K(X_TIMER, "TIMER", B(X_EVENT)),
	K(X_EVENT, "EVENT", 0),
};

/* arm64: check_vcpu_requests() in arch/arm64/kvm/arm.c. The timers assert
 * their interrupt lines through the vgic (IRQ_PENDING only kicks). */
enum {
	A_VM_DEAD, A_SLEEP, A_VCPU_RESET, A_IRQ_PENDING, A_RECORD_STEAL,
	A_RELOAD_GICv4, A_RELOAD_PMU, A_RESYNC_PMU_EL0, A_SUSPEND, A_VTIMER, A_PTIMER,
};

static const struct vsched_profile_kind arm64_kinds[] = {
	K(A_VM_DEAD, "VM_DEAD", 0),
	K(A_SLEEP, "SLEEP", 0),
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

/* ppc64le, modelled on book3s HV: a TLB flush first, then the decrementer
 * and hypervisor decrementer, doorbells (msgsnd) and external interrupts. */
enum { P_TLB_FLUSH, P_DEC, P_HDEC, P_DOORBELL, P_EXTERNAL };

static const struct vsched_profile_kind ppc_kinds[] = {
	K(P_TLB_FLUSH, "TLB_FLUSH", 0),
	K(P_DEC, "DEC", 0),
	K(P_HDEC, "HDEC", 0),
	K(P_DOORBELL, "DOORBELL", 0),
	K(P_EXTERNAL, "EXTERNAL", 0),
};

#define N(a) (unsigned)(sizeof(a) / sizeof((a)[0]))

static const struct vsched_profile profiles[] = {
	{ "x86_64", 200000, VSCHED_TIMER_ONESHOT, X_TIMER, N(x86_kinds), x86_kinds,
	  "stop the AVIC / arm the posted-interrupt wakeup vector, so that an interrupt "
	  "posted while the vCPU polls or sleeps wakes it",
	  "disarm the posted-interrupt wakeup vector, restart the AVIC" },
	{ "aarch64", 500000, VSCHED_TIMER_LEVEL, A_VTIMER, N(arm64_kinds), arm64_kinds,
	  "sync the virtual interrupt controller state (vgic_v4_put) and arm the GICv4 "
	  "doorbell, before polling, so that pending interrupts are visible to the poll",
	  "disarm the doorbell and reload the vgic state (vgic_v4_load)" },
	{ "ppc64le", 10000, VSCHED_TIMER_DECREMENTER, P_DEC, N(ppc_kinds), ppc_kinds,
	  "mark the hardware thread idle (KVM_HWTHREAD_IN_IDLE) so that a wakeup knows an "
	  "IPI is needed",
	  "back to KVM_HWTHREAD_IN_KERNEL; skip the store and sync when already there" },
};

const struct vsched_profile *vsched_profile_get(const char *arch)
{
	if (!arch)
		arch = VSCHED_PROFILE_DEFAULT;
	for (unsigned i = 0; i < N(profiles); i++)
		if (!strcmp(profiles[i].arch, arch))
			return &profiles[i];
	return NULL;
}

int vsched_profile_find(const struct vsched_profile *p, const char *name)
{
	if (!p || !name)
		return VSCHED_EINVAL;
	for (unsigned i = 0; i < p->nkinds; i++)
		if (!strcmp(p->kinds[i].name, name))
			return (int)i;
	return VSCHED_ERANGE;
}

int vsched_profile_declare(struct vsched_vm *vm, const struct vsched_profile *p,
			   vsched_request_fn handler, void *arg)
{
	if (!vm || !p)
		return VSCHED_EINVAL;
	for (unsigned i = 0; i < p->nkinds; i++) {
		const struct vsched_profile_kind *k = &p->kinds[i];
		struct vsched_request_desc d = { .name = k->name, .priority = k->priority,
						 .flags = k->flags, .handler = handler,
						 .arg = arg, .may_raise = k->may_raise };
		int rc = vsched_request_declare(vm, k->kind, &d);
		if (rc)
			return rc;
	}
	return 0;
}
