/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of a generic waiter with sleep hooks (lib/block.c engine(),
 * struct vsched_waiter_config): virtio-style notification suppression. The
 * consumer (an I/O thread) polls the ring, then before_sleep arms the VMM's
 * own needs-kick flag, then the engine arms BLOCKED, full barrier,
 * re-checks the ring, and sleeps in epoll_pwait on the ioeventfd; after
 * every sleep, after_sleep clears the flag and the consumer drains the ring.
 * The ioeventfd is edge-triggered and never read (lib/fds.c): a ring is
 * consumed by the epoll_pwait that reports it, the sleep's or any fd look
 * of a poll window (the waiter's other fds), so a ring that comes while
 * the consumer polls may be gone before it sleeps: the re-check, not the
 * ring, must find what was published before the flag was seen armed.
 * The producer (the guest) publishes an entry, full barrier, reads the
 * flag, and notifies the ioeventfd only when it is set. Memory is
 * sequentially consistent here: the store->load pair and its barriers are
 * kick.pml's; this model is about where before_sleep runs.
 *
 * Property: no lost wakeup: whenever everything is stuck with the consumer
 * asleep, the ring is empty (an invalid end state otherwise).
 *
 * Broken variants (must fail):
 *   -DHOOK_AFTER_RECHECK  before_sleep runs after the engine's re-check
 *                         (the flag is armed too late: a producer that
 *                         published and read the flag in between is
 *                         never seen)
 *   -DLOOK_AFTER_RECHECK  an fd look between the re-check and the sleep
 *                         drops the ring it consumes (a timed sleep's look
 *                         after its early wakeup, lib/sleep.c, must take
 *                         it as the sleep would: the model's default look
 *                         there does, and passes)
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
		/* Poll window: the condition, and an fd look that may
		 * consume a pending ring (edge-triggered). */
		if
		:: ioeventfd = 0
		:: skip
		fi;
		if
		:: ring > 0 -> atomic { ring--; consumed++ }
		:: else ->
#ifndef HOOK_AFTER_RECHECK
			needs_kick = 1;             /* before_sleep */
#endif
			/* BLOCKED; full barrier; re-check */
recheck:		if
			:: ring > 0 -> skip
			:: else ->
#ifdef HOOK_AFTER_RECHECK
				needs_kick = 1;
#endif
				/* A timed sleep's look after its early wakeup:
				 * a ring it consumes is taken as the sleep's
				 * (the engine looks at the condition and arms
				 * again, the flag still armed), unless broken. */
				if
				:: atomic { ioeventfd == 1 -> ioeventfd = 0 };
#ifdef LOOK_AFTER_RECHECK
					skip
#else
					goto recheck
#endif
				:: skip
				fi;
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
