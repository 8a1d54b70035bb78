/* SPDX-License-Identifier: MIT */
/**
 * @file hwthread.h
 * @brief Hardware-thread state words (power's KVM_HWTHREAD_IN_KERNEL /
 * IN_IDLE / IN_GUEST): a waker reads the word to learn what a wakeup needs
 * (nothing in the kernel, an IPI or doorbell when idle, an exit when in a
 * guest).
 *
 * The transition back to IN_KERNEL on wakeup skips its store and full
 * barrier when the word already says IN_KERNEL (the thread woke from a
 * shallow idle state that never left the kernel state): the powerpc idle
 * fix. Every skip is counted.
 */
#ifndef VSCHED_HWTHREAD_H
#define VSCHED_HWTHREAD_H

#include <stdint.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Hardware-thread states. */
enum vsched_hwthread_state {
	/** Running host kernel / VMM code: a wakeup needs nothing. */
	VSCHED_HWTHREAD_IN_KERNEL = 0,
	/** Idle: a wakeup needs an IPI or doorbell. */
	VSCHED_HWTHREAD_IN_IDLE = 1,
	/** Running a guest: a wakeup needs an exit. */
	VSCHED_HWTHREAD_IN_GUEST = 2,
};

/* The counters are read atomically by other threads: 8-aligned on every
 * target, also where a uint64_t member is only 4-aligned (i386). */
#if defined(__GNUC__)
#define VSCHED__ALIGN8 __attribute__((aligned(8)))
#elif defined(__cplusplus)
#define VSCHED__ALIGN8 alignas(8)
#else
#define VSCHED__ALIGN8 _Alignas(8)
#endif
/** One hardware thread's state word and counters. Zero-initialise. */
struct vsched_hwthread {
	/** enum vsched_hwthread_state; read it with vsched_hwthread_state(). */
	uint32_t state;
	/** Zero (the padding every 64-bit target has here). */
	uint32_t reserved0;
	/** Wakeups that found IN_KERNEL already and skipped store + barrier.
	 * Written by the thread itself (relaxed atomic stores): another
	 * thread reads it with __atomic_load_n(..., __ATOMIC_RELAXED). */
	VSCHED__ALIGN8 uint64_t skips;
	/** Wakeups that stored IN_KERNEL and paid the barrier (read as
	 * `skips`). */
	uint64_t stores;
};

/**
 * Enter `state` (IN_IDLE before idling, IN_GUEST before entering a guest):
 * store, then a full barrier, so that a waker reading the word after its
 * own barrier sees it. @return 0 or VSCHED_EINVAL. Context: the thread itself.
 */
VSCHED_API int vsched_hwthread_enter(struct vsched_hwthread *t, unsigned state);

/**
 * Back to IN_KERNEL on wakeup: skips the store and the barrier when the word
 * already says IN_KERNEL. @return 1 when skipped, 0 when stored, or
 * VSCHED_EINVAL. Context: the thread itself.
 */
VSCHED_API int vsched_hwthread_wakeup(struct vsched_hwthread *t);

/** The current state (any thread), or VSCHED_EINVAL: `t` is NULL, or its
 * word holds no state (the struct was not zero-initialised, or was
 * overwritten). vsched_hwthread_wakeup() stores IN_KERNEL over such a
 * word. */
VSCHED_API int vsched_hwthread_state(const struct vsched_hwthread *t);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_HWTHREAD_H */
