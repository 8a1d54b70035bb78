/* SPDX-License-Identifier: MIT */
#include "internal.h"

static bool pending(const struct vsched_vcpu *v)
{
	return atomic_load_explicit(&v->pending, memory_order_relaxed) != 0;
}

/* Poll until a request, `end`, or the deadline. Mode POLLING tells posters
 * that no kick or wakeup is needed; the loop only reads. */
static bool poll_window(struct vsched_vcpu *v, uint32_t m, uint64_t end)
{
	const struct vsched_host_ops *ops = &v->vm->ops;
	bool won = false;

	atomic_store_explicit(&v->mode,
			      (m & VSCHED__GEN_MASK) | VSCHED_MODE_POLLING,
			      memory_order_relaxed);
	for (unsigned i = 1;; i++) {
		if (pending(v)) {
			won = true;
			break;
		}
		vsched__relax();
		if ((i & 31) == 0 && ops->now_ns(ops->ctx) >= end)
			break;
	}
	/* Posters never write a POLLING word, so a plain store suffices. */
	atomic_store_explicit(&v->mode,
			      (m & VSCHED__GEN_MASK) | VSCHED_MODE_OUTSIDE_GUEST,
			      memory_order_relaxed);
	return won;
}

int vsched_vcpu_block(struct vsched_vcpu *v, uint64_t deadline)
{
	const struct vsched_host_ops *ops;
	uint32_t m, blocked;
	uint64_t now;

	if (!v)
		return VSCHED_EINVAL;
	m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	if (vsched__mode_of(m) == VSCHED_MODE_DESTROYED)
		return VSCHED_ESHUTDOWN;
	if (vsched__mode_of(m) != VSCHED_MODE_OUTSIDE_GUEST)
		return VSCHED_ESTATE;
	if (pending(v))
		return VSCHED_WAKE_REQUEST;
	ops = &v->vm->ops;
	now = ops->now_ns(ops->ctx);
	if (deadline <= now)
		return VSCHED_WAKE_DEADLINE;
	if (v->vm->poll_ns) {
		uint64_t end = now + v->vm->poll_ns;
		if (end < now || end > deadline)
			end = deadline;
		if (poll_window(v, m, end))
			return VSCHED_WAKE_REQUEST;
		if (end == deadline)
			return VSCHED_WAKE_DEADLINE;
	}

	/* Dekker, vCPU side: publish BLOCKED, full barrier, re-check. Pairs
	 * with vsched_post(), which moves BLOCKED to OUTSIDE_GUEST and wakes. */
	blocked = (m & VSCHED__GEN_MASK) | VSCHED_MODE_BLOCKED;
	atomic_exchange_explicit(&v->mode, blocked, memory_order_seq_cst);
	vsched__mb_after_rmw();
	if (pending(v)) {
		vsched__mode_leave(v, VSCHED_MODE_OUTSIDE_GUEST);
		return VSCHED_WAKE_REQUEST;
	}
	for (;;) {
		int rc = ops->wait((uint32_t *)&v->mode, blocked, deadline,
				   ops->ctx);
		uint32_t old;

		if (atomic_load_explicit(&v->mode, memory_order_acquire) != blocked)
			return VSCHED_WAKE_REQUEST; /* a poster woke us */
		if (rc == -EINTR || ops->now_ns(ops->ctx) >= deadline) {
			old = vsched__mode_leave(v, VSCHED_MODE_OUTSIDE_GUEST);
			if (old != blocked)
				return VSCHED_WAKE_REQUEST; /* raced a poster */
			return rc == -EINTR ? VSCHED_WAKE_SIGNAL
					    : VSCHED_WAKE_DEADLINE;
		}
		vsched__count(&v->vs.spurious_wakeups);
	}
}
