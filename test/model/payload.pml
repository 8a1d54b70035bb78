/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of a destroyed vCPU's payloads: vsched_vcpu_destroy() against
 * payload posters (lib/request.c post_rank(), payload_begin()/_end(),
 * vsched__payload_quiesce(), vsched__drain_payloads(); lib/vcpu.c
 * vsched_vcpu_destroy()): protocol.md "Destroy against a payload poster".
 * Memory is sequentially consistent: the count-then-read of both sides is
 * a store->load pair, as the callout's (destroy.pml's CALLOUT_NO_FENCE
 * shows the fence it needs).
 *
 * The queue is liburcu's wfcq, as slots in enqueue order: an enqueue takes
 * the next slot by exchanging the tail (XCHG), then links it (LINKED). The
 * drain's dequeue is the non-blocking one: it gives up at an unlinked slot,
 * and every slot behind it stays.
 *
 * A poster checks the word (a load: DESTROYED, refused), counts itself in,
 * reads the word again (DESTROYED: counts out, refused, nothing queued),
 * queues its payload, sets its bit, reads the word, and counts out; the
 * post has accepted the payload (returns 0). Destroy CASes the word to
 * DESTROYED, waits until no poster is counted in, and drains.
 *
 * Properties (assertions):
 *  - when destroy returns, every payload queued has been handed to
 *    payload_drop, and no payload is queued after (a poster that counts
 *    in after destroy's wait reads DESTROYED);
 *  - when everything has returned, every accepted payload has been
 *    handed back, once, and no refused one;
 *  - no process is left waiting (Spin's invalid end states).
 *
 * Variants (each must fail):
 *   -DNO_QUIESCE      destroy drains without waiting for the count (the
 *                     code before session 21): a poster paused between
 *                     its exchange and its link strands the payloads
 *                     behind it, and one paused before its exchange
 *                     queues after the drain
 *   -DNO_RECHECK      the poster counts itself in but trusts its first
 *                     check: counted in after destroy's wait, it queues
 *                     after the drain
 *   -DCOUNT_OUT_EARLY the poster counts out before it links its node:
 *                     the drain meets the gap
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
byte posts;              /* payload posts counted in */
bit accepted[NP];        /* the post returned 0 */
bit queued[NP];          /* its node was queued */
bit dropped[NP];         /* handed to payload_drop */
bit destroy_done;        /* destroy returned */
byte finished;           /* processes that returned */

proctype poster(byte id)
{
	byte slot;

	if
	:: mode == DESTROYED -> goto out             /* refused: the first check */
	:: else -> skip
	fi;
	posts++;                                     /* payload_begin(): count in, fence */
#ifndef NO_RECHECK
	if
	:: mode == DESTROYED -> posts--; goto out    /* refused, nothing queued */
	:: else -> skip
	fi;
#endif
	atomic {
		assert(!destroy_done);               /* never queued after destroy returned */
		slot = qtail; qtail++; q[slot] = XCHG; owner[slot] = id; queued[id] = 1
	};
#ifdef COUNT_OUT_EARLY
	posts--;
#endif
	q[slot] = LINKED;
	skip;                                        /* the bit, its barrier, the word */
#ifndef COUNT_OUT_EARLY
	posts--;                                     /* payload_end() */
#endif
	accepted[id] = 1;
out:	finished++
}

proctype destroyer()
{
	byte h;

	atomic { mode == OUTSIDE -> mode = DESTROYED };
#ifndef NO_QUIESCE
	(posts == 0);                                /* vsched__payload_quiesce() */
#endif
	do                                           /* vsched__drain_payloads() */
	:: h = qhead;
		if
		:: h == qtail -> break                   /* empty */
		:: else -> skip
		fi;
		if
		:: q[h] == XCHG -> break                 /* WOULDBLOCK */
		:: else ->
			atomic {
				assert(q[h] == LINKED);
				q[h] = TAKEN;
				dropped[owner[h]] = 1
			};
			qhead = h + 1
		fi
	od;
	/* Everything queued is back (and nothing more will be queued: the
	 * posters' assertion). */
	atomic {
		assert(queued[0] == dropped[0] && queued[1] == dropped[1]);
		destroy_done = 1
	};
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
	/* All returned: every accepted payload handed back, once; none else. */
	assert(accepted[0] == dropped[0]);
	assert(accepted[1] == dropped[1])
}
