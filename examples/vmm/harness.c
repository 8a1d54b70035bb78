/* SPDX-License-Identifier: MIT */
/*
 * vsched-vmm's test harness: one run of a workload on the VMM of vmm.c.
 * It drives what the guests alone do not (the kick race's posts, the PMI
 * storm), watches the run (the watchdog, the stop that must end every vCPU
 * thread), then checks what the guests counted against what the VMM and
 * vsched did and gathers the figures that report.c prints. Everything
 * here runs on the main thread, except the storm's own thread.
 */
#define _GNU_SOURCE /* pthread_timedjoin_np, open_memstream */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "vmm.h"

const char *const harness_kvm_stats[NKVM_STATS] = {
	"halt_successful_poll", "halt_attempted_poll", "halt_wakeup",
	"halt_poll_success_ns", "halt_poll_fail_ns",   "halt_wait_ns",
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

/* When a kick counts as lost. The guest counts its own spin iterations
 * (PVA_SPIN); once a request is posted and vCPU 0 kicked, the guest may run
 * on only until the kick lands (the sim guest looks at its kick flag every
 * iteration; a KVM guest is interrupted by the signal within microseconds
 * of running). So a kick is lost when the guest has gone on spinning, with
 * the request still pending, for LOST_SPINS iterations (about 1 ms of guest
 * on hardware, 2 s on a software-assisted nested KVM). A vCPU thread that
 * the host does not run at all (a loaded machine) makes no such progress
 * and is only slow, however long it waits; RACE_GIVE_UP_NS ends the wait
 * then, as a failure of its own. */
#define LOST_SPINS 1000000u
#define RACE_GIVE_UP_NS 30000000000ull
/* The fewest tries a kick race cut by the run's deadline must have made
 * (or all of --tries, when fewer) to pass (check_run()). */
#define RACE_MIN_TRIES 1000u

/* A lost kick: where vCPU 0 is, and whether a second kick, sent straight
 * to the backend (vsched's kick decision bypassed), gets it out. If that
 * one is lost too, the vCPU cannot be made to leave the guest at all. */
static void race_lost_report(struct vmm *m, unsigned try, uint32_t spins,
			     uint64_t waited_ns)
{
	struct vcpu *c = &m->vcpus[0];
	uint64_t t0 = vmm_now_ns();

	fprintf(stderr, "vsched-vmm: kick race: try %u lost: not serviced after "
		"%u guest spins in %.1f ms; vCPU mode %d\n", try, spins,
		waited_ns / 1e6, vsched_vcpu_mode(c->vs));
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

/* Wait until try i's ping is serviced. Returns false for a lost kick (the
 * guest kept running without servicing it) or a wait past RACE_GIVE_UP_NS.
 * The clock and the guest's count are read before the serviced count, so
 * a thread held off the CPU between the reads never reports a ping that
 * was serviced meanwhile. */
static bool race_wait(struct vmm *m, unsigned i, uint64_t t0, uint32_t spin0,
		      uint64_t *waited, uint32_t *spins)
{
	struct vcpu *c = &m->vcpus[0];

	for (;;) {
		uint64_t t = vmm_now_ns();

		*spins = *vmm_pva(m, 0, PVA_SPIN) - spin0;
		*waited = t - t0;
		if (atomic_load_explicit(&c->pings_serviced,
					 memory_order_acquire) >= i + 1ull)
			return true;
		if (*spins >= LOST_SPINS || *waited > RACE_GIVE_UP_NS)
			return false;
	}
}

/* The kick race: vCPU 0 spins in the guest; posts land at random moments
 * around its KVM_RUN and each must be serviced before the guest has run
 * on for LOST_SPINS iterations. It ends at the run's deadline too (the
 * watchdog starts after it): starved, not timed out, so that check_run()
 * can judge the tries it made. */
static void kick_race(struct vmm *m, struct result *r, uint64_t deadline)
{
	uint32_t seed = 12345;

	for (unsigned i = 0; i < m->o.kick_race && !atomic_load(&m->stop); i++) {
		uint64_t delay, t0, waited;
		uint32_t spin0, spins;

		if (vmm_now_ns() > deadline) {
			r->race_starved = true;
			return;
		}

		seed = seed * 1103515245u + 12345u;
		delay = (seed >> 16) % 20000; /* 0..20 us */
		t0 = vmm_now_ns();
		while (vmm_now_ns() - t0 < delay)
			;
		t0 = vmm_now_ns();
		vsched_post(m->vcpus[0].vs, K_PING);
		spin0 = *vmm_pva(m, 0, PVA_SPIN); /* the kick, if any, is sent */
		if (!race_wait(m, i, t0, spin0, &waited, &spins)) {
			r->race_lost++;
			r->race_tries = i + 1;
			race_lost_report(m, i, spins, waited);
			return;
		}
		if (waited / 1e3 > r->race_max_wait_us)
			r->race_max_wait_us = waited / 1e3;
		r->race_tries = i + 1;
	}
}

/* PMI storm: a PMU request to every running vCPU every storm_us, from
 * its own thread until `stop` (or the VMM's). */
struct storm {
	struct vmm *m;
	pthread_t thread;
	bool started;
	_Atomic bool stop;
};

static void *storm_thread(void *arg)
{
	struct storm *s = arg;
	struct vmm *m = s->m;
	struct timespec ts = { m->o.storm_us / 1000000,
			       (long)(m->o.storm_us % 1000000) * 1000 };

	while (!atomic_load(&m->stop) && !atomic_load(&s->stop)) {
		for (unsigned i = 0; i < m->o.vcpus; i++)
			if (!atomic_load(&m->vcpus[i].done))
				vsched_post(m->vcpus[i].vs, K_PMU);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* Where each vCPU is stuck when the watchdog fires, on stderr. */
static void timeout_report(struct vmm *m)
{
	for (unsigned i = 0; i < m->o.vcpus; i++) {
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
}

/* The watchdog: wait, 1 ms at a time, until every vCPU is done or stopped
 * on an error, or the VMM stops; past `deadline`, report and stop it. */
static void watch(struct vmm *m, struct result *r, uint64_t deadline)
{
	for (;;) {
		unsigned done = 0;

		for (unsigned i = 0; i < m->o.vcpus; i++)
			done += atomic_load(&m->vcpus[i].done) || m->vcpus[i].error;
		if (done == m->o.vcpus || atomic_load(&m->stop))
			return;
		/* The VMM's event loop: the governor's tick (--governor). */
		if (m->o.governor && m->be->gov_tick)
			m->be->gov_tick(m, vmm_now_ns());
		if (vmm_now_ns() > deadline) {
			r->timed_out = true;
			timeout_report(m);
			vmm_stop(m);
			return;
		}
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
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

/* The checks of one vCPU: it ended well, and the guest counted what the
 * VMM did for it. The first failure is the one reported. */
static void check_vcpu(struct vmm *m, unsigned i, struct result *r)
{
	const struct vmm_options *o = &m->o;
	struct vcpu *c = &m->vcpus[i];
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
}

/* Add one vCPU's counters to the run's: the VMM's, the backend's,
 * vsched's, its timer's, the guest's and, with the in-kernel irqchip,
 * KVM's. */
static void add_vcpu(struct vmm *m, unsigned i, struct result *r)
{
	struct vcpu *c = &m->vcpus[i];
	struct vsched_vcpu_stats st = { .size = sizeof(st) };
	struct vsched_timer_stats ts;

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
	if (m->o.kernel_irqchip && m->be->kvm_stat) {
		for (unsigned k = 0; k < NKVM_STATS; k++)
			r->kvm[k] += m->be->kvm_stat(c, harness_kvm_stats[k]);
	}
}

/* The ping-pong initiator's round trips, in us, from the (start, end) TSC
 * pairs of its log, appended at rts[n]; returns the new n. */
static unsigned add_round_trips(struct vmm *m, unsigned i, double *rts,
				unsigned n)
{
	const uint32_t *log = (const uint32_t *)(m->mem + G_LOGS +
						 i * G_LOG_SIZE);

	for (unsigned k = 0; k < *vmm_pva(m, i, PVA_I); k++) {
		uint64_t s = (uint64_t)log[4 * k + 1] << 32 | log[4 * k];
		uint64_t e = (uint64_t)log[4 * k + 3] << 32 | log[4 * k + 2];

		rts[n++] = (double)(e - s) / (double)m->tsc_per_us;
	}
	return n;
}

/* The checks of the whole run, after every vCPU's. */
static void check_run(struct vmm *m, struct result *r)
{
	const struct vmm_options *o = &m->o;

	/* With vsched's CANCEL policy no stale expiry reaches the guest, and
	 * an expiry of the current arm before its deadline would show as
	 * stale too. (The in-kernel LAPIC cannot take back an interrupt
	 * already in its IRR: there stale ones are counted, not failed.) */
	if ((o->workload & WL_TIMER) && !o->kernel_irqchip &&
	    o->timer_cancel == VSCHED_CANCEL_CANCEL && r->g_stale)
		fail_check(r, "a stale or early timer interrupt reached the guest");
	if (o->workload & WL_SPIN) {
		/* What a run cut short by its deadline must have tried: each
		 * try is a round trip through the host's scheduler, so a
		 * loaded host (a TCG guest beside other jobs: 29,340 of
		 * 100,000 in 120 s) makes fewer; a lost kick fails at any
		 * count, and a run that raced too little says so. */
		const unsigned floor = o->kick_race < RACE_MIN_TRIES ? o->kick_race
								       : RACE_MIN_TRIES;
		if (r->race_lost)
			fail_check(r, "a kick was lost");
		else if (r->race_tries != o->kick_race &&
			 !(r->race_starved && r->race_tries >= floor))
			fail_check(r, "the kick race did not finish");
	}
	if (r->timed_out)
		fail_check(r, "timed out");
}

/* Checks and figures of a run whose vCPU threads are gone. */
static void collect(struct vmm *m, struct result *r)
{
	const struct vmm_options *o = &m->o;
	double *rts = calloc((size_t)o->vcpus * o->iterations + 1, sizeof(double));
	unsigned n = 0;

	for (unsigned i = 0; i < o->vcpus; i++) {
		check_vcpu(m, i, r);
		add_vcpu(m, i, r);
		if ((o->workload & WL_PING) &&
		    *vmm_pva(m, i, PVA_ROLE) == ROLE_INIT && rts)
			n = add_round_trips(m, i, rts, n);
	}
	check_run(m, r);
	r->nrt = n;
	if (n) {
		qsort(rts, n, sizeof(double), cmp_double);
		r->rt_median_us = rts[n / 2];
		r->rt_p99_us = rts[(size_t)((n - 1) * 0.99)];
	}
	free(rts);
}

/* --stats: vsched's own snapshot of every vCPU, text or JSON, kept in
 * r->stats to be printed after the run's table. */
static void capture_stats(struct vmm *m, struct result *r)
{
	size_t len;
	FILE *f = open_memstream(&r->stats, &len);

	for (unsigned i = 0; f && i < m->o.vcpus; i++) {
		vsched_vcpu_stats_write(m->vcpus[i].vs, f,
					m->o.json ? VSCHED_STATS_JSON :
						    VSCHED_STATS_TEXT);
	}
	if (f)
		fclose(f);
}

/* The run proper, once every vCPU thread waits for its release: drive it,
 * watch it, end it, then check it. */
static void run(struct vmm *m, struct result *r)
{
	struct storm storm = { .m = m };
	uint64_t t0, deadline;
	double cpu0;

	t0 = vmm_now_ns();
	cpu0 = cpu_seconds();
	vmm_release(m);
	deadline = t0 + m->o.timeout_s * 1000000000ull;
	if (m->o.storm_us &&
	    pthread_create(&storm.thread, NULL, storm_thread, &storm) == 0)
		storm.started = true;
	if (m->o.workload & WL_SPIN) {
		kick_race(m, r, deadline);
		vmm_stop(m);
	}
	watch(m, r, deadline);
	atomic_store(&storm.stop, true);
	if (storm.started)
		pthread_join(storm.thread, NULL);
	join_vcpus(m);
	/* The guests' state where they were stopped (the threads are gone,
	 * so no vCPU ioctl waits for a KVM_RUN). */
	for (unsigned i = 0; (r->timed_out || r->race_lost) && m->be->dump &&
			     i < m->o.vcpus; i++)
		if (m->vcpus[i].be)
			m->be->dump(&m->vcpus[i]);
	r->wall_s = (vmm_now_ns() - t0) / 1e9;
	r->cpu_s = cpu_seconds() - cpu0;
	collect(m, r);
	if (m->o.governor && m->be->gov_report) {
		r->governed = true;
		m->be->gov_report(m, &r->gov);
	}
	if (m->o.stats)
		capture_stats(m, r);
}

int harness_run(const struct vmm_options *o, const struct backend *be,
		struct result *r)
{
	struct vmm *m = calloc(1, sizeof(*m));
	int rc;

	memset(r, 0, sizeof(*r));
	r->pass = true;
	r->kernel_irqchip = o->kernel_irqchip;
	if (!m)
		return -ENOMEM;
	rc = vmm_init(m, o, be);
	if (rc == 0)
		rc = vmm_start(m);
	if (rc == 0 && o->governor) {
		rc = be->gov_attach ? be->gov_attach(m) : -EOPNOTSUPP;
		if (rc < 0) { /* the vCPU threads wait for their release */
			vmm_stop(m);
			vmm_release(m);
			join_vcpus(m);
		}
	}
	if (rc == 0)
		run(m, r);
	if (rc < 0 && !r->why[0]) {
		r->pass = false;
		snprintf(r->why, sizeof(r->why), "setup: %s", vsched_strerror(rc));
	}
	vmm_fini(m);
	free(m);
	return rc;
}
