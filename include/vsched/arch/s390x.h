/* SPDX-License-Identifier: MIT */
/* s390x (IBM Z) backend. Strongly ordered: the only reordering other CPUs
 * can see is a store passed by a later load (the store buffer), so the
 * store-load fence of the Dekker pair is a serializing BRANCH ON CONDITION
 * with no target: bcr 14,0 (fast-BCR-serialization, z196 and later, no
 * checkpoint synchronization) or bcr 15,0 before z196, as the kernel's and
 * liburcu's mb(). The interlocked-access RMWs (laog, lao) are not a barrier
 * by themselves (the kernel follows them with bcr 14,0 in its _barrier
 * atomics): vsched__mb_after_rmw is the fill, vsched__mb(). Relax is the
 * fill too, a compiler barrier, like the kernel's cpu_relax() on s390. */
#ifndef VSCHED__ARCH_LAYER
#error "do not include <vsched/arch/s390x.h> directly; include <vsched/arch.h>"
#endif

#define VSCHED__ARCH_NAME "s390x"
/* Request table, timer, poll window, hooks: lib/arch/s390x/profile.c. */
#define VSCHED__ARCH_PROFILE vsched__profile_s390x

#define VSCHED__HAVE_MB 1
static inline void vsched__mb(void)
{
#if defined(__ARCH__) && __ARCH__ >= 9 /* z196: fast-BCR-serialization */
	__asm__ __volatile__("bcr 14,0" ::: "memory");
#else
	__asm__ __volatile__("bcr 15,0" ::: "memory");
#endif
}

/* The TOD clock, read with STORE CLOCK FAST (no wait for a unique value):
 * bit 51 is one microsecond, so it counts 4096 per microsecond. */
#define VSCHED__HAVE_TIMEBASE 1
static inline uint64_t vsched__timebase(void)
{
	uint64_t v;
	__asm__ __volatile__("stckf %0" : "=Q"(v) : : "cc", "memory");
	return v;
}
#define VSCHED__HAVE_TIMEBASE_FREQ 1
static inline uint64_t vsched__timebase_freq_hw(void)
{
	return 4096000000u; /* 2^12 per microsecond, architected */
}
