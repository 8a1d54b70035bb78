/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of the sleeper's wake mechanism (lib/block.c arm(),
 * vsched__sleeper_fd_add(); lib/mode.c vsched__wake_sleeper()) and of vCPU
 * destroy against a poster in mid-wake (lib/vcpu.c). Memory is
 * sequentially consistent here: the store->load pair of post/block is
 * kick.pml's; this model is about which mechanism each side uses and how
 * long the eventfd lives. Destroy against the sleeper itself (a destroy
 * that races the block) is destroy.pml's.
 *
 * Another thread makes the vCPU's first vsched_vcpu_fd_add(): between
 * blocks, as its claim below allows, or (NO_CLAIM) at any point, also
 * while the vCPU sleeps: it builds the epoll set, then the kernel may refuse the
 * caller's fd; only a fully built set is published, by use_evfd. The vCPU
 * thread blocks a few times. Each arm reads use_evfd and publishes it in
 * sleep_evfd, then exchanges BLOCKED into the word, re-checks, and sleeps
 * by the mechanism of that arm: epoll_pwait (woken only by the kick
 * eventfd, whose count is sticky, or by its own user fd, ready once) or
 * the futex (it sleeps only if the word still says BLOCKED as it enters;
 * woken only by a futex wake). Posters set the request, read the mode and,
 * on BLOCKED, CAS it to OUTSIDE and wake the sleeper by the mechanism
 * published for the arm their CAS read: the futex, or a write to the
 * eventfd, as a callout (lib/mode.h): count itself in, re-check the word
 * for DESTROYED, write, count itself out. When the vCPU thread and the
 * fd_add are done, a destroyer publishes DESTROYED, waits until no callout
 * is counted, and closes the eventfd, whose number may then be reused by
 * anything. (The kick and wake callbacks are callouts of the same shape;
 * the eventfd write stands for all three.)
 *
 * The fd tables are the owner's. A block and an fd_add (or fd_del) each
 * claim `in_engine` by exchange for their whole run; the one that finds it
 * claimed is refused (VSCHED_ESTATE), so an fd_add on another thread never
 * grows the tables under a block's looks and sleep (a growth frees the
 * event array epoll_pwait writes). So an fd_add lands only between
 * blocks; the mechanism must not depend on that, and the configuration
 * NO_CLAIM (an fd_add that ignores the flag, landing anywhere: the code
 * before session 30, where its check could pass just before an arm) must
 * pass too. WAKER_USE_EVFD and SPLIT_MECH, mechanism mistakes that only
 * such an fd_add exposes, run in it.
 *
 * Properties:
 *  - no lost wakeup: whenever everything is stuck with the vCPU asleep, no
 *    request is pending (a waker still in flight is not stuck);
 *  - no write into a closed eventfd (a reused fd number);
 *  - no table growth while the vCPU is inside a block.
 *
 * Broken variants (each must fail):
 *   -DWAKER_USE_EVFD      the waker reads use_evfd, not the arm's
 *                         sleep_evfd (the code before 9d80580): an fd_add
 *                         during a futex sleep sends its wake to an eventfd
 *                         nobody sleeps on (lost wakeup)
 *   -DSPLIT_MECH          the older fd_add: the sleeper chooses epoll
 *                         because the epoll set exists, the waker by the
 *                         flag set only after the caller's fd was accepted
 *                         (lost wakeup after a refused fd)
 *   -DNO_GRACE_PERIOD     destroy closes the eventfd at once, without
 *                         waiting for callouts (late write)
 *   -DNO_DESTROYED_CHECK  the waker does not re-check the word after
 *                         counting itself in: it may start after destroy's
 *                         wait (late write)
 *   -DCLAIM_LOAD_STORE    the code before session 30: the block checks the
 *                         flag then stores it, the fd_add only checks it
 *                         (a growth inside a block)
 */

#define NP 2      /* posters, one post each */
#define NB 2      /* blocks of the vCPU */

#define OUTSIDE 0
#define BLOCKED 4
#define DESTROYED 5

byte mode = OUTSIDE;
bit pending;
bit use_evfd;     /* the epoll set is complete: the next arm sleeps there */
bit sleep_evfd;   /* the mechanism of the current arm (the owner's) */
bit epfd;         /* the epoll set exists (SPLIT_MECH: the sleeper's choice) */
bit evfd_open;    /* the kick eventfd is open under its number */
byte evfd_count;  /* its counter */
bit user_fd;      /* the caller's fd is ready (once) */
bit futex_asleep;
byte callouts;    /* wakers inside a callout */
bit vcpu_done;
bit fd_done;
bit in_engine;    /* claimed by a block or by the fd_add */
bit in_block;     /* ghost: the vCPU is inside a block */
bit growing;      /* ghost: the fd_add is changing the tables */

#if defined(WAKER_USE_EVFD) || defined(SPLIT_MECH)
#define NO_CLAIM
#endif

/* Claim the flag: `got` says whether this side got it. */
#ifndef CLAIM_LOAD_STORE
#define CLAIM(got) atomic { got = !in_engine; in_engine = 1 }
#endif

/* vsched_vcpu_fd_add() from another thread, at any point. */
proctype fd_adder()
{
	bit got;
#if defined(NO_CLAIM)
	got = 1;                              /* lands anywhere */
#elif !defined(CLAIM_LOAD_STORE)
	CLAIM(got);
#else
	got = !in_engine;                     /* a check, no claim */
#endif
	if
	:: !got -> goto refused               /* VSCHED_ESTATE */
	:: else -> skip
	fi;
	growing = 1;                          /* the tables grow */
#ifndef NO_CLAIM
	assert(!in_block);
#endif
	atomic { epfd = 1; evfd_open = 1 };   /* epoll, eventfd, timerfd */
	if
	:: /* the caller's fd refused */
#ifndef SPLIT_MECH
		atomic { epfd = 0; evfd_open = 0 } /* roll back, never published */
#else
		skip                               /* returned as it was */
#endif
	:: use_evfd = 1;                          /* accepted: release */
		user_fd = 1                        /* it becomes ready, once */
	fi;
	growing = 0;
#if !defined(CLAIM_LOAD_STORE) && !defined(NO_CLAIM)
	in_engine = 0;
#endif
refused:
	fd_done = 1
}

proctype vcpu()
{
	byte c = 0;
	bit mech, byfd, got;

	do
	:: c < NB ->
		c++;
		pending = 0;                 /* service */
#ifndef CLAIM_LOAD_STORE
		CLAIM(got);
#else
		got = !in_engine;            /* check, */
		if
		:: got -> in_engine = 1      /* then store */
		:: else -> skip
		fi;
#endif
		if
		:: !got -> goto next         /* VSCHED_ESTATE */
		:: else -> skip
		fi;
		in_block = 1;
#ifndef NO_CLAIM
		assert(!growing);
#endif
#ifdef SPLIT_MECH
		mech = epfd;                 /* chosen by "the set exists" */
#else
		sleep_evfd = use_evfd;       /* arm(): publish this arm's mechanism */
		mech = sleep_evfd;
#endif
		mode = BLOCKED;              /* exchange (release) + barrier */
		if
		:: pending ->
			atomic { if :: mode == BLOCKED -> mode = OUTSIDE :: else -> skip fi }
		:: else ->
sleep:
			byfd = 0;
			if
			:: mech ->
				/* epoll_pwait on eventfd + the caller's fd */
				if
				:: atomic { evfd_count > 0 -> evfd_count = 0 }
				:: atomic { user_fd -> user_fd = 0; byfd = 1 }
				:: timeout -> assert(!pending); goto done
				fi
			:: else ->
				atomic {
					if
					:: mode == BLOCKED -> futex_asleep = 1
					:: else -> skip
					fi
				};
				if
				:: futex_asleep == 0 -> skip
				:: timeout -> assert(!pending); goto done
				fi
			fi;
			if
			:: mode != BLOCKED -> skip   /* a poster woke us: fast path */
			:: else ->
				if
				:: byfd ->
					/* the caller's fd: leave by ourselves */
					mode = OUTSIDE       /* exchange */
				:: else -> goto sleep /* stale count, spurious */
				fi
			fi
		fi;
		in_block = 0;
		in_engine = 0;
next:		skip
	:: c == NB -> break
	od;
done:
	vcpu_done = 1
}

proctype poster(byte i)
{
	bit won = 0, evfd;

	if
	:: mode == DESTROYED -> goto out     /* ESHUTDOWN */
	:: else -> skip
	fi;
	pending = 1;
	if
	:: mode == BLOCKED ->
		atomic { if :: mode == BLOCKED -> mode = OUTSIDE; won = 1 :: else -> skip fi }
	:: else -> skip
	fi;
	if
	:: won ->
		callouts++;                  /* vsched__callout_begin() */
#ifndef NO_DESTROYED_CHECK
		if
		:: mode != DESTROYED ->
#endif
#if defined(WAKER_USE_EVFD) || defined(SPLIT_MECH)
			evfd = use_evfd;
#else
			evfd = sleep_evfd;   /* the mechanism of the arm we won */
#endif
			if
			:: evfd -> atomic { assert(evfd_open); evfd_count++ }
			:: else -> futex_asleep = 0 /* futex wake */
			fi
#ifndef NO_DESTROYED_CHECK
		:: else -> skip
		fi;
#endif
		callouts--                   /* vsched__callout_end() */
	:: else -> skip
	fi;
out:	skip
}

proctype destroyer()
{
	(vcpu_done && fd_done);              /* its thread stopped using it */
	mode = DESTROYED;
#ifndef NO_GRACE_PERIOD
	(callouts == 0);                     /* vsched__sleeper_quiesce() */
#endif
	evfd_open = 0                        /* close: the number is free */
}

init
{
	atomic {
		run vcpu();
		run fd_adder();
		run poster(0);
		run poster(1);
		run destroyer()
	}
}
