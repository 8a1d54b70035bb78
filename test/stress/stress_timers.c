/* SPDX-License-Identifier: MIT */
/*
 * Stress: a guest thread re-arms a timer as fast as it can while another
 * thread (the timer service) keeps firing it. The clock is the test's: the
 * re-arming thread advances it by one tick before each re-arm, so each armed
 * epoch is either due at its replacement (deadline <= clock then) or not,
 * exactly. A due epoch must be posted once (by the service's CAS or by the
 * re-arm's exchange, whichever wins the race), an epoch not due never, so
 * vsched's count of posted expiries must equal the number of due epochs.
 *
 * usage: stress_timers [seconds]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <vsched/vsched.h>

static _Atomic uint64_t clk = 1000;
static atomic_int stop;
static struct vsched_vcpu *vcpu;
static struct vsched_timer *timer;

static uint64_t fake_now(void *ctx)
{
	(void)ctx;
	return atomic_load_explicit(&clk, memory_order_seq_cst);
}

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static _Atomic uint64_t by_service;

static void *firer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		int n = vsched_vcpu_fire_timers(vcpu);
		if (n > 0)
			atomic_fetch_add(&by_service, (uint64_t)n);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 5;
	struct vsched_host_ops ops = { .now_ns = fake_now };
	struct vsched_poll_params pp;
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops, .poll = &pp };
	struct vsched_request_desc d = { .name = "timer" };
	struct vsched_timer_desc td = { .size = sizeof(td), .kind = 0,
					.semantics = VSCHED_TIMER_DECREMENTER };
	struct vsched_vm *vm;
	pthread_t th;
	uint64_t due = 0, arms = 0, seed = 88172645463325252ull;

	vsched_poll_defaults(VSCHED_POLL_NONE, 0, &pp);
	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, 0, &d) ||
	    vsched_request_finalize(vm, 0) || vsched_vcpu_create(vm, 0, NULL, &vcpu) ||
	    vsched_timer_create(vcpu, &td, &timer))
		return 2;
	pthread_create(&th, NULL, firer, NULL);

	uint64_t prev = 0, now = 1000, end = mono() + (uint64_t)(seconds * 1e9);
	while (mono() < end) {
		for (int k = 0; k < 1024; k++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			atomic_store(&clk, ++now);
			/* The epoch being replaced is due iff its deadline is
			 * at or before the clock the replacement sees. */
			if (prev)
				due += prev <= now;
			/* deadlines around now: past, now, just ahead */
			prev = now - 2 + seed % 5;
			vsched_timer_arm(timer, prev);
			arms++;
		}
	}
	atomic_store(&stop, 1);
	pthread_join(th, NULL);
	/* The last epoch: let time pass it; it must be posted exactly once. */
	atomic_store(&clk, prev + 1000);
	vsched_vcpu_fire_timers(vcpu);
	vsched_vcpu_fire_timers(vcpu);
	due++;

	struct vsched_timer_stats s;
	vsched_timer_read_stats(timer, &s);
	printf("arms %llu, due epochs %llu, expiries posted %llu (by the service %llu)\n",
	       (unsigned long long)arms, (unsigned long long)due,
	       (unsigned long long)s.fired, (unsigned long long)atomic_load(&by_service));
	int bad = 0;
	if (s.fired < due) {
		fprintf(stderr, "FAIL: %llu expiries lost\n",
			(unsigned long long)(due - s.fired));
		bad = 1;
	}
	if (s.fired > due) {
		fprintf(stderr, "FAIL: %llu expiries posted twice or early\n",
			(unsigned long long)(s.fired - due));
		bad = 1;
	}
	/* Both sides of the race must have won sometimes. */
	if (atomic_load(&by_service) == 0 || atomic_load(&by_service) >= s.fired) {
		fprintf(stderr, "FAIL: the service/re-arm race was not exercised\n");
		bad = 1;
	}
	vsched_vm_destroy(vm);
	printf("%s\n", bad ? "FAILED" : "OK");
	return bad;
}
