/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of a generic waiter with sleep hooks (lib/block.c engine(),
 * struct vsched_waiter_config): virtio-style notification suppression. The
 * consumer (an I/O thread) polls the ring, then before_sleep arms the VMM's
 * own needs-kick flag, then the engine arms BLOCKED, full barrier,
 * re-checks the ring, and sleeps in epoll_pwait on the ioeventfd; after
 * every sleep, after_sleep clears the flag and the consumer drains the ring.
 * The producer (the guest) publishes an entry, full barrier, reads the
 * flag, and notifies the ioeventfd only when it is set. Memory is
 * sequentially consistent here: the store->load pair and its barriers are
 * kick.pml's; this model is about where before_sleep runs.
 *
 * Property: no lost wakeup: whenever everything is stuck with the consumer
 * asleep, the ring is empty (an invalid end state otherwise).
 *
 * Broken variant (must fail):
 *   -DHOOK_AFTER_RECHECK  before_sleep runs after the engine's re-check
 *                         (the flag is armed too late: a producer that
 *                         published and read the flag in between is
 *                         never seen)
 */

#define NP 2 /* entries the producer publishes */

byte ring;      /* published, not yet consumed entries */
bit needs_kick; /* the VMM's flag, armed by before_sleep */
bit ioeventfd;  /* the notification fd is readable */
bit asleep;
byte consumed;

proctype consumer()
{
	do
	:: consumed == NP -> break
	:: else ->
		/* Poll window: the condition only. */
		if
		:: ring > 0 -> atomic { ring--; consumed++ }
		:: else ->
#ifndef HOOK_AFTER_RECHECK
			needs_kick = 1;             /* before_sleep */
#endif
			/* BLOCKED; full barrier; re-check */
			if
			:: ring > 0 -> skip
			:: else ->
#ifdef HOOK_AFTER_RECHECK
				needs_kick = 1;
#endif
				atomic { asleep = 1; (ioeventfd == 1) };
				atomic { asleep = 0; ioeventfd = 0 }
			fi;
			needs_kick = 0              /* after_sleep */
		fi
	od
}

proctype producer()
{
	byte i = 0;
	do
	:: i < NP ->
		i++;
		ring++;        /* publish; full barrier */
		if
		:: needs_kick -> ioeventfd = 1
		:: else -> skip
		fi
	:: else -> break
	od
}

init
{
	atomic { run consumer(); run producer() }
}
