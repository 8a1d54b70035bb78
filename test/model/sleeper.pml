/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of the sleeper's wake mechanism (lib/block.c) and of vCPU
 * destroy against a poster in mid-wake (lib/vcpu.c). Memory is sequentially
 * consistent here: the store->load pair of post/block is kick.pml's; this
 * model is about which mechanism each side uses and how long the eventfd
 * lives.
 *
 * The vCPU thread makes its first vsched_vcpu_fd_add(), which builds the
 * epoll set and then may have the caller's fd refused, then blocks a few
 * times: BLOCKED, re-check, sleep in epoll_pwait (kick eventfd, or its own
 * user fd, which becomes ready once) or on the futex, by the mechanism the
 * sleeper chose. Posters set the request, read the mode and, on BLOCKED, CAS
 * it to OUTSIDE and wake the sleeper by the mechanism the waker chose: the
 * futex, or a write to the eventfd, as a callout (lib/mode.h): count
 * itself in, re-check the word for DESTROYED, write, count itself out. When
 * the vCPU thread is done, a destroyer publishes DESTROYED, waits until no
 * callout is counted, and closes the eventfd, whose number may then be
 * reused by anything. (The kick and wake callbacks are callouts of the same
 * shape; the eventfd write stands for all three.)
 *
 * Properties:
 *  - no lost wakeup: whenever everything is stuck with the vCPU asleep, no
 *    request is pending;
 *  - no write into a closed eventfd (a reused fd number).
 *
 * Broken variants (each must fail):
 *   -DSPLIT_MECH          the old fd_add: the sleeper chooses epoll because
 *                         the epoll set exists, the waker chooses the
 *                         eventfd by a flag set only after the caller's fd
 *                         was accepted (lost wakeup)
 *   -DNO_GRACE_PERIOD     destroy closes the eventfd at once, without
 *                         waiting for callouts (late write)
 *   -DNO_DESTROYED_CHECK  the waker does not re-check the word after
 *                         counting itself in: it may start after destroy's
 *                         wait (late write)
 */

#define NP 2      /* posters, one post each */
#define NB 2      /* blocks of the vCPU */

#define OUTSIDE 0
#define BLOCKED 4
#define DESTROYED 5

byte mode = OUTSIDE;
bit pending;
bit use_evfd;     /* the one flag: sleeper and waker both read it */
bit epfd;         /* the epoll set exists (SPLIT_MECH: the sleeper's choice) */
bit evfd_open;    /* the kick eventfd is open under its number */
byte evfd_count;  /* its counter */
bit user_fd;      /* the caller's fd is ready (once) */
bit futex_asleep;
byte callouts;    /* wakers inside a callout */
bit vcpu_done;

proctype vcpu()
{
	byte c = 0;
	bit mech, byfd;

	/* First fd_add: create epoll, eventfd, timerfd; then add the
	 * caller's fd, which the kernel may refuse. */
	atomic { epfd = 1; evfd_open = 1 };
	if
	:: /* refused */
#ifndef SPLIT_MECH
		atomic { epfd = 0; evfd_open = 0 } /* roll back, never published */
#else
		skip                               /* return as it was */
#endif
	:: use_evfd = 1; user_fd = 1               /* accepted */
	fi;

	do
	:: c < NB ->
		c++;
		pending = 0;                 /* service */
		mode = BLOCKED;              /* exchange + barrier */
		if
		:: pending ->
			atomic { if :: mode == BLOCKED -> mode = OUTSIDE :: else -> skip fi }
		:: else ->
#ifdef SPLIT_MECH
			mech = epfd;
#else
			mech = use_evfd;
#endif
sleep:
			if
			:: mech ->
				/* epoll_pwait on eventfd + the caller's fd */
				if
				:: atomic { evfd_count > 0 -> evfd_count = 0; byfd = 0 }
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
				:: mech && byfd ->
					/* the caller's fd: leave by ourselves */
					mode = OUTSIDE       /* exchange */
				:: else -> goto sleep /* stale count, spurious */
				fi
			fi
		fi
	:: c == NB -> break
	od;
done:
	vcpu_done = 1
}

proctype poster(byte i)
{
	bit won = 0;

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
	:: won && use_evfd ->
		callouts++;                  /* vsched__callout_begin() */
#ifndef NO_DESTROYED_CHECK
		if
		:: mode != DESTROYED ->
#endif
			atomic { assert(evfd_open); evfd_count++ }
#ifndef NO_DESTROYED_CHECK
		:: else -> skip
		fi;
#endif
		callouts--                   /* vsched__callout_end() */
	:: won && !use_evfd ->
		futex_asleep = 0             /* futex wake */
	:: else -> skip
	fi;
out:	skip
}

proctype destroyer()
{
	(vcpu_done);                         /* its thread stopped using it */
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
		run poster(0);
		run poster(1);
		run destroyer()
	}
}
