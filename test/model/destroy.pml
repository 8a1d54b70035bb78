/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of vsched_vcpu_destroy() against the vCPU's own thread inside
 * vsched_vcpu_block() (lib/vcpu.c; lib/block.c arm(), arm_and_sleep(),
 * sleep_futex(); lib/mode.h vsched__mode_leave_blocked(); lib/request.c
 * vsched__post_finish()): protocol.md "Destroy against a sleeper". Memory
 * is sequentially consistent (the store->load pairs are kick.pml's); this
 * model is about who may write the mode word once destroy has won it.
 *
 * Destroy runs on another thread, takes the word by CAS from OUTSIDE_GUEST
 * and is refused in any other mode (here: it waits for a moment its CAS
 * succeeds; a refused caller may try again). Its state check cannot see a
 * thread that has passed its own check and is about to block, nor a
 * sleeper that a poster has just woken (the poster's CAS made the word
 * OUTSIDE_GUEST while that thread is still inside the block): both are
 * outside destroy's contract, and both are modelled. The vCPU thread
 * services and blocks a few times: the state checks (a load), the first
 * look at its requests, the arm, the re-check (a request: leave BLOCKED),
 * the futex sleep (entered only if the word still says BLOCKED; ended by a
 * futex wake, or, when the block has a deadline, by the deadline or a
 * signal, which leave BLOCKED by themselves), and after a wake its
 * requests again (none: arm again). Posters set their bit, read the word
 * (DESTROYED: refused, as vsched__post_finish()), and on BLOCKED CAS it to
 * OUTSIDE_GUEST and wake the sleeper as a callout (count in, re-read the
 * word, skip on DESTROYED); destroy waits for the callouts to drain, then
 * tears down (closes the eventfd, returns to the VMM, which may free what
 * the wake callback uses).
 *
 * The rule modelled: the owner's arm is a CAS from OUTSIDE_GUEST to
 * BLOCKED (it fails only on DESTROYED: the block returns ESHUTDOWN, and
 * the word was never anything else), and a sleeper that leaves BLOCKED by
 * itself does so by a CAS from BLOCKED (it fails only when a waker won
 * the word, which may say DESTROYED since). So no owner write can land on
 * DESTROYED. lib/ at 9d80580 arms with an exchange and puts DESTROYED
 * back, and leaves with an exchange: the variants ARM_XCHG and LEAVE_XCHG.
 *
 * Not covered, by the contract's choice (protocol.md): the owner's other
 * ways out of OUTSIDE_GUEST, the poll window's POLLING and
 * vsched_vcpu_enter()'s IN_GUEST, are a load (the state check) and a plain
 * store or exchange; a destroy between the two is overwritten. Not
 * modelled by default; POLL_STORE models the poll window's stores and
 * shows the window. And a destroy that lands between a waker's CAS and
 * its wake makes the waker skip the wake: the sleeper sleeps on, until
 * its deadline (forever without one); REACH_ASLEEP_AFTER_DESTROY shows
 * that this is reached, the default model that it is the only way.
 *
 * Properties (assertions):
 *  - once destroy's CAS has succeeded, the word says DESTROYED, except
 *    between an exchange arm that found DESTROYED and its put-back
 *    (ARM_XCHG; a monitor process);
 *  - no post is accepted (its read after setting the bit sees anything but
 *    DESTROYED) after destroy's CAS;
 *  - no thread enters the futex sleep after destroy's CAS;
 *  - no wake callout runs after destroy has torn down;
 *  - when everything is stuck with the thread asleep: a live vCPU has no
 *    request pending (no lost wakeup), and a destroyed one was left asleep
 *    only by a waker that won BLOCKED before destroy and then skipped its
 *    wake.
 *
 * Variants (each must fail):
 *   -DARM_XCHG        the arm of lib/block.c at 9d80580: an exchange, and
 *                     DESTROYED put back; between the two a poster reads
 *                     BLOCKED: its post is accepted after destroy, and its
 *                     wake callout runs after destroy returned
 *   -DLEAVE_XCHG      vsched__mode_leave_blocked() at 9d80580: an
 *                     exchange; after a waker's CAS and a destroy it
 *                     writes OUTSIDE_GUEST over DESTROYED (back to life)
 *   -DDESTROY_XCHG    destroy exchanges DESTROYED in from any mode (the
 *                     code before 9d80580): it takes BLOCKED, and the
 *                     sleeper sleeps on with nobody to wake it
 *   -DARM_IGNORES_OLD the arm is an exchange and ignores the word it
 *                     replaced: it sleeps on a destroyed vCPU and brings
 *                     it back to life
 *   -DPOLL_STORE      the poll window's plain stores (the limitation,
 *                     shown)
 *   -DCALLOUT_NO_FENCE the waker's callout count and its re-read of the
 *                     word without the store-load fence between them
 *                     (vsched__callout_begin(); s390x's interlocked add is
 *                     no barrier by itself): the re-read is satisfied
 *                     before the count is visible, destroy sees no callout
 *                     and tears down, and the wake runs after destroy
 *                     returned
 *   -DREACH_ASLEEP_AFTER_DESTROY  asserts that a destroyed vCPU's thread
 *                     is never left asleep: its failure shows the window
 *                     of a destroy between a waker's CAS and its wake
 */

#define NP 2      /* posters, one post each */
#define NB 2      /* blocks of the vCPU */

#define OUTSIDE 0
#define POLLING 3
#define BLOCKED 4
#define DESTROYED 5

byte mode = OUTSIDE;
bit pending;
bit futex_asleep;
byte callouts;    /* wakers inside a callout */
bit destroyed;    /* destroy's CAS succeeded */
bit torn_down;    /* destroy returned: eventfd closed, callbacks gone */
bit putback;      /* between an arm that found DESTROYED and its put-back */
bit skipped;      /* a waker won BLOCKED, then skipped its wake: DESTROYED */

/* Leave BLOCKED by ourselves; `old` gets the word replaced. */
inline leave_blocked(old)
{
#ifdef LEAVE_XCHG
	atomic { old = mode; mode = OUTSIDE }           /* exchange */
#else
	atomic { old = mode; if :: mode == BLOCKED -> mode = OUTSIDE :: else -> skip fi }
#endif
}

/* Everything is stuck with the vCPU thread asleep: a lost wakeup if its
 * vCPU is live with a request; if destroyed, only the window of a waker
 * that won BLOCKED before destroy and then skipped its wake. */
inline stuck()
{
	assert(destroyed || !pending);
#ifdef REACH_ASLEEP_AFTER_DESTROY
	assert(!destroyed);
#else
	assert(!destroyed || skipped)
#endif
}

proctype vcpu()
{
	byte c = 0, old;
	bit timed;

	do
	:: c < NB ->
		c++;
		/* vsched_service(), then vsched_vcpu_block(): both check the
		 * word first (a load: destroy may come right after it). */
		if
		:: mode != OUTSIDE -> break              /* ESHUTDOWN */
		:: else -> pending = 0
		fi;
		if
		:: mode != OUTSIDE -> break
		:: else -> skip
		fi;
		if
		:: timed = 0                             /* VSCHED_DEADLINE_NONE */
		:: timed = 1
		fi;
		if
		:: pending -> goto ran                   /* first look */
		:: else -> skip
		fi;
#ifdef POLL_STORE
		mode = POLLING;                          /* plain stores */
		if
		:: pending -> mode = OUTSIDE; goto ran
		:: else -> mode = OUTSIDE
		fi;
#endif
arm:
#if defined(ARM_XCHG) || defined(ARM_IGNORES_OLD)
		atomic {
			old = mode;
			mode = BLOCKED;                  /* exchange */
#ifndef ARM_IGNORES_OLD
			putback = (old == DESTROYED)
#endif
		};
#ifndef ARM_IGNORES_OLD
		if
		:: old == DESTROYED ->
			atomic { mode = old; putback = 0 }; /* put back */
			break                            /* ESHUTDOWN */
		:: else -> skip
		fi;
#endif
#else
		atomic {                                 /* CAS from OUTSIDE */
			old = mode;
			if :: mode == OUTSIDE -> mode = BLOCKED :: else -> skip fi
		};
		if
		:: old == DESTROYED -> break             /* ESHUTDOWN */
		:: else -> skip
		fi;
#endif
		if
		:: pending -> leave_blocked(old); goto ran /* the re-check */
		:: else -> skip
		fi;
		/* The futex sleep: only while the word still says BLOCKED. */
		atomic {
			if
			:: mode == BLOCKED -> assert(!destroyed); futex_asleep = 1
			:: else -> skip                  /* EAGAIN */
			fi
		};
		if
		:: futex_asleep == 0 -> skip             /* woken, or never slept */
		:: atomic { timed && futex_asleep -> futex_asleep = 0 } /* deadline, signal */
		:: timeout -> stuck(); goto done
		fi;
		if
		:: mode != BLOCKED ->                    /* a poster woke us */
			if
			:: pending -> goto ran
			:: else -> goto arm
			fi
		:: else ->
			leave_blocked(old);              /* by ourselves */
			if
			:: old != BLOCKED && !pending -> goto arm /* raced a waker */
			:: else -> goto ran              /* a reason, the deadline */
			fi
		fi;
ran:		skip
	:: c == NB -> break
	od;
done:	skip
}

proctype poster()
{
	byte m;

	pending = 1;                                 /* fetch_or, barrier */
	atomic {
		m = mode;
		/* accepted (not DESTROYED) only before destroy's CAS */
		assert(m == DESTROYED || !destroyed)
	};
	if
	:: m == BLOCKED ->
		atomic {
			if
			:: mode == BLOCKED -> mode = OUTSIDE; m = 1
			:: else -> m = 0
			fi
		};
		if
		:: m ->
#ifdef CALLOUT_NO_FENCE
			/* The re-read passes the count's store (store buffer). */
			if
			:: mode != DESTROYED ->
				callouts++;
				atomic { assert(!torn_down); futex_asleep = 0 }
			:: else -> callouts++; skipped = 1
			fi;
#else
			callouts++;                      /* vsched__callout_begin() */
			if
			:: mode != DESTROYED ->
				atomic { assert(!torn_down); futex_asleep = 0 }
			:: else -> skipped = 1
			fi;
#endif
			callouts--                       /* vsched__callout_end() */
		:: else -> skip
		fi
	:: else -> skip                              /* refused, or nothing to do */
	fi
}

proctype destroyer()
{
#ifdef DESTROY_XCHG
	atomic { mode != DESTROYED -> mode = DESTROYED; destroyed = 1 };
#else
	/* The CAS from OUTSIDE_GUEST; any other mode is refused and the
	 * caller may try again: this waits for a moment the CAS succeeds. */
end_refused:
	atomic { mode == OUTSIDE -> mode = DESTROYED; destroyed = 1 };
#endif
	(callouts == 0);                             /* vsched__sleeper_quiesce() */
	torn_down = 1
}

proctype monitor()
{
end_watch:
	atomic { destroyed && mode != DESTROYED && !putback -> assert(false) }
}

init
{
	atomic {
		run monitor();
		run vcpu();
		run poster();
		run poster();
		run destroyer()
	}
}
