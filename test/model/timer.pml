/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of timer expiry against re-arm (lib/timer.c).
 *
 * The timer word holds the armed epoch and an EXPIRED (posted) flag. The
 * guest re-arms: old = exchange(word, next epoch); if the old epoch had come
 * due and was not posted, the re-arm posts it. The timer service fires:
 * if the current epoch is due and not posted, CAS(word, w, w | EXPIRED) and
 * post. A clock makes epochs due at arbitrary moments.
 *
 * Properties: no epoch is posted twice; an epoch that was due when it was
 * replaced (or, the last one, due at the end) is posted.
 *
 * Broken variants (each must fail):
 *   -DREARM_LOAD_STORE  re-arm reads the word, then stores (no exchange)
 *   -DFIRE_NO_CAS       the service checks, then stores (no CAS)
 */

#define N 3     /* epochs armed in turn: 1..N */

byte word_e = 1;      /* armed epoch */
bit word_x = 0;       /* EXPIRED: posted */
bit due[N + 1];       /* the epoch's deadline has passed */
byte posted[N + 1];
bit due_at_replace[N + 1];
bit armer_done, clock_done;

proctype clock()
{
	byte e;
end:	do
	:: atomic { e = word_e; due[e] = 1 }  /* time passes the current deadline */
	:: armer_done -> break
	od;
	clock_done = 1
}

proctype armer()
{
	byte next = 2, old_e;
	bit old_x;
	do
	:: next <= N ->
#ifndef REARM_LOAD_STORE
		atomic {
			old_e = word_e; old_x = word_x;
			word_e = next; word_x = 0;
			due_at_replace[old_e] = due[old_e]
		}
#else
		atomic { old_e = word_e; old_x = word_x };
		atomic {
			word_e = next; word_x = 0;
			due_at_replace[old_e] = due[old_e]
		}
#endif
		if
		:: !old_x && due[old_e] -> posted[old_e]++
		:: else -> skip
		fi;
		next++
	:: next > N -> break
	od;
	armer_done = 1
}

proctype service()
{
	byte e;
	bit x;
end:	do
	:: atomic { e = word_e; x = word_x };
		if
		:: !x && due[e] ->
#ifndef FIRE_NO_CAS
			atomic {
				if
				:: word_e == e && word_x == 0 -> word_x = 1; posted[e]++
				:: else -> skip
				fi
			}
#else
			word_x = 1;
			posted[e]++
#endif
		:: else -> skip
		fi
	:: clock_done && (word_x || !due[word_e]) -> break
	od
}

init
{
	byte i;
	atomic { run clock(); run armer(); run service() };
	(_nr_pr == 1);
	/* every epoch posted at most once; a due replaced epoch, and the last
	 * one if due, posted */
	i = 1;
	do
	:: i <= N ->
		assert(posted[i] <= 1);
		if
		:: i < N && due_at_replace[i] -> assert(posted[i] == 1)
		:: i == N && due[N] -> assert(posted[N] == 1)
		:: else -> skip
		fi;
		i++
	:: i > N -> break
	od
}
