/* SPDX-License-Identifier: MIT */
/* Guest timers with the injectable clock: expiry, semantics, the
 * cancellation policies, and the timer service on the real clock. */
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "timerrig.h"

static void test_fires_at_deadline_not_before(void **state)
{
	struct rig r;
	(void)state;
	rig_up(&r, VSCHED_TIMER_ONESHOT, VSCHED_CANCEL_CANCEL, false);
	r.h.now = 100;
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 999;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	assert_int_equal(vsched_service(r.v), 0);
	r.h.now = 1000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 1);
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0); /* exactly once */
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);
	/* One shot: consumed. */
	uint64_t d;
	bool exp;
	assert_int_equal(vsched_timer_get(r.t, &d, &exp), 0);
	assert_int_equal(d, 0);
	r.h.now = 5000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	assert_int_equal(tstats(r.t).fired, 1);
	vsched_vm_destroy(r.vm);
}

static void test_disarm_and_past_deadline(void **state)
{
	struct rig r;
	(void)state;
	rig_up(&r, VSCHED_TIMER_ONESHOT, VSCHED_CANCEL_CANCEL, false);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	assert_int_equal(vsched_timer_disarm(r.t), 0);
	r.h.now = 2000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	assert_int_equal(vsched_service(r.v), 0);
	/* A deadline already past posts at once. */
	assert_int_equal(vsched_timer_arm(r.t, 1500), 0);
	assert_int_equal(tstats(r.t).fired, 1);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);
	vsched_vm_destroy(r.vm);
}

static void test_rearm_after_unposted_expiry(void **state)
{
	struct rig r;
	(void)state;
	/* KEEP: the old expiry was real; it is posted by the re-arm and
	 * delivered, though stale (the guest moved the deadline). */
	rig_up(&r, VSCHED_TIMER_ONESHOT, VSCHED_CANCEL_KEEP, false);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 1500; /* passed, nobody fired it yet */
	assert_int_equal(vsched_timer_arm(r.t, 3000), 0);
	assert_int_equal(tstats(r.t).fired, 1);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);
	assert_int_equal(tstats(r.t).stale_delivered, 1);
	/* The new deadline still fires, once. */
	r.h.now = 3000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 1);
	vsched_vm_destroy(r.vm);

	/* CANCEL with vsched's own view: stale, dropped, no read needed. */
	rig_up(&r, VSCHED_TIMER_ONESHOT, VSCHED_CANCEL_CANCEL, false);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 1000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 1);
	assert_int_equal(vsched_timer_arm(r.t, 3000), 0); /* before entry */
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 0);
	struct vsched_timer_stats s = tstats(r.t);
	assert_int_equal(s.stale_cancelled, 1);
	assert_int_equal(s.state_reads, 0);
	vsched_vm_destroy(r.vm);
}

static int wait_to_deadline(struct fake_host *h, uint32_t *w, uint32_t e, uint64_t dl)
{
	(void)w, (void)e;
	/* The engine sleeps until the timer, not the caller's deadline. */
	assert_int_equal(dl, 7000);
	h->now = dl;
	return -110;
}

static void test_blocked_vcpu_wakes_at_timer(void **state)
{
	struct rig r;
	(void)state;
	rig_up(&r, VSCHED_TIMER_ONESHOT, VSCHED_CANCEL_CANCEL, false);
	r.h.on_wait = wait_to_deadline;
	assert_int_equal(vsched_timer_arm(r.t, 7000), 0);
	uint64_t next;
	assert_int_equal(vsched_vcpu_next_timer(r.v, &next), 0);
	assert_int_equal(next, 7000);
	assert_int_equal(vsched_vcpu_block(r.v, 1000000000), VSCHED_WAKE_REQUEST);
	assert_int_equal(r.h.now, 7000);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);
	vsched_vm_destroy(r.vm);
}

static void test_cancel_policies_nested(void **state)
{
	struct rig r;
	(void)state;

	/* KEEP never reads and delivers what the guest re-armed. */
	rig_up(&r, VSCHED_TIMER_DECREMENTER, VSCHED_CANCEL_KEEP, true);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 1000;
	vsched_vcpu_fire_timers(r.v);
	guest_deadline = 9000; /* the nested guest wrote DEC; L1 did not see it */
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);
	assert_int_equal(reads, 0);
	vsched_vm_destroy(r.vm);

	/* CANCEL reads: stale dropped, fresh delivered. */
	rig_up(&r, VSCHED_TIMER_DECREMENTER, VSCHED_CANCEL_CANCEL, true);
	read_cost = 50;
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 1000;
	vsched_vcpu_fire_timers(r.v);
	guest_deadline = 9000;
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 0);
	assert_int_equal(reads, 1);
	struct vsched_timer_stats s = tstats(r.t);
	assert_int_equal(s.stale_cancelled, 1);
	assert_int_equal(s.state_read_ns, 50);
	assert_int_equal(s.adaptive_reading, 0); /* ADAPTIVE's choice only */
	/* vsched's view now follows the guest's deadline. */
	uint64_t d;
	assert_int_equal(vsched_timer_get(r.t, &d, NULL), 0);
	assert_int_equal(d, 9000);
	r.h.now = 9000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 1);
	guest_deadline = 9000; /* really due this time */
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);
	/* Decrementer: stays pending (expired) until re-armed positive. */
	bool exp;
	assert_int_equal(vsched_timer_get(r.t, &d, &exp), 0);
	assert_true(exp);
	assert_int_equal(d, 9000);
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	assert_int_equal(vsched_timer_arm(r.t, 20000), 0);
	assert_int_equal(vsched_timer_get(r.t, &d, &exp), 0);
	assert_false(exp);
	vsched_vm_destroy(r.vm);
}

static void test_adaptive_switches(void **state)
{
	struct rig r;
	(void)state;
	rig_up(&r, VSCHED_TIMER_DECREMENTER, VSCHED_CANCEL_ADAPTIVE, true);
	/* Cheap reads, half stale, costly spurious exits: keeps reading. */
	read_cost = 100;
	for (int i = 0; i < 200; i++)
		expiry(&r, i % 2, 10000);
	assert_int_equal(tstats(r.t).adaptive_reading, 1);
	/* Reads become expensive (a hypercall when nested): stops reading. */
	read_cost = 40000;
	unsigned i = 0;
	while (tstats(r.t).adaptive_reading && i < 200)
		expiry(&r, i++ % 2, 10000);
	assert_int_equal(tstats(r.t).adaptive_reading, 0);
	unsigned reads_then = reads;
	for (int k = 0; k < 20; k++)
		expiry(&r, false, 10000);
	assert_int_equal(reads, reads_then); /* keep: no reads */
	/* Spurious deliveries grow costly and frequent: reads again. */
	i = 0;
	while (!tstats(r.t).adaptive_reading && i < 400)
		expiry(&r, (i++ % 10) != 0, 200000);
	assert_int_equal(tstats(r.t).adaptive_reading, 1);
	vsched_vm_destroy(r.vm);
}

static void test_level_semantics(void **state)
{
	struct rig r;
	(void)state;
	rig_up(&r, VSCHED_TIMER_LEVEL, VSCHED_CANCEL_CANCEL, false);
	/* Masked: not asserted at the deadline. */
	assert_int_equal(vsched_timer_set_ctl(r.t, true, true), 0);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 2000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	/* Unmasking an expired timer asserts it. */
	assert_int_equal(vsched_timer_set_ctl(r.t, true, false), 0);
	assert_int_equal(tstats(r.t).fired, 1);
	/* The guest masks it before entry: no longer asserted, stale. */
	assert_int_equal(vsched_timer_set_ctl(r.t, true, true), 0);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 0);
	assert_int_equal(tstats(r.t).stale_cancelled, 1);
	/* Asserted and still asserted at entry: delivered, and it stays
	 * asserted (level) without posting again. */
	assert_int_equal(vsched_timer_set_ctl(r.t, true, false), 0);
	assert_int_equal(vsched_timer_arm(r.t, 2000), 0);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);
	bool exp;
	uint64_t d;
	assert_int_equal(vsched_timer_get(r.t, &d, &exp), 0);
	assert_true(exp);
	assert_int_equal(d, 2000);
	/* Disabled: no expiry. */
	assert_int_equal(vsched_timer_set_ctl(r.t, false, false), 0);
	assert_int_equal(vsched_timer_arm(r.t, 2500), 0);
	r.h.now = 3000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	vsched_vm_destroy(r.vm);
}


/* Issue 14 (3): a LEVEL line that falls (mask) while its expiry is pending
 * and rises again (unmask) with no re-arm must post again; the expiry the
 * filter dropped as stale must not stay latched. No arm between the steps. */
static void test_level_unmask_reposts(void **state)
{
	struct rig r;
	bool exp;
	(void)state;
	rig_up(&r, VSCHED_TIMER_LEVEL, VSCHED_CANCEL_CANCEL, false);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 2000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 1); /* line rose */
	/* The guest masks before entry: the pending one is stale. */
	assert_int_equal(vsched_timer_set_ctl(r.t, true, true), 0);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 0);
	assert_int_equal(tstats(r.t).stale_cancelled, 1);
	assert_int_equal(vsched_timer_get(r.t, NULL, &exp), 0);
	assert_false(exp); /* the line is low: nothing latched */
	/* Unmask: CVAL is still in the past, the line rises: posted. */
	assert_int_equal(vsched_timer_set_ctl(r.t, true, false), 0);
	assert_int_equal(tstats(r.t).fired, 2);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);
	/* Still asserted: unmasking again is no edge, nothing more posted. */
	assert_int_equal(vsched_timer_set_ctl(r.t, true, false), 0);
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	assert_int_equal(tstats(r.t).fired, 2);
	vsched_vm_destroy(r.vm);
}

/* Same through ENABLE, after a delivery: disable, then enable with CVAL in
 * the past posts (rising edge via enable); a vCPU halted on the timer is
 * woken by it. */
static int wait_enable(struct fake_host *h, uint32_t *w, uint32_t e, uint64_t dl)
{
	(void)w, (void)e, (void)dl;
	struct rig *r = h->test;
	/* While the vCPU sleeps, the (emulated) guest enables the timer. */
	if (h->waits == 1) {
		assert_int_equal(vsched_timer_set_ctl(r->t, true, false), 0);
		return 0;
	}
	h->now = dl;
	return -110;
}

static void test_level_enable_reposts(void **state)
{
	struct rig r;
	(void)state;
	rig_up(&r, VSCHED_TIMER_LEVEL, VSCHED_CANCEL_CANCEL, false);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 1500;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 1);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);
	/* The guest disables the timer and halts. */
	assert_int_equal(vsched_timer_set_ctl(r.t, false, false), 0);
	uint64_t next;
	assert_int_equal(vsched_vcpu_next_timer(r.v, &next), 0);
	assert_int_equal(next, UINT64_MAX); /* disabled: cannot fire */
	r.h.test = &r;
	r.h.on_wait = wait_enable;
	assert_int_equal(vsched_vcpu_block(r.v, 1000000), VSCHED_WAKE_REQUEST);
	assert_int_equal(tstats(r.t).fired, 2);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 2);
	vsched_vm_destroy(r.vm);
}

/* --- a re-arm while the clock moves (test/model/timer.pml) ---
 * The clock is the test's: it changes only inside a read, so its value when
 * the arm's RMW replaces the word is known exactly. */

/* The clock jumps to after_rmw_now at the first read that sees the timer
 * armed at after_rmw_deadline: right after the arm's RMW. */
static uint64_t after_rmw_deadline, after_rmw_now;
static void clock_after_rmw(struct fake_host *h)
{
	struct rig *r = h->test;
	uint64_t d;
	assert_int_equal(vsched_timer_get(r->t, &d, NULL), 0);
	if (d == after_rmw_deadline)
		h->now = after_rmw_now;
}

/* Time passes the old deadline (1000) right after the RMW replaced it
 * (at 900) with 3000: the old deadline never came due while it was armed,
 * so nothing may be posted for it. The arm used to judge it on the clock
 * it read after its RMW (1100) and posted it: a post without a rise. */

static void test_rearm_old_deadline_due_after_rmw(void **state)
{
	static const unsigned sem[] = { VSCHED_TIMER_ONESHOT, VSCHED_TIMER_LEVEL,
					VSCHED_TIMER_DECREMENTER };
	(void)state;
	for (unsigned i = 0; i < 3; i++) {
		struct rig r;
		rig_up(&r, sem[i], VSCHED_CANCEL_KEEP, false);
		assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
		r.h.now = 900;
		r.h.test = &r;
		after_rmw_deadline = 3000;
		after_rmw_now = 1100;
		r.h.on_clock = clock_after_rmw;
		assert_int_equal(vsched_timer_arm(r.t, 3000), 0);
		r.h.on_clock = NULL;
		/* Only LEVEL reads the clock after its RMW. */
		assert_int_equal(r.h.now, sem[i] == VSCHED_TIMER_LEVEL ? 1100 : 900);
		r.h.now = 1100;
		assert_int_equal(tstats(r.t).fired, 0);
		assert_int_equal(vsched_service(r.v), 0);
		r.h.now = 3000;
		assert_int_equal(vsched_vcpu_fire_timers(r.v), 1);
		vsched_vm_destroy(r.vm);
	}
}

/* LEVEL, CVAL 1000 due and unposted at 1500; the guest moves CVAL to 2000.
 * The arm's clock read returns 1500, but before the arm goes on the service
 * reads 2100 and fires 1000 (posted: the line rose at 1000). The arm's RMW
 * comes after that fire, so the clock is past 2000 when it lands: the line
 * never falls, and no second post is allowed. The arm used to judge the
 * new CVAL on that stale 1500 (a fall), clear EXPIRED and post again. */
static unsigned level_reads;
static uint64_t preempted_now(void *ctx)
{
	struct fake_host *h = ctx;
	struct rig *r = h->test;
	uint64_t sampled = h->now;
	if (r && level_reads++ == 0) {
		h->test = NULL; /* the service's own read is plain */
		h->now = 2100;
		assert_int_equal(vsched_vcpu_fire_timers(r->v), 1);
	}
	return sampled;
}

static void test_level_rearm_stale_clock_no_second_post(void **state)
{
	struct rig r;
	bool exp;
	(void)state;
	rig_up_clock(&r, VSCHED_TIMER_LEVEL, VSCHED_CANCEL_KEEP, false, preempted_now);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 1500; /* due, nobody fired it yet */
	level_reads = 0;
	r.h.test = &r;
	assert_int_equal(vsched_timer_arm(r.t, 2000), 0);
	assert_null(r.h.test); /* the service did run inside the arm */
	assert_int_equal(tstats(r.t).fired, 1);
	assert_int_equal(vsched_timer_get(r.t, NULL, &exp), 0);
	assert_true(exp); /* still the one high period, posted */
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	assert_int_equal(vsched_service(r.v), 1);
	vsched_vm_destroy(r.vm);
}

/* The legal double post: CVAL 1000 posted; the guest moves it to 2000 at
 * 1500 (the line falls), and the clock reaches 2100 right after the RMW,
 * still inside the arm (the line rises again): a second post, by the arm. */
static void test_level_rearm_fall_and_rise_inside_arm(void **state)
{
	struct rig r;
	bool exp;
	(void)state;
	rig_up(&r, VSCHED_TIMER_LEVEL, VSCHED_CANCEL_KEEP, false);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 1500;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 1);
	r.h.test = &r;
	after_rmw_deadline = 2000;
	after_rmw_now = 2100;
	r.h.on_clock = clock_after_rmw;
	assert_int_equal(vsched_timer_arm(r.t, 2000), 0);
	r.h.on_clock = NULL;
	assert_int_equal(tstats(r.t).fired, 2);
	assert_int_equal(vsched_timer_get(r.t, NULL, &exp), 0);
	assert_true(exp);
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	vsched_vm_destroy(r.vm);
}

/* --- the timer service on the real clock --- */

static _Atomic uint64_t kicked_at;
static void kick_now(struct vsched_vcpu *v, void *c)
{
	(void)v, (void)c;
	atomic_store(&kicked_at, mono());
}

static void *run_service(void *arg)
{
	vsched_timer_service_run(arg);
	return NULL;
}

static void test_timer_service(void **state)
{
	struct vsched_host_ops ops = { .kick = kick_now };
	struct vsched_timer_desc d = { .size = sizeof(d), .kind = K_TIMER };
	struct vsched_timer *t;
	struct vsched_timer_service *svc, *dup;
	pthread_t th;
	(void)state;
	struct vsched_vm *vm = make_vm(&ops, 0);
	declare(vm, K_TIMER, "timer", 1, 0, on_timer, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	assert_int_equal(vsched_timer_create(v, &d, &t), 0);
	assert_int_equal(vsched_timer_service_create(vm, &svc), 0);
	assert_int_equal(vsched_timer_service_create(vm, &dup), VSCHED_EEXIST);

	/* As an fd in an event loop: the vCPU is "in the guest"; the service
	 * kicks it at the deadline, not before. */
	assert_int_equal(vsched_vcpu_enter(v), 0);
	uint64_t dl = mono() + 10000000;
	assert_int_equal(vsched_timer_arm(t, dl), 0);
	struct pollfd pfd = { .fd = vsched_timer_service_fd(svc), .events = POLLIN };
	while (atomic_load(&kicked_at) == 0) {
		assert_true(poll(&pfd, 1, 2000) >= 0);
		vsched_timer_service_dispatch(svc);
	}
	assert_true(atomic_load(&kicked_at) >= dl);
	assert_int_equal(vsched_vcpu_exit(v), 0);
	delivered = 0;
	assert_int_equal(vsched_service(v), 1);
	assert_int_equal(delivered, 1);

	/* As a thread: an earlier deadline armed while it sleeps. */
	pthread_create(&th, NULL, run_service, svc);
	atomic_store(&kicked_at, 0);
	assert_int_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(vsched_timer_arm(t, mono() + 3000000000ull), 0);
	dl = mono() + 5000000;
	assert_int_equal(vsched_timer_arm(t, dl), 0);
	while (atomic_load(&kicked_at) == 0)
		usleep(1000);
	assert_true(atomic_load(&kicked_at) >= dl);
	assert_int_equal(vsched_timer_service_stop(svc), 0);
	pthread_join(th, NULL);
	vsched_vcpu_exit(v);
	assert_int_equal(vsched_timer_service_destroy(svc), 0);
	vsched_vm_destroy(vm);
}


/* Issue 14 (2): a LEVEL timer masked or disabled with CVAL in the past (an
 * idle arm64 guest) must not keep the service's fd readable. Counts the
 * dispatches the fd asks for over 50 ms of real time: a spinning service
 * needs thousands, a correct one none. */
static unsigned service_wakeups(struct vsched_timer_service *svc, uint64_t ns)
{
	struct pollfd pfd = { .fd = vsched_timer_service_fd(svc), .events = POLLIN };
	uint64_t end = mono() + ns;
	unsigned n = 0;
	for (uint64_t now = mono(); now < end; now = mono()) {
		int left = (int)((end - now) / 1000000) + 1;
		int rc = poll(&pfd, 1, left);
		assert_true(rc >= 0);
		if (rc > 0) {
			n++;
			vsched_timer_service_dispatch(svc);
		}
	}
	return n;
}

static void test_service_idle_level_no_spin(void **state)
{
	struct vsched_host_ops ops = { .kick = kick_now };
	struct vsched_timer_desc d = { .size = sizeof(d), .kind = K_TIMER,
				       .semantics = VSCHED_TIMER_LEVEL };
	struct vsched_timer *t;
	struct vsched_timer_service *svc;
	uint64_t next;
	(void)state;
	struct vsched_vm *vm = make_vm(&ops, 0);
	declare(vm, K_TIMER, "timer", 1, 0, on_timer, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	assert_int_equal(vsched_timer_create(v, &d, &t), 0);
	assert_int_equal(vsched_timer_service_create(vm, &svc), 0);

	for (int mode = 0; mode < 2; mode++) {
		/* masked, then disabled; CVAL 1 ms in the past */
		assert_int_equal(vsched_timer_set_ctl(t, mode == 0, mode == 0), 0);
		assert_int_equal(vsched_timer_arm(t, mono() - 1000000), 0);
		assert_int_equal(tstats(t).fired, 0);
		assert_int_equal(vsched_vcpu_next_timer(v, &next), 0);
		assert_int_equal(next, UINT64_MAX);
		vsched_timer_service_dispatch(svc);
		unsigned n = service_wakeups(svc, 50000000);
		if (n > 2)
			print_error("%s: %u service wakeups in 50 ms\n",
				    mode ? "disabled" : "masked", n);
		assert_true(n <= 2);
		assert_int_equal(tstats(t).fired, 0);
	}
	/* Unmasked and enabled: the line rises, posted once; still asserted
	 * afterwards, nothing more for the service to do. */
	assert_int_equal(vsched_timer_set_ctl(t, true, false), 0);
	assert_int_equal(tstats(t).fired, 1);
	vsched_timer_service_dispatch(svc);
	assert_true(service_wakeups(svc, 20000000) <= 2);
	assert_int_equal(tstats(t).fired, 1);
	assert_int_equal(vsched_timer_service_destroy(svc), 0);
	vsched_vm_destroy(vm);
}

/* The VM's clock need not be CLOCK_MONOTONIC: here it started 1 ms ago.
 * The service's timerfd is converted into the kernel's clock, so a timer
 * due 30 ms from now in the VM's clock fires once, about then, and the
 * service does not spin on a deadline that is long past for the kernel. */
static uint64_t vm_clock_base;
static uint64_t young_clock(void *ctx)
{
	(void)ctx;
	return mono() - vm_clock_base + 1000000;
}

static void test_service_injected_clock(void **state)
{
	struct vsched_host_ops ops = { .kick = kick_now, .now_ns = young_clock };
	struct vsched_timer_desc d = { .size = sizeof(d), .kind = K_TIMER };
	struct vsched_timer *t;
	struct vsched_timer_service *svc;
	(void)state;
	vm_clock_base = mono();
	struct vsched_vm *vm = make_vm(&ops, 0);
	declare(vm, K_TIMER, "timer", 1, 0, on_timer, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	assert_int_equal(vsched_timer_create(v, &d, &t), 0);
	assert_int_equal(vsched_timer_service_create(vm, &svc), 0);
	uint64_t due = vsched_now_ns(vm) + 200000000;
	assert_int_equal(vsched_timer_arm(t, due), 0);
	/* 20 ms well before it is due: a spinning service needs hundreds of
	 * dispatches here, a correct one none (one if this thread was held
	 * off the CPU past the deadline). */
	unsigned n = service_wakeups(svc, 20000000);
	if (n > 2)
		print_error("%u service wakeups in 20 ms before the deadline\n", n);
	assert_true(n <= 2);
	/* Then it fires, once, and never before the VM's clock says so. */
	while (tstats(t).fired == 0)
		n += service_wakeups(svc, 10000000);
	assert_true(vsched_now_ns(vm) >= due);
	assert_true(n <= 4);
	assert_int_equal(tstats(t).fired, 1);
	assert_int_equal(vsched_timer_service_destroy(svc), 0);
	vsched_vm_destroy(vm);
}

/* Risk (issue 14): vsched_vm_destroy() with the service still attached
 * destroys it (fds closed, memory freed: LeakSanitizer sees the rest). */
static void test_service_dies_with_vm(void **state)
{
	struct vsched_timer_desc d = { .size = sizeof(d), .kind = K_TIMER };
	struct vsched_timer *t;
	struct vsched_timer_service *svc;
	(void)state;
	unsigned before = open_fds();
	struct vsched_vm *vm = make_vm(NULL, 0);
	declare(vm, K_TIMER, "timer", 1, 0, on_timer, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	assert_int_equal(vsched_timer_create(v, &d, &t), 0);
	assert_int_equal(vsched_timer_service_create(vm, &svc), 0);
	assert_int_equal(vsched_timer_arm(t, mono() + 1000000000ull), 0);
	assert_true(open_fds() > before);
	assert_int_equal(vsched_vm_destroy(vm), 0);
	assert_int_equal(open_fds(), before);
}

/* Risk (issue 14): a timer_read result >= 2^63 (a far-future or garbage
 * guest deadline) must not wrap into a past deadline in vsched's view. */
static void test_timer_read_huge_deadline(void **state)
{
	struct rig r;
	uint64_t d;
	(void)state;
	rig_up(&r, VSCHED_TIMER_DECREMENTER, VSCHED_CANCEL_CANCEL, true);
	assert_int_equal(vsched_timer_arm(r.t, 1000), 0);
	r.h.now = 1000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 1);
	guest_deadline = (UINT64_C(1) << 63) + 1500; /* wraps to 3000 if << 1 */
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 0); /* far future: stale */
	assert_int_equal(vsched_timer_get(r.t, &d, NULL), 0);
	assert_true(d > UINT64_C(1) << 60);
	r.h.now = 1000000;
	assert_int_equal(vsched_vcpu_fire_timers(r.v), 0);
	assert_int_equal(tstats(r.t).fired, 1);
	vsched_vm_destroy(r.vm);
}

/* Review (issue 18): an arm wakes only a BLOCKED vCPU, so a timer armed
 * while its vCPU polls must be found by the poll loop, which looks at the
 * timers again every VSCHED_FD_CHECK_NS: before, the window ran to its end
 * (1 ms here) with the expiry due after 10 us. Fake clock: 10 ns a read. */
static struct vsched_timer *poll_timer;
static bool arm_in_poll;
static void arm_while_polling(struct fake_host *h)
{
	h->now += 10;
	if (arm_in_poll && vsched_vcpu_mode(h->vcpu) == VSCHED_MODE_POLLING) {
		arm_in_poll = false; /* the arm reads this clock too */
		assert_int_equal(vsched_timer_arm(poll_timer, h->now + 10000), 0);
	}
}

/* And one armed, seen by the poll loop, then disarmed before it is due:
 * the window goes on to the caller's deadline (it used to end at the
 * disarmed deadline and sleep the rest). */
static uint64_t disarm_at;
static void arm_then_disarm(struct fake_host *h)
{
	arm_while_polling(h);
	if (disarm_at && h->now >= disarm_at) {
		disarm_at = 0;
		assert_int_equal(vsched_timer_disarm(poll_timer), 0);
	}
}

static void test_timer_armed_while_polling(void **state)
{
	struct vsched_poll_params pp;
	struct rig r;
	(void)state;
	rig_up(&r, VSCHED_TIMER_ONESHOT, VSCHED_CANCEL_CANCEL, false);
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 1000000, &pp), 0);
	assert_int_equal(vsched_vcpu_set_poll(r.v, &pp), 0);
	r.h.on_clock = arm_while_polling; /* a sleep: to its deadline (fake_wait) */
	poll_timer = r.t;
	arm_in_poll = true;
	uint64_t t0 = r.h.now;
	assert_int_equal(vsched_vcpu_block(r.v, t0 + 100000000), VSCHED_WAKE_REQUEST);
	assert_false(arm_in_poll);
	/* Ended by the poll loop, within one look of the deadline, not asleep. */
	assert_true(r.h.now < t0 + 10000 + VSCHED_FD_CHECK_NS + 1000);
	assert_int_equal(r.h.waits, 0);
	assert_int_equal(vsched_service(r.v), 1);
	assert_int_equal(delivered, 1);

	struct vsched_block_result res = { .size = sizeof(res) };
	r.h.on_clock = arm_then_disarm;
	arm_in_poll = true;
	t0 = r.h.now;
	disarm_at = t0 + VSCHED_FD_CHECK_NS + 1000; /* after the loop's look */
	assert_int_equal(vsched_vcpu_block_ex(r.v, t0 + 200000, &res),
			 VSCHED_WAKE_DEADLINE);
	assert_int_equal(disarm_at, 0);
	assert_int_equal(r.h.waits, 0);
	/* Polled to the caller's deadline: not asleep, and no poll win
	 * (issue 23: the deadline was known). */
	assert_false(res.poll_won);
	assert_true(res.poll_ns > 0);
	assert_true(r.h.now >= t0 + 200000);
	assert_int_equal(vsched_service(r.v), 0);
	vsched_vm_destroy(r.vm);
}

static void test_timer_bad_input(void **state)
{
	struct rig r;
	struct vsched_timer *t2;
	struct vsched_timer_desc d = { .size = sizeof(d), .kind = K_OTHER };
	struct vsched_timer_stats s;
	(void)state;
	rig_up(&r, VSCHED_TIMER_ONESHOT, VSCHED_CANCEL_KEEP, false);
	vsched_post(r.v, K_OTHER);
	assert_int_equal(vsched_timer_create(NULL, &d, &t2), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_create(r.v, NULL, &t2), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_create(r.v, &d, NULL), VSCHED_EINVAL);
	d.size = 1;
	assert_int_equal(vsched_timer_create(r.v, &d, &t2), VSCHED_EINVAL);
	d.size = sizeof(d);
	d.semantics = 9;
	assert_int_equal(vsched_timer_create(r.v, &d, &t2), VSCHED_EINVAL);
	d.semantics = 0;
	d.cancel = 9;
	assert_int_equal(vsched_timer_create(r.v, &d, &t2), VSCHED_EINVAL);
	d.cancel = 0;
	d.kind = 40;
	assert_int_equal(vsched_timer_create(r.v, &d, &t2), VSCHED_ERANGE);
	d.kind = K_TIMER;
	assert_int_equal(vsched_timer_create(r.v, &d, &t2), VSCHED_EEXIST);
	assert_int_equal(vsched_timer_arm(NULL, 1), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_arm(r.t, UINT64_MAX), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_arm(r.t, VSCHED_TIMER_DEADLINE_MAX + 1), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_arm(r.t, VSCHED_TIMER_DEADLINE_MAX), 0);
	assert_int_equal(vsched_timer_disarm(r.t), 0);
	assert_int_equal(vsched_timer_disarm(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_set_ctl(NULL, true, false), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_set_ctl(r.t, true, false), VSCHED_EINVAL); /* not LEVEL */
	assert_int_equal(vsched_timer_get(NULL, NULL, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_report_spurious(NULL, 1), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_read_stats(NULL, &s), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_read_stats(r.t, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_fire_timers(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_next_timer(NULL, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_service_create(NULL, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_service_fd(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_service_dispatch(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_service_run(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_service_stop(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_timer_service_destroy(NULL), VSCHED_EINVAL);
	/* Nothing posted before was lost. */
	assert_int_equal(vsched_service(r.v), 1);
	vsched_vcpu_destroy(r.v);
	assert_int_equal(vsched_timer_arm(r.t, 5), VSCHED_EDESTROYED);
	vsched_vm_destroy(r.vm);
}

/* The cancellation policies' names: every policy's round trip, the
 * command lines' spellings, refusals, and the count is where
 * vsched_timer_create() starts refusing. */
static void test_cancel_policy_names(void **state)
{
	struct rig r;
	struct vsched_timer *t2;
	struct vsched_timer_desc d = { .size = sizeof(d), .kind = K_OTHER };
	unsigned n = 0;
	(void)state;

	rig_up(&r, VSCHED_TIMER_ONESHOT, VSCHED_CANCEL_KEEP, false);
	for (unsigned i = 0; i < VSCHED_CANCEL_NPOLICIES; i++) {
		const char *name = vsched_cancel_policy_name(i);
		assert_non_null(name);
		assert_true(name[0] != '\0');
		assert_int_equal(vsched_cancel_policy_parse(name), (int)i);
	}
	while (vsched_cancel_policy_name(n))
		n++;
	assert_int_equal(n, VSCHED_CANCEL_NPOLICIES);
	/* The spellings vsched-vmm --timer-cancel and the timer bench use. */
	assert_int_equal(vsched_cancel_policy_parse("keep"), VSCHED_CANCEL_KEEP);
	assert_int_equal(vsched_cancel_policy_parse("cancel"), VSCHED_CANCEL_CANCEL);
	assert_int_equal(vsched_cancel_policy_parse("adaptive"), VSCHED_CANCEL_ADAPTIVE);

	assert_null(vsched_cancel_policy_name(VSCHED_CANCEL_NPOLICIES));
	assert_null(vsched_cancel_policy_name(UINT_MAX));
	assert_int_equal(vsched_cancel_policy_parse(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_cancel_policy_parse(""), VSCHED_EINVAL);
	assert_int_equal(vsched_cancel_policy_parse("Keep"), VSCHED_EINVAL);
	assert_int_equal(vsched_cancel_policy_parse("none"), VSCHED_EINVAL);
	/* The count is the first number vsched_timer_create() refuses. */
	d.cancel = VSCHED_CANCEL_NPOLICIES;
	assert_int_equal(vsched_timer_create(r.v, &d, &t2), VSCHED_EINVAL);
	d.cancel = VSCHED_CANCEL_NPOLICIES - 1;
	assert_int_equal(vsched_timer_create(r.v, &d, &t2), 0);
	vsched_vcpu_destroy(r.v);
	vsched_vm_destroy(r.vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fires_at_deadline_not_before),
		cmocka_unit_test(test_disarm_and_past_deadline),
		cmocka_unit_test(test_rearm_after_unposted_expiry),
		cmocka_unit_test(test_blocked_vcpu_wakes_at_timer),
		cmocka_unit_test(test_cancel_policies_nested),
		cmocka_unit_test(test_adaptive_switches),
		cmocka_unit_test(test_level_semantics),
		cmocka_unit_test(test_level_unmask_reposts),
		cmocka_unit_test(test_level_enable_reposts),
		cmocka_unit_test(test_rearm_old_deadline_due_after_rmw),
		cmocka_unit_test(test_level_rearm_stale_clock_no_second_post),
		cmocka_unit_test(test_level_rearm_fall_and_rise_inside_arm),
		cmocka_unit_test(test_timer_service),
		cmocka_unit_test(test_service_idle_level_no_spin),
		cmocka_unit_test(test_service_injected_clock),
		cmocka_unit_test(test_service_dies_with_vm),
		cmocka_unit_test(test_timer_read_huge_deadline),
		cmocka_unit_test(test_timer_armed_while_polling),
		cmocka_unit_test(test_timer_bad_input),
		cmocka_unit_test(test_cancel_policy_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
