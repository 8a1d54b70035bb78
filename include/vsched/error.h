/* SPDX-License-Identifier: MIT */
/**
 * @file error.h
 * @brief Error codes: every vsched function returns 0 or a positive result on
 * success and a negative value on failure.
 *
 * One rule for what a negative value means:
 *
 * - **-EINVAL, -ERANGE, -ENOMEM, -EEXIST** (VSCHED_EINVAL ...): the errno's
 *   own meaning (a bad argument, a value out of range, no memory, a
 *   duplicate).
 * - **Any other value from -1 to -4095** is an errno from the kernel, passed
 *   through unchanged from the syscall that failed (epoll_ctl, eventfd,
 *   timerfd, KVM_RUN ...).
 * - **Values below -4095** are vsched's own conditions (VSCHED_ENOTFINAL
 *   ...): no syscall returns them, so they never collide with a kernel
 *   error. vsched_is_own_error() tells them apart.
 *
 * vsched_strerror() explains all three. Success values that an API returns
 * besides 0 (a wake reason, VSCHED_KVM_KICKED) are never negative.
 * Changed in 0.2: the own conditions were negative errnos before.
 */
#ifndef VSCHED_ERROR_H
#define VSCHED_ERROR_H

#include <errno.h>
#include <stdbool.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/** First of vsched's own codes: below every kernel errno (1..4095). */
#define VSCHED__EOWN 4096

/** X-macro of every error vsched itself returns: name, value, text. */
#define VSCHED_ERRNO_MAP(X)                                                   \
	X(EINVAL, -EINVAL, "invalid argument (NULL pointer, bad flags or size)")  \
	X(ERANGE, -ERANGE, "value out of range (request kind, vector, id)")      \
	X(ENOMEM, -ENOMEM, "out of memory")                                       \
	X(EEXIST, -EEXIST, "already exists (kind declared twice, vCPU id in use)") \
	X(EBUSY, -(VSCHED__EOWN + 1), "request table already finalised")         \
	X(ENOTFINAL, -(VSCHED__EOWN + 2), "request table not finalised")         \
	X(ELOOP, -(VSCHED__EOWN + 3),                                              \
	  "request table: the may-raise relation has a cycle")                    \
	X(EORDER, -(VSCHED__EOWN + 4),                                             \
	  "request table: a handler may raise a kind serviced before its own")    \
	X(ESHUTDOWN, -(VSCHED__EOWN + 5), "vCPU has been destroyed")             \
	X(ESTATE, -(VSCHED__EOWN + 6), "call not valid in the vCPU's current mode") \
	X(ENOSPC, -(VSCHED__EOWN + 7),                                             \
	  "a documented limit is reached (vCPU id >= max_vcpus, 8 timers a vCPU)") \
	X(ENOHANDLER, -(VSCHED__EOWN + 8),                                         \
	  "the kick signal has no handler installed (its default action would "  \
	  "end the process, an ignored signal never interrupts KVM_RUN)")         \
	X(ECLOCK, -(VSCHED__EOWN + 9),                                             \
	  "the VM's injected clock cannot drive a kernel sleep (fds or a futex "  \
	  "deadline); use CLOCK_MONOTONIC or a custom wait")

/** Error codes. */
enum vsched_errno {
#define VSCHED__ERR_ENUM(name, val, text) VSCHED_##name = (val),
	VSCHED_ERRNO_MAP(VSCHED__ERR_ENUM)
#undef VSCHED__ERR_ENUM
};

/**
 * Text for a vsched return code.
 *
 * @param err a value returned by a vsched function (0, positive or negative).
 * @return a static string; never NULL. A kernel errno gets the C
 * library's description, prefixed by the errno's name where known;
 * unknown codes get a generic text.
 * Context: any thread (the strings are static; nothing is formatted).
 */
VSCHED_API const char *vsched_strerror(int err);

/**
 * True when `err` is one of vsched's own conditions (below -4095), false
 * for success, the four errno-valued codes and kernel errnos.
 * Context: any thread.
 */
static inline bool vsched_is_own_error(int err)
{
	return err <= -VSCHED__EOWN;
}

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_ERROR_H */
