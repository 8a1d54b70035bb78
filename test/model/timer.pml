/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of timer expiry against re-arm and, for LEVEL timers, against
 * the guest's enable/mask writes (lib/timer.c).
 *
 * The timer word holds the armed epoch, the gate (OFF: LEVEL disabled or
 * masked) and an EXPIRED (posted) flag; every change is one atomic RMW of
 * the whole word. The guest re-arms: old = RMW(word, next epoch, gate
 * kept); if the old epoch had come due with the gate open and was not
 * posted, the re-arm posts it. The timer service fires: if the current
 * epoch is due, the gate open and not posted, CAS(word, w, w | EXPIRED) and
 * post. The guest's set_ctl closes the gate (the line falls: EXPIRED is
 * cleared in the same RMW) or opens it (the line rises if the epoch is due:
 * EXPIRED set and posted in the same RMW). A clock makes epochs due at
 * arbitrary moments.
 *
 * The output line is due[epoch] && gate open. Properties:
 *   - a post happens only while the line is high, and at most once per
 *     high period (from one rising edge to the next fall);
 *   - an epoch whose line was high when it was replaced is posted;
 *   - at the end, a high line has been posted in its current high period
 *     (a rise through unmask is not lost).
 *
 * Broken variants (each must fail):
 *   -DREARM_LOAD_STORE  re-arm reads the word, then stores (no atomic RMW)
 *   -DFIRE_NO_CAS       the service checks, then stores (no CAS)
 *   -DLEVEL_LATCH       closing the gate keeps EXPIRED (the latch that lost
 *                       LEVEL interrupts on unmask, issue 14)
 *   -DCTL_SPLIT         the gate lives outside the word, so the fire's CAS
 *                       does not see it change (posts with the gate closed)
 */

#define N 3     /* epochs armed in turn: 1..N */
#define TOGGLES 4

byte word_e = 1;      /* armed epoch */
bit word_x = 0;       /* EXPIRED: posted in the current high period */
bit word_off = 0;     /* gate closed (disabled or masked) */
bit due[N + 1];       /* the epoch's deadline has passed */
byte posted[N + 1];
bit since_rise[N + 1]; /* ghost: posted since the line last fell */
bit high_at_replace[N + 1];
bit armer_done, clock_done, ctl_done;

/* Post epoch e; `high` is the line as the posting RMW saw it. */
#define POST(e, high) \
	assert(high); \
	assert(since_rise[e] == 0); \
	since_rise[e] = 1; \
	posted[e]++

proctype clock()
{
	byte e;
end:	do
	:: atomic { e = word_e; due[e] = 1 }  /* time passes the current deadline */
	:: armer_done && ctl_done -> break
	od;
	clock_done = 1
}

proctype armer()
{
	byte next = 2, old_e;
	bit old_x, old_off;
	do
	:: next <= N ->
#ifndef REARM_LOAD_STORE
		atomic {
			old_e = word_e; old_x = word_x; old_off = word_off;
			word_e = next; word_x = 0;
			high_at_replace[old_e] = due[old_e] && !old_off
		}
#else
		atomic { old_e = word_e; old_x = word_x; old_off = word_off };
		atomic {
			word_e = next; word_x = 0;
			high_at_replace[old_e] = due[old_e] && !old_off
		}
#endif
		atomic {
			if
			:: !old_x && due[old_e] && !old_off -> POST(old_e, 1)
			:: else -> skip
			fi
		};
		next++
	:: next > N -> break
	od;
	armer_done = 1
}

proctype ctl()
{
	byte n = 0;
	do
	:: n < TOGGLES && !word_off ->
		/* disable or mask: the line falls */
		atomic {
			word_off = 1;
#ifndef LEVEL_LATCH
			word_x = 0;
#endif
			since_rise[word_e] = 0
		};
		n++
	:: n < TOGGLES && word_off ->
		/* enable and unmask: the line rises if the epoch is due */
		atomic {
			word_off = 0;
			if
			:: due[word_e] && !word_x -> word_x = 1; POST(word_e, 1)
			:: else -> skip
			fi
		};
		n++
	:: break
	od;
	ctl_done = 1
}

proctype service()
{
	byte e;
	bit x, off;
end:	do
	:: atomic { e = word_e; x = word_x; off = word_off };
		if
		:: !x && !off && due[e] ->
#ifdef FIRE_NO_CAS
			atomic { word_x = 1; POST(e, !word_off && word_e == e) }
#else
			atomic {
				if
#ifndef CTL_SPLIT
				:: word_e == e && word_x == 0 && word_off == 0 ->
#else
				:: word_e == e && word_x == 0 ->
#endif
					word_x = 1; POST(e, !word_off)
				:: else -> skip
				fi
			}
#endif
		:: else -> skip
		fi
	:: clock_done && (word_x || !due[word_e] || word_off) -> break
	od
}

init
{
	byte i;
	atomic { run clock(); run armer(); run ctl(); run service() };
	(_nr_pr == 1);
	/* an epoch whose line was high at its replacement was posted */
	i = 1;
	do
	:: i < N ->
		if
		:: high_at_replace[i] -> assert(posted[i] >= 1)
		:: else -> skip
		fi;
		i++
	:: i >= N -> break
	od;
	/* a line still high has been posted in its current high period */
	if
	:: due[word_e] && !word_off -> assert(word_x && since_rise[word_e])
	:: else -> skip
	fi
}
