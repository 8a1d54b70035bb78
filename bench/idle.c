/* SPDX-License-Identifier: MIT */
/*
 * idle: the way back from a sleep. Blocked wakeups: how often the way back
 * skips its store and fence, and what that saves per wakeup.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#include "arch/arch.h"

static int run_idle(void)
{
	const long iters = opt_quick ? 2000000 : 20000000;
	double slow[MAX_RUNS], fast[MAX_RUNS];
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
	}
	if (!opt_json)
		printf("idle     blocked ping-pong: %llu wakeups; the way back skipped its store "
		       "and fence %llu times and paid them %llu times\n",
		       (unsigned long long)wakes, (unsigned long long)skips,
		       (unsigned long long)stores);
	report("idle", "way_back_fast_path", "ns", "exchange_plus_barrier", fast, slow, opt_runs);
	/* The share, from the one ping-pong above: the way backs that
	 * skipped over all of them (one run: it is counted once). */
	double skipped = (double)skips, ways = (double)(skips + stores);
	report("idle", "way_backs_on_fast_path", "count", "all_way_backs", &skipped, &ways, 1);
	return 0;
}

const struct bench bench_idle = {
	.name = "idle",
	.desc = "the way back from a blocked wakeup: fast path share and cost",
	.run = run_idle,
	.in_all = true,
};
