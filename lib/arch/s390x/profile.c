/* SPDX-License-Identifier: MIT */
/* The s390x profile (include/vsched/profile.h). Data only, compiled on
 * every build: vsched_profile_get("s390x") answers on any host. */
#include "../arch.h"

#define K VSCHED__PROFILE_KIND
#define B VSCHED_KIND_BIT

/* vcpu_pre_run() in arch/s390/kvm/kvm-s390.c: first the interrupts
 * (kvm_s390_deliver_pending_interrupts, highest IRQ_PEND_ type first:
 * machine checks and program interrupts, the SIGP emergency signal and
 * external call, the clock comparator and the CPU timer, service signals,
 * pfault, virtio, I/O by ISC (0 first, one kind here), restart, set
 * prefix), then the requests (kvm_s390_handle_requests, each one handled
 * restarting the scan). Delivering a SIGP SET PREFIX sets the prefix
 * (kvm_s390_set_prefix), which raises TLB_FLUSH and REFRESH_GUEST_PREFIX:
 * both come after it in the same pass. The guest timer is the clock
 * comparator: pending while the TOD clock is past CKC and the CR0 subclass
 * mask and the PSW allow it, gone when CKC moves into the future (KVM
 * re-evaluates it before each delivery): a level. */
enum {
	S_MCHK_EX, S_PROG, S_MCHK_REP, S_EXT_EMERGENCY, S_EXT_EXTERNAL,
	S_EXT_CLOCK_COMP, S_EXT_CPU_TIMER, S_EXT_SERVICE_EV, S_EXT_SERVICE,
	S_PFAULT_INIT, S_PFAULT_DONE, S_VIRTIO, S_IO, S_RESTART, S_SET_PREFIX,
	S_REFRESH_GUEST_PREFIX, S_TLB_FLUSH, S_ENABLE_IBS, S_DISABLE_IBS,
	S_ICPT_OPEREXC, S_START_MIGRATION, S_STOP_MIGRATION, S_VSIE_RESTART,
};

static const struct vsched_profile_kind s390_kinds[] = {
	K(S_MCHK_EX, "MCHK_EX", 0),
	K(S_PROG, "PROG", 0),
	K(S_MCHK_REP, "MCHK_REP", 0),
	K(S_EXT_EMERGENCY, "EXT_EMERGENCY", 0),
	K(S_EXT_EXTERNAL, "EXT_EXTERNAL", 0),
	K(S_EXT_CLOCK_COMP, "EXT_CLOCK_COMP", 0),
	K(S_EXT_CPU_TIMER, "EXT_CPU_TIMER", 0),
	K(S_EXT_SERVICE_EV, "EXT_SERVICE_EV", 0),
	K(S_EXT_SERVICE, "EXT_SERVICE", 0),
	K(S_PFAULT_INIT, "PFAULT_INIT", 0),
	K(S_PFAULT_DONE, "PFAULT_DONE", 0),
	K(S_VIRTIO, "VIRTIO", 0),
	K(S_IO, "IO", 0),
	K(S_RESTART, "RESTART", 0),
	K(S_SET_PREFIX, "SET_PREFIX", B(S_TLB_FLUSH) | B(S_REFRESH_GUEST_PREFIX)),
	K(S_REFRESH_GUEST_PREFIX, "REFRESH_GUEST_PREFIX", 0),
	K(S_TLB_FLUSH, "TLB_FLUSH", 0),
	K(S_ENABLE_IBS, "ENABLE_IBS", 0),
	K(S_DISABLE_IBS, "DISABLE_IBS", 0),
	K(S_ICPT_OPEREXC, "ICPT_OPEREXC", 0),
	K(S_START_MIGRATION, "START_MIGRATION", 0),
	K(S_STOP_MIGRATION, "STOP_MIGRATION", 0),
	K(S_VSIE_RESTART, "VSIE_RESTART", 0),
};

const struct vsched_profile vsched__profile_s390x = {
	.arch = "s390x",
	/* KVM's default halt_poll_ns on s390 (KVM_HALT_POLL_NS_DEFAULT). KVM
	 * also skips the poll (kvm_arch_no_poll) while the host CPU's average
	 * steal time is at least halt_poll_max_steal percent (default 10): a
	 * hypervisor under a hypervisor (LPAR, z/VM) whose CPU is taken away
	 * gains nothing by spinning on it. */
	.poll_max_ns = 50000,
	.timer_semantics = VSCHED_TIMER_LEVEL,
	.timer_kind = S_EXT_CLOCK_COMP,
	.nkinds = VSCHED__PROFILE_NKINDS(s390_kinds),
	.kinds = s390_kinds,
	.blocking = "none in KVM's hooks (empty on s390): its wait handler marks the vCPU idle "
		    "(CPUSTAT_WAIT and the VM's idle_mask, where a floating interrupt finds a "
		    "vCPU to wake), restores the GISA alert mask so that an adapter interrupt "
		    "alerts, and arms an hrtimer for the clock comparator or CPU timer",
	.unblocking = "clear the idle mark and cancel the clock comparator hrtimer",
};
