/* SPDX-License-Identifier: MIT */
/*
 * The timer object (lib/timer.c's file comment explains its word), shared
 * by the timers (lib/timer.c), the expiry-cancellation policy
 * (lib/cancel.c) and the timer service (lib/tservice.c).
 */
#ifndef VSCHED__TIMERS_H
#define VSCHED__TIMERS_H

#include "internal.h"
#include "mode.h"

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
	/* ADAPTIVE estimates: written by the vCPU thread, stored and loaded
	 * whole (lib/cancel.c), as vsched_timer_read_stats() reads them on
	 * any thread */
	uint64_t est_read, est_spur;
	uint32_t n_checked, n_stale; /* decayed counts, fixed point x 256 */
	bool reading;
	/* The last delivery was counted in stale_delivered already (KEEP
	 * delivered an expiry it knew stale): the report_spurious() of it
	 * does not count it twice (and clears this). The vCPU thread's, as
	 * both calls are. */
	bool last_counted_stale;
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
	/* The -errno of the last failed timerfd_settime (0: none): the
	 * deadline was not programmed. dispatch() clears it, programs
	 * afresh and returns it if it fails again; run() returns it. */
	_Atomic int err;
	/* A run() is active (its loop owns the service), or a destroy
	 * claimed it: a second run() and a destroy are refused with
	 * VSCHED_ESTATE. */
	_Atomic bool running;
	/* Dispatches in progress: a destroy from a callback of one (a kick
	 * callout of its posts) is refused, as from run(). */
	_Atomic unsigned dispatching;
	/* An injected clock that stood still between two dispatches: the
	 * least interval a programming asks for while the clock still
	 * reads `still_at` (0: none), and the clock the last dispatch read
	 * (dispatch's, one thread at a time). */
	_Atomic uint64_t still_ns, still_at;
	uint64_t last_now;
};

static inline uint64_t deadline_of(uint64_t w)
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
static inline uint64_t fire_deadline(uint64_t w)
{
	if (w & (EXPIRED | OFF))
		return NONE;
	return deadline_of(w) ? deadline_of(w) : NONE;
}

static inline bool can_fire(uint64_t w, uint64_t now)
{
	uint64_t d = fire_deadline(w);
	return d != NONE && d <= now;
}

/* The output line (LEVEL): armed, gate open, deadline reached. */
static inline bool line_high(uint64_t w, uint64_t now)
{
	return deadline_of(w) && !(w & OFF) && deadline_of(w) <= now;
}

/* Post the expiry; counted and traced only when the post was accepted (a
 * destroyed vCPU refuses it). Returns 1 if it was. A blocked vCPU ends its
 * block at its timers' deadlines whatever their kind (it sleeps to them and
 * posts them itself), so an expiry posted by another thread (an arm or an
 * unmask with the deadline passed, the service) wakes it even when the
 * kind is VSCHED_REQ_NO_WAKEUP, whose post alone would not: the same
 * re-wake as an arm of a future deadline. */
static inline int post_expiry(struct vsched_timer *t)
{
	if (vsched_post(t->vcpu, t->kind) != 0)
		return 0;
	if (VSCHED__UNLIKELY(t->vcpu->vm->table.by_rank[t->rank].flags &
			     VSCHED_REQ_NO_WAKEUP))
		vsched__mode_rewake(t->vcpu);
	vsched__count_shared(&t->st.fired);
	VSCHED__TRACE2(timer_fire, t->vcpu->id, t->kind);
	return 1;
}

/* LEVEL, latched, gate open, and the line low at `now`: the VM's clock
 * stepped back below CVAL since the post (every other fall clears EXPIRED
 * in its own RMW). Judged on a clock read after loading `w`, this is a
 * fall; on an older clock it is only a hint to look again. */
static inline bool level_fell(const struct vsched_timer *t, uint64_t w, uint64_t now)
{
	return t->semantics == VSCHED_TIMER_LEVEL && (w & (EXPIRED | OFF)) == EXPIRED &&
	       deadline_of(w) > now;
}

/* Load the word, read the clock, and if level_fell(): unlatch, so that the
 * next rise (the clock passing CVAL again) posts, and tell the service and
 * a sleeping vCPU of the deadline, as an arm into the future does. Left
 * latched, the timer could never post again (fire_deadline() is NONE). A
 * concurrent arm or set_ctl wins the CAS. Any thread (lib/tservice.c). */
void vsched__timer_unlatch_fallen(struct vsched_timer *t);

/* Post timer `t`'s expiry if it is due at `now` and not yet posted: 1 if
 * it posted. A latched LEVEL line found low is unlatched (a clock step
 * back: it can post again at CVAL). Any thread. */
static inline int vsched__timer_fire_one(struct vsched_timer *t, uint64_t now)
{
	uint64_t w = atomic_load_explicit(&t->word, memory_order_acquire);
	while (can_fire(w, now)) {
		if (atomic_compare_exchange_weak_explicit(&t->word, &w, w | EXPIRED,
							  memory_order_seq_cst,
							  memory_order_acquire)) {
			return post_expiry(t);
		}
	}
	/* `now` may predate the load: confirmed on a fresh clock. */
	if (VSCHED__UNLIKELY(level_fell(t, w, now)))
		vsched__timer_unlatch_fallen(t);
	return 0;
}

/* The VM's timer service, if any, learns deadline `d` (lib/tservice.c). */
void vsched__service_note(struct vsched_vm *vm, uint64_t d);
/* Free a service already unpublished (lib/tservice.c). */
void vsched__service_free(struct vsched_timer_service *s);

#endif /* VSCHED__TIMERS_H */
