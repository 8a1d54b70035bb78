/* SPDX-License-Identifier: MIT */
/* Every code of <vsched/error.h>: a name of its own (vsched_err_name), a
 * text (vsched_strerror), and a kernel errno explained with its name. */
#define _GNU_SOURCE /* strerrorname_np, strerrordesc_np */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 32)
#define HAVE_ERRNO_NAMES 1
#else
#define HAVE_ERRNO_NAMES 0
#endif

struct code {
	const char *name; /* without VSCHED_ */
	int val;
	const char *text;
};

#define CODE_ROW(name, val, text) { #name, (val), (text) },
static const struct code codes[] = { VSCHED_ERRNO_MAP(CODE_ROW) };
#undef CODE_ROW
#define N_CODES (sizeof(codes) / sizeof(codes[0]))

/* The first kernel errno explained in the process builds the table of
 * texts: threads that race to it all get the whole text. Runs first. */
static void *explain_eperm(void *arg)
{
	(void)arg;
	return (void *)vsched_strerror(-EPERM);
}

static void test_first_use_from_threads(void **state)
{
	(void)state;
	pthread_t t[4];
	const char *got[4];

	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, explain_eperm, NULL), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_join(t[i], (void **)&got[i]), 0);
	for (int i = 0; i < 4; i++) {
#if HAVE_ERRNO_NAMES
		assert_string_equal(got[i], "EPERM: Operation not permitted");
#endif
		assert_ptr_equal(got[i], got[0]);
	}
}

/* Each code: its own text, a distinct value, and a name that is the
 * enumerator's spelling for vsched's conditions, the errno's for the four
 * errno-valued codes. */
static void test_every_code_named(void **state)
{
	(void)state;
	char want[64];

	assert_int_equal(N_CODES, 13);
	for (unsigned i = 0; i < N_CODES; i++) {
		const struct code *c = &codes[i];

		assert_true(c->val < 0);
		assert_string_equal(vsched_strerror(c->val), c->text);
		if (vsched_is_own_error(c->val))
			snprintf(want, sizeof(want), "VSCHED_%s", c->name);
		else
			snprintf(want, sizeof(want), "%s", c->name);
		assert_string_equal(vsched_err_name(c->val), want);
		for (unsigned j = 0; j < i; j++) {
			assert_int_not_equal(c->val, codes[j].val);
			assert_string_not_equal(c->name, codes[j].name);
		}
	}
	assert_string_equal(vsched_err_name(VSCHED_EINVAL), "EINVAL");
	assert_string_equal(vsched_err_name(VSCHED_ERANGE), "ERANGE");
	assert_string_equal(vsched_err_name(VSCHED_ENOMEM), "ENOMEM");
	assert_string_equal(vsched_err_name(VSCHED_EEXIST), "EEXIST");
	assert_string_equal(vsched_err_name(VSCHED_EFINAL), "VSCHED_EFINAL");
	assert_string_equal(vsched_err_name(VSCHED_ENOTFINAL), "VSCHED_ENOTFINAL");
	assert_string_equal(vsched_err_name(VSCHED_ECYCLE), "VSCHED_ECYCLE");
	assert_string_equal(vsched_err_name(VSCHED_EORDER), "VSCHED_EORDER");
	assert_string_equal(vsched_err_name(VSCHED_EDESTROYED), "VSCHED_EDESTROYED");
	assert_string_equal(vsched_err_name(VSCHED_ESTATE), "VSCHED_ESTATE");
	assert_string_equal(vsched_err_name(VSCHED_ELIMIT), "VSCHED_ELIMIT");
	assert_string_equal(vsched_err_name(VSCHED_ENOHANDLER), "VSCHED_ENOHANDLER");
	assert_string_equal(vsched_err_name(VSCHED_ECLOCK), "VSCHED_ECLOCK");
}

/* The rule libuv keeps: a value and an errno's name go together. The four
 * errno-valued codes are exactly their errno; no own condition is spelled
 * like any errno the C library knows (VSCHED_EBUSY at -4097 was). */
static void test_no_errno_name_with_another_value(void **state)
{
	(void)state;
#if HAVE_ERRNO_NAMES
	for (unsigned i = 0; i < N_CODES; i++) {
		const struct code *c = &codes[i];

		if (!vsched_is_own_error(c->val)) {
			assert_string_equal(strerrorname_np(-c->val), c->name);
			continue;
		}
		for (int e = 1; e < VSCHED__EOWN; e++) {
			const char *n = strerrorname_np(e);

			if (n && strcmp(n, c->name) == 0)
				fail_msg("VSCHED_%s (%d) is spelled like errno %d",
					 c->name, c->val, e);
		}
	}
#else
	skip();
#endif
}

/* The deprecated names are the same values as the new ones. */
static void test_deprecated_aliases(void **state)
{
	(void)state;
	assert_int_equal(VSCHED_EBUSY, VSCHED_EFINAL);
	assert_int_equal(VSCHED_ELOOP, VSCHED_ECYCLE);
	assert_int_equal(VSCHED_ESHUTDOWN, VSCHED_EDESTROYED);
	assert_int_equal(VSCHED_ENOSPC, VSCHED_ELIMIT);
	assert_int_equal(VSCHED_EFINAL, -4097);
	assert_int_equal(VSCHED_ELIMIT, -4103);
}

/* A kernel errno: "NAME: description", whole, for every errno the C
 * library names; its name from vsched_err_name(). */
static void test_kernel_errno_prefixed(void **state)
{
	(void)state;
#if HAVE_ERRNO_NAMES
	char want[160];
	unsigned named = 0;

	for (int e = 1; e < VSCHED__EOWN; e++) {
		const char *n = strerrorname_np(e);
		const char *d = strerrordesc_np(e);
		int own = 0;

		for (unsigned i = 0; i < N_CODES; i++)
			own |= codes[i].val == -e;
		if (!n || !d) {
			assert_string_equal(vsched_err_name(-e), "UNKNOWN");
			continue;
		}
		assert_string_equal(vsched_err_name(-e), n);
		if (own)
			continue; /* vsched's own text (EINVAL ...) */
		snprintf(want, sizeof(want), "%s: %s", n, d);
		assert_string_equal(vsched_strerror(-e), want);
		named++;
	}
	assert_true(named >= 100); /* Linux has ~130 */
	assert_string_equal(vsched_strerror(-EBUSY), "EBUSY: Device or resource busy");
	assert_string_equal(vsched_err_name(-ENOSPC), "ENOSPC");
#else
	skip();
#endif
	/* In the kernel's range but no errno: a generic text, never NULL. */
	assert_non_null(vsched_strerror(-4000));
	assert_string_not_equal(vsched_strerror(-4000), "unknown vsched error");
}

static void test_success_and_unknown(void **state)
{
	(void)state;
	assert_string_equal(vsched_strerror(0), "success");
	assert_string_equal(vsched_strerror(3), "success");
	assert_string_equal(vsched_err_name(0), "OK");
	assert_string_equal(vsched_err_name(3), "OK");
	assert_string_equal(vsched_strerror(-99999), "unknown vsched error");
	assert_string_equal(vsched_err_name(-99999), "UNKNOWN");
	assert_string_equal(vsched_err_name(-VSCHED__EOWN), "UNKNOWN");
	assert_string_equal(vsched_err_name(-2147483647 - 1), "UNKNOWN");
	assert_string_equal(vsched_strerror(-2147483647 - 1), "unknown vsched error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_use_from_threads),
		cmocka_unit_test(test_every_code_named),
		cmocka_unit_test(test_no_errno_name_with_another_value),
		cmocka_unit_test(test_deprecated_aliases),
		cmocka_unit_test(test_kernel_errno_prefixed),
		cmocka_unit_test(test_success_and_unknown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
