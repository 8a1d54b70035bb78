/* SPDX-License-Identifier: MIT */
/**
 * @file block.h
 * @brief Halting a vCPU: poll, then sleep until a request or the deadline.
 */
#ifndef VSCHED_BLOCK_H
#define VSCHED_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_vcpu;

/** No deadline: sleep until a request arrives. */
#define VSCHED_DEADLINE_NONE UINT64_MAX

/** Why vsched_vcpu_block() returned (positive values). */
enum vsched_wake_reason {
	/** A request is pending (or a waiter's condition holds). */
	VSCHED_WAKE_REQUEST = 1,
	/** The deadline passed with nothing pending. */
	VSCHED_WAKE_DEADLINE = 2,
	/** The sleep was interrupted by a signal. */
	VSCHED_WAKE_SIGNAL = 3,
	/** The arch's has_event callback reported an event. */
	VSCHED_WAKE_EVENT = 4,
	/** A registered file descriptor is ready (see result.tags and
	 * result.ready_tags). */
	VSCHED_WAKE_FD = 5,
};

/** Size of the inline `tags` array of struct vsched_block_result; pass
 * your own `ready_tags` array to get more ready fds per wake. */
#define VSCHED_BLOCK_MAX_TAGS 8

/**
 * What a block did. Zero-initialise, then set `size` (and, to receive more
 * than VSCHED_BLOCK_MAX_TAGS ready fds, `ready_tags` and `ready_cap`).
 * Follows the extensible-struct rule of <vsched/version.h>: a `size`
 * shorter than the first layout (up to `vetoed`) is refused, a longer one
 * only with every byte this library does not know zero; on return `size`
 * says how much was written.
 */
struct vsched_block_result {
	/** sizeof(struct vsched_block_result). */
	size_t size;
	/** enum vsched_wake_reason (the same value the call returned). */
	int reason;
	/** Number of ready-fd tags stored: in `ready_tags` when it is set (at
	 * most `ready_cap`), else in `tags` (at most VSCHED_BLOCK_MAX_TAGS).
	 * `nready_total` counts them all. */
	unsigned nready;
	/** Tags of the first ready fds (level-triggered: still ready next
	 * time), always filled, also when `ready_tags` is set. */
	uint64_t tags[VSCHED_BLOCK_MAX_TAGS];
	/** Whole halt: poll plus sleep, as KVM measures halt_ns. */
	uint64_t halt_ns;
	/** Poll window used (0: did not poll). */
	uint64_t window_ns;
	/** Time spent polling. */
	uint64_t poll_ns;
	/** Polling was attempted and a wake (a request, an event, an fd, a
	 * kick) ended it: the vCPU never slept. A deadline reached while
	 * polling is not a won poll (its time counts as failed polling). */
	bool poll_won;
	/** Polling was vetoed (arch, guest, contention). */
	bool vetoed;
	/* Appended; the first layout ends at `vetoed`. */
	/** In: the caller's array for ready-fd tags (NULL: only `tags`). */
	uint64_t *ready_tags;
	/** In: the length of `ready_tags`. */
	unsigned ready_cap;
	/** Out: ready registered fds found in all, also those that did not fit
	 * (they stay ready: level-triggered). */
	unsigned nready_total;
	/** Out: non-blocking checks of the registered fds in this halt
	 * (epoll_pwait with a zero timeout): those made while polling
	 * (rate-limited; see doc/policies.md), and the look before polling
	 * and after a wakeup that found nothing to do. */
	unsigned fd_checks;
	/** Out: how long after the post or kick that woke this halt's sleep
	 * the thread ran again, in the VM's clock: what the adaptive
	 * policy learns as its wake cost when wake_cost_ns is 0 (poll.h). 0
	 * when the halt did not sleep, something else woke it (a deadline, a
	 * doorbell or other fd, a signal), or the policy measures nothing.
	 * Added in 0.3. */
	uint64_t wake_ns;
};

/**
 * Halt until there is a reason to run: a pending request, the arch's
 * has_event, a ready registered fd, or `deadline_ns` (absolute, in the VM's
 * clock; a deadline at or before now checks once and never sleeps: it
 * returns VSCHED_WAKE_FD with the tags when any registered fd is ready, and
 * VSCHED_WAKE_DEADLINE only when none is). With fds registered, every
 * VSCHED_WAKE_DEADLINE follows a check of the fds made at the deadline or
 * after it: the poll loop's last look, the look after the sleep's on-time
 * spin, or the sleep's own epoll_pwait when its wakeup returned at or
 * after the deadline (it spun nothing). A write that completed before
 * that check is reported, one that completes after it (even before the
 * call returns) is left for the next call. A sleep's own check is made as
 * its epoll_pwait returns, so a write that races that return is left for
 * the next call, as it is by a caller's own timerfd and epoll_pwait loop.
 *
 * Registered fds are a wake source of the poll window too: while polling,
 * they are checked with a non-blocking epoll_pwait at a bounded rate (once
 * every VSCHED_FD_CHECK_NS of polling, counted in `fd_checks` and in the
 * halt_poll_fd_checks statistic), and once more before a deadline that ends
 * inside the window is reported.
 *
 * Timed waits end about on time at the CPU of the sleep they replace
 * (the poll params' spin_pct, <vsched/poll.h>). A deadline nearer than the
 * CPU of a plain sleep that long (measured; sleep_cpu_ns when given) is
 * polled to, not slept to, as
 * decided at the halt's start (not for a sleep that a wake with nothing
 * to do restarts; not on an injected clock, nor with a custom wait unless
 * fds are registered): a poll
 * attempted, and won only if something else than the caller's deadline
 * ends it (a guest timer's expiry does). A farther one sleeps: the sleep asks the
 * kernel to wake it early by the lateness its earlier sleeps of that
 * length measured (on the futex the thread's timer slack plus a wakeup, on
 * the timerfd a wakeup; a running median, less 4 us) and spins on its
 * word for the rest, so that its median wakeup comes about 4 us after the
 * deadline; where the spins would cost over a sixteenth of a sleep's CPU
 * on average, it aims later. A deadline nearer than the kernel can wake is
 * slept to as it is (late), unless spin_pct is 100. The slack is
 * measured, never read (no prctl) and never changed. Only the timeout the
 * sleep asked for ends in that spin: a spurious futex return sleeps again
 * (counted in spurious_wakeups), a signal returns VSCHED_WAKE_SIGNAL and
 * an error returns at once.
 *
 * The VM's clock is its `now_ns`. With an injected `now_ns`, the kernel
 * timers vsched sleeps on itself (the default futex wait and, with fds, the
 * timerfd, both CLOCK_MONOTONIC) are given the time left, measured in the
 * VM's clock when the sleep starts, as a CLOCK_MONOTONIC interval; the
 * block returns VSCHED_WAKE_DEADLINE only once `now_ns` has reached the
 * deadline, and sleeps again otherwise. A clock that jumps forward is seen
 * at the end of the current interval: call vsched_vcpu_kick() after the
 * jump to make a sleeper look at once. A custom `wait` receives deadlines in
 * the VM's clock.
 *
 * A signal whose handler runs while the block sleeps returns
 * VSCHED_WAKE_SIGNAL, with or without SA_RESTART (Linux restarts neither
 * epoll_pwait nor a timed futex wait, and the futex sleep without a
 * deadline is given one the kernel never reaches), also when a post, a
 * kick or a timer re-arm woke the vCPU at the same time; a request that
 * arrived with it stays pending for the next service. With fds
 * registered, a stop and continue of the process (SIGSTOP, SIGCONT)
 * returns it too, without a handler (epoll_pwait's EINTR, signal(7)). A
 * custom `wait` is as it returns: its -EINTR is VSCHED_WAKE_SIGNAL. A
 * signal that arrives while
 * the block polls (in user space: no syscall for it to interrupt) runs its
 * handler and the poll goes on; it is not reported. A handler that must
 * end the block posts a request kind of its own for the poll to see (not
 * a VSCHED_REQ_WAIT or VSCHED_REQ_PAYLOAD kind: those wait or allocate).
 *
 * Over-commit, always on (whatever `contention` says): a vCPU does not
 * poll while more vCPU threads of the process (all its VMs) are awake
 * than the host had online CPUs when the VM was created, as KVM stops
 * when another task is runnable. A vCPU thread counts as awake from
 * its first block until it next sleeps in one, so a vCPU whose thread
 * waits outside vsched (a paused vCPU, one held by the VMM) counts; a
 * VMM that parks vCPU threads for long should park them in
 * vsched_vcpu_block() or destroy their vCPUs. Counted as a veto
 * (`vetoed`, halt_poll_vetoed), not in halt_poll_contended.
 *
 * Host contention (off by default; the poll params' `contention`,
 * <vsched/poll.h>, turns it on, also at run time through the set_poll
 * calls): polling stops, as KVM's does when another task is runnable.
 * VSCHED_CONTENTION_PREEMPT: after the polling thread found itself
 * preempted, seen for free (no syscall, no fd): a gap of over 100 us
 * between two of the poll loop's clock reads stops the poll and skips
 * polls for 1 ms, doubling per preemption up to 64 ms, halved by each poll
 * of 20 us or more without such a gap. Blind spot: a poller that wakes
 * preempts a CPU-bound task beside it and polls to its window's end,
 * never preempted itself (measured: it vetoed at most 0.1% of the halts
 * beside a hog). VSCHED_CONTENTION_SAMPLED: that, and while the host has more
 * runnable tasks than the VM's CPUs. The runnable count is the 4th field
 * of /proc/loadavg, read with one pread (about 2 us) at most once per ms
 * of the VM's clock per vCPU or waiter, only in a poll that has run
 * VSCHED_FD_CHECK_NS / 8 (a poll won sooner makes no syscall) or at the
 * start of a halt that the last sample kept from polling; a busy sample
 * stops the poll under way and skips the polls of the next halts until a
 * sample says idle. Its blind spots: tasks that wait on CPUs the poller
 * cannot use (pinning, cpusets) count against it, CPU quotas are not
 * seen, nor, in a guest, the host's load (the preemption gap sees that).
 * Each stopped or skipped poll counts in the halt_poll_contended
 * statistic; a skipped one is a veto too (`vetoed`, halt_poll_vetoed).
 * The policy still learns every halt; a change of params starts the
 * back-off afresh. Side effects of VSCHED_CONTENTION_SAMPLED on the host:
 * one read-only O_CLOEXEC fd of /proc/loadavg per process, and pread64 on
 * the blocking thread (a seccomp filter of that thread must allow it; a
 * read that fails ends the sampling for that vCPU or waiter). The fd is
 * opened once per process by the first vCPU or waiter whose params ask
 * for the sampler: by default on its owner's thread at the start of its
 * first halt under them (an open(), once), or on the calling thread by
 * vsched_vcpu_set_poll(), vsched_waiter_set_poll() or
 * vsched_waiter_create_ex() given such params of its own. A VMM that
 * installs a seccomp filter should give those params there, before
 * installing it (vsched_vm_set_poll() alone opens at the first halt). Each
 * vCPU or waiter that took the fd holds it until it is destroyed (also if
 * its params turn the sampler off meanwhile); the last one closes it.
 * VSCHED_CONTENTION_SOURCE, a test and diagnostic hook, names another
 * file of /proc/loadavg's format to read instead; it is read (with
 * secure_getenv()) only when that fd is opened.
 *
 * 1. the `blocking` hook runs first, before any polling;
 * 2. unless vetoed (arch no_poll, the guest's poll control, contention),
 *    polls for the policy's window in mode POLLING, reading only;
 * 3. then publishes BLOCKED, full barrier, re-checks, and sleeps on a futex
 *    (or, with registered fds, in epoll_pwait on them, a kick eventfd and a
 *    deadline timerfd) until a poster moves it out of BLOCKED;
 * 4. the `unblocking` hook runs on every path out;
 * 5. the policy learns how long the halt lasted (at the start of the
 *    vCPU's next halt, before it chooses that halt's window: its work does
 *    not delay the return).
 * When a poster already moved the word out of BLOCKED, the way back skips
 * its store and barrier (counted as idle_fastpath_skips).
 * @param vcpu the vCPU.
 * @param deadline_ns absolute, in the VM's clock; VSCHED_DEADLINE_NONE.
 * @param result what happened (may be NULL).
 * @return enum vsched_wake_reason, or VSCHED_EINVAL, VSCHED_EDESTROYED,
 * VSCHED_ESTATE (not OUTSIDE_GUEST, called from the hooks of a block
 * in progress, or its own blocking or unblocking hook entered the guest:
 * the mode word as the hook left it; or a vsched_vcpu_fd_add() or
 * vsched_vcpu_fd_del() of this vCPU runs on another thread, outside its
 * context), or the negative errno of a sleep that failed (the futex
 * wait's or epoll_pwait's: -EPERM from a seccomp filter, -EFAULT ...;
 * or what a custom `wait` returned besides 0, -ETIMEDOUT and -EINTR),
 * returned at once rather than retried.
 * States: OUTSIDE_GUEST only.
 * Context: the vCPU's own thread, outside guest mode. Pairs with the barrier
 * in vsched_post() and vsched_vcpu_kick(). Syscalls: futex or epoll_pwait,
 * read of a pipe doorbell, timerfd_settime, clock_gettime.
 */
VSCHED_API int vsched_vcpu_block_ex(struct vsched_vcpu *vcpu,
				    uint64_t deadline_ns,
				    struct vsched_block_result *result);

/** vsched_vcpu_block_ex() without a result. @return as
 * vsched_vcpu_block_ex(). Context: the vCPU's own thread, outside guest
 * mode. */
VSCHED_API int vsched_vcpu_block(struct vsched_vcpu *vcpu,
				 uint64_t deadline_ns);

/**
 * Make a vCPU notice an event that its has_event callback now reports:
 * kick it out of the guest, or wake it if it sleeps. Call it after making
 * the event visible; it issues the full barrier that pairs with the block's.
 * A kick alone ends no block: the woken vCPU re-checks its requests, fds
 * and has_event, and with nothing there (no has_event callback, or one
 * that returns false) it counts a spurious wakeup and sleeps again. To
 * stop a vCPU thread, post it a request (a stop kind whose handler or
 * loop ends it), or have has_event read the stop flag that the kick
 * follows.
 * It pairs with the block's re-check only: vsched_vcpu_enter() re-checks
 * requests, not has_event, so an event raised while the vCPU is about to
 * enter is seen at its next exit. An event that must be seen before the
 * next entry is posted as a request (or the hypervisor looks at it again
 * after vsched_vcpu_enter() returned 0, and exits).
 * @return 0, VSCHED_EINVAL or VSCHED_EDESTROYED. States: any but DESTROYED.
 * Context: any thread.
 */
VSCHED_API int vsched_vcpu_kick(struct vsched_vcpu *vcpu);

/**
 * The guest's poll control (as KVM's MSR_KVM_POLL_CONTROL): `allow` false
 * vetoes host polling for this vCPU. @return 0, VSCHED_EINVAL or
 * VSCHED_EDESTROYED. States: any but DESTROYED. Any thread.
 */
VSCHED_API int vsched_vcpu_set_guest_poll(struct vsched_vcpu *vcpu, bool allow);

/**
 * Add a file descriptor as a wake source of the vCPU's sleeps
 * (level-triggered; `events` as for epoll, e.g. EPOLLIN, plus
 * VSCHED_FD_DOORBELL; EPOLLET, EPOLLONESHOT, EPOLLEXCLUSIVE and EPOLLWAKEUP
 * are refused with VSCHED_EINVAL: each would silence the source, or tie
 * it to one sleeper of several). From then on the
 * vCPU sleeps in epoll_pwait and is woken through an eventfd. The first call
 * creates the epoll, eventfd and timerfd descriptors; if it fails (the
 * kernel refuses `fd`: closed, a regular file...) it closes them again and
 * the vCPU keeps sleeping on, and being woken through, its futex. The
 * flag set by a call that succeeded moves the vCPU's next sleep to epoll;
 * each sleep publishes its own mechanism before it arms BLOCKED, and the
 * poster that wakes it reads that one (doc/protocol.md "The wake
 * mechanism"), so no wakeup goes to a mechanism nobody sleeps on. Later
 * failures change nothing. Waking a vCPU with fds is a write(2) to its
 * eventfd (no RCU section, no registration: a "callout" counted for
 * vsched_vcpu_destroy()).
 * There is no fixed limit on the number of fds: the tables grow here (never
 * on the wait path). An fd number closed and added again (a new file)
 * takes the slot of the old registration.
 * @return 0, VSCHED_EINVAL, VSCHED_EEXIST (fd already added), VSCHED_ENOMEM
 * (no memory for the tables, or the kernel's epoll limit
 * max_user_watches), another negative errno from the kernel, VSCHED_ESTATE
 * (a hook of the vCPU's own vsched_vcpu_block() called it, or, outside
 * the context below, another thread called it while the vCPU blocks: the
 * block and the table change each claim the vCPU's tables, and whichever
 * comes second is refused, the block too) or VSCHED_EDESTROYED.
 * States: OUTSIDE_GUEST, IN_GUEST, EXITING_GUEST.
 * Context: the vCPU's thread, or before the vCPU runs. Syscalls: the first
 * call epoll_create1, eventfd, timerfd_create; each epoll_ctl; a
 * VSCHED_FD_DOORBELL readlink of /proc/self/fd/N (refused: it is read as
 * a pipe is) and fcntl (F_GETFL; for a doorbell vsched reads,
 * F_DUPFD_CLOEXEC: it reads the file through a dup of its own, kept until
 * fd_del, so a number closed and reused meanwhile is never read).
 */
VSCHED_API int vsched_vcpu_fd_add(struct vsched_vcpu *vcpu, int fd,
				  uint32_t events, uint64_t tag);

/**
 * An `events` flag of vsched_vcpu_fd_add() and vsched_waiter_fd_add(): the
 * fd is a doorbell, an eventfd (or pipe) that its writer writes only after
 * it saw the owner's "needs kick" armed, i.e. only while the owner sleeps
 * (the virtio ioeventfd of doc/adopting.md's I/O thread). vsched never
 * checks it while polling (no epoll_pwait every VSCHED_FD_CHECK_NS). An
 * eventfd (as /proc/self/fd names it) is registered edge-triggered and
 * never read: each write rings once, and its counter is left as the
 * writers make it (no read syscall a sleep). Write it as you like (a
 * write of 1 a ring takes 2^64 rings to fill it; a write that would pass
 * the eventfd's maximum, 0xfffffffffffffffe, fails with EAGAIN and rings
 * nothing: read it down yourself while the owner is awake); read
 * it only while its owner cannot be asleep (a read that races a sleep
 * can swallow the ring it follows, as it could before). Any other
 * doorbell (a pipe) vsched reads itself when it rings (reads of 512 bytes
 * until one is short), through a dup of its own made by fd_add (the
 * file stays open until fd_del: closing your number first and reusing it
 * for another file never makes vsched read that file). Every doorbell,
 * an eventfd too, must be O_NONBLOCK and added with EPOLLIN alone (else
 * fd_add refuses it, VSCHED_EINVAL). vsched never
 * reports a ring: it only makes the owner look at its condition (a
 * waiter's cond, a vCPU's requests and event) again, and return for
 * that, or sleep again when the ring was left over
 * from an earlier sleep. A doorbell that hung up or is in error (a pipe
 * whose writers all closed, a socket shut for reading: vsched adds
 * EPOLLRDHUP to a doorbell's registration) would ring forever: a sleep
 * reports it with its tag (VSCHED_WAKE_FD), and so does the fd look of a
 * poll window or of a check-once (made where a plain fd is registered
 * too), for its owner to fd_del it.
 */
#define VSCHED_FD_DOORBELL (1u << 24)

/** Polling time between two checks of the registered fds in the poll
 * window (ns). */
#define VSCHED_FD_CHECK_NS 5000

/** Remove a wake-source fd (also one already closed: its slot is freed and
 * the kernel's -EBADF or -ENOENT returned; the epoll set is then rebuilt
 * under its number, dropping a registration that a dup of the closed file
 * kept). @return 0, VSCHED_EINVAL (NULL, a negative fd, or no fd was ever
 * added), -ENOENT (`fd` is not registered), -EBADF, VSCHED_ESTATE,
 * VSCHED_EDESTROYED, or another negative errno when that rebuild failed
 * (-EMFILE, -ENOMEM: nothing changed, call it again). States as
 * vsched_vcpu_fd_add(). Context: the vCPU's thread, or before the vCPU runs.
 * Syscalls: epoll_ctl; for a closed fd epoll_create1, dup3 and close. */
VSCHED_API int vsched_vcpu_fd_del(struct vsched_vcpu *vcpu, int fd);

/**
 * Register the calling thread with liburcu-bp, whose first read-side
 * section otherwise registers it (an mmap of its registry, signal mask
 * calls). The wait paths enter a read-side section only when a policy
 * changed since the thread's last halt (vsched_vm_set_poll(),
 * vsched_*_set_poll()), and a timer service's wake-up enters one: a thread
 * that runs under a seccomp filter allowing only the wait paths' syscalls
 * calls this before the filter is installed. Nothing else needs it: no
 * timer slack is read (a timed sleep measures its lateness instead: see
 * vsched_vcpu_block_ex()). @return 0. Any thread.
 */
VSCHED_API int vsched_thread_init(void);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_BLOCK_H */
