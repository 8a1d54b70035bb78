/* SPDX-License-Identifier: MIT */
/* Default wait/wake/clock: futex on the vCPU's mode word and
 * CLOCK_MONOTONIC. These are the only syscalls the wait paths make. */
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/timerfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

uint64_t vsched__clock_now(void *ctx)
{
	struct timespec ts;
	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int vsched__futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns,
		       void *ctx)
{
	struct timespec ts, *tsp = NULL;
	(void)ctx;
	if (deadline_ns != VSCHED_DEADLINE_NONE) {
		ts.tv_sec = (time_t)(deadline_ns / 1000000000u);
		ts.tv_nsec = (long)(deadline_ns % 1000000000u);
		tsp = &ts;
	}
	/* WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline. */
	long r = syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG,
			 expected, tsp, NULL, FUTEX_BITSET_MATCH_ANY);
	if (r == 0 || errno == EAGAIN)
		return 0;
	return -errno;
}

void vsched__futex_wake(uint32_t *word, void *ctx)
{
	(void)ctx;
	syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, INT_MAX, NULL,
		NULL, 0);
}

void vsched__timerfd_at(int fd, uint64_t deadline_ns)
{
	struct itimerspec its = { 0 };

	/* An absolute CLOCK_MONOTONIC deadline; none disarms. A zero value
	 * would disarm too, so the earliest deadline is 1 ns. */
	if (deadline_ns != VSCHED_DEADLINE_NONE) {
		its.it_value.tv_sec = (time_t)(deadline_ns / 1000000000u);
		its.it_value.tv_nsec = (long)(deadline_ns % 1000000000u);
		if (!its.it_value.tv_sec && !its.it_value.tv_nsec)
			its.it_value.tv_nsec = 1;
	}
	timerfd_settime(fd, TFD_TIMER_ABSTIME, &its, NULL);
}
