/* SPDX-License-Identifier: MIT */
/*
 * request: service with nothing pending, post + service with no kick, and
 * commit + exit, against the raw atomic sequences they are built from (same
 * call structure): the exported functions, and the inline fast paths of
 * <vsched/inline.h> as a VSCHED_INLINE hypervisor compiles them
 * (bench/request_inline.c).
 * instr: the same three paths, a fixed number of times each, for
 * bench/callgrind.sh (instruction counts, which it finds by the function
 * names below: keep them).
 */
#include <stdio.h>

#include "bench.h"

/* The baselines use the same arch fences as the library, so each ratio is
 * what vsched adds to the minimal correct sequence on this machine. */
#include "arch/arch.h"

/* bench/request_inline.c: the inline variants, one function each. */
int inl_post(struct vsched_vcpu *v);
int inl_service(struct vsched_vcpu *v);
int inl_enter(struct vsched_vcpu *v);
int inl_exit(struct vsched_vcpu *v);

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

static int run_request(void)
{
	const long iters = opt_quick ? 2000000 : 10000000;
	double a[MAX_RUNS], b[MAX_RUNS], c[MAX_RUNS], d[MAX_RUNS], e[MAX_RUNS],
		f[MAX_RUNS], ia[MAX_RUNS], ib[MAX_RUNS], ic[MAX_RUNS], id[MAX_RUNS],
		ie[MAX_RUNS], iff[MAX_RUNS];
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

		/* The inline variants, each against a raw loop run beside it. */
		t0 = now_ns();
		for (long i = 0; i < iters; i++)
			inl_service(v);
		t1 = now_ns();
		for (long i = 0; i < iters; i++)
			raw_service(&raw);
		t2 = now_ns();
		ia[r] = (double)(t1 - t0) / iters;
		ib[r] = (double)(t2 - t1) / iters;

		t0 = now_ns();
		for (long i = 0; i < iters; i++) {
			inl_post(v);
			inl_service(v);
		}
		t1 = now_ns();
		for (long i = 0; i < iters; i++) {
			raw_post(&raw);
			raw_service(&raw);
		}
		t2 = now_ns();
		ic[r] = (double)(t1 - t0) / iters;
		id[r] = (double)(t2 - t1) / iters;

		t0 = now_ns();
		for (long i = 0; i < iters; i++) {
			inl_enter(v);
			inl_exit(v);
		}
		t1 = now_ns();
		for (long i = 0; i < iters; i++)
			raw_enter_exit(&raw);
		t2 = now_ns();
		ie[r] = (double)(t1 - t0) / iters;
		iff[r] = (double)(t2 - t1) / iters;
	}
	report("request", "service_nothing_pending", "ns", "raw_load", a, b, opt_runs);
	report("request", "post_outside_plus_service", "ns", "raw_or_fence_load_and", c, d,
	       opt_runs);
	report("request", "enter_exit", "ns", "raw_xchg_fence_load_xchg", e, f, opt_runs);
	report("request", "inline_service_nothing_pending", "ns", "raw_load", ia, ib,
	       opt_runs);
	report("request", "inline_post_outside_plus_service", "ns",
	       "raw_or_fence_load_and", ic, id, opt_runs);
	report("request", "inline_enter_exit", "ns", "raw_xchg_fence_load_xchg", ie, iff,
	       opt_runs);
	vsched_vm_destroy(vm);
	return 0;
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

static NOINLINE void instr_inline(struct vsched_vcpu *v)
{
	for (long i = 0; i < INSTR_N; i++)
		inl_service(v);
	for (long i = 0; i < INSTR_N; i++) {
		inl_post(v);
		inl_service(v);
	}
	for (long i = 0; i < INSTR_N; i++) {
		inl_enter(v);
		inl_exit(v);
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

static int run_instr(void)
{
	struct vsched_vcpu *v;
	static struct raw_vcpu raw;
	struct vsched_vm *vm = make_vm(0, &v, 1, empty_handler);
	instr_vsched(v);
	instr_inline(v);
	instr_raw(&raw);
	vsched_vm_destroy(vm);
	/* Not a figure: with --json, stdout keeps only the JSON lines. */
	fprintf(opt_json ? stderr : stdout,
		"instr: %d iterations of each path; run under bench/callgrind.sh\n", INSTR_N);
	return 0;
}

const struct bench bench_request = {
	.name = "request",
	.desc = "service, post + service, enter + exit against raw atomics",
	.run = run_request,
	.in_all = true,
};

const struct bench bench_instr = {
	.name = "instr",
	.desc = "the request paths, fixed counts, for bench/callgrind.sh",
	.run = run_instr,
	.in_all = false,
};
