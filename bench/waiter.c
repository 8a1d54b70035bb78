/* SPDX-License-Identifier: MIT */
/*
 * waiter: a guest-ring consumer (a VMM's virtio I/O thread) under three load
 * shapes, as three consumers: the vsched waiter (created with no policy: its
 * default, the waiter profile, vsched_poll_defaults_waiter()), the loop
 * small VMMs hand-write (spin 4096 pauses, then arm needs-kick and sleep),
 * and the same loop with its spin removed (sleep at once).
 *
 * - reqresp: request/response. The producer (the guest) waits until its
 *   last packet was consumed, thinks 10 us (busy, as a vCPU that stays in
 *   the guest), then posts the next: the next kick lands inside a poll
 *   window. Polling should pay here: latency is what counts.
 * - mid: the next packet comes 100 us after the last was consumed (a timed
 *   sleep: ~100-200 us with the producer's timer slack), past the waiter
 *   profile's 32 us cap and inside a vCPU's 200 us one: polling at a
 *   vCPU's rule would win every wait and burn the gap; the waiter should
 *   cost about what the loop without a spin costs.
 * - late: the next packet comes 1 ms after the last was consumed, long after
 *   any window. Polling cannot pay: CPU is what counts, and the adaptive
 *   waiter should cost no more than not spinning at all.
 * Metrics per shape: wakeup latency (publish to the consumer running) and
 * the consumer thread's CPU per packet (CLOCK_THREAD_CPUTIME_ID: its polling
 * and its syscalls).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#include "arch/arch.h"

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
		struct vsched_vm_config cfg = { .size = sizeof(cfg) };
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

static int run_waiter(void)
{
	static const struct {
		const char *name;
		uint64_t think_ns;
		bool busy;
		long packets, quick_packets;
	} shapes[] = {
		{ "reqresp", 10000, true, 5000, 1000 },
		{ "mid", 100000, false, 2000, 400 },
		{ "late", 1000000, false, 500, 100 },
	};
	static const char *const base_name[] = { "", "spin4096_then_sleep", "no_spin" };

	for (unsigned sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++) {
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
	return 0;
}

const struct bench bench_waiter = {
	.name = "waiter",
	.desc = "a guest-ring I/O thread against hand-written wait loops",
	.run = run_waiter,
	.in_all = true,
};
