/* SPDX-License-Identifier: MIT */
/*
 * The block/poll engine, shared by vCPUs (vsched_vcpu_block) and generic
 * waiters (lib/waiter.c): blocking hook, poll for the policy's window, arm
 * BLOCKED + full barrier + re-check, sleep on a futex or in epoll_pwait,
 * unblocking hook, policy update, KVM-named stats.
 */
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <urcu/urcu-bp.h>

#include "abi.h"
#include "internal.h"

#define SLOT_EVFD 0
#define SLOT_TFD 1
#define SLOT_USER 2
#define FIRST_SLOTS 8 /* the fd tables grow from this, doubling */

/* Timed sleeps ask the kernel to wake them early by the sleeper's learnt
 * wakeup latency (plus, on the futex, the thread's timer slack) and spin
 * on their word for the rest: the margin starts at MARGIN_START, follows
 * the measured lateness of those early wakeups (EWMA, 1/8) plus
 * MARGIN_PAD, and is capped at MARGIN_MAX so that the spin stays bounded. */
#define MARGIN_START 10000
#define MARGIN_PAD 2000
#define MARGIN_MAX 100000

static uint64_t early_for(uint64_t kd, uint64_t by)
{
	if (kd == VSCHED_DEADLINE_NONE)
		return kd;
	return kd > by ? kd - by : 0;
}

/* An early wakeup came `late` ns after the time it asked for: learn. */
static void learn_margin(struct vsched__sleeper *s, uint64_t late)
{
	int64_t m = (int64_t)s->wake_margin_ns;
	int64_t target = (int64_t)(late < MARGIN_MAX ? late : MARGIN_MAX) + MARGIN_PAD;

	m += (target - m) / 8;
	s->wake_margin_ns = (uint64_t)(m < MARGIN_MAX ? m : MARGIN_MAX);
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

/* vCPU threads of this process that are not asleep in vsched: the
 * contention veto compares it with the CPUs the process may use. */
static _Atomic int runnable_vcpus;

struct target {
	struct vsched__sleeper *s;
	struct vsched_vcpu *vcpu; /* NULL for a generic waiter */
	const struct vsched__wait_hooks *h; /* a generic waiter's */
};

static void runnable_enter(struct target *t)
{
	if (t->vcpu && !t->s->counted_runnable) {
		atomic_fetch_add_explicit(&runnable_vcpus, 1, memory_order_relaxed);
		t->s->counted_runnable = true;
	}
}

static void runnable_leave(struct target *t)
{
	if (t->s->counted_runnable) {
		atomic_fetch_sub_explicit(&runnable_vcpus, 1, memory_order_relaxed);
		t->s->counted_runnable = false;
	}
}

void vsched__sleeper_retire(struct vsched__sleeper *s)
{
	struct target t = { .s = s };
	runnable_leave(&t);
}

/* Is there a reason to run? Reads only. */
static inline __attribute__((always_inline)) int ready(const struct target *t)
{
	if (t->vcpu) {
		const struct vsched_host_ops *ops = &t->s->vm->ops;
		if (atomic_load_explicit(&t->vcpu->pending, memory_order_relaxed))
			return VSCHED_WAKE_REQUEST;
		if (ops->has_event && ops->has_event(t->vcpu, ops->ctx))
			return VSCHED_WAKE_EVENT;
		return 0;
	}
	return t->h->cond(t->h->arg) ? VSCHED_WAKE_REQUEST : 0;
}

/* The sleep's deadline: the caller's, or the vCPU's earliest timer. */
static uint64_t effective(const struct target *t, uint64_t deadline)
{
	uint64_t e;
	if (!t->vcpu)
		return deadline;
	e = vsched__vcpu_earliest(t->vcpu);
	return e < deadline ? e : deadline;
}

/* A timer deadline was reached: post its expiry, then look again. */
static int timer_due(const struct target *t)
{
	if (t->vcpu && vsched_vcpu_fire_timers(t->vcpu) > 0)
		return ready(t);
	return 0;
}

static void hist(_Atomic uint64_t *h, uint64_t ns)
{
	unsigned b = ns ? 64u - (unsigned)__builtin_clzll(ns) : 0;
	vsched__count(&h[b < VSCHED_HIST_BUCKETS ? b : VSCHED_HIST_BUCKETS - 1]);
}

/* The calling thread's timer slack, read once (prctl), never changed. */
static __thread uint64_t thread_slack_ns = UINT64_MAX;

void vsched__thread_slack_init(void)
{
	if (thread_slack_ns == UINT64_MAX) {
		int r = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
		thread_slack_ns = r < 0 ? 0 : (uint64_t)(unsigned)r;
	}
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
 * whose tags are in res. Owner thread, with s->nfds != 0. */
static unsigned collect_ready(struct vsched__sleeper *s,
			      struct vsched_block_result *res)
{
	int n = epoll_pwait(s->epfd, s->ev, (int)s->nslots + 2, 0, NULL);

	clear_tags(res);
	for (int i = 0; i < n; i++)
		if (user_slot(s, s->ev[i].data.u64))
			add_tag(res, s->tag_of[s->ev[i].data.u64 - SLOT_USER]);
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

/*
 * Called by the poster that won BLOCKED -> OUTSIDE_GUEST. The mechanism is
 * the one the sleeper sleeps on: both read use_evfd, and only the owner
 * thread sets it, before the BLOCKED exchange whose value our CAS read.
 *
 * The wake is a callout (internal.h): vsched_vcpu_destroy() publishes
 * DESTROYED and waits for callouts in flight before it closes the eventfd
 * and returns, so the write never lands in a closed, reused fd number and
 * a custom wake callback never runs after destroy returned.
 */
void vsched__wake_sleeper(struct vsched__sleeper *s)
{
	if (!vsched__callout_begin(s))
		return; /* destroyed: nobody sleeps there any more */
	if (atomic_load_explicit(&s->use_evfd, memory_order_acquire)) {
		uint64_t one = 1;
		ssize_t r = write(s->evfd, &one, sizeof(one));
		(void)r; /* EAGAIN: the counter is saturated, still readable */
	} else {
		s->vm->ops.wake((uint32_t *)s->word, s->vm->ops.ctx);
	}
	vsched__callout_end(s);
}

/* After DESTROYED is published: wait for the wakers' callouts still in
 * flight (a poster preempted between its CAS and its write or callback). */
void vsched__sleeper_quiesce(struct vsched__sleeper *s)
{
	while (atomic_load_explicit(&s->callouts, memory_order_seq_cst))
		sched_yield();
	VSCHED__TSAN_ACQUIRE(s);
}

/* Leave BLOCKED ourselves (timeout, signal, fd): the slow way back, an
 * exchange (store + full barrier). Returns the old word: not `blocked`
 * means a poster raced us and already woke us. */
static uint32_t leave_blocked(struct vsched__sleeper *s, uint32_t blocked)
{
	vsched__count(&s->hs.stores);
	return atomic_exchange_explicit(
		s->word, (blocked & VSCHED__GEN_MASK) | VSCHED_MODE_OUTSIDE_GUEST,
		memory_order_seq_cst);
}

/* Woken by a poster: it already moved the word back to OUTSIDE_GUEST, so
 * the way back needs no store and no barrier (the powerpc idle fix). */
static void fast_path_back(struct vsched__sleeper *s)
{
	vsched__count(&s->hs.skips);
}

static int sleep_futex(struct target *t, uint32_t blocked, uint64_t deadline)
{
	struct vsched__sleeper *s = t->s;
	const struct vsched_host_ops *ops = &s->vm->ops;

	/* The default futex wait sleeps on CLOCK_MONOTONIC; a custom wait
	 * gets the deadline in the VM's clock, as vm.h documents. */
	const bool kernel = ops->wait == vsched__futex_wait;

	for (;;) {
		uint64_t kd = kernel ? vsched__kernel_deadline(ops, deadline) : deadline;
		uint64_t early = kd;
		/* The kernel's futex timeout is an hrtimer with the thread's
		 * timer slack: it may fire that late. Ask for the deadline
		 * minus the slack and the learnt wakeup latency, then spin on
		 * the word until the deadline: the sleep ends on time without
		 * changing the thread's slack. */
		if (kernel && kd != VSCHED_DEADLINE_NONE) {
			vsched__thread_slack_init(); /* once per thread */
			early = early_for(kd, thread_slack_ns + s->wake_margin_ns);
		}
		int rc = ops->wait((uint32_t *)s->word, blocked, early, ops->ctx);
		if (rc != -EINTR && early != kd &&
		    atomic_load_explicit(s->word, memory_order_relaxed) == blocked) {
			uint64_t woke = vsched__clock_now(NULL), hard = early + thread_slack_ns;
			learn_margin(s, woke > hard ? woke - hard : 0);
			finish_on_time(s, blocked, kd);
		}
		if (atomic_load_explicit(s->word, memory_order_acquire) != blocked) {
			fast_path_back(s);
			/* Woken, and interrupted too: the signal is reported,
			 * even when the wake had no reason (a kick, a timer
			 * re-arm) and the engine would sleep again. */
			return rc == -EINTR ? VSCHED_WAKE_SIGNAL : 0;
		}
		if (rc == -EINTR) {
			leave_blocked(s, blocked); /* a racing poster: still SIGNAL */
			return VSCHED_WAKE_SIGNAL;
		}
		/* Any other error (EPERM or ENOSYS from a seccomp filter,
		 * EFAULT) would fail again at once: report it rather than
		 * spin on it until the deadline. */
		if (rc < 0 && rc != -ETIMEDOUT) {
			if (leave_blocked(s, blocked) != blocked)
				return 0;
			return rc;
		}
		if (ops->now_ns(ops->ctx) >= deadline) {
			if (leave_blocked(s, blocked) != blocked)
				return 0;
			return VSCHED_WAKE_DEADLINE;
		}
		vsched__count(&s->hs.spurious);
	}
}

static int sleep_epoll(struct target *t, uint32_t blocked, uint64_t deadline,
		       struct vsched_block_result *res)
{
	struct vsched__sleeper *s = t->s;
	const struct vsched_host_ops *ops = &s->vm->ops;
	struct epoll_event *ev = s->ev;
	/* The timerfd has no slack, but the wakeup has a latency: arm it
	 * early by the learnt margin and spin for the rest (as sleep_futex). */
	uint64_t kd = vsched__kernel_deadline(ops, deadline);
	uint64_t early = early_for(kd, s->wake_margin_ns);

	vsched__timerfd_at(s->tfd, early);
	for (;;) {
		uint64_t drain;
		bool timer = false;
		/* Room for every registered fd: all ready ones are reported. */
		int n = epoll_pwait(s->epfd, ev, (int)s->nslots + 2, -1, NULL);

		if (n < 0 && errno == EINTR) {
			/* Reported even when a poster raced us (see
			 * sleep_futex()). */
			if (atomic_load_explicit(s->word, memory_order_acquire) != blocked)
				fast_path_back(s);
			else
				leave_blocked(s, blocked);
			return VSCHED_WAKE_SIGNAL;
		}
		if (n < 0) { /* EPERM from a seccomp filter, EBADF ...: report */
			int e = -errno;

			if (leave_blocked(s, blocked) != blocked)
				return 0;
			return e;
		}
		clear_tags(res);
		for (int i = 0; i < n; i++) {
			uint64_t slot = ev[i].data.u64;
			if (slot == SLOT_EVFD) {
				ssize_t r = read(s->evfd, &drain, sizeof(drain));
				(void)r;
			} else if (slot == SLOT_TFD) {
				ssize_t r = read(s->tfd, &drain, sizeof(drain));
				(void)r;
				timer = true;
			} else if (user_slot(s, slot)) {
				add_tag(res, s->tag_of[slot - SLOT_USER]);
			}
		}
		if (timer && early != kd && !res->nready_total &&
		    atomic_load_explicit(s->word, memory_order_relaxed) == blocked) {
			uint64_t woke = vsched__clock_now(NULL);
			learn_margin(s, woke > early ? woke - early : 0);
			finish_on_time(s, blocked, kd);
			/* The fds once more, as the sleep would have seen them. */
			if (atomic_load_explicit(s->word, memory_order_relaxed) == blocked)
				collect_ready(s, res);
		}
		if (atomic_load_explicit(s->word, memory_order_acquire) != blocked) {
			fast_path_back(s);
			return 0;
		}
		if (res->nready_total) {
			if (leave_blocked(s, blocked) != blocked)
				return 0;
			return VSCHED_WAKE_FD;
		}
		if (ops->now_ns(ops->ctx) >= deadline) {
			if (leave_blocked(s, blocked) != blocked)
				return 0;
			return VSCHED_WAKE_DEADLINE;
		}
		/* A stale eventfd count, or the timerfd expired before an
		 * injected clock reached the deadline: convert it again. */
		if (timer) {
			kd = vsched__kernel_deadline(ops, deadline);
			early = early_for(kd, s->wake_margin_ns);
			vsched__timerfd_at(s->tfd, early);
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
	if (!v)
		return VSCHED_EINVAL;
	return vsched__sleeper_set_poll(&v->sl, p);
}

static int engine(struct target *t, uint64_t deadline,
		  struct vsched_block_result *res)
{
	struct vsched__sleeper *s = t->s;
	struct vsched_vm *vm = s->vm;
	const struct vsched_host_ops *ops = &vm->ops;
	struct vsched_block_result local = { .size = sizeof(local) };
	const struct vsched__wait_hooks *h = t->h;
	uint64_t t0, now, poll_end, sleep_start = 0, window = 0, halt_ns, eff;
	uint32_t m = atomic_load_explicit(s->word, memory_order_relaxed);
	uint32_t blocked = (m & VSCHED__GEN_MASK) | VSCHED_MODE_BLOCKED;
	bool attempted = false, waited = false, vetoed = false, valid;
	bool hooked = false;
	const bool fds = s->nfds != 0;
	uint64_t vg, og;
	int reason;

	if (!res)
		res = &local;
	clear_tags(res);
	res->fd_checks = 0;
	/* The policy: a copy, refreshed (under RCU) only when the VM's or
	 * the sleeper's own generation moved, so that a halt normally costs
	 * two loads here. */
	vg = atomic_load_explicit(&vm->poll_gen, memory_order_acquire);
	og = atomic_load_explicit(&s->own_gen, memory_order_acquire);
	if (VSCHED__UNLIKELY(vg != s->poll_gen || og != s->own_gen_seen))
		refresh_policy(s, vg, og);
	runnable_enter(t);
	t0 = ops->now_ns(ops->ctx);
	VSCHED__TRACE2(block_begin, t->vcpu ? (int)t->vcpu->id : -1, deadline);

	/* 1. The blocking hook covers the whole poll window. */
	if (t->vcpu && ops->blocking)
		ops->blocking(t->vcpu, ops->ctx);
	poll_end = t0;

	if (t->vcpu && atomic_load_explicit(&t->vcpu->ntimers_pub, memory_order_relaxed))
		vsched_vcpu_fire_timers(t->vcpu); /* expired timers post now */
	reason = ready(t);
	if (reason)
		goto out;
	if (deadline <= t0) {
		/* Check once: every ready fd is reported. */
		reason = fds && fd_check(s, res) ? VSCHED_WAKE_FD
						 : VSCHED_WAKE_DEADLINE;
		goto out;
	}
	eff = effective(t, deadline);

	/* 2. Poll, unless vetoed. */
	window = vsched__poll_window(&s->params, &s->poll);
	if (window) {
		vetoed = atomic_load_explicit(&s->guest_poll_off, memory_order_relaxed);
		if (!vetoed && t->vcpu)
			vetoed = (ops->no_poll && ops->no_poll(t->vcpu, ops->ctx)) ||
				 (ops->contended && ops->contended(t->vcpu, ops->ctx)) ||
				 atomic_load_explicit(&runnable_vcpus,
						      memory_order_relaxed) > (int)vm->ncpus;
		if (vetoed) {
			vsched__count(&s->hs.vetoed);
			window = 0;
		}
	}
	if (window) {
		uint64_t end = t0 + window;
		if (end < t0 || end > eff)
			end = eff;
		attempted = true;
		/* Posters do nothing for POLLING, so plain stores suffice. */
		atomic_store_explicit(s->word,
				      (m & VSCHED__GEN_MASK) | VSCHED_MODE_POLLING,
				      memory_order_relaxed);
		uint64_t next_fd = t0, checked = UINT64_MAX;
		now = t0;
		for (unsigned i = 1;; i++) {
			reason = ready(t);
			if (reason)
				break;
			vsched__relax();
			if ((i & 31) != 0)
				continue;
			now = ops->now_ns(ops->ctx);
			/* The fds, at a bounded rate: one non-blocking
			 * epoll_pwait per VSCHED_FD_CHECK_NS of polling. */
			if (fds && now >= next_fd) {
				next_fd = now + VSCHED_FD_CHECK_NS;
				checked = now;
				if (fd_check(s, res)) {
					reason = VSCHED_WAKE_FD;
					break;
				}
			}
			if (now >= end)
				break;
		}
		atomic_store_explicit(s->word,
				      (m & VSCHED__GEN_MASK) | VSCHED_MODE_OUTSIDE_GUEST,
				      memory_order_relaxed);
		poll_end = now;
		if (reason)
			goto out; /* won: poll_end is the exit time, below */
		if (end == eff && eff < deadline && (reason = timer_due(t)))
			goto out; /* a guest timer expired while polling */
		if (end == deadline) {
			/* The deadline, inside the window: the fds first
			 * (unless the last check was at this very time). */
			reason = fds && checked != now && fd_check(s, res)
					 ? VSCHED_WAKE_FD
					 : VSCHED_WAKE_DEADLINE;
			goto out;
		}
	}

	/* A waiter's before_sleep: after the poll window, right before
	 * "needs kick" is armed, so that what it arms (a VMM's own needs-kick
	 * flag) is ordered before the re-check by the barrier below. */
	if (h && h->before_sleep) {
		h->before_sleep(h->w, h->hook_arg);
		hooked = true;
	}

	/* 3. Arm: BLOCKED, full barrier, re-check (the Dekker pair with
	 * vsched_post() and vsched_vcpu_kick()). */
	atomic_exchange_explicit(s->word, blocked, memory_order_seq_cst);
	vsched__mb_after_rmw();
	reason = ready(t);
	if (reason) {
		leave_blocked(s, blocked);
		goto out;
	}
	runnable_leave(t);
	sleep_start = ops->now_ns(ops->ctx);
	waited = true;
	for (;;) {
		eff = effective(t, deadline);
		/* The same flag the wakers read (vsched__wake_sleeper()). */
		int r = atomic_load_explicit(&s->use_evfd, memory_order_relaxed)
				? sleep_epoll(t, blocked, eff, res)
				: sleep_futex(t, blocked, eff);
		if (r == VSCHED_WAKE_DEADLINE && eff < deadline) {
			/* A guest timer's deadline, not the caller's. */
			reason = timer_due(t);
			if (reason)
				break;
			r = 0;
		}
		if (r) {
			reason = r;
			break;
		}
		/* A poster or kick moved us out of BLOCKED. */
		reason = ready(t);
		if (reason)
			break;
		/* Woken with nothing to do (its event was consumed before we
		 * looked): arm again. */
		atomic_exchange_explicit(s->word, blocked, memory_order_seq_cst);
		vsched__mb_after_rmw();
		reason = ready(t);
		if (reason) {
			leave_blocked(s, blocked);
			break;
		}
	}
	runnable_enter(t);

out:
	/* Every path out of a sleep that ran before_sleep runs after_sleep. */
	if (hooked)
		h->after_sleep(h->w, h->hook_arg);
	/* 4. Every path out runs the unblocking hook. */
	if (t->vcpu && ops->unblocking)
		ops->unblocking(t->vcpu, ops->ctx);
	now = ops->now_ns(ops->ctx);
	halt_ns = now > t0 ? now - t0 : 0;
	valid = reason > 0 && reason != VSCHED_WAKE_SIGNAL; /* not an error */
	if (attempted && !waited)
		poll_end = now; /* polling won: it lasted the whole halt */

	if (attempted) {
		uint64_t pns = poll_end > t0 ? poll_end - t0 : 0;
		vsched__count(&s->hs.attempted);
		if (!waited) {
			vsched__count(&s->hs.successful);
			if (!valid)
				vsched__count(&s->hs.invalid);
			vsched__count_n(&s->hs.success_ns, pns);
			hist(s->hs.hist_success, pns);
		} else {
			vsched__count_n(&s->hs.fail_ns, pns);
			hist(s->hs.hist_fail, pns);
		}
		res->poll_ns = pns;
	} else {
		res->poll_ns = 0;
	}
	if (waited) {
		uint64_t w = now > sleep_start ? now - sleep_start : 0;
		vsched__count_n(&s->hs.wait_ns, w);
		hist(s->hs.hist_wait, w);
	}
	/* 5. The policy learns how long the halt really was. */
	{
		uint64_t before = s->poll.window_ns;
		vsched__poll_update(&s->params, &s->poll, window, halt_ns, valid);
		if (s->poll.window_ns != before)
			VSCHED__TRACE3(window_change, t->vcpu ? (int)t->vcpu->id : -1,
				       before, s->poll.window_ns);
	}
	if (attempted && !waited)
		VSCHED__TRACE2(poll_won, t->vcpu ? (int)t->vcpu->id : -1, res->poll_ns);
	else if (attempted)
		VSCHED__TRACE2(poll_lost, t->vcpu ? (int)t->vcpu->id : -1, res->poll_ns);
	VSCHED__TRACE3(block_end, t->vcpu ? (int)t->vcpu->id : -1, reason, halt_ns);

	res->reason = reason;
	res->halt_ns = halt_ns;
	res->window_ns = window;
	res->poll_won = attempted && !waited;
	res->vetoed = vetoed;
	return reason;
}

int vsched__run_engine(struct vsched__sleeper *s,
		       const struct vsched__wait_hooks *h, uint64_t deadline,
		       struct vsched_block_result *res)
{
	struct target t = { .s = s, .h = h };
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
	if (vsched__mode_of(m) == VSCHED_MODE_DESTROYED)
		return VSCHED_ESHUTDOWN;
	if (vsched__mode_of(m) != VSCHED_MODE_OUTSIDE_GUEST)
		return VSCHED_ESTATE;
	struct target t = { .s = &v->sl, .vcpu = v };
	r = engine(&t, deadline, res ? &copy : NULL);
	if (res)
		vsched__result_out(res, &copy);
	return r;
}

int vsched_vcpu_block(struct vsched_vcpu *v, uint64_t deadline)
{
	return vsched_vcpu_block_ex(v, deadline, NULL);
}

int vsched_vcpu_kick(struct vsched_vcpu *v)
{
	uint32_t m;

	if (!v)
		return VSCHED_EINVAL;
	/* Pairs with the block's barrier, as a post does: the event the
	 * caller made visible before this is seen by the re-check, or we see
	 * BLOCKED / IN_GUEST here. */
	vsched__mb();
	m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	if (vsched__mode_of(m) == VSCHED_MODE_DESTROYED)
		return VSCHED_ESHUTDOWN;
	vsched__kick_decide(v, &v->sl, NULL, m, 0); /* counted as an event */
	return 0;
}

int vsched_vcpu_set_guest_poll(struct vsched_vcpu *v, bool allow)
{
	if (!v)
		return VSCHED_EINVAL;
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
	s->epfd = s->evfd = s->tfd = -1;
	s->wake_margin_ns = MARGIN_START;
}

static void close_fds(struct vsched__sleeper *s)
{
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->evfd >= 0)
		close(s->evfd);
	if (s->tfd >= 0)
		close(s->tfd);
	s->epfd = s->evfd = s->tfd = -1;
}

static void free_tables(struct vsched__sleeper *s)
{
	const struct vsched_allocator *a = &s->vm->alloc;

	vsched__free(a, s->fd_of, s->nslots * sizeof(*s->fd_of));
	vsched__free(a, s->tag_of, s->nslots * sizeof(*s->tag_of));
	vsched__free(a, s->ev, (s->nslots + 2) * sizeof(*s->ev));
	s->fd_of = NULL;
	s->tag_of = NULL;
	s->ev = NULL;
	s->nslots = 0;
}

/* Idempotent: a destroyed vCPU is finished again with its VM. */
void vsched__sleeper_fini(struct vsched__sleeper *s)
{
	struct vsched__poll_cfg *own;

	close_fds(s);
	free_tables(s);
	own = atomic_exchange_explicit(&s->own_poll, NULL, memory_order_relaxed);
	if (own)
		vsched__free(&s->vm->alloc, own, sizeof(*own));
}

/* Room for one more user fd: the tables double (at fd_add time, never on
 * the wait path). Returns a free slot, or -1 when out of memory. */
static int free_slot(struct vsched__sleeper *s)
{
	const struct vsched_allocator *a = &s->vm->alloc;
	unsigned n = s->nslots, cap;
	int *fd_of;
	uint64_t *tag_of;
	struct epoll_event *ev;

	for (unsigned i = 0; i < n; i++)
		if (s->fd_of[i] < 0)
			return (int)i;
	cap = n ? 2 * n : FIRST_SLOTS;
	if (cap <= n || cap > (unsigned)INT32_MAX - 2)
		return -1;
	fd_of = vsched__alloc(a, cap * sizeof(*fd_of));
	tag_of = vsched__alloc(a, cap * sizeof(*tag_of));
	ev = vsched__alloc(a, (cap + 2) * sizeof(*ev));
	if (!fd_of || !tag_of || !ev) {
		vsched__free(a, fd_of, cap * sizeof(*fd_of));
		vsched__free(a, tag_of, cap * sizeof(*tag_of));
		vsched__free(a, ev, (cap + 2) * sizeof(*ev));
		return -1;
	}
	for (unsigned i = 0; i < cap; i++)
		fd_of[i] = i < n ? s->fd_of[i] : -1;
	if (n)
		memcpy(tag_of, s->tag_of, n * sizeof(*tag_of));
	free_tables(s);
	s->fd_of = fd_of;
	s->tag_of = tag_of;
	s->ev = ev;
	s->nslots = cap;
	return (int)n;
}

static int ctl(int epfd, int op, int fd, uint32_t events, uint64_t slot)
{
	struct epoll_event ev = { .events = events, .data.u64 = slot };
	return epoll_ctl(epfd, op, fd, &ev) ? -errno : 0;
}

/*
 * One flag, use_evfd, selects both halves of the wakeup: the sleeper sleeps
 * in epoll_pwait iff it is set (engine()), and a waker writes the eventfd
 * iff it is set (vsched__wake_sleeper()). It is set only once the epoll set
 * holds the eventfd, the timerfd and the caller's fd; a first call that
 * fails anywhere closes what it created and leaves the flag clear, so the
 * sleeper stays on the futex that wakers use. No waker can hold the
 * unpublished eventfd: it reads s->evfd only after seeing the flag.
 * Context: the owner thread, which is not asleep, so no sleep is switching
 * mechanism under us.
 */
int vsched__sleeper_fd_add(struct vsched__sleeper *s, int fd, uint32_t events,
			   uint64_t tag)
{
	const bool first = !atomic_load_explicit(&s->use_evfd, memory_order_relaxed);
	int rc;

	if (fd < 0 || !events || (events & EPOLLET))
		return VSCHED_EINVAL;
	if (first) {
		s->epfd = epoll_create1(EPOLL_CLOEXEC);
		s->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
		if (s->epfd < 0 || s->evfd < 0 || s->tfd < 0) {
			rc = -errno;
			goto undo;
		}
		if ((rc = ctl(s->epfd, EPOLL_CTL_ADD, s->evfd, EPOLLIN, SLOT_EVFD)) ||
		    (rc = ctl(s->epfd, EPOLL_CTL_ADD, s->tfd, EPOLLIN, SLOT_TFD)))
			goto undo;
	}
	/* epoll hands back a slot number (the engine's own fds use 0 and
	 * 1); the user's tag is kept in the slot. */
	int i = free_slot(s);
	if (i < 0) {
		rc = VSCHED_ENOMEM;
		goto undo;
	}
	rc = ctl(s->epfd, EPOLL_CTL_ADD, fd, events, SLOT_USER + (unsigned)i);
	if (rc == -EEXIST)
		rc = VSCHED_EEXIST;
	else if (rc == -ENOSPC) /* the kernel's max_user_watches */
		rc = VSCHED_ENOMEM;
	if (rc)
		goto undo;
	s->fd_of[i] = fd;
	s->tag_of[i] = tag;
	s->nfds++;
	/* Release: a waker that sees the flag sees s->evfd. */
	atomic_store_explicit(&s->use_evfd, true, memory_order_release);
	return 0;
undo:
	if (first)
		close_fds(s); /* never published: nobody holds them */
	return rc ? rc : VSCHED_ENOMEM;
}

int vsched__sleeper_fd_del(struct vsched__sleeper *s, int fd)
{
	int rc;
	if (!atomic_load_explicit(&s->use_evfd, memory_order_relaxed) || fd < 0)
		return VSCHED_EINVAL;
	rc = ctl(s->epfd, EPOLL_CTL_DEL, fd, 0, 0);
	if (rc)
		return rc;
	for (unsigned i = 0; i < s->nslots; i++)
		if (s->fd_of[i] == fd)
			s->fd_of[i] = -1;
	s->nfds--;
	return 0; /* the sleeper stays on epoll, the flag stays set */
}

int vsched_vcpu_fd_add(struct vsched_vcpu *v, int fd, uint32_t events,
		       uint64_t tag)
{
	if (!v)
		return VSCHED_EINVAL;
	return vsched__sleeper_fd_add(&v->sl, fd, events, tag);
}

int vsched_vcpu_fd_del(struct vsched_vcpu *v, int fd)
{
	if (!v)
		return VSCHED_EINVAL;
	return vsched__sleeper_fd_del(&v->sl, fd);
}

void vsched__halt_stats(const struct vsched__sleeper *s,
			struct vsched_halt_stats *o)
{
#define RD(x) atomic_load_explicit(&s->hs.x, memory_order_relaxed)
	o->halt_successful_poll = RD(successful);
	o->halt_attempted_poll = RD(attempted);
	o->halt_poll_invalid = RD(invalid);
	o->halt_poll_success_ns = RD(success_ns);
	o->halt_poll_fail_ns = RD(fail_ns);
	o->halt_wait_ns = RD(wait_ns);
	o->halt_poll_vetoed = RD(vetoed);
	o->idle_fastpath_skips = RD(skips);
	o->idle_fastpath_stores = RD(stores);
	for (unsigned i = 0; i < VSCHED_HIST_BUCKETS; i++) {
		o->halt_poll_success_hist[i] = RD(hist_success[i]);
		o->halt_poll_fail_hist[i] = RD(hist_fail[i]);
		o->halt_wait_hist[i] = RD(hist_wait[i]);
	}
#undef RD
}
