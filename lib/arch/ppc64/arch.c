/* SPDX-License-Identifier: MIT */
/* ppc64le: the timebase frequency, from glibc (device tree / vDSO). */
#include <stdint.h>
#include <sys/platform/ppc.h>

#include "../arch.h"

uint64_t vsched__ppc_timebase_freq(void)
{
	return __ppc_get_timebase_freq();
}
