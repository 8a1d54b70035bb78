/* SPDX-License-Identifier: MIT */
/*
 * The mode word's protocol, out-of-line half (the inline half and the
 * encoding are lib/mode.h). doc/protocol.md is this file's comment map:
 * each function names the section it implements. Nothing here calls back
 * into the files that call it (the engine, the posters, the timers): only
 * the host operations and the OS layer.
 */
#include <sched.h>

#include "mode.h"

/* Spins on a WAIT acknowledgement before sleeping on the mode word. */
#define VSCHED__ACK_SPINS 2000

/* ------------------------------------------------------------------ */
/* protocol.md "The Dekker pair": the vCPU's entry and exit. */

static int check_own(const struct vsched_vcpu *v, uint32_t *m)
{
	if (!v)
		return VSCHED_EINVAL;
	*m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	if (vsched__mode_of(*m) == VSCHED_MODE_DESTROYED)
		return VSCHED_EDESTROYED;
	return 0;
}

/* vCPU thread. The entry row of the Dekker pair is inline
 * (vsched__vcpu_enter_fast(), <vsched/inline.h>): write the mode, full
 * barrier, read the requests, pairing with the barrier between setting
 * the bit and reading the mode in vsched_post(). These are its slow
 * paths; a cancelled entry backs out with vsched__mode_leave() (WAIT
 * acknowledgement). */
int vsched_vcpu_enter(struct vsched_vcpu *v)
{
	if (VSCHED__UNLIKELY(!v))
		return VSCHED_EINVAL;
	return vsched__vcpu_enter_fast(v);
}

/* Entered from anywhere but OUTSIDE_GUEST (only the vCPU's thread
 * moves it there). */
int vsched__vcpu_enter_refused(struct vsched_vcpu *v)
{
	uint32_t m;
	int rc = check_own(v, &m);

	if (rc)
		return rc;
	return VSCHED_ESTATE; /* the inline check saw another mode */
}

/* Requests `p` were pending after the barrier: back out before running
 * guest code; count each pending kind. */
int vsched__vcpu_enter_cancel(struct vsched_vcpu *v, uint64_t p)
{
	vsched__mode_leave(v, VSCHED_MODE_OUTSIDE_GUEST);
	VSCHED__TRACE2(entry_cancelled, v->id, p);
	vsched__count(&v->vs.cancelled_entries);
	while (p) {
		unsigned r = (unsigned)__builtin_ctzll(p);
		p &= p - 1;
		vsched__count(&v->vs.cancelled[r]);
	}
	return VSCHED_ENTRY_CANCELLED;
}

int vsched_vcpu_exit(struct vsched_vcpu *v)
{
	if (VSCHED__UNLIKELY(!v))
		return VSCHED_EINVAL;
	return vsched__vcpu_exit_fast(v);
}

/* Exit from outside guest mode. */
int vsched__vcpu_exit_refused(struct vsched_vcpu *v)
{
	uint32_t m;
	int rc = check_own(v, &m);

	if (rc)
		return rc;
	return VSCHED_ESTATE; /* the inline check saw another mode */
}

/* The exit's exchange saw ACK_WAITERS: release the WAIT posters, as
 * vsched__mode_leave() does. */
void vsched__vcpu_exit_wake(struct vsched_vcpu *v)
{
	v->vm->ops.wake((uint32_t *)&v->mode, v->vm->ops.ctx);
}

int vsched_vcpu_mode(const struct vsched_vcpu *v)
{
	if (!v)
		return VSCHED_EINVAL;
	return (int)vsched__mode_of(
		atomic_load_explicit(&v->mode, memory_order_relaxed));
}

/* ------------------------------------------------------------------ */
/* protocol.md "Kicks and wakeups": the decision, made by posters, kicks,
 * timer re-arms and waiter producers alike. */

int vsched__kick_decide(struct vsched_vcpu *v, struct vsched__sleeper *s,
			_Atomic uint64_t *wakeups, uint32_t m, unsigned flags)
{
	const struct vsched_host_ops *ops = &s->vm->ops;
	uint32_t seen;

	/*
	 * A failed CAS reloads m. A post retries only on the word it decided
	 * on (a weak CAS's spurious failure) or one that differs from it in
	 * ACK_WAITERS alone: any other change means the vCPU has left the
	 * entry or sleep it saw (another generation, another mode; a kick or
	 * wake by another thread), and its next entry or arm re-checks the
	 * pending word after its own barrier, which orders it after the
	 * post's bit. A kick or wake of that later entry or sleep would be
	 * spurious. Other events (vsched_vcpu_kick()'s has_event, a timer
	 * re-arm) follow the vCPU to whatever it does now: an entry does not
	 * re-check them.
	 */
	for (;;) {
		seen = m;
		switch (vsched__mode_of(m)) {
		case VSCHED_MODE_IN_GUEST:
			/* Only the poster that moves it to EXITING kicks. */
			if (atomic_compare_exchange_weak_explicit(
				    s->word, &m,
				    (m & ~VSCHED__MODE_MASK) |
					    VSCHED_MODE_EXITING_GUEST,
				    memory_order_seq_cst, memory_order_relaxed)) {
				vsched__count_shared(flags & VSCHED__KD_POST
							     ? &v->ps.kicks_sent
							     : &v->ps.event_kicks);
				VSCHED__TRACE1(kick, v->id);
				/* A callout (mode.h): never after
				 * vsched_vcpu_destroy() has returned. */
				if (ops->kick && vsched__callout_begin(s)) {
					ops->kick(v, ops->ctx);
					vsched__callout_end(s);
				}
				return 1;
			}
			if ((flags & VSCHED__KD_POST) &&
			    ((m ^ seen) & ~VSCHED__ACK_WAITERS))
				return 0;
			continue;
		case VSCHED_MODE_BLOCKED:
			if (flags & VSCHED_REQ_NO_WAKEUP)
				return 0;
			/* The winner moves the word back to running (so the
			 * sleeper's way back skips its store) and wakes it. */
			if (atomic_compare_exchange_weak_explicit(
				    s->word, &m,
				    (m & ~VSCHED__MODE_MASK) |
					    VSCHED_MODE_OUTSIDE_GUEST,
				    memory_order_seq_cst, memory_order_relaxed)) {
				vsched__count_shared(
					!v ? wakeups
					: flags & VSCHED__KD_POST ? &v->ps.wakeups
								  : &v->ps.event_wakeups);
				VSCHED__TRACE1(wakeup, v ? (int)v->id : -1);
				vsched__wake_sleeper(s);
				return 1;
			}
			if ((flags & VSCHED__KD_POST) &&
			    ((m ^ seen) & ~VSCHED__ACK_WAITERS))
				return 0;
			continue;
		default:
			/* Nothing to do: counted by deduction in
			 * vsched_vcpu_read_stats(), so that this common path adds
			 * no second atomic RMW. */
			return 0;
		}
	}
}

int vsched_vcpu_kick(struct vsched_vcpu *v)
{
	uint32_t m;

	if (!v)
		return VSCHED_EINVAL;
	/* Pairs with the block's barrier, as a post does: the event the
	 * caller made visible before this is seen by the re-check, or we see
	 * BLOCKED / IN_GUEST here. */
	vsched__mb();
	m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	if (vsched__mode_of(m) == VSCHED_MODE_DESTROYED)
		return VSCHED_EDESTROYED;
	vsched__kick_decide(v, &v->sl, NULL, m, 0); /* counted as an event */
	return 0;
}

void vsched__mode_rewake(struct vsched_vcpu *v)
{
	uint32_t m;

	/* The same pair as vsched_vcpu_kick(), but only a sleeper is woken:
	 * a vCPU in the guest reads its timers at its next exit. */
	vsched__mb();
	m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	if (vsched__mode_of(m) == VSCHED_MODE_BLOCKED)
		vsched__kick_decide(v, &v->sl, NULL, m, 0);
}

/* ------------------------------------------------------------------ */
/* protocol.md "WAIT acknowledgement", poster side. Any thread but the
 * vCPU's: wait until a vCPU seen in guest mode at `seen` has left that
 * entry (vsched__mode_leave() wakes us). */

void vsched__mode_wait_ack(struct vsched_vcpu *v, uint32_t seen)
{
	const struct vsched_host_ops *ops = &v->vm->ops;
	uint32_t gen = seen & VSCHED__GEN_MASK, m;

	if (!vsched__in_guest(seen))
		return;
	for (unsigned i = 0;; i++) {
		m = atomic_load_explicit(&v->mode, memory_order_acquire);
		if (!vsched__in_guest(m) || (m & VSCHED__GEN_MASK) != gen)
			return;
		if (i < VSCHED__ACK_SPINS) {
			vsched__relax();
			continue;
		}
		if (!(m & VSCHED__ACK_WAITERS) &&
		    !atomic_compare_exchange_weak(&v->mode, &m,
						  m | VSCHED__ACK_WAITERS))
			continue;
		ops->wait((uint32_t *)&v->mode, m | VSCHED__ACK_WAITERS,
			  VSCHED_DEADLINE_NONE, ops->ctx);
	}
}

/* ------------------------------------------------------------------ */
/* protocol.md "The wake mechanism" and
 * "Destroy against a poster in mid-wake". */

/*
 * Called by the poster that won BLOCKED -> OUTSIDE_GUEST. The mechanism is
 * the one the sleeper sleeps on for that very arm: the owner publishes it
 * in sleep_evfd before the BLOCKED exchange whose value our CAS read (an
 * fd_add that sets use_evfd meanwhile changes the next arm, never this
 * one: protocol.md "The wake mechanism").
 *
 * The wake is a callout (mode.h): vsched_vcpu_destroy() publishes
 * DESTROYED and waits for callouts in flight before it closes the eventfd
 * and returns, so the write never lands in a closed, reused fd number and
 * a custom wake callback never runs after destroy returned.
 */
void vsched__wake_sleeper(struct vsched__sleeper *s)
{
	if (!vsched__callout_begin(s))
		return; /* destroyed: nobody sleeps there any more */
	/* For the owner's wake-cost estimate (vsched__learn_wake_cost()). */
	atomic_store_explicit(&s->wake_stamp, s->vm->ops.now_ns(s->vm->ops.ctx),
			      memory_order_relaxed);
	if (atomic_load_explicit(&s->sleep_evfd, memory_order_acquire))
		vsched__os_signal(&s->os);
	else
		s->vm->ops.wake((uint32_t *)s->word, s->vm->ops.ctx);
	vsched__callout_end(s);
}

/* After DESTROYED is published: wait for the wakers' callouts still in
 * flight (a poster preempted between its CAS and its write or callback). */
void vsched__sleeper_quiesce(struct vsched__sleeper *s)
{
	while (atomic_load_explicit(&s->callouts, memory_order_seq_cst))
		sched_yield();
	VSCHED__TSAN_ACQUIRE(s);
}
