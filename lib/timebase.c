/* SPDX-License-Identifier: MIT */
/* The arch timebase's frequency: the architecture's own figure where it has
 * one (arm64 CNTFRQ, power's device tree), else calibrated once against
 * CLOCK_MONOTONIC (x86's TSC, or an emulator that does not report one). */
#include <stdatomic.h>
#include <time.h>

#include "internal.h"

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t vsched__timebase_freq(void)
{
	static _Atomic uint64_t cached;
	uint64_t f = atomic_load_explicit(&cached, memory_order_relaxed);

	if (f)
		return f;
	f = vsched__timebase_freq_hw();
	if (!f) {
		/* 20 ms against the clock, each timebase read bracketed by two
		 * clock reads and placed at their midpoint, so that a slow
		 * clock read (an emulator, valgrind) does not skew it. */
		uint64_t a0 = mono(), t0 = vsched__timebase(), b0 = mono(), a1, t1, b1;
		do
			a1 = mono();
		while (a1 - a0 < 20000000);
		t1 = vsched__timebase();
		b1 = mono();
		f = (uint64_t)((double)(t1 - t0) * 2e9 / (double)((a1 + b1) - (a0 + b0)));
	}
	atomic_store_explicit(&cached, f, memory_order_relaxed);
	return f;
}
