/* SPDX-License-Identifier: MIT */
/* The polling-policy layer (lib/poll.c) and how block.c's poll loop and
 * sleeper.c consume its window, under extreme parameters, injected clocks
 * and policy changes from other threads: an adversarial review (session
 * "policyrev"). A test headed DEFECT fails before the fix its comment
 * names (a diff in the review's report) and passes after; the others pin
 * behaviour found sound, against the mutant they name. Every wait is
 * bounded (a guard post counted in clock reads, or alarm()); no test
 * asserts how long anything took. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

enum { K_REQ = 0 };
enum { MS = 1000000 };

/* ------------------------------------------------------------------ */
/* The host: a scripted clock (`step` ns a read, `step_back` ns back a
 * read when set), a guard that posts at read `guard_at` (ends a poll that
 * would run on forever: the test then fails on `guarded`), and a wait
 * that a post ends at once (a block that went to sleep returns
 * VSCHED_WAKE_REQUEST after one wait). */
static struct fake_host H;
static uint64_t reads, guard_at, step, step_back, gap_at_read, gap_ns, post_at_read;
static bool guarded;

static void clock_read(struct fake_host *h)
{
	reads++;
	if (step_back)
		h->now -= step_back;
	else
		h->now += step;
	if (gap_at_read && reads == gap_at_read)
		h->now += gap_ns;
	if (post_at_read && reads == post_at_read)
		assert_int_equal(vsched_post(h->vcpu, K_REQ), 0);
	if (guard_at && reads == guard_at) {
		guarded = true;
		assert_int_equal(vsched_post(h->vcpu, K_REQ), 0);
	}
}

static int post_wait(struct fake_host *h, uint32_t *word, uint32_t expected, uint64_t dl)
{
	(void)word, (void)expected, (void)dl;
	assert_int_equal(vsched_post(h->vcpu, K_REQ), 0);
	return 0;
}

static struct vsched_host_ops OPS;

static struct vsched_vcpu *rig(struct vsched_vm **vm, const struct vsched_poll_params *pp)
{
	memset(&H, 0, sizeof(H));
	H.now = 5000ull * 1000000000ull;
	H.on_clock = clock_read;
	H.on_wait = post_wait;
	reads = guard_at = step_back = gap_at_read = gap_ns = post_at_read = 0;
	step = 100;
	guarded = false;
	OPS = fake_ops(&H);
	H.vcpu = vm_req_vcpu(&OPS, pp, K_REQ, vm);
	return H.vcpu;
}

static int block_once(struct vsched_vcpu *v, uint64_t deadline, struct vsched_block_result *res)
{
	int rc;

	reads = 0;
	memset(res, 0, sizeof(*res));
	res->size = sizeof(*res);
	rc = vsched_vcpu_block_ex(v, deadline, res);
	(void)vsched_service(v);
	gap_at_read = post_at_read = 0;
	return rc;
}

/* --- 1. DEFECT: a clock that runs backwards polls forever --------------
 *
 * lib/block.c, poll_window(): a read below the last takes the window's end
 * (wend) and the next look (next_look) back by the step, and resets the
 * still-clock count (`still = 0`). An injected clock that keeps running
 * backwards (every read lower than the last: a replay, a clock source
 * gone wrong) moves the window's end back with every read, so `now` never
 * reaches it: the poll never ends. Nor does it ever look again
 * (next_look moves back too): registered fds are never checked and guest
 * timers never fire while it spins; only a post or kick ends it. A clock
 * that stands still is cut after STILL_PASSES reads; one that only goes
 * back is no more progress than one that stands still. Here FIXED 100 us,
 * untimed, the clock 100 ns back a read; a guard posts at the 2,000,000th
 * read. Before the fix: 0 waits, the guard's post ends it. Fix
 * 01-poll-clock-running-back: a read that is not past the last counts as
 * a still pass whether it stands or steps back (the step still moves the
 * window's end back); only a read that moves forward resets the count, so
 * the poll ends after STILL_PASSES reads and the halt sleeps.
 * (test_sleepreview's single 1000 s step back, then forward, still
 * passes.) */
static void test_poll_ends_on_clock_running_backwards(void **state)
{
	struct vsched_poll_params pp;
	struct vsched_block_result res;
	struct vsched_vm *vm;
	(void)state;

	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 100000, &pp), 0);
	struct vsched_vcpu *v = rig(&vm, &pp);
	step_back = 100;
	guard_at = 2000000;
	int rc = block_once(v, VSCHED_DEADLINE_NONE, &res);
	uint64_t n = reads;
	unsigned waits = H.waits;
	vsched_vm_destroy(vm);
	assert_int_equal(rc, VSCHED_WAKE_REQUEST);
	if (guarded)
		fail_msg("a 100 us window on a clock running backwards polled %llu reads "
			 "until the guard's post (never slept)",
			 (unsigned long long)n);
	assert_int_equal(waits, 1);
	assert_false(res.poll_won);
}

/* The same with a timed block and the fds: the deadline is never reached
 * in this clock, so the block sleeps (the fake wait posts). Before the fix
 * the guard ends it. */
static void test_timed_poll_ends_on_clock_running_backwards(void **state)
{
	struct vsched_poll_params pp;
	struct vsched_block_result res;
	struct vsched_vm *vm;
	(void)state;

	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 200000, &pp), 0);
	struct vsched_vcpu *v = rig(&vm, &pp);
	step_back = 1;
	guard_at = 2000000;
	int rc = block_once(v, H.now + 10 * MS, &res);
	bool g = guarded;
	unsigned waits = H.waits;
	vsched_vm_destroy(vm);
	assert_int_equal(rc, VSCHED_WAKE_REQUEST);
	assert_false(g);
	assert_int_equal(waits, 1);
}

/* --- 2. DEFECT: the contention back-off outlives a clock step back ------
 *
 * lib/block.c, choose_window(): a preemption seen in a poll (a gap in its
 * clock reads, VSCHED_CONTENTION_PREEMPT) backs off until ct.until =
 * now + back-off (1 ms at first, at most 64 ms: lib/sleeper.h), in the
 * VM's clock, and every halt with t0 < ct.until is vetoed. When that clock
 * steps back (a migration, a clock set back: poll_window() itself handles
 * such a step), ct.until stays in the old timeline: every halt is vetoed
 * until the clock has caught up the whole step (here 1000 s), not the
 * 1 ms of the back-off. The same after a clock glitch that jumps forward
 * by 2^62 (itself a "gap") and back. Before the fix: after the step back,
 * a halt 100 ms later and another 100 ms after that, the halt is still
 * vetoed. Fix 02-backoff-clock-back: a ct.until farther from t0 than the
 * back-off itself (only a step back gets there) is brought to t0 +
 * back-off, so a back-off lasts at most its length in the new timeline. */
static void backoff_then_step_back(uint64_t jump, uint64_t back)
{
	struct vsched_poll_params pp;
	struct vsched_block_result res;
	struct vsched_vm *vm;

	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 50 * MS, &pp), 0);
	pp.contention = VSCHED_CONTENTION_PREEMPT;
	struct vsched_vcpu *v = rig(&vm, &pp);

	/* A poll that wins: polling is on. */
	post_at_read = 50;
	assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
	assert_true(res.poll_won);
	/* A poll preempted at its 5th read: the back-off starts. */
	gap_at_read = 5;
	gap_ns = jump;
	assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
	assert_false(res.poll_won);
	/* Inside it: vetoed (sound). */
	if (!back) {
		assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
		assert_true(res.vetoed);
	}
	/* The clock steps back, then runs on for 100 ms, a halt (vetoed or
	 * not: how much of the back-off had run out cannot be known), and
	 * 100 ms more: far past any back-off (CONTEND_MAX_NS is 64 ms; this
	 * one is 1 ms). */
	H.now -= back;
	H.now += 100 * MS;
	assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
	H.now += 100 * MS;
	post_at_read = 50;
	assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
	bool vetoed = res.vetoed, won = res.poll_won;
	vsched_vm_destroy(vm);
	if (vetoed)
		fail_msg("100 ms after a 1 ms back-off, the clock having stepped back %llu ns, "
			 "and two halts 100 ms apart, polling is still vetoed",
			 (unsigned long long)back);
	assert_true(won);
}

static void test_backoff_sound_without_step(void **state)
{
	(void)state;
	backoff_then_step_back(1000000, 0);
}

static void test_backoff_after_clock_steps_back(void **state)
{
	(void)state;
	backoff_then_step_back(1000000, 1000ull * 1000000000ull);
}

static void test_backoff_after_clock_glitch_forward_and_back(void **state)
{
	(void)state;
	backoff_then_step_back(UINT64_C(1) << 62, UINT64_C(1) << 62);
}

/* ------------------------------------------------------------------ */
/* Sound: pinned. */

/* The pure policies under every extreme value the validation accepts
 * (UINT64_MAX/2, UINT32_MAX, 0, 1 for each field, decay_shift 0..15,
 * cpu_budget_pct 0..10000), on halts of 0, 1, the bucket edges and
 * UINT64_MAX, valid and not, and with window_ns arguments of 0 and
 * UINT64_MAX: every update returns 0 and no window exceeds max_ns
 * (a UBSan/ASan build of lib/poll.c ran the same sweep, randomised, with no
 * report). Mutants: window_learnt() without its cap (KVM's grown window
 * and grow_start_ns above max_ns are > max_ns); adaptive_choose_budget()
 * returning the incumbent's window uncapped. */
static unsigned lcg;
static unsigned R(unsigned n)
{
	lcg = lcg * 1103515245u + 12345u;
	return (lcg >> 8) % n;
}

static void test_extreme_params_bounded(void **state)
{
	static const uint64_t v64[] = { 0, 1, 511, 512, 200000, UINT64_C(1) << 21,
					UINT64_C(1) << 33, UINT64_MAX / 2, UINT64_MAX };
	static const unsigned v32[] = { 0, 1, 2, 100, UINT32_MAX };
	static const uint64_t halts[] = { 0, 1, 300, 600, 5000, 20000, 150000, 300000,
					  UINT64_C(1) << 22, UINT64_MAX / 2, UINT64_MAX };
	(void)state;
	lcg = 12345;

	for (unsigned policy = 0; policy < VSCHED_POLL_NPOLICIES; policy++)
		for (unsigned mi = 0; mi < sizeof(v64) / sizeof(v64[0]); mi++)
			for (unsigned k = 0; k < 40; k++) {
				struct vsched_poll_params p;
				struct vsched_poll_state s;
				assert_int_equal(vsched_poll_defaults(policy, v64[mi], &p), 0);
				p.grow = v32[R(5)];
				p.shrink = v32[R(5)];
				p.grow_start_ns = v64[R(9)];
				p.wake_cost_ns = v64[R(9)];
				p.sleep_cpu_ns = v64[R(9)];
				p.latency_weight = k & 1 ? v32[R(5)] : 0;
				p.decay_shift = R(16);
				p.cpu_budget_pct = (unsigned[]){ 0, 1, 99, 100, 101, 10000 }[R(6)];
				assert_int_equal(vsched_poll_init(&p, &s), 0);
				for (unsigned h = 0; h < 120; h++) {
					uint64_t w = vsched_poll_window(&p, &s);
					assert_true(w <= p.max_ns);
					uint64_t arg = R(8) ? w : R(2) ? 0 : UINT64_MAX;
					assert_int_equal(vsched_poll_update(&p, &s, arg,
									    halts[R(11)], R(6) != 0),
							 0);
				}
			}
}

/* The stateless API fed garbage: NULLs, sizes out of range, a size past
 * ours with a non-zero tail, a zeroed (never initialised) state, a state
 * initialised under FIXED and used with ADAPTIVE, a state of all-ones:
 * EINVAL or 0 as documented, windows within max_ns. Mutants: a
 * vsched__poll_params_ok() that skips the size check or the tail check. */
static void test_stateless_garbage(void **state)
{
	struct vsched_poll_params p, q;
	struct vsched_poll_state s;
	unsigned char big[sizeof(p) + 16];
	(void)state;

	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &p), 0);
	assert_int_equal(vsched_poll_init(NULL, &s), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_init(&p, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_window(NULL, &s), 0);
	assert_int_equal(vsched_poll_window(&p, NULL), 0);
	assert_int_equal(vsched_poll_update(NULL, &s, 0, 1000, true), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_update(&p, NULL, 0, 1000, true), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_NPOLICIES, 1, &q), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_defaults(0, 1, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_defaults_waiter(VSCHED_POLL_NPOLICIES, &q), VSCHED_EINVAL);

	q = p;
	q.size = 0;
	assert_int_equal(vsched_poll_init(&q, &s), VSCHED_EINVAL);
	q.size = 4097;
	assert_int_equal(vsched_poll_init(&q, &s), VSCHED_EINVAL);
	q.size = (size_t)-1;
	assert_int_equal(vsched_poll_window(&q, &s), 0);
	q = p;
	q.policy = VSCHED_POLL_NPOLICIES;
	assert_int_equal(vsched_poll_init(&q, &s), VSCHED_EINVAL);
	q = p;
	q.decay_shift = 16;
	assert_int_equal(vsched_poll_update(&q, &s, 0, 1, true), VSCHED_EINVAL);
	q = p;
	q.spin_pct = 101;
	assert_int_equal(vsched_poll_init(&q, &s), VSCHED_EINVAL);
	q = p;
	q.cpu_budget_pct = 10001;
	assert_int_equal(vsched_poll_init(&q, &s), VSCHED_EINVAL);
	q = p;
	q.contention = VSCHED_CONTENTION_SAMPLED + 1;
	assert_int_equal(vsched_poll_init(&q, &s), VSCHED_EINVAL);
	/* Longer than ours: a zero tail is accepted, a non-zero one is not. */
	memset(big, 0, sizeof(big));
	q = p;
	q.size = sizeof(big);
	memcpy(big, &q, sizeof(q));
	assert_int_equal(vsched_poll_init((const void *)big, &s), 0);
	big[sizeof(p) + 3] = 1;
	assert_int_equal(vsched_poll_init((const void *)big, &s), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_window((const void *)big, &s), 0);

	/* A zeroed state is an initialised one (KVM and ADAPTIVE start at 0). */
	memset(&s, 0, sizeof(s));
	assert_int_equal(vsched_poll_window(&p, &s), 0);
	assert_int_equal(vsched_poll_update(&p, &s, 0, 1000, true), 0);
	/* FIXED's state (window max_ns) used with a smaller ADAPTIVE. */
	q = p;
	q.policy = VSCHED_POLL_FIXED;
	q.max_ns = UINT64_MAX;
	assert_int_equal(vsched_poll_init(&q, &s), 0);
	assert_true(vsched_poll_window(&p, &s) <= p.max_ns);
	assert_int_equal(vsched_poll_update(&p, &s, UINT64_MAX, 1000, true), 0);
	assert_true(vsched_poll_window(&p, &s) <= p.max_ns);
	/* All ones. */
	memset(&s, 0xff, sizeof(s));
	for (unsigned i = 0; i < 100; i++) {
		assert_true(vsched_poll_window(&p, &s) <= p.max_ns);
		assert_int_equal(vsched_poll_update(&p, &s, UINT64_MAX, UINT64_MAX, i & 1), 0);
	}
	p.latency_weight = UINT32_MAX;
	memset(&s, 0xff, sizeof(s));
	for (unsigned i = 0; i < 100; i++) {
		assert_true(vsched_poll_window(&p, &s) <= p.max_ns);
		assert_int_equal(vsched_poll_update(&p, &s, 0, i * 1000, true), 0);
	}
}

/* A timed block whose deadline has passed does not poll (first_look()'s
 * check-once), and a poll window longer than the time to the deadline ends
 * at the deadline (the injected clock: no short_wait()). Mutants:
 * first_look() without its deadline check (the 10 ms window is polled);
 * poll_window() with end = wend. */
static void test_window_against_deadline(void **state)
{
	struct vsched_poll_params pp;
	struct vsched_block_result res;
	struct vsched_vm *vm;
	(void)state;

	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 10 * MS, &pp), 0);
	struct vsched_vcpu *v = rig(&vm, &pp);
	guard_at = 1000000;
	assert_int_equal(block_once(v, H.now - 1, &res), VSCHED_WAKE_DEADLINE);
	assert_int_equal(res.poll_ns, 0);
	assert_false(res.poll_won);
	assert_true(reads < 8);
	assert_int_equal(H.waits, 0);

	uint64_t t0 = H.now;
	assert_int_equal(block_once(v, t0 + 20000, &res), VSCHED_WAKE_DEADLINE);
	assert_false(guarded);
	assert_int_equal(H.waits, 0);
	assert_true(res.poll_ns >= 20000 - 200 && res.poll_ns <= 20000 + 200);
	assert_true(H.now <= t0 + 20000 + 400);
	vsched_vm_destroy(vm);
}

/* An injected clock that stands still inside a window is cut after
 * STILL_PASSES reads and the halt sleeps; one that jumps 2^63 forward
 * mid-poll ends the window at that read, and the policy that learns the
 * 2^63 ns halt (KVM) keeps its window within max_ns. Mutants: no still
 * count (the guard ends the first); a window end taken before the jump
 * and not compared again. */
static void test_clock_still_and_jump(void **state)
{
	struct vsched_poll_params pp;
	struct vsched_block_result res;
	struct vsched_vm *vm;
	(void)state;

	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 100000, &pp), 0);
	struct vsched_vcpu *v = rig(&vm, &pp);
	step = 0;
	guard_at = 2000000;
	assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
	assert_false(guarded);
	assert_int_equal(H.waits, 1);
	vsched_vm_destroy(vm);

	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_KVM, 200000, &pp), 0);
	v = rig(&vm, &pp);
	/* Grow a window first: short halts that sleep (the fake wait posts). */
	for (int i = 0; i < 6; i++)
		assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
	assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
	assert_true(res.window_ns > 0);
	gap_at_read = 3;
	gap_ns = UINT64_C(1) << 63;
	H.now = 1000;
	assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
	assert_true(reads < 16);
	assert_false(res.poll_won);
	assert_int_equal(block_once(v, VSCHED_DEADLINE_NONE, &res), VSCHED_WAKE_REQUEST);
	assert_true(res.window_ns <= 200000);
	vsched_vm_destroy(vm);
}

/* Policies changed from another thread while a vCPU halts and a waiter
 * waits (real clock and futex, timed waits of 100 us, posts from a third
 * thread, kicks): the VM's, the vCPU's own and the waiter's own, every
 * policy, contention on and off, set and cleared;
 * bounded by a count and alarm(). No crash, no hang, every halt returns a
 * wake reason, get_poll reads one whole struct that was set. Mutant: a
 * refresh that reads the VM's pointer outside the read-side section (ASan
 * builds report the use after free). */
static struct vsched_vcpu *race_v;
static struct vsched_vm *race_vm;
static atomic_bool race_stop;
static atomic_uint race_halts, race_bad;

static void *race_blocker(void *a)
{
	(void)a;
	while (!atomic_load(&race_stop)) {
		int rc = vsched_vcpu_block(race_v, vsched_deadline_in(race_vm, 100000));
		if (rc != VSCHED_WAKE_REQUEST && rc != VSCHED_WAKE_DEADLINE)
			atomic_fetch_add(&race_bad, 1);
		(void)vsched_service(race_v);
		atomic_fetch_add(&race_halts, 1);
	}
	return NULL;
}

static void *race_poster(void *a)
{
	(void)a;
	while (!atomic_load(&race_stop)) {
		(void)vsched_post(race_v, K_REQ);
		usleep(50);
	}
	return NULL;
}

static struct vsched_waiter *race_w;
static atomic_bool race_cond;

static bool race_cond_fn(void *a)
{
	(void)a;
	return atomic_exchange(&race_cond, false);
}

static void *race_waiter(void *a)
{
	(void)a;
	while (!atomic_load(&race_stop)) {
		int rc = vsched_waiter_wait(race_w, vsched_deadline_in(race_vm, 100000), NULL);
		if (rc != VSCHED_WAKE_REQUEST && rc != VSCHED_WAKE_DEADLINE)
			atomic_fetch_add(&race_bad, 1);
		atomic_fetch_add(&race_halts, 1);
	}
	return NULL;
}

static void test_set_poll_races_halts(void **state)
{
	pthread_t b, p, wt;
	struct vsched_poll_params pp, got;
	(void)state;

	alarm(60);
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &pp), 0);
	race_v = vm_req_vcpu(NULL, &pp, K_REQ, &race_vm);
	atomic_store(&race_stop, false);
	atomic_store(&race_halts, 0);
	atomic_store(&race_bad, 0);
	assert_int_equal(pthread_create(&b, NULL, race_blocker, NULL), 0);
	assert_int_equal(pthread_create(&p, NULL, race_poster, NULL), 0);
	assert_int_equal(vsched_waiter_create(race_vm, race_cond_fn, NULL, &race_w), 0);
	assert_int_equal(pthread_create(&wt, NULL, race_waiter, NULL), 0);
	for (unsigned i = 0; i < 400; i++) {
		unsigned pol = i % VSCHED_POLL_NPOLICIES;
		assert_int_equal(vsched_poll_defaults(pol, (i % 3) ? 50000 : UINT64_MAX / 2, &pp), 0);
		pp.contention = i % 5 == 0 ? VSCHED_CONTENTION_PREEMPT : VSCHED_CONTENTION_OFF;
		pp.latency_weight = i % 7 == 0 ? 4 : 0;
		if (i % 3 == 2) {
			struct vsched_poll_params wp;
			assert_int_equal(vsched_poll_defaults_waiter(pol, &wp), 0);
			wp.contention = pp.contention;
			assert_int_equal(vsched_waiter_set_poll(race_w, i % 4 ? &wp : NULL), 0);
			atomic_store(&race_cond, true);
			(void)vsched_waiter_kick(race_w);
		}
		if (i % 2)
			assert_int_equal(vsched_vm_set_poll(race_vm, &pp), 0);
		else
			assert_int_equal(vsched_vcpu_set_poll(race_v, i % 4 ? &pp : NULL), 0);
		memset(&got, 0, sizeof(got));
		got.size = sizeof(got);
		assert_int_equal(vsched_vm_get_poll(race_vm, &got), 0);
		assert_true(got.policy < VSCHED_POLL_NPOLICIES);
		assert_true(got.policy != VSCHED_POLL_NONE || got.max_ns == 0);
		usleep(200); /* let halts overlap the changes */
	}
	atomic_store(&race_stop, true);
	pthread_join(p, NULL);
	(void)vsched_post(race_v, K_REQ);
	pthread_join(b, NULL);
	pthread_join(wt, NULL);
	assert_int_equal(vsched_waiter_destroy(race_w), 0);
	alarm(0);
	printf("%u halts and waits under 400 policy changes\n", atomic_load(&race_halts));
	assert_int_equal(atomic_load(&race_bad), 0);
	assert_true(atomic_load(&race_halts) > 0);
	vsched_vm_destroy(race_vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_poll_ends_on_clock_running_backwards),
		cmocka_unit_test(test_timed_poll_ends_on_clock_running_backwards),
		cmocka_unit_test(test_backoff_sound_without_step),
		cmocka_unit_test(test_backoff_after_clock_steps_back),
		cmocka_unit_test(test_backoff_after_clock_glitch_forward_and_back),
		cmocka_unit_test(test_extreme_params_bounded),
		cmocka_unit_test(test_stateless_garbage),
		cmocka_unit_test(test_window_against_deadline),
		cmocka_unit_test(test_clock_still_and_jump),
		cmocka_unit_test(test_set_poll_races_halts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
