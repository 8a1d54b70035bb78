/* SPDX-License-Identifier: MIT */
/*
 * Guest timers: arm / fire with exactly-once expiry, the timer service, and
 * the expiry-cancellation policy applied when the timer's request is
 * serviced.
 *
 * A timer's word holds (deadline << 2) | OFF | EXPIRED; deadline 0 is
 * disarmed. OFF (LEVEL only) is "disabled or masked". Every change is one
 * atomic RMW of the word, so arm, fire, set_ctl and the cancellation filter
 * each see and replace a consistent (deadline, gate, latch) triple.
 *
 * An expiry is posted by whoever removes an expired, unposted deadline from
 * the word: fire() with a CAS that sets EXPIRED, or arm() with the RMW that
 * replaces it. So a re-arm racing the fire posts the old expiry exactly once
 * (test/model/timer.pml).
 *
 * LEVEL: the output line is (enabled && !masked && deadline <= now), and
 * EXPIRED means "posted since the line last rose". Every way the line can
 * fall (set_ctl closing the gate, arm moving the deadline into the future or
 * disarming, the filter moving vsched's view to the guest's future
 * deadline) clears EXPIRED in the same RMW, so EXPIRED implies the line is
 * high, and the next rising edge (time, arm into the past, enable, unmask)
 * posts again.
 */
#include <string.h>

#include "abi.h"
#include "mode.h"

#include <urcu/urcu-bp.h>

#define EXPIRED UINT64_C(1)
#define OFF UINT64_C(2) /* LEVEL: disabled or masked */
#define SHIFT 2
#define NONE UINT64_MAX

struct vsched_timer {
	_Atomic uint64_t word VSCHED__ALIGNED;
	struct vsched_vcpu *vcpu;
	struct vsched_timer *_Atomic vm_next;
	unsigned kind, rank, semantics, cancel;
	char name[16];
	/* vCPU thread: ADAPTIVE estimates */
	uint64_t est_read, est_spur;
	uint32_t n_checked, n_stale; /* decayed counts, fixed point x 256 */
	bool reading;
	struct {
		_Atomic uint64_t fired, delivered, stale_cancelled,
			stale_delivered, reads, read_ns;
		_Atomic uint32_t reading;
	} st VSCHED__ALIGNED;
};

struct vsched_timer_service {
	struct vsched_vm *vm;
	/* run() sleeps in this set: its timerfd, its eventfd (stop). */
	struct vsched__os_set os;
	_Atomic uint64_t next; /* programmed deadline, UINT64_MAX: none */
	_Atomic bool stop;
};

static uint64_t deadline_of(uint64_t w)
{
	return w >> SHIFT;
}

/*
 * THE predicate: the deadline at which the timer in word `w` can post an
 * expiry, or NONE when it cannot (disarmed; already posted, i.e. a LEVEL
 * line still asserted or a decrementer still pending; LEVEL disabled or
 * masked). fire_one(), arm(), set_ctl(), the service's programming and
 * vsched__vcpu_earliest() (the block engine's sleep) all use this one
 * function, so nobody waits for or programs a deadline that cannot fire.
 */
static uint64_t fire_deadline(uint64_t w)
{
	if (w & (EXPIRED | OFF))
		return NONE;
	return deadline_of(w) ? deadline_of(w) : NONE;
}

static bool can_fire(uint64_t w, uint64_t now)
{
	uint64_t d = fire_deadline(w);
	return d != NONE && d <= now;
}

/* The output line (LEVEL): armed, gate open, deadline reached. */
static bool line_high(uint64_t w, uint64_t now)
{
	return deadline_of(w) && !(w & OFF) && deadline_of(w) <= now;
}

static uint64_t now_of(const struct vsched_timer *t)
{
	const struct vsched_host_ops *ops = &t->vcpu->vm->ops;
	return ops->now_ns(ops->ctx);
}

static void post_expiry(struct vsched_timer *t)
{
	vsched__count_shared(&t->st.fired);
	VSCHED__TRACE2(timer_fire, t->vcpu->id, t->kind);
	vsched_post(t->vcpu, t->kind);
}

/* Post this timer's expiry if it is due and not yet posted. */
static int fire_one(struct vsched_timer *t, uint64_t now)
{
	uint64_t w = atomic_load_explicit(&t->word, memory_order_acquire);
	while (can_fire(w, now)) {
		if (atomic_compare_exchange_weak_explicit(&t->word, &w, w | EXPIRED,
							  memory_order_seq_cst,
							  memory_order_acquire)) {
			post_expiry(t);
			return 1;
		}
	}
	return 0;
}

static void service_note(struct vsched_vm *vm, uint64_t d);

int vsched_timer_create(struct vsched_vcpu *v,
			const struct vsched_timer_desc *caller,
			struct vsched_timer **out)
{
	struct vsched_timer_desc desc;
	const struct vsched_timer_desc *d = &desc;
	struct vsched_vm *vm;
	struct vsched_timer *t;
	int r, rc = 0;

	/* The extensible-struct rule (lib/abi.h). */
	if (!v || !caller || !out ||
	    vsched__struct_in(&desc, sizeof(desc), caller,
			      VSCHED__SIZE_TO(struct vsched_timer_desc,
					      read_cost_ns)) ||
	    d->semantics > VSCHED_TIMER_DECREMENTER ||
	    d->cancel >= VSCHED_CANCEL_NPOLICIES)
		return VSCHED_EINVAL;
	*out = NULL;
	vm = v->vm;
	if (vsched__mode_of(atomic_load(&v->mode)) == VSCHED_MODE_DESTROYED)
		return VSCHED_ESHUTDOWN; /* its timers left the VM's list */
	if (d->kind >= VSCHED_MAX_KINDS || vm->table.rank_of[d->kind] < 0)
		return VSCHED_ERANGE;
	r = vm->table.rank_of[d->kind];
	if (vm->table.by_rank[r].flags & VSCHED_REQ_PAYLOAD)
		return VSCHED_EINVAL;
	pthread_mutex_lock(&vm->lock);
	if (v->ntimers == VSCHED__MAX_TIMERS) {
		rc = VSCHED_ENOSPC;
		goto out;
	}
	for (unsigned i = 0; i < v->ntimers; i++)
		if (v->timers[i]->kind == d->kind) {
			rc = VSCHED_EEXIST; /* one timer per kind per vCPU */
			goto out;
		}
	t = vsched__alloc(&vm->alloc, sizeof(*t));
	if (!t) {
		rc = VSCHED_ENOMEM;
		goto out;
	}
	strncpy(t->name, d->name ? d->name : "timer", sizeof(t->name) - 1);
	t->vcpu = v;
	t->kind = d->kind;
	t->rank = (unsigned)r;
	t->semantics = d->semantics;
	t->cancel = d->cancel;
	t->est_read = d->read_cost_ns ? d->read_cost_ns : 1000;
	t->est_spur = d->spurious_cost_ns ? d->spurious_cost_ns : 10000;
	t->reading = true; /* ADAPTIVE starts by reading: that measures */
	atomic_store(&t->st.reading, 1);
	/* Publish: the vCPU's list, then the VM's list for the service. */
	v->timers[v->ntimers] = t;
	v->timer_ranks |= UINT64_C(1) << r;
	atomic_store_explicit(&v->ntimers_pub, v->ntimers + 1, memory_order_release);
	v->ntimers++;
	atomic_store_explicit(&t->vm_next, atomic_load(&vm->timers), memory_order_relaxed);
	atomic_store_explicit(&vm->timers, t, memory_order_release);
	*out = t;
out:
	pthread_mutex_unlock(&vm->lock);
	return rc;
}

/* vCPU destroy (vm->lock held): take its timers off the VM's list, so that
 * the service never walks them again and hotplug does not grow the list.
 * A dispatch standing on one of them still finds its vm_next; the memory
 * goes with the vCPU's (vsched__timers_fini()). */
void vsched__timers_unlink(struct vsched_vcpu *v)
{
	struct vsched_timer *_Atomic *pp = &v->vm->timers;
	struct vsched_timer *t;

	while ((t = atomic_load_explicit(pp, memory_order_relaxed))) {
		if (t->vcpu == v)
			atomic_store_explicit(pp, atomic_load(&t->vm_next),
					      memory_order_release);
		else
			pp = &t->vm_next;
	}
}

/* Free a vCPU's timers, when the vCPU itself is freed. */
void vsched__timers_fini(struct vsched_vcpu *v)
{
	for (unsigned i = 0; i < v->ntimers; i++)
		vsched__free(&v->vm->alloc, v->timers[i], sizeof(*v->timers[i]));
	v->ntimers = 0;
	atomic_store(&v->ntimers_pub, 0);
}

static void service_free(struct vsched_timer_service *s);

/* VM destroy: the service still attached goes with it; then the list. */
void vsched__timers_free(struct vsched_vm *vm)
{
	struct vsched_timer_service *s = atomic_exchange(&vm->tsvc, NULL);
	if (s)
		service_free(s);
	atomic_store(&vm->timers, NULL);
}

static void note_and_wake(struct vsched_timer *t, uint64_t d)
{
	service_note(t->vcpu->vm, d);
	vsched__mode_rewake(t->vcpu);
}

int vsched_timer_arm(struct vsched_timer *t, uint64_t d)
{
	struct vsched_vcpu *v;
	uint64_t old, n, now, before = 0, e;
	bool level, still_high = false;

	if (!t || d > VSCHED_TIMER_DEADLINE_MAX)
		return VSCHED_EINVAL;
	v = t->vcpu;
	if (vsched__mode_of(atomic_load_explicit(&v->mode, memory_order_relaxed)) ==
	    VSCHED_MODE_DESTROYED)
		return VSCHED_ESHUTDOWN;
	level = t->semantics == VSCHED_TIMER_LEVEL;
	old = atomic_load_explicit(&t->word, memory_order_acquire);
	do {
		/* The RMW takes effect at `before`: read after (re)loading the
		 * word, so it is no earlier than the clock of whoever wrote
		 * `old` (read before their RMW). Every judgment of the RMW is
		 * made at it: a clock read after the RMW may have passed a
		 * deadline that was not due when the RMW replaced it, and one
		 * read before the load may predate a fire that saw a later
		 * clock (test/model/timer.pml). */
		before = now_of(t);
		n = (d << SHIFT) | (old & OFF);
		/* LEVEL: a new deadline that keeps the line high (or raises
		 * it: the edge is the arm's) is one high period, latched here
		 * and posted at most once, below. */
		still_high = level && line_high(n, before);
		if (still_high)
			n |= EXPIRED;
	} while (!atomic_compare_exchange_weak_explicit(&t->word, &old, n,
						       memory_order_seq_cst,
						       memory_order_acquire));
	/* LEVEL looks at the clock again: a new deadline that came due since
	 * is a fall and a rise of the line, posted below. The others need no
	 * second read (15 ns here, on every guest write of the deadline): a
	 * deadline that comes due after `before` reaches the service, the
	 * sleeping vCPU or the next entry's fire through note_and_wake(). */
	now = level ? now_of(t) : before;
	if (still_high) {
		/* Posted already in this high period, or post it now (the
		 * old deadline's unposted edge, or the arm's own). */
		if (!(old & EXPIRED))
			post_expiry(t);
		return 0;
	}
	/* The deadline we replaced had passed when we replaced it and was
	 * not posted: that expiry was real, post it (the fire's CAS now
	 * fails). */
	if (can_fire(old, before))
		post_expiry(t);
	/* The new deadline may have come due since (the line fell at the
	 * RMW and rose again): fire it like the service would. */
	e = fire_deadline(n);
	if (e != NONE) {
		if (e <= now)
			fire_one(t, now);
		else
			note_and_wake(t, e);
	}
	return 0;
}

int vsched_timer_disarm(struct vsched_timer *t)
{
	return vsched_timer_arm(t, 0);
}

int vsched_timer_set_ctl(struct vsched_timer *t, bool enable, bool mask)
{
	uint64_t w, n, now, e;
	bool open = enable && !mask, post;

	if (!t || t->semantics != VSCHED_TIMER_LEVEL)
		return VSCHED_EINVAL;
	now = now_of(t);
	w = atomic_load_explicit(&t->word, memory_order_relaxed);
	do {
		post = false;
		if (!open) {
			/* The line falls (or stays low): unlatch, so that the
			 * next rising edge posts. */
			n = (w | OFF) & ~EXPIRED;
		} else {
			n = w & ~OFF;
			/* Rising edge through enable/unmask, or a due
			 * expiry nobody has fired yet: post it, once. */
			if (can_fire(n, now)) {
				n |= EXPIRED;
				post = true;
			}
		}
	} while (!atomic_compare_exchange_weak_explicit(&t->word, &w, n,
						       memory_order_seq_cst,
						       memory_order_relaxed));
	if (post)
		post_expiry(t);
	else if ((e = fire_deadline(n)) != NONE)
		note_and_wake(t, e); /* opened with a future deadline */
	return 0;
}

int vsched_timer_get(const struct vsched_timer *t, uint64_t *deadline, bool *expired)
{
	uint64_t w;
	if (!t)
		return VSCHED_EINVAL;
	w = atomic_load(&t->word);
	if (deadline)
		*deadline = deadline_of(w);
	if (expired)
		*expired = w & EXPIRED;
	return 0;
}

int vsched_vcpu_fire_timers(struct vsched_vcpu *v)
{
	unsigned n;
	uint64_t now;
	int fired = 0;

	if (!v)
		return VSCHED_EINVAL;
	n = atomic_load_explicit(&v->ntimers_pub, memory_order_acquire);
	if (!n)
		return 0;
	now = v->vm->ops.now_ns(v->vm->ops.ctx);
	for (unsigned i = 0; i < n; i++)
		fired += fire_one(v->timers[i], now);
	return fired;
}

uint64_t vsched__vcpu_earliest(const struct vsched_vcpu *v)
{
	unsigned n = atomic_load_explicit(&v->ntimers_pub, memory_order_acquire);
	uint64_t best = UINT64_MAX;

	for (unsigned i = 0; i < n; i++) {
		uint64_t e = fire_deadline(
			atomic_load_explicit(&v->timers[i]->word, memory_order_relaxed));
		if (e < best)
			best = e;
	}
	return best;
}

int vsched_vcpu_next_timer(const struct vsched_vcpu *v, uint64_t *deadline)
{
	if (!v || !deadline)
		return VSCHED_EINVAL;
	*deadline = vsched__vcpu_earliest(v);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Cancellation, applied when the timer's request is serviced. */

/* The policies' names, by enum vsched_timer_cancel. */
static const char *const cancel_names[VSCHED_CANCEL_NPOLICIES] = {
	[VSCHED_CANCEL_KEEP] = "keep",
	[VSCHED_CANCEL_CANCEL] = "cancel",
	[VSCHED_CANCEL_ADAPTIVE] = "adaptive",
};
/* A policy added to the enum gets a name: the count follows the last one. */
_Static_assert(VSCHED_CANCEL_ADAPTIVE + 1 == VSCHED_CANCEL_NPOLICIES,
	       "VSCHED_CANCEL_NPOLICIES is not the number of policies");

const char *vsched_cancel_policy_name(unsigned policy)
{
	return policy < VSCHED_CANCEL_NPOLICIES ? cancel_names[policy] : NULL;
}

int vsched_cancel_policy_parse(const char *name)
{
	if (!name)
		return VSCHED_EINVAL;
	for (unsigned i = 0; i < VSCHED_CANCEL_NPOLICIES; i++)
		if (strcmp(name, cancel_names[i]) == 0)
			return (int)i;
	return VSCHED_EINVAL;
}

/* a x b, saturating: the costs are the caller's, up to 2^64 - 1 ns. */
static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static void adapt(struct vsched_timer *t)
{
	/* Read when stale share x spurious cost > read cost. Before any
	 * evidence, keep reading (it is how the costs get measured). */
	if (t->n_checked < 256 * 4)
		t->reading = true;
	else
		t->reading = mul_sat(t->n_stale, t->est_spur) >
			     mul_sat(t->n_checked, t->est_read);
	atomic_store_explicit(&t->st.reading, t->reading, memory_order_relaxed);
}

static void observe(struct vsched_timer *t, bool stale)
{
	/* Decaying counts (x256), half-life ~ 45 observations. */
	t->n_checked -= t->n_checked >> 6;
	t->n_stale -= t->n_stale >> 6;
	t->n_checked += 256;
	if (stale)
		t->n_stale += 256;
}

int vsched_timer_report_spurious(struct vsched_timer *t, uint64_t cost_ns)
{
	if (!t)
		return VSCHED_EINVAL;
	vsched__count(&t->st.stale_delivered);
	/* The delivery was observed as fresh; it was stale after all. */
	t->n_stale += 256;
	if (t->n_stale > t->n_checked)
		t->n_stale = t->n_checked;
	if (cost_ns)
		t->est_spur = t->est_spur - t->est_spur / 8 + cost_ns / 8;
	if (t->cancel == VSCHED_CANCEL_ADAPTIVE)
		adapt(t);
	return 0;
}

static struct vsched_timer *timer_of_rank(struct vsched_vcpu *v, unsigned r)
{
	for (unsigned i = 0; i < v->ntimers; i++)
		if (v->timers[i]->rank == r)
			return v->timers[i];
	return NULL;
}

/* Deliver the serviced timer request of rank r? Context: vCPU thread. */
bool vsched__timer_filter(struct vsched_vcpu *v, unsigned r)
{
	const struct vsched_host_ops *ops = &v->vm->ops;
	struct vsched_timer *t = timer_of_rank(v, r);
	uint64_t w, now, d, t0, t1;
	bool stale;

	if (!t)
		return true;
	w = atomic_load_explicit(&t->word, memory_order_acquire);
	now = ops->now_ns(ops->ctx);
	/* Stale in vsched's own view: re-armed or disarmed since the post, or
	 * (level) no longer asserted. */
	stale = !(w & EXPIRED) ||
		(t->semantics == VSCHED_TIMER_LEVEL && !line_high(w, now));
	if (t->cancel == VSCHED_CANCEL_KEEP) {
		if (stale)
			vsched__count(&t->st.stale_delivered);
		goto deliver;
	}
	if (stale) {
		vsched__count(&t->st.stale_cancelled);
		VSCHED__TRACE2(timer_cancel, v->id, t->kind);
		return false;
	}
	/* vsched's view says due; the guest may have re-armed where only
	 * timer_read can see it. */
	if (!ops->timer_read)
		goto deliver;
	if (t->cancel == VSCHED_CANCEL_ADAPTIVE && !t->reading) {
		observe(t, false); /* corrected by report_spurious() */
		adapt(t);
		goto deliver;
	}
	t0 = ops->now_ns(ops->ctx);
	int rc = ops->timer_read(v, t, &d, ops->ctx);
	t1 = ops->now_ns(ops->ctx);
	vsched__count(&t->st.reads);
	atomic_store_explicit(&t->st.read_ns,
			      atomic_load_explicit(&t->st.read_ns, memory_order_relaxed) +
				      (t1 - t0),
			      memory_order_relaxed);
	t->est_read = t->est_read - t->est_read / 8 + (t1 - t0) / 8;
	if (rc) {
		adapt(t);
		goto deliver;
	}
	/* A deadline past vsched's range is in the far future: clamp it
	 * (stale, and it does not wrap into the past in the word). */
	if (d > VSCHED_TIMER_DEADLINE_MAX)
		d = VSCHED_TIMER_DEADLINE_MAX;
	stale = d == 0 || d > t1;
	observe(t, stale);
	if (t->cancel == VSCHED_CANCEL_ADAPTIVE)
		adapt(t);
	if (stale) {
		/* Bring vsched's view in line with the guest's (the line
		 * falls: unlatched). A concurrent arm or set_ctl wins. */
		uint64_t expect = w, n = (d << SHIFT) | (w & OFF);
		if (atomic_compare_exchange_strong(&t->word, &expect, n) &&
		    fire_deadline(n) != NONE)
			service_note(v->vm, fire_deadline(n));
		vsched__count(&t->st.stale_cancelled);
		VSCHED__TRACE2(timer_cancel, v->id, t->kind);
		return false;
	}
deliver:
	vsched__count(&t->st.delivered);
	if (t->semantics == VSCHED_TIMER_ONESHOT && (w & EXPIRED)) {
		/* One shot: consumed. A concurrent re-arm wins the CAS. */
		uint64_t expect = w;
		atomic_compare_exchange_strong(&t->word, &expect, 0);
	}
	return true;
}

int vsched_timer_read_stats(const struct vsched_timer *t, struct vsched_timer_stats *o)
{
	if (!t || !o)
		return VSCHED_EINVAL;
	memset(o, 0, sizeof(*o));
	o->fired = atomic_load(&t->st.fired);
	o->delivered = atomic_load(&t->st.delivered);
	o->stale_cancelled = atomic_load(&t->st.stale_cancelled);
	o->stale_delivered = atomic_load(&t->st.stale_delivered);
	o->state_reads = atomic_load(&t->st.reads);
	o->state_read_ns = atomic_load(&t->st.read_ns);
	o->adaptive_reading = atomic_load(&t->st.reading);
	o->est_read_ns = t->est_read;
	o->est_spurious_ns = t->est_spur;
	o->est_stale_permille = t->n_checked ? (unsigned)((uint64_t)t->n_stale * 1000 /
							  t->n_checked)
					     : 0;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The timer service */

static void program(struct vsched_timer_service *s)
{
	/* Whoever lowered `next` programs it; re-check so that a slower
	 * programmer never leaves a later value behind. */
	for (;;) {
		uint64_t v = atomic_load(&s->next);
		/* `next` is in the VM's clock, the timerfd's is
		 * CLOCK_MONOTONIC: with an injected clock the time left is
		 * converted now; an expiry before the VM's clock reaches the
		 * deadline fires nothing and programs it again. */
		vsched__os_timer_at(&s->os, vsched__kernel_deadline(&s->vm->ops, v));
		if (atomic_load(&s->next) == v)
			return;
	}
}

static void lower_next(struct vsched_timer_service *s, uint64_t d)
{
	uint64_t cur = atomic_load(&s->next);
	while (d < cur)
		if (atomic_compare_exchange_weak(&s->next, &cur, d)) {
			program(s);
			return;
		}
}

/* An arm (any thread) reaches the service under RCU: the service's destroy
 * unpublishes it and waits for a grace period before closing its fds and
 * freeing it, so an arm never programs a closed (or reused) fd. */
static void service_note(struct vsched_vm *vm, uint64_t d)
{
	struct vsched_timer_service *s;

	/* No service: no RCU section (and no liburcu-bp registration of this
	 * thread). The arm's CAS on the timer word and this load are seq_cst,
	 * as are the service's publication and its first dispatch's walk of
	 * every timer: either this arm sees the service, or that walk sees
	 * the new deadline. */
	if (!atomic_load_explicit(&vm->tsvc, memory_order_seq_cst))
		return;
	urcu_bp_read_lock();
	s = atomic_load_explicit(&vm->tsvc, memory_order_acquire);
	if (s) {
		lower_next(s, d);
		VSCHED__TSAN_RELEASE(s);
	}
	urcu_bp_read_unlock();
}

int vsched_timer_service_create(struct vsched_vm *vm, struct vsched_timer_service **out)
{
	struct vsched_timer_service *s, *none = NULL;
	int rc;

	if (!vm || !out)
		return VSCHED_EINVAL;
	s = vsched__alloc(&vm->alloc, sizeof(*s));
	if (!s)
		return VSCHED_ENOMEM;
	s->vm = vm;
	rc = vsched__os_set_open(&s->os);
	if (rc) {
		vsched__free(&vm->alloc, s, sizeof(*s));
		return rc;
	}
	atomic_init(&s->next, UINT64_MAX);
	if (!atomic_compare_exchange_strong(&vm->tsvc, &none, s)) {
		vsched__os_set_close(&s->os);
		vsched__free(&vm->alloc, s, sizeof(*s));
		return VSCHED_EEXIST;
	}
	vsched_timer_service_dispatch(s);
	*out = s;
	return 0;
}

int vsched_timer_service_fd(const struct vsched_timer_service *s)
{
	return s ? s->os.tfd : VSCHED_EINVAL;
}

int vsched_timer_service_dispatch(struct vsched_timer_service *s)
{
	uint64_t now, m = UINT64_MAX;
	int fired = 0;

	if (!s)
		return VSCHED_EINVAL;
	vsched__os_drain(s->os.tfd);
	/* Forget the programmed deadline first: an arm from now on lowers
	 * it again and programs it itself. */
	atomic_store(&s->next, UINT64_MAX);
	now = s->vm->ops.now_ns(s->vm->ops.ctx);
	for (struct vsched_timer *t = atomic_load_explicit(&s->vm->timers, memory_order_acquire);
	     t; t = atomic_load_explicit(&t->vm_next, memory_order_acquire)) {
		uint64_t e;
		if (vsched__mode_of(atomic_load_explicit(&t->vcpu->mode, memory_order_relaxed)) ==
		    VSCHED_MODE_DESTROYED)
			continue;
		fired += fire_one(t, now);
		/* Only what can still fire: a disabled or masked LEVEL timer
		 * with an old deadline, or a latched one, is not programmed
		 * (it would keep the fd readable: a busy loop). */
		e = fire_deadline(atomic_load(&t->word));
		if (e < m)
			m = e;
	}
	if (m != UINT64_MAX)
		lower_next(s, m);
	return fired;
}

int vsched_timer_service_run(struct vsched_timer_service *s)
{
	if (!s)
		return VSCHED_EINVAL;
	while (!atomic_load(&s->stop)) {
		struct epoll_event ev;
		vsched_timer_service_dispatch(s);
		if (atomic_load(&s->stop))
			break;
		vsched__os_wait(&s->os, &ev, 1, -1); /* a signal: dispatch again */
	}
	return 0;
}

int vsched_timer_service_stop(struct vsched_timer_service *s)
{
	if (!s)
		return VSCHED_EINVAL;
	atomic_store(&s->stop, true);
	/* run() waits on this eventfd too. */
	vsched__os_signal(&s->os);
	return 0;
}

/* Unpublished already: wait out every arm that may still hold it. */
static void service_free(struct vsched_timer_service *s)
{
	urcu_bp_synchronize_rcu();
	VSCHED__TSAN_ACQUIRE(s);
	vsched__os_set_close(&s->os);
	vsched__free(&s->vm->alloc, s, sizeof(*s));
}

int vsched_timer_service_destroy(struct vsched_timer_service *s)
{
	struct vsched_timer_service *self;
	if (!s)
		return VSCHED_EINVAL;
	self = s;
	if (!atomic_compare_exchange_strong(&s->vm->tsvc, &self, NULL))
		return VSCHED_EINVAL; /* not this VM's service */
	service_free(s);
	return 0;
}
