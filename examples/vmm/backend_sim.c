/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm's simulated backend: each vCPU thread runs a C rendering of
 * guest.S on a context of its own (ucontext), so the same scripted
 * workloads, devices and checks run where /dev/kvm is missing. "Guest
 * code" runs between exits; the kick is a flag the guest sees at once (its
 * only long-running loop, the spin, polls it), cleared before the commit
 * exactly as the KVM adapter clears immediate_exit. Interrupts are taken
 * when the guest resumes from an exit with IF=1; NMIs whenever it resumes
 * outside its NMI handler.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "vmm.h"

#define SIM_STACK (64 * 1024)

struct sim_vcpu {
	struct vcpu *c;
	ucontext_t host, guest;
	uint8_t *stack;
	bool started;
	struct vexit exit;
	/* Guest CPU state. */
	bool if_flag, in_nmi;
	uint64_t irr[4];
	unsigned nmi_pending;
	/* The host side: an interrupt or NMI is owed (ends a halt). */
	_Atomic int kick;
	uint64_t kicked, irqs, halts_skipped;
};

static struct sim_vcpu *S(struct vcpu *c)
{
	return c->be;
}

static bool irr_any(const struct sim_vcpu *s)
{
	return s->irr[0] | s->irr[1] | s->irr[2] | s->irr[3];
}

static volatile uint32_t *pva(struct vcpu *c, unsigned off)
{
	return vmm_pva(c->m, c->id, off);
}

static uint32_t mb(struct vcpu *c, unsigned off)
{
	return *vmm_mailbox(c->m, off);
}

/* ---- the guest side ---- */

static void g_exit(struct vcpu *c, enum exit_kind kind, unsigned port,
		   uint32_t value);

static void g_send_ipi(struct vcpu *c, uint32_t dest)
{
	g_exit(c, EXIT_IO, PORT_IPI, dest);
}

static void g_ipi_handler(struct vcpu *c)
{
	(*pva(c, PVA_IPIS))++;
	*pva(c, PVA_REPLY) = 1;
	if (*pva(c, PVA_ROLE) == ROLE_RESP)
		g_send_ipi(c, *pva(c, PVA_PARTNER));
}

static void g_timer_handler(struct vcpu *c)
{
	if (*pva(c, PVA_TIRQ_EPOCH) == *pva(c, PVA_TEPOCH)) {
		*pva(c, PVA_FIRED) = 1;
		(*pva(c, PVA_TIMERS))++;
	} else {
		(*pva(c, PVA_STALE))++;
	}
}

/* Take what is owed: NMIs first, then interrupts by vector (IF=0 inside
 * the handler, as through an interrupt gate). */
static void g_deliver(struct vcpu *c)
{
	struct sim_vcpu *s = S(c);

	while (s->nmi_pending && !s->in_nmi) {
		s->nmi_pending--;
		s->in_nmi = true;
		(*pva(c, PVA_NMIS))++;
		s->in_nmi = false;
	}
	while (s->if_flag && irr_any(s)) {
		unsigned v = 0;

		for (int w = 3; w >= 0; w--) {
			if (s->irr[w]) {
				unsigned b = 63u - (unsigned)__builtin_clzll(s->irr[w]);

				s->irr[w] &= ~(UINT64_C(1) << b);
				v = (unsigned)w * 64 + b;
				break;
			}
		}
		s->irqs++;
		s->if_flag = false;
		if (v == IPI_VEC) {
			g_ipi_handler(c);
		} else if (v == TIMER_VEC) {
			g_timer_handler(c);
		} else {
			*pva(c, PVA_STATUS) = 0xbad;
		}
		s->if_flag = true;
	}
}

static void g_exit(struct vcpu *c, enum exit_kind kind, unsigned port,
		   uint32_t value)
{
	struct sim_vcpu *s = S(c);

	s->exit = (struct vexit){ .kind = kind, .port = port, .value = value };
	swapcontext(&s->guest, &s->host);
	g_deliver(c);
}

static void g_sti_hlt(struct vcpu *c)
{
	S(c)->if_flag = true;
	g_exit(c, EXIT_HLT, 0, 0);
	S(c)->if_flag = false;
}

static void g_ping(struct vcpu *c)
{
	volatile uint32_t *log = (volatile uint32_t *)(c->m->mem +
		*pva(c, PVA_LOG) + *pva(c, PVA_I) * 16);
	uint64_t t = vmm_now_ns();

	S(c)->if_flag = false;
	log[0] = (uint32_t)t;
	log[1] = (uint32_t)(t >> 32);
	*pva(c, PVA_REPLY) = 0;
	g_send_ipi(c, *pva(c, PVA_PARTNER));
	while (!*pva(c, PVA_REPLY))
		g_sti_hlt(c);
	t = vmm_now_ns();
	log[2] = (uint32_t)t;
	log[3] = (uint32_t)(t >> 32);
}

static void g_timer_arm(struct vcpu *c, uint32_t us)
{
	(*pva(c, PVA_TEPOCH))++;
	g_exit(c, EXIT_IO, PORT_TIMER, us);
}

static void g_timer(struct vcpu *c)
{
	uint32_t seed = *pva(c, PVA_SEED) * 1103515245u + 12345u;

	S(c)->if_flag = false;
	*pva(c, PVA_FIRED) = 0;
	*pva(c, PVA_SEED) = seed;
	if ((*pva(c, PVA_I) & 3) == 0)
		g_timer_arm(c, SHORT_US);
	g_timer_arm(c, ((seed >> 16) & RANGE_MASK) + MIN_US);
	while (!*pva(c, PVA_FIRED))
		g_sti_hlt(c);
}

static void g_pmi(struct vcpu *c)
{
	uint32_t before = *pva(c, PVA_NMIS);

	g_exit(c, EXIT_IO, PORT_PMU, 0);
	while (*pva(c, PVA_NMIS) == before)
		g_exit(c, EXIT_AGAIN, 0, 0); /* the NMI is late: a host bug */
}

/* makecontext passes ints only: the vCPU comes through the TLS. */
static __thread struct vcpu *sim_self;

static void g_main(void)
{
	struct vcpu *c = sim_self;
	unsigned wl, iters;

	wl = mb(c, MB_WORKLOAD);
	iters = mb(c, MB_ITERS);
	if (wl & WL_SPIN) {
		for (;;) {
			(*pva(c, PVA_SPIN))++;
			if (atomic_load_explicit(&S(c)->kick, memory_order_acquire))
				g_exit(c, EXIT_AGAIN, 0, 0);
		}
	}
	while (*pva(c, PVA_I) < iters) {
		if ((wl & WL_PING) && *pva(c, PVA_ROLE) == ROLE_INIT)
			g_ping(c);
		if (wl & WL_TIMER)
			g_timer(c);
		if (wl & WL_PMI)
			g_pmi(c);
		(*pva(c, PVA_I))++;
	}
	if ((wl & WL_PING) && *pva(c, PVA_ROLE) == ROLE_RESP) {
		while (*pva(c, PVA_IPIS) < iters)
			g_sti_hlt(c);
	}
	S(c)->if_flag = false;
	for (;;)
		g_exit(c, EXIT_IO, PORT_DONE, *pva(c, PVA_STATUS));
}

/* ---- the host side ---- */

static int sim_vm_init(struct vmm *m)
{
	m->mem = calloc(1, G_MEM_SIZE);
	if (!m->mem)
		return -ENOMEM;
	m->tsc_per_us = 1000; /* the sim guest's "tsc" is the ns clock */
	return 0;
}

static int sim_vcpu_init(struct vcpu *c)
{
	struct sim_vcpu *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	c->be = s;
	s->c = c;
	s->stack = malloc(SIM_STACK);
	if (!s->stack)
		return -ENOMEM;
	sim_self = c;
	return 0;
}

static void sim_run(struct vcpu *c, struct vexit *e)
{
	struct sim_vcpu *s = S(c);
	int rc = vsched_service(c->vs);

	e->kind = EXIT_FAIL;
	if (rc < 0) {
		e->err = rc;
		return;
	}
	/* As the KVM adapter's immediate_exit: cleared before the commit. */
	atomic_store_explicit(&s->kick, 0, memory_order_relaxed);
	rc = vsched_vcpu_enter(c->vs);
	if (rc == VSCHED_ENTRY_CANCELLED) {
		e->kind = EXIT_AGAIN;
		return;
	}
	if (rc < 0) {
		e->err = rc;
		return;
	}
	/* The stop flag after the commit, as kvm_run() looks at it: a stop
	 * whose K_STOP this service took must not enter a guest that only a
	 * kick would end. */
	if (atomic_load(&c->m->stop)) {
		vsched_vcpu_exit(c->vs);
		e->kind = EXIT_AGAIN;
		return;
	}
	if (!s->started) {
		getcontext(&s->guest);
		s->guest.uc_stack.ss_sp = s->stack;
		s->guest.uc_stack.ss_size = SIM_STACK;
		s->guest.uc_link = NULL;
		makecontext(&s->guest, g_main, 0);
		s->started = true;
	}
	swapcontext(&s->host, &s->guest);
	vsched_vcpu_exit(c->vs);
	if (s->exit.kind == EXIT_AGAIN &&
	    atomic_load_explicit(&s->kick, memory_order_relaxed))
		s->kicked++;
	*e = s->exit;
}

static bool owed(struct sim_vcpu *s)
{
	return s->nmi_pending || (irr_any(s) && s->if_flag);
}

static int sim_halt(struct vcpu *c)
{
	struct sim_vcpu *s = S(c);
	int rc;

	if (owed(s)) {
		s->halts_skipped++;
		return 0;
	}
	do {
		int reason = vsched_vcpu_block(c->vs, VSCHED_DEADLINE_NONE);

		if (reason < 0)
			return reason;
		rc = vsched_service(c->vs);
		if (rc < 0)
			return rc;
		if (reason == VSCHED_WAKE_EVENT)
			return 0; /* the VMM stops */
	} while (!owed(s));
	return 0;
}

static void sim_queue_irq(struct vcpu *c, unsigned vector)
{
	struct sim_vcpu *s = S(c);

	s->irr[vector / 64] |= UINT64_C(1) << (vector % 64);
}

static int sim_retract_irq(struct vcpu *c, unsigned vector)
{
	struct sim_vcpu *s = S(c);
	uint64_t bit = UINT64_C(1) << (vector % 64);

	if (!(s->irr[vector / 64] & bit))
		return 0;
	s->irr[vector / 64] &= ~bit;
	return 1;
}

static int sim_queue_nmi(struct vcpu *c)
{
	S(c)->nmi_pending++;
	return 0;
}

static void sim_kick(struct vcpu *c)
{
	atomic_store_explicit(&S(c)->kick, 1, memory_order_release);
}

static void sim_report(struct vcpu *c, uint64_t *kicked, uint64_t *irqs,
		       uint64_t *windows, uint64_t *halts_skipped)
{
	struct sim_vcpu *s = S(c);

	(void)windows;
	if (!s)
		return;
	*kicked += s->kicked;
	*irqs += s->irqs;
	*halts_skipped += s->halts_skipped;
}

static void sim_vcpu_fini(struct vcpu *c)
{
	struct sim_vcpu *s = S(c);

	if (!s)
		return;
	free(s->stack);
	free(s);
	c->be = NULL;
}

static void sim_vm_fini(struct vmm *m)
{
	free(m->mem);
	m->mem = NULL;
}

const struct backend vmm_sim_backend = {
	.name = "sim",
	.vm_init = sim_vm_init,
	.vcpu_init = sim_vcpu_init,
	.run = sim_run,
	.halt = sim_halt,
	.queue_irq = sim_queue_irq,
	.retract_irq = sim_retract_irq,
	.queue_nmi = sim_queue_nmi,
	.kick = sim_kick,
	.report = sim_report,
	.vcpu_fini = sim_vcpu_fini,
	.vm_fini = sim_vm_fini,
};
