/* SPDX-License-Identifier: MIT */
/* Generic waiters: the block/poll engine for any thread that waits on a
 * condition, such as an I/O thread on a guest ring. */
#include "abi.h"
#include "mode.h"
#include "contract.h"
#include "stats_desc.h"

struct vsched_waiter {
	_Atomic uint32_t state VSCHED__ALIGNED; /* same encoding as a mode word */
	_Atomic uint64_t wakeups;
	struct vsched__wait_hooks hooks;
	struct vsched__sleeper sl VSCHED__ALIGNED;
};

int vsched_waiter_create_ex(struct vsched_vm *vm,
			    const struct vsched_waiter_config *caller,
			    struct vsched_waiter **out)
{
	struct vsched_waiter_config c;
	struct vsched_waiter *w;
	int rc;

	if (!vm || !out ||
	    vsched__struct_in(&c, sizeof(c), caller,
			      VSCHED__SIZE_TO(struct vsched_waiter_config, poll)))
		return VSCHED_EINVAL;
	/* The hooks come as a pair: what before_sleep arms, after_sleep
	 * clears. */
	if (!c.cond || !c.before_sleep != !c.after_sleep)
		return VSCHED_EINVAL;
	w = vsched__alloc(&vm->alloc, sizeof(*w));
	if (!w)
		return VSCHED_ENOMEM;
	memset(w, 0, sizeof(*w));
	w->hooks.cond = c.cond;
	w->hooks.arg = c.arg;
	w->hooks.before_sleep = c.before_sleep;
	w->hooks.after_sleep = c.after_sleep;
	w->hooks.hook_arg = c.hook_arg;
	w->hooks.w = w;
	atomic_init(&w->state, VSCHED_MODE_OUTSIDE_GUEST);
	vsched__sleeper_init(&w->sl, vm, &w->state);
	w->sl.waiter_profile = true; /* an I/O thread's, not a vCPU's */
	if (c.poll && (rc = vsched__sleeper_set_poll(&w->sl, c.poll))) {
		vsched__sleeper_fini(&w->sl);
		vsched__free(&vm->alloc, w, sizeof(*w));
		return rc;
	}
	atomic_fetch_add_explicit(&vm->nwaiters, 1, memory_order_relaxed);
	*out = w;
	return 0;
}

int vsched_waiter_create(struct vsched_vm *vm, vsched_cond_fn cond, void *arg,
			 struct vsched_waiter **out)
{
	struct vsched_waiter_config c = {
		.size = sizeof(c), .cond = cond, .arg = arg,
	};
	return vsched_waiter_create_ex(vm, &c, out);
}

/* vsched__allowed() on the waiter's state word, read now. */
static int waiter_allowed(const struct vsched_waiter *w, enum vsched__call call)
{
	return vsched__allowed(call,
			       atomic_load_explicit(&w->state, memory_order_relaxed));
}

int vsched_waiter_set_poll(struct vsched_waiter *w,
			   const struct vsched_poll_params *p)
{
	if (!w)
		return VSCHED_EINVAL;
	return vsched__sleeper_set_poll(&w->sl, p);
}

/* Refused while a thread waits on it (POLLING or BLOCKED): that thread
 * would wake into freed memory. */
int vsched_waiter_destroy(struct vsched_waiter *w)
{
	struct vsched_vm *vm;
	int rc;

	if (!w)
		return VSCHED_EINVAL;
	if ((rc = waiter_allowed(w, VSCHED__C_WAITER_DESTROY)))
		return rc;
	if (atomic_load_explicit(&w->sl.in_engine, memory_order_relaxed))
		return VSCHED_ESTATE; /* its consumer is inside a wait (a hook) */
	vm = w->sl.vm;
	vsched__sleeper_fini(&w->sl);
	vsched__free(&vm->alloc, w, sizeof(*w));
	/* Last: the VM may be destroyed as soon as this count drops. */
	atomic_fetch_sub_explicit(&vm->nwaiters, 1, memory_order_release);
	return 0;
}

int vsched_waiter_wait(struct vsched_waiter *w, uint64_t deadline,
		       struct vsched_block_result *res)
{
	struct vsched_block_result copy;
	int r;

	if (!w)
		return VSCHED_EINVAL;
	/* A result of this library's own layout is used in place: what the
	 * copy in and out would do to it (keep it, set its size to ours) is
	 * what the engine leaves, and no check can fail. */
	if (res && res->size == sizeof(*res)) {
		if ((r = waiter_allowed(w, VSCHED__C_WAITER_WAIT)))
			return r;
		return vsched__run_engine(&w->sl, &w->hooks, deadline, res);
	}
	if (res && vsched__result_in(&copy, res))
		return VSCHED_EINVAL;
	if ((r = waiter_allowed(w, VSCHED__C_WAITER_WAIT)))
		return r;
	r = vsched__run_engine(&w->sl, &w->hooks, deadline, res ? &copy : NULL);
	if (res)
		vsched__result_out(res, &copy);
	return r;
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
	int rc;

	if (!w)
		return VSCHED_EINVAL;
	if ((rc = waiter_allowed(w, VSCHED__C_WAITER_FD_ADD)))
		return rc;
	/* A thread inside a wait keeps its tables (waiter.h), also where the
	 * state says idle (its hooks, first look, accounting): the table
	 * change takes the engine's place as a second consumer would. */
	if (atomic_exchange_explicit(&w->sl.in_engine, true, memory_order_acquire))
		return VSCHED_ESTATE;
	rc = vsched__sleeper_fd_add(&w->sl, fd, events, tag);
	atomic_store_explicit(&w->sl.in_engine, false, memory_order_release);
	return rc;
}

int vsched_waiter_fd_del(struct vsched_waiter *w, int fd)
{
	int rc;

	if (!w)
		return VSCHED_EINVAL;
	if ((rc = waiter_allowed(w, VSCHED__C_WAITER_FD_DEL)))
		return rc;
	if (atomic_exchange_explicit(&w->sl.in_engine, true, memory_order_acquire))
		return VSCHED_ESTATE; /* as vsched_waiter_fd_add() */
	rc = vsched__sleeper_fd_del(&w->sl, fd);
	atomic_store_explicit(&w->sl.in_engine, false, memory_order_release);
	return rc;
}

int vsched_waiter_stats(const struct vsched_waiter *w,
			struct vsched_halt_stats *out)
{
	if (!w || !out)
		return VSCHED_EINVAL;
	vsched__sleeper_halt_stats(&w->sl, out);
	out->halt_wakeup = atomic_load_explicit(&w->wakeups, memory_order_relaxed);
	return 0;
}

int vsched_waiter_read_stats(const struct vsched_waiter *w,
			     struct vsched_waiter_stats *out)
{
	struct vsched_vcpu_stats rows;
	struct vsched_waiter_stats snap = { .size = sizeof(snap) };

	if (!w || !out)
		return VSCHED_EINVAL;
	vsched__sleeper_rows(&w->sl, &rows);
	snap.halt = rows.halt;
	snap.halt.halt_wakeup = atomic_load_explicit(&w->wakeups, memory_order_relaxed);
	snap.spurious_wakeups = rows.spurious_wakeups;
	snap.halt_poll_fd_checks = rows.halt_poll_fd_checks;
	snap.halt_poll_contended = rows.halt_poll_contended;
	/* The extensible-struct rule (lib/abi.h). */
	return vsched__struct_out(out, &snap, sizeof(snap));
}
