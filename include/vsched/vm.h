/* SPDX-License-Identifier: MIT */
/**
 * @file vm.h
 * @brief VM objects and the host callbacks a hypervisor plugs in.
 *
 * Lifecycle: vsched_vm_create(), declare the request table (request.h),
 * vsched_request_finalize(), create vCPUs (vcpu.h), run, destroy the vCPUs
 * (optional) and vsched_vm_destroy().
 */
#ifndef VSCHED_VM_H
#define VSCHED_VM_H

#include <stdbool.h>
#include <stdint.h>
#include <vsched/alloc.h>
#include <vsched/block.h>
#include <vsched/poll.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_vm;
struct vsched_vcpu;
struct vsched_payload;
struct vsched_timer;

/**
 * Host callbacks. Every member may be NULL, which selects the default.
 * The wait/wake/clock members exist so that tests and simulators can run the
 * engine deterministically; a production hypervisor normally sets only
 * `kick` and `payload_drop`.
 */
struct vsched_host_ops {
	/**
	 * Make a vCPU that is running guest code exit to the host (signal its
	 * thread, send an IPI, set immediate_exit...). Called by a poster
	 * after it won the IN_GUEST -> EXITING_GUEST transition, so at most
	 * once per guest entry. Context: any posting thread; must not call
	 * back into vsched for the same vCPU. Default: nothing.
	 */
	void (*kick)(struct vsched_vcpu *vcpu, void *ctx);
	/**
	 * Sleep while `*word == expected`, until woken through `wake` or the
	 * absolute `deadline_ns` (in the `now_ns` clock; UINT64_MAX: none)
	 * passes. Return 0 when woken or the value differed, -ETIMEDOUT at
	 * the deadline, -EINTR when interrupted by a signal. Spurious returns
	 * are allowed. Default: futex wait on CLOCK_MONOTONIC.
	 */
	int (*wait)(uint32_t *word, uint32_t expected, uint64_t deadline_ns,
		    void *ctx);
	/** Wake every thread in `wait` on `word`. Default: futex wake. Set
	 * `wait` and `wake` as a pair: a custom one alone must still sleep
	 * on, or wake, the futex of `word` (a wrapper that traces or delays
	 * it), or its partner's wakeups are lost until the deadline. */
	void (*wake)(uint32_t *word, void *ctx);
	/** Current time in ns. Default: CLOCK_MONOTONIC. The poll loop reads
	 * it on every iteration (a poll that wins ends at its last read), and
	 * every waker that wakes a sleeper reads it once, on the poster's or
	 * kicker's thread (the sleeper's wake cost, poll.h): keep it as cheap
	 * as a vDSO clock read, with no lock, callable from any thread. Keep
	 * its readings below 2^63 (292 years from 0): UINT64_MAX is
	 * VSCHED_DEADLINE_NONE, so a clock that reads it has passed every
	 * deadline, "none" included (an untimed wait returns at once), and
	 * the engine adds its intervals to a reading without saturating
	 * (within a few us of 2^64 the poll window looks at the fds on every
	 * pass). */
	uint64_t (*now_ns)(void *ctx);
	/**
	 * Receives each payload that was accepted by vsched_post_payload()
	 * but never delivered because its vCPU was destroyed, so that the
	 * hypervisor can free it. Context: the thread destroying the vCPU or
	 * the VM. Default: payloads are forgotten.
	 */
	void (*payload_drop)(struct vsched_vcpu *vcpu, unsigned kind,
			     struct vsched_payload *payload, void *ctx);
	/**
	 * Arch `blocking` hook: the first thing vsched_vcpu_block() does,
	 * before any polling, so that work such as syncing the interrupt
	 * controller or arming a doorbell covers the whole poll window.
	 * Context: the vCPU's thread, inside the block: vsched_service()
	 * with work pending (with none it returns 0 in any state,
	 * request.h), vsched_vcpu_block() and vsched_vcpu_destroy() refuse
	 * it with VSCHED_ESTATE, and a vsched_vcpu_enter() from it, entered
	 * or cancelled, makes the block return VSCHED_ESTATE (the mode word
	 * as the entry left it). Default: nothing.
	 */
	void (*blocking)(struct vsched_vcpu *vcpu, void *ctx);
	/** Arch `unblocking` hook: runs on every path out of the block.
	 * Context: the vCPU's thread, still inside the block:
	 * vsched_service() with work pending, vsched_vcpu_block() and
	 * vsched_vcpu_destroy() refuse it with VSCHED_ESTATE, and a
	 * vsched_vcpu_enter() from it, entered or cancelled, makes the block
	 * return VSCHED_ESTATE (the halt it ended is counted and learnt as
	 * usual). */
	void (*unblocking)(struct vsched_vcpu *vcpu, void *ctx);
	/**
	 * Arch pending-event check, polled with the requests: true when the
	 * vCPU has an event to handle that is not a vsched request (a
	 * posted interrupt, a doorbell). Must only read memory. Whoever makes
	 * it true while the vCPU may sleep calls vsched_vcpu_kick() after.
	 * Default: false.
	 */
	bool (*has_event)(struct vsched_vcpu *vcpu, void *ctx);
	/** Arch veto on polling (KVM's kvm_arch_no_poll). Default: false. */
	bool (*no_poll)(struct vsched_vcpu *vcpu, void *ctx);
	/**
	 * The hypervisor's contention hint: true when polling would steal the
	 * CPU from other work. Added to vsched's own checks (block.h: the
	 * over-commit veto, and the back-off of the poll params'
	 * `contention`).
	 * Default: false.
	 */
	bool (*contended)(struct vsched_vcpu *vcpu, void *ctx);
	/**
	 * Read a guest timer's real deadline (0: disarmed) where vsched may
	 * not see the guest's writes, e.g. a nested guest's decrementer via
	 * H_GUEST_GET_STATE. Used by the CANCEL and ADAPTIVE policies; its
	 * cost is measured. Return 0, or a negative errno to deliver anyway.
	 * Default: vsched's own view of the deadline. It runs on the vCPU's
	 * thread inside vsched_service() and may disarm the timer it reads,
	 * or arm it into the future, to bring vsched's view in line: the
	 * expiry is then judged on the word it left (cancelled, and learnt
	 * as a stale read). An arm into the past is an expiry of its own: a
	 * one-shot timer's expiry is delivered once (the arm's post is
	 * dropped at the next service), but a decrementer, which stays
	 * expired until it is re-armed into the future, is delivered at
	 * every service: do not arm one into the past from here.
	 */
	int (*timer_read)(struct vsched_vcpu *vcpu, struct vsched_timer *timer,
			  uint64_t *deadline_ns, void *ctx);
	/** Passed to every callback above. */
	void *ctx;
};

/** VM creation parameters. Zero-initialise, then set `size`. */
struct vsched_vm_config {
	/** sizeof(struct vsched_vm_config): lets the struct grow. */
	size_t size;
	/** Largest vCPU id + 1 (1..4096). 0 selects 256. */
	unsigned max_vcpus;
	/** Host callbacks, copied at creation; NULL selects all defaults. */
	const struct vsched_host_ops *ops;
	/** Allocator, copied at creation; NULL selects the default. */
	const struct vsched_allocator *alloc;
	/**
	 * Initial poll policy of its vCPUs, copied; NULL selects
	 * VSCHED_POLL_ADAPTIVE with the arch's maximum window (x86: 200 us).
	 * Its waiters do not follow it. See vsched_vm_set_poll().
	 */
	const struct vsched_poll_params *poll;
	/** Returned by vsched_vm_user(). */
	void *user;
};

/**
 * Create a VM.
 * @param cfg  parameters, or NULL for all defaults.
 * @param out  receives the VM.
 * @return 0, VSCHED_EINVAL (NULL out, bad size or max_vcpus, an allocator
 * without `alloc` or `free`, bad poll parameters) or VSCHED_ENOMEM.
 * Context: any thread.
 */
VSCHED_API int vsched_vm_create(const struct vsched_vm_config *cfg,
				struct vsched_vm **out);

/**
 * Destroy a VM, its request table and every vCPU, live or destroyed.
 * Undelivered payloads go to the `payload_drop` callback. Its waiters
 * (<vsched/waiter.h>) are not its to free: destroy them first.
 * Context: any thread, once no other thread is inside any vsched call on this
 * VM or its vCPUs, and not from a request handler or a host callback.
 * @return 0, VSCHED_EINVAL, or VSCHED_ESTATE (a waiter
 * created on the VM is not destroyed yet, its timer service's run() or a
 * dispatch is active, or a vCPU's thread is inside vsched_vcpu_block() or
 * vsched_service(), its own handler's call included, or a vCPU is in the
 * guest (between vsched_vcpu_enter() and vsched_vcpu_exit()), or a
 * payload_drop callback or a poster's kick or wake callback runs, the
 * caller's own included: refused, nothing freed).
 * States: no waiter, no timer service run() or dispatch active, no vCPU
 * in the guest or with its thread inside a block or a service pass, no
 * host callback running.
 * Syscalls: close on the vCPUs' fds; with a timer service still attached,
 * those of vsched_timer_service_destroy().
 */
VSCHED_API int vsched_vm_destroy(struct vsched_vm *vm);

/** The user pointer given at creation (NULL for a NULL vm). Any thread. */
VSCHED_API void *vsched_vm_user(const struct vsched_vm *vm);

/**
 * Now, in the VM's clock (its `now_ns` host callback; CLOCK_MONOTONIC by
 * default): the clock every deadline of this VM is in.
 * @return the time in ns, or 0 for a NULL vm. Context: any thread.
 */
VSCHED_API uint64_t vsched_now_ns(const struct vsched_vm *vm);

/**
 * The absolute deadline `timeout_ns` from now in the VM's clock, for the
 * block and wait calls: 0 gives "now" (check once, never sleep),
 * VSCHED_DEADLINE_NONE stays none, and a sum past the clock's end
 * saturates to VSCHED_DEADLINE_NONE instead of wrapping. Callers never read
 * a clock of their own. VSCHED_DEADLINE_NONE for a NULL vm.
 * Context: any thread.
 */
VSCHED_API uint64_t vsched_deadline_in(const struct vsched_vm *vm,
				       uint64_t timeout_ns);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_VM_H */
