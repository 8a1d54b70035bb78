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
 * armed. With the VM's adaptive policy, a waiter whose producer is slow stops
 * polling instead of spinning a fixed count before every sleep.
 */
#ifndef VSCHED_WAITER_H
#define VSCHED_WAITER_H

#include <stdbool.h>
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

/**
 * Create a waiter that uses `vm`'s poll policy, host ops and allocator.
 * @return 0, VSCHED_EINVAL or VSCHED_ENOMEM. Context: any thread.
 */
VSCHED_API int vsched_waiter_create(struct vsched_vm *vm, vsched_cond_fn cond,
				    void *arg, struct vsched_waiter **out);

/**
 * Destroy a waiter (closes its fds). @return 0 or VSCHED_EINVAL.
 * Context: once no thread waits on or kicks it.
 */
VSCHED_API int vsched_waiter_destroy(struct vsched_waiter *w);

/**
 * Wait until cond(arg) holds, a registered fd is ready, or the deadline.
 * @return VSCHED_WAKE_REQUEST (the condition holds), VSCHED_WAKE_FD,
 * VSCHED_WAKE_DEADLINE, VSCHED_WAKE_SIGNAL, or VSCHED_EINVAL.
 * Context: one consumer thread at a time.
 */
VSCHED_API int vsched_waiter_wait(struct vsched_waiter *w, uint64_t deadline_ns,
				  struct vsched_block_result *result);

/**
 * After making the condition true: full barrier, then wake the consumer if
 * it armed "needs kick". @return 1 when a wakeup was sent, 0 when none was
 * needed, VSCHED_EINVAL. Context: any thread.
 */
VSCHED_API int vsched_waiter_kick(struct vsched_waiter *w);

/** Add a wake-source fd (see vsched_vcpu_fd_add(): a failed first call
 * leaves the waiter on its futex, consistently for wait and kick). */
VSCHED_API int vsched_waiter_fd_add(struct vsched_waiter *w, int fd,
				    uint32_t events, uint64_t tag);

/**
 * Halt/poll counters of a waiter (halt_wakeup counts kicks that woke it).
 * @return 0 or VSCHED_EINVAL. Any thread.
 */
VSCHED_API int vsched_waiter_stats(const struct vsched_waiter *w,
				   struct vsched_halt_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_WAITER_H */
