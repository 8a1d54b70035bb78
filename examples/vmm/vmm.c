/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm: a small reference VMM on vsched. Runs the built-in guests
 * (guest.S) with N vCPUs on /dev/kvm, or on simulated vCPU threads where
 * there is no /dev/kvm, with a userspace interrupt controller whose halts,
 * IPIs, timers and NMIs all go through vsched; or, for comparison, on
 * KVM's in-kernel irqchip and KVM's own halt polling.
 *
 * usage: vsched-vmm [options]   (--help lists them)
 */
#define _GNU_SOURCE /* pthread_timedjoin_np */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

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

/* ---- vCPU threads ---- */

static void stop_all(struct vmm *m)
{
	atomic_store(&m->stop, true);
	for (unsigned i = 0; i < m->o.vcpus; i++) {
		if (m->vcpus[i].vs) {
			vsched_post(m->vcpus[i].vs, K_STOP);
			vsched_vcpu_kick(m->vcpus[i].vs);
		}
	}
}

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

static void *vcpu_thread(void *arg)
{
	struct vcpu *c = arg;
	struct vmm *m = c->m;
	int rc = m->be->vcpu_init(c);

	vsched_thread_init();
	atomic_fetch_add(&m->ready, 1);
	if (rc < 0) {
		c->error = rc;
		stop_all(m);
		return NULL;
	}
	while (atomic_load(&m->ready) < m->o.vcpus + 1)
		; /* start together, once the main thread is set */
	while (!atomic_load(&c->done) && !atomic_load(&m->stop)) {
		struct vexit e = { .kind = EXIT_AGAIN };

		m->be->run(c, &e);
		switch (e.kind) {
		case EXIT_AGAIN:
			c->exits_again++;
			break;
		case EXIT_HLT:
			c->exits_hlt++;
			rc = m->be->halt(c);
			if (rc < 0)
				e.err = rc;
			break;
		case EXIT_IO:
			c->exits_io++;
			rc = handle_io(c, e.port, e.value);
			if (rc < 0) {
				fprintf(stderr, "vsched-vmm: vCPU %u: port %#x value %u: %s\n",
					c->id, e.port, e.value, vsched_strerror(rc));
				e.err = rc;
			}
			break;
		case EXIT_FAIL:
			break;
		}
		if (e.kind == EXIT_FAIL || (e.err && e.kind != EXIT_AGAIN)) {
			c->error = e.err ? e.err : -EIO;
			stop_all(m);
		}
	}
	return NULL;
}

static void *timer_thread(void *arg)
{
	vsched_timer_service_run(arg);
	return NULL;
}

/* PMI storm: a PMU request to every running vCPU every storm_us. */
static void *storm_thread(void *arg)
{
	struct vmm *m = arg;
	struct timespec ts = { m->o.storm_us / 1000000,
			       (long)(m->o.storm_us % 1000000) * 1000 };

	while (!atomic_load(&m->stop) && !atomic_load(&m->storm_stop)) {
		for (unsigned i = 0; i < m->o.vcpus; i++)
			if (!atomic_load(&m->vcpus[i].done))
				vsched_post(m->vcpus[i].vs, K_PMU);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---- one run ---- */

/* KVM's binary stats reported in kernel-irqchip mode, by name. */
static const char *const kvm_stats[] = {
	"halt_successful_poll", "halt_attempted_poll", "halt_wakeup",
	"halt_poll_success_ns", "halt_poll_fail_ns",   "halt_wait_ns",
};
#define NKVM_STATS (sizeof(kvm_stats) / sizeof(kvm_stats[0]))

struct result {
	bool kernel_irqchip;
	double wall_s, cpu_s;
	unsigned nrt;
	double rt_median_us, rt_p99_us;
	uint64_t exits_io, exits_hlt, exits_again, kicked_exits, irqs, windows,
		halts_skipped;
	uint64_t polls_won, polls_attempted, kicks_sent, kicks_avoided,
		cancelled_entries, wakeups;
	uint64_t timers_fired, stale_cancelled, stale_delivered, retracted;
	uint64_t g_ipis, g_timers, g_stale, g_nmis, nmis_sent, pmis;
	uint64_t kvm[NKVM_STATS]; /* KVM's own, by kvm_stats[] */
	unsigned race_tries, race_lost;
	double race_max_wait_us;
	bool timed_out, pass;
	char why[160];
	char *stats; /* --stats: vsched_vcpu_stats_write() of every vCPU */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void fail_check(struct result *r, const char *why)
{
	if (r->pass)
		snprintf(r->why, sizeof(r->why), "%s", why);
	r->pass = false;
}

/* A lost kick: where vCPU 0 is, and whether a second kick, sent straight
 * to the backend (vsched's kick decision bypassed), gets it out. If that
 * one is lost too, the vCPU cannot be made to leave the guest at all. */
static void race_lost_report(struct vmm *m, unsigned try)
{
	struct vcpu *c = &m->vcpus[0];
	uint64_t t0 = vmm_now_ns();

	fprintf(stderr, "vsched-vmm: kick race: try %u lost (not serviced "
		"within 1 s); vCPU mode %d\n", try, vsched_vcpu_mode(c->vs));
	m->be->kick(c);
	while (atomic_load(&c->pings_serviced) < try + 1ull &&
	       vmm_now_ns() - t0 < 1000000000ull)
		;
	if (atomic_load(&c->pings_serviced) >= try + 1ull)
		fprintf(stderr, "vsched-vmm: kick race: a second kick got it "
			"serviced after %.1f us\n", (vmm_now_ns() - t0) / 1e3);
	else
		fprintf(stderr, "vsched-vmm: kick race: a second kick did not "
			"get it serviced within 1 s either\n");
}

/* The kick race: vCPU 0 spins in the guest; posts land at random moments
 * around its KVM_RUN and each must be serviced within the watchdog. */
static void kick_race(struct vmm *m, struct result *r)
{
	struct vcpu *c = &m->vcpus[0];
	uint32_t seed = 12345;

	for (unsigned i = 0; i < m->o.kick_race && !atomic_load(&m->stop); i++) {
		uint64_t delay, t0, t;

		seed = seed * 1103515245u + 12345u;
		delay = (seed >> 16) % 20000; /* 0..20 us */
		t0 = vmm_now_ns();
		while (vmm_now_ns() - t0 < delay)
			;
		t0 = vmm_now_ns();
		vsched_post(c->vs, K_PING);
		while (atomic_load_explicit(&c->pings_serviced,
					    memory_order_acquire) < i + 1ull) {
			t = vmm_now_ns();
			if (t - t0 > 1000000000ull) {
				r->race_lost++;
				r->race_tries = i + 1;
				race_lost_report(m, i);
				return;
			}
		}
		t = vmm_now_ns();
		if ((t - t0) / 1e3 > r->race_max_wait_us)
			r->race_max_wait_us = (t - t0) / 1e3;
		r->race_tries = i + 1;
	}
}

static void collect(struct vmm *m, struct result *r)
{
	const struct vmm_options *o = &m->o;
	double *rts = calloc((size_t)o->vcpus * o->iterations + 1, sizeof(double));
	unsigned n = 0;

	for (unsigned i = 0; i < o->vcpus; i++) {
		struct vcpu *c = &m->vcpus[i];
		struct vsched_vcpu_stats st = { .size = sizeof(st) };
		struct vsched_timer_stats ts;
		uint32_t role = *vmm_pva(m, i, PVA_ROLE);

		if (c->error)
			fail_check(r, "a vCPU stopped on an error");
		if (!(o->workload & WL_SPIN)) {
			if (!atomic_load(&c->done))
				fail_check(r, "a guest did not finish");
			if (c->status)
				fail_check(r, "a guest reported a bad status");
			if (*vmm_pva(m, i, PVA_I) != o->iterations)
				fail_check(r, "a guest did not run every iteration");
		}
		r->exits_io += c->exits_io;
		r->exits_hlt += c->exits_hlt;
		r->exits_again += c->exits_again;
		r->nmis_sent += c->nmis_sent;
		r->pmis += c->pmis;
		r->retracted += c->timer_retracted;
		if (m->be->report)
			m->be->report(c, &r->kicked_exits, &r->irqs, &r->windows,
				      &r->halts_skipped);
		if (vsched_vcpu_read_stats(c->vs, &st) == 0) {
			r->polls_won += st.halt.halt_successful_poll;
			r->polls_attempted += st.halt.halt_attempted_poll;
			r->kicks_sent += st.kicks_sent;
			r->kicks_avoided += st.kicks_avoided;
			r->cancelled_entries += st.cancelled_entries;
			r->wakeups += st.wakeups;
		}
		if (c->timer && vsched_timer_read_stats(c->timer, &ts) == 0) {
			r->timers_fired += ts.fired;
			r->stale_cancelled += ts.stale_cancelled;
			r->stale_delivered += ts.stale_delivered;
		}
		r->g_ipis += *vmm_pva(m, i, PVA_IPIS);
		r->g_timers += *vmm_pva(m, i, PVA_TIMERS);
		r->g_stale += *vmm_pva(m, i, PVA_STALE);
		r->g_nmis += *vmm_pva(m, i, PVA_NMIS);
		if ((o->workload & WL_PING) && role != ROLE_NONE &&
		    *vmm_pva(m, i, PVA_IPIS) != o->iterations)
			fail_check(r, "an IPI went unanswered");
		if ((o->workload & WL_TIMER) &&
		    *vmm_pva(m, i, PVA_TIMERS) < o->iterations)
			fail_check(r, "a timer sleep did not end by its timer");
		if ((o->workload & WL_PMI) && *vmm_pva(m, i, PVA_NMIS) < o->iterations)
			fail_check(r, "a PMI's NMI was lost");
		/* x86 keeps at most one NMI pending behind the one in
		 * service, so a storm may merge NMIs; without one, each
		 * injected NMI must arrive. */
		if (*vmm_pva(m, i, PVA_NMIS) > c->nmis_sent ||
		    (!o->storm_us && *vmm_pva(m, i, PVA_NMIS) != c->nmis_sent))
			fail_check(r, "the guest's NMI count differs from the NMIs injected");
		if ((o->workload & WL_PING) && role == ROLE_INIT && rts) {
			const uint32_t *log = (const uint32_t *)(m->mem + G_LOGS +
								 i * G_LOG_SIZE);

			for (unsigned k = 0; k < *vmm_pva(m, i, PVA_I); k++) {
				uint64_t s = (uint64_t)log[4 * k + 1] << 32 | log[4 * k];
				uint64_t e = (uint64_t)log[4 * k + 3] << 32 | log[4 * k + 2];

				rts[n++] = (double)(e - s) / (double)m->tsc_per_us;
			}
		}
		if (o->kernel_irqchip && m->be->kvm_stat) {
			for (unsigned k = 0; k < NKVM_STATS; k++)
				r->kvm[k] += m->be->kvm_stat(c, kvm_stats[k]);
		}
	}
	/* With vsched's CANCEL policy no stale expiry reaches the guest, and
	 * an expiry of the current arm before its deadline would show as
	 * stale too. (The in-kernel LAPIC cannot take back an interrupt
	 * already in its IRR: there stale ones are counted, not failed.) */
	if ((o->workload & WL_TIMER) && !o->kernel_irqchip &&
	    o->timer_cancel == VSCHED_CANCEL_CANCEL && r->g_stale)
		fail_check(r, "a stale or early timer interrupt reached the guest");
	if (o->workload & WL_SPIN) {
		if (r->race_lost)
			fail_check(r, "a kick was lost");
		else if (r->race_tries != o->kick_race)
			fail_check(r, "the kick race did not finish");
	}
	if (r->timed_out)
		fail_check(r, "timed out");
	r->nrt = n;
	if (n) {
		qsort(rts, n, sizeof(double), cmp_double);
		r->rt_median_us = rts[n / 2];
		r->rt_p99_us = rts[(size_t)((n - 1) * 0.99)];
	}
	free(rts);
}

/* Every vCPU thread ends once its guest is done or the stop kick reaches
 * it. One that is still in the guest 10 s after that was never kicked out,
 * which would hang the VMM in pthread_join; report it and fail instead
 * (its memory stays in use, so nothing is freed). */
static void join_vcpus(struct vmm *m)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	for (unsigned i = 0; i < m->o.vcpus; i++) {
		if (pthread_timedjoin_np(m->vcpus[i].thread, NULL, &until) == 0)
			continue;
		fprintf(stderr, "vsched-vmm: vCPU %u did not stop within 10 s "
			"of its stop kick (mode %d); failing without cleanup\n",
			i, vsched_vcpu_mode(m->vcpus[i].vs));
		fflush(NULL); /* no dump: vCPU ioctls wait for KVM_RUN */
		_exit(EXIT_FAILURE);
	}
}

static int run_once(const struct vmm_options *opt, const struct backend *be,
		    struct result *r)
{
	struct vmm *m = calloc(1, sizeof(*m));
	struct vsched_host_ops ops = { 0 };
	struct vsched_poll_params poll;
	struct vsched_vm_config cfg = { .size = sizeof(cfg) };
	uint64_t t0, deadline;
	double cpu0;
	int rc;

	memset(r, 0, sizeof(*r));
	r->pass = true;
	r->kernel_irqchip = opt->kernel_irqchip;
	if (!m)
		return -ENOMEM;
	m->o = *opt;
	m->be = be;
	ops.kick = host_kick;
	ops.has_event = host_has_event;
	ops.ctx = m;
	/* The window KVM uses on this arch (x86: halt_poll_ns 200 us), from
	 * the arch profile rather than written here again. */
	vsched_poll_defaults(opt->poll_policy, vsched_profile_get(NULL)->poll_max_ns,
			     &poll);
	cfg.max_vcpus = opt->vcpus;
	cfg.ops = &ops;
	cfg.poll = &poll;
	cfg.user = m;
	rc = be->vm_init(m);
	if (rc < 0)
		goto out;
	rc = vsched_vm_create(&cfg, &m->vm);
	if (rc < 0)
		goto out;
	rc = declare_table(m);
	if (rc < 0)
		goto out;
	/* The mailbox and each vCPU's result area. */
	*vmm_mailbox(m, MB_WORKLOAD) = opt->workload;
	*vmm_mailbox(m, MB_KERNEL) = opt->kernel_irqchip;
	*vmm_mailbox(m, MB_ITERS) = opt->iterations;
	*vmm_mailbox(m, MB_NCPUS) = opt->vcpus;
	for (unsigned i = 0; i < opt->vcpus; i++) {
		struct vcpu *c = &m->vcpus[i];
		struct vsched_timer_desc td = {
			.size = sizeof(td),
			.name = "deadline",
			.semantics = VSCHED_TIMER_ONESHOT,
			.kind = K_TIMER,
			.cancel = opt->timer_cancel,
		};
		bool paired = (i ^ 1) < opt->vcpus;

		c->m = m;
		c->id = i;
		rc = vsched_vcpu_create(m->vm, i, c, &c->vs);
		if (rc < 0)
			goto out;
		rc = vsched_timer_create(c->vs, &td, &c->timer);
		if (rc < 0)
			goto out;
		*vmm_pva(m, i, PVA_ID) = i;
		*vmm_pva(m, i, PVA_ROLE) = !paired ? ROLE_NONE :
					   (i & 1) ? ROLE_RESP : ROLE_INIT;
		*vmm_pva(m, i, PVA_PARTNER) = i ^ 1;
		*vmm_pva(m, i, PVA_SEED) = 0x9e3779b9u * (i + 1);
		*vmm_pva(m, i, PVA_LOG) = G_LOGS + i * G_LOG_SIZE;
	}
	rc = vsched_timer_service_create(m->vm, &m->ts);
	if (rc < 0)
		goto out;
	if (pthread_create(&m->ts_thread, NULL, timer_thread, m->ts) != 0) {
		rc = -EAGAIN;
		goto out;
	}
	for (unsigned i = 0; i < opt->vcpus; i++) {
		if (pthread_create(&m->vcpus[i].thread, NULL, vcpu_thread,
				   &m->vcpus[i]) != 0) {
			rc = -EAGAIN;
			stop_all(m);
			for (unsigned j = 0; j < i; j++)
				pthread_join(m->vcpus[j].thread, NULL);
			goto out_ts;
		}
	}
	while (atomic_load(&m->ready) < opt->vcpus)
		;
	/* vCPU 0 reads the TSC rate; the guest reads it from the mailbox. */
	*vmm_mailbox(m, MB_TSC_PER_US) = (uint32_t)(m->tsc_per_us ? m->tsc_per_us : 1000);
	if (!m->tsc_per_us)
		m->tsc_per_us = 1000;
	t0 = vmm_now_ns();
	cpu0 = cpu_seconds();
	atomic_fetch_add(&m->ready, 1);
	deadline = t0 + opt->timeout_s * 1000000000ull;
	if (opt->storm_us && pthread_create(&m->storm, NULL, storm_thread, m) == 0)
		m->storm_started = true;
	if (opt->workload & WL_SPIN) {
		kick_race(m, r);
		stop_all(m);
	}
	for (;;) {
		unsigned done = 0;

		for (unsigned i = 0; i < opt->vcpus; i++)
			done += atomic_load(&m->vcpus[i].done) || m->vcpus[i].error;
		if (done == opt->vcpus || atomic_load(&m->stop))
			break;
		if (vmm_now_ns() > deadline) {
			r->timed_out = true;
			/* Where each vCPU is stuck, for the report. */
			for (unsigned i = 0; i < opt->vcpus; i++) {
				uint64_t dl = 0;

				vsched_vcpu_next_timer(m->vcpus[i].vs, &dl);
				fprintf(stderr, "vsched-vmm: timeout: vCPU %u at "
					"iteration %u, mode %d, done %d, fired %u, "
					"next timer in %lld us, exits io %llu hlt %llu\n",
					i, *vmm_pva(m, i, PVA_I),
					vsched_vcpu_mode(m->vcpus[i].vs),
					(int)atomic_load(&m->vcpus[i].done),
					*vmm_pva(m, i, PVA_FIRED),
					dl == UINT64_MAX ? -1LL :
					(long long)(dl - vmm_now_ns()) / 1000,
					(unsigned long long)m->vcpus[i].exits_io,
					(unsigned long long)m->vcpus[i].exits_hlt);
			}
			stop_all(m);
			break;
		}
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	atomic_store(&m->storm_stop, true);
	if (m->storm_started)
		pthread_join(m->storm, NULL);
	join_vcpus(m);
	/* The guests' state where they were stopped (the threads are gone,
	 * so no vCPU ioctl waits for a KVM_RUN). */
	for (unsigned i = 0; (r->timed_out || r->race_lost) && be->dump &&
			     i < opt->vcpus; i++)
		if (m->vcpus[i].be)
			be->dump(&m->vcpus[i]);
	r->wall_s = (vmm_now_ns() - t0) / 1e9;
	r->cpu_s = cpu_seconds() - cpu0;
	collect(m, r);
	if (opt->stats) {
		/* vsched's own snapshot of every vCPU, text or JSON, printed
		 * after the run's table. */
		size_t len;
		FILE *f = open_memstream(&r->stats, &len);

		for (unsigned i = 0; f && i < opt->vcpus; i++) {
			vsched_vcpu_stats_write(m->vcpus[i].vs, f,
						opt->json ? VSCHED_STATS_JSON :
							    VSCHED_STATS_TEXT);
		}
		if (f)
			fclose(f);
	}
	rc = 0;
out_ts:
	vsched_timer_service_stop(m->ts);
	pthread_join(m->ts_thread, NULL);
out:
	if (rc < 0 && !r->why[0]) {
		r->pass = false;
		snprintf(r->why, sizeof(r->why), "setup: %s", vsched_strerror(rc));
	}
	for (unsigned i = 0; i < opt->vcpus; i++) {
		if (m->vcpus[i].be)
			be->vcpu_fini(&m->vcpus[i]);
	}
	if (m->ts)
		vsched_timer_service_destroy(m->ts);
	if (m->vm)
		vsched_vm_destroy(m->vm);
	be->vm_fini(m);
	free(m);
	return rc;
}

/* ---- options and output ---- */

static const char *const workloads[] = { "pingpong", "timer", "pmi", "mixed",
					 "kick-race", "fault" };
static const unsigned workload_bits[] = { WL_PING, WL_TIMER, WL_PMI,
					  WL_PING | WL_TIMER | WL_PMI, WL_SPIN,
					  WL_FAULT };
#define NWORKLOADS (sizeof(workloads) / sizeof(workloads[0]))
static const char *const polls[] = { "none", "fixed", "kvm", "adaptive" };
static const char *const cancels[] = { "keep", "cancel", "adaptive" };

static int pick(const char *arg, const char *const *names, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(arg, names[i]) == 0)
			return (int)i;
	return -1;
}

static const char *workload_name(unsigned bits)
{
	for (unsigned i = 0; i < NWORKLOADS; i++)
		if (workload_bits[i] == bits)
			return workloads[i];
	return "?";
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: vsched-vmm [options]\n"
		"  --backend kvm|sim|auto     vCPUs on /dev/kvm or simulated (auto: kvm if it opens)\n"
		"  --irqchip user|kernel|both userspace irqchip through vsched (default), KVM's\n"
		"                             in-kernel one with KVM's halt polling, or both in turn\n"
		"  --workload pingpong|timer|pmi|mixed|kick-race|fault   (default pingpong;\n"
		"                             fault: KVM only, the guest triple-faults at once)\n"
		"  --vcpus N                  1..%d (default 2)\n"
		"  --iterations N             per vCPU (default 2000, at most %d)\n"
		"  --poll none|fixed|kvm|adaptive     vsched's halt-poll policy (default adaptive)\n"
		"  --timer-cancel keep|cancel|adaptive  stale timer expiries (default cancel)\n"
		"  --order validated|naive    request order (naive: NMI before PMU)\n"
		"  --storm US                 PMI storm: a PMU request to each vCPU every US us\n"
		"  --tries N                  kick-race tries (default 100000)\n"
		"  --timeout S                watchdog for the whole run (default 120)\n"
		"  --json                     one JSON object per run\n"
		"  --stats                    also each vCPU's vsched stats (text, or JSON with --json)\n",
		G_MAX_VCPUS, G_MAX_ITERS);
}

static void print_table(const struct vmm_options *o, const char *be,
			const struct result *r)
{
	printf("vsched-vmm: backend %s, irqchip %s, %u vCPUs, workload %s, "
	       "%u iterations, poll %s, timer-cancel %s, order %s\n",
	       be, r->kernel_irqchip ? "kernel" : "user", o->vcpus,
	       workload_name(o->workload), o->iterations,
	       r->kernel_irqchip ? "(KVM's)" : polls[o->poll_policy],
	       cancels[o->timer_cancel], o->naive_order ? "naive" : "validated");
	if (r->nrt)
		printf("  round trip          median %.2f us, p99 %.2f us (%u)\n",
		       r->rt_median_us, r->rt_p99_us, r->nrt);
	printf("  host CPU            %.3f s in %.3f s wall", r->cpu_s, r->wall_s);
	if (r->nrt)
		printf(", %.3f s per 1000 round trips", r->cpu_s * 1000.0 / r->nrt);
	printf("\n  exits               io %llu, hlt %llu, re-entries %llu "
	       "(kicked %llu), irqs injected %llu, window requests %llu\n",
	       (unsigned long long)r->exits_io, (unsigned long long)r->exits_hlt,
	       (unsigned long long)r->exits_again,
	       (unsigned long long)r->kicked_exits, (unsigned long long)r->irqs,
	       (unsigned long long)r->windows);
	printf("  vsched              polls won %llu of %llu, kicks sent %llu, "
	       "avoided %llu, cancelled entries %llu, wakeups %llu\n",
	       (unsigned long long)r->polls_won,
	       (unsigned long long)r->polls_attempted,
	       (unsigned long long)r->kicks_sent,
	       (unsigned long long)r->kicks_avoided,
	       (unsigned long long)r->cancelled_entries,
	       (unsigned long long)r->wakeups);
	if (o->workload & WL_TIMER)
		printf("  timers              fired %llu, stale cancelled %llu "
		       "(+%llu taken back from the IRR), stale delivered %llu; "
		       "guest: %llu current, %llu stale\n",
		       (unsigned long long)r->timers_fired,
		       (unsigned long long)r->stale_cancelled,
		       (unsigned long long)r->retracted,
		       (unsigned long long)r->stale_delivered,
		       (unsigned long long)r->g_timers,
		       (unsigned long long)r->g_stale);
	if (o->workload & (WL_PMI | WL_PING))
		printf("  guest               IPIs %llu, NMIs %llu (injected %llu, "
		       "PMIs %llu)\n",
		       (unsigned long long)r->g_ipis, (unsigned long long)r->g_nmis,
		       (unsigned long long)r->nmis_sent, (unsigned long long)r->pmis);
	if (o->workload & WL_SPIN)
		printf("  kick race           %u tries, %u lost, longest wait %.1f us\n",
		       r->race_tries, r->race_lost, r->race_max_wait_us);
	if (r->kernel_irqchip) {
		printf("  KVM stats          ");
		for (unsigned k = 0; k < NKVM_STATS; k++)
			printf(" %s %llu%s", kvm_stats[k], (unsigned long long)r->kvm[k],
			       k + 1 < NKVM_STATS ? "," : "\n");
	}
	printf("  checks              %s%s%s\n", r->pass ? "PASS" : "FAIL",
	       r->pass ? "" : ": ", r->pass ? "" : r->why);
}

static void print_json(const struct vmm_options *o, const char *be,
		       const struct result *r)
{
	printf("{\"backend\":\"%s\",\"irqchip\":\"%s\",\"vcpus\":%u,"
	       "\"workload\":\"%s\",\"iterations\":%u,\"poll\":\"%s\","
	       "\"timer_cancel\":\"%s\",\"order\":\"%s\","
	       "\"round_trip_us\":{\"n\":%u,\"median\":%.3f,\"p99\":%.3f},"
	       "\"host_cpu_s\":%.4f,\"wall_s\":%.4f,\"cpu_s_per_1000_rt\":%.4f,"
	       "\"exits\":{\"io\":%llu,\"hlt\":%llu,\"reentry\":%llu,"
	       "\"kicked\":%llu,\"irqs_injected\":%llu,\"window_requests\":%llu},"
	       "\"vsched\":{\"polls_won\":%llu,\"polls_attempted\":%llu,"
	       "\"kicks_sent\":%llu,\"kicks_avoided\":%llu,"
	       "\"cancelled_entries\":%llu,\"wakeups\":%llu,"
	       "\"timers_fired\":%llu,\"stale_timers_cancelled\":%llu,"
	       "\"stale_timers_delivered\":%llu,\"timer_irqs_retracted\":%llu},"
	       "\"guest\":{\"ipis\":%llu,\"timers_current\":%llu,"
	       "\"timers_stale\":%llu,\"nmis\":%llu,\"nmis_injected\":%llu},"
	       "\"kick_race\":{\"tries\":%u,\"lost\":%u,\"max_wait_us\":%.1f},"
	       "\"kvm\":{",
	       be, r->kernel_irqchip ? "kernel" : "user", o->vcpus,
	       workload_name(o->workload), o->iterations,
	       r->kernel_irqchip ? "kvm-kernel" : polls[o->poll_policy],
	       cancels[o->timer_cancel], o->naive_order ? "naive" : "validated",
	       r->nrt, r->rt_median_us, r->rt_p99_us, r->cpu_s, r->wall_s,
	       r->nrt ? r->cpu_s * 1000.0 / r->nrt : 0.0,
	       (unsigned long long)r->exits_io, (unsigned long long)r->exits_hlt,
	       (unsigned long long)r->exits_again,
	       (unsigned long long)r->kicked_exits, (unsigned long long)r->irqs,
	       (unsigned long long)r->windows, (unsigned long long)r->polls_won,
	       (unsigned long long)r->polls_attempted,
	       (unsigned long long)r->kicks_sent,
	       (unsigned long long)r->kicks_avoided,
	       (unsigned long long)r->cancelled_entries,
	       (unsigned long long)r->wakeups,
	       (unsigned long long)r->timers_fired,
	       (unsigned long long)r->stale_cancelled,
	       (unsigned long long)r->stale_delivered,
	       (unsigned long long)r->retracted,
	       (unsigned long long)r->g_ipis, (unsigned long long)r->g_timers,
	       (unsigned long long)r->g_stale, (unsigned long long)r->g_nmis,
	       (unsigned long long)r->nmis_sent, r->race_tries, r->race_lost,
	       r->race_max_wait_us);
	for (unsigned k = 0; k < NKVM_STATS; k++)
		printf("\"%s\":%llu%s", kvm_stats[k], (unsigned long long)r->kvm[k],
		       k + 1 < NKVM_STATS ? "," : "");
	printf("},\"pass\":%s,\"why\":\"%s\"}\n", r->pass ? "true" : "false",
	       r->why);
}

/* --irqchip both: each vsched run against the in-kernel one (the last),
 * as a table with ratios or, with --json, one object. */
static void print_comparison(const struct vmm_options *o,
			     const struct result *res, const unsigned *poll,
			     int nrun)
{
	const struct result *k = &res[nrun - 1];
	double kcpu = k->cpu_s * 1000.0 / k->nrt;

	if (o->json)
		printf("{\"comparison\":\"user irqchip through vsched against "
		       "the in-kernel irqchip\",\"kernel\":{\"median_us\":%.3f,"
		       "\"p99_us\":%.3f,\"cpu_s_per_1000_rt\":%.4f},\"vsched\":[",
		       k->rt_median_us, k->rt_p99_us, kcpu);
	else
		printf("\nIPI round trip, %u vCPUs, %u iterations: vsched "
		       "(userspace irqchip) against KVM's in-kernel irqchip\n"
		       "  %-22s %10s %10s %14s %8s %8s %8s\n", o->vcpus,
		       o->iterations, "run", "median us", "p99 us",
		       "CPU s/1000 rt", "x med", "x p99", "x CPU");
	for (int i = 0; i < nrun - 1; i++) {
		const struct result *r = &res[i];
		double cpu = r->nrt ? r->cpu_s * 1000.0 / r->nrt : 0;

		if (!r->nrt)
			continue;
		if (o->json)
			printf("%s{\"poll\":\"%s\",\"median_us\":%.3f,"
			       "\"p99_us\":%.3f,\"cpu_s_per_1000_rt\":%.4f,"
			       "\"median_ratio\":%.3f,\"p99_ratio\":%.3f,"
			       "\"cpu_ratio\":%.3f}", i ? "," : "", polls[poll[i]],
			       r->rt_median_us, r->rt_p99_us, cpu,
			       r->rt_median_us / k->rt_median_us,
			       r->rt_p99_us / k->rt_p99_us, cpu / kcpu);
		else
			printf("  vsched, poll %-9s %10.2f %10.2f %14.4f %7.2fx "
			       "%7.2fx %7.2fx\n", polls[poll[i]], r->rt_median_us,
			       r->rt_p99_us, cpu, r->rt_median_us / k->rt_median_us,
			       r->rt_p99_us / k->rt_p99_us, cpu / kcpu);
	}
	if (o->json)
		printf("]}\n");
	else
		printf("  %-22s %10.2f %10.2f %14.4f %8s %8s %8s\n",
		       "in-kernel, KVM polling", k->rt_median_us, k->rt_p99_us,
		       kcpu, "1", "1", "1");
}

#ifndef VMM_WITH_KVM
bool vmm_kvm_available(void)
{
	return false;
}
#endif

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "backend", required_argument, NULL, 'b' },
		{ "irqchip", required_argument, NULL, 'i' },
		{ "workload", required_argument, NULL, 'w' },
		{ "vcpus", required_argument, NULL, 'n' },
		{ "iterations", required_argument, NULL, 'N' },
		{ "poll", required_argument, NULL, 'p' },
		{ "timer-cancel", required_argument, NULL, 'c' },
		{ "order", required_argument, NULL, 'o' },
		{ "storm", required_argument, NULL, 's' },
		{ "tries", required_argument, NULL, 't' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "json", no_argument, NULL, 'j' },
		{ "stats", no_argument, NULL, 'S' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct vmm_options o = {
		.vcpus = 2,
		.workload = WL_PING,
		.iterations = 2000,
		.poll_policy = VSCHED_POLL_ADAPTIVE,
		.timer_cancel = VSCHED_CANCEL_CANCEL,
		.kick_race = 100000,
		.timeout_s = 120,
	};
	const struct backend *be;
	const char *irqchip = "user";
	bool all_pass = true, poll_given = false;
	/* --irqchip both: each poll policy (or the one given), then kernel. */
	struct result res[5];
	unsigned run_poll[5];
	int nrun = 0, opt, v;

	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'b':
			o.backend = strcmp(optarg, "auto") ? optarg : NULL;
			break;
		case 'i':
			irqchip = optarg;
			break;
		case 'w':
			if ((v = pick(optarg, workloads, NWORKLOADS)) < 0)
				goto bad;
			o.workload = workload_bits[v];
			break;
		case 'n':
			o.vcpus = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'N':
			o.iterations = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'p':
			if ((v = pick(optarg, polls, 4)) < 0)
				goto bad;
			o.poll_policy = (unsigned)v;
			poll_given = true;
			break;
		case 'c':
			if ((v = pick(optarg, cancels, 3)) < 0)
				goto bad;
			o.timer_cancel = (unsigned)v;
			break;
		case 'o':
			if (strcmp(optarg, "naive") && strcmp(optarg, "validated"))
				goto bad;
			o.naive_order = strcmp(optarg, "naive") == 0;
			break;
		case 's':
			o.storm_us = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 't':
			o.kick_race = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'T':
			o.timeout_s = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'j':
			o.json = true;
			break;
		case 'S':
			o.stats = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			goto bad;
		}
	}
	if (optind != argc || o.vcpus < 1 || o.vcpus > G_MAX_VCPUS ||
	    o.iterations < 1 || o.iterations > G_MAX_ITERS || !o.timeout_s ||
	    (strcmp(irqchip, "user") && strcmp(irqchip, "kernel") &&
	     strcmp(irqchip, "both")))
		goto bad;
	if (!o.backend)
		o.backend = vmm_kvm_available() ? "kvm" : "sim";
	if (strcmp(o.backend, "kvm") == 0) {
#ifdef VMM_WITH_KVM
		if (!vmm_kvm_available()) {
			fprintf(stderr, "vsched-vmm: /dev/kvm is not usable here; "
					"use --backend sim\n");
			return 77;
		}
		be = &vmm_kvm_backend;
#else
		fprintf(stderr, "vsched-vmm: built without the KVM backend\n");
		return 77;
#endif
	} else if (strcmp(o.backend, "sim") == 0) {
		be = &vmm_sim_backend;
		if (o.workload & WL_FAULT) {
			fprintf(stderr, "vsched-vmm: the fault workload needs "
					"real guest code: --backend kvm\n");
			return 2;
		}
		if (strcmp(irqchip, "user")) {
			fprintf(stderr, "vsched-vmm: the sim backend has only the "
					"userspace irqchip\n");
			return 2;
		}
	} else {
		goto bad;
	}
	if (o.workload & WL_SPIN)
		o.iterations = 1;
	/* The runs: the userspace irqchip through vsched, with the policy
	 * given or, for --irqchip both without --poll, with each policy; then
	 * KVM's in-kernel irqchip with KVM's own halt polling. */
	if (strcmp(irqchip, "kernel")) {
		bool each = strcmp(irqchip, "both") == 0 && !poll_given;

		for (unsigned p = 0; p < 4; p++)
			if (each ? true : p == o.poll_policy)
				run_poll[nrun++] = p;
	}
	if (strcmp(irqchip, "user"))
		run_poll[nrun++] = o.poll_policy;
	for (int k = 0; k < nrun; k++) {
		int rc;

		o.kernel_irqchip = strcmp(irqchip, "user") && k == nrun - 1;
		o.poll_policy = run_poll[k];
		rc = run_once(&o, be, &res[k]);
		if (rc < 0)
			res[k].pass = false;
		if (o.json)
			print_json(&o, be->name, &res[k]);
		else
			print_table(&o, be->name, &res[k]);
		if (res[k].stats) {
			fputs(res[k].stats, stdout);
			free(res[k].stats);
			res[k].stats = NULL;
		}
		all_pass &= res[k].pass;
	}
	if (strcmp(irqchip, "both") == 0 && res[nrun - 1].nrt)
		print_comparison(&o, res, run_poll, nrun);
	return all_pass ? 0 : 1;
bad:
	usage(stderr);
	return 2;
}
