/* SPDX-License-Identifier: MIT */
/* The OS layer (lib/os.h): futex, clock, and the epoll set
 * of an eventfd and a timerfd. The only syscalls the wait paths make. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <vsched/vsched.h>

#include "os.h"

uint64_t vsched__clock_now(void *ctx)
{
	struct timespec ts;
	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t vsched__thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
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

/*
 * A deadline in the VM's clock as an absolute CLOCK_MONOTONIC deadline, for
 * the kernel's own timers (the default futex wait, the engine's and the
 * timer service's timerfds). With the
 * default clock it is the same number. With an injected now_ns, the time
 * left is measured now and converted into a CLOCK_MONOTONIC interval of the
 * same length; callers re-check now_ns() when it expires and sleep again
 * if the VM's clock has not reached the deadline yet.
 */
uint64_t vsched__kernel_deadline(const struct vsched_host_ops *ops,
				uint64_t deadline)
{
	if (deadline == VSCHED_DEADLINE_NONE || ops->now_ns == vsched__clock_now)
		return deadline;
	return vsched__kernel_interval(deadline, ops->now_ns(ops->ctx), 0);
}

uint64_t vsched__kernel_interval(uint64_t deadline, uint64_t now, uint64_t min)
{
	uint64_t mono = vsched__clock_now(NULL);
	uint64_t left = deadline > now ? deadline - now : 0;

	if (left < min)
		left = min;
	if (left >= VSCHED_DEADLINE_NONE - mono)
		return VSCHED_DEADLINE_NONE;
	return mono + left;
}

int vsched__os_ctl(const struct vsched__os_set *o, int op, int fd,
		   uint32_t events, uint64_t data)
{
	struct epoll_event ev = { .events = events, .data.u64 = data };
	return epoll_ctl(o->epfd, op, fd, &ev) ? -errno : 0;
}

void vsched__os_set_close(struct vsched__os_set *o)
{
	if (o->epfd >= 0)
		close(o->epfd);
	if (o->evfd >= 0)
		close(o->evfd);
	if (o->tfd >= 0)
		close(o->tfd);
	o->epfd = o->evfd = o->tfd = -1;
}

int vsched__os_set_open(struct vsched__os_set *o)
{
	int rc;

	o->epfd = epoll_create1(EPOLL_CLOEXEC);
	o->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	o->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (o->epfd < 0 || o->evfd < 0 || o->tfd < 0) {
		rc = -errno;
		goto undo;
	}
	if ((rc = vsched__os_set_own(o)))
		goto undo;
	return 0;
undo:
	vsched__os_set_close(o);
	return rc;
}

int vsched__os_set_own(const struct vsched__os_set *o)
{
	int rc = vsched__os_ctl(o, EPOLL_CTL_ADD, o->evfd, EPOLLIN | EPOLLET,
				VSCHED__OS_EVFD);

	return rc ? rc : vsched__os_ctl(o, EPOLL_CTL_ADD, o->tfd, EPOLLIN, VSCHED__OS_TFD);
}

int vsched__os_wait(const struct vsched__os_set *o, struct epoll_event *ev,
		    int n, int timeout_ms)
{
	int r = epoll_pwait(o->epfd, ev, n, timeout_ms, NULL);
	return r < 0 ? -errno : r;
}

void vsched__os_signal(const struct vsched__os_set *o)
{
	uint64_t one = 1;
	ssize_t r = write(o->evfd, &one, sizeof(one));
	(void)r; /* EAGAIN: the counter is saturated, still readable */
}

bool vsched__os_is_eventfd(int fd)
{
	static const char want[] = "anon_inode:[eventfd]";
	char path[48], link[sizeof(want)];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link));
	return n == (ssize_t)sizeof(want) - 1 && !memcmp(link, want, sizeof(want) - 1);
}

/* A socket that keeps message boundaries, SOCK_DGRAM or SOCK_SEQPACKET
 * (asked only after a read of 0, never per ring). */
static bool keeps_messages(int fd)
{
	int type;
	socklen_t len = sizeof(type);

	return !getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) &&
	       (type == SOCK_DGRAM || type == SOCK_SEQPACKET);
}

bool vsched__os_drain_all(int fd)
{
	uint64_t v[64];

	/* A read shorter than the buffer emptied it (an eventfd gives its
	 * whole count in 8 bytes, a pipe what it holds): one syscall for the
	 * usual doorbell, not a second one to hear EAGAIN. An EFD_SEMAPHORE
	 * gives one unit a read, so it rings again at the next sleep. */
	for (int i = 0; i < 64; i++) {
		ssize_t r = read(fd, v, sizeof(v));
		/* End of file, or an error other than "empty": readable for
		 * ever, it would ring at every sleep. On a socket that keeps
		 * message boundaries a read of 0 was a message of length 0, a
		 * ring (consumed); its end is EPOLLRDHUP, which the sleep
		 * reports (lib/fds.c asks for it). */
		if ((r == 0 && !keeps_messages(fd)) ||
		    (r < 0 && errno != EAGAIN && errno != EINTR))
			return false;
		if (r < (ssize_t)sizeof(v))
			break;
	}
	return true;
}

void vsched__os_drain(int fd)
{
	uint64_t v;
	ssize_t r = read(fd, &v, sizeof(v));
	(void)r; /* EAGAIN: nothing to reset */
}

int vsched__os_timer_at(const struct vsched__os_set *o, uint64_t deadline_ns)

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
	return timerfd_settime(o->tfd, TFD_TIMER_ABSTIME, &its, NULL) ? -errno : 0;
}
