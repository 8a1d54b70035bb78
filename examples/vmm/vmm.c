/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm's VMM proper: what a VMM built on vsched consists of, without
 * the test harness (harness.c), the report (report.c) or the command line
 * (main.c). Its backend (backend_kvm.c or backend_sim.c) runs the guests.
 *
 * - Setup (vmm_init): the backend's VM, the vsched VM with its request
 *   table and host callbacks, each vCPU with its guest timer, and the timer
 *   service's thread.
 * - The vCPU run loop (vcpu_thread): one guest entry at a time through the
 *   backend, which services requests and commits the entry (the mode word's
 *   Dekker protocol, doc/protocol.md); then the exit is handled.
 * - Exit handling (handle_exit): the userspace irqchip's I/O ports (IPI,
 *   timer, PMU, DONE) become posts and timer arms; HLT blocks in vsched's
 *   block engine through the backend.
 * - Stop and teardown (vmm_stop, vmm_fini).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "vmm.h"

uint64_t vmm_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- requests ---- */

static struct vcpu *self(struct vsched_vcpu *v)
{
	return vsched_vcpu_user(v);
}

static void on_pmu(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		   void *arg)
{
	(void)k, (void)p, (void)arg;
	/* The counter overflowed: deliver the PMI, an NMI on x86 (KVM's
	 * kvm_pmu_deliver_pmi raises KVM_REQ_NMI the same way). */
	self(v)->pmis++;
	vsched_post(v, K_NMI);
}

static void on_nmi(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		   void *arg)
{
	struct vcpu *c = self(v);

	(void)k, (void)p, (void)arg;
	if (c->m->be->queue_nmi(c) == 0)
		c->nmis_sent++;
}

static void on_timer(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		     void *arg)
{
	struct vcpu *c = self(v);
	bool current = c->timer_deadline && vmm_now_ns() >= c->timer_deadline;

	(void)k, (void)p, (void)arg;
	/* The device's status register: which arm this interrupt is for.
	 * The current arm cannot have expired before its deadline, so an
	 * expiry seen earlier belongs to an older arm: stale. */
	*vmm_pva(c->m, c->id, PVA_TIRQ_EPOCH) =
		current ? c->timer_epoch : c->timer_epoch - 1;
	c->m->be->queue_irq(c, TIMER_VEC);
}

static void on_ipi(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		   void *arg)
{
	struct vcpu *c = self(v);

	(void)k, (void)p, (void)arg;
	c->m->be->queue_irq(c, IPI_VEC);
}

static void on_ping(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		    void *arg)
{
	(void)k, (void)p, (void)arg;
	atomic_fetch_add_explicit(&self(v)->pings_serviced, 1, memory_order_release);
}

/* The table. Validated: PMU before NMI, as KVM's vcpu_enter_guest since
 * the 2023 fix. Naive: NMI first, so every PMI's NMI is found only at the
 * commit's re-check and cancels the entry. */
static int declare_table(struct vmm *m)
{
	const struct {
		unsigned kind;
		const char *name;
		unsigned prio, naive_prio;
		vsched_request_fn fn;
		uint64_t raises;
	} t[] = {
		{ K_STOP, "stop", 0, 0, NULL, 0 },
		{ K_PMU, "pmu", 10, 10, on_pmu, VSCHED_KIND_BIT(K_NMI) },
		{ K_NMI, "nmi", 20, 5, on_nmi, 0 },
		{ K_TIMER, "timer", 30, 30, on_timer, 0 },
		{ K_IPI, "ipi", 40, 40, on_ipi, 0 },
		{ K_PING, "ping", 50, 50, on_ping, 0 },
	};
	int rc;

	for (unsigned i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		struct vsched_request_desc d = {
			.name = t[i].name,
			.priority = m->o.naive_order ? t[i].naive_prio : t[i].prio,
			.handler = t[i].fn,
			.arg = m,
			.may_raise = t[i].raises,
		};

		rc = vsched_request_declare(m->vm, t[i].kind, &d);
		if (rc < 0)
			return rc;
	}
	rc = vsched_request_finalize(m->vm, m->o.naive_order ?
					    VSCHED_FINALIZE_ALLOW_LATE_RAISE : 0);
	if (rc < 0)
		fprintf(stderr, "vsched-vmm: request table: %s\n", vsched_strerror(rc));
	return rc;
}

/* ---- host callbacks ---- */

/* On a poster's thread, once vsched has moved the vCPU from IN_GUEST to
 * EXITING_GUEST: the backend forces the guest out. */
static void host_kick(struct vsched_vcpu *v, void *ctx)
{
	struct vmm *m = ctx;

	m->be->kick(self(v));
}

/* Ends a halt when the VMM stops. */
static bool host_has_event(struct vsched_vcpu *v, void *ctx)
{
	struct vmm *m = ctx;

	(void)v;
	return atomic_load_explicit(&m->stop, memory_order_relaxed);
}

/* ---- the vCPU threads: the run loop and its exits ---- */

void vmm_stop(struct vmm *m)
{
	atomic_store(&m->stop, true);
	for (unsigned i = 0; i < m->o.vcpus; i++) {
		if (m->vcpus[i].vs) {
			vsched_post(m->vcpus[i].vs, K_STOP);
			vsched_vcpu_kick(m->vcpus[i].vs);
		}
	}
}

/* An OUT to one of the userspace irqchip's devices, on the vCPU's thread:
 * an IPI becomes a post to its destination, a timer write an arm of the
 * vCPU's guest timer (whose expiry the timer service posts as K_TIMER). */
static int handle_io(struct vcpu *c, unsigned port, uint32_t value)
{
	struct vmm *m = c->m;

	switch (port) {
	case PORT_IPI:
		if (value >= m->o.vcpus)
			return -EINVAL;
		return vsched_post(m->vcpus[value].vs, K_IPI);
	case PORT_TIMER:
		/* The device deasserts on a re-arm: an expiry that was
		 * delivered to our IRR but is still waiting for IF=1 is
		 * stale now (vsched's policy handles the ones not yet
		 * serviced). */
		c->timer_retracted += m->be->retract_irq(c, TIMER_VEC) > 0;
		c->timer_epoch++;
		c->timer_deadline = value ? vmm_now_ns() + value * 1000ull : 0;
		return vsched_timer_arm(c->timer, c->timer_deadline);
	case PORT_PMU:
		return vsched_post(c->vs, K_PMU);
	case PORT_DONE:
		c->status = value;
		atomic_store(&c->done, true);
		return 0;
	default:
		return -EINVAL;
	}
}

/* One exit, on the vCPU's thread: count it and handle it. A handler's
 * error is left in e->err. */
static void handle_exit(struct vcpu *c, struct vexit *e)
{
	int rc;

	switch (e->kind) {
	case EXIT_AGAIN:
		c->exits_again++;
		break;
	case EXIT_HLT:
		c->exits_hlt++;
		rc = c->m->be->halt(c);
		if (rc < 0)
			e->err = rc;
		break;
	case EXIT_IO:
		c->exits_io++;
		rc = handle_io(c, e->port, e->value);
		if (rc < 0) {
			fprintf(stderr, "vsched-vmm: vCPU %u: port %#x value %u: %s\n",
				c->id, e->port, e->value, vsched_strerror(rc));
			e->err = rc;
		}
		break;
	case EXIT_FAIL:
		break;
	}
}

/* The run loop: enter the guest, handle the exit, until the guest is done
 * or the VMM stops. A failed entry, or a failed exit other than a
 * re-entry, stops the whole VMM. */
static void *vcpu_thread(void *arg)
{
	struct vcpu *c = arg;
	struct vmm *m = c->m;
	int rc = m->be->vcpu_init(c);

	vsched_thread_init();
	atomic_fetch_add(&m->ready, 1);
	if (rc < 0) {
		c->error = rc;
		vmm_stop(m);
		return NULL;
	}
	while (atomic_load(&m->ready) < m->o.vcpus + 1)
		; /* start together, once the main thread is set */
	while (!atomic_load(&c->done) && !atomic_load(&m->stop)) {
		struct vexit e = { .kind = EXIT_AGAIN };

		m->be->run(c, &e);
		handle_exit(c, &e);
		if (e.kind == EXIT_FAIL || (e.err && e.kind != EXIT_AGAIN)) {
			c->error = e.err ? e.err : -EIO;
			vmm_stop(m);
		}
	}
	return NULL;
}

/* The timer service's thread: expiries become K_TIMER posts. */
static void *timer_thread(void *arg)
{
	vsched_timer_service_run(arg);
	return NULL;
}

/* ---- setup and teardown ---- */

/* The vsched VM: the host callbacks, the poll window, one slot per vCPU
 * (vsched_vm_create() copies the callbacks and the window). */
static int create_vm(struct vmm *m)
{
	struct vsched_host_ops ops = {
		.kick = host_kick,
		.has_event = host_has_event,
		.ctx = m,
	};
	struct vsched_poll_params poll;
	struct vsched_vm_config cfg = {
		.size = sizeof(cfg),
		.max_vcpus = m->o.vcpus,
		.ops = &ops,
		.poll = &poll,
		.user = m,
	};

	/* The window KVM uses on this arch (x86: halt_poll_ns 200 us), from
	 * the arch profile rather than written here again. */
	vsched_poll_defaults(m->o.poll_policy,
			     vsched_profile_get(NULL)->poll_max_ns, &poll);
	return vsched_vm_create(&cfg, &m->vm);
}

/* vCPU `i` with its guest timer, and its result area in guest memory:
 * its id, its role in the ping-pong, its partner, its seed, its log. */
static int create_vcpu(struct vmm *m, unsigned i)
{
	struct vcpu *c = &m->vcpus[i];
	struct vsched_timer_desc td = {
		.size = sizeof(td),
		.name = "deadline",
		.semantics = VSCHED_TIMER_ONESHOT,
		.kind = K_TIMER,
		.cancel = m->o.timer_cancel,
	};
	bool paired = (i ^ 1) < m->o.vcpus;
	int rc;

	c->m = m;
	c->id = i;
	rc = vsched_vcpu_create(m->vm, i, c, &c->vs);
	if (rc < 0)
		return rc;
	rc = vsched_timer_create(c->vs, &td, &c->timer);
	if (rc < 0)
		return rc;
	*vmm_pva(m, i, PVA_ID) = i;
	*vmm_pva(m, i, PVA_ROLE) = !paired ? ROLE_NONE :
				   (i & 1) ? ROLE_RESP : ROLE_INIT;
	*vmm_pva(m, i, PVA_PARTNER) = i ^ 1;
	*vmm_pva(m, i, PVA_SEED) = 0x9e3779b9u * (i + 1);
	*vmm_pva(m, i, PVA_LOG) = G_LOGS + i * G_LOG_SIZE;
	return 0;
}

int vmm_init(struct vmm *m, const struct vmm_options *o,
	     const struct backend *be)
{
	int rc;

	m->o = *o;
	m->be = be;
	rc = be->vm_init(m);
	if (rc < 0)
		return rc;
	rc = create_vm(m);
	if (rc < 0)
		return rc;
	rc = declare_table(m);
	if (rc < 0)
		return rc;
	/* The mailbox, read by the guest at its start. */
	*vmm_mailbox(m, MB_WORKLOAD) = o->workload;
	*vmm_mailbox(m, MB_KERNEL) = o->kernel_irqchip;
	*vmm_mailbox(m, MB_ITERS) = o->iterations;
	*vmm_mailbox(m, MB_NCPUS) = o->vcpus;
	for (unsigned i = 0; i < o->vcpus; i++) {
		rc = create_vcpu(m, i);
		if (rc < 0)
			return rc;
	}
	rc = vsched_timer_service_create(m->vm, &m->ts);
	if (rc < 0)
		return rc;
	if (pthread_create(&m->ts_thread, NULL, timer_thread, m->ts) != 0)
		return -EAGAIN;
	m->ts_running = true;
	return 0;
}

int vmm_start(struct vmm *m)
{
	for (unsigned i = 0; i < m->o.vcpus; i++) {
		if (pthread_create(&m->vcpus[i].thread, NULL, vcpu_thread,
				   &m->vcpus[i]) != 0) {
			vmm_stop(m);
			for (unsigned j = 0; j < i; j++)
				pthread_join(m->vcpus[j].thread, NULL);
			return -EAGAIN;
		}
	}
	while (atomic_load(&m->ready) < m->o.vcpus)
		;
	/* vCPU 0 reads the TSC rate; the guest reads it from the mailbox. */
	*vmm_mailbox(m, MB_TSC_PER_US) = (uint32_t)(m->tsc_per_us ? m->tsc_per_us : 1000);
	if (!m->tsc_per_us)
		m->tsc_per_us = 1000;
	return 0;
}

void vmm_release(struct vmm *m)
{
	atomic_fetch_add(&m->ready, 1);
}

void vmm_fini(struct vmm *m)
{
	if (m->ts_running) {
		vsched_timer_service_stop(m->ts);
		pthread_join(m->ts_thread, NULL);
	}
	/* kvm.h's teardown order: destroy each vCPU (no kick callback runs
	 * after it), then the backend's detach. */
	for (unsigned i = 0; i < m->o.vcpus; i++) {
		if (m->vcpus[i].vs)
			vsched_vcpu_destroy(m->vcpus[i].vs);
		if (m->vcpus[i].be)
			m->be->vcpu_fini(&m->vcpus[i]);
	}
	if (m->ts)
		vsched_timer_service_destroy(m->ts);
	if (m->vm)
		vsched_vm_destroy(m->vm);
	m->be->vm_fini(m);
}
