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
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <vsched/vsched.h>

/* The baselines use the same arch fences as the library, so each ratio is
 * what vsched adds to the minimal correct sequence on this machine. */
#include "arch/arch.h"

#define MAX_RUNS 64
#define NOINLINE __attribute__((noinline))

static int opt_json, opt_quick, opt_runs = 5;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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
		atomic_store_explicit(&p.a, i, memory_order_release);
		if (futex)
			fwake(&p.a);
		while ((x = atomic_load_explicit(&p.b, memory_order_acquire)) != i)
			if (futex)
				fwait(&p.b, x);
			else
				vsched__relax();
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
		vsched_post(p.v[1], K_A);
		while (vsched_vcpu_block(p.v[0], VSCHED_DEADLINE_NONE) !=
		       VSCHED_WAKE_REQUEST)
			;
		vsched_service(p.v[0]);
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
		else if (argv[i][0] != '-')
			which = argv[i];
		else {
			fprintf(stderr, "usage: %s [--quick] [--json] [--runs N] "
					"[request|wakeup|all]\n", argv[0]);
			return 2;
		}
	}
	if (opt_runs < 1 || opt_runs > MAX_RUNS)
		opt_runs = 5;
	if (!strcmp(which, "request") || !strcmp(which, "all"))
		bench_request();
	if (!strcmp(which, "wakeup") || !strcmp(which, "all"))
		bench_wakeup();
	return 0;
}
