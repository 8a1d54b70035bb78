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

/* The TOD clock. Its 64 bits (bit 51 one microsecond) wrap on 2042-09-17
 * (epoch 1900), and STORE CLOCK FAST stores only those: a "monotonic"
 * counter that goes back to 0. STORE CLOCK EXTENDED stores the epoch index
 * first (byte 0: it counts the wraps, multiple-epoch facility, z14), then
 * the TOD bits: its first 8 bytes, epoch index and TOD bits 0-55, are a
 * counter that does not wrap for 2^8 epochs, at 2^4 per microsecond. */
#define VSCHED__HAVE_TIMEBASE 1
static inline uint64_t vsched__timebase(void)
{
	unsigned char clk[16];
	uint64_t v;
	__asm__ __volatile__("stcke %0" : "=Q"(clk) : : "cc", "memory");
	__builtin_memcpy(&v, clk, sizeof(v)); /* big-endian: byte 0 on top */
	return v;
}
#define VSCHED__HAVE_TIMEBASE_FREQ 1
static inline uint64_t vsched__timebase_freq_hw(void)
{
	return 16000000u; /* 2^4 per microsecond (TOD bit 55), architected */
}
