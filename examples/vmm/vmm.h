/* SPDX-License-Identifier: MIT */
/* vsched-vmm: what vmm.c (the VMM proper) shares with its two backends,
 * backend_kvm.c (real guests on /dev/kvm) and backend_sim.c (simulated vCPU
 * threads). */
#ifndef VMM_H
#define VMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <vsched/vsched.h>

#include "guest.h"

/* Request kinds of the VMM's table. */
enum {
	K_STOP = 0,
	K_PMU = 1, /* counter overflow: raises K_NMI (the PMI is an NMI) */
	K_NMI = 2,
	K_TIMER = 3, /* the guest timer's expiry */
	K_IPI = 4,
	K_PING = 5, /* the kick-race test's request */
};

/* How a guest entry ended. */
enum exit_kind {
	EXIT_AGAIN, /* kicked, cancelled, interrupt window: just re-enter */
	EXIT_HLT,
	EXIT_IO, /* OUT to `port` with `value` */
	EXIT_FAIL,
};

struct vexit {
	enum exit_kind kind;
	unsigned port;
	uint32_t value;
	int err; /* EXIT_FAIL: what went wrong */
};

struct vmm;

struct vcpu {
	struct vmm *m;
	unsigned id;
	pthread_t thread;
	struct vsched_vcpu *vs;
	struct vsched_timer *timer;
	void *be; /* the backend's per-vCPU state */
	/* Exits by kind, and the guest's DONE. */
	uint64_t exits_io, exits_hlt, exits_again;
	_Atomic bool done;
	uint32_t status;
	int error;
	/* Counters of the VMM's handlers. */
	uint64_t nmis_sent, pmis, timer_retracted;
	/* The guest timer: arms so far and the current arm's deadline. */
	uint32_t timer_epoch;
	uint64_t timer_deadline;
	_Atomic uint64_t pings_serviced;
};

struct backend {
	const char *name;
	/* VM-wide setup: memory with the guest, irqchip. */
	int (*vm_init)(struct vmm *m);
	/* On the vCPU's thread: registers, the adapter. */
	int (*vcpu_init)(struct vcpu *c);
	/* One guest entry (service, inject, commit, run). */
	void (*run)(struct vcpu *c, struct vexit *e);
	/* The guest halted: block until an interrupt is owed. */
	int (*halt)(struct vcpu *c);
	/* From request handlers, on the vCPU's thread. */
	void (*queue_irq)(struct vcpu *c, unsigned vector);
	/* Take back a queued, not yet injected vector: 1 if it was queued. */
	int (*retract_irq)(struct vcpu *c, unsigned vector);
	int (*queue_nmi)(struct vcpu *c);
	/* The host `kick` callback. */
	void (*kick)(struct vcpu *c);
	/* Backend figures for the report (may be NULL). */
	void (*report)(struct vcpu *c, uint64_t *kicked, uint64_t *irqs,
		       uint64_t *windows, uint64_t *halts_skipped);
	/* KVM's own binary stats of a vCPU, by name (0 when missing). */
	uint64_t (*kvm_stat)(struct vcpu *c, const char *name);
	/* Print the vCPU's guest state after a timeout or a lost kick, once
	 * its thread has ended (may be NULL). */
	void (*dump)(struct vcpu *c);
	void (*vcpu_fini)(struct vcpu *c);
	void (*vm_fini)(struct vmm *m);
};

struct vmm_options {
	const char *backend; /* "kvm", "sim", or NULL: kvm if /dev/kvm opens */
	bool kernel_irqchip;
	unsigned vcpus;
	unsigned workload; /* WL_* bits */
	unsigned iterations;
	unsigned poll_policy; /* enum vsched_poll_policy */
	unsigned timer_cancel; /* enum vsched_timer_cancel */
	bool naive_order; /* NMI before PMU: the order the table check rejects */
	unsigned storm_us; /* PMI storm: a PMU post every this many us (0: off) */
	unsigned kick_race; /* tries of the kick race (WL_SPIN) */
	unsigned timeout_s;
	bool stats; /* print each vCPU's vsched stats (vsched_vcpu_stats_write) */
	bool json;
};

struct vmm {
	struct vmm_options o;
	const struct backend *be;
	void *be_vm; /* the backend's VM state */
	uint8_t *mem; /* guest memory (both backends use the same layout) */
	struct vsched_vm *vm;
	struct vsched_timer_service *ts;
	pthread_t ts_thread;
	struct vcpu vcpus[G_MAX_VCPUS];
	uint64_t tsc_per_us;
	_Atomic bool stop;
	_Atomic unsigned ready;
	pthread_t storm;
	bool storm_started;
	_Atomic bool storm_stop;
};

/* Pointers into guest memory. */
static inline volatile uint32_t *vmm_mailbox(struct vmm *m, unsigned off)
{
	return (volatile uint32_t *)(m->mem + G_MAILBOX + off);
}

static inline volatile uint32_t *vmm_pva(struct vmm *m, unsigned id,
					 unsigned off)
{
	return (volatile uint32_t *)(m->mem + G_PVA + id * G_PVA_SIZE + off);
}

uint64_t vmm_now_ns(void);

extern const struct backend vmm_kvm_backend;
extern const struct backend vmm_sim_backend;
/* True when /dev/kvm can be opened and runs guests. */
bool vmm_kvm_available(void);

#endif
