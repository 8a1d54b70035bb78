/* SPDX-License-Identifier: MIT */
/**
 * @file timer.h
 * @brief Guest timers, their expiry, and the expiry-cancellation policy.
 *
 * A guest timer belongs to a vCPU and has a deadline in the VM's clock (the
 * host timebase). When it expires, vsched posts its request kind, so the
 * interrupt goes through the same priority-ordered path as every request.
 * Every expiry is posted exactly once, also when the guest re-arms the
 * timer at the moment it fires: the post belongs to whoever takes the
 * expired deadline out of the timer's word (an atomic exchange or CAS).
 *
 * Who notices the deadline: a vCPU blocked in vsched_vcpu_block() wakes at
 * its earliest timer deadline by itself; a vCPU running guest code is kicked
 * by the timer service (a thread of the hypervisor's, or an fd in its event
 * loop), which posts the request.
 *
 * Cancellation: before entry, a posted timer interrupt whose timer has been
 * re-armed into the future (or disarmed) is stale. The timer's policy
 * decides whether to deliver it anyway (KEEP: the guest takes a spurious
 * interrupt and usually one more exit), to read the guest's real deadline
 * through the host's timer_read callback and drop it when stale (CANCEL),
 * or to choose per timer from the measured costs (ADAPTIVE).
 */
#ifndef VSCHED_TIMER_H
#define VSCHED_TIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_vm;
struct vsched_vcpu;
struct vsched_timer;
struct vsched_timer_service;

/**
 * The latest deadline a timer holds (2^62 - 1 ns, about 146 years).
 * vsched_timer_arm() rejects later ones with VSCHED_EINVAL (clamp a guest's
 * far-future compare value to this: it never fires); a later deadline
 * returned by the host's timer_read is clamped to it.
 */
#define VSCHED_TIMER_DEADLINE_MAX (UINT64_MAX >> 2)

/** How a timer's expiry behaves (the arch profiles use these). */
enum vsched_timer_semantics {
	/**
	 * x86 LAPIC TSC-deadline: one shot. Arming 0 disarms; an expiry is
	 * delivered once and the timer is then disarmed; a re-arm before the
	 * delivery makes the pending expiry stale.
	 */
	VSCHED_TIMER_ONESHOT = 0,
	/**
	 * arm64 generic timer (CNTV/CNTP): level. The output line is
	 * enabled && !masked && CVAL <= counter. vsched posts on each rising
	 * edge of the line, whatever raised it: time reaching CVAL, an arm
	 * into the past, vsched_timer_set_ctl() enabling or unmasking. While
	 * the line stays high nothing more is posted; once it falls
	 * (disable, mask, CVAL moved into the future) a pending post is
	 * stale and the next rising edge posts again. A disabled or masked
	 * timer with an old CVAL (an idle guest) costs nothing: neither the
	 * service nor a blocked vCPU waits for it.
	 */
	VSCHED_TIMER_LEVEL = 1,
	/**
	 * power decrementer (DEC, HDEC): the down-counter interrupts when it
	 * goes negative and the exception stays pending until the guest
	 * writes a positive value (re-arms into the future), which makes a
	 * pending one stale. When nested, the L2 guest's writes are not seen
	 * by L1: only the timer_read callback (H_GUEST_GET_STATE) sees them.
	 */
	VSCHED_TIMER_DECREMENTER = 2,
};

/** Expiry-cancellation policies. */
enum vsched_timer_cancel {
	/** Deliver every posted expiry; the guest takes stale ones. */
	VSCHED_CANCEL_KEEP = 0,
	/** Read the real deadline (timer_read) and drop stale expiries. */
	VSCHED_CANCEL_CANCEL = 1,
	/**
	 * Read when the expected saving pays for it: stale share x spurious
	 * cost > read cost, all measured per timer (reads reveal staleness;
	 * vsched_timer_report_spurious() reports the spurious deliveries).
	 * Without a `timer_read` host callback there is nothing to read:
	 * it drops what vsched itself knows stale and delivers the rest, as
	 * CANCEL then does; stats report no reads and no stale share, and
	 * only vsched_timer_report_spurious() moves est_spurious_ns.
	 */
	VSCHED_CANCEL_ADAPTIVE = 2,
};

/**
 * Number of cancellation policies this header knows (0 up to it; added in
 * 0.3). As VSCHED_POLL_NPOLICIES: a newer library may know more.
 */
#define VSCHED_CANCEL_NPOLICIES 3

/**
 * A cancellation policy's name, as command lines and reports spell it
 * ("keep", "cancel", "adaptive"): a static string.
 * @return the name, or NULL for a number that is no policy of this library.
 * Context: any thread; no syscalls. Added in 0.3.
 */
VSCHED_API const char *vsched_cancel_policy_name(unsigned policy);

/**
 * The cancellation policy named `name` (vsched_cancel_policy_name()'s
 * spelling, exact case).
 * @return the enum vsched_timer_cancel value (>= 0), or VSCHED_EINVAL
 * (NULL, or no policy of that name).
 * Context: any thread; no syscalls. Added in 0.3.
 */
VSCHED_API int vsched_cancel_policy_parse(const char *name);

/** Timer creation parameters. Zero-initialise, then set `size`. */
struct vsched_timer_desc {
	/** sizeof(struct vsched_timer_desc). */
	size_t size;
	/** Name for stats (copied, up to 15 chars). */
	const char *name;
	/** enum vsched_timer_semantics. */
	unsigned semantics;
	/** The request kind posted at expiry (declared, neither PAYLOAD nor
	 * WAIT: an expiry never waits for an acknowledgement). The
	 * kind is the timer's on this vCPU: a vsched_post() of it is
	 * serviced as an expiry, so the CANCEL and ADAPTIVE policies drop it
	 * unless the timer has expired. Give other posts a kind of their
	 * own. */
	unsigned kind;
	/** enum vsched_timer_cancel. */
	unsigned cancel;
	/** ADAPTIVE: cost of one spurious delivery until measured (default
	 * 10 us, an exit round trip on nested KVM). */
	uint64_t spurious_cost_ns;
	/** ADAPTIVE: cost of one timer_read until measured (default 1 us). */
	uint64_t read_cost_ns;
};

/** Per-timer counters. */
struct vsched_timer_stats {
	/** Expiries posted (a post that merged with a pending one of the
	 * kind included: fired may exceed delivered + stale_cancelled with
	 * nothing lost; counted after the post, so a read while an expiry is
	 * in flight may find it delivered or cancelled and not yet fired). */
	uint64_t fired;
	/** Expiries delivered to the handler. */
	uint64_t delivered;
	/** Stale expiries dropped before entry. */
	uint64_t stale_cancelled;
	/** Stale expiries delivered anyway (known stale, or reported by
	 * vsched_timer_report_spurious(); a delivery counted once, also
	 * when it was both). */
	uint64_t stale_delivered;
	/** timer_read calls. */
	uint64_t state_reads;
	/** Their total measured ns. */
	uint64_t state_read_ns;
	/** ADAPTIVE: current choice (1: reading); 0 under the other
	 * policies, and without a `timer_read` host callback. */
	unsigned adaptive_reading;
	/** ADAPTIVE: estimated cost of one read. */
	uint64_t est_read_ns;
	/** ADAPTIVE: estimated cost of one spurious delivery. */
	uint64_t est_spurious_ns;
	/** Estimated share of stale expiries, per mille. */
	unsigned est_stale_permille;
};

/**
 * Create a timer on a vCPU (setup time; up to 8 per vCPU). It starts
 * disarmed (LEVEL timers also start enabled and unmasked, unlike arm64's
 * reset CNTx_CTL, whose ENABLE is 0: a VMM that models the reset calls
 * vsched_timer_set_ctl(t, false, false)). A LEVEL line that is high while
 * the guest waits for an interrupt (WFI) is latched, not a wake reason of
 * vsched_vcpu_block(): the VMM's `has_event` looks at it
 * (vsched_timer_get()'s `expired`).
 * @return 0, VSCHED_EINVAL (NULL, bad size/semantics/policy, a PAYLOAD or
 * WAIT kind),
 * VSCHED_EDESTROYED (the vCPU was destroyed),
 * VSCHED_ERANGE (kind not declared), VSCHED_EEXIST (the vCPU has a timer
 * of that kind already), VSCHED_ELIMIT (the vCPU has its 8
 * timers already: one per timer the guest architecture has, arm64 4, x86
 * and power 1, with room to spare) or VSCHED_ENOMEM.
 * Context: any thread, before the vCPU runs.
 */
VSCHED_API int vsched_timer_create(struct vsched_vcpu *vcpu,
				   const struct vsched_timer_desc *desc,
				   struct vsched_timer **out);

/**
 * Arm (or re-arm) at `deadline_ns` in the VM's clock. Zero disarms (x86
 * TSC-deadline semantics), for LEVEL timers too: map a guest's CVAL of 0
 * (due at once on hardware) to 1. A deadline at or before now expires at
 * once. If the previous deadline had already passed without being
 * posted, that expiry is posted now (it was real); when the new deadline
 * is in the future the post is then stale by the time it is serviced, and
 * CANCEL drops it, KEEP delivers it (counted in stale_delivered).
 * Re-arming into the future makes a posted, undelivered expiry stale.
 * LEVEL: moving CVAL while the line stays high posts nothing new (no
 * edge).
 * Syscalls: an arm of a vCPU asleep in a block wakes it (its futex or
 * eventfd) so that it looks at the new deadline; an arm that posts makes
 * what a post makes (a kick or a wake). With a timer service, an arm into
 * the future that makes the VM's earliest deadline earlier calls
 * timerfd_settime, and the first arm, set_ctl or service pass on a thread
 * while a service exists registers the thread with liburcu-bp (an mmap
 * and rt_sigprocmask; vsched_thread_init() does it ahead, for a seccomp
 * filter).
 * @return 0, VSCHED_EINVAL (NULL, deadline > VSCHED_TIMER_DEADLINE_MAX) or
 * VSCHED_EDESTROYED. Context: any thread, one writer of a timer at a time
 * (arm, disarm, set_ctl: the guest's traps of one vCPU). Writers racing on
 * one LEVEL timer may post one extra expiry in a high period (a gate closed
 * and reopened between an arm's clock read and its CAS restores the word;
 * doc/timers.md). Fires (the service, vsched_vcpu_fire_timers()) may run
 * concurrently with the writer.
 * Pairs with the fire's CAS: exactly one of them posts an expiry.
 */
VSCHED_API int vsched_timer_arm(struct vsched_timer *t, uint64_t deadline_ns);

/** Disarm (same as arming 0). @return as vsched_timer_arm().
 * Context: as vsched_timer_arm() (one writer of a timer at a time). */
VSCHED_API int vsched_timer_disarm(struct vsched_timer *t);

/**
 * LEVEL timers: set the control bits (arm64 CNTx_CTL ENABLE and IMASK).
 * Enabling or unmasking a timer whose CVAL has passed raises the line and
 * posts it (also after an earlier expiry was delivered or dropped as
 * stale, as long as the line fell in between); disabling or masking drops
 * the line, which makes a pending post stale.
 * @return 0, VSCHED_EINVAL (NULL, not LEVEL) or VSCHED_EDESTROYED (the
 * vCPU was destroyed). Any thread, one writer of a
 * timer at a time (see vsched_timer_arm()).
 */
VSCHED_API int vsched_timer_set_ctl(struct vsched_timer *t, bool enable,
				    bool mask);

/**
 * Current deadline (0: disarmed) and whether an expiry is latched (posted
 * and not yet consumed; LEVEL: posted and the line still high).
 * @return 0 or VSCHED_EINVAL. Any thread.
 */
VSCHED_API int vsched_timer_get(const struct vsched_timer *t,
				uint64_t *deadline_ns, bool *expired);

/**
 * The hypervisor saw a delivered timer interrupt turn out spurious (the
 * guest had already re-armed), costing `cost_ns`. Feeds ADAPTIVE. Counted
 * in stale_delivered, unless KEEP delivered it known stale and counted it
 * already: report a delivery before the timer's next service, which
 * forgets that.
 * @return 0 or VSCHED_EINVAL. Context: the vCPU's thread.
 */
VSCHED_API int vsched_timer_report_spurious(struct vsched_timer *t,
					    uint64_t cost_ns);

/** Copy a timer's counters. @return 0 or VSCHED_EINVAL. Any thread. */
VSCHED_API int vsched_timer_read_stats(const struct vsched_timer *t,
				  struct vsched_timer_stats *out);

/**
 * Post every expired timer of the vCPU now (the vCPU's own thread can call
 * this before entry when no timer service runs).
 * @return number posted (an expiry a destroyed vCPU refused is not
 * counted), VSCHED_EINVAL or VSCHED_EDESTROYED. States: any but DESTROYED.
 * Context: any thread.
 */
VSCHED_API int vsched_vcpu_fire_timers(struct vsched_vcpu *vcpu);

/**
 * Earliest deadline at which one of the vCPU's timers can post (UINT64_MAX:
 * none). Latched timers and disabled or masked LEVEL timers cannot, so they
 * do not count; the timer service programs its fd by the same rule.
 * @return 0 or VSCHED_EINVAL. Any thread.
 */
VSCHED_API int vsched_vcpu_next_timer(const struct vsched_vcpu *vcpu,
				      uint64_t *deadline_ns);

/**
 * The timer service of a VM: it posts the expiries of vCPUs running guest
 * code, which nothing else notices. It owns a timerfd (CLOCK_MONOTONIC;
 * with an injected `now_ns` clock each deadline is converted when it is
 * programmed: vsched_timer_service_clock_changed() after a jump) set to
 * the earliest deadline of all the VM's armed timers, those of vCPUs
 * asleep in a block too: such a vCPU also wakes at its deadline by itself,
 * and whichever of the two comes first posts the expiry (exactly once);
 * the other finds it posted. Use it
 * either as a thread of your own
 * (vsched_timer_service_run()) or by adding vsched_timer_service_fd() to
 * your event loop and calling vsched_timer_service_dispatch() when readable.
 *
 * Lifetime: the service belongs to its VM. vsched_timer_service_destroy()
 * ends it early (arms racing with the destroy are safe: they reach the
 * service under RCU and the destroy waits for them); otherwise
 * vsched_vm_destroy() destroys it. Either way, first stop run() and join
 * its thread, or stop calling dispatch(). After vsched_vm_destroy() the
 * service pointer is gone like every object of the VM: do not pass it to
 * any call, vsched_timer_service_destroy() included.
 * @return 0, VSCHED_EINVAL, VSCHED_EEXIST (one per VM), VSCHED_ENOMEM or a
 * negative errno (epoll, timerfd, eventfd). Context: setup.
 */
VSCHED_API int vsched_timer_service_create(struct vsched_vm *vm,
					   struct vsched_timer_service **out);
/** The service's fd (readable when a deadline passed).
 * @return the fd, or VSCHED_EINVAL. Context: any thread. */
VSCHED_API int vsched_timer_service_fd(const struct vsched_timer_service *s);
/**
 * Post every expired timer and reprogram the fd.
 * @return number posted, VSCHED_EINVAL, or the negative errno of a failed
 * timerfd_settime (this dispatch's, or an arm's since the last dispatch
 * that this one's programming did not supersede): a deadline is not
 * programmed, the fd will not ring for it; the posts were made (counted
 * in the timers' stats). Context: one thread at a time.
 */
VSCHED_API int vsched_timer_service_dispatch(struct vsched_timer_service *s);
/** Dispatch in a loop until vsched_timer_service_stop(). A stopped service
 * stays stopped: a later run() returns 0 at once (so that a stop() made
 * before the thread reached run() still ends it). To pause a VM, leave
 * run() going: its posts to vCPUs outside the guest only set their
 * request bits; stop it to tear the service down. @return 0, VSCHED_EINVAL,
 * VSCHED_ESTATE (another run() is active, or a destroy: refused at
 * once), or the negative errno of a failed epoll_pwait (not EINTR: a signal dispatches
 * again) or of a dispatch (a deadline could not be programmed: an arm's
 * failure wakes run() to return it); the service is left as it was, and
 * a later run() or dispatch() may go on.
 * States: no other run() active, no destroy in progress.
 * Context: the service's own thread (one at a time). */
VSCHED_API int vsched_timer_service_run(struct vsched_timer_service *s);
/**
 * The VM's injected clock (its `now_ns`) jumped: make the service convert
 * its deadline again. The timerfd is CLOCK_MONOTONIC and each deadline is
 * converted when it is programmed, so after a jump forward the service
 * would post a deadline that became due only when the interval programmed
 * before the jump ran out (an outside trial: 2,990 ms late after a 3 s
 * jump); an arm does not help, as it reprograms only an earlier deadline.
 * This rings the fd at once: run() dispatches, and an event loop sees the
 * fd readable and calls dispatch(). A vCPU asleep in a block converts its
 * own deadline: vsched_vcpu_kick() it (block.h). Needless with the default
 * clock. Added in 0.3.
 * A step back lowers every LEVEL line whose CVAL it moved ahead of the
 * clock with no write of the timer: the first look at such a timer after
 * the step (this dispatch, a vCPU's fire check at entry or in a block)
 * unlatches an expiry posted before it, so that the line's next rise
 * posts again. Step the clock while the VM is paused and make that look
 * before it resumes: a line that the clock lowers and raises again before
 * anything looks at the timer is one high period to vsched (no second
 * post).
 * @return 0, VSCHED_EINVAL or the negative errno of its failed
 * timerfd_settime (the fd may not ring then: call dispatch(), or run()
 * returns that error). Context: any thread, while the service lives: not
 * concurrently with vsched_timer_service_destroy(), which an arm may race
 * and this may not. Syscalls: timerfd_settime.
 */
VSCHED_API int vsched_timer_service_clock_changed(struct vsched_timer_service *s);
/** Make run() return. Any thread. @return 0 or VSCHED_EINVAL. */
VSCHED_API int vsched_timer_service_stop(struct vsched_timer_service *s);
/**
 * Destroy a timer service after its run() returned, before
 * vsched_vm_destroy() (which otherwise does it). Waits for an RCU grace
 * period. The service is freed when this returns 0: do not pass it to any
 * call again, this one included.
 * @return 0, VSCHED_EINVAL, or VSCHED_ESTATE (run() is active: stop it and
 * join its thread first; or called from inside a dispatch, such as from
 * the host's kick callout of an expiry it posts; refused, nothing freed).
 * A run() that starts while this runs is refused with VSCHED_ESTATE.
 * States: no run() active, no dispatch in progress.
 * Context: not from an arm's caller holding an RCU read lock of
 * liburcu-bp. Syscalls: the grace period's (liburcu-bp's synchronize_rcu:
 * membarrier, futex, sched_yield), close on its fds.
 */
VSCHED_API int vsched_timer_service_destroy(struct vsched_timer_service *s);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_TIMER_H */
