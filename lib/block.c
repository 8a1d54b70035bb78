/* SPDX-License-Identifier: MIT */
/*
 * The block/poll engine, shared by vCPUs (vsched_vcpu_block) and generic
 * waiters (lib/waiter.c), in three steps: poll for the policy's window;
 * arm BLOCKED + full barrier + re-check and sleep (lib/sleep.c: on a futex,
 * or in epoll_pwait on the fd wake sources of lib/fds.c); account (policy
 * update, KVM-named stats). What differs between a vCPU and a waiter is one
 * table of target operations. The policy in force is lib/sleeper.c's; the
 * mode word's transitions are lib/mode.h's.
 */
#include <errno.h>
#include <string.h>

#include "abi.h"
#include "mode.h"
#include "contract.h"
#include "sleeper.h"

/*
 * What the engine blocks: a vCPU or a generic waiter. The difference is
 * this one table of operations, picked when the target is made; the engine
 * is inlined into each caller with its table a constant, so every call
 * below is direct (no indirect call on the poll loop). All run on the
 * owner thread.
 */
struct target;
struct target_ops {
	/* A reason to run (VSCHED_WAKE_REQUEST/EVENT) or 0. Reads only: the
	 * poll loop and the re-check after the arm's barrier call it. */
	int (*ready)(const struct target *t);
	/* The sleep's deadline: the caller's, or a vCPU's earliest timer. */
	uint64_t (*deadline)(const struct target *t, uint64_t deadline);
	/* That earlier deadline was reached: post the expiries, look again. */
	int (*timer_due)(const struct target *t);
	/* Before the first look: the blocking hook, expired timers post.
	 * Non-zero: what the hook did forbids the block (its error). */
	int (*begin)(const struct target *t);
	/* Veto the poll window beyond the guest's own switch? */
	bool (*veto)(const struct target *t);
	/* Right before the arm: true if a hook ran that after_sleep undoes. */
	bool (*before_sleep)(const struct target *t);
	void (*after_sleep)(const struct target *t);
	/* Every way out: the unblocking hook. Returns the block's `reason`,
	 * or the error of what the hook did. */
	int (*end)(const struct target *t, int reason);
	/* Counted in runnable_vcpus while not asleep. */
	bool runnable;
};

struct target {
	const struct target_ops *op;
	struct vsched__sleeper *s;
	struct vsched_vcpu *vcpu;           /* a vCPU's */
	const struct vsched__wait_hooks *h; /* a generic waiter's */
	int id;                             /* for the trace: vCPU id or -1 */
};

/* vCPU threads of this process that are not asleep in vsched: the
 * contention veto compares it with the CPUs the process may use. */
static _Atomic int runnable_vcpus;

static void runnable_enter(const struct target *t)
{
	if (t->op->runnable &&
	    !atomic_load_explicit(&t->s->counted_runnable, memory_order_relaxed)) {
		atomic_fetch_add_explicit(&runnable_vcpus, 1, memory_order_relaxed);
		atomic_store_explicit(&t->s->counted_runnable, true, memory_order_relaxed);
	}
}

static void runnable_leave(struct vsched__sleeper *s)
{
	if (atomic_load_explicit(&s->counted_runnable, memory_order_relaxed)) {
		atomic_fetch_sub_explicit(&runnable_vcpus, 1, memory_order_relaxed);
		atomic_store_explicit(&s->counted_runnable, false, memory_order_relaxed);
	}
}

void vsched__sleeper_retire(struct vsched__sleeper *s)
{
	runnable_leave(s);
}

/* A vCPU: pending requests or the host's event; its guest timers. */
static inline __attribute__((always_inline)) int
vcpu_ready(const struct target *t)
{
	const struct vsched_host_ops *ops = &t->s->vm->ops;

	if (atomic_load_explicit(&t->vcpu->pending, memory_order_relaxed))
		return VSCHED_WAKE_REQUEST;
	if (ops->has_event && ops->has_event(t->vcpu, ops->ctx))
		return VSCHED_WAKE_EVENT;
	return 0;
}

static uint64_t vcpu_deadline(const struct target *t, uint64_t deadline)
{
	uint64_t e = vsched__vcpu_earliest(t->vcpu);
	return e < deadline ? e : deadline;
}

static int vcpu_timer_due(const struct target *t)
{
	if (vsched_vcpu_fire_timers(t->vcpu) > 0)
		return vcpu_ready(t);
	return 0;
}

static inline __attribute__((always_inline)) int
vcpu_begin(const struct target *t)
{
	const struct vsched_host_ops *ops = &t->s->vm->ops;

	/* The blocking hook covers the whole poll window. */
	if (ops->blocking) {
		const uint32_t before = atomic_load_explicit(&t->vcpu->mode,
							     memory_order_relaxed);
		ops->blocking(t->vcpu, ops->ctx);
		/* A hook that entered the guest (vsched_vcpu_enter() reads
		 * only the mode word, which says OUTSIDE_GUEST here), or
		 * entered and left it (a new entry generation): the poll
		 * window's stores would overwrite the word. Refused, the word
		 * left as the hook made it. Nothing else changes the word
		 * of a vCPU outside the guest but a destroy. */
		const uint32_t m = atomic_load_explicit(&t->vcpu->mode, memory_order_relaxed);
		if (VSCHED__UNLIKELY(m != before))
			return vsched__mode_of(m) == VSCHED_MODE_DESTROYED ? VSCHED_EDESTROYED
									   : VSCHED_ESTATE;
	}
	if (atomic_load_explicit(&t->vcpu->ntimers_pub, memory_order_relaxed))
		vsched_vcpu_fire_timers(t->vcpu); /* expired timers post now */
	return 0;
}

static inline __attribute__((always_inline)) bool
vcpu_veto(const struct target *t)
{
	const struct vsched_host_ops *ops = &t->s->vm->ops;

	return (ops->no_poll && ops->no_poll(t->vcpu, ops->ctx)) ||
	       (ops->contended && ops->contended(t->vcpu, ops->ctx)) ||
	       atomic_load_explicit(&runnable_vcpus, memory_order_relaxed) >
		       (int)t->s->vm->ncpus;
}

static bool vcpu_before_sleep(const struct target *t)
{
	(void)t;
	return false;
}

static int vcpu_end(const struct target *t, int reason)
{
	const struct vsched_host_ops *ops = &t->s->vm->ops;

	if (ops->unblocking) {
		const uint32_t before = atomic_load_explicit(&t->vcpu->mode,
							     memory_order_relaxed);
		ops->unblocking(t->vcpu, ops->ctx);
		/* A hook that entered the guest (or entered and left it): the
		 * block would return its reason with the vCPU in guest mode.
		 * Refused after the fact, as for the blocking hook, the word
		 * as the hook left it. */
		const uint32_t m = atomic_load_explicit(&t->vcpu->mode, memory_order_relaxed);
		if (VSCHED__UNLIKELY(m != before))
			return vsched__mode_of(m) == VSCHED_MODE_DESTROYED ? VSCHED_EDESTROYED
									   : VSCHED_ESTATE;
	}
	return reason;
}

static const struct target_ops vcpu_ops = {
	.ready = vcpu_ready,
	.deadline = vcpu_deadline,
	.timer_due = vcpu_timer_due,
	.begin = vcpu_begin,
	.veto = vcpu_veto,
	.before_sleep = vcpu_before_sleep,
	.end = vcpu_end,
	.runnable = true,
};

/* A generic waiter: its condition, the caller's deadline, its hooks. */
static inline __attribute__((always_inline)) int
waiter_ready(const struct target *t)
{
	return t->h->cond(t->h->arg) ? VSCHED_WAKE_REQUEST : 0;
}

static uint64_t waiter_deadline(const struct target *t, uint64_t deadline)
{
	(void)t;
	return deadline;
}

static int waiter_timer_due(const struct target *t)
{
	(void)t;
	return 0;
}

static int waiter_end(const struct target *t, int reason)
{
	(void)t;
	return reason;
}

static bool waiter_veto(const struct target *t)
{
	(void)t;
	return false;
}

/* After the poll window, right before "needs kick" is armed, so that what
 * it arms (a VMM's own needs-kick flag) is ordered before the re-check by
 * the arm's barrier. */
static bool waiter_before_sleep(const struct target *t)
{
	if (!t->h->before_sleep)
		return false;
	t->h->before_sleep(t->h->w, t->h->hook_arg);
	return true;
}

static void waiter_after_sleep(const struct target *t)
{
	t->h->after_sleep(t->h->w, t->h->hook_arg);
}

static int waiter_begin(const struct target *t)
{
	(void)t;
	return 0;
}

static const struct target_ops waiter_ops = {
	.ready = waiter_ready,
	.deadline = waiter_deadline,
	.timer_due = waiter_timer_due,
	.begin = waiter_begin,
	.veto = waiter_veto,
	.before_sleep = waiter_before_sleep,
	.after_sleep = waiter_after_sleep,
	.end = waiter_end,
	.runnable = false,
};
static void hist(_Atomic uint64_t *h, uint64_t ns)
{
	unsigned b = ns ? 64u - (unsigned)__builtin_clzll(ns) : 0;
	vsched__count(&h[b < VSCHED_HIST_BUCKETS ? b : VSCHED_HIST_BUCKETS - 1]);
}

/* Poll-loop passes that read one clock value before the window ends: only
 * an injected clock that stands still (a paused guest's) gets there; the
 * coarsest real counter (24 MHz) repeats a value for a pass or two. */
#define STILL_PASSES (1u << 16)

/* One halt's state, from the first look to the accounting. */
struct halt {
	/* The fd tags and checks go to `res` (the caller's, or scratch);
	 * account() fills the rest of it only for a caller that asked. */
	struct vsched_block_result *res;
	bool want_res;
	uint64_t deadline;   /* the caller's, in the VM's clock */
	uint64_t t0, poll_end, sleep_start, window;
	uint32_t m;          /* the word at the start (OUTSIDE_GUEST) */
	bool attempted, waited, vetoed;
	bool contended;      /* the contention back-off skipped or cut the poll */
	bool at_deadline;    /* the sleep ended at the caller's deadline */
	bool refused;        /* begin() refused the block: no halt happened */
};

/* Start a halt: the policy, the runnable count, the first look. Returns a
 * reason to return at once (ready, or a deadline already passed: a
 * check-once of the fds) or 0. */
static inline __attribute__((always_inline)) int
first_look(const struct target_ops *op, const struct target *t,
	   struct halt *hl)
{
	struct vsched__sleeper *s = t->s;
	const struct vsched_host_ops *ops = &s->vm->ops;
	uint64_t vg, og;
	int reason;

	vsched__clear_tags(hl->res);
	hl->res->fd_checks = 0;
	hl->res->wake_ns = 0;
	hl->m = atomic_load_explicit(s->word, memory_order_relaxed);
	if (s->lesson_pending)
		vsched__learn(s, t->id);
	/* The policy: a copy, refreshed (under RCU) only when the VM's or
	 * the sleeper's own generation moved, so that a halt normally costs
	 * two loads here. */
	vg = atomic_load_explicit(&s->vm->poll_gen, memory_order_acquire);
	og = atomic_load_explicit(&s->own_gen, memory_order_acquire);
	if (VSCHED__UNLIKELY(vg != s->poll_gen || og != s->own_gen_seen))
		vsched__refresh_policy(s, vg, og);
	runnable_enter(t);
	hl->t0 = hl->poll_end = ops->now_ns(ops->ctx);
	VSCHED__TRACE2(block_begin, t->id, hl->deadline);
	reason = op->begin(t);
	if (VSCHED__UNLIKELY(reason)) {
		hl->refused = true;
		return reason;
	}
	reason = op->ready(t);
	if (reason || hl->deadline > hl->t0)
		return reason;
	/* Check once: every ready fd is reported. */
	return s->nlook && vsched__fd_check(s, hl->res) ? VSCHED_WAKE_FD
					       : VSCHED_WAKE_DEADLINE;
}

/*
 * Host contention (lib/sleeper.h, CONTEND_*): the poll loop found its
 * thread preempted at `now` (a gap between two of its clock reads). Back
 * off: no polling for twice the last back-off (at least CONTEND_MIN_NS, at
 * most CONTEND_MAX_NS). Owner thread.
 */
static void contention_seen(struct vsched__sleeper *s, uint64_t now)
{
	uint64_t b = s->ct.backoff ? 2 * s->ct.backoff : CONTEND_MIN_NS;

	s->ct.backoff = b < CONTEND_MAX_NS ? b : CONTEND_MAX_NS;
	s->ct.until = now + s->ct.backoff;
}

/* A poll from `from` to `now` with no gap: if it lasted long enough to
 * count as evidence, halve the back-off (the host is quieter). */
static void contention_clear(struct vsched__sleeper *s, uint64_t from,
			     uint64_t now)
{
	if (s->ct.backoff && now - from >= CONTEND_CLEAN_NS) {
		s->ct.backoff /= 2;
		if (s->ct.backoff < CONTEND_MIN_NS)
			s->ct.backoff = 0;
	}
}

/* A halt at `now` that the last sample of the host's runnable count kept
 * from polling: sample again if that one is CONTEND_SAMPLE_NS old (this
 * halt would sleep: the pread is no poll's). Still contended? */
static bool still_busy(struct vsched__sleeper *s, uint64_t now)
{
	if (now - s->ct.sampled >= CONTEND_SAMPLE_NS) {
		s->ct.sampled = now;
		s->ct.busy = s->ct.fd >= 0 && vsched__host_busy(s);
	}
	return s->ct.busy;
}

/* The policy's window for this halt, unless the guest's poll control, the
 * target or host contention (lib/sleeper.h) vetoes it (counted). `to_dl`:
 * the halt polls to its deadline whatever the window (a short timed wait,
 * short_wait()), unless vetoed. True to poll. */
static inline __attribute__((always_inline)) bool
choose_window(const struct target_ops *op, const struct target *t,
	      struct halt *hl, bool to_dl)
{
	struct vsched__sleeper *s = t->s;

	hl->window = vsched__poll_window(&s->params, &s->poll);
	if (!hl->window && !to_dl)
		return false;
	/* A back-off ends no later than its length from now: one that
	 * ends farther off was set before the VM's clock stepped back (or
	 * glitched forward and back), and would veto every poll until
	 * the clock caught up the whole step. */
	if (VSCHED__UNLIKELY(hl->t0 < s->ct.until) &&
	    s->ct.until - hl->t0 > s->ct.backoff)
		s->ct.until = hl->t0 + s->ct.backoff;
	hl->contended = hl->t0 < s->ct.until ||
			(VSCHED__UNLIKELY(s->ct.busy) && still_busy(s, hl->t0));
	hl->vetoed = atomic_load_explicit(&s->guest_poll_off, memory_order_relaxed) ||
		     op->veto(t) || hl->contended;
	if (hl->vetoed) {
		vsched__count(&s->hs.vetoed);
		if (hl->contended)
			vsched__count(&s->hs.contended);
		hl->window = 0;
		return false;
	}
	return true;
}

/* A timed halt whose deadline `eff` comes no later than a plain sleep that
 * long costs in CPU (vsched__plain_cost(), measured) would pay for, times
 * the params' cpu_budget_pct, less a sixteenth (a tie goes to the sleep:
 * the poll loop's own work): at the default 100 polling to it costs no
 * more CPU than sleeping and returns on time, where the sleep would
 * return as late as the kernel wakes it, so the halt polls to it. So does
 * one that the kernel could not wake on time (vsched__late_for()) when
 * spin_pct is 100, on time whatever it costs. That is not a poll the
 * policy chose:
 * its window stays the policy's, and the caller's deadline reached is no
 * win (account(); a guest timer that expires meanwhile is, as in any
 * window). Decided once, at the halt's start. Not with spin_pct 0 (never
 * spin), on an injected clock (it may not be real time) or with a custom
 * wait (a simulator's) unless fds are registered (the sleep is epoll's);
 * and a short wait that the sleep-CPU sample picks
 * sleeps (but with spin_pct 100), so that the cost it is judged by is
 * measured again. */
static inline bool short_wait(struct vsched__sleeper *s, uint64_t t0,
			      uint64_t eff)
{
	const struct vsched_host_ops *ops = &s->vm->ops;
	uint64_t c, lim, left = eff - t0;

	if (!s->params.spin_pct || eff == VSCHED_DEADLINE_NONE || eff <= t0 ||
	    ops->now_ns != vsched__clock_now ||
	    (ops->wait != vsched__futex_wait &&
	     !atomic_load_explicit(&s->use_evfd, memory_order_relaxed)))
		return false;
	c = vsched__plain_cost(s, left);
	if (__builtin_mul_overflow(c, (uint64_t)s->params.cpu_budget_pct, &lim))
		lim = UINT64_MAX;
	if (left > lim / 100 * 16 / 17 &&
	    !(s->params.spin_pct == 100 && left <= vsched__late_for(s, left)))
		return false;
	if (s->params.spin_pct == 100)
		return true; /* it never sleeps for a sample: not counted */
	if (!s->params.sleep_cpu_ns && vsched__sleep_sampled(s->sleeps + 1))
		return false; /* arm_and_sleep() counts and samples it */
	s->sleeps++;
	return true;
}

/* Poll for the policy's window (unless vetoed), up to `eff`, the sleep's
 * deadline: the word says POLLING meanwhile. Every VSCHED_FD_CHECK_NS of
 * polling (the first after an eighth of it, so that a poll won at once
 * makes no syscall) it looks again at the sleep's deadline (a guest timer
 * armed since the window began: an arm wakes only a BLOCKED vCPU) and at
 * the fds, and samples the host's runnable count when that is due. Host
 * contention (a sample, or a gap of over CONTEND_GAP_NS between two of its
 * clock reads: its thread was preempted) ends the poll (lib/sleeper.h).
 * Returns the reason the poll ended the halt, or 0 to go to sleep. */
static inline __attribute__((always_inline)) int
poll_window(const struct target_ops *op, const struct target *t,
	    struct halt *hl, uint64_t eff)
{
	struct vsched__sleeper *s = t->s;
	const struct vsched_host_ops *ops = &s->vm->ops;
	const bool fds = s->nlook != 0; /* doorbells ring only in a sleep */
	uint64_t end, wend, now = hl->t0, next_look = hl->t0 + VSCHED_FD_CHECK_NS / 8;
	uint64_t checked = UINT64_MAX, last = 0;
	/* The preemption gap is looked for only when asked (the params in
	 * force, fixed for this halt): off, the loop does not pay for it. */
	const bool gaps = s->params.contention != VSCHED_CONTENTION_OFF;
	int reason = 0;

	const bool to_dl = short_wait(s, hl->t0, eff);

	if (!choose_window(op, t, hl, to_dl))
		return 0;
	wend = hl->t0 + hl->window; /* the window's own end */
	if (wend < hl->t0)
		wend = UINT64_MAX;
	if (to_dl && wend < eff)
		wend = eff;
	end = wend < eff ? wend : eff;
	hl->attempted = true;
	/* An injected clock may stand still (a paused guest's): a window
	 * whose clock has not moved forward for STILL_PASSES passes (standing
	 * still or stepping back on each) ends, and the
	 * halt sleeps (the sleep converts what is left of it). One that
	 * steps back (set back: a migration, a wall clock) takes the
	 * window's end and its next look back with it: they would come as
	 * much later as it stepped (the caller's and the timers' deadlines
	 * stay where they are, in the VM's clock). */
	uint64_t prev = hl->t0;
	unsigned still = 0;
	bool cut = false;
	vsched__mode_set_relaxed(s, hl->m, VSCHED_MODE_POLLING);
	/* The clock is read on every iteration, right before the check, so
	 * that a poll that wins ends at the read before the check that saw
	 * the reason (KVM's poll_end): no clock read between "a reason to
	 * run" and the return. (A second check right after the pause was
	 * slower in the wakeup benchmark, not faster.) */
	for (;;) {
		reason = op->ready(t);
		if (reason)
			break;
		vsched__relax();
		now = ops->now_ns(ops->ctx);
		/* Preempted since the last read (not across the first: the
		 * hooks before the loop are not the poll's): stop, back off
		 * (lib/sleeper.h). */
		if (gaps) {
			if (VSCHED__UNLIKELY(now > last + CONTEND_GAP_NS) && last) {
				contention_seen(s, now);
				hl->contended = true;
				vsched__count(&s->hs.contended);
				break;
			}
			last = now;
		}
		if (now >= next_look) {
			/* The host's runnable count, sampled (not in a poll
			 * won before the first look: lib/sleeper.h). */
			if (s->ct.fd >= 0 && now - s->ct.sampled >= CONTEND_SAMPLE_NS) {
				s->ct.sampled = now;
				if ((s->ct.busy = vsched__host_busy(s))) {
					hl->contended = true;
					vsched__count(&s->hs.contended);
					break;
				}
			}
			/* A timer armed meanwhile ends the window at its
			 * deadline (timer_due below posts it). */
			uint64_t e = op->deadline(t, hl->deadline);
			next_look = now + VSCHED_FD_CHECK_NS;
			if (e < eff) {
				eff = e;
				if (end > e)
					end = e;
			}
			/* The fds, at a bounded rate: one non-blocking
			 * epoll_pwait per VSCHED_FD_CHECK_NS of polling. */
			if (fds) {
				checked = now;
				if (vsched__fd_check(s, hl->res)) {
					reason = VSCHED_WAKE_FD;
					break;
				}
			}
		}
		if (VSCHED__UNLIKELY(now <= prev)) {
			if (now < prev) {
				const uint64_t back = prev - now;

				wend = wend > back ? wend - back : 0;
				next_look = next_look > back ? next_look - back : 0;
				end = wend < eff ? wend : eff;
				prev = now;
			}
			/* Not past the last read, standing or stepping
			 * back: no progress. A clock that keeps running
			 * back would take the window's end with it on
			 * every read and never reach it. */
			if (++still >= STILL_PASSES) {
				cut = true;
				break;
			}
		} else {
			prev = now;
			still = 0;
		}
		if (now < end)
			continue;
		/* The window's end, or the caller's deadline: stop. */
		if (end != eff || eff >= hl->deadline)
			break;
		/* A guest timer's deadline: post it and win... */
		reason = op->timer_due(t);
		if (reason)
			break;
		/* ...unless it moved or was disarmed meanwhile: poll on to
		 * the window's end or the next deadline (one still due now,
		 * not posted, is left to the sleep's path). */
		eff = op->deadline(t, hl->deadline);
		end = wend < eff ? wend : eff;
		if (now >= end)
			break;
	}
	vsched__mode_set_relaxed(s, hl->m, VSCHED_MODE_OUTSIDE_GUEST);
	hl->poll_end = now;
	if (!hl->contended)
		contention_clear(s, hl->t0, now);
	if (reason)
		return reason; /* won: poll_end is the halt's end (account()) */
	if (hl->contended || cut)
		return 0; /* cut short: sleep (to the deadline if it passed) */
	if (end == hl->deadline)
		/* The deadline, inside the window: the fds first (unless the
		 * last check was at this very time). */
		return fds && checked != now && vsched__fd_check(s, hl->res)
			       ? VSCHED_WAKE_FD
			       : VSCHED_WAKE_DEADLINE;
	return 0;
}

/* Arm BLOCKED, full barrier, re-check (the Dekker pair with vsched_post()
 * and vsched_vcpu_kick(), doc/protocol.md), then sleep until a reason to
 * run, the deadline or an error. Returns the reason. */
static inline __attribute__((always_inline)) int
arm_and_sleep(const struct target_ops *op, const struct target *t,
	      struct halt *hl)
{
	struct vsched__sleeper *s = t->s;
	const struct vsched_host_ops *ops = &s->vm->ops;
	const uint32_t blocked = vsched__mode_with(hl->m, VSCHED_MODE_BLOCKED);
	const bool hooked = op->before_sleep(t);
	int reason;

	reason = vsched__arm(s, blocked);
	if (reason)
		goto out;
	reason = op->ready(t);
	if (reason) {
		vsched__mode_leave_blocked(s, blocked);
		goto out;
	}
	runnable_leave(s);
	/* A halt that did not poll sleeps from its start (no clock read:
	 * its wait_ns then counts the hook and the arm too). */
	hl->sleep_start = hl->attempted ? ops->now_ns(ops->ctx) : hl->poll_end;
	hl->waited = true;
	/* The sleep's CPU, sampled, when not given: the ADAPTIVE policy
	 * prices sleeps with it, and every policy polls to a deadline no
	 * farther than cpu_budget_pct of it (short_wait()). Learnt at a
	 * waker's wake below (unless the sample counts only as a whole timed
	 * wait: it spun, or a class learning its CPU started it) or at a
	 * timed wait's deadline, spins included (lib/sleep.c). */
	s->cpu0 = 0;
	if (!s->params.sleep_cpu_ns && vsched__sleep_sampled(++s->sleeps))
		vsched__sample_start(s);
	const bool learn_wake = s->params.policy == VSCHED_POLL_ADAPTIVE &&
				!s->params.wake_cost_ns;
	uint64_t arm_at = hl->sleep_start; /* this arm's; wake stamps before it are stale */
	for (;;) {
		uint64_t eff = op->deadline(t, hl->deadline);
		/* The arm's mechanism, which the wakers read
		 * (vsched__wake_sleeper()). */
		int r = atomic_load_explicit(&s->sleep_evfd, memory_order_relaxed)
				? vsched__sleep_epoll(s, blocked, eff, hl->res)
				: vsched__sleep_futex(s, blocked, eff);
		if (r == VSCHED_WAKE_DEADLINE && eff < hl->deadline) {
			/* A guest timer's deadline, not the caller's. */
			reason = op->timer_due(t);
			if (reason)
				break;
			r = 0;
		}
		/* The caller's deadline, which a request that does not wake
		 * (VSCHED_REQ_NO_WAKEUP) may have found us asleep before: the
		 * block returns what is pending, as at any other wakeup. */
		if (r == VSCHED_WAKE_DEADLINE) {
			int p = op->ready(t);
			hl->at_deadline = true; /* nothing for the policy to learn */
			if (p)
				r = p;
		}
		if (r) {
			reason = r;
			break;
		}
		/* A poster or kick moved us out of BLOCKED. */
		reason = op->ready(t);
		if (reason) {
			/* The wake first: the CPU sample's clock read is a
			 * syscall (~2 us) that the wake's must not include. */
			if (learn_wake)
				hl->res->wake_ns = vsched__learn_wake_cost(s, arm_at);
			if (s->cpu0 && !s->cpu_whole)
				vsched__learn_sleep_cpu(s);
			break;
		}
		/* Woken with nothing to do (its event was consumed before we
		 * looked, a doorbell rang for a false condition, or a kick
		 * after the VM's clock stepped): the timers first, as at a
		 * timer's deadline. After a step back this is the look that
		 * unlatches a LEVEL line the step lowered, which would
		 * otherwise never post again (timer.h); after a step forward
		 * it posts what came due (a vCPU without timers: its state
		 * check and its timer count, nothing more). */
		reason = op->timer_due(t);
		if (reason)
			break;
		/* Then arm again, unless the caller's deadline has passed
		 * meanwhile (a doorbell that keeps ringing must not starve
		 * it). */
		arm_at = ops->now_ns(ops->ctx);
		if (arm_at >= hl->deadline) {
			reason = s->nlook && vsched__fd_check(s, hl->res)
					 ? VSCHED_WAKE_FD
					 : VSCHED_WAKE_DEADLINE;
			break;
		}
		vsched__count(&s->hs.spurious); /* woken before the deadline for nothing */
		/* The CPU sample was of one sleep: not of this round too. */
		s->cpu0 = 0;
		reason = vsched__arm(s, blocked);
		if (reason)
			break;
		reason = op->ready(t);
		if (reason) {
			vsched__mode_leave_blocked(s, blocked);
			break;
		}
	}
	runnable_enter(t);
out:
	/* Every way out of a sleep that ran before_sleep runs after_sleep. */
	if (hooked)
		op->after_sleep(t);
	return reason;
}

/* Every way out: the unblocking hook, the stats (owner-only counters, a
 * load and a store each), the result, and the halt's real length kept for
 * the policy, which learns it at the next halt's start (learn()). A halt
 * that never slept ended at the engine's last clock read (poll_end: its
 * start, or the poll loop's last read, as KVM's halt_ns), so only a sleep
 * reads the clock here. */
static inline __attribute__((always_inline)) int
account(const struct target_ops *op, const struct target *t,
	struct halt *hl, int reason)
{
	struct vsched__sleeper *s = t->s;
	const struct vsched_host_ops *ops = &s->vm->ops;
	struct vsched_block_result *res = hl->res;
	/* The caller's own deadline, reached while polling, is no win: the
	 * poll predicted nothing the caller did not already know. */
	const bool won = hl->attempted && !hl->waited &&
			 reason != VSCHED_WAKE_DEADLINE;
	uint64_t now, halt_ns, pns;
	bool valid;
	/* What the call returns: the halt's reason, unless the unblocking
	 * hook did what a block forbids (the halt itself is learnt and
	 * counted as it ended). */
	const int out = op->end(t, reason);
	now = hl->waited ? ops->now_ns(ops->ctx) : hl->poll_end;
	halt_ns = now > hl->t0 ? now - hl->t0 : 0;
	valid = reason > 0 && reason != VSCHED_WAKE_SIGNAL; /* not an error */
	pns = hl->poll_end > hl->t0 ? hl->poll_end - hl->t0 : 0;
	if (hl->attempted) {
		vsched__count(&s->hs.attempted);
		if (won) {
			vsched__count(&s->hs.successful);
			if (!valid)
				vsched__count(&s->hs.invalid);
			vsched__count_n(&s->hs.success_ns, pns);
			hist(s->hs.hist_success, pns);
		} else {
			vsched__count_n(&s->hs.fail_ns, pns);
			hist(s->hs.hist_fail, pns);
		}
	}
	if (hl->waited) {
		uint64_t w = now > hl->sleep_start ? now - hl->sleep_start : 0;
		vsched__count_n(&s->hs.wait_ns, w);
		hist(s->hs.hist_wait, w);
	}
	/* How long the halt really was, for the policy (learn()): only a
	 * wake the policy had to predict. A halt that ended at the caller's
	 * deadline taught nothing about when the next wake comes (a timed
	 * yield's known timeout, an I/O thread's periodic deadline). */
	s->lesson_window = hl->window;
	s->lesson_halt_ns = halt_ns;
	s->lesson_valid = valid;
	s->lesson_wake_ns = res->wake_ns;
	s->lesson_pending = reason != VSCHED_WAKE_DEADLINE && !hl->at_deadline &&
			    !hl->refused;
	if (won)
		VSCHED__TRACE2(poll_won, t->id, pns);
	else if (hl->attempted)
		VSCHED__TRACE2(poll_lost, t->id, pns);
	VSCHED__TRACE3(block_end, t->id, reason, halt_ns);

	if (hl->want_res) {
		res->reason = out;
		res->halt_ns = halt_ns;
		res->window_ns = hl->window;
		res->poll_ns = hl->attempted ? pns : 0;
		res->poll_won = won;
		res->vetoed = hl->vetoed;
	}
	return out;
}

/* The engine: first look, poll, arm and sleep, account. Owner thread. */
static inline __attribute__((always_inline)) int
engine(const struct target *t, uint64_t deadline,
       struct vsched_block_result *res)
{
	/* Read before `t` is handed to any call: after inlining into its
	 * caller the table is a known constant, so every target operation
	 * below is a direct call and the readiness check is inlined into the
	 * poll loop (through t->op, re-read after each call, it was not). */
	const struct target_ops *const op = t->op;
	/* Scratch for the fd tags when the caller wants no result: the
	 * engine writes every field of it that it reads but this one. */
	struct vsched_block_result local;
	struct halt hl = { .res = res ? res : &local, .want_res = res != NULL,
			   .deadline = deadline };
	if (!res)
		local.ready_tags = NULL;
	int reason = first_look(op, t, &hl);

	if (!reason)
		reason = poll_window(op, t, &hl, op->deadline(t, deadline));
	if (!reason)
		reason = arm_and_sleep(op, t, &hl);
	return account(op, t, &hl, reason);
}

int vsched__run_engine(struct vsched__sleeper *s,
		       const struct vsched__wait_hooks *h, uint64_t deadline,
		       struct vsched_block_result *res)
{
	struct target t = { .op = &waiter_ops, .s = s, .h = h, .id = -1 };
	int r;

	/* One consumer inside at a time (waiter.h promises VSCHED_ESTATE to
	 * a second one, also while the first runs its condition or hooks,
	 * where the state still says idle): an exchange, so that two
	 * consumers cannot both get in; acquire and release hand the
	 * sleeper's state from one consumer to the next. Not a fence of the
	 * kick protocol: no waker reads the flag. */
	if (atomic_exchange_explicit(&s->in_engine, true, memory_order_acquire))
		return VSCHED_ESTATE; /* re-entered from a hook, or a second consumer */
	r = engine(&t, deadline, res);
	atomic_store_explicit(&s->in_engine, false, memory_order_release);
	return r;
}

int vsched_vcpu_block_ex(struct vsched_vcpu *v, uint64_t deadline,
			 struct vsched_block_result *res)
{
	struct vsched_block_result copy;
	uint32_t m;
	int r;

	if (!v)
		return VSCHED_EINVAL;
	/* A result of this library's own layout is used in place (as
	 * vsched_waiter_wait() does): the copy in and out would leave it as
	 * the engine does, and no check can fail. */
	const bool copied = res && res->size != sizeof(*res);
	if (copied && vsched__result_in(&copy, res))
		return VSCHED_EINVAL;
	m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	if ((r = vsched__allowed(VSCHED__C_VCPU_BLOCK, m)))
		return r;
	struct target t = { .op = &vcpu_ops, .s = &v->sl, .vcpu = v,
			    .id = (int)v->id };
	/* Claimed by exchange, as vsched__run_engine() does: it refuses what
	 * the vCPU's thread does from the engine's hooks (a block, a
	 * destroy), and it orders the block against an fd_add or fd_del of
	 * the vCPU made on another thread (outside their context), which
	 * claim it too: one of the two is refused, so no table grows under a
	 * sleep. A plain load and store let both in (session 29: the kernel
	 * wrote a freed event array). One uncontended exchange a halt. Not
	 * a fence of the kick protocol: no waker reads the flag. */
	if (atomic_exchange_explicit(&v->sl.in_engine, true, memory_order_acquire))
		return VSCHED_ESTATE;
	r = engine(&t, deadline, copied ? &copy : res);
	atomic_store_explicit(&v->sl.in_engine, false, memory_order_release);
	if (copied)
		vsched__result_out(res, &copy);
	return r;
}

int vsched_vcpu_block(struct vsched_vcpu *v, uint64_t deadline)
{
	return vsched_vcpu_block_ex(v, deadline, NULL);
}
