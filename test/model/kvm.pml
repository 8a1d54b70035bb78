/*
 * SPDX-License-Identifier: MIT
 *
 * Spin model of the KVM adapter's kick (lib/host/kvm.c): immediate_exit plus
 * a signal, against the vCPU thread's way into KVM_RUN.
 *
 * vCPU thread, as a VMM that owns KVM_RUN drives it:
 *   vsched_kvm_pre_run(): service; clear immediate_exit; publish IN_GUEST;
 *     full fence; re-check requests (found: VSCHED_KVM_CANCELLED, back to
 *     OUTSIDE and no KVM_RUN);
 *   the VMM's own pre-run steps (user code: a pending signal may be taken
 *     there by the VMM's handler, with no further effect);
 *   KVM_RUN (a syscall: it drains the store buffer). The kernel returns
 *     -EINTR at once when immediate_exit is set or a signal is pending,
 *     else runs the guest until a signal arrives;
 *   vsched_kvm_post_run(): back to OUTSIDE.
 * vsched_kvm_run() is the same three steps with no VMM steps between.
 *
 * Poster/kicker (vsched_post + vsched_kvm_kick): set the request bit; fence;
 * read the mode; if IN_GUEST, win IN_GUEST -> EXITING, store
 * immediate_exit = 1, then pthread_kill (the signal).
 *
 * The vCPU's stores go through a FIFO store buffer drained at any time by a
 * flusher, so its loads can overtake them unless a fence drains it first.
 *
 * Property: whenever everything is stuck (Spin's `timeout`) with the vCPU
 * in the guest, no posted request is unserviced; a lost kick violates it.
 *
 * Broken variants (each must fail):
 *   -DCLEAR_LATE   clear immediate_exit after the re-check, just before
 *                  KVM_RUN (it erases a kick that landed in between);
 *   -DSIGNAL_ONLY  kick with the signal alone (it is lost when it arrives
 *                  before KVM_RUN);
 *   -DRUN_ON_CANCEL  a VMM that issues KVM_RUN although pre_run said
 *                  VSCHED_KVM_CANCELLED (posters no longer kick an OUTSIDE
 *                  vCPU, so the guest runs with the request pending).
 */

#define NPOSTS 2
#define NCYCLES 3

#define OUTSIDE 0
#define IN_GUEST 1
#define EXITING 2

#define V_MODE 0
#define V_IE 1

#define USER 0
#define GUEST 1

byte mode = OUTSIDE;
bit ie;              /* kvm_run->immediate_exit */
bit sigpend;         /* the kick signal is pending on the vCPU thread */
byte where = USER;   /* vCPU thread: user code or guest (inside KVM_RUN) */
byte post_seq;       /* memory: requests posted */
byte seen;           /* vCPU-local: serviced up to */

chan vbuf = [4] of { byte, byte };   /* vCPU's stores: (variable, value) */
chan pbuf = [NPOSTS] of { byte };    /* poster's stores to post_seq */

#define pending (post_seq != seen)

proctype vflush()
{
	byte var, val;
end:	do
	:: atomic {
		vbuf?var,val ->
		if
		:: var == V_MODE -> mode = val
		:: else -> ie = val
		fi
	   }
	od
}

proctype pflush()
{
	byte v;
end:	do
	:: atomic { pbuf?v -> post_seq = v }
	od
}

/* The empty signal handler: a signal that is pending while the thread runs
 * user code is delivered and does nothing else. */
proctype handler()
{
end:	do
	:: atomic { where == USER && sigpend -> sigpend = 0 }
	od
}

proctype poster()
{
	byte n = 0, m;
	do
	:: n < NPOSTS ->
		n++;
		pbuf!n;
		(empty(pbuf));           /* full barrier after the bit */
		m = mode;
		if
		:: m == IN_GUEST ->
			atomic {
				if
				:: mode == IN_GUEST -> mode = EXITING; m = 255
				:: else -> skip
				fi
			}
			if
			:: m == 255 ->
#ifndef SIGNAL_ONLY
				ie = 1;          /* immediate_exit first */
#endif
				sigpend = 1      /* then pthread_kill */
			:: else -> skip
			fi
		:: else -> skip
		fi
	:: n == NPOSTS -> break
	od
}

proctype vcpu()
{
	byte c = 0;
	bit found;
	do
	:: c < NCYCLES ->
		c++;
		seen = post_seq;                 /* service */
#ifndef CLEAR_LATE
		vbuf!V_IE,0;                     /* clear immediate_exit */
#endif
		vbuf!V_MODE,IN_GUEST;            /* commit */
		(empty(vbuf));                   /* full barrier */
		found = pending;                 /* re-check */
		if
#ifndef RUN_ON_CANCEL
		:: found -> vbuf!V_MODE,OUTSIDE  /* cancelled entry */
		:: else ->
#else
		:: found -> vbuf!V_MODE,OUTSIDE; goto enter
		:: else ->
enter:
#endif
			skip;                    /* the VMM's pre-run steps */
#ifdef CLEAR_LATE
			vbuf!V_IE,0;
#endif
			(empty(vbuf));           /* KVM_RUN: syscall entry */
			atomic {
				if
				:: ie || sigpend -> skip /* -EINTR at once */
				:: else -> where = GUEST
				fi
			}
			if
			:: where == GUEST ->
				if
				:: sigpend -> where = USER   /* forced exit */
				:: timeout -> assert(!pending); goto done
				fi
			:: else -> skip
			fi;
			vbuf!V_MODE,OUTSIDE      /* vsched_vcpu_exit */
		fi
	:: c == NCYCLES -> break
	od;
done:	skip
}

init
{
	atomic {
		run vflush();
		run pflush();
		run handler();
		run poster();
		run vcpu()
	}
}
