/* SPDX-License-Identifier: MIT */
/**
 * @file waiter.h
 * @brief The block/poll engine for any waiter, not only vCPUs: an I/O thread
 * waiting on a guest ring, say.
 *
 * Consumer: vsched_waiter_wait() polls the condition for the policy's window,
 * then arms "needs kick" (state BLOCKED), full barrier, re-checks, sleeps.
 * Producer: make the condition true (publish the ring entry), then
 * vsched_waiter_kick(): full barrier, and a wakeup only if "needs kick" was
 * armed. With its default policy (the waiter profile: adaptive, against
 * QEMU's AioContext rule), a waiter whose producer is slow stops polling
 * instead of spinning a fixed count before every sleep.
 */
#ifndef VSCHED_WAITER_H
#define VSCHED_WAITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <vsched/block.h>
#include <vsched/stats.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_vm;
struct vsched_waiter;

/** The wake condition: must only read memory. */
typedef bool (*vsched_cond_fn)(void *arg);

struct vsched_poll_params;

/** A waiter's sleep hook (see struct vsched_waiter_config). */
typedef void (*vsched_waiter_hook_fn)(struct vsched_waiter *w, void *hook_arg);

/**
 * Waiter creation parameters. Zero-initialise, then set `size`
 * (extensible-struct rule of <vsched/version.h>).
 */
struct vsched_waiter_config {
	/** sizeof(struct vsched_waiter_config). */
	size_t size;
	/** The wake condition (required). */
	vsched_cond_fn cond;
	/** Its argument. */
	void *arg;
	/**
	 * Called on the consumer's thread after the poll window, right before
	 * the engine arms "needs kick" (state BLOCKED), full barrier, and
	 * re-checks `cond`: only when the waiter is about to sleep, never
	 * while it polls. Arm your own needs-kick flag here (virtio's
	 * notification suppression); the engine's barrier orders that store
	 * before its re-check, so a producer that published before reading
	 * the flag is seen by the re-check. Set both hooks or neither.
	 */
	vsched_waiter_hook_fn before_sleep;
	/** Called exactly once after each before_sleep, on every path out of
	 * the sleep (the re-check found the condition, a kick, a ready fd,
	 * the deadline, a signal): clear the needs-kick flag here. */
	vsched_waiter_hook_fn after_sleep;
	/** The hooks' argument. */
	void *hook_arg;
	/** The waiter's own poll policy, copied (NULL: the waiter profile,
	 * vsched_poll_defaults_waiter() with VSCHED_POLL_ADAPTIVE, whatever
	 * the VM's policy). See vsched_waiter_set_poll(). */
	const struct vsched_poll_params *poll;
};

/**
 * Create a waiter that uses `vm`'s host ops and allocator, and the waiter
 * profile as its poll policy (vsched_poll_defaults_waiter() with
 * VSCHED_POLL_ADAPTIVE: QEMU's 32 us cap and rule as its incumbent), not
 * the VM's, which is its vCPUs' (changed in 0.3: until then a waiter
 * followed its VM's policy).
 * @return 0, VSCHED_EINVAL or VSCHED_ENOMEM. Context: any thread.
 */
VSCHED_API int vsched_waiter_create(struct vsched_vm *vm, vsched_cond_fn cond,
				    void *arg, struct vsched_waiter **out);

/**
 * Create a waiter with hooks around its sleep and, optionally, its own poll
 * policy.
 * @return 0, VSCHED_EINVAL (NULL, no cond, one hook without the other, bad
 * size or poll parameters) or VSCHED_ENOMEM. Context: any thread.
 */
VSCHED_API int vsched_waiter_create_ex(struct vsched_vm *vm,
				       const struct vsched_waiter_config *cfg,
				       struct vsched_waiter **out);

/**
 * Give the waiter its own poll policy and window (`p` copied), or with
 * `p` NULL give it its default again, the waiter profile (never the VM's
 * policy, which is its vCPUs'). Takes effect at its next
 * wait, also while it waits now; its policy state restarts. The old
 * parameters are freed after an RCU grace period, as vsched_vm_set_poll()
 * does. @return 0, VSCHED_EINVAL or VSCHED_ENOMEM.
 * Context: any thread, also the consumer's own condition or hooks during
 * a wait (the wait in progress goes on with the policy it began with).
 */
VSCHED_API int vsched_waiter_set_poll(struct vsched_waiter *w,
				      const struct vsched_poll_params *p);

/**
 * Destroy a waiter (closes its fds). @return 0, VSCHED_EINVAL or
 * VSCHED_ESTATE (a thread is inside vsched_waiter_wait() on it, its hooks
 * and condition included: refused, nothing freed). States: idle (not
 * waiting) only.
 * Context: once no thread waits on or kicks it; before vsched_vm_destroy()
 * of its VM, which refuses while the VM has a waiter.
 */
VSCHED_API int vsched_waiter_destroy(struct vsched_waiter *w);

/**
 * Wait until cond(arg) holds, a registered fd is ready, or the deadline.
 * @return VSCHED_WAKE_REQUEST (the condition holds), VSCHED_WAKE_FD,
 * VSCHED_WAKE_DEADLINE, VSCHED_WAKE_SIGNAL, VSCHED_EINVAL,
 * VSCHED_ESTATE (another thread is inside a wait on it already, or in
 * vsched_waiter_fd_add() or vsched_waiter_fd_del() on it, or the call
 * comes from this waiter's own condition or hooks during a wait), or the
 * negative errno of a sleep that failed (as vsched_vcpu_block_ex()).
 * States: idle only. Context: one consumer thread at a time.
 */
VSCHED_API int vsched_waiter_wait(struct vsched_waiter *w, uint64_t deadline_ns,
				  struct vsched_block_result *result);

/**
 * Wake the consumer if it sleeps: called after making the condition true,
 * it issues a full barrier, then a wakeup if the consumer armed "needs
 * kick". @return 1 when a wakeup was sent, 0 when none was needed,
 * VSCHED_EINVAL. Context: any thread.
 */
VSCHED_API int vsched_waiter_kick(struct vsched_waiter *w);

/** Add a wake-source fd (see vsched_vcpu_fd_add(): a failed first call
 * leaves the waiter on its futex, consistently for wait and kick).
 * @return as vsched_vcpu_fd_add(); VSCHED_ESTATE while a thread waits on the
 * waiter, its hooks and condition included (refused: that thread's sleep
 * keeps its mechanism and tables).
 * States: idle only. Context: the consumer thread (the one that calls
 * vsched_waiter_wait()), or before it waits. */
VSCHED_API int vsched_waiter_fd_add(struct vsched_waiter *w, int fd,
				    uint32_t events, uint64_t tag);

/** Remove a wake-source fd (see vsched_vcpu_fd_del()). @return as
 * vsched_vcpu_fd_del(). States: idle only. Context: as
 * vsched_waiter_fd_add(). Added in 0.3. */
VSCHED_API int vsched_waiter_fd_del(struct vsched_waiter *w, int fd);

/**
 * Halt/poll counters of a waiter (halt_wakeup counts kicks that woke it).
 * @return 0 or VSCHED_EINVAL. Any thread.
 */
VSCHED_API int vsched_waiter_stats(const struct vsched_waiter *w,
				   struct vsched_halt_stats *out);

/** All of a waiter's counters: struct vsched_halt_stats and those it has no
 * room for. Zero-initialise, then set `size`. Added in 0.3. */
struct vsched_waiter_stats {
	/** sizeof(struct vsched_waiter_stats). */
	size_t size;
	/** What vsched_waiter_stats() returns. */
	struct vsched_halt_stats halt;
	/** Sleeps that returned with nothing to do before the deadline (as
	 * struct vsched_vcpu_stats' spurious_wakeups). */
	uint64_t spurious_wakeups;
	/** Non-blocking checks of the registered fds: while polling (their
	 * time is part of the poll time), before polling and after a wakeup
	 * that found nothing to do; doorbell fds are never checked while
	 * polling (<vsched/block.h>). */
	uint64_t halt_poll_fd_checks;
	/** Waits whose polling the host-contention back-off skipped or
	 * stopped (<vsched/block.h>). */
	uint64_t halt_poll_contended;
};

/**
 * Copy all of a waiter's counters, each read atomically (the set is not
 * one atomic snapshot while the waiter runs).
 * @return 0, VSCHED_EINVAL (NULL, or `size` too small to hold `size`).
 * A caller's struct shorter than this version's gets the members it
 * holds, a longer one zeros past them. Any thread, until
 * vsched_waiter_destroy(). Added in 0.3.
 */
VSCHED_API int vsched_waiter_read_stats(const struct vsched_waiter *w,
					struct vsched_waiter_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_WAITER_H */
