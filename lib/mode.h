/* SPDX-License-Identifier: MIT */
/*
 * The mode word and its protocol (doc/protocol.md), the inline half: the
 * encoding, the transitions the owner thread makes on its hot paths, and a
 * waker's callout. The out-of-line half (enter/exit, the kick decision, the
 * wake of a sleeper, destroy's drain) is lib/mode.c. Each function names
 * the protocol.md section it implements.
 */
#ifndef VSCHED__MODE_H
#define VSCHED__MODE_H

#include "internal.h"

/*
 * protocol.md "The mode word". 32 bits, so that it is also the futex word:
 *   bits 0-2  enum vsched_mode
 *   bit  3    ACK_WAITERS: a WAIT poster sleeps on this word until the vCPU
 *             leaves guest mode
 *   bits 4-31 entry generation, incremented by every vsched_vcpu_enter();
 *             a WAIT poster that saw IN_GUEST at generation g is
 *             acknowledged once the word shows another generation or a
 *             mode outside the guest.
 * Only the vCPU's own thread changes the generation. Posters change the word
 * only with a CAS from IN_GUEST (to EXITING_GUEST), from BLOCKED (to
 * OUTSIDE_GUEST, the wakeup) or to set ACK_WAITERS while in guest mode, so
 * every transition the vCPU makes out of those states is an RMW (an
 * exchange out of the guest; a CAS into and out of BLOCKED). Destroy
 * changes it only with a CAS from OUTSIDE_GUEST to DESTROYED.
 * A generic waiter's state word has the same encoding (no generation).
 */
/* VSCHED__MODE_MASK, VSCHED__ACK_WAITERS, VSCHED__GEN_ONE and
 * VSCHED__GEN_MASK are <vsched/inline.h>'s: the encoding is ABI. */

static inline unsigned vsched__mode_of(uint32_t m)
{
	return m & VSCHED__MODE_MASK;
}

static inline bool vsched__in_guest(uint32_t m)
{
	unsigned mode = vsched__mode_of(m);
	return mode == VSCHED_MODE_IN_GUEST || mode == VSCHED_MODE_EXITING_GUEST;
}

/* Word `m` with its mode replaced by `mode`, its generation kept. */
static inline uint32_t vsched__mode_with(uint32_t m, unsigned mode)
{
	return (m & VSCHED__GEN_MASK) | mode;
}

/* protocol.md "WAIT acknowledgement". vCPU thread: move the vCPU out of
 * IN_GUEST/EXITING/BLOCKED/POLLING into `mode`, keeping the generation, and
 * release WAIT posters. An exchange (full barrier). Returns the old word. */
static inline uint32_t vsched__mode_leave(struct vsched_vcpu *v, unsigned mode)
{
	uint32_t m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	uint32_t old = atomic_exchange_explicit(
		&v->mode, vsched__mode_with(m, mode), memory_order_seq_cst);
	if (old & VSCHED__ACK_WAITERS)
		v->vm->ops.wake((uint32_t *)&v->mode, v->vm->ops.ctx);
	return old;
}

/* protocol.md "The Dekker pair", sleeper side. Owner thread: publish
 * `blocked` (a BLOCKED word), then the full barrier; the caller re-checks
 * its reason to run next, which pairs with the poster's barrier between
 * setting its bit and reading the word. Returns the word it replaced
 * (protocol.md "Destroy against a sleeper"). */
static inline uint32_t vsched__mode_arm(struct vsched__sleeper *s,
					uint32_t blocked)
{
	/* A CAS from the owner's own OUTSIDE_GUEST word: only a destroy
	 * changes it meanwhile, and DESTROYED is then never overwritten,
	 * not even for a moment a poster could see (protocol.md "Destroy
	 * against a sleeper"). */
	uint32_t old = vsched__mode_with(blocked, VSCHED_MODE_OUTSIDE_GUEST);
	atomic_compare_exchange_strong_explicit(s->word, &old, blocked,
						memory_order_seq_cst,
						memory_order_seq_cst);
	vsched__mb_after_rmw();
	return old;
}

/* protocol.md "The Dekker pair", poll row. Owner thread: POLLING and back.
 * Posters do nothing for POLLING, so plain stores suffice. */
static inline void vsched__mode_set_relaxed(struct vsched__sleeper *s,
					    uint32_t m, unsigned mode)
{
	atomic_store_explicit(s->word, vsched__mode_with(m, mode),
			      memory_order_relaxed);
}

/* protocol.md "The way back from a sleep". Owner thread, word armed at
 * `blocked`: leave BLOCKED ourselves (timeout, signal, fd), the slow way
 * back, a CAS (store + full barrier). Returns the old word: not `blocked`
 * means a poster raced us and already woke us. */
static inline uint32_t vsched__mode_leave_blocked(struct vsched__sleeper *s,
						  uint32_t blocked)
{
	uint32_t old = blocked;

	vsched__count(&s->hs.stores);
	/* A CAS from `blocked`: it fails only when a waker won the word
	 * first, and a destroy that followed that waker is kept. */
	atomic_compare_exchange_strong_explicit(
		s->word, &old, vsched__mode_with(blocked, VSCHED_MODE_OUTSIDE_GUEST),
		memory_order_seq_cst, memory_order_seq_cst);
	return old;
}

/* protocol.md "The way back from a sleep". Owner thread, woken by a poster:
 * it already moved the word back to OUTSIDE_GUEST, so the way back needs
 * no store and no barrier (the powerpc idle fix). */
static inline void vsched__mode_woken(struct vsched__sleeper *s)
{
	vsched__count(&s->hs.skips);
}

/* Owner thread, word armed at `blocked`: still asleep as far as wakers
 * know? (Acquire: a waker's writes before its CAS are seen.) */
static inline bool vsched__mode_still(const struct vsched__sleeper *s,
				      uint32_t blocked)
{
	return atomic_load_explicit(s->word, memory_order_acquire) == blocked;
}

/*
 * protocol.md "Destroy against a poster in mid-wake". A waker's callout:
 * what a poster does after it won the mode word and that touches state
 * vsched_vcpu_destroy() tears down or hands back to the VMM (the kick
 * eventfd write, the `kick` and `wake` host callbacks). The waker counts
 * itself in, then re-reads the word and skips the callout once it says
 * DESTROYED; destroy publishes DESTROYED, then waits for the count to drain
 * (vsched__sleeper_quiesce()). Both sides are seq_cst, a Dekker pair:
 * either the waker sees DESTROYED, or destroy sees it counted and waits.
 * test/model/sleeper.pml, variants NO_GRACE_PERIOD (destroy does not wait)
 * and NO_DESTROYED_CHECK (the waker does not re-read).
 */
static inline bool vsched__callout_begin(struct vsched__sleeper *s)
{
	atomic_fetch_add_explicit(&s->callouts, 1, memory_order_seq_cst);
	/* The store-load fence after the RMW, as the post's: the compilers
	 * map a seq_cst fetch_add to an interlocked-access instruction alone
	 * on s390x (laa), which <vsched/arch/s390x.h> holds is no barrier by
	 * itself (the kernel's _barrier atomics follow it with bcr 14,0).
	 * Free on x86-64; on the callout path only (a syscall or a callback
	 * follows). */
	vsched__mb_after_rmw();
	if (vsched__mode_of(atomic_load_explicit(s->word, memory_order_seq_cst)) ==
	    VSCHED_MODE_DESTROYED) {
		atomic_fetch_sub_explicit(&s->callouts, 1, memory_order_release);
		return false;
	}
	return true;
}

static inline void vsched__callout_end(struct vsched__sleeper *s)
{
	VSCHED__TSAN_RELEASE(s); /* destroy's wait, for TSan */
	atomic_fetch_sub_explicit(&s->callouts, 1, memory_order_release);
}

/* protocol.md "Kicks and wakeups". Any thread, after the barrier that
 * follows its event (a post's bit, a kick's has_event, a timer re-arm, a
 * waiter's condition): the decision on the mode word `m` read after that
 * barrier. Kick an IN_GUEST vCPU (v non-NULL), wake a BLOCKED sleeper.
 * Returns 1 if it kicked or woke. A vCPU's kick or wakeup is counted in its
 * ps counters: as a post's when `flags` has VSCHED__KD_POST, else as an
 * event's (`wakeups` is then unused); a generic waiter's (v NULL) wakeup in
 * `wakeups`. VSCHED_REQ_NO_WAKEUP in `flags`: never wake a sleeper. */
#define VSCHED__KD_POST 0x80000000u
_Static_assert(!(VSCHED__REQ_FLAGS & VSCHED__KD_POST),
	       "VSCHED__KD_POST shares the flags word with the request flags");
int vsched__kick_decide(struct vsched_vcpu *v, struct vsched__sleeper *s,
			_Atomic uint64_t *wakeups, uint32_t m, unsigned flags);

/* protocol.md "Kicks and wakeups" (a timer re-arm). Any thread, after the
 * change that moves vCPU v's earliest deadline: wake it if it sleeps in
 * vsched, so that it recomputes its deadline; counted as an event wakeup.
 * Includes the full barrier. */
void vsched__mode_rewake(struct vsched_vcpu *v);

/* protocol.md "WAIT acknowledgement", poster side. Any thread but v's:
 * wait until v, seen in guest mode at word `seen`, has left that entry. */
void vsched__mode_wait_ack(struct vsched_vcpu *v, uint32_t seen);

/* protocol.md "The wake mechanism". Any thread,
 * by the waker that won BLOCKED -> OUTSIDE_GUEST: wake the sleeper on the
 * mechanism it sleeps on, as a callout. */
void vsched__wake_sleeper(struct vsched__sleeper *s);

/* protocol.md "Destroy against a poster in mid-wake". After the sleeper's
 * word says DESTROYED: wait until no waker is inside a callout, so that
 * its eventfd can be closed and no callback runs after destroy returns. */
void vsched__sleeper_quiesce(struct vsched__sleeper *s);

#endif /* VSCHED__MODE_H */
