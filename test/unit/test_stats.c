/* SPDX-License-Identifier: MIT */
/* The descriptor-based stats snapshot and its text and JSON writers. */
#include <stdio.h>
#include <stdlib.h>

#include "common.h"

static void test_descriptors_and_values(void **state)
{
	const struct vsched_stat_desc *d;
	unsigned n, nv;
	(void)state;
	assert_int_equal(vsched_vcpu_stat_descs(&d, &n, &nv), 0);
	assert_true(n > 10);
	/* Contiguous, non-overlapping, unique names. */
	unsigned next = 0;
	for (unsigned i = 0; i < n; i++) {
		assert_int_equal(d[i].offset, next);
		next += d[i].size;
		for (unsigned j = 0; j < i; j++)
			assert_string_not_equal(d[i].name, d[j].name);
		assert_true(d[i].type <= VSCHED_STAT_LOG2_HIST);
	}
	assert_int_equal(next, nv);

	struct vsched_vm *vm = make_vm(NULL, 0);
	declare(vm, 5, "PMI", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 2);
	vsched_post(v, 5);
	vsched_post(v, 5);
	vsched_service(v);
	assert_int_equal(vsched_vcpu_enter(v), 0);
	vsched_vcpu_exit(v);

	uint64_t *val = calloc(nv, sizeof(*val));
	assert_int_equal(vsched_vcpu_stat_values(v, val, nv), 0);
	for (unsigned i = 0; i < n; i++) {
		if (!strcmp(d[i].name, "entries"))
			assert_int_equal(val[d[i].offset], 1);
		if (!strcmp(d[i].name, "serviced"))
			assert_int_equal(val[d[i].offset + 5], 1);
		if (!strcmp(d[i].name, "coalesced"))
			assert_int_equal(val[d[i].offset + 5], 1);
		if (!strcmp(d[i].name, "kicks_avoided"))
			assert_int_equal(val[d[i].offset], 2);
	}
	assert_int_equal(vsched_vcpu_stat_values(v, val, nv - 1), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_stat_values(NULL, val, nv), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_stat_descs(NULL, &n, &nv), VSCHED_EINVAL);
	free(val);

	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_int_equal(vsched_vcpu_stats_write(v, f, VSCHED_STATS_TEXT), 0);
	fclose(f);
	assert_non_null(strstr(buf, "vcpu2.entries 1\n"));
	assert_non_null(strstr(buf, "vcpu2.serviced{kind=PMI} 1\n"));
	free(buf);
	f = open_memstream(&buf, &len);
	assert_int_equal(vsched_vcpu_stats_write(v, f, VSCHED_STATS_JSON), 0);
	fclose(f);
	assert_int_equal(buf[0], '{');
	assert_non_null(strstr(buf, "\"vcpu\": 2"));
	assert_non_null(strstr(buf, "\"serviced\": {\"PMI\": 1}"));
	assert_string_equal(buf + len - 2, "}\n");
	free(buf);
	assert_int_equal(vsched_vcpu_stats_write(v, NULL, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_stats_write(v, stdout, 9), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_stats_write(NULL, stdout, 0), VSCHED_EINVAL);
	vsched_vm_destroy(vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_descriptors_and_values),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
