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


/* `wakeups` and `kicks_sent` count posts only; a vsched_vcpu_kick() or a
 * timer re-arm that wakes or kicks the vCPU is not a post, and must neither
 * inflate them nor drive kicks_avoided (posts - kicks - wakeups) negative. */
static struct vsched_vcpu *sv;
static struct vsched_timer *stmr;
static int swaits;
static int wait_event_then_post(struct fake_host *h, uint32_t *w, uint32_t exp,
				uint64_t dl)
{
	(void)w, (void)exp, (void)dl;
	switch (swaits++) {
	case 0: /* an event source kicks with nothing to report */
		assert_int_equal(vsched_vcpu_kick(sv), 0);
		return 0;
	case 1: /* a timer moved into the future: the sleeper re-evaluates */
		assert_int_equal(vsched_timer_arm(stmr, h->now + 1000000000ull), 0);
		return 0;
	default: /* the post that ends the halt */
		assert_int_equal(vsched_post(sv, 1), 0);
		return 0;
	}
}

static void test_wakeups_count_posts_only(void **state)
{
	struct fake_host h = { .now = 1000, .on_wait = wait_event_then_post };
	struct vsched_host_ops ops = fake_ops(&h);
	struct vsched_timer_desc td = { .size = sizeof(td), .kind = 2 };
	(void)state;
	struct vsched_vm *vm = make_vm(&ops, 0);
	declare(vm, 1, "req", 1, 0, NULL, NULL, 0);
	declare(vm, 2, "tmr", 2, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	sv = make_vcpu(vm, 0);
	assert_int_equal(vsched_timer_create(sv, &td, &stmr), 0);
	swaits = 0;
	assert_int_equal(vsched_vcpu_block(sv, VSCHED_DEADLINE_NONE), VSCHED_WAKE_REQUEST);
	assert_int_equal(swaits, 3);
	assert_int_equal(vsched_service(sv), 1);
	/* In the guest: an event kick, then a post that needs no kick. */
	assert_int_equal(vsched_vcpu_enter(sv), 0);
	assert_int_equal(vsched_vcpu_kick(sv), 0);
	assert_int_equal(h.kicks, 1);
	assert_int_equal(vsched_post(sv, 1), 0);
	assert_int_equal(vsched_vcpu_exit(sv), 0);
	assert_int_equal(vsched_service(sv), 1);

	struct vsched_vcpu_stats s = stats_of(sv);
	assert_int_equal(s.kind[1].posted, 2);
	if (s.wakeups != 1 || s.kicks_sent != 0 || s.kicks_avoided != 1)
		fail_msg("2 posts (1 woke, 1 found EXITING): wakeups %llu (want 1), "
			 "kicks_sent %llu (want 0), kicks_avoided %llu (want 1)",
			 (unsigned long long)s.wakeups, (unsigned long long)s.kicks_sent,
			 (unsigned long long)s.kicks_avoided);
	/* The kick and the re-arm have counters of their own; KVM's
	 * halt_wakeup counts every wakeup of the halted vCPU. */
	assert_int_equal(s.event_kicks, 1);
	assert_int_equal(s.event_wakeups, 2);
	assert_int_equal(s.halt.halt_wakeup, 3);
	const struct vsched_stat_desc *d;
	unsigned n, nv;
	assert_int_equal(vsched_vcpu_stat_descs(&d, &n, &nv), 0);
	uint64_t *val = calloc(nv, sizeof(*val));
	assert_int_equal(vsched_vcpu_stat_values(sv, val, nv), 0);
	for (unsigned i = 0; i < n; i++) {
		uint64_t x = val[d[i].offset];
		if (!strcmp(d[i].name, "wakeups"))
			assert_int_equal(x, 1);
		if (!strcmp(d[i].name, "event_kicks"))
			assert_int_equal(x, 1);
		if (!strcmp(d[i].name, "event_wakeups"))
			assert_int_equal(x, 2);
		if (!strcmp(d[i].name, "halt_wakeup"))
			assert_int_equal(x, 3);
		if (!strcmp(d[i].name, "kicks_avoided"))
			assert_int_equal(x, 1);
	}
	free(val);
	vsched_vm_destroy(vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_descriptors_and_values),
		cmocka_unit_test(test_wakeups_count_posts_only),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
