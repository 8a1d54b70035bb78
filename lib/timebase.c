/* SPDX-License-Identifier: MIT */
/* The arch timebase's frequency: the architecture's own figure where it has
 * one (arm64 CNTFRQ, power's device tree), else calibrated once against
 * CLOCK_MONOTONIC (x86's TSC, or an emulator that does not report one).
 * Not part of libvsched, which converts no timebase: test_arch builds it
 * to check each backend's timebase. */
#include <stdatomic.h>
#include <time.h>

#include "internal.h"

static uint64_t mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#define BRACKETS 8

/* A timebase read between two clock reads. */
struct bracket {
	uint64_t before, tb, after;
};

static struct bracket tightest(void)
{
	struct bracket best = { 0, 0, UINT64_MAX };

	for (int i = 0; i < BRACKETS; i++) {
		struct bracket b;
		b.before = mono();
		b.tb = vsched__timebase();
		b.after = mono();
		if (b.after - b.before < best.after - best.before)
			best = b;
	}
	return best;
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
		 * clock reads and placed at their midpoint; of BRACKETS tries
		 * at each end the tightest bracket is kept, so that a thread
		 * preempted between two reads (a busy host, valgrind) does not
		 * skew it. */
		struct bracket b0 = tightest(), b1;
		uint64_t a1;
		do
			a1 = mono();
		while (a1 - b0.before < 20000000);
		b1 = tightest();
		f = (uint64_t)((double)(b1.tb - b0.tb) * 2e9 /
			       (double)((b1.before + b1.after) - (b0.before + b0.after)));
	}
	atomic_store_explicit(&cached, f, memory_order_relaxed);
	return f;
}
