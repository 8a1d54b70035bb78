/* SPDX-License-Identifier: MIT */
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
		return "unknown vsched error";
	}
}
