/* SPDX-License-Identifier: MIT */
/**
 * @file block.h
 * @brief Halting a vCPU: poll, then sleep until a request or the deadline.
 */
#ifndef VSCHED_BLOCK_H
#define VSCHED_BLOCK_H

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
	/** A request is pending: service it. */
	VSCHED_WAKE_REQUEST = 1,
	/** The deadline passed with nothing pending. */
	VSCHED_WAKE_DEADLINE = 2,
	/** The sleep was interrupted by a signal. */
	VSCHED_WAKE_SIGNAL = 3,
};

/**
 * Halt until a request is pending or `deadline_ns` (absolute, in the VM's
 * clock) passes. Polls for the VM's poll window in mode POLLING (posters
 * need not kick), then publishes BLOCKED, issues a full barrier, re-checks
 * and sleeps; a poster moves it out of BLOCKED and wakes it. A deadline at
 * or before now checks once and never sleeps. Spurious wakeups are counted
 * and slept through.
 * @return enum vsched_wake_reason, or VSCHED_EINVAL, VSCHED_ESHUTDOWN,
 * VSCHED_ESTATE (not OUTSIDE_GUEST).
 * Context: the vCPU's own thread, outside guest mode. Pairs with the barrier
 * in vsched_post().
 */
VSCHED_API int vsched_vcpu_block(struct vsched_vcpu *vcpu,
				 uint64_t deadline_ns);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_BLOCK_H */
