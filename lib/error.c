/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* strerrordesc_np: a static string, no locale, no buffer */
#include <string.h>

#include <vsched/error.h>

const char *vsched_strerror(int err)
{
	if (err >= 0)
		return "success";
	switch (err) {
#define VSCHED__ERR_CASE(name, val, text) \
	case (val):                       \
		return text;
		VSCHED_ERRNO_MAP(VSCHED__ERR_CASE)
#undef VSCHED__ERR_CASE
	default:
		break;
	}
	if (err > -VSCHED__EOWN) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
		const char *d = strerrordesc_np(-err);

		if (d)
			return d;
#endif
		return "error from the kernel (an errno vsched passed through)";
	}
	return "unknown vsched error";
}
