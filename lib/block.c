/* SPDX-License-Identifier: MIT */
/*
 * The block/poll engine, shared by vCPUs (vsched_vcpu_block) and generic
 * waiters (lib/waiter.c), in three steps: poll for the policy's window;
 * arm BLOCKED + full barrier + re-check and sleep on a futex or in
 * epoll_pwait (lib/os.c); account (policy update, KVM-named stats). What
 * differs between a vCPU and a waiter is one table of target operations.
 * The mode word's transitions are lib/mode.h's.
 */
#include <errno.h>
#include <string.h>

#include <urcu/urcu-bp.h>

#include "abi.h"
#include "mode.h"
#include "contract.h"

#define SLOT_EVFD VSCHED__OS_EVFD
#define SLOT_TFD VSCHED__OS_TFD
#define SLOT_USER VSCHED__OS_USER
#define FIRST_SLOTS 8 /* the fd tables grow from this, doubling */
#define TFD_UNKNOWN (VSCHED_DEADLINE_NONE - 1) /* fired or never set */

/* Timed sleeps ask the kernel to wake them early by the sleeper's learnt
 * lateness and spin on their word for the rest. The lateness is measured,
 * not derived: what the kernel's timer took beyond the time asked for,
 * which on the futex includes the thread's timer slack (so no prctl is
 * needed to read it) and on the timerfd only the wakeup latency. The
 * margin starts at MARGIN_START (Linux's default 50 us slack plus a
 * wakeup), follows the measured lateness of those early wakeups (EWMA,
 * 1/8) plus MARGIN_PAD, and is capped at MARGIN_MAX: a thread with a
 * larger slack sleeps late rather than spin for it. Only a timeout the
 * sleep asked for is learnt and finished on the CPU; a spurious return,
 * a signal or an error never is. */
/* The CPU a sleep costs its thread, for the ADAPTIVE policy when its
 * sleep_cpu_ns is 0: thread CPU time read around one sleep in SLEEP_SAMPLE
 * (two clock_gettime syscalls), only for a sleep that a waker ended before
 * any on-time spin could start, learnt as an EWMA (1/8). */
#define SLEEP_SAMPLE 8

#define MARGIN_START 60000
#define MARGIN_START_FD 10000 /* the timerfd: a wakeup, no slack */
#define MARGIN_PAD 2000
#define MARGIN_MAX 100000

static uint64_t early_for(uint64_t kd, uint64_t by)
{
	if (kd == VSCHED_DEADLINE_NONE)
		return kd;
	return kd > by ? kd - by : 0;
}

/* An early wakeup came `late` ns after the time it asked for: learn. */
static void learn_margin(uint64_t *margin, uint64_t late)
{
	int64_t m = (int64_t)*margin;
	int64_t target = (int64_t)(late < MARGIN_MAX ? late : MARGIN_MAX) + MARGIN_PAD;

	m += (target - m) / 8;
	*margin = (uint64_t)(m < MARGIN_MAX ? m : MARGIN_MAX);
}

/* The rest of an early timed wakeup: spin on the word until the kernel
 * deadline `kd` (CLOCK_MONOTONIC) or a poster moves it. Reads only. */
static void finish_on_time(struct vsched__sleeper *s, uint32_t blocked,
			   uint64_t kd)
{
	while (atomic_load_explicit(s->word, memory_order_relaxed) == blocked &&
	       vsched__clock_now(NULL) < kd)
		vsched__relax();
}

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
	/* Before the first look: the blocking hook, expired timers post. */
	void (*begin)(const struct target *t);
	/* Veto the poll window beyond the guest's own switch? */
	bool (*veto)(const struct target *t);
	/* Right before the arm: true if a hook ran that after_sleep undoes. */
	bool (*before_sleep)(const struct target *t);
	void (*after_sleep)(const struct target *t);
	/* Every way out: the unblocking hook. */
	void (*end)(const struct target *t);
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
	if (t->op->runnable && !t->s->counted_runnable) {
		atomic_fetch_add_explicit(&runnable_vcpus, 1, memory_order_relaxed);
		t->s->counted_runnable = true;
	}
}

static void runnable_leave(struct vsched__sleeper *s)
{
	if (s->counted_runnable) {
		atomic_fetch_sub_explicit(&runnable_vcpus, 1, memory_order_relaxed);
		s->counted_runnable = false;
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

static inline __attribute__((always_inline)) void
vcpu_begin(const struct target *t)
{
	const struct vsched_host_ops *ops = &t->s->vm->ops;

	/* The blocking hook covers the whole poll window. */
	if (ops->blocking)
		ops->blocking(t->vcpu, ops->ctx);
	if (atomic_load_explicit(&t->vcpu->ntimers_pub, memory_order_relaxed))
		vsched_vcpu_fire_timers(t->vcpu); /* expired timers post now */
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

static void vcpu_end(const struct target *t)
{
	const struct vsched_host_ops *ops = &t->s->vm->ops;

	if (ops->unblocking)
		ops->unblocking(t->vcpu, ops->ctx);
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

static void waiter_nop(const struct target *t)
{
	(void)t;
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

static const struct target_ops waiter_ops = {
	.ready = waiter_ready,
	.deadline = waiter_deadline,
	.timer_due = waiter_timer_due,
	.begin = waiter_nop,
	.veto = waiter_veto,
	.before_sleep = waiter_before_sleep,
	.after_sleep = waiter_after_sleep,
	.end = waiter_nop,
	.runnable = false,
};
static void hist(_Atomic uint64_t *h, uint64_t ns)
{
	unsigned b = ns ? 64u - (unsigned)__builtin_clzll(ns) : 0;
	vsched__count(&h[b < VSCHED_HIST_BUCKETS ? b : VSCHED_HIST_BUCKETS - 1]);
}

/* One ready registered fd: into the inline tags, and into the caller's
 * array while it has room; every one is counted. */
static void add_tag(struct vsched_block_result *res, uint64_t tag)
{
	unsigned k = res->nready_total++;
	if (k < VSCHED_BLOCK_MAX_TAGS)
		res->tags[k] = tag;
	if (res->ready_tags) {
		if (k < res->ready_cap) {
			res->ready_tags[k] = tag;
			res->nready = k + 1;
		}
	} else if (k < VSCHED_BLOCK_MAX_TAGS) {
		res->nready = k + 1;
	}
}

static void clear_tags(struct vsched_block_result *res)
{
	res->nready = 0;
	res->nready_total = 0;
}

/* The user fd in epoll slot `slot`, still registered? */
static bool user_slot(const struct vsched__sleeper *s, uint64_t slot)
{
	return slot >= SLOT_USER && slot - SLOT_USER < s->nslots &&
	       s->fd_of[slot - SLOT_USER] >= 0;
}

/* Check the registered fds without sleeping: one epoll_pwait(0). The kick
 * eventfd and the timerfd are left alone (not BLOCKED, nobody writes the
 * eventfd; the sleep drains them). Returns the number of ready user fds,
 * whose tags are in res (doorbells are not looked at: they ring only while
 * the owner sleeps). Owner thread, with s->nlook != 0. */
static unsigned collect_ready(struct vsched__sleeper *s,
			      struct vsched_block_result *res)
{
	int n = vsched__os_wait(&s->os, s->ev, (int)s->nslots + 2, 0);

	clear_tags(res);
	for (int i = 0; i < n; i++) {
		uint64_t slot = s->ev[i].data.u64;
		if (user_slot(s, slot) && !s->bell_of[slot - SLOT_USER])
			add_tag(res, s->tag_of[slot - SLOT_USER]);
	}
	return res->nready_total;
}

/* The same, from the poll loop or a check-once: counted. */
static unsigned fd_check(struct vsched__sleeper *s,
			 struct vsched_block_result *res)
{
	vsched__count(&s->hs.fd_checks);
	res->fd_checks++;
	return collect_ready(s, res);
}

static int sleep_futex(struct vsched__sleeper *s, uint32_t blocked,
		       uint64_t deadline)
{
	const struct vsched_host_ops *ops = &s->vm->ops;

	/* The default futex wait sleeps on CLOCK_MONOTONIC; a custom wait
	 * gets the deadline in the VM's clock, as vm.h documents. */
	const bool kernel = ops->wait == vsched__futex_wait;

	for (;;) {
		uint64_t kd = kernel ? vsched__kernel_deadline(ops, deadline) : deadline;
		/* The kernel's futex timeout is an hrtimer with the thread's
		 * timer slack: it may fire that late. Ask for the deadline
		 * minus the learnt lateness, then spin on the word until the
		 * deadline: the sleep ends on time without changing the
		 * thread's slack. */
		uint64_t early = kernel ? early_for(kd, s->wake_margin_ns) : kd;
		int rc = ops->wait((uint32_t *)s->word, blocked, early, ops->ctx);
		/* Only the early timeout asked for: a spurious return 0 (a
		 * late FUTEX_WAKE of an earlier sleep), a signal or an error
		 * goes on below, never to a spin until the deadline. */
		if (rc == -ETIMEDOUT && early != kd &&
		    atomic_load_explicit(s->word, memory_order_relaxed) == blocked) {
			uint64_t woke = vsched__clock_now(NULL);
			learn_margin(&s->wake_margin_ns, woke > early ? woke - early : 0);
			finish_on_time(s, blocked, kd);
		}
		if (!vsched__mode_still(s, blocked)) {
			vsched__mode_woken(s);
			/* Woken, and interrupted too: the signal is reported,
			 * even when the wake had no reason (a kick, a timer
			 * re-arm) and the engine would sleep again. */
			return rc == -EINTR ? VSCHED_WAKE_SIGNAL : 0;
		}
		if (rc == -EINTR) {
			vsched__mode_leave_blocked(s, blocked); /* a racing poster: still SIGNAL */
			return VSCHED_WAKE_SIGNAL;
		}
		/* Any other error (EPERM or ENOSYS from a seccomp filter,
		 * EFAULT) would fail again at once: report it rather than
		 * spin on it until the deadline. */
		if (rc < 0 && rc != -ETIMEDOUT) {
			if (vsched__mode_leave_blocked(s, blocked) != blocked)
				return 0;
			return rc;
		}
		if (ops->now_ns(ops->ctx) >= deadline) {
			if (vsched__mode_leave_blocked(s, blocked) != blocked)
				return 0;
			return VSCHED_WAKE_DEADLINE;
		}
		vsched__count(&s->hs.spurious);
	}
}

/* Arm the sleep's timerfd at `at` (CLOCK_MONOTONIC; NONE disarms) unless
 * it is set there already and has not fired: an I/O thread that sleeps
 * without a deadline, or again to the same one, makes no timerfd syscall. */
static void timer_at(struct vsched__sleeper *s, uint64_t at)
{
	if (at == s->tfd_at)
		return;
	vsched__os_timer_at(&s->os, at);
	s->tfd_at = at;
}

static int sleep_epoll(struct vsched__sleeper *s, uint32_t blocked,
		       uint64_t deadline, struct vsched_block_result *res)
{
	const struct vsched_host_ops *ops = &s->vm->ops;
	struct epoll_event *ev = s->ev;
	/* The timerfd has no slack, but the wakeup has a latency: arm it
	 * early by the learnt margin and spin for the rest (as sleep_futex). */
	uint64_t kd = vsched__kernel_deadline(ops, deadline);
	uint64_t early = early_for(kd, s->fd_margin_ns);

	timer_at(s, early);
	for (;;) {
		bool timer = false, bell = false;
		/* Room for every registered fd: all ready ones are reported. */
		int n = vsched__os_wait(&s->os, ev, (int)s->nslots + 2, -1);

		if (n == -EINTR) {
			/* Reported even when a poster raced us (see
			 * sleep_futex()). */
			if (!vsched__mode_still(s, blocked))
				vsched__mode_woken(s);
			else
				vsched__mode_leave_blocked(s, blocked);
			return VSCHED_WAKE_SIGNAL;
		}
		if (n < 0) { /* EPERM from a seccomp filter, EBADF ...: report */
			if (vsched__mode_leave_blocked(s, blocked) != blocked)
				return 0;
			return n;
		}
		clear_tags(res);
		for (int i = 0; i < n; i++) {
			uint64_t slot = ev[i].data.u64;
			if (slot == SLOT_EVFD) {
				vsched__os_drain(s->os.evfd);
			} else if (slot == SLOT_TFD) {
				vsched__os_drain(s->os.tfd);
				s->tfd_at = TFD_UNKNOWN;
				timer = true;
			} else if (user_slot(s, slot) && s->bell_of[slot - SLOT_USER]) {
				/* A doorbell: reset it here; it only says "look
				 * at the condition again". */
				vsched__os_drain(s->fd_of[slot - SLOT_USER]);
				bell = true;
			} else if (user_slot(s, slot)) {
				add_tag(res, s->tag_of[slot - SLOT_USER]);
			}
		}
		if (timer && early != kd && !res->nready_total &&
		    atomic_load_explicit(s->word, memory_order_relaxed) == blocked) {
			uint64_t woke = vsched__clock_now(NULL);
			learn_margin(&s->fd_margin_ns, woke > early ? woke - early : 0);
			finish_on_time(s, blocked, kd);
			/* The fds once more, as the sleep would have seen them. */
			if (atomic_load_explicit(s->word, memory_order_relaxed) == blocked)
				collect_ready(s, res);
		}
		if (!vsched__mode_still(s, blocked)) {
			vsched__mode_woken(s);
			return 0;
		}
		if (res->nready_total) {
			if (vsched__mode_leave_blocked(s, blocked) != blocked)
				return 0;
			return VSCHED_WAKE_FD;
		}
		if (bell) {
			/* Woken for the condition: the engine looks at it and
			 * returns, or arms and sleeps again (a ring left over
			 * from an earlier needs-kick returns nothing). */
			vsched__mode_leave_blocked(s, blocked);
			return 0;
		}
		if (ops->now_ns(ops->ctx) >= deadline) {
			if (vsched__mode_leave_blocked(s, blocked) != blocked)
				return 0;
			return VSCHED_WAKE_DEADLINE;
		}
		/* A stale eventfd count, or the timerfd expired before an
		 * injected clock reached the deadline: convert it again. */
		if (timer) {
			kd = vsched__kernel_deadline(ops, deadline);
			early = early_for(kd, s->fd_margin_ns);
			timer_at(s, early);
		}
		vsched__count(&s->hs.spurious);
	}
}

/*
 * Take the policy in force: the sleeper's own when it has one, else the
 * VM's. Its state restarts when the policy changed: the sleeper's own was
 * set or cleared, or the VM's changed while the sleeper follows it. Each
 * pointer is read after its generation (acquire), which its installer bumps
 * after publishing the pointer: a reader that saw a generation finds that
 * policy or a newer one, and a newer one bumps the generation again.
 */
static void refresh_policy(struct vsched__sleeper *s, uint64_t vg, uint64_t og)
{
	struct vsched__poll_cfg cfg, *own;
	bool restart = og != s->own_gen_seen;

	urcu_bp_read_lock();
	own = atomic_load_explicit(&s->own_poll, memory_order_acquire);
	if (own) {
		cfg = *own;
		VSCHED__TSAN_RELEASE(own);
	}
	urcu_bp_read_unlock();
	if (!own) {
		vsched__poll_read(s->vm, &cfg);
		restart = restart || s->own_params || cfg.gen != s->poll_gen;
		vg = cfg.gen;
	}
	s->poll_gen = vg;
	s->own_gen_seen = og;
	s->own_params = own != NULL;
	if (restart) {
		s->params = cfg.p;
		vsched_poll_init(&s->params, &s->poll);
	}
}

int vsched__sleeper_set_poll(struct vsched__sleeper *s,
			     const struct vsched_poll_params *p)
{
	struct vsched__poll_cfg *cfg = NULL, *old;
	struct vsched_poll_params n;

	if (p) {
		if (!vsched__poll_params_ok(p, &n))
			return VSCHED_EINVAL;
		cfg = vsched__alloc(&s->vm->alloc, sizeof(*cfg));
		if (!cfg)
			return VSCHED_ENOMEM;
		cfg->p = n;
		cfg->gen = 0;
	}
	old = atomic_exchange_explicit(&s->own_poll, cfg, memory_order_seq_cst);
	/* After the pointer (see refresh_policy()). */
	atomic_fetch_add_explicit(&s->own_gen, 1, memory_order_release);
	if (old) {
		urcu_bp_synchronize_rcu();
		VSCHED__TSAN_ACQUIRE(old); /* the readers' releases, for TSan */
		vsched__free(&s->vm->alloc, old, sizeof(*old));
	}
	return 0;
}

int vsched_vcpu_set_poll(struct vsched_vcpu *v,
			 const struct vsched_poll_params *p)
{
	int rc;

	if (!v)
		return VSCHED_EINVAL;
	if ((rc = vsched__vcpu_allowed(v, VSCHED__C_VCPU_SET_POLL)))
		return rc;
	return vsched__sleeper_set_poll(&v->sl, p);
}

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
};

/* The previous halt's lesson (account()), taken at this halt's start,
 * before the policy is refreshed and this halt's window is chosen: the
 * policy learns every halt, in order, with the parameters it ran under,
 * and none of its work sits between "a reason to run" and the return. */
static void learn(const struct target *t)
{
	struct vsched__sleeper *s = t->s;
	uint64_t before = s->poll.window_ns;

	s->lesson_pending = false;
	if (!s->params.sleep_cpu_ns) { /* measured here (SLEEP_SAMPLE) */
		struct vsched_poll_params p = s->params;
		p.sleep_cpu_ns = s->sleep_cpu_ns;
		vsched__poll_update(&p, &s->poll, s->lesson_window,
				    s->lesson_halt_ns, s->lesson_valid);
	} else {
		vsched__poll_update(&s->params, &s->poll, s->lesson_window,
				    s->lesson_halt_ns, s->lesson_valid);
	}
	if (s->poll.window_ns != before)
		VSCHED__TRACE3(window_change, t->id, before, s->poll.window_ns);
}

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

	clear_tags(hl->res);
	hl->res->fd_checks = 0;
	hl->m = atomic_load_explicit(s->word, memory_order_relaxed);
	if (s->lesson_pending)
		learn(t);
	/* The policy: a copy, refreshed (under RCU) only when the VM's or
	 * the sleeper's own generation moved, so that a halt normally costs
	 * two loads here. */
	vg = atomic_load_explicit(&s->vm->poll_gen, memory_order_acquire);
	og = atomic_load_explicit(&s->own_gen, memory_order_acquire);
	if (VSCHED__UNLIKELY(vg != s->poll_gen || og != s->own_gen_seen))
		refresh_policy(s, vg, og);
	runnable_enter(t);
	hl->t0 = hl->poll_end = ops->now_ns(ops->ctx);
	VSCHED__TRACE2(block_begin, t->id, hl->deadline);
	op->begin(t);
	reason = op->ready(t);
	if (reason || hl->deadline > hl->t0)
		return reason;
	/* Check once: every ready fd is reported. */
	return s->nlook && fd_check(s, hl->res) ? VSCHED_WAKE_FD
					       : VSCHED_WAKE_DEADLINE;
}

/* Poll for the policy's window (unless vetoed), up to `eff`, the sleep's
 * deadline: the word says POLLING meanwhile. Every VSCHED_FD_CHECK_NS of
 * polling (the first after an eighth of it, so that a poll won at once
 * makes no syscall) it looks again at the sleep's deadline (a guest timer
 * armed since the window began: an arm wakes only a BLOCKED vCPU) and at
 * the fds. Returns the reason the poll ended the halt, or 0 to go to
 * sleep. */
static inline __attribute__((always_inline)) int
poll_window(const struct target_ops *op, const struct target *t,
	    struct halt *hl, uint64_t eff)
{
	struct vsched__sleeper *s = t->s;
	const struct vsched_host_ops *ops = &s->vm->ops;
	const bool fds = s->nlook != 0; /* doorbells ring only in a sleep */
	uint64_t end, wend, now = hl->t0, next_look = hl->t0 + VSCHED_FD_CHECK_NS / 8;
	uint64_t checked = UINT64_MAX;
	int reason = 0;

	hl->window = vsched__poll_window(&s->params, &s->poll);
	if (!hl->window)
		return 0;
	hl->vetoed = atomic_load_explicit(&s->guest_poll_off, memory_order_relaxed) ||
		     op->veto(t);
	if (hl->vetoed) {
		vsched__count(&s->hs.vetoed);
		hl->window = 0;
		return 0;
	}
	wend = hl->t0 + hl->window; /* the window's own end */
	if (wend < hl->t0)
		wend = UINT64_MAX;
	end = wend < eff ? wend : eff;
	hl->attempted = true;
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
		if (now >= next_look) {
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
				if (fd_check(s, hl->res)) {
					reason = VSCHED_WAKE_FD;
					break;
				}
			}
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
	if (reason)
		return reason; /* won: poll_end is the halt's end (account()) */
	if (end == hl->deadline)
		/* The deadline, inside the window: the fds first (unless the
		 * last check was at this very time). */
		return fds && checked != now && fd_check(s, hl->res)
			       ? VSCHED_WAKE_FD
			       : VSCHED_WAKE_DEADLINE;
	return 0;
}

/* A sampled sleep that a waker ended: its thread's CPU since `cpu0`, if
 * the wake came before any on-time spin could have started (MARGIN_MAX
 * before the sleep's deadline `eff`). */
static void learn_sleep_cpu(struct vsched__sleeper *s, uint64_t cpu0, uint64_t eff)
{
	const struct vsched_host_ops *ops = &s->vm->ops;
	uint64_t c1;

	if (eff != VSCHED_DEADLINE_NONE && ops->now_ns(ops->ctx) + MARGIN_MAX >= eff)
		return;
	c1 = vsched__thread_cpu_ns();
	if (c1 > cpu0)
		s->sleep_cpu_ns += (int64_t)(c1 - cpu0 - s->sleep_cpu_ns) / 8;
}

/* Arm BLOCKED for one sleep (protocol.md "The wake mechanism"): the
 * mechanism that sleep uses is published first, in sleep_evfd, so that the
 * waker whose CAS reads this BLOCKED word reads it too (the exchange is a
 * release). An fd_add meanwhile moves the next arm to epoll, never this
 * one. Returns 0, or VSCHED_ESHUTDOWN when the word said DESTROYED (a
 * destroy that raced the block's start, outside its contract): the arm is
 * a CAS, so DESTROYED is never overwritten (protocol.md "Destroy against
 * a sleeper"). Owner thread. */
static int arm(struct vsched__sleeper *s, uint32_t blocked)
{
	bool evfd = atomic_load_explicit(&s->use_evfd, memory_order_acquire);
	uint32_t old;

	if (evfd != atomic_load_explicit(&s->sleep_evfd, memory_order_relaxed))
		atomic_store_explicit(&s->sleep_evfd, evfd, memory_order_relaxed);
	old = vsched__mode_arm(s, blocked);
	if (VSCHED__UNLIKELY(old != vsched__mode_with(blocked, VSCHED_MODE_OUTSIDE_GUEST)))
		return VSCHED_ESHUTDOWN; /* DESTROYED, the only other writer's */
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

	reason = arm(s, blocked);
	if (reason)
		goto out;
	reason = op->ready(t);
	if (reason) {
		vsched__mode_leave_blocked(s, blocked);
		goto out;
	}
	runnable_leave(s);
	hl->sleep_start = ops->now_ns(ops->ctx);
	hl->waited = true;
	const uint64_t cpu0 = ++s->sleeps % SLEEP_SAMPLE ? 0 : vsched__thread_cpu_ns();
	for (;;) {
		uint64_t eff = op->deadline(t, hl->deadline);
		/* The arm's mechanism, which the wakers read
		 * (vsched__wake_sleeper()). */
		int r = atomic_load_explicit(&s->sleep_evfd, memory_order_relaxed)
				? sleep_epoll(s, blocked, eff, hl->res)
				: sleep_futex(s, blocked, eff);
		if (r == VSCHED_WAKE_DEADLINE && eff < hl->deadline) {
			/* A guest timer's deadline, not the caller's. */
			reason = op->timer_due(t);
			if (reason)
				break;
			r = 0;
		}
		if (r) {
			reason = r;
			break;
		}
		/* A poster or kick moved us out of BLOCKED. */
		reason = op->ready(t);
		if (reason) {
			if (cpu0)
				learn_sleep_cpu(s, cpu0, eff);
			break;
		}
		/* Woken with nothing to do (its event was consumed before we
		 * looked): arm again. */
		reason = arm(s, blocked);
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
static inline __attribute__((always_inline)) void
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

	op->end(t);
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
	s->lesson_pending = reason != VSCHED_WAKE_DEADLINE;
	if (won)
		VSCHED__TRACE2(poll_won, t->id, pns);
	else if (hl->attempted)
		VSCHED__TRACE2(poll_lost, t->id, pns);
	VSCHED__TRACE3(block_end, t->id, reason, halt_ns);

	if (hl->want_res) {
		res->reason = reason;
		res->halt_ns = halt_ns;
		res->window_ns = hl->window;
		res->poll_ns = hl->attempted ? pns : 0;
		res->poll_won = won;
		res->vetoed = hl->vetoed;
	}
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
	account(op, t, &hl, reason);
	return reason;
}

int vsched__run_engine(struct vsched__sleeper *s,
		       const struct vsched__wait_hooks *h, uint64_t deadline,
		       struct vsched_block_result *res)
{
	struct target t = { .op = &waiter_ops, .s = s, .h = h, .id = -1 };
	return engine(&t, deadline, res);
}

#define RESULT_MIN VSCHED__SIZE_TO(struct vsched_block_result, vetoed)

int vsched__result_in(struct vsched_block_result *ours,
		      const struct vsched_block_result *theirs)
{
	return vsched__struct_in(ours, sizeof(*ours), theirs, RESULT_MIN);
}

void vsched__result_out(struct vsched_block_result *theirs,
			const struct vsched_block_result *ours)
{
	vsched__struct_out(theirs, ours, sizeof(*ours));
}

int vsched_vcpu_block_ex(struct vsched_vcpu *v, uint64_t deadline,
			 struct vsched_block_result *res)
{
	struct vsched_block_result copy;
	uint32_t m;
	int r;

	if (!v || (res && vsched__result_in(&copy, res)))
		return VSCHED_EINVAL;
	m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	if ((r = vsched__allowed(VSCHED__C_VCPU_BLOCK, m)))
		return r;
	struct target t = { .op = &vcpu_ops, .s = &v->sl, .vcpu = v,
			    .id = (int)v->id };
	r = engine(&t, deadline, res ? &copy : NULL);
	if (res)
		vsched__result_out(res, &copy);
	return r;
}

int vsched_vcpu_block(struct vsched_vcpu *v, uint64_t deadline)
{
	return vsched_vcpu_block_ex(v, deadline, NULL);
}

int vsched_vcpu_set_guest_poll(struct vsched_vcpu *v, bool allow)
{
	int rc;

	if (!v)
		return VSCHED_EINVAL;
	if ((rc = vsched__vcpu_allowed(v, VSCHED__C_VCPU_SET_GUEST_POLL)))
		return rc;
	atomic_store_explicit(&v->sl.guest_poll_off, !allow, memory_order_relaxed);
	return 0;
}

/* ------------------------------------------------------------------ */
/* fd wake sources */

void vsched__sleeper_init(struct vsched__sleeper *s, struct vsched_vm *vm,
			  _Atomic uint32_t *word)
{
	s->vm = vm;
	s->word = word;
	s->os = (struct vsched__os_set)VSCHED__OS_SET_INIT;
	s->wake_margin_ns = MARGIN_START;
	s->fd_margin_ns = MARGIN_START_FD;
	s->tfd_at = TFD_UNKNOWN;
	s->sleep_cpu_ns = VSCHED_POLL_SLEEP_CPU_NS;
}

static void free_tables(struct vsched__sleeper *s)
{
	const struct vsched_allocator *a = &s->vm->alloc;

	vsched__free(a, s->fd_of, s->nslots * sizeof(*s->fd_of));
	vsched__free(a, s->tag_of, s->nslots * sizeof(*s->tag_of));
	vsched__free(a, s->bell_of, s->nslots * sizeof(*s->bell_of));
	vsched__free(a, s->ev, (s->nslots + 2) * sizeof(*s->ev));
	s->fd_of = NULL;
	s->tag_of = NULL;
	s->bell_of = NULL;
	s->ev = NULL;
	s->nslots = 0;
}

/* Idempotent: a destroyed vCPU is finished again with its VM. */
void vsched__sleeper_fini(struct vsched__sleeper *s)
{
	struct vsched__poll_cfg *own;

	vsched__os_set_close(&s->os);
	free_tables(s);
	own = atomic_exchange_explicit(&s->own_poll, NULL, memory_order_relaxed);
	if (own)
		vsched__free(&s->vm->alloc, own, sizeof(*own));
}

/* The slot of user fd number `fd`, or -1. */
static int slot_of(const struct vsched__sleeper *s, int fd)
{
	for (unsigned i = 0; i < s->nslots; i++)
		if (s->fd_of[i] == fd)
			return (int)i;
	return -1;
}

/* Room for one more user fd: the tables double (at fd_add time, never on
 * the wait path). Returns a free slot, or -1 when out of memory. */
static int free_slot(struct vsched__sleeper *s)
{
	const struct vsched_allocator *a = &s->vm->alloc;
	unsigned n = s->nslots, cap;
	int *fd_of;
	uint64_t *tag_of;
	bool *bell_of;
	struct epoll_event *ev;

	for (unsigned i = 0; i < n; i++)
		if (s->fd_of[i] < 0)
			return (int)i;
	cap = n ? 2 * n : FIRST_SLOTS;
	if (cap <= n || cap > (unsigned)INT32_MAX - 2)
		return -1;
	fd_of = vsched__alloc(a, cap * sizeof(*fd_of));
	tag_of = vsched__alloc(a, cap * sizeof(*tag_of));
	bell_of = vsched__alloc(a, cap * sizeof(*bell_of));
	ev = vsched__alloc(a, (cap + 2) * sizeof(*ev));
	if (!fd_of || !tag_of || !bell_of || !ev) {
		vsched__free(a, fd_of, cap * sizeof(*fd_of));
		vsched__free(a, tag_of, cap * sizeof(*tag_of));
		vsched__free(a, bell_of, cap * sizeof(*bell_of));
		vsched__free(a, ev, (cap + 2) * sizeof(*ev));
		return -1;
	}
	for (unsigned i = 0; i < cap; i++) {
		fd_of[i] = i < n ? s->fd_of[i] : -1;
		bell_of[i] = i < n && s->bell_of[i];
	}
	if (n)
		memcpy(tag_of, s->tag_of, n * sizeof(*tag_of));
	free_tables(s);
	s->fd_of = fd_of;
	s->tag_of = tag_of;
	s->bell_of = bell_of;
	s->ev = ev;
	s->nslots = cap;
	return (int)n;
}

/*
 * One flag, use_evfd, selects both halves of the wakeup: the sleeper sleeps
 * in epoll_pwait iff it is set (engine()), and a waker writes the eventfd
 * iff it is set (vsched__wake_sleeper()). It is set only once the epoll set
 * holds the eventfd, the timerfd and the caller's fd; a first call that
 * fails anywhere closes what it created and leaves the flag clear, so the
 * sleeper stays on the futex that wakers use. No waker can hold the
 * unpublished eventfd: it reads s->os.evfd only after seeing the flag.
 * Context: the owner thread, which is not asleep, so no sleep is switching
 * mechanism under us.
 */
int vsched__sleeper_fd_add(struct vsched__sleeper *s, int fd, uint32_t events,
			   uint64_t tag)
{
	const bool first = !atomic_load_explicit(&s->use_evfd, memory_order_relaxed);
	int rc;

	const bool bell = events & VSCHED_FD_DOORBELL;

	events &= ~(uint32_t)VSCHED_FD_DOORBELL;
	if (fd < 0 || !events || (events & EPOLLET))
		return VSCHED_EINVAL;
	if (first && (rc = vsched__os_set_open(&s->os)))
		return rc; /* open() closed what it created */
	/* epoll hands back a slot number (the engine's own fds use 0 and
	 * 1); the user's tag is kept in the slot. */
	int i = free_slot(s);
	if (i < 0) {
		rc = VSCHED_ENOMEM;
		goto undo;
	}
	/* An fd number still in the table whose file was closed (epoll
	 * dropped it with its last reference) and which now names another
	 * file: the new registration takes its slot, so that each number
	 * has one slot and fd_del's count stays right. */
	int old = slot_of(s, fd);
	if (old >= 0)
		i = old;
	rc = vsched__os_ctl(&s->os, EPOLL_CTL_ADD, fd, events, SLOT_USER + (unsigned)i);
	if (rc == -EEXIST)
		rc = VSCHED_EEXIST;
	else if (rc == -ENOSPC) /* the kernel's max_user_watches */
		rc = VSCHED_ENOMEM;
	if (rc)
		goto undo;
	if (old < 0)
		s->nfds++;
	else if (!s->bell_of[i])
		s->nlook--;
	s->fd_of[i] = fd;
	s->tag_of[i] = tag;
	s->bell_of[i] = bell;
	s->nlook += !bell;
	/* Release: a waker that sees the flag sees s->os.evfd. */
	atomic_store_explicit(&s->use_evfd, true, memory_order_release);
	return 0;
undo:
	if (first)
		vsched__os_set_close(&s->os); /* never published: nobody holds them */
	return rc ? rc : VSCHED_ENOMEM;
}

/* A closed fd is gone from the epoll set already (ENOENT or EBADF from
 * the kernel) but not from the table: its slot is freed all the same, and
 * the kernel's answer returned. */
int vsched__sleeper_fd_del(struct vsched__sleeper *s, int fd)
{
	int rc, i;
	if (!atomic_load_explicit(&s->use_evfd, memory_order_relaxed) || fd < 0)
		return VSCHED_EINVAL;
	rc = vsched__os_ctl(&s->os, EPOLL_CTL_DEL, fd, 0, 0);
	i = slot_of(s, fd);
	if (i >= 0) {
		s->fd_of[i] = -1;
		s->nfds--;
		s->nlook -= !s->bell_of[i];
	}
	return rc; /* the sleeper stays on epoll, the flag stays set */
}

int vsched_vcpu_fd_add(struct vsched_vcpu *v, int fd, uint32_t events,
		       uint64_t tag)
{
	int rc;

	if (!v)
		return VSCHED_EINVAL;
	if ((rc = vsched__vcpu_allowed(v, VSCHED__C_VCPU_FD_ADD)))
		return rc;
	return vsched__sleeper_fd_add(&v->sl, fd, events, tag);
}

int vsched_vcpu_fd_del(struct vsched_vcpu *v, int fd)
{
	int rc;

	if (!v)
		return VSCHED_EINVAL;
	if ((rc = vsched__vcpu_allowed(v, VSCHED__C_VCPU_FD_DEL)))
		return rc;
	return vsched__sleeper_fd_del(&v->sl, fd);
}
