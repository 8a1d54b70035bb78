/* SPDX-License-Identifier: MIT */
/* ppc64le backend. Power orders little by itself: the store-load fence of
 * the Dekker pair is a full sync (lwsync does not order store->load). */
#ifndef VSCHED__ARCH_LAYER
#error "do not include <vsched/arch/ppc64le.h> directly; include <vsched/arch.h>"
#endif

#define VSCHED__ARCH_NAME "ppc64le"
/* Request table, timer, poll window, hooks: lib/arch/ppc64/profile.c. */
#define VSCHED__ARCH_PROFILE vsched__profile_ppc64le

#define VSCHED__HAVE_RELAX 1
static inline void vsched__relax(void)
{
	/* low, then back to medium hardware-thread priority */
	__asm__ __volatile__("or 1,1,1; or 2,2,2" ::: "memory");
}

/* Also the barrier after an RMW (the fill of vsched__mb_after_rmw). */
#define VSCHED__HAVE_MB 1
static inline void vsched__mb(void)
{
	__asm__ __volatile__("sync" ::: "memory");
}

#define VSCHED__HAVE_TIMEBASE 1
static inline uint64_t vsched__timebase(void)
{
	uint64_t v;
	__asm__ __volatile__("mftb %0" : "=r"(v) : : "memory");
	return v;
}
/* The timebase frequency comes from the device tree (glibc's
 * __ppc_get_timebase_freq); lib/timebase.c asks it, else calibrates. A
 * hidden helper of libvsched: only in the library's own build, so that a
 * consumer that keeps every inline function still links (the fill). */
#if defined(VSCHED__LIBRARY_BUILD)
uint64_t vsched__ppc_timebase_freq(void);
#define VSCHED__HAVE_TIMEBASE_FREQ 1
static inline uint64_t vsched__timebase_freq_hw(void)
{
	return vsched__ppc_timebase_freq();
}
#endif

#define VSCHED__HAVE_IDLE_HINT 1
static inline void vsched__idle_hint(void)
{
	__asm__ __volatile__("or 1,1,1" ::: "memory"); /* low priority */
}
