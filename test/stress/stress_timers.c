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
 * Then, on the real clock: a thread re-arms timers (each arm lowers the
 * service's deadline, so it reaches the service) while another creates and
 * destroys the VM's timer service, and vCPUs with armed timers are created
 * and destroyed (hotplug) while the service dispatches. Under ASan this
 * catches an arm that reaches a service being freed and a dispatch that
 * walks a destroyed vCPU's timers; a timer of a live vCPU must still fire.
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

/* --- phase 2: service and vCPU lifetimes against arms --- */

static struct vsched_vm *vm2;
static struct vsched_timer *t2;
static atomic_int stop2;

static void *rearmer(void *arg)
{
	uint64_t far = mono() + 3600ull * 1000000000ull;
	(void)arg;
	/* Ever earlier deadlines: each one lowers the service's minimum and
	 * programs its timerfd. */
	while (!atomic_load(&stop2))
		vsched_timer_arm(t2, far--);
	return NULL;
}

static void *svc_runner(void *arg)
{
	vsched_timer_service_run(arg);
	return NULL;
}

static int lifetimes(double seconds)
{
	struct vsched_request_desc d = { .name = "timer" };
	struct vsched_timer_desc td = { .size = sizeof(td), .kind = 0,
					.semantics = VSCHED_TIMER_LEVEL };
	struct vsched_vcpu *v0;
	struct vsched_timer_service *svc;
	pthread_t th, st;
	uint64_t cycles = 0, hotplugs = 0, end;

	if (vsched_vm_create(NULL, &vm2) || vsched_request_declare(vm2, 0, &d) ||
	    vsched_request_finalize(vm2, 0) || vsched_vcpu_create(vm2, 0, NULL, &v0) ||
	    vsched_timer_create(v0, &td, &t2))
		return 2;
	pthread_create(&th, NULL, rearmer, NULL);
	end = mono() + (uint64_t)(seconds * 1e9);
	while (mono() < end) {
		if (vsched_timer_service_create(vm2, &svc))
			return 2;
		if (vsched_timer_service_destroy(svc))
			return 2;
		cycles++;
	}
	atomic_store(&stop2, 1);
	pthread_join(th, NULL);

	/* Hotplug while the service runs: every destroyed vCPU had a timer
	 * armed in the past, masked (never fires) or due now. */
	if (vsched_timer_service_create(vm2, &svc))
		return 2;
	pthread_create(&st, NULL, svc_runner, svc);
	end = mono() + (uint64_t)(seconds * 1e9);
	while (mono() < end) {
		struct vsched_vcpu *v;
		struct vsched_timer *t;
		if (vsched_vcpu_create(vm2, 1, NULL, &v) || vsched_timer_create(v, &td, &t))
			return 2;
		vsched_timer_set_ctl(t, true, hotplugs & 1);
		vsched_timer_arm(t, mono() + (hotplugs % 3) * 1000);
		if (vsched_vcpu_destroy(v))
			return 2;
		hotplugs++;
	}
	/* The live vCPU's timer still fires through the service. */
	vsched_timer_set_ctl(t2, true, false);
	struct vsched_timer_stats ts0, ts1;
	vsched_timer_read_stats(t2, &ts0);
	vsched_timer_arm(t2, mono() + 1000000);
	end = mono() + 10ull * 1000000000ull;
	do {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
		vsched_timer_read_stats(t2, &ts1);
	} while (ts1.fired == ts0.fired && mono() < end);
	int ok = ts1.fired > ts0.fired;
	vsched_timer_service_stop(svc);
	pthread_join(st, NULL);
	printf("service create/destroy cycles under arms %llu, hotplugged vCPUs %llu\n",
	       (unsigned long long)cycles, (unsigned long long)hotplugs);
	if (!ok)
		fprintf(stderr, "FAIL: a live vCPU's timer did not fire after hotplug\n");
	/* The VM destroys the service still attached to it. */
	vsched_vm_destroy(vm2);
	return ok ? 0 : 1;
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
	if (!bad)
		bad = lifetimes(seconds / 2);
	printf("%s\n", bad ? "FAILED" : "OK");
	return bad;
}
