/* SPDX-License-Identifier: MIT */
/* Generic backend: C11 atomics only, so that sanitizers (TSan) understand
 * every fence, and any processor with a C11 compiler works. */
#ifndef VSCHED__ARCH_DISPATCH
#error "do not include arch/generic/arch.h directly; include arch/arch.h"
#endif

#include <stdatomic.h>

#define VSCHED__ARCH_NAME "generic"

static inline void vsched__relax(void)
{
	atomic_signal_fence(memory_order_seq_cst);
}

#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer does not model standalone fences (gcc warns -Wtsan): a
 * seq_cst RMW on a shared dummy is a full barrier it understands. */
static _Atomic int vsched__tsan_fence;
static inline void vsched__mb(void)
{
	atomic_fetch_add_explicit(&vsched__tsan_fence, 0, memory_order_seq_cst);
}
#else
static inline void vsched__mb(void)
{
	atomic_thread_fence(memory_order_seq_cst);
}
#endif

static inline void vsched__mb_after_rmw(void)
{
	vsched__mb();
}

#include "fill.h"
