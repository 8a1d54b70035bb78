/* SPDX-License-Identifier: MIT */
/*
 * wakeup: polled round trip between two vCPU threads (post, the peer's poll
 * sees it, services, posts back) against a raw cache-line ping-pong; blocked
 * round trip (futex path) against a raw futex ping-pong; then the
 * distribution of each, round trip by round trip. Two threads on the two
 * cores.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#include "arch/arch.h"

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

void *vs_peer(void *arg)
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

double vs_pingpong(long iters, uint64_t poll_ns)
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

static int run_wakeup(void)
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
	return 0;
}

const struct bench bench_wakeup = {
	.name = "wakeup",
	.desc = "polled and blocked round trips against raw ping-pongs",
	.run = run_wakeup,
	.in_all = true,
};
