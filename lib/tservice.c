/* SPDX-License-Identifier: MIT */
/*
 * The timer service (lib/timers.h): kicks running vCPUs at their timers'
 * deadlines, from a thread of its own (vsched_timer_service_run()) or
 * from the VMM's event loop (its fd and dispatch).
 */
#include <errno.h>
#include <string.h>

#include "abi.h"
#include "mode.h"
#include "timers.h"

#include <urcu/urcu-bp.h>

/* As lib/sleep.c's sleeps: an injected clock that stands still between
 * two dispatches (a paused guest's) gets intervals of twice the last
 * (vsched__still_next()) from STILL_MIN_NS, rather than the same short
 * time left again and again. */
#define STILL_MIN_NS 1000

/* `d` (the VM's clock) as a CLOCK_MONOTONIC deadline. */
static uint64_t kernel_dl(const struct vsched_timer_service *s, uint64_t d)
{
	const struct vsched_host_ops *ops = &s->vm->ops;
	uint64_t now;

	if (d == VSCHED_DEADLINE_NONE || ops->now_ns == vsched__clock_now)
		return d;
	now = ops->now_ns(ops->ctx);
	/* The floor only while the clock still stands where it was set: an
	 * arm after the clock moved on gets the time left alone. */
	return vsched__kernel_interval(
		d, now,
		now == atomic_load_explicit(&s->still_at, memory_order_relaxed)
			? atomic_load_explicit(&s->still_ns, memory_order_relaxed)
			: 0);
}

/* 0, or the -errno of this programming's failed timerfd_settime. */
static int program(struct vsched_timer_service *s)
{
	/* Whoever lowered `next` programs it; re-check so that a slower
	 * programmer never leaves a later value behind. */
	for (;;) {
		uint64_t v = atomic_load(&s->next);
		/* `next` is in the VM's clock, the timerfd's is
		 * CLOCK_MONOTONIC: with an injected clock the time left is
		 * converted now; an expiry before the VM's clock reaches the
		 * deadline fires nothing and programs it again. */
		int rc = vsched__os_timer_at(&s->os, kernel_dl(s, v));
		if (rc) {
			/* Not programmed: the fd would never ring for it.
			 * Report it, and wake run() to do so. */
			atomic_store(&s->err, rc);
			vsched__os_signal(&s->os);
			return rc;
		}
		if (atomic_load(&s->next) == v)
			return 0;
	}
}

static void lower_next(struct vsched_timer_service *s, uint64_t d)
{
	uint64_t cur = atomic_load(&s->next);
	while (d < cur)
		if (atomic_compare_exchange_weak(&s->next, &cur, d)) {
			program(s);
			return;
		}
}

/* An arm (any thread) reaches the service under RCU: the service's destroy
 * unpublishes it and waits for a grace period before closing its fds and
 * freeing it, so an arm never programs a closed (or reused) fd. */
void vsched__service_note(struct vsched_vm *vm, uint64_t d)
{
	struct vsched_timer_service *s;

	/* No service: no RCU section (and no liburcu-bp registration of this
	 * thread). The arm's CAS on the timer word and this load are seq_cst,
	 * as are the service's publication and its first dispatch's walk of
	 * every timer: either this arm sees the service, or that walk sees
	 * the new deadline. */
	if (!atomic_load_explicit(&vm->tsvc, memory_order_seq_cst))
		return;
	urcu_bp_read_lock();
	s = atomic_load_explicit(&vm->tsvc, memory_order_acquire);
	if (s) {
		lower_next(s, d);
		VSCHED__TSAN_RELEASE(s);
	}
	urcu_bp_read_unlock();
}

/* Here, beside the service it tells, rather than in lib/timer.c: the
 * service's dispatch calls it (through fire_one()), and lib/timer.c calls
 * the service. */
void vsched__timer_unlatch_fallen(struct vsched_timer *t)
{
	const struct vsched_host_ops *ops = &t->vcpu->vm->ops;
	uint64_t w = atomic_load_explicit(&t->word, memory_order_acquire);

	if (level_fell(t, w, ops->now_ns(ops->ctx)) &&
	    atomic_compare_exchange_strong_explicit(&t->word, &w, w & ~EXPIRED,
						    memory_order_seq_cst,
						    memory_order_relaxed)) {
		vsched__service_note(t->vcpu->vm, deadline_of(w));
		vsched__mode_rewake(t->vcpu);
	}
}

int vsched_timer_service_create(struct vsched_vm *vm, struct vsched_timer_service **out)
{
	struct vsched_timer_service *s, *none = NULL;
	int rc;

	if (!vm || !out)
		return VSCHED_EINVAL;
	s = vsched__alloc(&vm->alloc, sizeof(*s));
	if (!s)
		return VSCHED_ENOMEM;
	s->vm = vm;
	rc = vsched__os_set_open(&s->os);
	if (rc) {
		vsched__free(&vm->alloc, s, sizeof(*s));
		return rc;
	}
	atomic_init(&s->next, UINT64_MAX);
	if (!atomic_compare_exchange_strong(&vm->tsvc, &none, s)) {
		vsched__os_set_close(&s->os);
		vsched__free(&vm->alloc, s, sizeof(*s));
		return VSCHED_EEXIST;
	}
	vsched_timer_service_dispatch(s);
	*out = s;
	return 0;
}

int vsched_timer_service_fd(const struct vsched_timer_service *s)
{
	return s ? s->os.tfd : VSCHED_EINVAL;
}

int vsched_timer_service_dispatch(struct vsched_timer_service *s)
{
	uint64_t now, m = UINT64_MAX;
	int fired = 0;

	if (!s)
		return VSCHED_EINVAL;
	atomic_fetch_add(&s->dispatching, 1);
	vsched__os_drain(s->os.tfd);
	/* Forget the programmed deadline first: an arm from now on lowers
	 * it again and programs it itself. An earlier failure to program
	 * is superseded: this dispatch programs afresh. */
	atomic_store(&s->err, 0);
	atomic_store(&s->next, UINT64_MAX);
	now = s->vm->ops.now_ns(s->vm->ops.ctx);
	if (s->vm->ops.now_ns != vsched__clock_now) {
		uint64_t f = atomic_load_explicit(&s->still_ns, memory_order_relaxed);

		if (now != s->last_now)
			f = 0;
		else
			f = f ? vsched__still_next(f) : STILL_MIN_NS;
		atomic_store_explicit(&s->still_ns, f, memory_order_relaxed);
		atomic_store_explicit(&s->still_at, now, memory_order_relaxed);
		s->last_now = now;
	}
	for (struct vsched_timer *t = atomic_load_explicit(&s->vm->timers, memory_order_acquire);
	     t; t = atomic_load_explicit(&t->vm_next, memory_order_acquire)) {
		uint64_t e;
		if (vsched__mode_of(atomic_load_explicit(&t->vcpu->mode, memory_order_relaxed)) ==
		    VSCHED_MODE_DESTROYED)
			continue;
		fired += vsched__timer_fire_one(t, now);
		/* Only what can still fire: a disabled or masked LEVEL timer
		 * with an old deadline, or a latched one, is not programmed
		 * (it would keep the fd readable: a busy loop). */
		e = fire_deadline(atomic_load(&t->word));
		if (e < m)
			m = e;
	}
	if (m != UINT64_MAX)
		lower_next(s, m);
	{
		int err = atomic_load(&s->err);
		atomic_fetch_sub(&s->dispatching, 1);
		return err ? err : fired;
	}
}

int vsched_timer_service_run(struct vsched_timer_service *s)
{
	bool idle = false;
	int rc = 0;

	if (!s)
		return VSCHED_EINVAL;
	/* One run() at a time: a second one would sleep in the same epoll
	 * set, and stop()'s one edge of the eventfd wakes only one of them
	 * (the other would sleep for ever). */
	if (!atomic_compare_exchange_strong(&s->running, &idle, true))
		return VSCHED_ESTATE;
	while (!atomic_load(&s->stop)) {
		struct epoll_event ev;
		rc = vsched_timer_service_dispatch(s);
		if (rc < 0)
			break; /* a deadline could not be programmed */
		rc = 0;
		if (atomic_load(&s->stop))
			break;
		/* A signal: dispatch again. Any other error fails the same
		 * way at once (a seccomp filter's errno): returned, not
		 * retried in a loop that would spin for ever. */
		rc = vsched__os_wait(&s->os, &ev, 1, -1);
		if (rc == -EINTR)
			rc = 0;
		if (rc < 0)
			break;
		rc = 0;
	}
	atomic_store_explicit(&s->running, false, memory_order_release);
	return rc;
}

int vsched_timer_service_clock_changed(struct vsched_timer_service *s)
{
	if (!s)
		return VSCHED_EINVAL;
	/* Ring the timerfd now (deadline 0: due): run() or the event loop
	 * dispatches, which converts every deadline again from the clock as
	 * it reads then. `next` 0 first, so that no arm reprograms it later
	 * (an arm only lowers it); a programming in flight sees the change
	 * at its re-check and programs 0 too. */
	atomic_store(&s->next, 0);
	return program(s);
}

int vsched_timer_service_stop(struct vsched_timer_service *s)
{
	if (!s)
		return VSCHED_EINVAL;
	atomic_store(&s->stop, true);
	/* run() waits on this eventfd too. */
	vsched__os_signal(&s->os);
	return 0;
}

bool vsched__timers_service_running(struct vsched_vm *vm)
{
	struct vsched_timer_service *s = atomic_load(&vm->tsvc);
	return s && (atomic_load_explicit(&s->running, memory_order_acquire) ||
		     atomic_load(&s->dispatching));
}

/* Unpublished already: wait out every arm that may still hold it. */
void vsched__service_free(struct vsched_timer_service *s)
{
	urcu_bp_synchronize_rcu();
	VSCHED__TSAN_ACQUIRE(s);
	vsched__os_set_close(&s->os);
	vsched__free(&s->vm->alloc, s, sizeof(*s));
}

int vsched_timer_service_destroy(struct vsched_timer_service *s)
{
	struct vsched_timer_service *self;
	bool idle = false;
	if (!s)
		return VSCHED_EINVAL;
	/* run() still active (misuse, but seen): freeing the service under
	 * it would leave its thread asleep for ever on closed fds. Claimed
	 * as run() claims it, so that a run() starting now is refused
	 * rather than started on a service being freed. */
	if (!atomic_compare_exchange_strong(&s->running, &idle, true))
		return VSCHED_ESTATE;
	/* Nor from inside a dispatch (a kick callout of its posts): it
	 * would go on walking a freed service. */
	self = s;
	if (atomic_load(&s->dispatching)) {
		atomic_store(&s->running, false);
		return VSCHED_ESTATE;
	}
	if (!atomic_compare_exchange_strong(&s->vm->tsvc, &self, NULL)) {
		atomic_store(&s->running, false);
		return VSCHED_EINVAL; /* not this VM's service */
	}
	vsched__service_free(s);
	return 0;
}
