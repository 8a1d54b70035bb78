/* SPDX-License-Identifier: MIT */
/*
 * overshoot: how late timed sleeps return (issue 15 item 8), on the futex
 * and the epoll path, against clock_nanosleep. Text only (--json is refused),
 * not in `all`.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static void report_overshoot(const char *name, uint64_t *late, int n,
			     uint64_t cpu_ns)
{
	qsort(late, (size_t)n, sizeof(*late), cmp_u64);
	printf("overshoot %-28s median %7.1f us  p99 %7.1f us  max %7.1f us  "
	       "cpu %5.1f us/sleep\n",
	       name, late[n / 2] / 1e3, late[p99_index(n)] / 1e3,
	       late[n - 1] / 1e3, (double)cpu_ns / n / 1e3);
}

/* Sleeps of `sleep_ns` each, on a deadline; how long after the deadline
 * each returns. The baseline is clock_nanosleep(TIMER_ABSTIME) with the
 * thread's own timer slack, in the same run. Never a test: timing. */
static int run_overshoot(void)
{
	const int n = opt_quick ? 100 : 1000;
	const uint64_t sleep_ns = 200000;
	uint64_t *late = calloc((size_t)n, sizeof(*late));
	struct vsched_vm_config cfg = { .size = sizeof(cfg) };
	struct vsched_poll_params none;
	struct vsched_vm *vm;
	struct vsched_vcpu *fv, *ev;
	int efd;

	if (opt_json) {
		/* Its figures are quantiles of lateness, not ratios: no line of
		 * the JSON shape (timedwait has the JSON of timed waits). */
		fprintf(stderr, "overshoot: text only (no --json); timedwait reports "
			"overshoot in JSON\n");
		return 2;
	}
	vsched_poll_defaults(VSCHED_POLL_NONE, 0, &none);
	cfg.poll = &none;
	if (!late || vsched_vm_create(&cfg, &vm) || vsched_request_finalize(vm, 0) ||
	    vsched_vcpu_create(vm, 0, NULL, &fv) || vsched_vcpu_create(vm, 1, NULL, &ev))
		abort();
	efd = eventfd(0, EFD_NONBLOCK);
	if (efd < 0 || vsched_vcpu_fd_add(ev, efd, EPOLLIN, 1))
		abort();
	printf("overshoot: %d sleeps of %llu us each, thread timer slack %d ns\n",
	       n, (unsigned long long)(sleep_ns / 1000), prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0));
	for (int path = 0; path < 3; path++) {
		uint64_t cpu0 = thread_cpu_ns();
		for (int i = 0; i < n; i++) {
			uint64_t dl = now_ns() + sleep_ns, t;
			if (path == 0) {
				struct timespec ts = { .tv_sec = (time_t)(dl / 1000000000u),
						       .tv_nsec = (long)(dl % 1000000000u) };
				while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
					;
			} else if (vsched_vcpu_block(path == 1 ? fv : ev, dl) !=
				   VSCHED_WAKE_DEADLINE) {
				abort();
			}
			t = now_ns();
			late[i] = t > dl ? t - dl : 0;
		}
		report_overshoot(path == 0 ? "clock_nanosleep (baseline)"
			       : path == 1 ? "vsched futex path"
					   : "vsched epoll path (timerfd)",
				 late, n, thread_cpu_ns() - cpu0);
	}
	vsched_vm_destroy(vm);
	close(efd);
	free(late);
	return 0;
}

const struct bench bench_overshoot = {
	.name = "overshoot",
	.desc = "how late timed sleeps return, against clock_nanosleep",
	.run = run_overshoot,
	.in_all = false,
};
