/* SPDX-License-Identifier: MIT */
/*
 * The state contract: for every public call whose validity depends on the
 * state of its object (a vCPU's mode, a waiter's state word), the states
 * that allow it, written once. vsched__allowed() enforces it at the call's
 * entry; the inline paths (<vsched/inline.h>: enter, exit, service) test
 * the same sets; each header states its rows; test_contract drives every
 * call in every state against this table.
 *
 * A call outside its states is refused, never half done: VSCHED_EDESTROYED
 * when the object is destroyed, VSCHED_ESTATE otherwise. POLLING and
 * BLOCKED mean the owner thread is inside vsched_vcpu_block() or
 * vsched_waiter_wait(), so a call that only the owner may make (it changes
 * what the sleep uses, or ends the object) is another thread's misuse
 * there. Calls not in the table (create, the getters, stats, post and kick
 * on a live object) are valid in every state but DESTROYED, which the call
 * itself reports. Self-contained (public headers only), so that the
 * unit test drives the same table. What the owner's own thread may not do
 * from inside the engine or a service pass (the `in_engine` and
 * `in_service` flags: doc/protocol.md, "Destroy against a sleeper") is
 * refused beside this table, not in it.
 */
#ifndef VSCHED__CONTRACT_H
#define VSCHED__CONTRACT_H

#include <stdint.h>

#include <vsched/vsched.h> /* enum vsched_mode, the hot layout */

#define VSCHED__IN(mode) (1u << VSCHED_MODE_##mode)
/* The owner thread is outside the engine. */
#define VSCHED__AWAKE                                                         \
	(VSCHED__IN(OUTSIDE_GUEST) | VSCHED__IN(IN_GUEST) |                    \
	 VSCHED__IN(EXITING_GUEST))
/* Anything but DESTROYED. */
#define VSCHED__LIVE (VSCHED__AWAKE | VSCHED__IN(POLLING) | VSCHED__IN(BLOCKED))

/*
 * X(call, name, states). vCPU calls first, then waiter calls (a waiter's
 * state word is OUTSIDE_GUEST, POLLING or BLOCKED; it has no guest modes
 * and no DESTROYED: destroy frees it).
 */
#define VSCHED__CONTRACT(X)                                                   \
	X(VCPU_ENTER, "vsched_vcpu_enter", VSCHED__IN(OUTSIDE_GUEST))          \
	X(VCPU_EXIT, "vsched_vcpu_exit",                                       \
	  VSCHED__IN(IN_GUEST) | VSCHED__IN(EXITING_GUEST))                    \
	X(SERVICE, "vsched_service", VSCHED__IN(OUTSIDE_GUEST))                \
	X(VCPU_BLOCK, "vsched_vcpu_block", VSCHED__IN(OUTSIDE_GUEST))          \
	X(VCPU_FD_ADD, "vsched_vcpu_fd_add", VSCHED__AWAKE)                    \
	X(VCPU_FD_DEL, "vsched_vcpu_fd_del", VSCHED__AWAKE)                    \
	X(VCPU_SET_POLL, "vsched_vcpu_set_poll", VSCHED__LIVE)                 \
	X(VCPU_SET_GUEST_POLL, "vsched_vcpu_set_guest_poll", VSCHED__LIVE)     \
	X(VCPU_KICK, "vsched_vcpu_kick", VSCHED__LIVE)                         \
	X(VCPU_FIRE_TIMERS, "vsched_vcpu_fire_timers", VSCHED__LIVE)           \
	X(POST, "vsched_post", VSCHED__LIVE)                                   \
	X(VCPU_DESTROY, "vsched_vcpu_destroy", VSCHED__IN(OUTSIDE_GUEST))      \
	X(WAITER_WAIT, "vsched_waiter_wait", VSCHED__IN(OUTSIDE_GUEST))        \
	X(WAITER_FD_ADD, "vsched_waiter_fd_add", VSCHED__IN(OUTSIDE_GUEST))    \
	X(WAITER_FD_DEL, "vsched_waiter_fd_del", VSCHED__IN(OUTSIDE_GUEST))    \
	X(WAITER_SET_POLL, "vsched_waiter_set_poll", VSCHED__LIVE)             \
	X(WAITER_KICK, "vsched_waiter_kick", VSCHED__LIVE)                     \
	X(WAITER_DESTROY, "vsched_waiter_destroy", VSCHED__IN(OUTSIDE_GUEST))

enum vsched__call {
#define VSCHED__CALL_ENUM(call, name, states) VSCHED__C_##call,
	VSCHED__CONTRACT(VSCHED__CALL_ENUM)
#undef VSCHED__CALL_ENUM
	VSCHED__NCALLS
};

/* The states (a mask of 1 << enum vsched_mode) that allow `call`. */
static inline unsigned vsched__call_states(enum vsched__call call)
{
	static const unsigned char states[VSCHED__NCALLS] = {
#define VSCHED__CALL_STATES(call, name, st) [VSCHED__C_##call] = (st),
		VSCHED__CONTRACT(VSCHED__CALL_STATES)
#undef VSCHED__CALL_STATES
	};
	return states[call];
}

/* The same set in <vsched/inline.h>'s VSCHED__MODE_IN() form (indexed by
 * the word's low 5 bits, so repeated for each ACK_WAITERS/generation
 * combination). */
#define VSCHED__MODE_SET(st) ((uint32_t)(st) * 0x01010101u)

/* Is `call` allowed on an object whose state word reads `m`? 0,
 * VSCHED_EDESTROYED or VSCHED_ESTATE. Any thread; the answer may be stale
 * unless the caller owns the transitions it excludes (see each call). */
static inline int vsched__allowed(enum vsched__call call, uint32_t m)
{
	unsigned mode = m & VSCHED__MODE_MASK;

	if ((vsched__call_states(call) >> mode) & 1u)
		return 0;
	return mode == VSCHED_MODE_DESTROYED ? VSCHED_EDESTROYED : VSCHED_ESTATE;
}

/* vsched__allowed() on a vCPU's mode word, read now (relaxed). */
static inline int vsched__vcpu_allowed(struct vsched_vcpu *v,
				       enum vsched__call call)
{
	return vsched__allowed(call, __atomic_load_n(&vsched__hot(v)->mode,
						     __ATOMIC_RELAXED));
}

#endif /* VSCHED__CONTRACT_H */
