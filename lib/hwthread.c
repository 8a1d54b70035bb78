/* SPDX-License-Identifier: MIT */
/* Hardware-thread state words with the skip-store-and-fence wakeup. */
#include "internal.h"

int vsched_hwthread_enter(struct vsched_hwthread *t, unsigned state)
{
	if (!t || state > VSCHED_HWTHREAD_IN_GUEST)
		return VSCHED_EINVAL;
	__atomic_store_n(&t->state, state, __ATOMIC_RELAXED);
	vsched__mb(); /* pairs with the waker's barrier before it reads */
	return 0;
}

int vsched_hwthread_wakeup(struct vsched_hwthread *t)
{
	if (!t)
		return VSCHED_EINVAL;
	if (__atomic_load_n(&t->state, __ATOMIC_RELAXED) == VSCHED_HWTHREAD_IN_KERNEL) {
		__atomic_store_n(&t->skips, t->skips + 1, __ATOMIC_RELAXED);
		return 1;
	}
	__atomic_store_n(&t->state, VSCHED_HWTHREAD_IN_KERNEL, __ATOMIC_RELAXED);
	vsched__mb();
	__atomic_store_n(&t->stores, t->stores + 1, __ATOMIC_RELAXED);
	return 0;
}

int vsched_hwthread_state(const struct vsched_hwthread *t)
{
	uint32_t s;

	if (!t)
		return VSCHED_EINVAL;
	/* A word no call of ours wrote (not zero-initialised, or overwritten)
	 * is not a state a waker can act on. */
	s = __atomic_load_n(&t->state, __ATOMIC_RELAXED);
	return s <= VSCHED_HWTHREAD_IN_GUEST ? (int)s : VSCHED_EINVAL;
}
