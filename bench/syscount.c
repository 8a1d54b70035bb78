/* SPDX-License-Identifier: MIT */
/*
 * Per-thread syscall counts (bench.h: syscalls_now()). vsched-bench defines
 * the libc wrappers that waits and notifications go through; the dynamic
 * linker binds libvsched's calls to these too (a symbol that a linked
 * shared library references is exported from the executable), so vsched's
 * own epoll_pwait, timerfd_settime and eventfd read/write are counted as
 * the baselines' are, and so is syscall() (the futex). Each issues the raw
 * syscall through libc's syscall(), as the wrapper would, after one
 * thread-local increment (about a nanosecond).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

static __thread uint64_t nsys;

uint64_t syscalls_now(void)
{
	return nsys;
}

typedef long (*syscall_fn)(long, ...);
static _Atomic(syscall_fn) real_syscall_fn;

/* libc's syscall(), found once (any thread may race to store the same
 * pointer). */
static syscall_fn real_syscall(void)
{
	syscall_fn f = atomic_load_explicit(&real_syscall_fn, memory_order_relaxed);
	if (!f) {
		f = (syscall_fn)dlsym(RTLD_NEXT, "syscall");
		atomic_store_explicit(&real_syscall_fn, f, memory_order_relaxed);
	}
	return f;
}

/* syscall() itself (the library's futex calls go through it): six
 * arguments passed on, as libc's reads them. */
long syscall(long nr, ...)
{
	va_list ap;
	long a[6];

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	nsys++;
	return real_syscall()(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int maxevents, int timeout,
		const sigset_t *sigmask)
{
	nsys++;
	return (int)real_syscall()(SYS_epoll_pwait, epfd, ev, maxevents, timeout, sigmask,
			    _NSIG / 8);
}

int epoll_wait(int epfd, struct epoll_event *ev, int maxevents, int timeout)
{
	nsys++;
	return (int)real_syscall()(SYS_epoll_pwait, epfd, ev, maxevents, timeout, NULL,
			    _NSIG / 8);
}

ssize_t read(int fd, void *buf, size_t n)
{
	nsys++;
	return real_syscall()(SYS_read, fd, buf, n);
}

ssize_t write(int fd, const void *buf, size_t n)
{
	nsys++;
	return real_syscall()(SYS_write, fd, buf, n);
}

int timerfd_settime(int fd, int flags, const struct itimerspec *new,
		    struct itimerspec *old)
{
	nsys++;
	return (int)real_syscall()(SYS_timerfd_settime, fd, flags, new, old);
}

/* Returns the error number (0 on success), as POSIX specifies. */
int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req,
		    struct timespec *rem)
{
	nsys++;
	return real_syscall()(SYS_clock_nanosleep, clock, flags, req, rem) ? errno : 0;
}
