/* SPDX-License-Identifier: MIT */
/* Generic waiters: the block/poll engine for any thread that waits on a
 * condition, such as an I/O thread on a guest ring. */
#include "internal.h"

struct vsched_waiter {
	_Atomic uint32_t state VSCHED__ALIGNED; /* same encoding as a mode word */
	_Atomic uint64_t wakeups;
	vsched_cond_fn cond;
	void *arg;
	struct vsched__sleeper sl VSCHED__ALIGNED;
};

int vsched__run_engine(struct vsched__sleeper *s, vsched_cond_fn cond,
		       void *arg, uint64_t deadline,
		       struct vsched_block_result *res);

int vsched_waiter_create(struct vsched_vm *vm, vsched_cond_fn cond, void *arg,
			 struct vsched_waiter **out)
{
	struct vsched_waiter *w;

	if (!vm || !cond || !out)
		return VSCHED_EINVAL;
	w = vsched__alloc(&vm->alloc, sizeof(*w));
	if (!w)
		return VSCHED_ENOMEM;
	w->cond = cond;
	w->arg = arg;
	atomic_init(&w->state, VSCHED_MODE_OUTSIDE_GUEST);
	vsched__sleeper_init(&w->sl, vm, &w->state);
	*out = w;
	return 0;
}

int vsched_waiter_destroy(struct vsched_waiter *w)
{
	if (!w)
		return VSCHED_EINVAL;
	vsched__sleeper_fini(&w->sl);
	vsched__free(&w->sl.vm->alloc, w, sizeof(*w));
	return 0;
}

int vsched_waiter_wait(struct vsched_waiter *w, uint64_t deadline,
		       struct vsched_block_result *res)
{
	if (!w || (res && res->size < sizeof(*res)))
		return VSCHED_EINVAL;
	return vsched__run_engine(&w->sl, w->cond, w->arg, deadline, res);
}

int vsched_waiter_kick(struct vsched_waiter *w)
{
	if (!w)
		return VSCHED_EINVAL;
	/* Producer side of the pair: the condition the caller made true is
	 * seen by the consumer's re-check, or we see its "needs kick". */
	vsched__mb();
	return vsched__kick_decide(NULL, &w->sl, &w->wakeups,
				   atomic_load_explicit(&w->state,
							memory_order_relaxed),
				   0);
}

int vsched_waiter_fd_add(struct vsched_waiter *w, int fd, uint32_t events,
			 uint64_t tag)
{
	if (!w)
		return VSCHED_EINVAL;
	return vsched__sleeper_fd_add(&w->sl, fd, events, tag);
}

int vsched_waiter_stats(const struct vsched_waiter *w,
			struct vsched_halt_stats *out)
{
	if (!w || !out)
		return VSCHED_EINVAL;
	vsched__halt_stats(&w->sl, out);
	out->halt_wakeup = atomic_load_explicit(&w->wakeups, memory_order_relaxed);
	return 0;
}
