/* SPDX-License-Identifier: MIT */
/**
 * @file error.h
 * @brief Error codes: every vsched function returns 0 or a positive result on
 * success and one of these negative values on failure.
 *
 * The values are negative errno codes, so they can be passed through code
 * that already speaks errno; vsched_strerror() gives vsched's own meaning.
 */
#ifndef VSCHED_ERROR_H
#define VSCHED_ERROR_H

#include <errno.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/** X-macro of every error vsched returns: name, value, text. */
#define VSCHED_ERRNO_MAP(X)                                                   \
	X(EINVAL, -EINVAL, "invalid argument (NULL pointer, bad flags or size)")  \
	X(ERANGE, -ERANGE, "request kind out of range or not declared")           \
	X(ENOMEM, -ENOMEM, "out of memory")                                       \
	X(EEXIST, -EEXIST, "already exists (kind declared twice, vCPU id in use)") \
	X(EBUSY, -EBUSY, "request table already finalised")                      \
	X(ENOTFINAL, -EPERM, "request table not finalised")                      \
	X(ELOOP, -ELOOP, "request table: the may-raise relation has a cycle")    \
	X(EORDER, -EDEADLK,                                                        \
	  "request table: a handler may raise a kind serviced before its own")    \
	X(ESHUTDOWN, -ESHUTDOWN, "vCPU has been destroyed")                      \
	X(ESTATE, -EBADFD, "call not valid in the vCPU's current mode")          \
	X(ENOSPC, -ENOSPC, "vCPU id beyond the VM's max_vcpus")

/** Error codes (negative errno values). */
enum vsched_errno {
#define VSCHED__ERR_ENUM(name, val, text) VSCHED_##name = (val),
	VSCHED_ERRNO_MAP(VSCHED__ERR_ENUM)
#undef VSCHED__ERR_ENUM
};

/**
 * Text for a vsched return code.
 *
 * @param err a value returned by a vsched function (0, positive or negative).
 * @return a static string; never NULL. Unknown codes get a generic text.
 * Context: any thread.
 */
VSCHED_API const char *vsched_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_ERROR_H */
