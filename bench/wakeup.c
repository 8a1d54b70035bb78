/* SPDX-License-Identifier: MIT */
/*
 * wakeup: polled round trip between two vCPU threads (post, the peer's poll
 * sees it, services, posts back) against a raw cache-line ping-pong; blocked
 * round trip (futex path) against a raw futex ping-pong and against a raw
 * futex handoff (the same sleep and wake protocol written by hand); then the
 * distribution of each, round trip by round trip. Two threads on the two
 * cores. The blocked rows also count the sleeps a round trip makes (both
 * threads' voluntary context switches): a futex ping-pong whose wake
 * syscall outlasts the peer's answer finds the word changed and never
 * sleeps, so its time says how often each side slept as much as what a
 * sleep costs.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#include "arch/arch.h"

/* This thread's voluntary context switches so far: a futex sleep is one. */
static long sleeps_now(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw;
}

/* Sleeps per round trip of the last ping-pong, both threads. */
static double pp_sleeps;

static void *raw_peer(void *arg)
{
	struct pp *p = arg;
	pin(1);
	long sl0 = sleeps_now();
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
	p->peer_sleeps = sleeps_now() - sl0;
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
	long sl0 = sleeps_now();
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
	long sl1 = sleeps_now();
	pthread_join(t, NULL);
	pp_sleeps = (double)(sl1 - sl0 + p.peer_sleeps) / iters;
	return (double)(t1 - t0) / iters;
}

/* The raw futex handoff: what a hypervisor writes by hand for a thread
 * that sleeps until a peer hands it work, with nothing of vsched's (no
 * request table, modes, policy or counters). Per thread a pending flag and
 * a state word: the sleeper says SLEEPING, looks at its flag again (the
 * Dekker pair with the poster's flag store and state exchange) and sleeps
 * on the state word with the futex call vsched's default sleep makes
 * (FUTEX_WAIT_BITSET to an absolute deadline: one the kernel never
 * reaches); the poster sets the flag and wakes only a SLEEPING thread. */
struct handoff {
	long iters;
	long peer_sleeps;
	struct {
		_Alignas(64) _Atomic uint32_t pending;
		_Atomic uint32_t state; /* 1: SLEEPING */
	} side[2];
};

static void handoff_post(struct handoff *h, int to)
{
	atomic_store(&h->side[to].pending, 1);
	if (atomic_exchange(&h->side[to].state, 0) == 1)
		syscall(SYS_futex, &h->side[to].state, FUTEX_WAKE_PRIVATE, 1, NULL,
			NULL, 0);
}

static void handoff_wait(struct handoff *h, int me)
{
	const struct timespec never = { .tv_sec = 1L << 40 };
	while (!atomic_exchange(&h->side[me].pending, 0)) {
		atomic_store(&h->side[me].state, 1);
		if (atomic_exchange(&h->side[me].pending, 0)) {
			atomic_store(&h->side[me].state, 0);
			return;
		}
		syscall(SYS_futex, &h->side[me].state, FUTEX_WAIT_BITSET_PRIVATE, 1,
			&never, NULL, FUTEX_BITSET_MATCH_ANY);
	}
}

static void *handoff_peer(void *arg)
{
	struct handoff *h = arg;
	pin(1);
	long sl0 = sleeps_now();
	for (long i = 0; i < h->iters; i++) {
		handoff_wait(h, 1);
		handoff_post(h, 0);
	}
	h->peer_sleeps = sleeps_now() - sl0;
	return NULL;
}

static double raw_handoff(long iters)
{
	static struct handoff h;
	pthread_t t;
	memset(&h, 0, sizeof(h));
	h.iters = iters;
	pthread_create(&t, NULL, handoff_peer, &h);
	pin(0);
	long sl0 = sleeps_now();
	uint64_t t0 = now_ns();
	for (long i = 0; i < iters; i++) {
		handoff_post(&h, 1);
		handoff_wait(&h, 0);
	}
	uint64_t t1 = now_ns();
	long sl1 = sleeps_now();
	pthread_join(t, NULL);
	pp_sleeps = (double)(sl1 - sl0 + h.peer_sleeps) / iters;
	return (double)(t1 - t0) / iters;
}

void *vs_peer(void *arg)
{
	struct pp *p = arg;
	pin(1);
	long sl0 = sleeps_now();
	for (long i = 0; i < p->iters; i++) {
		while (vsched_vcpu_block(p->v[1], VSCHED_DEADLINE_NONE) !=
		       VSCHED_WAKE_REQUEST)
			;
		vsched_service(p->v[1]);
		vsched_post(p->v[0], K_A);
	}
	p->peer_sleeps = sleeps_now() - sl0;
	return NULL;
}

double vs_pingpong(long iters, uint64_t poll_ns)
{
	static struct pp p;
	pthread_t t;
	memset(&p, 0, sizeof(p));
	p.iters = iters;
	struct vsched_vm *vm = make_vm(poll_ns, p.v, 2, NULL);
	pthread_create(&t, NULL, vs_peer, &p);
	pin(0);
	long sl0 = sleeps_now();
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
	long sl1 = sleeps_now();
	pthread_join(t, NULL);
	vsched_vm_destroy(vm);
	pp_sleeps = (double)(sl1 - sl0 + p.peer_sleeps) / iters;
	return (double)(t1 - t0) / iters;
}

static int run_wakeup(void)
{
	const long polled = opt_quick ? 50000 : 200000;
	const long blocked = opt_quick ? 2000 : 10000;
	double a[MAX_RUNS], b[MAX_RUNS], c[MAX_RUNS], d[MAX_RUNS], e[MAX_RUNS];
	double cs[MAX_RUNS], ds[MAX_RUNS], es[MAX_RUNS]; /* sleeps per round trip */

	for (int r = 0; r < opt_runs; r++) {
		/* Alternate the order so drift hits both sides alike. */
		if (r % 2) {
			b[r] = raw_pingpong(polled, 0);
			a[r] = vs_pingpong(polled, 1000000000ull);
		} else {
			a[r] = vs_pingpong(polled, 1000000000ull);
			b[r] = raw_pingpong(polled, 0);
		}
		/* The three blocked ones in a rotating order. */
		for (int k = 0; k < 3; k++) {
			switch ((r + k) % 3) {
			case 0:
				c[r] = vs_pingpong(blocked, 0);
				cs[r] = pp_sleeps;
				break;
			case 1:
				d[r] = raw_pingpong(blocked, 1);
				ds[r] = pp_sleeps;
				break;
			default:
				e[r] = raw_handoff(blocked);
				es[r] = pp_sleeps;
				break;
			}
		}
	}
	report("wakeup", "polled_round_trip", "ns", "raw_spin_pingpong", a, b, opt_runs);
	report("wakeup", "blocked_round_trip", "ns", "raw_futex_pingpong", c, d, opt_runs);
	report("wakeup", "blocked_round_trip", "ns", "raw_futex_handoff", c, e, opt_runs);
	report("wakeup", "blocked_sleeps_per_round_trip", "count", "raw_futex_pingpong", cs, ds,
	       opt_runs);
	report("wakeup", "blocked_sleeps_per_round_trip", "count", "raw_futex_handoff", cs, es,
	       opt_runs);

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
	return 0;
}

const struct bench bench_wakeup = {
	.name = "wakeup",
	.desc = "polled and blocked round trips against raw ping-pongs and a futex handoff",
	.run = run_wakeup,
	.in_all = true,
};
