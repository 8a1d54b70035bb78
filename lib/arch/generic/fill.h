/* SPDX-License-Identifier: MIT */
/* Fills what an arch header left out (included last by each of them). */
#ifndef VSCHED__ARCH_DISPATCH
#error "do not include arch/generic/fill.h directly; include arch/arch.h"
#endif

#include <stdatomic.h>
#include <time.h>

#ifndef VSCHED__HAVE_TIMEBASE
/* CLOCK_MONOTONIC in ns: the vDSO, no syscall. */
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

#ifndef VSCHED__ARCH_PROFILE
/* x86-64's: the backends without a profile of their own (generic). */
#define VSCHED__ARCH_PROFILE vsched__profile_x86_64
#endif
