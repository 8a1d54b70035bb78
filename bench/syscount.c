/* SPDX-License-Identifier: MIT */
/*
 * Per-thread syscall counts (bench.h: syscalls_now()). vsched-bench defines
 * the libc wrappers that waits and notifications go through; the dynamic
 * linker binds libvsched's calls to these too (a symbol that a linked
 * shared library references is exported from the executable), so vsched's
 * own epoll_pwait, timerfd_settime, eventfd read/write and futex (through
 * syscall()) are counted as the baselines' are, and so are its
 * sched_yield() and its reads of a CPU-time clock (clock_gettime of
 * CLOCK_THREAD_CPUTIME_ID and the like, which the vDSO never serves: the
 * engine times sampled sleeps with two of them, three on a sleeper's
 * first 16 samples; CLOCK_MONOTONIC reads stay in the vDSO and are not
 * counted). Each counts, then calls the next definition (dlsym
 * RTLD_NEXT: libc's, or a sanitizer runtime's interceptor, which then
 * calls libc's), about a nanosecond more.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static __thread uint64_t nsys;

uint64_t syscalls_now(void)
{
	return nsys;
}

/* The next definition of `name`, looked up once per wrapper (threads may
 * race to store the same pointer). */
static void *next_fn(_Atomic(void *) *slot, const char *name)
{
	void *f = atomic_load_explicit(slot, memory_order_relaxed);
	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		if (!f)
			abort();
		atomic_store_explicit(slot, f, memory_order_relaxed);
	}
	return f;
}

/* In a wrapper of `name` whose type is name_fn: next_name, the next one. */
#define NEXT(name)                                    \
	static _Atomic(void *) slot_##name;           \
	name##_fn next_##name = (name##_fn)next_fn(&slot_##name, #name)

typedef long (*syscall_fn)(long, ...);
typedef int (*epoll_pwait_fn)(int, struct epoll_event *, int, int, const sigset_t *);
typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);
typedef ssize_t (*read_fn)(int, void *, size_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef int (*timerfd_settime_fn)(int, int, const struct itimerspec *, struct itimerspec *);
typedef int (*clock_nanosleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);
typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);
typedef int (*sched_yield_fn)(void);

/* syscall() itself (the library's futex calls go through it): six
 * arguments passed on, as libc's reads them. */
long syscall(long nr, ...)
{
	NEXT(syscall);
	va_list ap;
	long a[6];

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	nsys++;
	return next_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int maxevents, int timeout,
		const sigset_t *sigmask)
{
	NEXT(epoll_pwait);
	nsys++;
	return next_epoll_pwait(epfd, ev, maxevents, timeout, sigmask);
}

int epoll_wait(int epfd, struct epoll_event *ev, int maxevents, int timeout)
{
	NEXT(epoll_wait);
	nsys++;
	return next_epoll_wait(epfd, ev, maxevents, timeout);
}

ssize_t read(int fd, void *buf, size_t n)
{
	NEXT(read);
	nsys++;
	return next_read(fd, buf, n);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	NEXT(write);
	nsys++;
	return next_write(fd, buf, n);
}

int timerfd_settime(int fd, int flags, const struct itimerspec *new,
		    struct itimerspec *old)
{
	NEXT(timerfd_settime);
	nsys++;
	return next_timerfd_settime(fd, flags, new, old);
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
		    struct timespec *rem)
{
	NEXT(clock_nanosleep);
	nsys++;
	return next_clock_nanosleep(clock, flags, req, rem);
}

/* A clock the kernel reads in a syscall: the CPU-time ones (process,
 * thread, and the negative ids of clock_getcpuclockid() and
 * pthread_getcpuclockid()); the vDSO serves the others. */
int clock_gettime(clockid_t clock, struct timespec *ts)
{
	NEXT(clock_gettime);
	if (clock == CLOCK_PROCESS_CPUTIME_ID || clock == CLOCK_THREAD_CPUTIME_ID ||
	    clock < 0)
		nsys++;
	return next_clock_gettime(clock, ts);
}

int sched_yield(void)
{
	NEXT(sched_yield);
	nsys++;
	return next_sched_yield();
}
