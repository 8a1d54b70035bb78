/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of the WAIT acknowledgement (wait_ack() in lib/request.c).
 * Memory is sequentially consistent here: the store->load pair is covered
 * by kick.pml; this model is about what "acknowledged" means.
 *
 * A poster posts a WAIT request: set the bit, read the mode word (mode and
 * entry generation), kick an IN_GUEST vCPU (CAS to EXITING), then wait until
 * the word shows another generation or a mode outside the guest. The vCPU
 * loops: service, commit (new generation, IN_GUEST, re-check), run guest
 * code until kicked or for a while, exit.
 *
 * Property: when the poster returns, the vCPU is not running guest code
 * that it entered before the post (any later entry re-checked the bit). And
 * nobody waits forever (no invalid end state).
 *
 * A second poster (`kicker`, a plain post or vsched_vcpu_kick()) kicks
 * whatever entry it finds, so the WAIT poster's own CAS can fail on
 * EXITING of its generation and stop (vsched__kick_decide()): it must
 * still wait for the exit. -DREACH_LOST_TO_KICKER asserts that never
 * happens and must fail (the model reaches it).
 *
 * Broken variants (each must fail):
 *   -DACK_ON_EXITING  count EXITING_GUEST as acknowledged
 *   -DNO_GEN          ignore the generation: wait for a mode outside guest
 */

#define OUTSIDE 0
#define IN_GUEST 1
#define EXITING 2

byte mode = OUTSIDE;
byte gen = 0;
bit req;            /* the WAIT request's bit */
bit posted;         /* ghost: the post happened */
bit running;        /* ghost: the vCPU runs guest code */
bit entered_before; /* ghost: ... of an entry committed before the post */
bit kicked;

proctype vcpu()
{
	byte c = 0;
	do
	:: c < 3 ->
		c++;
		req = 0;                   /* service */
		atomic { gen = (gen + 1) % 4; mode = IN_GUEST };
		atomic {
			if
			:: req -> mode = OUTSIDE   /* cancelled entry */
			:: else -> running = 1; entered_before = !posted
			fi
		};
		if
		:: running ->
			/* guest code: until kicked, or an exit of its own */
			if
			:: kicked -> kicked = 0
			:: true
			fi;
			atomic { running = 0; mode = OUTSIDE }
		:: else -> skip
		fi
	:: c == 3 -> break
	od;
	/* A last entry whose guest never exits on its own (a guest spinning
	 * with nothing to do): legitimate, and only a kick gets it out. */
	req = 0;
	atomic { gen = (gen + 1) % 4; mode = IN_GUEST };
	atomic {
		if
		:: req -> mode = OUTSIDE
		:: else -> running = 1; entered_before = !posted
		fi
	};
end:	(kicked && running) -> atomic { running = 0; mode = OUTSIDE }
}

proctype poster()
{
	byte m, g;
	atomic { req = 1; posted = 1 };
	atomic { m = mode; g = gen };
	if
	:: m == IN_GUEST ->
		atomic {
			if
			:: mode == IN_GUEST && gen == g -> mode = EXITING; kicked = 1
#ifdef REACH_LOST_TO_KICKER
			:: mode == EXITING && gen == g -> assert(false)
#endif
			:: else -> skip
			fi
		}
	:: else -> skip
	fi;
	if
	:: m == IN_GUEST || m == EXITING ->
#if defined(ACK_ON_EXITING)
		(mode != IN_GUEST || gen != g)
#elif defined(NO_GEN)
		(mode == OUTSIDE)
#else
		(mode == OUTSIDE || gen != g)
#endif
	:: else -> skip
	fi;
	/* acknowledged: no guest code entered before the post still runs */
	assert(!(running && entered_before))
}

proctype kicker()
{
	/* another poster (or vsched_vcpu_kick()): kicks whatever entry it
	 * finds, so the WAIT poster's own CAS may fail on EXITING */
	byte g2;
end_k:	atomic { (mode == IN_GUEST) -> g2 = gen };
	atomic {
		if
		:: mode == IN_GUEST && gen == g2 -> mode = EXITING; kicked = 1
		:: else -> skip
		fi
	}
}

init
{
	atomic { run vcpu(); run poster(); run kicker() }
}
