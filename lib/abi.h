/* SPDX-License-Identifier: MIT */
/*
 * Extensible structs: the one rule for every public struct that starts with
 * a `size` member (include/vsched/version.h), as Linux's
 * copy_struct_from_user() does for its syscalls. Header-only so that
 * libvsched-kvm, which sees only the public API, applies the same rule.
 *
 * In (configs, parameters): a caller's struct shorter than the first
 * published layout (`min`) is refused; a shorter one than ours reads as if
 * its missing members were zero; a longer one is accepted only when every
 * byte we do not know is zero (a caller asking for something this library
 * cannot do must hear so).
 *
 * Out (stats, results): we write what both sides know, zero whatever the
 * caller's struct has beyond ours, and set `size` to what we wrote.
 */
#ifndef VSCHED_ABI_H
#define VSCHED_ABI_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <vsched/error.h>

/* The largest `size` any caller's struct may claim: a page, as Linux's
 * openat2 and clone3 (E2BIG above it). Far above every public struct
 * (struct vsched_vcpu_stats, the largest, is 3,496 bytes); a larger size
 * is garbage (an uninitialised struct), refused before we read or write a
 * byte behind the caller's struct. */
#define VSCHED__STRUCT_MAX 4096

/* Copy a caller's input struct `src` (its own `size` first) into `dst`, our
 * layout of `ours` bytes. @return 0 or VSCHED_EINVAL. */
static inline int vsched__struct_in(void *dst, size_t ours, const void *src,
				    size_t min)
{
	size_t theirs;

	if (!src)
		return VSCHED_EINVAL;
	memcpy(&theirs, src, sizeof(theirs));
	if (theirs < min || theirs > VSCHED__STRUCT_MAX)
		return VSCHED_EINVAL;
	memset(dst, 0, ours);
	if (theirs > ours) {
		const unsigned char *tail = (const unsigned char *)src + ours;

		for (size_t i = 0; i < theirs - ours; i++)
			if (tail[i])
				return VSCHED_EINVAL;
		theirs = ours;
	}
	memcpy(dst, src, theirs);
	memcpy(dst, &theirs, sizeof(theirs));
	return 0;
}

/* Copy our output struct `src` (`ours` bytes, `size` first) into the
 * caller's `dst`, whose `size` says how long it is. @return 0 or
 * VSCHED_EINVAL (NULL, or too short to hold even `size`). */
static inline int vsched__struct_out(void *dst, const void *src, size_t ours)
{
	size_t theirs, n;

	if (!dst)
		return VSCHED_EINVAL;
	memcpy(&theirs, dst, sizeof(theirs));
	if (theirs < sizeof(size_t) || theirs > VSCHED__STRUCT_MAX)
		return VSCHED_EINVAL;
	n = theirs < ours ? theirs : ours;
	memcpy(dst, src, n);
	if (theirs > ours)
		memset((unsigned char *)dst + ours, 0, theirs - ours);
	memcpy(dst, &n, sizeof(n));
	return 0;
}

/* The `min` of a struct: its layout up to and including `member`. */
#define VSCHED__SIZE_TO(type, member) \
	(offsetof(type, member) + sizeof(((type *)0)->member))

#endif /* VSCHED_ABI_H */
