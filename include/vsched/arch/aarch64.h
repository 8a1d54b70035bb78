/* SPDX-License-Identifier: MIT */
/* arm64 backend. Weakly ordered: an atomic RMW (even seq_cst, LDAXR/STLXR
 * or LDADDAL) followed by a plain load can be satisfied before the RMW's
 * store is visible, so the Dekker pair needs DMB ISH after the RMW. */
#ifndef VSCHED__ARCH_LAYER
#error "do not include <vsched/arch/aarch64.h> directly; include <vsched/arch.h>"
#endif

#define VSCHED__ARCH_NAME "aarch64"
/* Request table, timer, poll window, hooks: lib/arch/aarch64/profile.c. */
#define VSCHED__ARCH_PROFILE vsched__profile_aarch64

#define VSCHED__HAVE_RELAX 1
static inline void vsched__relax(void)
{
	__asm__ __volatile__("yield" ::: "memory");
}

/* Also the barrier after an RMW (the fill of vsched__mb_after_rmw). */
#define VSCHED__HAVE_MB 1
static inline void vsched__mb(void)
{
	__asm__ __volatile__("dmb ish" ::: "memory");
}

#define VSCHED__HAVE_TIMEBASE 1
static inline uint64_t vsched__timebase(void)
{
	uint64_t v;
	__asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
}
#define VSCHED__HAVE_TIMEBASE_FREQ 1
static inline uint64_t vsched__timebase_freq_hw(void)
{
	uint64_t f;
	__asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(f));
	return f;
}

/* WFE: arm the exclusive monitor on the line (LDAXR), then wait for an
 * event; a store to the line, or the kernel's event stream (~10 kHz),
 * ends the wait. */
#define VSCHED__HAVE_WFE 1
static inline void vsched__wait_event(const void *p, uint64_t v)
{
	uint64_t cur;
	__asm__ __volatile__("ldaxr %0, [%1]" : "=&r"(cur) : "r"(p) : "memory");
	if (cur == v)
		__asm__ __volatile__("wfe" ::: "memory");
}
