/* SPDX-License-Identifier: MIT */
/*
 * Guest timers: create, arm and fire with exactly-once expiry, and the
 * earliest deadline a blocked vCPU sleeps to. The timer service is
 * lib/tservice.c, the expiry-cancellation policy lib/cancel.c; the timer
 * object they share is lib/timers.h.
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
 * posts again. All but one: an injected clock that steps back below CVAL
 * lowers the line with no RMW. The next look at the timer that finds it so
 * (a fire check, the filter) clears EXPIRED then, on a clock read after
 * the word (vsched__timer_unlatch_fallen()).
 */
#include <string.h>

#include "abi.h"
#include "mode.h"
#include "contract.h"
#include "timers.h"

static uint64_t now_of(const struct vsched_timer *t)
{
	const struct vsched_host_ops *ops = &t->vcpu->vm->ops;
	return ops->now_ns(ops->ctx);
}

void vsched__service_note(struct vsched_vm *vm, uint64_t d);

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
		return VSCHED_EDESTROYED; /* its timers left the VM's list */
	if (d->kind >= VSCHED_MAX_KINDS || vm->table.rank_of[d->kind] < 0)
		return VSCHED_ERANGE;
	r = vm->table.rank_of[d->kind];
	/* An expiry is a plain post: not a payload (it has none), not a
	 * WAIT kind (the arm, "any thread", and the service's dispatch would
	 * wait for a vCPU in the guest to acknowledge). */
	if (vm->table.by_rank[r].flags & (VSCHED_REQ_PAYLOAD | VSCHED_REQ_WAIT))
		return VSCHED_EINVAL;
	pthread_mutex_lock(&vm->lock);
	if (v->ntimers == VSCHED__MAX_TIMERS) {
		rc = VSCHED_ELIMIT;
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
	/* ADAPTIVE starts by reading, where there is a timer_read: that
	 * measures. The other policies make no choice, and their stats say
	 * 0. */
	t->reading = d->cancel == VSCHED_CANCEL_ADAPTIVE && vm->ops.timer_read;
	atomic_store(&t->st.reading, t->reading);
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

void vsched__service_free(struct vsched_timer_service *s);

/* VM destroy: the service still attached goes with it; then the list. */
void vsched__timers_free(struct vsched_vm *vm)
{
	struct vsched_timer_service *s = atomic_exchange(&vm->tsvc, NULL);
	if (s)
		vsched__service_free(s);
	atomic_store(&vm->timers, NULL);
}

static void note_and_wake(struct vsched_timer *t, uint64_t d)
{
	vsched__service_note(t->vcpu->vm, d);
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
		return VSCHED_EDESTROYED;
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
			vsched__timer_fire_one(t, now);
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
	if (vsched__mode_of(atomic_load_explicit(&t->vcpu->mode,
						 memory_order_relaxed)) ==
	    VSCHED_MODE_DESTROYED)
		return VSCHED_EDESTROYED;
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
	if ((fired = vsched__vcpu_allowed(v, VSCHED__C_VCPU_FIRE_TIMERS)))
		return fired;
	n = atomic_load_explicit(&v->ntimers_pub, memory_order_acquire);
	if (!n)
		return 0;
	now = v->vm->ops.now_ns(v->vm->ops.ctx);
	for (unsigned i = 0; i < n; i++)
		fired += vsched__timer_fire_one(v->timers[i], now);
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
