/* SPDX-License-Identifier: MIT */
/* x86-64: run-time detection of a user-mode wait-for-event: WAITPKG
 * (umonitor/umwait, CPUID.7.0:ECX[5]) or MONITORX (monitorx/mwaitx,
 * CPUID.80000001h:ECX[29]). */
#include <cpuid.h>
#include <stdatomic.h>

#include "../arch.h"

int vsched__x86_wfe_kind(void)
{
	static _Atomic int cached = -1;
	int v = atomic_load_explicit(&cached, memory_order_relaxed);
	if (v < 0) {
		unsigned a, b, c, d;
		v = VSCHED__X86_WFE_NONE;
		if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 5)))
			v = VSCHED__X86_WFE_UMWAIT;
		else if (__get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 29)))
			v = VSCHED__X86_WFE_MWAITX;
		atomic_store_explicit(&cached, v, memory_order_relaxed);
	}
	return v;
}
