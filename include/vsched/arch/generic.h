/* SPDX-License-Identifier: MIT */
/* The fills: every primitive of <vsched/arch.h> an arch header did not
 * write, from GCC's __atomic builtins and CLOCK_MONOTONIC only, so that
 * sanitizers (TSan) understand every fence and any processor with GCC or
 * Clang works. Included last by <vsched/arch.h>. */
#ifndef VSCHED__ARCH_LAYER
#error "do not include <vsched/arch/generic.h> directly; include <vsched/arch.h>"
#endif

#ifndef VSCHED__ARCH_NAME
#define VSCHED__ARCH_NAME "generic"
#define VSCHED__ARCH_IS_GENERIC 1
#endif
#ifndef VSCHED__ARCH_IS_GENERIC
#define VSCHED__ARCH_IS_GENERIC 0
#endif

#ifndef VSCHED__ARCH_PROFILE
/* x86-64's: the backends without a profile of their own (generic). */
#define VSCHED__ARCH_PROFILE vsched__profile_x86_64
#endif

#ifndef VSCHED__HAVE_RELAX
/* A compiler barrier: the loop re-reads memory (s390's cpu_relax too). */
static inline void vsched__relax(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}
#endif

#ifndef VSCHED__HAVE_MB
#if defined(__SANITIZE_THREAD__)
/* ThreadSanitizer does not model standalone fences (gcc warns -Wtsan): a
 * seq_cst RMW on a shared dummy is a full barrier it understands. */
static int vsched__tsan_fence;
static inline void vsched__mb(void)
{
	__atomic_fetch_add(&vsched__tsan_fence, 0, __ATOMIC_SEQ_CST);
}
#else
static inline void vsched__mb(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}
#endif
#endif

#ifndef VSCHED__HAVE_MB_AFTER_RMW
/* An RMW is not a full barrier unless the arch says so. */
static inline void vsched__mb_after_rmw(void)
{
	vsched__mb();
}
#endif

#ifndef VSCHED__MB_AFTER_RMW_ON
#if !VSCHED__ARCH_IS_GENERIC || !defined(__SANITIZE_THREAD__)
#define VSCHED__MB_AFTER_RMW_ON(word) ((void)(word), vsched__mb_after_rmw())
#else
/* TSan: a seq_cst RMW on the word just written. */
#define VSCHED__MB_AFTER_RMW_ON(word) ((void)__atomic_fetch_or((word), 0, __ATOMIC_SEQ_CST))
#endif
#endif

/* CLOCK_MONOTONIC in ns: the vDSO, no syscall. POSIX: a consumer built as
 * strict ISO C (-std=c11) goes without it, as only the library reads the
 * timebase. */
#if !defined(VSCHED__HAVE_TIMEBASE) && defined(CLOCK_MONOTONIC)
#define VSCHED__HAVE_TIMEBASE 1
#define VSCHED__HAVE_TIMEBASE_FREQ 1
static inline uint64_t vsched__timebase(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
static inline uint64_t vsched__timebase_freq_hw(void)
{
	return 1000000000u;
}
#endif

#ifndef VSCHED__HAVE_TIMEBASE_FREQ
/* An arch counter of unstated rate: lib/timebase.c calibrates it. */
static inline uint64_t vsched__timebase_freq_hw(void)
{
	return 0;
}
#endif

#ifndef VSCHED__HAVE_IDLE_HINT
static inline void vsched__idle_hint(void)
{
	vsched__relax();
}
#endif

#ifndef VSCHED__HAVE_WFE
#define VSCHED__HAVE_WFE 0
static inline void vsched__wait_event(const void *p, uint64_t v)
{
	(void)p;
	(void)v;
	vsched__relax();
}
#endif
