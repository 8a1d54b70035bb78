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

/* Timed sleeps ask the kernel to wake them early and spin on their word
 * for the rest. How late the kernel's timer comes is measured, not derived:
 * what it took beyond the time asked for, which on the futex includes the
 * thread's timer slack (so no prctl is needed to read it) and on the
 * timerfd only the wakeup latency. It is learnt per mechanism and per class
 * of time left (late_class(): a sleep of 50 us and one of 1 ms wake
 * differently late), as a running median (learn_late()). The sleep asks to
 * be woken that median less OVERSHOOT_NS early (early_by()): about half of
 * its wakeups come after the deadline, by about that much, and those that
 * come before it spin for the rest. The spins may cost a sixteenth of a
 * sleep's CPU on average; where wakeups scatter more than that buys, the
 * sleeps aim later (`keep`). Three sleeps are plain, to the deadline,
 * late: one whose deadline the kernel cannot make however early it is
 * asked; one of a class whose early waits cost more CPU than the params'
 * cpu_budget_pct of its plain ones (dear()), as its sampled waits measure
 * them in turn, whole (learn_timed(): on a nested host a sleep's CPU
 * falls with its length, so the shorter early sleep costs 10-20% more at
 * 500 us-1 ms, and 2.3x at 50 us on the timerfd); and, at a budget of
 * 100 or less, the unsampled waits of a class that has not measured both
 * kinds yet (an early sleep is a bet on CPU not yet seen; above 100 the
 * budget takes it). spin_pct 100 aims
 * before the deadline and polls to one it cannot make (block.c's
 * short_wait()). Only a timeout the sleep asked for is learnt and
 * finished on the CPU; a spurious return, a signal or an error never is,
 * nor the plain sleep of a dear class that is not a CPU sample (its
 * class's early samples keep its lateness). */
/* vsched__kernel_deadline(), but an injected clock that stood still since
 * the last conversion (the same reading, the same deadline: a paused
 * guest's clock) gets twice the last interval (vsched__still_next()): no
 * loop of sleeps of the same short time left. Owner thread. */
static uint64_t kernel_dl(struct vsched__sleeper *s, uint64_t deadline)
{
	const struct vsched_host_ops *ops = &s->vm->ops;
	uint64_t now;

	if (deadline == VSCHED_DEADLINE_NONE || ops->now_ns == vsched__clock_now)
		return deadline;
	now = ops->now_ns(ops->ctx);
	if (now == s->kd_now && deadline == s->kd_dl && s->kd_len)
		s->kd_len = vsched__still_next(s->kd_len);
	else
		s->kd_len = deadline > now ? deadline - now : 1;
	s->kd_now = now;
	s->kd_dl = deadline;
	return vsched__kernel_interval(deadline, now, s->kd_len);
}

static unsigned late_class(uint64_t len)
{
	uint64_t r = len >> 13; /* 8 us */
	unsigned c = r ? 64u - (unsigned)__builtin_clzll(r) : 0;

	return c < VSCHED__LATE_CLASSES ? c : VSCHED__LATE_CLASSES - 1;
}

/* One timed sleep's plan: when to ask the kernel to end it, and how much
 * of an early wakeup may be spun. */
struct plan {
	uint64_t kd;     /* the deadline (CLOCK_MONOTONIC) */
	uint64_t asked;  /* the kernel's timeout: kd, or earlier */
	uint64_t from;   /* when it was asked */
	uint64_t spin;   /* the longest spin an early wakeup may end in */
	struct vsched__late *late; /* the estimate it learns, NULL: none */
};

/* How early to ask, for a class's lateness `l` (`start` when unseen): its
 * median less `keep` (at least OVERSHOOT_NS; more while the spins cost
 * more than their share, learn_late()). spin_pct 100: on time, whatever it
 * spins. */
static uint64_t early_by(unsigned pct, const struct vsched__late *l,
			 uint32_t start)
{
	uint64_t est = l->late.est ? l->late.est : start;
	uint64_t keep = l->keep > OVERSHOOT_NS ? l->keep : OVERSHOOT_NS;

	if (pct == 100)
		return est + MARGIN_PAD;
	return est > keep ? est - keep : 0;
}

/* Whether a class's early sleeps cost more than the CPU budget lets them
 * (cpu_budget_pct of its plain ones' CPU, with a tolerance of DEAR_ABOVE/32
 * to become dear and DEAR_BELOW/32 to stop being so), once CPU_MEAN_N of
 * each kind are measured (learn_timed()): then its timed waits sleep
 * plain, to the deadline. */
static bool learnt(const struct vsched__late *l)
{
	return l->cpu_early.n >= CPU_MEAN_N && l->cpu_plain.n >= CPU_MEAN_N;
}

static bool dear(struct vsched__late *l, unsigned budget)
{
	uint64_t e = l->cpu_early.est, lim = (uint64_t)budget * l->cpu_plain.est;

	bool d;

	if (!learnt(l))
		return false;
	d = 3200 * e > (l->dear ? DEAR_BELOW : DEAR_ABOVE) * lim;
	if (d != l->dear)
		l->stable = 0; /* sample it at the fed rate again */
	l->dear = d;
	return d;
}

/* Plan a sleep due at `kd`: early by its class's lateness (of the time
 * left) less the class's `keep` (spin_pct 100: plus MARGIN_PAD, to end on
 * time). An early wakeup spins for at most spin_pct of the time left and
 * (unless spin_pct is 100) a sleep's CPU; one that comes earlier sleeps
 * again, to kd itself (rare: far earlier than the sleeps of its class
 * wake). spin_pct 0 or `exact`: ask for kd. */
static void plan_sleep(struct vsched__sleeper *s, struct plan *p, uint64_t kd,
		       unsigned mech, bool exact)
{
	const unsigned pct = s->params.spin_pct;
	uint64_t left, by;

	p->kd = p->asked = kd;
	p->late = NULL;
	if (kd == VSCHED_DEADLINE_NONE || !pct || exact)
		return;
	p->from = vsched__clock_now(NULL);
	left = kd > p->from ? kd - p->from : 0;
	p->spin = left / 100 * pct;
	/* Spinning longer than a sleep's CPU costs more than sleeping
	 * again (late): a futex timer that the slack lets fire early (at
	 * another interrupt) wakes up to the slack before its median. */
	if (pct != 100 && p->spin > vsched__sleep_cost(s))
		p->spin = vsched__sleep_cost(s);
	p->late = &s->late[mech][late_class(left)];
	by = early_by(pct, p->late, mech == LATE_FUTEX ? LATE_START : LATE_START_EPOLL);
	/* No time to sleep on time (the kernel wakes later than the time
	 * left): sleep late, to kd. Nor where this class's early waits cost
	 * more than the CPU budget lets them (dear()). A sampled wait is of
	 * the kind the class's last sample was not (probe_plain); a class
	 * samples more often while it learns, for CPU_SAMPLE_TRIES samples
	 * started at most (a waker may end every one: then it never would
	 * have learnt), and such a sample counts only as a whole timed wait. */
	if (by >= left)
		return;
	if (pct != 100) {
		struct vsched__late *l = p->late;
		bool learning = !learnt(l) && l->tries < CPU_SAMPLE_TRIES;

		unsigned every = learning ? CPU_SAMPLE_HUNGRY
				 : l->stable < CPU_SAMPLE_STABLE ? CPU_SAMPLE_FED
								 : CPU_SAMPLE_SETTLED;

		if (!s->cpu0 && !(++l->waits % every)) {
			vsched__sample_start(s);
			s->cpu_whole = true;
			l->tries += learning;
		}
		if (s->cpu0) {
			if (l->probe_plain)
				return;
		} else if (learnt(l) ? dear(l, s->params.cpu_budget_pct)
				     : s->params.cpu_budget_pct <= 100) {
			/* Plain by the verdict, or while the class learns
			 * one at a budget that spends no more than a plain
			 * sleep (the early sleep is a bet on CPU not yet
			 * seen; a budget over 100 takes it), unsampled:
			 * nothing to learn (its early samples learn the
			 * lateness they aim by) and nothing to spin: no
			 * early_wakeup(). */
			p->late = NULL;
			return;
		}
	}
	p->asked = kd - by;
}

/* A mean of CPU samples: the first CPU_MEAN_N's, then an EWMA of
 * 1/CPU_MEAN_N, kept in 1/256 ns (in whole ns a step rounded toward
 * zero stops short of the samples by up to CPU_MEAN_N ns: 1-2% of a
 * sleep's CPU, against a tolerance of 1/32); from the 5th, a sample is
 * capped at 4x the mean (a signal handler run inside one wait, which
 * would otherwise move a mean of 64 past the budget's tolerance on its
 * own). */
static void mean_add(struct vsched__mean *m, uint64_t x)
{
	int64_t v = (int64_t)(x < LATE_MAX ? x : LATE_MAX) << 8;

	if (m->n >= 4 && v > 4 * (int64_t)m->fx)
		v = 4 * (int64_t)m->fx;
	if (m->n < CPU_MEAN_N)
		m->n++;
	m->fx = (uint32_t)((int64_t)m->fx + (v - (int64_t)m->fx) / m->n);
	m->est = m->fx >> 8;
	if (!m->est)
		m->est = 1; /* measured: not "no sample yet" */
}

/* A sampled timed wait (planned in class `l`, `early` or plain) reached
 * its deadline: its thread CPU, spins and sleeps again included, is its
 * kind's sample (a plain one's is the sleeper's cost of a sleep too), and
 * the class's next sample is of the other kind (dear()). Once the class
 * has learnt, a sample that leaves its verdict as it was counts toward
 * its back-off (`stable`, plan_sleep()). */
static void learn_timed(struct vsched__sleeper *s, struct vsched__late *l, bool early)
{
	uint64_t c = early ? vsched__sample_cpu(s) : vsched__learn_sleep_cpu(s);

	if (!c)
		return;
	mean_add(early ? &l->cpu_early : &l->cpu_plain, c);
	l->probe_plain = early;
	if (learnt(l)) {
		bool was = l->dear;

		if (dear(l, s->params.cpu_budget_pct) == was && l->stable < CPU_SAMPLE_STABLE)
			l->stable++;
	}
}

uint64_t vsched__plain_cost(const struct vsched__sleeper *s, uint64_t left)
{
	bool ep = atomic_load_explicit(&s->use_evfd, memory_order_relaxed);
	uint32_t c = s->late[ep][late_class(left)].cpu_plain.est;

	return s->params.sleep_cpu_ns ? s->params.sleep_cpu_ns : c ? c : vsched__sleep_cost(s);
}

/* The lateness a sleep of `left` ns would be planned with, as the next
 * arm's mechanism has learnt it, plus MARGIN_PAD: below it, spin_pct 100
 * cannot end on time by sleeping. */
uint64_t vsched__late_for(const struct vsched__sleeper *s, uint64_t left)
{
	bool ep = atomic_load_explicit(&s->use_evfd, memory_order_relaxed);
	const struct vsched__late *l = &s->late[ep][late_class(left)];

	return (l->late.est ? l->late.est : ep ? LATE_START_EPOLL : LATE_START) + MARGIN_PAD;
}

void vsched__median_add(struct vsched__median *m, uint64_t x)
{
	uint32_t v = x < LATE_MAX ? (uint32_t)x : LATE_MAX, d;
	uint32_t lim = m->est / 4 + LATE_STEP, mag;
	bool up = v > m->est;

	if (m->n < UINT8_MAX)
		m->n++;
	if (!m->est || m->n == 2) {
		/* The first sample, then the smaller of the first two: one
		 * sample that a signal handler ran inside does not stand. */
		if (!m->est || v < m->est)
			m->est = v ? v : 1;
		m->step = LATE_STEP;
		m->up = false;
		return;
	}
	if (v == m->est) { /* a tie crosses nothing: the smallest step */
		m->step = LATE_STEP;
		return;
	}
	mag = up == m->up ? (2 * m->step < lim ? 2 * m->step : lim) : LATE_STEP;
	d = up ? v - m->est : m->est - v;
	if (d > mag)
		d = mag;
	m->est = up ? m->est + d : (m->est - d ? m->est - d : 1);
	m->step = mag;
	m->up = up;
}

/* One sample: the sleep woke `late` ns after the time it asked for and
 * has `spin` ns left to spin; a sleep costs `cost` ns of CPU. The median
 * learns the lateness. The spins are kept to a SPIN_SHARE of a sleep's
 * CPU on average: while their mean (an EWMA, 1/8) is above it, the sleep
 * aims a step further short of the median (`keep` grows by LATE_STEP from
 * OVERSHOOT_NS), and a step back toward OVERSHOOT_NS while it is below:
 * where wakeups scatter widely below their median (a futex timer that the
 * slack lets fire early, a busy host), the sleeps end later rather than
 * spin for it. */
#define SPIN_SHARE 16 /* 1/16 */
static void learn_late(struct vsched__late *l, uint64_t late, uint64_t spin,
		       uint64_t cost)
{
	if (spin > LATE_MAX)
		spin = LATE_MAX;
	l->spin = (uint32_t)((int64_t)l->spin + ((int64_t)spin - (int64_t)l->spin) / 8);
	if (l->keep < OVERSHOOT_NS)
		l->keep = OVERSHOOT_NS;
	if (l->spin > cost / SPIN_SHARE) {
		if (l->keep < LATE_MAX)
			l->keep += LATE_STEP;
	} else if (l->keep >= OVERSHOOT_NS + LATE_STEP) {
		l->keep -= LATE_STEP;
	}
	vsched__median_add(&l->late, late);
}

/* early_wakeup()'s verdicts. */
enum { WOKE_TOO_EARLY, WOKE_LATE, WOKE_SPUN };

/* The timeout planned came with the word still BLOCKED: learn how late it
 * was, then spin to the deadline on the word, unless the wakeup came more
 * than the plan's spin before it.
 * Returns WOKE_TOO_EARLY to sleep again to the deadline itself, WOKE_LATE
 * when the wakeup came at or after the deadline (nothing spun), WOKE_SPUN
 * when it spun until the deadline (or a poster). */
static int early_wakeup(struct vsched__sleeper *s, uint32_t blocked,
			const struct plan *p)
{
	uint64_t woke = vsched__clock_now(NULL);
	uint64_t at = p->asked > p->from ? p->asked : p->from;
	uint64_t late = woke > at ? woke - at : 0;

	uint64_t spin = woke < p->kd ? p->kd - woke : 0;
	struct vsched__late *l = p->late;
	uint64_t cost = l->cpu_plain.est ? l->cpu_plain.est : vsched__sleep_cost(s);

	/* A wakeup too early to spin costs a second sleep instead. Either
	 * way a CPU sample now counts only as the whole timed wait's (a
	 * waker that ends it meanwhile does not teach a sleep's cost). */
	learn_late(l, late, spin <= p->spin ? spin : cost, cost);
	s->cpu_whole = true;
	if (spin > p->spin)
		return WOKE_TOO_EARLY;
	if (!spin)
		return WOKE_LATE;
	while (atomic_load_explicit(s->word, memory_order_relaxed) == blocked &&
	       vsched__clock_now(NULL) < p->kd)
		vsched__relax();
	return WOKE_SPUN;
}

/* Arm BLOCKED for one sleep (protocol.md "The wake mechanism"): the
 * mechanism that sleep uses is published first, in sleep_evfd, so that the
 * waker whose CAS reads this BLOCKED word reads it too (the CAS is a
 * release). An fd_add meanwhile moves the next arm to epoll, never this
 * one. Returns 0, or VSCHED_EDESTROYED when the word said DESTROYED (a
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
		return vsched__mode_of(old) == VSCHED_MODE_DESTROYED ? VSCHED_EDESTROYED
								    : VSCHED_ESTATE;
	return 0;
}

/* An absolute CLOCK_MONOTONIC timeout of ~584 years of uptime: a timed
 * futex wait that never times out (vsched__sleep_futex()). */
#define FUTEX_NEVER (VSCHED_DEADLINE_NONE - 1)

int vsched__sleep_futex(struct vsched__sleeper *s, uint32_t blocked,
		       uint64_t deadline)
{
	const struct vsched_host_ops *ops = &s->vm->ops;

	/* The default futex wait sleeps on CLOCK_MONOTONIC; a custom wait
	 * gets the deadline in the VM's clock, as vm.h documents. */
	const bool kernel = ops->wait == vsched__futex_wait;

	bool exact = false; /* an early wakeup too early to spin: to kd */
	struct vsched__late *sampled = NULL; /* the class of a CPU sample */
	bool early = false;                  /* and its kind */

	for (;;) {
		struct plan p;
		/* The kernel's futex timeout is an hrtimer with the thread's
		 * timer slack: it may fire that late. Ask for the deadline
		 * less the learnt lateness, then spin on the word until the
		 * deadline: the sleep ends about on time without changing the
		 * thread's slack. */
		if (kernel) {
			plan_sleep(s, &p, kernel_dl(s, deadline),
				   LATE_FUTEX, exact);
			/* No deadline: one the kernel never reaches (it
			 * saturates), so that a signal handler interrupts the
			 * wait with or without SA_RESTART, as it does a timed
			 * one and epoll_pwait. Linux restarts an untimed
			 * FUTEX_WAIT after an SA_RESTART handler, and the
			 * signal would go unreported on this path alone. */
			if (p.asked == VSCHED_DEADLINE_NONE)
				p.asked = FUTEX_NEVER;
		} else {
			p = (struct plan){ .kd = deadline, .asked = deadline };
		}
		if (p.late && s->cpu0 && !sampled) {
			sampled = p.late;
			early = p.asked != p.kd;
		}
		int rc = ops->wait((uint32_t *)s->word, blocked, p.asked, ops->ctx);
		/* Only the timeout asked for: a spurious return 0 (a late
		 * FUTEX_WAKE of an earlier sleep), a signal or an error goes
		 * on below, never to a spin until the deadline. */
		if (rc == -ETIMEDOUT && p.late &&
		    atomic_load_explicit(s->word, memory_order_relaxed) == blocked &&
		    early_wakeup(s, blocked, &p) == WOKE_TOO_EARLY) {
			exact = true;
			continue;
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
			if (sampled && s->cpu0)
				learn_timed(s, sampled, early);
			if (vsched__mode_leave_blocked(s, blocked) != blocked)
				return 0;
			return VSCHED_WAKE_DEADLINE;
		}
		s->cpu0 = 0; /* a sample is of one whole timed wait */
		sampled = NULL;
		vsched__count(&s->hs.spurious);
	}
}

/* Arm the sleep's timerfd at `at` (CLOCK_MONOTONIC; NONE disarms) unless
 * it is set there already and has not fired: an I/O thread that sleeps
 * without a deadline, or again to the same one, makes no timerfd syscall.
 * 0, or the -errno of a timerfd_settime that failed (a seccomp filter's
 * errno, the timerfd closed under the library): the timer is not set, so
 * the sleep would wait past its deadline, and reports it instead, as it
 * does the futex's and epoll_pwait's errors. */
static int timer_at(struct vsched__sleeper *s, uint64_t at)
{
	int rc;

	if (at == s->tfd_at && at != TFD_UNKNOWN)
		return 0;
	if ((rc = vsched__os_timer_at(&s->os, at))) {
		s->tfd_at = TFD_UNKNOWN;
		return rc;
	}
	s->tfd_at = at;
	s->tfd_looked = false;
	return 0;
}

/* A sleep armed at `blocked` whose timerfd could not be set (`rc`): leave
 * BLOCKED and report it, or 0 when a waker won the word (look again). */
static int timer_failed(struct vsched__sleeper *s, uint32_t blocked, int rc)
{
	if (vsched__mode_leave_blocked(s, blocked) != blocked)
		return 0;
	return rc;
}

/* The `n` events of one epoll_pwait: the kick eventfd's ring is consumed
 * by its report (edge-triggered), the timerfd is marked unknown (`timer`:
 * it fired), a doorbell's ring is consumed so (an eventfd) or by a read (a
 * pipe; `bell`: look at the condition again), and every other ready fd's
 * tag goes to `res`. */
static void sort_events(struct vsched__sleeper *s, int n,
			struct vsched_block_result *res, bool *timer, bool *bell)
{
	vsched__clear_tags(res);
	for (int i = 0; i < n; i++) {
		uint64_t slot = s->ev[i].data.u64;
		if (slot == SLOT_EVFD) {
			/* Edge-triggered, never read (lib/os.h). */
		} else if (slot == SLOT_TFD) {
			/* Not read: the next timer_at() sets it, and a
			 * timerfd_settime() clears its expirations (the
			 * baseline loop's read, saved). */
			s->tfd_at = TFD_UNKNOWN;
			*timer = true;
		} else if (vsched__user_slot(s, slot) &&
			   !vsched__reported(s, slot, s->ev[i].events) &&
			   (s->bell_of[slot - SLOT_USER] != BELL_READ ||
			    vsched__os_drain_all(s->rfd_of[slot - SLOT_USER]))) {
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
	 * early by the learnt lateness and spin for the rest (as
	 * sleep_futex). */
	struct plan p;
	struct vsched__late *sampled; /* the class of a CPU sample */
	bool early;                   /* and its kind */

	plan_sleep(s, &p, kernel_dl(s, deadline), LATE_EPOLL, false);
	sampled = s->cpu0 ? p.late : NULL;
	early = p.asked != p.kd;
	int trc = timer_at(s, p.asked);
	if (trc)
		return timer_failed(s, blocked, trc);
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
		if (timer && p.late && !res->nready_total && !bell &&
		    atomic_load_explicit(s->word, memory_order_relaxed) == blocked) {
			int woke = early_wakeup(s, blocked, &p);

			if (woke == WOKE_TOO_EARLY) {
				/* Too early to spin: sleep again, to kd. */
				plan_sleep(s, &p, p.kd, LATE_EPOLL, true);
				if ((trc = timer_at(s, p.asked)))
					return timer_failed(s, blocked, trc);
				continue;
			}
			/* After a spin, the fds once more, as a sleep to the
			 * deadline would have seen them, and sorted as its
			 * events are: this look consumes an edge-triggered
			 * ring, so a doorbell's must send the engine to its
			 * condition (with an injected clock short of the
			 * deadline it would sleep again, ring lost). A wakeup
			 * at or after the deadline (most of them: they aim
			 * OVERSHOOT_NS after it) spun nothing, and the sleep
			 * just looked: a second epoll_pwait was ~1 us here,
			 * 8-11% of a 1 ms wait's CPU, the whole of what made
			 * on-time sleeps with fds dear (dear()). */
			if (s->nlook && woke == WOKE_SPUN &&
			    atomic_load_explicit(s->word, memory_order_relaxed) == blocked) {
				n = vsched__os_wait(&s->os, s->ev, (int)s->nslots + 2, 0);
				if (n > 0)
					sort_events(s, n, res, &timer, &bell);
			}
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
			if (sampled && s->cpu0)
				learn_timed(s, sampled, early);
			if (vsched__mode_leave_blocked(s, blocked) != blocked)
				return 0;
			return VSCHED_WAKE_DEADLINE;
		}
		s->cpu0 = 0; /* a sample is of one whole timed wait */
		/* A stale eventfd count, or the timerfd expired before an
		 * injected clock reached the deadline: convert it again. */
		if (timer) {
			plan_sleep(s, &p, kernel_dl(s, deadline),
				   LATE_EPOLL, false);
			if ((trc = timer_at(s, p.asked)))
				return timer_failed(s, blocked, trc);
		}
		sampled = s->cpu0 ? p.late : NULL;
		early = p.asked != p.kd;
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

void vsched__sample_start(struct vsched__sleeper *s)
{
	uint64_t a = s->cpu_reads_timed < CPU_READ_TIMED ? vsched__thread_cpu_ns() : 0;

	s->cpu0 = vsched__thread_cpu_ns();
	if (a && s->cpu0 >= a) {
		if (!s->cpu_reads_timed++ || s->cpu0 - a < s->cpu_read)
			s->cpu_read = s->cpu0 - a;
	}
	s->cpu_whole = false;
}

uint64_t vsched__sample_cpu(struct vsched__sleeper *s)
{
	uint64_t c1 = vsched__thread_cpu_ns();
	uint64_t c = c1 > s->cpu0 + s->cpu_read ? c1 - s->cpu0 - s->cpu_read : 0;

	s->cpu0 = 0;
	return c;
}

uint64_t vsched__learn_sleep_cpu(struct vsched__sleeper *s)
{
	uint64_t c = vsched__sample_cpu(s);

	if (c)
		vsched__median_add(&s->cpu_med, c);
	return c;
}
