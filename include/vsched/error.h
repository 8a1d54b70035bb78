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
 *   timerfd, KVM_RUN ...), or one that a call documents as its own answer
 *   with the errno's meaning (fd_del's -ENOENT for an fd never added,
 *   <vsched/block.h>; the governor's -EOPNOTSUPP, -ENOTTY, -EBADMSG,
 *   -ENODATA, <vsched/kvmgov.h>), or what a host op of the caller's own
 *   returned (a custom `wait`, <vsched/vm.h>).
 * - **Values below -4095** are vsched's own conditions (VSCHED_ENOTFINAL
 *   ...): no syscall returns them, so they never collide with a kernel
 *   error. vsched_is_own_error() tells them apart. Their names are vsched's
 *   own too: none of them is spelled like an errno.
 *
 * vsched_strerror() explains all three and vsched_err_name() names them.
 * Success values that an API returns besides 0 (a wake reason,
 * VSCHED_KVM_KICKED) are never negative.
 *
 * Changed in 0.2: the own conditions were negative errnos before.
 * Since 0.2 (no value changed): four own conditions that still carried an
 * errno's name got names of their own. VSCHED_EBUSY is now VSCHED_EFINAL,
 * VSCHED_ELOOP VSCHED_ECYCLE, VSCHED_ESHUTDOWN VSCHED_EDESTROYED and
 * VSCHED_ENOSPC VSCHED_ELIMIT; the old names stay as deprecated aliases of
 * the same values (define VSCHED_NO_DEPRECATED to drop them).
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

/**
 * X-macro of every error vsched itself returns: name (without VSCHED_),
 * value, text. The list only grows at the end. VSCHED_ECLOCK is deprecated:
 * no call returns it (an injected clock drives the kernel's sleeps by
 * intervals, <vsched/block.h>); it stays, its value reserved, so that code
 * naming it compiles.
 */
#define VSCHED_ERRNO_MAP(X)                                                   \
	X(EINVAL, -EINVAL, "invalid argument (NULL pointer, bad flags or size)")  \
	X(ERANGE, -ERANGE,                                                         \
	  "value out of range (request kind, interrupt vector, cap, name)")         \
	X(ENOMEM, -ENOMEM, "out of memory")                                       \
	X(EEXIST, -EEXIST, "already exists (kind declared twice, vCPU id in use)") \
	X(EFINAL, -(VSCHED__EOWN + 1), "request table already finalised")        \
	X(ENOTFINAL, -(VSCHED__EOWN + 2), "request table not finalised")         \
	X(ECYCLE, -(VSCHED__EOWN + 3),                                             \
	  "request table: the may-raise relation has a cycle (a kind that "       \
	  "raises itself needs VSCHED_REQ_RERAISE)")                              \
	X(EORDER, -(VSCHED__EOWN + 4),                                             \
	  "request table: a handler may raise a kind serviced before its own "    \
	  "(by priority, then kind number)")                                      \
	X(EDESTROYED, -(VSCHED__EOWN + 5),                                         \
	  "the object (vCPU, waiter) has been destroyed")                         \
	X(ESTATE, -(VSCHED__EOWN + 6),                                             \
	  "call not valid in its object's current state (a vCPU's mode, a waiter " \
	  "or timer service in use, a VM with live waiters)")                      \
	X(ELIMIT, -(VSCHED__EOWN + 7),                                             \
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
#ifndef VSCHED_NO_DEPRECATED
	/** @deprecated use VSCHED_EFINAL (the same value). */
	VSCHED_EBUSY = VSCHED_EFINAL,
	/** @deprecated use VSCHED_ECYCLE (the same value). */
	VSCHED_ELOOP = VSCHED_ECYCLE,
	/** @deprecated use VSCHED_EDESTROYED (the same value). */
	VSCHED_ESHUTDOWN = VSCHED_EDESTROYED,
	/** @deprecated use VSCHED_ELIMIT (the same value). */
	VSCHED_ENOSPC = VSCHED_ELIMIT,
#endif
};

/**
 * Text for a vsched return code.
 *
 * @param err a value returned by a vsched function (0, positive or negative).
 * @return a string that lives as long as the process; never NULL.
 * "success" for 0 and positive values; vsched's own text for the codes of
 * VSCHED_ERRNO_MAP (the four errno-valued ones included); for a kernel
 * errno, its name, a colon and the C library's description
 * ("EPERM: Operation not permitted") where the C library knows both
 * (glibc 2.32 or later), the description alone or a generic text where it
 * does not; "unknown vsched error" for any other value below -4095.
 * Context: any thread. The first kernel errno explained in the process
 * builds a table of the kernel's texts once (about 130 snprintf calls into
 * static storage, under pthread_once); no allocation, no syscall, no
 * locale, nothing formatted afterwards.
 */
VSCHED_API const char *vsched_strerror(int err);

/**
 * Name of a vsched return code, as libuv's uv_err_name().
 *
 * @param err a value returned by a vsched function (0, positive or negative).
 * @return a static string; never NULL. "OK" for 0 and positive values;
 * "VSCHED_EFINAL" ... for vsched's own conditions (the enumerator's
 * spelling); the errno's name ("EINVAL", "EPERM") for the four errno-valued
 * codes and for a kernel errno the C library can name; "UNKNOWN" for any
 * other value.
 * Context: any thread (static strings, nothing is formatted).
 */
VSCHED_API const char *vsched_err_name(int err);

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
