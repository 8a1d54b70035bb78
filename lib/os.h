/* SPDX-License-Identifier: MIT */
/*
 * The OS layer (lib/os.c): every syscall a sleep, a wake or a clock read
 * of lib/ makes goes through here. The futex wait/wake and the
 * CLOCK_MONOTONIC read are the default host operations (vm.h); the epoll
 * set of an eventfd and a timerfd is what both the sleeper (lib/block.c,
 * once it has fds) and the timer service (lib/timer.c) sleep in. Deadlines
 * in the VM's clock, which may be injected (host_ops.now_ns), are converted
 * into the kernel's CLOCK_MONOTONIC by vsched__kernel_deadline() before
 * any kernel timer sees them. Signals are not caught here: a wait they
 * interrupt returns -EINTR, which the callers report as VSCHED_WAKE_SIGNAL.
 * Every function returns a negative errno on failure.
 */
#ifndef VSCHED__OS_H
#define VSCHED__OS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

struct vsched_host_ops;

/* Default host operations: futex on a 32-bit word, CLOCK_MONOTONIC. Any
 * thread. The wait takes an absolute CLOCK_MONOTONIC deadline
 * (VSCHED_DEADLINE_NONE: none) and returns 0 (woken, or the word was not
 * `expected`), -ETIMEDOUT, -EINTR or another -errno. */
int vsched__futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns,
		       void *ctx);
void vsched__futex_wake(uint32_t *word, void *ctx);
uint64_t vsched__clock_now(void *ctx);

/* A deadline in the VM's clock as a CLOCK_MONOTONIC one: the same number
 * with the default clock; with an injected now_ns, the time left measured
 * now (callers re-check now_ns() when the kernel's timer expires). */
/* The conversion itself: an injected clock reading `now`, the time left to
 * `deadline` (at least `min`) from CLOCK_MONOTONIC's now. */
uint64_t vsched__kernel_interval(uint64_t deadline, uint64_t now, uint64_t min);
/* An injected clock that stands still (a paused guest's): the kernel
 * sleeps converted again from the same reading ask for twice the last
 * interval each time, up to VSCHED__STILL_MAX_NS, rather than the same
 * short time left again and again (lib/sleep.c, lib/tservice.c). */
#define VSCHED__STILL_MAX_NS 1000000
static inline uint64_t vsched__still_next(uint64_t last)
{
	return last < VSCHED__STILL_MAX_NS / 2 ? 2 * last : VSCHED__STILL_MAX_NS;
}
uint64_t vsched__kernel_deadline(const struct vsched_host_ops *ops,
				 uint64_t deadline);

/*
 * An epoll set holding an eventfd (the wake or stop signal, epoll data
 * VSCHED__OS_EVFD) and a timerfd on CLOCK_MONOTONIC (VSCHED__OS_TFD), both
 * non-blocking; further fds use data from VSCHED__OS_USER on. open()
 * creates all three or none (fds -1) and returns 0 or -errno; close() is
 * idempotent. Whoever owns the set closes it once no thread can still
 * signal it (the callers' own rules: a callout drain, an RCU grace period).
 */
#define VSCHED__OS_EVFD 0
#define VSCHED__OS_TFD 1
#define VSCHED__OS_USER 2
struct vsched__os_set {
	int epfd, evfd, tfd;
};
#define VSCHED__OS_SET_INIT { -1, -1, -1 }
int vsched__os_set_open(struct vsched__os_set *o);
void vsched__os_set_close(struct vsched__os_set *o);
/* Add the set's own eventfd and timerfd to its epoll fd (open() does; so
 * does a rebuild into a new epoll fd, lib/fds.c). 0 or -errno. */
int vsched__os_set_own(const struct vsched__os_set *o);
/* epoll_ctl(op) of `fd` with `events` and epoll data `data`. */
int vsched__os_ctl(const struct vsched__os_set *o, int op, int fd,
		   uint32_t events, uint64_t data);
/* epoll_pwait(timeout_ms, no signal mask change): the number of events, or
 * -errno (-EINTR for a signal). */
int vsched__os_wait(const struct vsched__os_set *o, struct epoll_event *ev,
		    int n, int timeout_ms);
/* The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID, a clock_gettime
 * syscall), or 0 when the kernel refuses it. */
uint64_t vsched__thread_cpu_ns(void);

/* Signal the eventfd (any thread). The set holds it edge-triggered: each
 * write wakes one epoll_pwait (or is reported by one), and it is never
 * read (its counter only grows: 2^64 - 2 writes to saturate). */
void vsched__os_signal(const struct vsched__os_set *o);
/* Whether `fd` is an eventfd (its /proc/self/fd link; false where /proc
 * cannot say). Not on a wait path. */
bool vsched__os_is_eventfd(int fd);
/* Read and so reset a non-blocking eventfd or timerfd `fd`. */
void vsched__os_drain(int fd);
/* The same for a doorbell of any kind: reads of 512 bytes until one comes
 * back short (empty; an eventfd's first read), at most 64. An EFD_SEMAPHORE
 * eventfd gives one count a read and so stays readable. False when a read
 * found end of file (a read of 0, but for a datagram socket's empty
 * message) or an error other than EAGAIN/EINTR: readable for ever, the
 * caller reports it instead of taking it for a ring. */
bool vsched__os_drain_all(int fd);
/* Arm the set's timerfd at an absolute CLOCK_MONOTONIC deadline
 * (VSCHED_DEADLINE_NONE disarms). 0, or -errno (a seccomp filter's errno,
 * a timerfd closed under the library: the timer is not armed). */
int vsched__os_timer_at(const struct vsched__os_set *o, uint64_t deadline_ns);

#endif /* VSCHED__OS_H */
