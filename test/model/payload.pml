/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of a destroyed vCPU's payloads: vsched_vcpu_destroy() against
 * payload posters (lib/request.c post_rank() and vsched__drain_payloads(),
 * lib/vcpu.c vsched_vcpu_destroy()). Memory is sequentially consistent:
 * the poster's bit-then-mode and destroy's CAS-then-drain are the
 * store->load pair that kick.pml models with its fences.
 *
 * The queue is liburcu's wfcq, as slots in enqueue order: an enqueue takes
 * the next slot by exchanging the tail (XCHG), then links it (LINKED); a
 * dequeue takes the slot at the head, which must be linked (a non-blocking
 * dequeue gives up at an unlinked one: every slot behind it waits; the
 * blocking one waits for the link), and a dequeue's read of the head and
 * its advance are separate steps (liburcu's __ dequeues need one consumer
 * at a time).
 *
 * A poster checks the word (DESTROYED: refused, nothing queued), queues its
 * payload, sets its bit and reads the word (the post's barrier). It has
 * then accepted the payload (the post returns 0); if the word said
 * DESTROYED, it drains the queue itself before it returns. Destroy CASes
 * the word to DESTROYED and drains. Drains take turns on `draining`.
 *
 * Properties (assertions):
 *  - no slot is taken twice (one consumer at a time);
 *  - when destroy returns, every payload whose post read a live word has
 *    been handed to payload_drop (those posts never drain: the destroy's
 *    drain is their only way back before the VM's destroy);
 *  - when everything has returned, every accepted payload has been
 *    handed back, once;
 *  - no process is left waiting (Spin's invalid end states).
 *
 * Variants (each must fail):
 *   -DNONBLOCK_DRAIN  the drain's dequeue gives up at an unlinked slot (the
 *                     code before session 21): a poster paused between
 *                     its exchange and its link strands the payloads
 *                     behind it past destroy's return
 *   -DNO_SELF_DRAIN   a post that read DESTROYED after queueing returns 0
 *                     and leaves its payload (the code before session
 *                     21): queued after the destroy's drain, nobody takes
 *                     it back
 *   -DNO_DRAIN_TURNS  drains without `draining`: a late poster's drain and
 *                     the destroy's take the same slot
 */

#define NP 2             /* posters, one payload each */

#define OUTSIDE 0
#define DESTROYED 5

#define FREE 0
#define XCHG 1
#define LINKED 2
#define TAKEN 3

byte mode = OUTSIDE;
byte q[NP];              /* slots in enqueue order */
byte owner[NP];          /* the poster of each slot */
byte qtail;              /* next slot to take */
byte qhead;              /* next slot to dequeue */
bit draining;
bit destroy_returned;
bit accepted[NP];        /* the post returned 0 */
bit saw_live[NP];        /* its read of the word after queueing: not DESTROYED */
bit dropped[NP];         /* handed to payload_drop */
byte finished;           /* processes that returned */

inline drain()
{
	byte h;
#ifndef NO_DRAIN_TURNS
	atomic { draining == 0 -> draining = 1 };
#endif
	do
	:: h = qhead;
		if
		:: h == qtail -> break                   /* empty */
		:: else -> skip
		fi;
#ifdef NONBLOCK_DRAIN
		if
		:: q[h] == XCHG -> break                 /* WOULDBLOCK */
		:: else -> skip
		fi;
#else
		(q[h] != XCHG);                          /* the blocking dequeue waits */
#endif
		atomic {
			assert(q[h] == LINKED);          /* never taken twice */
			q[h] = TAKEN;
			dropped[owner[h]] = 1
		};
		qhead = h + 1
	od;
#ifndef NO_DRAIN_TURNS
	draining = 0
#endif
}

proctype poster(byte id)
{
	byte slot, m;

	if
	:: mode == DESTROYED -> goto out             /* refused */
	:: else -> skip
	fi;
	atomic { slot = qtail; qtail++; q[slot] = XCHG; owner[slot] = id };
	q[slot] = LINKED;
	m = mode;                                    /* after the bit's barrier */
	if
	:: m == DESTROYED ->
#ifndef NO_SELF_DRAIN
		drain();
#endif
		skip
	:: else -> saw_live[id] = 1
	fi;
	accepted[id] = 1;
out:	finished++
}

proctype destroyer()
{
	atomic { mode == OUTSIDE -> mode = DESTROYED };
	drain();
	destroy_returned = 1;
	/* Every post that read a live word has its payload back by now. */
	assert(!saw_live[0] || dropped[0]);
	assert(!saw_live[1] || dropped[1]);
	finished++
}

init
{
	atomic {
		run poster(0);
		run poster(1);
		run destroyer()
	};
	(finished == NP + 1);
	/* All returned: every accepted payload handed back, nothing else. */
	assert(accepted[0] == dropped[0]);
	assert(accepted[1] == dropped[1])
}
