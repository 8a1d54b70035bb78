/* SPDX-License-Identifier: MIT */
/*
 * Expiry cancellation (lib/timers.h): when a timer's request is serviced,
 * its policy decides whether a stale expiry (the guest re-armed the timer
 * into the future since it fired) is delivered or cancelled; ADAPTIVE
 * reads the guest's deadline only when the measured costs say so
 * (doc/timers.md).
 */
#include <string.h>

#include "abi.h"
#include "mode.h"
#include "timers.h"

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

/* The ADAPTIVE estimates (est_read, est_spur, n_checked, n_stale) have one
 * writer, the vCPU thread, and a reader on any thread,
 * vsched_timer_read_stats(): each is stored whole (relaxed atomic store of
 * a value computed from the writer's own plain reads) and loaded whole. */
#define PUT(field, v) __atomic_store_n(&(field), (v), __ATOMIC_RELAXED)
#define GET(field) __atomic_load_n(&(field), __ATOMIC_RELAXED)

/* a x b, saturating: the costs are the caller's, up to 2^64 - 1 ns. */
static uint64_t mul_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

static void adapt(struct vsched_timer *t)
{
	/* Read when stale share x spurious cost > read cost. Before any
	 * evidence, keep reading (it is how the costs get measured). With
	 * no timer_read there is nothing to read (timer.h). */
	if (!t->vcpu->vm->ops.timer_read)
		t->reading = false;
	else if (t->n_checked < 256 * 4)
		t->reading = true;
	else
		t->reading = mul_sat(t->n_stale, t->est_spur) >
			     mul_sat(t->n_checked, t->est_read);
	atomic_store_explicit(&t->st.reading, t->reading, memory_order_relaxed);
}

static void observe(struct vsched_timer *t, bool stale)
{
	/* Decaying counts (x256), half-life ~ 45 observations. */
	uint32_t checked = t->n_checked, nstale = t->n_stale;

	checked -= checked >> 6;
	nstale -= nstale >> 6;
	checked += 256;
	if (stale)
		nstale += 256;
	PUT(t->n_checked, checked);
	PUT(t->n_stale, nstale);
}

int vsched_timer_report_spurious(struct vsched_timer *t, uint64_t cost_ns)
{
	if (!t)
		return VSCHED_EINVAL;
	/* KEEP counted the delivery it knew stale when it made it: this
	 * report is of that one (taken once), any other counts. */
	if (t->last_counted_stale)
		t->last_counted_stale = false;
	else
		vsched__count(&t->st.stale_delivered);
	/* The delivery was observed as fresh; it was stale after all. */
	uint32_t nstale = t->n_stale + 256;

	PUT(t->n_stale, nstale > t->n_checked ? t->n_checked : nstale);
	if (cost_ns)
		PUT(t->est_spur, t->est_spur - t->est_spur / 8 + cost_ns / 8);
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
	t->last_counted_stale = false;
	w = atomic_load_explicit(&t->word, memory_order_acquire);
	now = ops->now_ns(ops->ctx);
	/* Stale in vsched's own view: re-armed or disarmed since the post, or
	 * (level) no longer asserted. */
	stale = !(w & EXPIRED) ||
		(t->semantics == VSCHED_TIMER_LEVEL && !line_high(w, now));
	/* LEVEL, latched but the line low: the VM's clock stepped back below
	 * CVAL since the post. Unlatched whether this expiry is dropped or,
	 * KEEP, delivered as a spurious one. */
	if (level_fell(t, w, now))
		vsched__timer_unlatch_fallen(t);
	if (t->cancel == VSCHED_CANCEL_KEEP) {
		if (stale) {
			vsched__count(&t->st.stale_delivered);
			t->last_counted_stale = true;
		}
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
	/* An injected clock may step back during the read: that read took
	 * no time, not 2^64 ns (which would stop ADAPTIVE's reads for good:
	 * it learns est_read only from reads). */
	const uint64_t took = t1 > t0 ? t1 - t0 : 0;
	vsched__count(&t->st.reads);
	atomic_store_explicit(&t->st.read_ns,
			      atomic_load_explicit(&t->st.read_ns, memory_order_relaxed) +
				      took,
			      memory_order_relaxed);
	/* One sample moves the estimate at most to about twice itself
	 * (7/8 of it plus itself): a read that took far longer than the
	 * estimate (its thread preempted, the VM's clock jumping forward
	 * during it) would otherwise stop ADAPTIVE's reads for good, as a
	 * backward step would. A lasting rise still gets through in a few
	 * reads (x1.875 a read). */
	const uint64_t cap = mul_sat(t->est_read, 8);
	PUT(t->est_read, t->est_read - t->est_read / 8 + (took < cap ? took : cap) / 8);
	/* The word changed during the read (the host's timer_read armed the
	 * timer to bring vsched's view in line, or another writer did):
	 * judge the word as it is now, without a second read. Stale in
	 * vsched's own view: cancelled, and learnt as a stale read. Judged
	 * on the old word, the delivery's consume CAS failed on the new one
	 * and its post was delivered a second time at the next service (an
	 * outside trial's double expiry); read again (this fix's first
	 * version), the callback's side effects repeated and ADAPTIVE lost
	 * its stale reads (a review). */
	{
		const uint64_t w2 = atomic_load_explicit(&t->word, memory_order_acquire);
		if (w2 != w) {
			w = w2;
			if (!(w & EXPIRED) || (t->semantics == VSCHED_TIMER_LEVEL &&
					       !line_high(w, t1))) {
				if (!rc)
					observe(t, true);
				if (t->cancel == VSCHED_CANCEL_ADAPTIVE)
					adapt(t);
				vsched__count(&t->st.stale_cancelled);
				VSCHED__TRACE2(timer_cancel, v->id, t->kind);
				return false;
			}
		}
	}
	if (rc) {
		/* ADAPTIVE's choice only: under CANCEL its stats say 0 */
		if (t->cancel == VSCHED_CANCEL_ADAPTIVE)
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
			vsched__service_note(v->vm, fire_deadline(n));
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
	o->est_read_ns = GET(t->est_read);
	o->est_spurious_ns = GET(t->est_spur);
	const uint64_t checked = GET(t->n_checked), nstale = GET(t->n_stale);
	/* Loaded apart: a decay between the two loads may leave the stale
	 * count above the checked one. */
	o->est_stale_permille = !checked ? 0 : nstale >= checked ? 1000
					 : (unsigned)(nstale * 1000 / checked);
	return 0;
}
