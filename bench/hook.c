/* SPDX-License-Identifier: MIT */
/*
 * hook: an arch blocking hook that takes 20 us, run before the poll window
 * (vsched) or after it (the pre-fix KVM order, written out here): latency of
 * wakeups that arrive inside the window.
 */
#include <pthread.h>
#include <stdlib.h>

#include "bench.h"

#include "arch/arch.h"

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

static int run_hook(void)
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
	return 0;
}

const struct bench bench_hook = {
	.name = "hook",
	.desc = "a 20 us blocking hook before or after the poll window",
	.run = run_hook,
	.in_all = true,
};
