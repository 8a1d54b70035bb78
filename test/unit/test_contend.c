/* SPDX-License-Identifier: MIT */
/*
 * The block engine's host-contention back-off (lib/sleeper.h, CONTEND_*).
 * The host's runnable count, sampled at most once per ms of the VM's
 * clock: more runnable tasks than CPUs stops a poll and keeps the next
 * halts from polling until a sample says otherwise. The poller's own
 * preemption (a gap of over 100 us between two of the poll loop's clock
 * reads) ends the poll too, and the sleeper does not poll for a back-off
 * that doubles per preemption; a poll that runs long enough without a gap
 * halves it. Each is asked for through the poll params' `contention`
 * (VSCHED_CONTENTION_PREEMPT: the gap only; VSCHED_CONTENTION_SAMPLED:
 * both), off by default, and turned on and off at run time by the
 * set_poll calls. The host's load is a file of /proc/loadavg's format
 * that the test writes (VSCHED_CONTENTION_SOURCE, the library's test
 * hook: no host op can stand in for a pread), the preemption a fake
 * now_ns that jumps once inside the poll, as a preempted poller sees it:
 * behaviour only, never the machine's load or timing.
 */
#include <stddef.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common.h"

/* The fake /proc/loadavg: `running` runnable tasks now. */
static char load_path[64];
static unsigned ncpus;

static void host_load(unsigned running)
{
	FILE *f = fopen(load_path, "w");
	assert_non_null(f);
	fprintf(f, "3.10 2.05 1.00 %u/345 6789\n", running);
	assert_int_equal(fclose(f), 0);
}

static void host_idle(void)
{
	host_load(ncpus); /* the sampling thread included: none waits */
}

static void host_busy(void)
{
	host_load(ncpus + 1);
}

enum { K_REQ = 0 };
enum { GAP = 1000000, MS = 1000000 };

/* The clock: 100 ns per read; a jump of `gap_ns` at read `gap_at` (counted
 * from the halt's start); a post at read `post_at` (a poll that wins). */
static unsigned reads, gap_at, post_at;
static uint64_t gap_ns;
static uint64_t sleep_ns; /* a sleep lasts this long, then a post ends it */
static uint64_t hook_ns;  /* the blocking hook takes this long */
static unsigned sleeps;

static void clock_read(struct fake_host *h)
{
	h->now += 100;
	reads++;
	if (gap_at && reads == gap_at)
		h->now += gap_ns;
	if (post_at && reads == post_at)
		assert_int_equal(vsched_post(h->vcpu, K_REQ), 0);
}

/* A sleep that a post ends after sleep_ns. */
static int sleep_then_post(struct fake_host *h, uint32_t *w, uint32_t exp,
			   uint64_t dl)
{
	(void)w, (void)exp, (void)dl;
	sleeps++;
	h->now += sleep_ns;
	assert_int_equal(vsched_post(h->vcpu, K_REQ), 0);
	return 0;
}

struct rig {
	struct fake_host h;
	struct vsched_host_ops ops;
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
};

/* The poll params of `policy` with the back-off in `mode`. */
static struct vsched_poll_params params(unsigned policy, uint64_t max_ns,
					unsigned mode)
{
	struct vsched_poll_params pp;

	assert_int_equal(vsched_poll_defaults(policy, max_ns, &pp), 0);
	pp.contention = mode;
	return pp;
}

/* A VM whose policy is `policy` with the back-off in `mode`, one vCPU. */
static void rig_up(struct rig *r, unsigned policy, uint64_t max_ns,
		   unsigned mode)
{
	struct vsched_poll_params pp;

	memset(r, 0, sizeof(*r));
	r->h.now = 1000;
	r->h.on_clock = clock_read;
	r->h.on_wait = sleep_then_post;
	r->ops = fake_ops(&r->h);
	pp = params(policy, max_ns, mode);
	r->v = r->h.vcpu = vm_req_vcpu(&r->ops, &pp, K_REQ, &r->vm);
	host_idle();
	gap_at = post_at = 0;
	gap_ns = GAP;
	sleep_ns = 1000;
	sleeps = 0;
}

/* One halt; the clock's counters restart with it. */
static int halt(struct rig *r, struct vsched_block_result *res)
{
	int rc;

	reads = 0;
	res->size = sizeof(*res);
	rc = vsched_vcpu_block_ex(r->v, VSCHED_DEADLINE_NONE, res);
	assert_int_equal(vsched_service(r->v), 1);
	gap_at = post_at = 0;
	return rc;
}

/* A poll that wins after `n` reads (n * 100 ns of polling), no gap. */
static void expect_poll_wins(struct rig *r, unsigned n)
{
	struct vsched_block_result res;
	unsigned s = sleeps;

	post_at = n;
	assert_int_equal(halt(r, &res), VSCHED_WAKE_REQUEST);
	assert_false(res.vetoed);
	assert_true(res.poll_won);
	assert_int_equal(sleeps, s);
}

/* A halt that the back-off keeps from polling: it sleeps at once. */
static void expect_backed_off(struct rig *r)
{
	struct vsched_block_result res;
	unsigned s = sleeps;

	assert_int_equal(halt(r, &res), VSCHED_WAKE_REQUEST);
	assert_true(res.vetoed);
	assert_int_equal(res.poll_ns, 0);
	assert_false(res.poll_won);
	assert_int_equal(sleeps, s + 1);
}

/* A poll preempted at its 5th read: it stops there and sleeps. */
static void expect_preempted(struct rig *r)
{
	struct vsched_block_result res;
	unsigned s = sleeps;

	gap_at = 5;
	assert_int_equal(halt(r, &res), VSCHED_WAKE_REQUEST);
	assert_false(res.vetoed);
	assert_false(res.poll_won);
	assert_int_equal(sleeps, s + 1);
	/* It ended at the read that saw the gap, far short of the window. */
	assert_true(res.poll_ns >= GAP + hook_ns &&
		    res.poll_ns < GAP + hook_ns + 10 * 100);
}

static void test_preempted_poll_stops_and_backs_off(void **state)
{
	struct rig r;
	(void)state;

	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_PREEMPT);
	expect_poll_wins(&r, 50);
	assert_int_equal(stats_of(r.v).halt_poll_contended, 0);

	expect_preempted(&r);
	struct vsched_vcpu_stats st = stats_of(r.v);
	assert_int_equal(st.halt_poll_contended, 1);
	assert_int_equal(st.halt.halt_poll_vetoed, 0);
	assert_int_equal(st.halt.halt_attempted_poll, 2);

	/* Inside the back-off (1 ms from the gap): no polling, counted. */
	expect_backed_off(&r);
	expect_backed_off(&r);
	st = stats_of(r.v);
	assert_int_equal(st.halt_poll_contended, 3);
	assert_int_equal(st.halt.halt_poll_vetoed, 2);
	assert_int_equal(st.halt.halt_attempted_poll, 2);

	/* After it: the policy's window again. */
	r.h.now += MS;
	expect_poll_wins(&r, 50);
	st = stats_of(r.v);
	assert_int_equal(st.halt_poll_contended, 3);
	assert_int_equal(st.halt.halt_attempted_poll, 3);
	vsched_vm_destroy(r.vm);
}

/* Each preemption in a row doubles the back-off; a poll of 20 us or more
 * without a gap of 100 us halves it, a shorter one (no evidence) leaves
 * it. */
static void test_backoff_doubles_and_halves(void **state)
{
	struct rig r;
	(void)state;

	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_PREEMPT);
	expect_preempted(&r); /* 1 ms */
	r.h.now += MS;
	expect_preempted(&r); /* the probe: 2 ms */
	r.h.now += MS + MS / 2;
	expect_backed_off(&r);
	r.h.now += MS;
	expect_preempted(&r); /* 4 ms */
	r.h.now += 3 * MS + MS / 2;
	expect_backed_off(&r);
	r.h.now += MS;
	/* Short wins (2 us): no evidence, still 4 ms. */
	expect_poll_wins(&r, 20);
	expect_poll_wins(&r, 20);
	expect_preempted(&r); /* 8 ms */
	r.h.now += 7 * MS + MS / 2;
	expect_backed_off(&r);
	r.h.now += MS;
	/* Two polls of 30 us without a gap: 8 -> 4 -> 2 ms. */
	expect_poll_wins(&r, 300);
	expect_poll_wins(&r, 300);
	expect_preempted(&r); /* 4 ms again */
	r.h.now += 3 * MS + MS / 2;
	expect_backed_off(&r);
	r.h.now += MS;
	expect_poll_wins(&r, 50);
	/* Three clean polls: 4 -> 2 -> 1 -> none; then a preemption
	 * starts again at 1 ms. */
	expect_poll_wins(&r, 300);
	expect_poll_wins(&r, 300);
	expect_poll_wins(&r, 300);
	expect_preempted(&r);
	r.h.now += MS / 2;
	expect_backed_off(&r);
	r.h.now += MS / 2 + 1000;
	expect_poll_wins(&r, 50);
	vsched_vm_destroy(r.vm);
}

/* Only gaps inside the poll count: not the hooks before it, not a clock
 * that went back, not steps below 100 us. */
static void slow_blocking(struct vsched_vcpu *v, void *ctx)
{
	(void)v;
	((struct fake_host *)ctx)->now += hook_ns;
}

static void test_only_gaps_inside_the_poll(void **state)
{
	struct rig r;
	(void)state;

	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_PREEMPT);
	vsched_vm_destroy(r.vm);
	/* A blocking hook that takes 5 ms (before the loop's first read). */
	r.ops.blocking = slow_blocking;
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &r.ops };
	struct vsched_poll_params pp =
		params(VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_PREEMPT);
	cfg.poll = &pp;
	assert_int_equal(vsched_vm_create(&cfg, &r.vm), 0);
	declare(r.vm, K_REQ, "req", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(r.vm, 0), 0);
	r.v = r.h.vcpu = make_vcpu(r.vm, 0);
	hook_ns = 5 * MS;
	expect_poll_wins(&r, 50);
	/* A step of 99.9 us: no preemption. */
	gap_ns = 99800;
	gap_at = 5;
	expect_poll_wins(&r, 50);
	/* The clock going back 1 ms inside the poll. */
	gap_ns = (uint64_t)0 - MS;
	gap_at = 5;
	expect_poll_wins(&r, 50);
	assert_int_equal(stats_of(r.v).halt_poll_contended, 0);
	/* A real gap still counts. */
	gap_ns = GAP;
	expect_preempted(&r);
	assert_int_equal(stats_of(r.v).halt_poll_contended, 1);
	hook_ns = 0;
	vsched_vm_destroy(r.vm);
}

/* The policy learns every halt while backed off: KVM's window grows on
 * the short sleeps it did not poll for, as a replay through the public
 * policy says, and the first poll after the back-off uses that window. */
static void test_policy_learns_while_backed_off(void **state)
{
	struct vsched_block_result res;
	struct vsched_poll_params pp;
	struct vsched_poll_state ps;
	struct rig r;
	(void)state;

	rig_up(&r, VSCHED_POLL_KVM, 200000, VSCHED_CONTENTION_PREEMPT);
	vsched_poll_defaults(VSCHED_POLL_KVM, 200000, &pp);
	assert_int_equal(vsched_poll_init(&pp, &ps), 0);
	/* Halts that sleep 5 us: KVM grows its window from 0. */
	for (int i = 0; i < 2; i++) {
		assert_int_equal(halt(&r, &res), VSCHED_WAKE_REQUEST);
		assert_int_equal(res.window_ns, vsched_poll_window(&pp, &ps));
		assert_int_equal(vsched_poll_update(&pp, &ps, res.window_ns,
						    res.halt_ns, true), 0);
	}
	const uint64_t before = vsched_poll_window(&pp, &ps);
	assert_true(before > 0);
	/* A preempted poll, then halts inside the back-off. */
	gap_at = 5;
	assert_int_equal(halt(&r, &res), VSCHED_WAKE_REQUEST);
	assert_int_equal(res.window_ns, before);
	assert_int_equal(vsched_poll_update(&pp, &ps, res.window_ns, res.halt_ns, true), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(halt(&r, &res), VSCHED_WAKE_REQUEST);
		assert_true(res.vetoed);
		assert_int_equal(vsched_poll_update(&pp, &ps, res.window_ns,
						    res.halt_ns, true), 0);
	}
	assert_int_equal(stats_of(r.v).halt_poll_contended, 4);
	/* After the back-off: the window of a policy that saw every halt. */
	r.h.now += MS;
	const uint64_t expect = vsched_poll_window(&pp, &ps);
	assert_int_not_equal(expect, before);
	assert_int_equal(halt(&r, &res), VSCHED_WAKE_REQUEST);
	assert_false(res.vetoed);
	assert_int_equal(res.window_ns, expect);
	vsched_vm_destroy(r.vm);
}

/* A waiter backs off too (its own sleeper, the VM's clock). */
static struct vsched_waiter *wp;
static _Atomic bool wready;
static bool w_cond(void *arg)
{
	(void)arg;
	return atomic_load(&wready);
}

static void w_clock(struct fake_host *h)
{
	h->now += 100;
	reads++;
	if (gap_at && reads == gap_at)
		h->now += gap_ns;
	if (post_at && reads == post_at)
		atomic_store(&wready, true);
}

static int w_sleep(struct fake_host *h, uint32_t *w, uint32_t exp, uint64_t dl)
{
	(void)w, (void)exp, (void)dl;
	sleeps++;
	h->now += 1000;
	atomic_store(&wready, true);
	assert_int_equal(vsched_waiter_kick(wp), 1); /* it was asleep */
	return 0;
}

static void test_waiter_backs_off(void **state)
{
	struct vsched_block_result res = { .size = sizeof(res) };
	struct fake_host h = { .now = 1000, .on_clock = w_clock, .on_wait = w_sleep };
	struct vsched_host_ops ops = fake_ops(&h);
	struct vsched_waiter *w;
	struct vsched_halt_stats hs;
	struct vsched_poll_params pp;
	(void)state;

	struct vsched_vm *vm = make_vm(&ops, 50 * MS);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_waiter_config cfg = { .size = sizeof(cfg), .cond = w_cond };
	pp = params(VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_PREEMPT);
	cfg.poll = &pp;
	assert_int_equal(vsched_waiter_create_ex(vm, &cfg, &w), 0);
	wp = w;
	sleeps = 0;
	gap_ns = GAP;

	/* Preempted: the poll stops and the waiter sleeps. */
	reads = 0, gap_at = 5, post_at = 0, wready = false;
	assert_int_equal(vsched_waiter_wait(w, VSCHED_DEADLINE_NONE, &res),
			 VSCHED_WAKE_REQUEST);
	assert_false(res.poll_won);
	assert_int_equal(sleeps, 1);
	/* Backed off: no poll. */
	reads = 0, gap_at = 0, post_at = 0, wready = false;
	assert_int_equal(vsched_waiter_wait(w, VSCHED_DEADLINE_NONE, &res),
			 VSCHED_WAKE_REQUEST);
	assert_true(res.vetoed);
	assert_int_equal(sleeps, 2);
	assert_int_equal(vsched_waiter_stats(w, &hs), 0);
	assert_int_equal(hs.halt_poll_vetoed, 1);
	struct vsched_waiter_stats ws = { .size = sizeof(ws) };
	assert_int_equal(vsched_waiter_read_stats(w, &ws), 0);
	assert_int_equal(ws.halt.halt_poll_vetoed, 1);
	assert_int_equal(ws.halt_poll_contended, 2); /* the cut poll, the skipped one */
	/* Over: it polls and wins. */
	h.now += MS;
	reads = 0, post_at = 50, wready = false;
	assert_int_equal(vsched_waiter_wait(w, VSCHED_DEADLINE_NONE, &res),
			 VSCHED_WAKE_REQUEST);
	assert_true(res.poll_won);
	assert_int_equal(sleeps, 2);
	vsched_waiter_destroy(w);
	vsched_vm_destroy(vm);
}

/* The default params (vCPU and waiter): no back-off. A preempted poll
 * polls on to its post, a busy host does not stop it, and no fd opens. */
static void test_default_is_off(void **state)
{
	struct vsched_block_result res;
	struct vsched_poll_params pp;
	struct rig r;
	(void)state;

	for (unsigned p = 0; p < VSCHED_POLL_NPOLICIES; p++) {
		assert_int_equal(vsched_poll_defaults(p, 50 * MS, &pp), 0);
		assert_int_equal(pp.contention, VSCHED_CONTENTION_OFF);
		assert_int_equal(vsched_poll_defaults_waiter(p, &pp), 0);
		assert_int_equal(pp.contention, VSCHED_CONTENTION_OFF);
	}
	const unsigned before = open_fds();
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 50 * MS, &pp), 0);
	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, pp.contention);
	host_busy();
	for (int i = 0; i < 3; i++) {
		r.h.now += MS; /* a sample would be due */
		gap_at = 5;
		post_at = 100;
		assert_int_equal(halt(&r, &res), VSCHED_WAKE_REQUEST);
		assert_true(res.poll_won);
		assert_false(res.vetoed);
	}
	assert_int_equal(stats_of(r.v).halt_poll_contended, 0);
	assert_int_equal(sleeps, 0);
	assert_int_equal(open_fds(), before);
	host_idle();
	vsched_vm_destroy(r.vm);
}

/* A mode past VSCHED_CONTENTION_SAMPLED is refused everywhere params go
 * in; a struct whose size ends before the field reads it as off. */
static void test_bad_mode_refused(void **state)
{
	struct vsched_poll_params pp = params(VSCHED_POLL_FIXED, 50 * MS, 3);
	struct vsched_poll_params out = { .size = sizeof(out) };
	struct vsched_poll_state ps;
	struct vsched_waiter *w;
	struct rig r;
	(void)state;

	assert_int_equal(vsched_poll_init(&pp, &ps), VSCHED_EINVAL);
	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_SAMPLED);
	assert_int_equal(vsched_vm_set_poll(r.vm, &pp), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_set_poll(r.v, &pp), VSCHED_EINVAL);
	pp.contention = UINT32_MAX;
	assert_int_equal(vsched_vm_set_poll(r.vm, &pp), VSCHED_EINVAL);
	struct vsched_waiter_config cfg = { .size = sizeof(cfg), .cond = w_cond,
					    .poll = &pp };
	assert_int_equal(vsched_waiter_create_ex(r.vm, &cfg, &w), VSCHED_EINVAL);
	cfg.poll = NULL;
	assert_int_equal(vsched_waiter_create_ex(r.vm, &cfg, &w), 0);
	assert_int_equal(vsched_waiter_set_poll(w, &pp), VSCHED_EINVAL);
	assert_int_equal(vsched_waiter_destroy(w), 0);
	/* The VM's policy is still the one it was created with. */
	assert_int_equal(vsched_vm_get_poll(r.vm, &out), 0);
	assert_int_equal(out.contention, VSCHED_CONTENTION_SAMPLED);
	/* A struct of the layout before the field: whatever lies past its
	 * size, the mode is off. */
	pp.size = offsetof(struct vsched_poll_params, contention);
	assert_int_equal(vsched_vm_set_poll(r.vm, &pp), 0);
	assert_int_equal(vsched_vm_get_poll(r.vm, &out), 0);
	assert_int_equal(out.contention, VSCHED_CONTENTION_OFF);
	vsched_vm_destroy(r.vm);
}

/* Turned off at run time (the VM's policy, then a vCPU's own), the
 * back-off stops vetoing at the next halt, even inside a back-off or
 * with the host busy; turned on again, it acts again. */
static void test_turned_off_at_run_time(void **state)
{
	struct vsched_block_result res;
	struct vsched_poll_params pp;
	struct rig r;
	(void)state;

	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_PREEMPT);
	expect_preempted(&r);
	expect_backed_off(&r);
	/* Off through the VM, inside the 1 ms back-off: a preempted poll
	 * polls on. */
	pp = params(VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_OFF);
	assert_int_equal(vsched_vm_set_poll(r.vm, &pp), 0);
	gap_at = 5;
	post_at = 100;
	assert_int_equal(halt(&r, &res), VSCHED_WAKE_REQUEST);
	assert_true(res.poll_won);
	assert_false(res.vetoed);
	assert_int_equal(stats_of(r.v).halt_poll_contended, 2);
	/* On again for this vCPU alone: the gap stops its poll. */
	pp.contention = VSCHED_CONTENTION_PREEMPT;
	assert_int_equal(vsched_vcpu_set_poll(r.v, &pp), 0);
	expect_preempted(&r);
	expect_backed_off(&r);
	assert_int_equal(stats_of(r.v).halt_poll_contended, 4);
	/* The sampler on a busy host, then off through the vCPU's own. */
	pp.contention = VSCHED_CONTENTION_SAMPLED;
	assert_int_equal(vsched_vcpu_set_poll(r.v, &pp), 0);
	host_busy();
	post_at = 50;
	assert_int_equal(halt(&r, &res), VSCHED_WAKE_REQUEST);
	assert_false(res.poll_won); /* sampled busy at the first look */
	expect_backed_off(&r);
	assert_int_equal(stats_of(r.v).halt_poll_contended, 6);
	pp.contention = VSCHED_CONTENTION_OFF;
	assert_int_equal(vsched_vcpu_set_poll(r.v, &pp), 0);
	r.h.now += MS;
	expect_poll_wins(&r, 50);
	expect_poll_wins(&r, 300);
	assert_int_equal(stats_of(r.v).halt_poll_contended, 6);
	host_idle();
	vsched_vm_destroy(r.vm);
}

/* The sampled runnable count: a poll that finds the host busy stops,
 * and halts do not poll until a sample (at most one per ms, taken at the
 * halt's start while busy) says it is idle again. A poll won before its
 * first look (VSCHED_FD_CHECK_NS / 8) takes no sample. */
static void test_sampled_load(void **state)
{
	struct rig r;
	(void)state;

	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_SAMPLED);
	expect_poll_wins(&r, 50); /* sampled: idle */
	host_busy();
	expect_poll_wins(&r, 50); /* the next sample is not due */
	r.h.now += MS;
	expect_poll_wins(&r, 3); /* won at once: no sample */
	assert_int_equal(stats_of(r.v).halt_poll_contended, 0);
	/* Due: the poll samples the host busy and stops. */
	struct vsched_block_result res;
	unsigned s = sleeps;
	post_at = 50;
	assert_int_equal(halt(&r, &res), VSCHED_WAKE_REQUEST);
	assert_false(res.poll_won);
	assert_false(res.vetoed);
	assert_int_equal(sleeps, s + 1);
	assert_true(res.poll_ns < 2000); /* the first look, 625 ns in */
	assert_int_equal(stats_of(r.v).halt_poll_contended, 1);
	/* Busy: no polling, with or without a new sample. */
	expect_backed_off(&r);
	r.h.now += MS;
	expect_backed_off(&r);
	host_idle();
	expect_backed_off(&r); /* the sample is 1 ms away */
	r.h.now += MS;
	expect_poll_wins(&r, 50); /* sampled at the halt's start: idle */
	expect_poll_wins(&r, 50);
	struct vsched_vcpu_stats st = stats_of(r.v);
	assert_int_equal(st.halt_poll_contended, 4);
	assert_int_equal(st.halt.halt_poll_vetoed, 3);
	vsched_vm_destroy(r.vm);
}

/* One fd per process (not per sleeper), taken when a sleeper's params
 * first ask for the sampler: at its first halt under them, or at once on
 * the thread that gives a waiter or vCPU such a policy of its own; closed
 * with the last sleeper that took it. None for the preemption gap. */
static void test_one_fd_closed_with_the_last_sleeper(void **state)
{
	struct vsched_poll_params pp =
		params(VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_SAMPLED);
	struct vsched_waiter *w;
	struct rig r;
	(void)state;

	const unsigned before = open_fds();
	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_PREEMPT);
	expect_preempted(&r);
	expect_backed_off(&r);
	assert_int_equal(open_fds(), before); /* the gap: no fd */
	vsched_vm_destroy(r.vm);

	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_SAMPLED);
	assert_int_equal(open_fds(), before); /* not before a halt */
	expect_poll_wins(&r, 50);
	assert_int_equal(open_fds(), before + 1);
	struct vsched_waiter_config cfg = { .size = sizeof(cfg), .cond = w_cond,
					    .poll = &pp };
	assert_int_equal(vsched_waiter_create_ex(r.vm, &cfg, &w), 0);
	assert_int_equal(open_fds(), before + 1); /* shared */
	assert_int_equal(vsched_vcpu_destroy(r.v), 0);
	assert_int_equal(open_fds(), before + 1); /* the waiter holds it */
	assert_int_equal(vsched_waiter_destroy(w), 0);
	assert_int_equal(open_fds(), before);
	/* A vCPU given the sampler by its own set_poll: opened then, on
	 * this thread; kept, though its params turn it off, until it goes. */
	struct vsched_vcpu *v = make_vcpu(r.vm, 1);
	assert_int_equal(open_fds(), before);
	assert_int_equal(vsched_vcpu_set_poll(v, &pp), 0);
	assert_int_equal(open_fds(), before + 1);
	pp.contention = VSCHED_CONTENTION_OFF;
	assert_int_equal(vsched_vcpu_set_poll(v, &pp), 0);
	assert_int_equal(open_fds(), before + 1);
	vsched_vm_destroy(r.vm);
	assert_int_equal(open_fds(), before);
	/* A waiter created with it opens it at its creation. */
	rig_up(&r, VSCHED_POLL_FIXED, 50 * MS, VSCHED_CONTENTION_OFF);
	pp.contention = VSCHED_CONTENTION_SAMPLED;
	assert_int_equal(vsched_waiter_create_ex(r.vm, &cfg, &w), 0);
	assert_int_equal(open_fds(), before + 1);
	assert_int_equal(vsched_waiter_destroy(w), 0);
	assert_int_equal(open_fds(), before);
	vsched_vm_destroy(r.vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_preempted_poll_stops_and_backs_off),
		cmocka_unit_test(test_backoff_doubles_and_halves),
		cmocka_unit_test(test_only_gaps_inside_the_poll),
		cmocka_unit_test(test_policy_learns_while_backed_off),
		cmocka_unit_test(test_waiter_backs_off),
		cmocka_unit_test(test_default_is_off),
		cmocka_unit_test(test_bad_mode_refused),
		cmocka_unit_test(test_turned_off_at_run_time),
		cmocka_unit_test(test_sampled_load),
		cmocka_unit_test(test_one_fd_closed_with_the_last_sleeper),
	};
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	ncpus = n > 0 ? (unsigned)n : 1;
	snprintf(load_path, sizeof(load_path), "/tmp/vsched-test-load.%d", (int)getpid());
	setenv("VSCHED_CONTENTION_SOURCE", load_path, 1);
	host_idle();
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(load_path);
	return rc;
}
