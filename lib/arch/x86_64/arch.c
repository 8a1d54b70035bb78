/* SPDX-License-Identifier: MIT */
/* x86-64: run-time detection of WAITPKG (umonitor/umwait). */
#include <cpuid.h>
#include <stdatomic.h>

#include "../arch.h"

int vsched__x86_has_waitpkg(void)
{
	static _Atomic int cached = -1;
	int v = atomic_load_explicit(&cached, memory_order_relaxed);
	if (v < 0) {
		unsigned a, b, c, d;
		v = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 5));
		atomic_store_explicit(&cached, v, memory_order_relaxed);
	}
	return v;
}
