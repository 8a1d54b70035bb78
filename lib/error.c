/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* strerrordesc_np, strerrorname_np: static strings */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <vsched/error.h>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
#define VSCHED__HAVE_ERRNO_NAMES 1
#else
#define VSCHED__HAVE_ERRNO_NAMES 0
#endif

/* The kernel's errnos go up to EHWPOISON (133) on every arch vsched
 * builds for; a larger one gets its description without the name. */
#ifdef EHWPOISON
#define VSCHED__KTEXT_N (EHWPOISON + 1)
#else
#define VSCHED__KTEXT_N 134
#endif
/* The longest "NAME: description" of glibc 2.36 is 57 characters. */
#define VSCHED__KTEXT_LEN 96

#if VSCHED__HAVE_ERRNO_NAMES
static char ktext[VSCHED__KTEXT_N][VSCHED__KTEXT_LEN];
static pthread_once_t ktext_once = PTHREAD_ONCE_INIT;

/* Fills "NAME: description" for every errno glibc names and describes.
 * Called once per process, by pthread_once, from the first thread that
 * explains a kernel errno; other callers wait in pthread_once. */
static void ktext_fill(void)
{
	for (int e = 1; e < VSCHED__KTEXT_N; e++) {
		const char *name = strerrorname_np(e);
		const char *desc = strerrordesc_np(e);

		if (name && desc)
			snprintf(ktext[e], sizeof(ktext[e]), "%s: %s", name, desc);
	}
}
#endif

/* Text of a kernel errno e (1..4095), or NULL when the C library knows
 * nothing of it. Context: any thread. */
static const char *kernel_text(int e)
{
#if VSCHED__HAVE_ERRNO_NAMES
	if (e < VSCHED__KTEXT_N) {
		pthread_once(&ktext_once, ktext_fill);
		if (ktext[e][0])
			return ktext[e];
	}
	return strerrordesc_np(e);
#else
	(void)e;
	return NULL;
#endif
}

const char *vsched_strerror(int err)
{
	const char *t;

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
		t = kernel_text(-err);
		return t ? t : "error from the kernel (an errno vsched passed through)";
	}
	return "unknown vsched error";
}

const char *vsched_err_name(int err)
{
	const char *n = NULL;

	if (err >= 0)
		return "OK";
	switch (err) {
	/* The four errno-valued codes are named as the errno they are. */
#define VSCHED__ERR_NAME(name, val, text) \
	case (val):                       \
		return (val) <= -VSCHED__EOWN ? "VSCHED_" #name : #name;
		VSCHED_ERRNO_MAP(VSCHED__ERR_NAME)
#undef VSCHED__ERR_NAME
	default:
		break;
	}
#if VSCHED__HAVE_ERRNO_NAMES
	if (err > -VSCHED__EOWN)
		n = strerrorname_np(-err);
#endif
	return n ? n : "UNKNOWN";
}
