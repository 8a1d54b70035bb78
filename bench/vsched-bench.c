/* SPDX-License-Identifier: MIT */
/*
 * vsched-bench: microbenchmarks, each against a baseline measured in the
 * same run, reported as a ratio (median of the per-run ratios, min and max).
 *
 *   vsched-bench [--quick] [--json] [--runs N] [request|wakeup|all]
 *
 * request: service with nothing pending, post + service with no kick, and
 *          commit + exit, against the raw atomic sequences they are built
 *          from (same call structure).
 * wakeup:  polled round trip between two vCPU threads (post, the peer's
 *          poll sees it, services, posts back) against a raw cache-line
 *          ping-pong; blocked round trip (futex path) against a raw futex
 *          ping-pong.
 * waiter:  an I/O thread waiting on a guest ring, request/response with
 *          the next packet 10 us after the last was consumed, and late
 *          packets 1 ms after: the vsched waiter (adaptive policy) against
 *          the loop small VMMs hand-write (spin 4096 pauses, then arm and
 *          sleep) and against that loop without its spin: wakeup latency
 *          and the consumer's CPU per packet.
 * timer:   a tickless guest that re-arms its timer before the pending
 *          expiry is delivered with probability p (invisibly to vsched, as
 *          a nested guest's decrementer), through KEEP, CANCEL and ADAPTIVE
 *          with a state-read cost R and a spurious-exit cost S: spurious
 *          deliveries, reads and total cost. Deterministic (fake clock).
 * pmi:     a PMU thread raises PMIs whose handler raises an NMI, with the
 *          naive order (NMI serviced first) and KVM's order: cancelled
 *          entries per 10 s.
 * idle:    blocked wakeups: how often the way back skips its store and
 *          fence, and what that saves per wakeup.
 * hook:    an arch blocking hook that takes 20 us, run before the poll
 *          window (vsched) or after it (the pre-fix KVM order, written
 *          out here): latency of wakeups that arrive inside the window.
 * scale:   1..256 vCPUs per VM: WAIT-broadcast cost, service cost, memory
 *          per vCPU.
 * policy:  replays halt traces (bench/traces/ and any --trace FILE) through
 *          every poll policy's real code, with a cost model calibrated in
 *          the same run; --live also runs them on real threads.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <vsched/vsched.h>

/* The baselines use the same arch fences as the library, so each ratio is
 * what vsched adds to the minimal correct sequence on this machine. */
#include "arch/arch.h"

#define MAX_RUNS 64
#define NOINLINE __attribute__((noinline, noclone))

static int opt_json, opt_quick, opt_runs = 5;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b);

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	double t[MAX_RUNS];
	memcpy(t, v, n * sizeof(*v));
	qsort(t, n, sizeof(*t), cmp_d);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void report(const char *bench, const char *metric, const char *unit,
		   const char *baseline, double *val, double *base, int n)
{
	double ratio[MAX_RUNS], lo = val[0], hi = val[0];
	for (int i = 0; i < n; i++) {
		ratio[i] = val[i] / base[i];
		lo = val[i] < lo ? val[i] : lo;
		hi = val[i] > hi ? val[i] : hi;
	}
	double mv = median(val, n), mb = median(base, n), mr = median(ratio, n);
	if (opt_json)
		printf("{\"bench\": \"%s\", \"metric\": \"%s\", \"unit\": \"%s\", "
		       "\"value\": %.2f, \"baseline\": \"%s\", \"baseline_value\": %.2f, "
		       "\"ratio\": %.3f, \"runs\": %d, \"min\": %.2f, \"max\": %.2f}\n",
		       bench, metric, unit, mv, baseline, mb, mr, n, lo, hi);
	else
		printf("%-8s %-28s %9.2f %-3s  vs %-26s %9.2f  ratio %.3f  "
		       "(runs %d, min %.2f, max %.2f)\n",
		       bench, metric, mv, unit, baseline, mb, mr, n, lo, hi);
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* request: single-threaded paths */

enum { K_A = 1 };

struct raw_vcpu {
	_Alignas(64) _Atomic uint64_t pending;
	_Atomic uint32_t mode;
};

static NOINLINE void empty_handler(struct vsched_vcpu *v, unsigned k,
				   struct vsched_payload *p, void *a)
{
	(void)v, (void)k, (void)p, (void)a;
	__asm__ __volatile__("" ::: "memory");
}

static NOINLINE int raw_service(struct raw_vcpu *r)
{
	uint64_t w = atomic_load_explicit(&r->pending, memory_order_relaxed);
	if (!w)
		return 0;
	atomic_fetch_and_explicit(&r->pending, ~w, memory_order_acquire);
	empty_handler(NULL, 0, NULL, NULL);
	return 1;
}

static NOINLINE int raw_post(struct raw_vcpu *r)
{
	atomic_fetch_or_explicit(&r->pending, 2, memory_order_seq_cst);
	vsched__mb_after_rmw();
	return atomic_load_explicit(&r->mode, memory_order_relaxed) == 1;
}

static NOINLINE int raw_enter_exit(struct raw_vcpu *r)
{
	atomic_exchange_explicit(&r->mode, 1, memory_order_seq_cst);
	vsched__mb_after_rmw();
	if (atomic_load_explicit(&r->pending, memory_order_relaxed))
		return 1;
	atomic_exchange_explicit(&r->mode, 0, memory_order_seq_cst);
	return 0;
}

static struct vsched_vm *make_vm(uint64_t poll_ns, struct vsched_vcpu **v,
				 unsigned nvcpus, vsched_request_fn fn)
{
	struct vsched_vm_config cfg = { .size = sizeof(cfg) };
	struct vsched_poll_params pp;
	vsched_poll_defaults(poll_ns ? VSCHED_POLL_FIXED : VSCHED_POLL_NONE, poll_ns,
			     &pp);
	cfg.poll = &pp;
	struct vsched_request_desc d = { .name = "a", .handler = fn };
	struct vsched_vm *vm;
	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_A, &d) ||
	    vsched_request_finalize(vm, 0))
		abort();
	for (unsigned i = 0; i < nvcpus; i++)
		if (vsched_vcpu_create(vm, i, NULL, &v[i]))
			abort();
	return vm;
}

static void bench_request(void)
{
	const long iters = opt_quick ? 2000000 : 10000000;
	double a[MAX_RUNS], b[MAX_RUNS], c[MAX_RUNS], d[MAX_RUNS], e[MAX_RUNS],
		f[MAX_RUNS];
	struct vsched_vcpu *v;
	struct vsched_vm *vm = make_vm(0, &v, 1, empty_handler);
	static struct raw_vcpu raw;

	for (int r = 0; r < opt_runs; r++) {
		uint64_t t0 = now_ns();
		for (long i = 0; i < iters; i++)
			vsched_service(v);
		uint64_t t1 = now_ns();
		for (long i = 0; i < iters; i++)
			raw_service(&raw);
		uint64_t t2 = now_ns();
		a[r] = (double)(t1 - t0) / iters;
		b[r] = (double)(t2 - t1) / iters;

		t0 = now_ns();
		for (long i = 0; i < iters; i++) {
			vsched_post(v, K_A);
			vsched_service(v);
		}
		t1 = now_ns();
		for (long i = 0; i < iters; i++) {
			raw_post(&raw);
			raw_service(&raw);
		}
		t2 = now_ns();
		c[r] = (double)(t1 - t0) / iters;
		d[r] = (double)(t2 - t1) / iters;

		t0 = now_ns();
		for (long i = 0; i < iters; i++) {
			vsched_vcpu_enter(v);
			vsched_vcpu_exit(v);
		}
		t1 = now_ns();
		for (long i = 0; i < iters; i++)
			raw_enter_exit(&raw);
		t2 = now_ns();
		e[r] = (double)(t1 - t0) / iters;
		f[r] = (double)(t2 - t1) / iters;
	}
	report("request", "service_nothing_pending", "ns", "raw_load", a, b, opt_runs);
	report("request", "post_outside_plus_service", "ns", "raw_or_fence_load_and", c, d,
	       opt_runs);
	report("request", "enter_exit", "ns", "raw_xchg_fence_load_xchg", e, f, opt_runs);
	vsched_vm_destroy(vm);
}

/* ------------------------------------------------------------------ */
/* wakeup: two threads on the two cores */

static void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

struct pp {
	long iters;
	int futex; /* raw baseline kind */
	struct vsched_vcpu *v[2];
	_Alignas(64) _Atomic uint32_t a;
	_Alignas(64) _Atomic uint32_t b;
};

static void fwait(_Atomic uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void fwake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *raw_peer(void *arg)
{
	struct pp *p = arg;
	pin(1);
	for (uint32_t i = 1; i <= (uint32_t)p->iters; i++) {
		uint32_t x;
		while ((x = atomic_load_explicit(&p->a, memory_order_acquire)) != i)
			if (p->futex)
				fwait(&p->a, x);
			else
				vsched__relax();
		atomic_store_explicit(&p->b, i, memory_order_release);
		if (p->futex)
			fwake(&p->b);
	}
	return NULL;
}

/* When set, the next ping-pong records each round trip here (both sides
 * then pay the same two clock reads per round trip). */
static uint64_t *pp_lat;

static double raw_pingpong(long iters, int futex)
{
	static struct pp p;
	pthread_t t;
	memset(&p, 0, sizeof(p));
	p.iters = iters;
	p.futex = futex;
	pthread_create(&t, NULL, raw_peer, &p);
	pin(0);
	uint64_t t0 = now_ns();
	for (uint32_t i = 1; i <= (uint32_t)iters; i++) {
		uint32_t x;
		uint64_t s0 = pp_lat ? now_ns() : 0;
		atomic_store_explicit(&p.a, i, memory_order_release);
		if (futex)
			fwake(&p.a);
		while ((x = atomic_load_explicit(&p.b, memory_order_acquire)) != i)
			if (futex)
				fwait(&p.b, x);
			else
				vsched__relax();
		if (pp_lat)
			pp_lat[i - 1] = now_ns() - s0;
	}
	uint64_t t1 = now_ns();
	pthread_join(t, NULL);
	return (double)(t1 - t0) / iters;
}

static void *vs_peer(void *arg)
{
	struct pp *p = arg;
	pin(1);
	for (long i = 0; i < p->iters; i++) {
		while (vsched_vcpu_block(p->v[1], VSCHED_DEADLINE_NONE) !=
		       VSCHED_WAKE_REQUEST)
			;
		vsched_service(p->v[1]);
		vsched_post(p->v[0], K_A);
	}
	return NULL;
}

static double vs_pingpong(long iters, uint64_t poll_ns)
{
	static struct pp p;
	pthread_t t;
	memset(&p, 0, sizeof(p));
	p.iters = iters;
	struct vsched_vm *vm = make_vm(poll_ns, p.v, 2, NULL);
	pthread_create(&t, NULL, vs_peer, &p);
	pin(0);
	uint64_t t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		uint64_t s0 = pp_lat ? now_ns() : 0;
		vsched_post(p.v[1], K_A);
		while (vsched_vcpu_block(p.v[0], VSCHED_DEADLINE_NONE) !=
		       VSCHED_WAKE_REQUEST)
			;
		vsched_service(p.v[0]);
		if (pp_lat)
			pp_lat[i] = now_ns() - s0;
	}
	uint64_t t1 = now_ns();
	pthread_join(t, NULL);
	vsched_vm_destroy(vm);
	return (double)(t1 - t0) / iters;
}

static void bench_wakeup(void)
{
	const long polled = opt_quick ? 50000 : 200000;
	const long blocked = opt_quick ? 2000 : 10000;
	double a[MAX_RUNS], b[MAX_RUNS], c[MAX_RUNS], d[MAX_RUNS];

	for (int r = 0; r < opt_runs; r++) {
		/* Alternate the order so drift hits both sides alike. */
		if (r % 2) {
			b[r] = raw_pingpong(polled, 0);
			a[r] = vs_pingpong(polled, 1000000000ull);
		} else {
			a[r] = vs_pingpong(polled, 1000000000ull);
			b[r] = raw_pingpong(polled, 0);
		}
		if (r % 2) {
			d[r] = raw_pingpong(blocked, 1);
			c[r] = vs_pingpong(blocked, 0);
		} else {
			c[r] = vs_pingpong(blocked, 0);
			d[r] = raw_pingpong(blocked, 1);
		}
	}
	report("wakeup", "polled_round_trip", "ns", "raw_spin_pingpong", a, b, opt_runs);
	report("wakeup", "blocked_round_trip", "ns", "raw_futex_pingpong", c, d, opt_runs);

	/* Distributions: one timed run of each, round trip by round trip. */
	static const double q[] = { 0.10, 0.50, 0.90, 0.99, 0.999 };
	static const char *qn[] = { "p10", "p50", "p90", "p99", "p99.9" };
	for (int kind = 0; kind < 2; kind++) {
		long n = kind ? blocked : polled;
		uint64_t *x = malloc(n * sizeof(*x)), *y = malloc(n * sizeof(*y));
		pp_lat = x;
		vs_pingpong(n, kind ? 0 : 1000000000ull);
		pp_lat = y;
		raw_pingpong(n, kind);
		pp_lat = NULL;
		qsort(x, n, sizeof(*x), cmp_u64);
		qsort(y, n, sizeof(*y), cmp_u64);
		for (unsigned k = 0; k < 5; k++) {
			char m[64];
			double vx = (double)x[(long)(q[k] * (n - 1))];
			double vy = (double)y[(long)(q[k] * (n - 1))];
			snprintf(m, sizeof(m), "%s_round_trip_%s", kind ? "blocked" : "polled", qn[k]);
			report("wakeup", m, "ns", kind ? "raw_futex_pingpong" : "raw_spin_pingpong",
			       &vx, &vy, 1);
		}
		free(x);
		free(y);
	}
}

/* ------------------------------------------------------------------ */
/* waiter: a guest-ring consumer (a VMM's virtio I/O thread) under two load
 * shapes, as three consumers: the vsched waiter (adaptive policy), the loop
 * small VMMs hand-write (spin 4096 pauses, then arm needs-kick and sleep),
 * and the same loop with its spin removed (sleep at once).
 *
 * - reqresp: request/response. The producer (the guest) waits until its
 *   last packet was consumed, thinks 10 us (busy, as a vCPU that stays in
 *   the guest), then posts the next: the next kick lands inside a poll
 *   window. Polling should pay here: latency is what counts.
 * - late: the next packet comes 1 ms after the last was consumed, long after
 *   any window. Polling cannot pay: CPU is what counts, and the adaptive
 *   waiter should cost no more than not spinning at all.
 * Metrics per shape: wakeup latency (publish to the consumer running) and
 * the consumer thread's CPU per packet (CLOCK_THREAD_CPUTIME_ID: its polling
 * and its syscalls). */

enum { RING_VSCHED, RING_SPIN4096, RING_NOSPIN };

struct ring {
	_Alignas(64) _Atomic uint64_t produced;
	_Alignas(64) _Atomic uint64_t consumed;
	_Alignas(64) _Atomic uint32_t needs_kick;
	_Atomic uint64_t t_produced;
	struct vsched_waiter *w;
	int mode;
	long packets;
	uint64_t think_ns;
	bool busy_think;
};

static uint64_t ring_seen;
static bool ring_cond(void *arg)
{
	struct ring *r = arg;
	return atomic_load_explicit(&r->produced, memory_order_acquire) != ring_seen;
}

static void *ring_producer(void *arg)
{
	struct ring *r = arg;
	pin(1);
	for (long i = 0; i < r->packets; i++) {
		while (atomic_load_explicit(&r->consumed, memory_order_acquire) < (uint64_t)i)
			vsched__relax();
		uint64_t next = now_ns() + r->think_ns;
		if (r->busy_think) {
			while (now_ns() < next)
				vsched__relax();
		} else {
			struct timespec ts = { .tv_sec = (time_t)(next / 1000000000ull),
					       .tv_nsec = (long)(next % 1000000000ull) };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
		atomic_store(&r->t_produced, now_ns());
		atomic_fetch_add_explicit(&r->produced, 1, memory_order_seq_cst);
		if (r->mode == RING_VSCHED) {
			vsched_waiter_kick(r->w);
		} else {
			vsched__mb(); /* the arch's full barrier (TSan-safe) */
			if (atomic_exchange(&r->needs_kick, 0))
				fwake(&r->needs_kick);
		}
	}
	return NULL;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Returns the consumer's CPU ns per packet; *lat gets the median wakeup
 * latency in ns. */
static double ring_run(int mode, long packets, uint64_t think_ns, bool busy,
		       double *lat)
{
	static struct ring r;
	struct vsched_vm *vm = NULL;
	uint64_t *lats = calloc((size_t)packets, sizeof(*lats));
	uint64_t cpu0;
	pthread_t t;

	if (!lats)
		abort();
	memset(&r, 0, sizeof(r));
	r.mode = mode;
	r.packets = packets;
	r.think_ns = think_ns;
	r.busy_think = busy;
	ring_seen = 0;
	if (mode == RING_VSCHED) {
		struct vsched_vm_config cfg = { .size = sizeof(cfg) }; /* adaptive */
		if (vsched_vm_create(&cfg, &vm) || vsched_waiter_create(vm, ring_cond, &r, &r.w))
			abort();
	}
	pin(0);
	pthread_create(&t, NULL, ring_producer, &r);
	cpu0 = thread_cpu_ns();
	for (long i = 0; i < packets; i++) {
		if (mode == RING_VSCHED) {
			while (vsched_waiter_wait(r.w, VSCHED_DEADLINE_NONE, NULL) !=
			       VSCHED_WAKE_REQUEST)
				;
		} else {
			bool got = false;
			for (int k = 0; mode == RING_SPIN4096 && k < 4096 && !got; k++) {
				got = ring_cond(&r);
				vsched__relax();
			}
			while (!ring_cond(&r)) {
				atomic_store(&r.needs_kick, 1);
				vsched__mb();
				if (ring_cond(&r))
					break;
				fwait(&r.needs_kick, 1);
			}
		}
		lats[i] = now_ns() - atomic_load(&r.t_produced);
		ring_seen++;
		atomic_store_explicit(&r.consumed, ring_seen, memory_order_release);
	}
	double cpu = (double)(thread_cpu_ns() - cpu0) / (double)packets;
	pthread_join(t, NULL);
	if (mode == RING_VSCHED) {
		vsched_waiter_destroy(r.w);
		vsched_vm_destroy(vm);
	}
	qsort(lats, (size_t)packets, sizeof(*lats), cmp_u64);
	*lat = (double)lats[packets / 2];
	free(lats);
	return cpu;
}

static void bench_waiter(void)
{
	static const struct {
		const char *name;
		uint64_t think_ns;
		bool busy;
		long packets, quick_packets;
	} shapes[] = {
		{ "reqresp", 10000, true, 5000, 1000 },
		{ "late", 1000000, false, 500, 100 },
	};
	static const char *const base_name[] = { "", "spin4096_then_sleep", "no_spin" };

	for (unsigned sh = 0; sh < 2; sh++) {
		long packets = opt_quick ? shapes[sh].quick_packets : shapes[sh].packets;
		double cpu[3][MAX_RUNS], lat[3][MAX_RUNS];
		char m[64];

		for (int r = 0; r < opt_runs; r++)
			for (int mode = 0; mode < 3; mode++)
				cpu[mode][r] = ring_run(mode, packets, shapes[sh].think_ns,
							shapes[sh].busy, &lat[mode][r]);
		for (int b = RING_SPIN4096; b <= RING_NOSPIN; b++) {
			snprintf(m, sizeof(m), "%s_wakeup_latency", shapes[sh].name);
			report("waiter", m, "ns", base_name[b], lat[RING_VSCHED], lat[b],
			       opt_runs);
			snprintf(m, sizeof(m), "%s_cpu_per_packet", shapes[sh].name);
			report("waiter", m, "ns", base_name[b], cpu[RING_VSCHED], cpu[b],
			       opt_runs);
		}
	}
}

/* ------------------------------------------------------------------ */
/* timer: expiry cancellation on reprogramming traces */

struct tsim {
	uint64_t now, guest_deadline, read_cost;
	uint64_t reads;
};

static uint64_t tsim_now(void *ctx)
{
	return ((struct tsim *)ctx)->now;
}

static int tsim_read(struct vsched_vcpu *v, struct vsched_timer *t, uint64_t *d,
		     void *ctx)
{
	struct tsim *s = ctx;
	(void)v, (void)t;
	s->now += s->read_cost; /* the hypercall takes this long */
	s->reads++;
	*d = s->guest_deadline;
	return 0;
}

static unsigned tsim_delivered;
static void tsim_handler(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
			 void *a)
{
	(void)v, (void)k, (void)p, (void)a;
	tsim_delivered++;
}

struct tresult {
	uint64_t spurious, reads;
	double cost_ns, read_ns;
};

/* n expiries; the guest re-arms before delivery with probability p (p2
 * after half of them). Cost: every delivered expiry is an exit (S), reads
 * cost R. Spurious deliveries are reported to vsched, as a hypervisor that
 * sees the guest return at once would. */
static struct tresult timer_trace(unsigned cancel, unsigned n, double p, double p2,
				  uint64_t r_ns, uint64_t s_ns)
{
	struct tsim sim = { .now = 1000000, .read_cost = r_ns };
	struct vsched_host_ops ops = { .now_ns = tsim_now, .timer_read = tsim_read,
				       .ctx = &sim };
	struct vsched_poll_params pp;
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops, .poll = &pp };
	struct vsched_request_desc d = { .name = "dec", .handler = tsim_handler };
	struct vsched_timer_desc td = { .size = sizeof(td), .name = "dec", .kind = 0,
					.semantics = VSCHED_TIMER_DECREMENTER,
					.cancel = cancel };
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	struct vsched_timer *t;
	struct tresult res = { 0 };
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	vsched_poll_defaults(VSCHED_POLL_NONE, 0, &pp);
	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, 0, &d) ||
	    vsched_request_finalize(vm, 0) || vsched_vcpu_create(vm, 0, NULL, &v) ||
	    vsched_timer_create(v, &td, &t))
		abort();
	for (unsigned i = 0; i < n; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		double pi = i < n / 2 ? p : p2;
		bool stale = (double)(seed % 1000000) / 1e6 < pi;
		sim.now += 1000000;
		sim.guest_deadline = sim.now;
		vsched_timer_arm(t, sim.now); /* expires: posted */
		if (stale)
			sim.guest_deadline = sim.now + 500000; /* re-armed unseen */
		unsigned before = tsim_delivered;
		vsched_service(v);
		if (tsim_delivered > before) {
			res.cost_ns += (double)s_ns; /* the exit it causes */
			if (stale) {
				res.spurious++;
				vsched_timer_report_spurious(t, s_ns);
			}
		}
		/* The guest re-armed: its real deadline, seen or not. */
		if (stale)
			vsched_timer_arm(t, sim.guest_deadline);
	}
	res.reads = sim.reads;
	res.read_ns = (double)sim.reads * (double)r_ns;
	res.cost_ns += res.read_ns;
	vsched_vm_destroy(vm);
	return res;
}

static void bench_timer(void)
{
	static const struct {
		const char *name;
		double p, p2;
		uint64_t r, s;
	} tr[] = {
		{ "tickless-70pct-cheap-read", 0.7, 0.7, 50, 10000 },
		{ "tickless-30pct-cheap-read", 0.3, 0.3, 50, 10000 },
		{ "rarely-stale", 0.02, 0.02, 50, 10000 },
		{ "expensive-read", 0.3, 0.3, 20000, 10000 },
		{ "expensive-read-mostly-stale", 0.9, 0.9, 5000, 10000 },
		{ "phase-5pct-then-80pct", 0.05, 0.8, 3000, 10000 },
	};
	const unsigned n = opt_quick ? 2000 : 20000;
	const char *pol[3] = { "keep", "cancel", "adaptive" };

	for (unsigned i = 0; i < sizeof(tr) / sizeof(tr[0]); i++) {
		struct tresult r[3];
		for (unsigned k = 0; k < 3; k++)
			r[k] = timer_trace(k, n, tr[i].p, tr[i].p2, tr[i].r, tr[i].s);
		if (!opt_json)
			printf("\n%-28s (stale %.0f%%%s, read %llu ns, spurious exit %llu ns, %u expiries)\n"
			       "%-10s %12s %10s %16s\n",
			       tr[i].name, tr[i].p * 100, tr[i].p2 != tr[i].p ? " then 80%" : "",
			       (unsigned long long)tr[i].r, (unsigned long long)tr[i].s, n,
			       "policy", "spurious", "reads", "total cost ms");
		for (unsigned k = 0; k < 3; k++) {
			if (!opt_json)
				printf("%-10s %12llu %10llu %16.3f\n", pol[k],
				       (unsigned long long)r[k].spurious,
				       (unsigned long long)r[k].reads, r[k].cost_ns / 1e6);
			else
				printf("{\"bench\": \"timer\", \"metric\": \"%s/%s/total_cost\", "
				       "\"unit\": \"ns\", \"value\": %.0f, \"baseline\": \"keep\", "
				       "\"baseline_value\": %.0f, \"ratio\": %.4f, \"runs\": 1, "
				       "\"min\": %.0f, \"max\": %.0f}\n",
				       tr[i].name, pol[k], r[k].cost_ns, r[0].cost_ns,
				       r[k].cost_ns / r[0].cost_ns, r[k].cost_ns, r[k].cost_ns);
		}
		if (opt_json)
			continue;
		double best = r[0].cost_ns < r[1].cost_ns ? r[0].cost_ns : r[1].cost_ns;
		double cut = r[0].spurious ? 1.0 - (double)r[1].spurious / (double)r[0].spurious : 1.0;
		printf("goal: cancel cuts spurious exits >= 70%% vs keep: %.1f%%: %s\n", cut * 100,
		       cut >= 0.70 ? "met" : "MISSED");
		if (tr[i].r < 1000)
			printf("goal: cancel's reads add < 1%% to the cost (of keep's run): "
			       "%.3f%% (%.3f%% of cancel's own): %s\n",
			       r[1].read_ns / r[0].cost_ns * 100, r[1].read_ns / r[1].cost_ns * 100,
			       r[1].read_ns < 0.01 * r[0].cost_ns ? "met" : "MISSED");
		printf("goal: adaptive within 5%% of the better static policy: %.3fx: %s\n",
		       r[2].cost_ns / best, r[2].cost_ns <= 1.05 * best ? "met" : "MISSED");
	}
}

/* ------------------------------------------------------------------ */
/* policy: the trace evaluator */

#include <dirent.h>

#define MAX_TRACES 32

struct trace {
	char name[128];
	uint64_t *d;
	size_t n;
};

static const char *trace_files[MAX_TRACES];
static int ntrace_files, opt_live;
static double opt_wake_ns, opt_polled_ns;
static unsigned opt_weight = 4;

static int load_trace(const char *path, struct trace *t)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t cap = 1024;
	if (!f)
		return -1;
	const char *base = strrchr(path, '/');
	snprintf(t->name, sizeof(t->name), "%s", base ? base + 1 : path);
	char *dot = strrchr(t->name, '.');
	if (dot)
		*dot = 0;
	t->n = 0;
	t->d = malloc(cap * sizeof(*t->d));
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || !*p)
			continue;
		unsigned long long v = strtoull(p, &end, 10);
		if (end == p)
			continue;
		if (t->n == cap)
			t->d = realloc(t->d, (cap *= 2) * sizeof(*t->d));
		t->d[t->n++] = v;
	}
	fclose(f);
	return t->n ? 0 : -1;
}

struct pol {
	const char *name;
	struct vsched_poll_params p;
};

struct outcome {
	double mean_lat, p99_lat, cpu_per_halt, won;
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Cost model: a halt whose wakeup comes D ns in is caught by polling when
 * D <= W (latency c_poll, poll CPU D), else it sleeps (poll CPU W wasted,
 * latency c_wake) and the engine measures D + c_wake as the halt. */
static struct outcome replay(const struct pol *pl, const struct trace *t,
			     double c_poll, double c_wake)
{
	struct vsched_poll_state st;
	struct outcome o = { 0 };
	uint64_t *lat = malloc(t->n * sizeof(*lat));
	double cpu = 0, latsum = 0;
	size_t won = 0;

	vsched_poll_init(&pl->p, &st);
	for (size_t i = 0; i < t->n; i++) {
		uint64_t d = t->d[i], w = vsched_poll_window(&pl->p, &st);
		uint64_t halt;
		if (d <= w) {
			lat[i] = (uint64_t)c_poll;
			cpu += (double)d;
			won++;
			halt = d;
		} else {
			lat[i] = (uint64_t)c_wake;
			cpu += (double)w;
			halt = d + (uint64_t)c_wake;
		}
		latsum += (double)lat[i];
		vsched_poll_update(&pl->p, &st, w, halt, true);
	}
	qsort(lat, t->n, sizeof(*lat), cmp_u64);
	o.mean_lat = latsum / (double)t->n;
	o.p99_lat = (double)lat[(t->n * 99) / 100];
	o.cpu_per_halt = cpu / (double)t->n;
	o.won = (double)won / (double)t->n;
	free(lat);
	return o;
}

/* --live: a waker thread posts D ns after the vCPU thread blocked; the
 * latency is from the post to the vCPU running again. */
struct live {
	struct vsched_vcpu *v;
	const struct trace *t;
	size_t n;
	_Atomic uint64_t t_post;
	atomic_int armed;
	atomic_int done;
	double lat_sum, cpu_sum;
	size_t won, halts;
	uint64_t *lat;
};

static void *live_waker(void *arg)
{
	struct live *l = arg;
	pin(1);
	for (size_t i = 0; i < l->n; i++) {
		while (atomic_load(&l->armed) != (int)i + 1)
			vsched__relax();
		uint64_t target = now_ns() + l->t->d[i];
		if (l->t->d[i] > 200000) {
			struct timespec ts = { .tv_sec = (time_t)((target - 100000) / 1000000000ull),
					       .tv_nsec = (long)((target - 100000) % 1000000000ull) };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
		while (now_ns() < target)
			vsched__relax();
		atomic_store(&l->t_post, now_ns());
		vsched_post(l->v, K_A);
	}
	return NULL;
}

static struct outcome live_run(const struct pol *pl, const struct trace *t,
			       double budget_s)
{
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .poll = &pl->p };
	struct vsched_request_desc d = { .name = "a" };
	struct vsched_vm *vm;
	struct live l = { .t = t };
	struct outcome o = { 0 };
	pthread_t th;
	double sum = 0;

	/* as many halts as fit the time budget */
	for (l.n = 0; l.n < t->n && sum < budget_s * 1e9; l.n++)
		sum += (double)t->d[l.n] + 20000;
	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_A, &d) ||
	    vsched_request_finalize(vm, 0) || vsched_vcpu_create(vm, 0, NULL, &l.v))
		abort();
	l.lat = malloc(l.n * sizeof(*l.lat));
	pthread_create(&th, NULL, live_waker, &l);
	pin(0);
	for (size_t i = 0; i < l.n; i++) {
		struct vsched_block_result r = { .size = sizeof(r) };
		atomic_store(&l.armed, (int)i + 1);
		while (vsched_vcpu_block_ex(l.v, VSCHED_DEADLINE_NONE, &r) !=
		       VSCHED_WAKE_REQUEST)
			;
		uint64_t t_run = now_ns();
		vsched_service(l.v);
		uint64_t tp = atomic_load(&l.t_post);
		l.lat[i] = t_run > tp ? t_run - tp : 0;
		l.lat_sum += (double)l.lat[i];
		l.cpu_sum += (double)r.poll_ns;
		l.won += r.poll_won;
	}
	pthread_join(th, NULL);
	vsched_vm_destroy(vm);
	o.mean_lat = l.lat_sum / (double)l.n;
	o.cpu_per_halt = l.cpu_sum / (double)l.n;
	o.won = (double)l.won / (double)l.n;
	qsort(l.lat, l.n, sizeof(*l.lat), cmp_u64);
	o.p99_lat = (double)l.lat[(l.n * 99) / 100];
	free(l.lat);
	return o;
}

static void emit(const char *trace, const char *pol, const char *metric,
		 const char *unit, double v, double kvm)
{
	char m[256];
	snprintf(m, sizeof(m), "%s/%s/%s", trace, pol, metric);
	if (opt_json)
		printf("{\"bench\": \"policy\", \"metric\": \"%s\", \"unit\": \"%s\", "
		       "\"value\": %.2f, \"baseline\": \"kvm\", \"baseline_value\": %.2f, "
		       "\"ratio\": %.3f, \"runs\": 1, \"min\": %.2f, \"max\": %.2f}\n",
		       m, unit, v, kvm, kvm > 0 ? v / kvm : (v > 0 ? 1e9 : 1.0), v, v);
}

static int bench_policy(void)
{
	struct trace tr[MAX_TRACES];
	int ntr = 0;
	double c_poll = opt_polled_ns, c_wake = opt_wake_ns;

	if (!ntrace_files) {
		DIR *dir = opendir(VSCHED_TRACE_DIR);
		struct dirent *e;
		static char paths[MAX_TRACES][512];
		while (dir && (e = readdir(dir)) && ntrace_files < MAX_TRACES) {
			size_t len = strlen(e->d_name);
			if (len > 4 && !strcmp(e->d_name + len - 4, ".txt")) {
				snprintf(paths[ntrace_files], sizeof(paths[0]), "%s/%s",
					 VSCHED_TRACE_DIR, e->d_name);
				trace_files[ntrace_files] = paths[ntrace_files];
				ntrace_files++;
			}
		}
		if (dir)
			closedir(dir);
		qsort(trace_files, ntrace_files, sizeof(trace_files[0]),
		      (int (*)(const void *, const void *))strcmp);
	}
	for (int i = 0; i < ntrace_files; i++) {
		if (load_trace(trace_files[i], &tr[ntr]) == 0)
			ntr++;
		else
			fprintf(stderr, "cannot read trace %s\n", trace_files[i]);
	}
	if (!ntr) {
		fprintf(stderr, "no traces\n");
		return 1;
	}
	/* Calibrate the cost model on this machine, in this run: one-way
	 * wakeup latency = half a round trip. */
	if (c_poll <= 0 || c_wake <= 0) {
		double a[3], b[3];
		for (int r = 0; r < 3; r++) {
			a[r] = vs_pingpong(opt_quick ? 5000 : 20000, 1000000000ull) / 2;
			b[r] = vs_pingpong(opt_quick ? 300 : 2000, 0) / 2;
		}
		if (c_poll <= 0)
			c_poll = median(a, 3);
		if (c_wake <= 0)
			c_wake = median(b, 3);
	}
	if (!opt_json)
		printf("policy: cost model: polled wakeup %.0f ns, sleeping wakeup %.0f ns "
		       "(calibrated: half the measured round trips)\n", c_poll, c_wake);

	const uint64_t max = 200000;
	struct pol pols[5];
	const char *names[5] = { "none", "always-poll", "kvm", "kvm-reset", "adaptive" };
	for (int k = 0; k < 5; k++)
		pols[k].name = names[k];
	vsched_poll_defaults(VSCHED_POLL_NONE, max, &pols[0].p);
	vsched_poll_defaults(VSCHED_POLL_FIXED, max, &pols[1].p);
	vsched_poll_defaults(VSCHED_POLL_KVM, max, &pols[2].p);
	vsched_poll_defaults(VSCHED_POLL_KVM, max, &pols[3].p);
	pols[3].p.shrink = 0;
	vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, max, &pols[4].p);
	pols[4].p.wake_cost_ns = (uint64_t)c_wake;
	pols[4].p.latency_weight = opt_weight;

	int misses = 0;
	for (int i = 0; i < ntr; i++) {
		struct outcome o[5];
		for (int k = 0; k < 5; k++)
			o[k] = opt_live ? live_run(&pols[k], &tr[i], opt_quick ? 0.2 : 1.0)
					: replay(&pols[k], &tr[i], c_poll, c_wake);
		if (!opt_json)
			printf("\n%-14s %-12s %12s %12s %14s %8s\n", tr[i].name, "policy",
			       "mean lat us", "p99 lat us", "poll CPU us/halt",
			       "won %");
		for (int k = 0; k < 5; k++) {
			if (!opt_json)
				printf("%-14s %-12s %12.2f %12.2f %14.2f %8.1f\n", "", pols[k].name,
				       o[k].mean_lat / 1e3, o[k].p99_lat / 1e3,
				       o[k].cpu_per_halt / 1e3, o[k].won * 100);
			emit(tr[i].name, pols[k].name, "mean_latency", "ns", o[k].mean_lat,
			     o[2].mean_lat);
			emit(tr[i].name, pols[k].name, "poll_cpu_per_halt", "ns",
			     o[k].cpu_per_halt, o[2].cpu_per_halt);
		}
		/* The goals, checked and printed, never rounded up. */
		const struct outcome *ad = &o[4], *kv = &o[2], *ap = &o[1];
		bool dominated = ad->mean_lat > kv->mean_lat * 1.001 &&
				 ad->cpu_per_halt > kv->cpu_per_halt * 1.001;
		bool fast = ap->won > 0.99;
		bool slowish = !strcmp(tr[i].name, "heavy-tailed") || !strcmp(tr[i].name, "slow");
		if (!opt_json) {
			printf("%-14s goal: adaptive not worse than kvm on both: %s\n", "",
			       dominated ? "MISSED" : "met");
			if (fast)
				printf("%-14s goal: adaptive latency within 5%% of always-poll "
				       "(%.3fx): %s\n", "", ad->mean_lat / ap->mean_lat,
				       ad->mean_lat <= ap->mean_lat * 1.05 ? "met" : "MISSED");
			if (slowish)
				printf("%-14s goal: adaptive poll CPU at most half of kvm's "
				       "(%.3fx): %s\n", "",
				       kv->cpu_per_halt > 0 ? ad->cpu_per_halt / kv->cpu_per_halt : 0,
				       ad->cpu_per_halt <= kv->cpu_per_halt * 0.5 ? "met" : "MISSED");
		}
		misses += dominated;
		free(tr[i].d);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* pmi: a handler that raises a request serviced earlier than itself */

enum { K_PMI = 0, K_NMI = 1 };

struct pmi_vcpu {
	struct vsched_vcpu *v;
	atomic_int kicked, stop;
};

static void pmi_handler(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p, void *a)
{
	(void)k, (void)p, (void)a;
	vsched_post(v, K_NMI); /* inject the NMI the PMI asks for */
}

static void pmi_kick(struct vsched_vcpu *v, void *ctx)
{
	(void)ctx;
	atomic_store(&((struct pmi_vcpu *)vsched_vcpu_user(v))->kicked, 1);
}

static void *pmi_vcpu_thread(void *arg)
{
	struct pmi_vcpu *c = arg;
	pin(0);
	while (!atomic_load(&c->stop)) {
		vsched_service(c->v);
		if (vsched_vcpu_enter(c->v) != 0)
			continue;
		uint64_t end = now_ns() + 2000; /* 2 us of guest, or a kick */
		while (!atomic_load(&c->kicked) && now_ns() < end)
			;
		atomic_store(&c->kicked, 0);
		vsched_vcpu_exit(c->v);
	}
	return NULL;
}

/* Returns cancelled entries per 10 s; *pmis gets PMIs posted per 10 s. */
static double pmi_run(int naive, double seconds, double *pmis)
{
	struct vsched_host_ops ops = { .kick = pmi_kick };
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops };
	struct vsched_request_desc pmi = { .name = "PMI", .priority = 1,
					   .handler = pmi_handler,
					   .may_raise = VSCHED_KIND_BIT(K_NMI) };
	struct vsched_request_desc nmi = { .name = "NMI", .priority = naive ? 0 : 2 };
	struct pmi_vcpu c = { 0 };
	struct vsched_vm *vm;
	pthread_t t;
	uint64_t n = 0;

	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_PMI, &pmi) ||
	    vsched_request_declare(vm, K_NMI, &nmi) ||
	    vsched_request_finalize(vm, naive ? VSCHED_FINALIZE_ALLOW_LATE_RAISE : 0) ||
	    vsched_vcpu_create(vm, 0, &c, &c.v))
		abort();
	pthread_create(&t, NULL, pmi_vcpu_thread, &c);
	pin(1);
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9), next = t0;
	while (now_ns() < end) {
		next += 50000; /* a PMI every 50 us */
		while (now_ns() < next)
			vsched__relax();
		vsched_post(c.v, K_PMI);
		n++;
	}
	double el = (double)(now_ns() - t0) / 1e9;
	atomic_store(&c.stop, 1);
	pthread_join(t, NULL);
	struct vsched_vcpu_stats st = { .size = sizeof(st) };
	vsched_vcpu_read_stats(c.v, &st);
	vsched_vm_destroy(vm);
	*pmis = (double)n / el * 10;
	return (double)st.cancelled_entries / el * 10;
}

static void bench_pmi(void)
{
	double a[MAX_RUNS], b[MAX_RUNS], pm;
	double secs = opt_quick ? 0.3 : 2.0;
	for (int r = 0; r < opt_runs; r++) {
		a[r] = pmi_run(0, secs, &pm);
		b[r] = pmi_run(1, secs, &pm);
	}
	report("pmi", "cancelled_entries_per_10s", "count", "naive_order_nmi_first", a, b,
	       opt_runs);
	if (!opt_json) {
		double ma = median(a, opt_runs), mb = median(b, opt_runs);
		printf("pmi      %.0f PMIs per 10 s; validated order cuts cancelled entries by "
		       "%.2f%% (goal >= 99%%: %s)\n", pm, mb > 0 ? (1 - ma / mb) * 100 : 0,
		       mb > 0 && ma <= 0.01 * mb ? "met" : "MISSED");
	}
}

/* ------------------------------------------------------------------ */
/* idle: the way back from a sleep */

static void bench_idle(void)
{
	const long iters = opt_quick ? 2000000 : 20000000;
	double slow[MAX_RUNS], fast[MAX_RUNS], share[MAX_RUNS], all[MAX_RUNS];
	static _Alignas(64) _Atomic uint32_t word;
	static struct pp pb;
	uint64_t skips = 0, stores = 0, wakes = 0;

	/* How often a real blocked wakeup takes the fast path: a futex
	 * ping-pong between two vCPUs, counted by vsched. */
	memset(&pb, 0, sizeof(pb));
	pb.iters = opt_quick ? 500 : 3000;
	struct vsched_vm *vm = make_vm(0, pb.v, 2, NULL);
	pthread_t t;
	pthread_create(&t, NULL, vs_peer, &pb);
	pin(0);
	for (long i = 0; i < pb.iters; i++) {
		vsched_post(pb.v[1], K_A);
		while (vsched_vcpu_block(pb.v[0], VSCHED_DEADLINE_NONE) != VSCHED_WAKE_REQUEST)
			;
		vsched_service(pb.v[0]);
	}
	pthread_join(t, NULL);
	for (int k = 0; k < 2; k++) {
		struct vsched_vcpu_stats st = { .size = sizeof(st) };
		vsched_vcpu_read_stats(pb.v[k], &st);
		skips += st.halt.idle_fastpath_skips;
		stores += st.halt.idle_fastpath_stores;
		wakes += st.wakeups;
	}
	vsched_vm_destroy(vm);

	for (int r = 0; r < opt_runs; r++) {
		/* What the way back costs: exchange + barrier (the slow way)
		 * against the fast path's load and compare. */
		uint64_t t0 = now_ns();
		for (long i = 0; i < iters; i++) {
			atomic_exchange_explicit(&word, 0, memory_order_seq_cst);
			vsched__mb_after_rmw();
		}
		uint64_t t1 = now_ns();
		for (long i = 0; i < iters; i++) {
			if (atomic_load_explicit(&word, memory_order_acquire) == 4)
				abort();
			__asm__ __volatile__("" ::: "memory");
		}
		uint64_t t2 = now_ns();
		slow[r] = (double)(t1 - t0) / iters;
		fast[r] = (double)(t2 - t1) / iters;
		share[r] = skips + stores ? (double)skips / (double)(skips + stores) : 0;
		all[r] = 1;
	}
	if (!opt_json)
		printf("idle     blocked ping-pong: %llu wakeups; the way back skipped its store "
		       "and fence %llu times and paid them %llu times\n",
		       (unsigned long long)wakes, (unsigned long long)skips,
		       (unsigned long long)stores);
	report("idle", "way_back_fast_path", "ns", "exchange_plus_barrier", fast, slow, opt_runs);
	report("idle", "share_of_wakeups_on_fast_path", "fraction", "all_wakeups", share, all,
	       opt_runs);
}

/* ------------------------------------------------------------------ */
/* hook: the arch blocking hook before or after the poll window */

#define HOOK_NS 20000
#define HOOK_WINDOW_NS 100000

struct hook_sim {
	atomic_int synced;   /* the hook ran: the interrupt controller is synced */
	atomic_int arrived;  /* the interrupt arrived */
	_Atomic uint64_t t_arrival;
	struct vsched_vcpu *v;
	uint64_t delay;
	atomic_int go;
};

static struct hook_sim hs;

static void busy(uint64_t ns)
{
	uint64_t end = now_ns() + ns;
	while (now_ns() < end)
		vsched__relax();
}

static void hook_blocking(struct vsched_vcpu *v, void *c)
{
	(void)v, (void)c;
	busy(HOOK_NS); /* sync the vgic, arm the doorbell */
	atomic_store(&hs.synced, 1);
}

static void hook_unblocking(struct vsched_vcpu *v, void *c)
{
	(void)v, (void)c;
	atomic_store(&hs.synced, 0);
}

/* A pending interrupt is only visible once the hook synced the state. */
static bool hook_has_event(struct vsched_vcpu *v, void *c)
{
	(void)v, (void)c;
	return atomic_load(&hs.arrived) && atomic_load(&hs.synced);
}

static void *hook_source(void *arg)
{
	(void)arg;
	pin(1);
	for (;;) {
		int g;
		while ((g = atomic_load(&hs.go)) == 0)
			vsched__relax();
		if (g < 0)
			return NULL;
		uint64_t at = now_ns() + hs.delay;
		while (now_ns() < at)
			vsched__relax();
		atomic_store(&hs.t_arrival, now_ns());
		atomic_store(&hs.arrived, 1);
		if (atomic_load(&hs.synced))
			vsched_vcpu_kick(hs.v); /* the doorbell */
		atomic_store(&hs.go, 0);
	}
}

static void bench_hook(void)
{
	const int halts = opt_quick ? 200 : 1000;
	double a[MAX_RUNS], b[MAX_RUNS];
	struct vsched_host_ops ops = { .blocking = hook_blocking, .unblocking = hook_unblocking,
				       .has_event = hook_has_event };
	struct vsched_poll_params pp;
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops, .poll = &pp };
	struct vsched_request_desc d = { .name = "a" };
	struct vsched_vm *vm;
	pthread_t t;
	uint64_t seed = 12345;

	vsched_poll_defaults(VSCHED_POLL_FIXED, HOOK_WINDOW_NS, &pp);
	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_A, &d) ||
	    vsched_request_finalize(vm, 0) || vsched_vcpu_create(vm, 0, NULL, &hs.v))
		abort();
	pthread_create(&t, NULL, hook_source, NULL);
	pin(0);
	for (int r = 0; r < opt_runs; r++) {
		double sa = 0, sb = 0;
		for (int i = 0; i < halts; i++) {
			seed = seed * 6364136223846793005ull + 1442695040888963407ull;
			/* inside the window, after the hook would be done */
			hs.delay = HOOK_NS + 5000 + (seed >> 33) % (HOOK_WINDOW_NS - HOOK_NS - 10000);

			/* vsched: hook first, then poll. */
			atomic_store(&hs.arrived, 0);
			atomic_store(&hs.go, 1);
			while (vsched_vcpu_block(hs.v, now_ns() + 10000000) != VSCHED_WAKE_EVENT)
				;
			sa += (double)(now_ns() - atomic_load(&hs.t_arrival));
			while (atomic_load(&hs.go))
				;

			/* The pre-fix order: poll the window, then the hook, then
			 * look again (and sleep, if still nothing). */
			atomic_store(&hs.arrived, 0);
			atomic_store(&hs.go, 1);
			uint64_t end = now_ns() + HOOK_WINDOW_NS;
			bool seen = false;
			while (now_ns() < end && !(seen = hook_has_event(hs.v, NULL)))
				vsched__relax();
			if (!seen) {
				hook_blocking(hs.v, NULL);
				while (!hook_has_event(hs.v, NULL))
					vsched__relax();
			}
			hook_unblocking(hs.v, NULL);
			sb += (double)(now_ns() - atomic_load(&hs.t_arrival));
			while (atomic_load(&hs.go))
				;
		}
		a[r] = sa / halts;
		b[r] = sb / halts;
	}
	atomic_store(&hs.go, -1);
	pthread_join(t, NULL);
	vsched_vm_destroy(vm);
	report("hook", "in_window_wakeup_latency", "ns", "hook_after_poll_window", a, b, opt_runs);
}

/* ------------------------------------------------------------------ */
/* scale: 1..256 vCPUs */

static _Atomic uint64_t tally_bytes;
static void *tally_alloc(size_t size, size_t align, void *ctx)
{
	void *p = NULL;
	(void)ctx;
	if (posix_memalign(&p, align, size))
		return NULL;
	atomic_fetch_add(&tally_bytes, size);
	return p;
}
static void tally_free(void *p, size_t size, void *ctx)
{
	(void)ctx;
	atomic_fetch_sub(&tally_bytes, size);
	free(p);
}

/* A kick that makes the vCPU leave the guest at once (an IPI taken
 * instantly), so that the broadcast measures vsched's own cost. */
static void exit_now(struct vsched_vcpu *v, void *c)
{
	(void)c;
	vsched_vcpu_exit(v);
}

static void bench_scale(void)
{
	static const unsigned ns[] = { 1, 2, 4, 8, 16, 32, 64, 128, 256 };
	struct vsched_allocator al = { .alloc = tally_alloc, .free = tally_free };
	struct vsched_host_ops ops = { .kick = exit_now };
	double bcast[9], svc[9], mem[9];

	for (unsigned i = 0; i < 9; i++) {
		unsigned n = ns[i];
		struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops, .alloc = &al,
						.max_vcpus = 256 };
		struct vsched_request_desc d = { .name = "tlb_flush", .flags = VSCHED_REQ_WAIT };
		struct vsched_vm *vm;
		struct vsched_vcpu *v[256];
		if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_A, &d) ||
		    vsched_request_finalize(vm, 0))
			abort();
		uint64_t before = atomic_load(&tally_bytes);
		for (unsigned k = 0; k < n; k++)
			if (vsched_vcpu_create(vm, k, NULL, &v[k]))
				abort();
		mem[i] = (double)(atomic_load(&tally_bytes) - before) / n;
		const int reps = opt_quick ? 200 : 2000;
		double tb = 0, ts = 0;
		for (int r = 0; r < reps; r++) {
			for (unsigned k = 0; k < n; k++)
				vsched_vcpu_enter(v[k]); /* all in the guest */
			uint64_t t0 = now_ns();
			vsched_broadcast(vm, NULL, 0, K_A); /* WAIT: kick all, wait all */
			uint64_t t1 = now_ns();
			for (unsigned k = 0; k < n; k++)
				vsched_service(v[k]);
			uint64_t t2 = now_ns();
			tb += (double)(t1 - t0);
			ts += (double)(t2 - t1) / n;
		}
		bcast[i] = tb / reps;
		svc[i] = ts / reps;
		vsched_vm_destroy(vm);
		if (opt_json) {
			char m[64];
			double one = 1;
			snprintf(m, sizeof(m), "wait_broadcast_%u_vcpus", n);
			report("scale", m, "ns", "none", &bcast[i], &one, 1);
			snprintf(m, sizeof(m), "service_per_vcpu_%u_vcpus", n);
			report("scale", m, "ns", "none", &svc[i], &one, 1);
			snprintf(m, sizeof(m), "memory_per_vcpu_%u_vcpus", n);
			report("scale", m, "bytes", "none", &mem[i], &one, 1);
		}
	}
	if (!opt_json) {
		printf("scale    %6s %18s %16s %14s\n", "vCPUs", "WAIT broadcast ns",
		       "service ns/vCPU", "bytes/vCPU");
		for (unsigned i = 0; i < 9; i++)
			printf("scale    %6u %18.0f %16.1f %14.0f\n", ns[i], bcast[i], svc[i], mem[i]);
		printf("scale    growth 1 -> 256 vCPUs: broadcast x%.0f (per vCPU x%.2f), "
		       "service per vCPU x%.2f, memory per vCPU x%.2f\n",
		       bcast[8] / bcast[0], bcast[8] / 256 / bcast[0], svc[8] / svc[0],
		       mem[8] / mem[0]);
	}
}

/* ------------------------------------------------------------------ */
/* instr: fixed loops for bench/callgrind.sh (instruction counts) */

#define INSTR_N 100000

static NOINLINE void instr_vsched(struct vsched_vcpu *v)
{
	for (long i = 0; i < INSTR_N; i++)
		vsched_service(v);
	for (long i = 0; i < INSTR_N; i++) {
		vsched_post(v, K_A);
		vsched_service(v);
	}
	for (long i = 0; i < INSTR_N; i++) {
		vsched_vcpu_enter(v);
		vsched_vcpu_exit(v);
	}
}

static NOINLINE void instr_raw(struct raw_vcpu *r)
{
	for (long i = 0; i < INSTR_N; i++)
		raw_service(r);
	for (long i = 0; i < INSTR_N; i++) {
		raw_post(r);
		raw_service(r);
	}
	for (long i = 0; i < INSTR_N; i++)
		raw_enter_exit(r);
}

static void bench_instr(void)
{
	struct vsched_vcpu *v;
	static struct raw_vcpu raw;
	struct vsched_vm *vm = make_vm(0, &v, 1, empty_handler);
	instr_vsched(v);
	instr_raw(&raw);
	vsched_vm_destroy(vm);
	printf("instr: %d iterations of each path; run under bench/callgrind.sh\n", INSTR_N);
}

/* --- overshoot: how late timed sleeps return (issue 15 item 8) --- */

static void report_overshoot(const char *name, uint64_t *late, int n,
			     uint64_t cpu_ns)
{
	qsort(late, (size_t)n, sizeof(*late), cmp_u64);
	printf("overshoot %-28s median %7.1f us  p99 %7.1f us  max %7.1f us  "
	       "cpu %5.1f us/sleep\n",
	       name, late[n / 2] / 1e3, late[n * 99 / 100] / 1e3,
	       late[n - 1] / 1e3, (double)cpu_ns / n / 1e3);
}

/* Sleeps of `sleep_ns` each, on a deadline; how long after the deadline
 * each returns. The baseline is clock_nanosleep(TIMER_ABSTIME) with the
 * thread's own timer slack, in the same run. Never a test: timing. */
static void bench_overshoot(void)
{
	const int n = opt_quick ? 100 : 1000;
	const uint64_t sleep_ns = 200000;
	uint64_t *late = calloc((size_t)n, sizeof(*late));
	struct vsched_vm_config cfg = { .size = sizeof(cfg) };
	struct vsched_poll_params none;
	struct vsched_vm *vm;
	struct vsched_vcpu *fv, *ev;
	int efd;

	vsched_poll_defaults(VSCHED_POLL_NONE, 0, &none);
	cfg.poll = &none;
	if (!late || vsched_vm_create(&cfg, &vm) || vsched_request_finalize(vm, 0) ||
	    vsched_vcpu_create(vm, 0, NULL, &fv) || vsched_vcpu_create(vm, 1, NULL, &ev))
		abort();
	efd = eventfd(0, EFD_NONBLOCK);
	if (efd < 0 || vsched_vcpu_fd_add(ev, efd, EPOLLIN, 1))
		abort();
	printf("overshoot: %d sleeps of %llu us each, thread timer slack %d ns\n",
	       n, (unsigned long long)(sleep_ns / 1000), prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
	for (int path = 0; path < 3; path++) {
		uint64_t cpu0 = thread_cpu_ns();
		for (int i = 0; i < n; i++) {
			uint64_t dl = now_ns() + sleep_ns, t;
			if (path == 0) {
				struct timespec ts = { .tv_sec = (time_t)(dl / 1000000000u),
						       .tv_nsec = (long)(dl % 1000000000u) };
				while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
					;
			} else if (vsched_vcpu_block(path == 1 ? fv : ev, dl) !=
				   VSCHED_WAKE_DEADLINE) {
				abort();
			}
			t = now_ns();
			late[i] = t > dl ? t - dl : 0;
		}
		report_overshoot(path == 0 ? "clock_nanosleep (baseline)"
			       : path == 1 ? "vsched futex path"
					   : "vsched epoll path (timerfd)",
				 late, n, thread_cpu_ns() - cpu0);
	}
	vsched_vm_destroy(vm);
	close(efd);
	free(late);
}

int main(int argc, char **argv)
{
	const char *which = "all";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			opt_json = 1;
		else if (!strcmp(argv[i], "--quick"))
			opt_quick = 1;
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			opt_runs = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--trace") && i + 1 < argc &&
			 ntrace_files < MAX_TRACES)
			trace_files[ntrace_files++] = argv[++i];
		else if (!strcmp(argv[i], "--wake-ns") && i + 1 < argc)
			opt_wake_ns = atof(argv[++i]);
		else if (!strcmp(argv[i], "--polled-ns") && i + 1 < argc)
			opt_polled_ns = atof(argv[++i]);
		else if (!strcmp(argv[i], "--latency-weight") && i + 1 < argc)
			opt_weight = (unsigned)atoi(argv[++i]);
		else if (!strcmp(argv[i], "--live"))
			opt_live = 1;
		else if (argv[i][0] != '-')
			which = argv[i];
		else {
			fprintf(stderr, "usage: %s [--quick] [--json] [--runs N] "
					"[--trace FILE] [--wake-ns N] [--polled-ns N] "
					"[--latency-weight N] [--live] "
					"[request|wakeup|pmi|idle|hook|scale|waiter|timer|policy|overshoot|all]\n", argv[0]);
			return 2;
		}
	}
	if (opt_runs < 1 || opt_runs > MAX_RUNS)
		opt_runs = 5;
	if (!strcmp(which, "request") || !strcmp(which, "all"))
		bench_request();
	if (!strcmp(which, "wakeup") || !strcmp(which, "all"))
		bench_wakeup();
	if (!strcmp(which, "instr"))
		bench_instr();
	if (!strcmp(which, "overshoot"))
		bench_overshoot();
	if (!strcmp(which, "pmi") || !strcmp(which, "all"))
		bench_pmi();
	if (!strcmp(which, "idle") || !strcmp(which, "all"))
		bench_idle();
	if (!strcmp(which, "hook") || !strcmp(which, "all"))
		bench_hook();
	if (!strcmp(which, "scale") || !strcmp(which, "all"))
		bench_scale();
	if (!strcmp(which, "waiter") || !strcmp(which, "all"))
		bench_waiter();
	if (!strcmp(which, "timer") || !strcmp(which, "all"))
		bench_timer();
	if (!strcmp(which, "policy") || !strcmp(which, "all"))
		return bench_policy();
	return 0;
}
