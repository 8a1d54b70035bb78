/* SPDX-License-Identifier: MIT */
/*
 * The OS sleeps of a BLOCKED sleeper (lib/sleeper.h): on its futex, or in
 * epoll_pwait on its fd wake sources, its eventfd and its timerfd; timed
 * ones end on time by a learnt margin and a spin; and what a sleep costs
 * the thread's CPU, for the ADAPTIVE policy. The only file of the engine
 * that calls the OS layer's sleeps (lib/os.h).
 */
#include <errno.h>
#include <string.h>

#include "abi.h"
#include "mode.h"
#include "sleeper.h"

/* Timed sleeps ask the kernel to wake them early by the sleeper's learnt
 * lateness and spin on their word for the rest. The lateness is measured,
 * not derived: what the kernel's timer took beyond the time asked for,
 * which on the futex includes the thread's timer slack (so no prctl is
 * needed to read it) and on the timerfd only the wakeup latency. The
 * margin starts at MARGIN_START (Linux's default 50 us slack plus a
 * wakeup; lib/sleeper.h), follows the measured lateness of those early
 * wakeups (EWMA, 1/8) plus MARGIN_PAD, and is capped at MARGIN_MAX: a
 * thread with a larger slack sleeps late rather than spin for it. Only a
 * timeout the sleep asked for is learnt and finished on the CPU; a
 * spurious return, a signal or an error never is. */
#define MARGIN_PAD 2000

/* When to ask the kernel to end a sleep due at `kd` (CLOCK_MONOTONIC):
 * early by the margin `by`, but by at most the sleeper's spin_pct of the
 * time left, so that the spin to the deadline stays a bounded share of the
 * sleep (a short timeout on a loaded host, whose wakeups come late, then
 * ends late rather than spin most of its length). */
static uint64_t early_for(const struct vsched__sleeper *s, uint64_t kd,
			  uint64_t by)
{
	uint64_t now, cap;

	if (kd == VSCHED_DEADLINE_NONE)
		return kd;
	now = vsched__clock_now(NULL);
	cap = kd > now ? (kd - now) / 100 * s->params.spin_pct : 0;
	if (by > cap)
		by = cap;
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

/* Arm BLOCKED for one sleep (protocol.md "The wake mechanism"): the
 * mechanism that sleep uses is published first, in sleep_evfd, so that the
 * waker whose CAS reads this BLOCKED word reads it too (the CAS is a
 * release). An fd_add meanwhile moves the next arm to epoll, never this
 * one. Returns 0, or VSCHED_ESHUTDOWN when the word said DESTROYED (a
 * destroy that raced the block's start, outside its contract): the arm is
 * a CAS, so DESTROYED is never overwritten (protocol.md "Destroy against
 * a sleeper"). Owner thread. */
int vsched__arm(struct vsched__sleeper *s, uint32_t blocked)
{
	bool evfd = atomic_load_explicit(&s->use_evfd, memory_order_acquire);
	uint32_t old;

	if (evfd != atomic_load_explicit(&s->sleep_evfd, memory_order_relaxed))
		atomic_store_explicit(&s->sleep_evfd, evfd, memory_order_relaxed);
	old = vsched__mode_arm(s, blocked);
	if (VSCHED__UNLIKELY(old != vsched__mode_with(blocked, VSCHED_MODE_OUTSIDE_GUEST)))
		/* DESTROYED, the only other writer's; anything else is a
		 * second owner that raced past the contract's check. */
		return vsched__mode_of(old) == VSCHED_MODE_DESTROYED ? VSCHED_ESHUTDOWN
								    : VSCHED_ESTATE;
	return 0;
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
int vsched__sleep_futex(struct vsched__sleeper *s, uint32_t blocked,
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
		uint64_t early = kernel ? early_for(s, kd, s->wake_margin_ns) : kd;
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

/* The `n` events of one epoll_pwait: the kick eventfd and the timerfd are
 * drained (`timer`: it fired), a doorbell is drained (`bell`: look at the
 * condition again), every other ready fd's tag goes to `res`. */
static void sort_events(struct vsched__sleeper *s, int n,
			struct vsched_block_result *res, bool *timer, bool *bell)
{
	vsched__clear_tags(res);
	for (int i = 0; i < n; i++) {
		uint64_t slot = s->ev[i].data.u64;
		if (slot == SLOT_EVFD) {
			vsched__os_drain(s->os.evfd);
		} else if (slot == SLOT_TFD) {
			vsched__os_drain(s->os.tfd);
			s->tfd_at = TFD_UNKNOWN;
			*timer = true;
		} else if (vsched__user_slot(s, slot) && s->bell_of[slot - SLOT_USER] &&
			   !(s->ev[i].events & (EPOLLHUP | EPOLLERR))) {
			vsched__os_drain_all(s->fd_of[slot - SLOT_USER]);
			*bell = true;
		} else if (vsched__user_slot(s, slot)) {
			/* Ready, or a doorbell hung up or in error: reported,
			 * so that its owner can fd_del it (it would ring on). */
			vsched__add_tag(res, s->tag_of[slot - SLOT_USER]);
		}
	}
}

int vsched__sleep_epoll(struct vsched__sleeper *s, uint32_t blocked,
		       uint64_t deadline, struct vsched_block_result *res)
{
	const struct vsched_host_ops *ops = &s->vm->ops;
	/* The timerfd has no slack, but the wakeup has a latency: arm it
	 * early by the learnt margin and spin for the rest (as sleep_futex). */
	uint64_t kd = vsched__kernel_deadline(ops, deadline);
	uint64_t early = early_for(s, kd, s->fd_margin_ns);

	timer_at(s, early);
	for (;;) {
		bool timer = false, bell = false;
		/* Room for every registered fd: all ready ones are reported. */
		int n = vsched__os_wait(&s->os, s->ev, (int)s->nslots + 2, -1);

		if (n == -EINTR) {
			/* Reported even when a poster raced us (see
			 * vsched__sleep_futex()). */
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
		sort_events(s, n, res, &timer, &bell);
		if (timer && early != kd && !res->nready_total && !bell &&
		    atomic_load_explicit(s->word, memory_order_relaxed) == blocked) {
			uint64_t woke = vsched__clock_now(NULL);
			learn_margin(&s->fd_margin_ns, woke > early ? woke - early : 0);
			finish_on_time(s, blocked, kd);
			/* The fds once more, as the sleep would have seen them. */
			if (s->nlook &&
			    atomic_load_explicit(s->word, memory_order_relaxed) == blocked)
				vsched__collect_ready(s, res);
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
			early = early_for(s, kd, s->fd_margin_ns);
			timer_at(s, early);
		}
		vsched__count(&s->hs.spurious);
	}
}

uint64_t vsched__learn_wake_cost(struct vsched__sleeper *s, uint64_t start)
{
	const struct vsched_host_ops *ops = &s->vm->ops;
	uint64_t stamp = atomic_exchange_explicit(&s->wake_stamp, 0,
						  memory_order_relaxed);
	uint64_t now;

	/* A stamp from before this sleep is a waker that found an earlier
	 * BLOCKED and whose wake this sleep did not wait for. */
	if (!stamp || stamp < start)
		return 0;
	now = ops->now_ns(ops->ctx);
	if (now <= stamp || now - stamp > WAKE_COST_MAX)
		return 0;
	s->wake_cost_ns += (int64_t)(now - stamp - s->wake_cost_ns) / 8;
	return now - stamp;
}

/* A sampled sleep that a waker ended: its thread's CPU since `cpu0`, if
 * the wake came before any on-time spin could have started (MARGIN_MAX
 * before the sleep's deadline `eff`). */
void vsched__learn_sleep_cpu(struct vsched__sleeper *s, uint64_t cpu0, uint64_t eff)
{
	const struct vsched_host_ops *ops = &s->vm->ops;
	uint64_t c1;

	if (eff != VSCHED_DEADLINE_NONE && ops->now_ns(ops->ctx) + MARGIN_MAX >= eff)
		return;
	c1 = vsched__thread_cpu_ns();
	if (c1 > cpu0)
		s->sleep_cpu_ns += (int64_t)(c1 - cpu0 - s->sleep_cpu_ns) / 8;
}
