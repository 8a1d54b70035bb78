/* SPDX-License-Identifier: MIT */
/* x86-64 backend. TSO: only store->load needs a fence, and every locked
 * instruction is one, so a locked add to the stack is the store-load fence
 * (cheaper than mfence) and an RMW needs nothing after it. */
#ifndef VSCHED__ARCH_LAYER
#error "do not include <vsched/arch/x86_64.h> directly; include <vsched/arch.h>"
#endif

#define VSCHED__ARCH_NAME "x86_64"
/* Request table, timer, poll window, hooks: lib/arch/x86_64/profile.c. */
#define VSCHED__ARCH_PROFILE vsched__profile_x86_64

#define VSCHED__HAVE_RELAX 1
static inline void vsched__relax(void)
{
	__asm__ __volatile__("pause" ::: "memory");
}

#define VSCHED__HAVE_MB 1
static inline void vsched__mb(void)
{
	__asm__ __volatile__("lock; addl $0,-4(%%rsp)" ::: "memory", "cc");
}

#define VSCHED__HAVE_MB_AFTER_RMW 1
static inline void vsched__mb_after_rmw(void)
{
	/* The locked RMW before this already ordered everything; stop only
	 * the compiler. Not an empty asm: GCC takes every x86 asm to clobber
	 * the flags, so the RMW's carry (a post's `lock bts`, tested for the
	 * old bit) could not be branched on and was copied out with setb,
	 * movzbl and test (3 instructions more per inline post). */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

#define VSCHED__HAVE_TIMEBASE 1
static inline uint64_t vsched__timebase(void)
{
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
/* The TSC rate is not architecturally readable everywhere: no
 * VSCHED__HAVE_TIMEBASE_FREQ, lib/timebase.c calibrates. */

/* Wait-for-event: Intel's umonitor/umwait (WAITPKG) or AMD's
 * monitorx/mwaitx (MONITORX), detected at run time (lib/arch/x86_64/arch.c);
 * both are bounded by a TSC deadline (~20,000 ticks). Else a pause. It
 * calls a hidden helper of libvsched: only the library's own build
 * (VSCHED__LIBRARY_BUILD) has it, so that a consumer that keeps every
 * inline function (-fkeep-inline-functions) still links; it gets the fill. */
#if defined(VSCHED__LIBRARY_BUILD)
#define VSCHED__HAVE_WFE 1
enum { VSCHED__X86_WFE_NONE = 0, VSCHED__X86_WFE_UMWAIT = 1, VSCHED__X86_WFE_MWAITX = 2 };
int vsched__x86_wfe_kind(void);
static inline void vsched__wait_event(const void *p, uint64_t v)
{
	switch (vsched__x86_wfe_kind()) {
	case VSCHED__X86_WFE_UMWAIT: {
		uint64_t deadline = vsched__timebase() + 20000;
		__asm__ __volatile__(".byte 0xf3, 0x0f, 0xae, 0xf0" /* umonitor %rax */
				     : : "a"(p) : "memory");
		if (*(const volatile uint64_t *)p == v)
			__asm__ __volatile__(".byte 0xf2, 0x0f, 0xae, 0xf1" /* umwait %ecx */
					     : : "c"(0), "d"((uint32_t)(deadline >> 32)),
					       "a"((uint32_t)deadline)
					     : "memory", "cc");
		break;
	}
	case VSCHED__X86_WFE_MWAITX:
		__asm__ __volatile__(".byte 0x0f, 0x01, 0xfa" /* monitorx %rax, %ecx, %edx */
				     : : "a"(p), "c"(0), "d"(0) : "memory");
		if (*(const volatile uint64_t *)p == v)
			__asm__ __volatile__(".byte 0x0f, 0x01, 0xfb" /* mwaitx %eax, %ecx, %ebx */
					     : : "a"(0xf0), "c"(2), "b"(20000) : "memory");
		break;
	default:
		vsched__relax();
	}
}
#endif /* VSCHED__LIBRARY_BUILD */
