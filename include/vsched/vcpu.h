/* SPDX-License-Identifier: MIT */
/**
 * @file vcpu.h
 * @brief vCPU objects, the mode word and commit-to-entry.
 *
 * The vCPU's own thread runs this loop:
 * @code
 *   for (;;) {
 *       vsched_service(vcpu);                 // handle pending requests
 *       int rc = vsched_vcpu_enter(vcpu);     // commit: IN_GUEST, fence, re-check
 *       if (rc == VSCHED_ENTRY_CANCELLED)
 *           continue;                         // a request arrived: cancelled
 *       if (rc < 0)
 *           break;                            // destroyed (or misuse): stop
 *       run_guest();                          // until an exit or a kick
 *       vsched_vcpu_exit(vcpu);               // back to OUTSIDE_GUEST
 *       handle_exit();                        // after the exit: may post WAIT
 *       if (guest_halted)
 *           vsched_vcpu_block(vcpu, deadline);
 *   }
 * @endcode
 * To stop the thread, post it a stop request: its handler sets a flag
 * that the loop checks after vsched_service(), the thread returns, and
 * the VMM joins it and then destroys the vCPU (or the VM). A handler may
 * also destroy its own vCPU (a hot-unplug): the next vsched_vcpu_enter()
 * returns VSCHED_EDESTROYED. A flag and a kick are not enough: a kick
 * ends no block unless has_event reports the flag (block.h). Another
 * thread may not destroy a vCPU whose thread is still in this loop.
 */
#ifndef VSCHED_VCPU_H
#define VSCHED_VCPU_H

#include <stdint.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_vm;
struct vsched_vcpu;

/** vCPU modes (the low bits of its mode word). */
enum vsched_mode {
	VSCHED_MODE_OUTSIDE_GUEST = 0,
	VSCHED_MODE_IN_GUEST = 1,
	VSCHED_MODE_EXITING_GUEST = 2,
	VSCHED_MODE_POLLING = 3,
	VSCHED_MODE_BLOCKED = 4,
	VSCHED_MODE_DESTROYED = 5,
};

/** vsched_vcpu_enter() result when a pending request cancelled the entry. */
#define VSCHED_ENTRY_CANCELLED 1

/**
 * Create vCPU `id` (0 .. max_vcpus-1) of a VM whose table is finalised.
 * Its hot state (mode and pending words) has a cache line of its own.
 * @return 0, VSCHED_EINVAL, VSCHED_ENOTFINAL, VSCHED_ELIMIT (id too large),
 * VSCHED_EEXIST (id in use) or VSCHED_ENOMEM. Context: any thread.
 */
VSCHED_API int vsched_vcpu_create(struct vsched_vm *vm, unsigned id,
				  void *user, struct vsched_vcpu **out);

/**
 * Destroy a vCPU: its mode becomes DESTROYED, later posts return
 * VSCHED_EDESTROYED, pending payloads go to the `payload_drop` callback and
 * its id may be reused. Every payload whose post returned 0 is handed back
 * once, by this call: it waits for the payload posts that passed their
 * check before it began (doc/protocol.md "Destroy against a payload
 * poster"). The memory stays valid until
 * vsched_vm_destroy(), so a stale handle never touches freed memory. Other threads may still be
 * posting: a poster that won the vCPU's mode just before it became
 * DESTROYED may still be about to write its kick eventfd or call the `kick`
 * or `wake` host callback. Destroy waits for those (briefly: they are one
 * syscall or callback each) before it closes its descriptors and returns:
 * a descriptor number it returns to the process never receives a late
 * write, and once it has returned no host callback runs for this vCPU, so
 * the VMM may tear down what its kick uses (vsched_kvm_detach(), the
 * kvm_run mapping).
 * Context: any thread, once the vCPU's own thread has stopped using it.
 * States: OUTSIDE_GUEST only. A vCPU in the guest or inside
 * vsched_vcpu_block() (its hooks included, where the word still says
 * OUTSIDE_GUEST) is still its thread's, whose next exchange would
 * overwrite DESTROYED: refused with VSCHED_ESTATE, nothing changed; so is
 * a destroy from another thread while its thread is inside
 * vsched_service(). Its own request handler may destroy it (a hot-unplug
 * request): the pass ends after that handler. (A
 * destroy that races the owner's next call is outside this contract; a
 * block that then finds DESTROYED at its arm returns VSCHED_EDESTROYED.)
 * Syscalls: none of its own; sched_yield while a waker's callout or a
 * payload post still runs; close on the vCPU's fds.
 * @return 0, VSCHED_EINVAL, VSCHED_ESTATE or VSCHED_EDESTROYED (destroyed
 * already).
 */
VSCHED_API int vsched_vcpu_destroy(struct vsched_vcpu *vcpu);

#ifndef VSCHED_INLINE /* <vsched/inline.h> defines it inline */
/**
 * Commit to guest entry: write IN_GUEST, full barrier, re-check requests.
 * @return 0 when committed (run the guest, then vsched_vcpu_exit());
 * VSCHED_ENTRY_CANCELLED when a request was pending: the vCPU is back in
 * OUTSIDE_GUEST, the cancellation was counted against each pending kind, and
 * the caller must service and retry; VSCHED_EINVAL; VSCHED_EDESTROYED;
 * VSCHED_ESTATE when not OUTSIDE_GUEST.
 * States: OUTSIDE_GUEST only.
 * Context: the vCPU's own thread. Pairs with the barrier in vsched_post().
 */
VSCHED_API int vsched_vcpu_enter(struct vsched_vcpu *vcpu);
#endif

#ifndef VSCHED_INLINE /* <vsched/inline.h> defines it inline */
/**
 * Leave guest mode (IN_GUEST or EXITING_GUEST -> OUTSIDE_GUEST) and release
 * WAIT posters waiting for this vCPU's acknowledgement.
 * @return 0, VSCHED_EINVAL, VSCHED_EDESTROYED or VSCHED_ESTATE (not in guest).
 * States: IN_GUEST or EXITING_GUEST.
 * Context: the vCPU's own thread. Full barrier.
 */
VSCHED_API int vsched_vcpu_exit(struct vsched_vcpu *vcpu);
#endif

/**
 * The vCPU's current mode (enum vsched_mode), or VSCHED_EINVAL. Any thread;
 * the value may be stale by the time it is used.
 */
VSCHED_API int vsched_vcpu_mode(const struct vsched_vcpu *vcpu);

/** The user pointer given at creation (NULL for NULL). Any thread. */
VSCHED_API void *vsched_vcpu_user(const struct vsched_vcpu *vcpu);

/** The vCPU's VM (NULL for NULL). Any thread. */
VSCHED_API struct vsched_vm *vsched_vcpu_vm(const struct vsched_vcpu *vcpu);

/** The vCPU's id (>= 0) or VSCHED_EINVAL. Any thread. */
VSCHED_API int vsched_vcpu_id(const struct vsched_vcpu *vcpu);

#ifdef __cplusplus
}
#endif
/* The inline fast paths (and, with VSCHED_INLINE, these functions). */
#include <vsched/inline.h>
#endif /* VSCHED_VCPU_H */
