/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of a LEVEL timer (lib/timer.c): the guest's re-arms and
 * enable/mask writes (one thread, in any order) against the service's
 * fire, on a clock that ticks at any moment, also between an operation's
 * clock read and its RMW and between the arm's two clock reads, so that a
 * re-arm into the future can find its deadline passed by its second read.
 * Once, the clock may step back to 0 (an injected VM clock set back): as
 * vsched's contract asks, while the VM is paused (no operation in flight)
 * and followed by a look at the timer before the VM resumes and the clock
 * runs on (vsched_timer_service_clock_changed()'s dispatch; a kicked vCPU's
 * fire check does the same). The step lowers a high line with no RMW.
 *
 * The timer word holds the deadline (0: disarmed), the gate (OFF: disabled
 * or masked) and EXPIRED (posted in the current high period); every change
 * is one atomic RMW of the whole word. As in lib/timer.c:
 *   arm(d):     old = load; loop { at = clock; n = d | old.OFF, EXPIRED if
 *               the line of n is high at `at`; CAS(old -> n) };
 *               now = clock; if latched: post unless old was EXPIRED;
 *               else: post old if it could fire at `at`; if n can fire at
 *               `now`: fire(now).
 *   fire(s):    (s read before) w = load; while w can fire at s:
 *               CAS(w -> w | EXPIRED) and post. Then, if w is latched
 *               with the gate open and its deadline after s (a hint: s
 *               may predate the load): w = load; f = clock; if still so
 *               at f: CAS(w -> w without EXPIRED) (the line fell by a
 *               step back; unlatched, its next rise posts).
 *   set_ctl:    s = clock; w = load; loop { close: n = OFF, EXPIRED
 *               cleared; open: n = gate open, | EXPIRED and post if n
 *               can fire at s; CAS(w -> n) }.
 * "Can fire at t": armed, gate open, not EXPIRED, deadline <= t.
 *
 * The modelled line. The clock has no value at the instant of a CAS, only
 * at reads. So each RMW takes effect at the clock its writer read, or at
 * the latest time the word's history has already reached (ht) if that read
 * is older: an RMW cannot land before an earlier one. Between RMWs the line
 * (armed && gate open && deadline <= ht) rises as time passes; an RMW
 * raises or drops it. Each rise opens a high period (numbered 1, 2, ...).
 * (Judged at the real instant of the CAS, no code could be exact: a
 * re-arm over a posted high line to a deadline between its clock read and
 * the CAS would have to latch if the clock passed it before the CAS and
 * post if after, and nothing observable tells the two apart.)
 *
 * Properties (assertions):
 *   (b) no post without a rise: every post names the high period it
 *       belongs to, one whose line the deciding RMW saw high; at most one
 *       post per high period; hence posts <= rises (asserted too);
 *   (a) no lost expiry: at the end, a high line has been posted in its
 *       current high period (or can still fire: the service stops only
 *       when nothing can, so this is "posted");
 *   a high period that a re-arm ended (the old deadline had passed) was
 *   posted; EXPIRED implies the line is high after every RMW (the step
 *   lowers a line with no RMW, and the look after it unlatches); a fire
 *   unlatches only after a step.
 *
 * Configurations (each must pass):
 *   (none)              no step back, ARMS = TOGGLES = 3
 *   -DSTEP_BACK         the clock may step back once, ARMS = TOGGLES = 2
 *
 * Broken variants (each must fail; the step-back ones run with STEP_BACK):
 *   -DREARM_LOAD_STORE  re-arm reads the word, then stores (no atomic RMW)
 *   -DFIRE_NO_CAS       the service checks, then stores (no CAS)
 *   -DLEVEL_LATCH       closing the gate keeps EXPIRED (the latch that lost
 *                       LEVEL interrupts on unmask, issue 14)
 *   -DCTL_SPLIT         the gate lives outside the word, so the fire's CAS
 *                       does not see it change (posts with the gate closed)
 *   -DARM_OLD_LATE      the arm judges the replaced deadline on the clock it
 *                       reads after its RMW (posts a deadline that came due
 *                       only after it was replaced: a post without a rise)
 *   -DARM_STALE_CLOCK   the arm reads the clock once, before loading the
 *                       word, and keeps it across CAS retries (a fire that
 *                       saw a later clock lands first; the arm takes a
 *                       still-high line for a fall and posts it again)
 *   -DNO_UNLATCH        the fire leaves a latched line it finds low latched
 *                       (before session 30: after a step back, the next
 *                       rise never posts, a lost expiry)
 *   -DUNLATCH_STALE_CLOCK  the fire unlatches on its own clock, read before
 *                       it loaded the word (an arm that latched on a later
 *                       clock is undone: a second post in one high period)
 * Reachability (must fail, proving the model reaches the case):
 *   -DREACH_FALL_RISE   asserts that no re-arm over a posted (EXPIRED) line
 *                       to a deadline ahead of its first clock read but
 *                       passed by its second goes on to fire it: the legal
 *                       double post (the line fell at the RMW and rose
 *                       again inside the arm).
 *   -DREACH_STEP_UNLATCH asserts that no fire unlatches a line: its failure
 *                       proves that the step back and the look are reached.
 */

#if defined(NO_UNLATCH) || defined(REACH_STEP_UNLATCH)
#define STEP_BACK
#endif

#define T 3        /* the clock runs 0..T */
#ifndef STEP_BACK
#define ARMS 3     /* re-arms, each to a deadline in 0..T (0 disarms) */
#define TOGGLES 3  /* set_ctl writes, each closing or opening the gate */
#else
/* The step back doubles the clock's run: fewer writes keep the search
 * under a minute. */
#define ARMS 2
#define TOGGLES 2
#endif

byte clk = 0;
byte w_d = 2;      /* the word: deadline */
bit w_x = 0;       /* EXPIRED */
bit w_off = 0;     /* gate closed */
bit guest_done, clock_done;
bit stepped;       /* the clock stepped back (once at most) */
bit paused;        /* the VM is paused: the step and its look */
byte busy;         /* guest operations and service fires in flight */

/* An operation (a guest write, a service fire) starts only while the VM
 * runs, and the step waits for those in flight. */
#ifdef STEP_BACK
#define OP_BEGIN atomic { !paused -> busy++ }
#define OP_END busy--
#else
#define OP_BEGIN skip
#define OP_END skip
#endif

/* ghosts */
byte ht = 0;       /* the time the word's history has reached */
byte period = 0;   /* rises so far: the number of the last high period */
byte posts = 0;
int posted = 0;    /* bit p: high period p has been posted */
int arm_ended = 0; /* bit p: a re-arm ended high period p */

#define LINE(d, off, t) ((d) != 0 && !(off) && (d) <= (t))
#define CANFIRE(d, x, off, t) (!(x) && LINE(d, off, t))
#define POSTED(p) ((posted >> (p)) & 1)

/* Time passes to the RMW's clock s, if the history is not there yet. */
inline ADVANCE(s)
{
	if
	:: s > ht ->
		if
		:: !LINE(w_d, w_off, ht) && LINE(w_d, w_off, s) -> period++
		:: else -> skip
		fi;
		ht = s
	:: else -> skip
	fi
}

/* The RMW's new word, at ht. */
inline WRITE(nd, nx, noff)
{
	if
	:: !LINE(w_d, w_off, ht) && LINE(nd, noff, ht) -> period++
	:: else -> skip
	fi;
	w_d = nd;
	w_x = nx;
	w_off = noff;
	assert(!w_x || LINE(w_d, w_off, ht));
	assert(period < 31)     /* the ghost bit sets hold every period */
}

/* Post for high period p (0: the deciding RMW saw the line low). */
inline POST(p)
{
	assert(p != 0);          /* (b) a post belongs to a rise */
	assert(!POSTED(p));      /* (b) at most once per high period */
	posted = posted | (1 << p);
	posts++;
	assert(posts <= period)  /* (b) posts <= rises */
}

/* fire_one(t, s): locals fd, fx, foff, fp of the caller. */
inline FIRE(s)
{
	atomic { fd = w_d; fx = w_x; foff = w_off };
	do
	:: CANFIRE(fd, fx, foff, s) ->
#ifdef FIRE_NO_CAS
		atomic {
			ADVANCE(s);
			WRITE(fd, 1, foff);
			fp = (LINE(w_d, w_off, ht) -> period : 0);
			POST(fp)
		};
		break
#else
		atomic {
			if
#ifndef CTL_SPLIT
			:: w_d == fd && w_x == fx && w_off == foff ->
				ADVANCE(s);
				WRITE(fd, 1, foff);
#else
			:: w_d == fd && w_x == fx -> /* the gate is not in the word */
				ADVANCE(s);
				WRITE(fd, 1, w_off);
#endif
				fp = (LINE(w_d, w_off, ht) -> period : 0);
				POST(fp);
				break
			:: else -> fd = w_d; fx = w_x; foff = w_off
			fi
		}
#endif
	:: else -> break
	od;
	/* vsched__timer_unlatch_fallen(): latched, gate open, the line low at
	 * s; s may predate the load, so the judgment is made again on a fresh
	 * load and a clock read after it. */
	if
	:: fx && !foff && fd > s ->
#ifndef UNLATCH_STALE_CLOCK
		atomic { fd = w_d; fx = w_x; foff = w_off };
		fs = clk;
#else
		fs = s;
#endif
		atomic {
			if
#ifndef NO_UNLATCH
			:: fx && !foff && fd > fs &&
			   w_d == fd && w_x == fx && w_off == foff ->
#ifdef REACH_STEP_UNLATCH
				assert(0);
#endif
				assert(stepped); /* only a step lowers a latched line */
				ADVANCE(fs);
				WRITE(fd, 0, foff)
#endif
			:: else -> skip
			fi
		}
	:: else -> skip
	fi;
	atomic { fd = 0; fx = 0; foff = 0; fp = 0; fs = 0 }
}

proctype clock()
{
	byte fd, fp, fs;
	bit fx, foff;
	do
	:: clk < T -> clk++
#ifdef STEP_BACK
	:: atomic {
		!stepped && clk > 0 && busy == 0 ->
		/* The VM paused; its clock steps back to 0. The history
		 * reaches the step (a rise before it counts), then the line
		 * falls with no RMW: no deadline is due at 0. */
		stepped = 1;
		paused = 1;
		ADVANCE(clk);
		clk = 0;
		ht = 0
	   };
	   /* The look before the VM resumes: clock_changed()'s dispatch. */
	   FIRE(clk);
	   paused = 0
#endif
	:: break
	od;
	clock_done = 1
}

/* The guest: its CVAL and CTL writes, in any order, from one thread (the
 * vCPU's, as its traps are). Two threads writing one timer are not
 * modelled: a close and reopen of the gate landing between an arm's clock
 * read and its CAS restores the word's exact bits (ABA), so the arm's CAS
 * succeeds on a judgment older than the reopen and can post once more in
 * that high period (doc/timers.md). */
proctype guest()
{
	byte a = 0, c = 0, d, at, now, o_d, p_old, p_new, s, cd, cp;
	bit ox, ooff, still, cx, coff, open, post;
	byte fd, fp, fs;
	bit fx, foff;
	do
	:: a < ARMS ->
		OP_BEGIN;
		/* vsched_timer_arm(d), 0 disarms */
		if
		:: d = 0
		:: d = 1
		:: d = 2
		:: d = 3
		fi;
#ifdef ARM_STALE_CLOCK
		at = clk;
#endif
		atomic { o_d = w_d; ox = w_x; ooff = w_off };
		do
		:: 
#ifndef ARM_STALE_CLOCK
			at = clk;
#endif
			atomic {
				if
#ifndef REARM_LOAD_STORE
				:: !(w_d == o_d && w_x == ox && w_off == ooff) ->
					o_d = w_d; ox = w_x; ooff = w_off
#endif
				:: else ->
					still = LINE(d, ooff, at);
					ADVANCE(at);
					p_old = (LINE(o_d, ooff, ht) -> period : 0);
					if
					:: p_old != 0 && !LINE(d, ooff, ht) ->
						arm_ended = arm_ended | (1 << p_old)
					:: else -> skip
					fi;
					WRITE(d, still, ooff);
					p_new = (LINE(w_d, w_off, ht) -> period : 0);
					break
				fi
			}
		od;
		now = clk;
		atomic {
			if
			:: still ->
				if
				:: !ox -> POST(p_new)
				:: else -> skip
				fi
			:: else ->
#ifdef ARM_OLD_LATE
				if
				:: CANFIRE(o_d, ox, ooff, now) -> POST(p_old)
#else
				if
				:: CANFIRE(o_d, ox, ooff, at) -> POST(p_old)
#endif
				:: else -> skip
				fi
			fi
		};
		if
		:: !still && CANFIRE(d, 0, ooff, now) ->
#ifdef REACH_FALL_RISE
			assert(!(ox && d > at));
#endif
			FIRE(now)
		:: else -> skip
		fi;
		atomic {
			a++;
			OP_END;
			d = 0; at = 0; now = 0; o_d = 0; p_old = 0; p_new = 0;
			ox = 0; ooff = 0; still = 0
		}
	:: c < TOGGLES ->
		OP_BEGIN;
		/* vsched_timer_set_ctl(): close or open the gate */
		if
		:: open = 0
		:: open = 1
		fi;
		s = clk;
		atomic { cd = w_d; cx = w_x; coff = w_off };
		do
		:: atomic {
			if
			:: w_d == cd && w_x == cx && w_off == coff ->
				ADVANCE(s);
				if
				:: !open ->
					/* disable or mask: the line falls */
					post = 0;
#ifndef LEVEL_LATCH
					WRITE(cd, 0, 1)
#else
					WRITE(cd, cx, 1)
#endif
				:: open ->
					/* enable and unmask: a rising edge, or a
					 * due expiry nobody fired, posts once */
					post = CANFIRE(cd, cx, 0, s);
					WRITE(cd, cx || post, 0)
				fi;
				cp = (LINE(w_d, w_off, ht) -> period : 0);
				break
			:: else -> cd = w_d; cx = w_x; coff = w_off
			fi
		   }
		od;
		if
		:: post -> atomic { POST(cp) }
		:: else -> skip
		fi;
		atomic {
			c++;
			OP_END;
			s = 0; cd = 0; cp = 0; cx = 0; coff = 0; open = 0; post = 0
		}
	:: break
	od;
	guest_done = 1
}

proctype service()
{
	byte s, fd, fp, fs;
	bit fx, foff;
	do
	:: OP_BEGIN;
	   s = clk;
	   FIRE(s);
	   atomic { s = 0; OP_END }
	:: atomic {
		guest_done && clock_done &&
		!CANFIRE(w_d, w_x, w_off, clk) -> break
	   }
	od
}

init
{
	atomic { run clock(); run guest(); run service() };
	(_nr_pr == 1);
	atomic {
		ADVANCE(clk);
		/* (a) a line still high has been posted in its current high
		 * period (or can still fire) */
		assert(!LINE(w_d, w_off, ht) || POSTED(period) ||
		       CANFIRE(w_d, w_x, w_off, ht));
		/* a high period a re-arm ended was posted */
		assert((arm_ended & ~posted) == 0);
		assert(posts <= period)
	}
}
