/* SPDX-License-Identifier: MIT */
/* Generic backend: C11 atomics only, so that sanitizers (TSan) understand
 * every fence, and any processor with a C11 compiler works. */
#ifndef VSCHED__ARCH_DISPATCH
#error "do not include arch/generic/arch.h directly; include arch/arch.h"
#endif

#include <stdatomic.h>

/* KVM's x86 default: the generic backend has no profile of its own. */
#define VSCHED__ARCH_POLL_MAX_NS 200000u

#define VSCHED__ARCH_NAME "generic"

static inline void vsched__relax(void)
{
	atomic_signal_fence(memory_order_seq_cst);
}

static inline void vsched__mb(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}

static inline void vsched__mb_after_rmw(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}
