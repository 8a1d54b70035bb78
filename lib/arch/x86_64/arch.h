/* SPDX-License-Identifier: MIT */
/* x86-64 backend. TSO: only store->load needs a fence, and every locked
 * instruction is one, so a locked add to the stack is the store-load fence
 * (cheaper than mfence) and an RMW needs nothing after it. */
#ifndef VSCHED__ARCH_DISPATCH
#error "do not include arch/x86_64/arch.h directly; include arch/arch.h"
#endif

/* KVM's default halt_poll_ns on x86. */
#define VSCHED__ARCH_POLL_MAX_NS 200000u

#define VSCHED__ARCH_NAME "x86_64"

static inline void vsched__relax(void)
{
	__asm__ __volatile__("pause" ::: "memory");
}

static inline void vsched__mb(void)
{
	__asm__ __volatile__("lock; addl $0,-4(%%rsp)" ::: "memory", "cc");
}

static inline void vsched__mb_after_rmw(void)
{
	/* The locked RMW before this already ordered everything; stop only
	 * the compiler. */
	__asm__ __volatile__("" ::: "memory");
}
