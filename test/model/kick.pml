/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of vsched's Dekker pair: post/kick against commit/poll/block.
 *
 * Stores go through per-thread FIFO store buffers (a flusher process per
 * buffer drains them in order at any time), so a load can overtake an
 * earlier store of the same thread unless a fence drains the buffer first:
 * the store->load reordering that x86, arm64 and power all allow. Atomic
 * RMWs (the poster's CAS on the mode word) act on memory directly.
 *
 * Mapping to lib/ (see doc/protocol.md):
 *   poster  = vsched__post_fast() in include/vsched/inline.h (the inline
 *             and the exported vsched_post()) and post_rank() in
 *             lib/request.c (WAIT, payload, broadcast): set bit, the full
 *             barrier after the RMW, read mode, kick decision
 *   vcpu    = vsched__vcpu_enter_fast() in include/vsched/inline.h (the
 *             inline and the exported vsched_vcpu_enter()) and vsched_vcpu_block() in
 *             lib/block.c: write mode, fence, re-check; POLLING needs no
 *             fence because posters do nothing for it.
 *   sleeping/futex = ops->wait/wake on the mode word.
 *
 * Property: whenever the whole system is stuck (Spin's `timeout`) with the
 * vCPU in the guest or asleep, no posted request is unserviced. A lost kick
 * or a lost wakeup violates it.
 *
 * Second property, the idle fast path: a vCPU that returns from its sleep
 * skips the store and barrier back to OUTSIDE only when a poster already
 * moved the word there; when it leaves by itself (deadline) it exchanges.
 * Either way, once it runs again the word no longer says BLOCKED, so a
 * waker is never told "futex wake" for a running vCPU.
 *
 * The word carries the entry's generation (2 bits here): a poster's CAS
 * succeeds only on the very word it read (vsched__kick_decide(), lib/mode.c),
 * so a post whose CAS loses to the vCPU's exit and next entry or sleep does
 * not kick or wake that later one; the later one's own re-check, after its
 * fence, sees the post's bit. -DANY_GEN is the earlier rule (retry on any
 * IN_GUEST or BLOCKED word: spurious kicks, still correct; must pass).
 *
 * -DREACH_STOP_NEWGEN and -DREACH_STOP_REARM assert that a post's CAS
 * never fails on the vCPU's next entry or next sleep: each must fail,
 * which shows the model reaches the two cases where a post stops.
 *
 * Broken variants (each must fail): -DNO_POSTER_FENCE, -DNO_VCPU_FENCE,
 * -DRECHECK_BEFORE_MODE, -DBROKEN_IDLE_SKIP (skip the store on every way
 * back).
 */

#define NP 2        /* posters */
#define NPOSTS 2    /* posts per poster */
#define NCYCLES 3   /* vCPU loop iterations */

#define OUTSIDE 0
#define IN_GUEST 1
#define EXITING 2
#define POLLING 3
#define BLOCKED 4

byte mode = OUTSIDE;  /* (gen << 3) | mode, gen 0..3 */
byte post_seq[NP];   /* memory: request i posted this many times */
byte seen[NP];       /* vCPU-local: serviced up to */
bit kicked;          /* the host kick (signal / immediate_exit) */
bit sleeping;        /* futex waiter queued */

chan vbuf = [4] of { byte };            /* vCPU's stores to mode */
chan pbuf[NP] = [NPOSTS] of { byte };   /* poster i's stores to post_seq[i] */

#define pending (post_seq[0] != seen[0] || post_seq[1] != seen[1])
#define vfence (empty(vbuf))
#define MODE(w) ((w) & 7)

proctype vflush()
{
	byte v;
end:	do
	:: atomic { vbuf?v -> mode = v }
	od
}

proctype pflush(byte i)
{
	byte v;
end:	do
	:: atomic { pbuf[i]?v -> post_seq[i] = v }
	od
}

proctype poster(byte i)
{
	byte n = 0, m;
	do
	:: n < NPOSTS ->
		n++;
		pbuf[i]!n;               /* set the request bit (buffered) */
#ifndef NO_POSTER_FENCE
		(empty(pbuf[i]));        /* full barrier */
#endif
		m = mode;                /* read the mode word */
		if
		:: MODE(m) == IN_GUEST ->
			atomic {
				if
#ifndef ANY_GEN
				:: mode == m -> mode = (m & 24) | EXITING; kicked = 1
#ifdef REACH_STOP_NEWGEN
				:: mode != m && MODE(mode) == IN_GUEST -> assert(false)
#endif
#else
				:: MODE(mode) == IN_GUEST -> mode = (mode & 24) | EXITING; kicked = 1
#endif
				:: else -> skip
				fi
			}
		:: MODE(m) == BLOCKED ->
			atomic {
				if
#ifndef ANY_GEN
				:: mode == m -> mode = (m & 24) | OUTSIDE; m = 255
#ifdef REACH_STOP_REARM
				:: mode != m && MODE(mode) == BLOCKED -> assert(false)
#endif
#else
				:: MODE(mode) == BLOCKED -> mode = (mode & 24) | OUTSIDE; m = 255
#endif
				:: else -> skip
				fi
			}
			if
			:: m == 255 -> sleeping = 0   /* futex wake */
			:: else -> skip
			fi
		:: else -> skip          /* OUTSIDE, EXITING, POLLING */
		fi
	:: n == NPOSTS -> break
	od
}

proctype vcpu()
{
	byte c = 0, g = 0;
	bit found;
	do
	:: c < NCYCLES ->
		c++;
		/* service: take everything visible */
		seen[0] = post_seq[0];
		seen[1] = post_seq[1];
		if
		:: /* commit to entry */
#ifdef RECHECK_BEFORE_MODE
			found = pending;
			g = (g + 1) % 4; vbuf!(g * 8 + IN_GUEST);
#else
			g = (g + 1) % 4; vbuf!(g * 8 + IN_GUEST);
#ifndef NO_VCPU_FENCE
			(vfence);
#endif
			found = pending;
#endif
			if
			:: found -> vbuf!(g * 8 + OUTSIDE)  /* cancelled entry */
			:: else ->
				/* in the guest until kicked */
				if
				:: kicked -> kicked = 0
				:: timeout -> assert(!pending); goto done
				fi;
				vbuf!(g * 8 + OUTSIDE)
			fi
		:: /* halt: poll, then block */
			vbuf!(g * 8 + POLLING);
			if
			:: pending -> vbuf!(g * 8 + OUTSIDE)
			:: else ->
#ifdef RECHECK_BEFORE_MODE
				found = pending;
				vbuf!(g * 8 + BLOCKED);
				(vfence);
#else
				vbuf!(g * 8 + BLOCKED);
#ifndef NO_VCPU_FENCE
				(vfence);
#endif
				found = pending;
#endif
				if
				:: found -> vbuf!(g * 8 + OUTSIDE)
				:: else ->
					(vfence);  /* futex_wait reads memory */
sleep_again:
					atomic {
						if
						:: MODE(mode) == BLOCKED -> sleeping = 1
						:: else -> skip
						fi
					}
					if
					:: sleeping == 0 ->
						if
						:: MODE(mode) != BLOCKED ->
							/* woken: a poster moved the
							 * word to OUTSIDE first, so
							 * skip the store (fast path) */
							skip
						:: else ->
							/* spurious (a stale futex
							 * wake): sleep again */
							goto sleep_again
						fi
					:: sleeping == 1 ->
						/* deadline: leave by ourselves */
						sleeping = 0;
#ifndef BROKEN_IDLE_SKIP
						atomic { mode = (mode & 24) | OUTSIDE }  /* CAS */
#else
						skip
#endif
					:: timeout -> assert(!pending); goto done
					fi;
					(vfence);
					assert(MODE(mode) != BLOCKED)
				fi
			fi
		fi
	:: c == NCYCLES -> break
	od;
done:	skip
}

init
{
	atomic {
		run vflush();
		run pflush(0);
		run pflush(1);
		run poster(0);
		run poster(1);
		run vcpu()
	}
}
