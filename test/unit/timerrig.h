/* SPDX-License-Identifier: MIT */
/* The guest-timer tests' rig (test_timer.c, test_timerrev.c): one vCPU on
 * the scripted host (common.h) with a timer of kind K_TIMER, whose expiries
 * on_timer() counts, and, nested, a timer_read hook that reports
 * guest_deadline at read_cost fake ns a read. */
#ifndef VSCHED_TEST_TIMERRIG_H
#define VSCHED_TEST_TIMERRIG_H

#include "common.h"

enum { K_TIMER = 3, K_OTHER = 4 };

static unsigned delivered; /* on_timer() calls */
static inline void on_timer(struct vsched_vcpu *v, unsigned k,
			    struct vsched_payload *p, void *a)
{
	(void)v, (void)k, (void)p, (void)a;
	delivered++;
}

/* The guest's real deadline as timer_read sees it (nested: invisible to
 * vsched), and the cost of reading it in fake ns. */
static uint64_t guest_deadline, read_cost;
static unsigned reads;
static inline int timer_read(struct vsched_vcpu *v, struct vsched_timer *t,
			     uint64_t *d, void *ctx)
{
	struct fake_host *h = ctx;
	(void)v, (void)t;
	reads++;
	h->now += read_cost;
	*d = guest_deadline;
	return 0;
}

struct rig {
	struct fake_host h;
	struct vsched_host_ops ops;
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	struct vsched_timer *t;
};

/* The rig with the host's timer_read `read_fn` (NULL: none) and clock
 * `now_ns` (NULL: the fake host's). */
static inline void rig_up_hooks(struct rig *r, unsigned semantics, unsigned cancel,
				int (*read_fn)(struct vsched_vcpu *, struct vsched_timer *,
					    uint64_t *, void *),
				uint64_t (*now_ns)(void *ctx))
{
	struct vsched_timer_desc d = { .size = sizeof(d), .name = "t",
				       .semantics = semantics, .kind = K_TIMER,
				       .cancel = cancel };
	memset(r, 0, sizeof(*r));
	r->ops = fake_ops(&r->h);
	if (read_fn)
		r->ops.timer_read = read_fn;
	if (now_ns)
		r->ops.now_ns = now_ns;
	r->vm = make_vm(&r->ops, 0);
	declare(r->vm, K_TIMER, "timer", 1, 0, on_timer, NULL, 0);
	declare(r->vm, K_OTHER, "other", 2, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(r->vm, 0), 0);
	r->v = r->h.vcpu = make_vcpu(r->vm, 0);
	assert_int_equal(vsched_timer_create(r->v, &d, &r->t), 0);
	delivered = reads = 0;
	read_cost = 0;
}

static inline void rig_up_clock(struct rig *r, unsigned semantics,
				unsigned cancel, bool nested, uint64_t (*now_ns)(void *ctx))
{
	rig_up_hooks(r, semantics, cancel, nested ? timer_read : NULL, now_ns);
}

static inline void rig_up(struct rig *r, unsigned semantics, unsigned cancel,
			  bool nested)
{
	rig_up_clock(r, semantics, cancel, nested, NULL);
}

static inline struct vsched_timer_stats tstats(struct vsched_timer *t)
{
	struct vsched_timer_stats s;
	assert_int_equal(vsched_timer_read_stats(t, &s), 0);
	return s;
}

/* One expiry through the ADAPTIVE timer; `stale` says whether the guest
 * had re-armed; a stale delivery is reported as costing `spur`. */
static inline void expiry(struct rig *r, bool stale, uint64_t spur)
{
	unsigned before = delivered;
	r->h.now += 100000;
	guest_deadline = r->h.now;
	assert_int_equal(vsched_timer_arm(r->t, r->h.now), 0); /* fires now */
	if (stale)
		guest_deadline = r->h.now + 1000000;
	assert_int_equal(vsched_service(r->v), 1);
	if (stale && delivered > before)
		vsched_timer_report_spurious(r->t, spur);
}

#endif
