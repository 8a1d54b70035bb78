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
		/* 5 ms against the clock: 0.1% at worst with a 1 us clock jitter. */
		uint64_t c0 = mono(), t0 = vsched__timebase(), c1, t1;
		do
			c1 = mono();
		while (c1 - c0 < 5000000);
		t1 = vsched__timebase();
		f = (uint64_t)((double)(t1 - t0) * 1e9 / (double)(c1 - c0));
	}
	atomic_store_explicit(&cached, f, memory_order_relaxed);
	return f;
}
