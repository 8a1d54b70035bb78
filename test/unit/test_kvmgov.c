/* SPDX-License-Identifier: MIT */
/*
 * The halt-polling governor (<vsched/kvmgov.h>) on synthetic KVM stats:
 * each vCPU's stats fd is a memfd laid out as Documentation/virt/kvm/api.rst
 * describes (header, id string, descriptors with their names, data), and
 * the test updates its values the way KVM's kvm_vcpu_halt() does. The
 * ops table records every KVM_ENABLE_CAP instead of issuing it. Real KVM:
 * examples/adopt/kernel_irqchip.c (label kvm).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <vsched/kvmgov.h>

#include "kvmfake.h"

/* ---- decisions ---- */

/* Halts that end within a few us while KVM polls: the cap covers them. */
static void test_short_halts_open_cap(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;
	struct vsched_kvm_gov_stats st;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	st = gov_stats(g);
	assert_int_equal(st.model, VSCHED_KVM_GOV_HIST);
	assert_int_equal(st.cap_ns, UINT64_MAX); /* KVM's until a decision */
	assert_int_equal(k->sets, 0);
	for (unsigned t = 1; t <= 4; t++) {
		kvm_polled(&k->s[0], 5000, 1000);
		assert_true(vsched_kvm_gov_tick(g, t * 2 * SEC) > 0);
	}
	st = gov_stats(g);
	assert_int_equal(st.decisions, 4);
	assert_true(k->sets >= 1);
	assert_int_equal(st.cap_ns, k->cap);
	assert_true(k->cap >= 8192); /* the halts' bucket ends at 8192 ns */
	assert_true(k->cap <= 200000);
	assert_int_equal(st.halts, 4000);
	assert_int_equal(st.halts_polled, 4000);
	assert_int_equal(st.poll_success_ns, 4000 * 5000ull);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* Long idle halts where KVM polls its whole window in vain: no polling. */
static void test_long_halts_close_cap(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;
	struct vsched_kvm_gov_stats st;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	for (unsigned t = 1; t <= 4; t++) {
		kvm_slept(&k->s[0], 200000, 4000000, 200);
		assert_true(vsched_kvm_gov_tick(g, t * 2 * SEC) > 0);
	}
	st = gov_stats(g);
	assert_true(k->sets >= 1);
	assert_int_equal(k->cap, 0);
	assert_int_equal(st.cap_ns, 0);
	assert_int_equal(st.halts_slept, 800);
	assert_int_equal(st.polls_failed, 800);
	assert_int_equal(st.poll_fail_ns, 800 * 200000ull);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* The cap follows a change of load: short halts, then long ones, then
 * short again (each phase several ticks, the rate bound passed). */
static void test_follows_load(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;
	uint64_t t = 0;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	for (unsigned i = 0; i < 6; i++) {
		kvm_polled(&k->s[0], 3000, 500);
		vsched_kvm_gov_tick(g, t += 2 * SEC);
	}
	assert_true(k->cap >= 4096);
	/* The policy keeps polling while a few percent of its history are
	 * short halts: here the cap narrows to the short halts' bucket at the
	 * first tick of long ones and reaches 0 at the tenth (64 samples a
	 * tick). */
	for (unsigned i = 0; i < 16; i++) {
		kvm_slept(&k->s[0], k->cap, 3000000, 500);
		vsched_kvm_gov_tick(g, t += 2 * SEC);
	}
	assert_int_equal(k->cap, 0);
	/* With the cap at 0 KVM polls no more: 20 us halts all sleep (10 us
	 * of wakeup on top), and the wait histogram still shows them short.
	 * A KVM that obeys the cap: it polls up to the cap, and catches the
	 * halt once the cap reaches 20 us. With long halts still in the
	 * history the cap reopens one bucket past KVM's failed polls per
	 * change (512 ns, 1 us, 2 us ...), as KVM's own grow does. */
	for (unsigned i = 0; i < 10; i++) {
		if (k->cap >= 20000)
			kvm_polled(&k->s[0], 20000, 500);
		else
			kvm_slept(&k->s[0], k->cap, 20000 - k->cap + 10000, 500);
		vsched_kvm_gov_tick(g, t += 2 * SEC);
		if (i == 0)
			assert_int_equal(k->cap, 512);
	}
	assert_true(k->cap >= 20000);
	assert_int_equal(gov_stats(g).cap_changes, k->sets);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* A closed loop with a KVM that obeys the cap: every halt is 20 us; KVM
 * polls up to the cap and catches it when the cap reaches 20 us, else it
 * sleeps (10 us of wakeup on top). From a cap of 0 set by hand, the halts
 * that slept are shorter than the policy's wake_cost_ns: learned as
 * caught by any poll, they open the cap. */
static void test_reopens_from_zero(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;
	uint64_t t = 0;
	unsigned ticks = 0;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	assert_int_equal(vsched_kvm_gov_set_cap(g, 0, 0), 0);
	while (k->cap < 20000 && ticks < 100) {
		if (k->cap)
			kvm_slept(&k->s[0], k->cap, 20000 - k->cap + 10000, 500);
		else
			kvm_slept(&k->s[0], 0, 30000, 500);
		vsched_kvm_gov_tick(g, t += 2 * SEC);
		ticks++;
	}
	/* A fresh history has no long halt: the largest of the equally
	 * good windows, at the first sample. */
	assert_true(k->cap >= 20000);
	assert_int_equal(ticks, 1);
	/* Then the halts are caught, and the cap stays open. */
	for (unsigned i = 0; i < 10; i++) {
		kvm_polled(&k->s[0], 20000, 500);
		vsched_kvm_gov_tick(g, t += 2 * SEC);
	}
	assert_true(k->cap >= 20000);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* A VM-wide cap: the largest of the vCPUs' windows. */
static void test_cap_is_largest_vcpu_window(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 2);
	struct vsched_kvm_gov *g;

	(void)state;
	assert_int_equal(gov_new(k, 2, NULL, &g), 0);
	for (unsigned t = 1; t <= 4; t++) {
		kvm_polled(&k->s[0], 5000, 1000);
		kvm_slept(&k->s[1], 200000, 4000000, 200);
		vsched_kvm_gov_tick(g, t * 2 * SEC);
	}
	assert_true(k->cap >= 8192);
	assert_int_equal(gov_stats(g).halts, 4 * 1200);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* Without the histograms, the sums: the same decisions, coarser. */
static void test_sums_model(void **state)
{
	struct fake_kvm *k = fake_new(SUMS, 1);
	struct vsched_kvm_gov *g;
	uint64_t t = 0;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	assert_int_equal(gov_stats(g).model, VSCHED_KVM_GOV_SUMS);
	for (unsigned i = 0; i < 4; i++) {
		kvm_polled(&k->s[0], 5000, 1000);
		vsched_kvm_gov_tick(g, t += 2 * SEC);
	}
	assert_true(k->cap >= 8192);
	for (unsigned i = 0; i < 16; i++) {
		kvm_slept(&k->s[0], k->cap, 4000000, 200);
		vsched_kvm_gov_tick(g, t += 2 * SEC);
	}
	assert_int_equal(k->cap, 0);
	assert_int_equal(gov_stats(g).halts_slept, 16 * 200);
	/* KVM polled in vain until the cap reached 0, and no more after. */
	assert_true(gov_stats(g).polls_failed > 0);
	assert_true(gov_stats(g).polls_failed < 16 * 200);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* force_sums picks the sums even where the histograms exist. */
static void test_force_sums(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov_config c = { .size = sizeof(c), .force_sums = true };
	struct vsched_kvm_gov *g;

	(void)state;
	assert_int_equal(gov_new(k, 1, &c, &g), 0);
	assert_int_equal(gov_stats(g).model, VSCHED_KVM_GOV_SUMS);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* A histogram of another shape (linear) counts as missing: the sums. */
static void test_wrong_shape_hist_is_missing(void **state)
{
	struct fdesc d[sizeof(full) / sizeof(full[0])];
	struct fake_kvm *k;
	struct vsched_kvm_gov *g;

	(void)state;
	memcpy(d, full, sizeof(d));
	d[8].flags = T_LINEAR | U_SEC; /* halt_poll_fail_hist */
	k = fake_new(d, sizeof(d) / sizeof(d[0]), 1);
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	assert_int_equal(gov_stats(g).model, VSCHED_KVM_GOV_SUMS);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
	/* Seconds rather than nanoseconds (exponent 0) is no ns histogram. */
	memcpy(d, full, sizeof(d));
	d[9].exponent = 0; /* halt_wait_hist */
	k = fake_new(d, sizeof(d) / sizeof(d[0]), 1);
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	assert_int_equal(gov_stats(g).model, VSCHED_KVM_GOV_SUMS);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* Polls whose wakeup found nothing to do teach nothing. */
static void test_invalid_polls_ignored(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;
	struct vsched_kvm_gov_stats st;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	kvm_polled(&k->s[0], 5000, 100);
	synth_add(&k->s[0], "halt_poll_invalid", 0, 100);
	assert_int_equal(vsched_kvm_gov_tick(g, 2 * SEC), VSCHED_KVM_GOV_SAMPLED);
	st = gov_stats(g);
	assert_int_equal(st.halts_invalid, 100);
	assert_int_equal(st.decisions, 0);
	assert_int_equal(k->sets, 0);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* A tick whose halts add up past 2^64 (a vCPU's buckets jump by 2^63 and
 * more: garbage, not halts) is a read error, as counters going backwards
 * are, and the next tick learns again. Found by test/fuzz/fuzz_kvmgov.c:
 * the tick's sum wrapped, and with two buckets of 3 x 2^62 the share of
 * each class came out above the samples to feed and the loop handing out
 * the remainder ran for 2^64 rounds (a hang). */
static void test_halts_past_2_64(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;
	struct vsched_kvm_gov_stats st;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	synth_add(&k->s[0], "halt_poll_success_hist", 3, 1ull << 63);
	synth_add(&k->s[0], "halt_poll_success_hist", 5, 1ull << 63);
	assert_int_equal(vsched_kvm_gov_tick(g, 2 * SEC), VSCHED_KVM_GOV_SAMPLED);
	st = gov_stats(g);
	assert_int_equal(st.read_errors, 1);
	assert_int_equal(st.halts, 0);
	assert_int_equal(st.decisions, 0);
	/* The fuzzer's shape: 3 x 2^62 in a bucket of each class. */
	synth_add(&k->s[0], "halt_poll_success_hist", 3, 3ull << 62);
	synth_add(&k->s[0], "halt_wait_hist", 20, 3ull << 62);
	assert_int_equal(vsched_kvm_gov_tick(g, 4 * SEC), VSCHED_KVM_GOV_SAMPLED);
	st = gov_stats(g);
	assert_int_equal(st.read_errors, 2);
	assert_int_equal(st.halts, 0);
	assert_int_equal(st.decisions, 0);
	/* Then halts as usual: learned, from the values last read. */
	kvm_polled(&k->s[0], 5000, 1000);
	assert_int_equal(vsched_kvm_gov_tick(g, 6 * SEC), VSCHED_KVM_GOV_CHANGED);
	st = gov_stats(g);
	assert_int_equal(st.read_errors, 2);
	assert_int_equal(st.halts, 1000);
	assert_int_equal(st.decisions, 1);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* One bucket that jumps by 2^64 - 1 with an invalid poll: the polled
 * halts less the invalid one in proportion stay 2^64 - 2 (the share in
 * double rounds to 2^64, which does not convert to uint64_t: UBSan's
 * float-cast-overflow, and 0 on x86-64, so no decision). */
static void test_bucket_near_2_64(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;
	struct vsched_kvm_gov_stats st;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	synth_add(&k->s[0], "halt_poll_success_hist", 3, UINT64_MAX);
	synth_add(&k->s[0], "halt_poll_invalid", 0, 1);
	assert_int_equal(vsched_kvm_gov_tick(g, 2 * SEC), VSCHED_KVM_GOV_CHANGED);
	st = gov_stats(g);
	assert_int_equal(st.read_errors, 0);
	assert_int_equal(st.halts_polled, UINT64_MAX);
	assert_int_equal(st.halts_invalid, 1);
	assert_int_equal(st.decisions, 1);
	assert_true(k->cap >= 4 && k->cap <= 200000);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* A tick before the interval reads nothing. */
static void test_interval(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov_config c = { .size = sizeof(c),
					   .interval_ns = 50000000 };
	struct vsched_kvm_gov *g;

	(void)state;
	assert_int_equal(gov_new(k, 1, &c, &g), 0);
	assert_int_equal(vsched_kvm_gov_tick(g, SEC), VSCHED_KVM_GOV_SAMPLED);
	assert_int_equal(vsched_kvm_gov_tick(g, SEC + 49999999), VSCHED_KVM_GOV_IDLE);
	assert_int_equal(gov_stats(g).samples, 1);
	assert_int_equal(vsched_kvm_gov_tick(g, SEC + 50000000), VSCHED_KVM_GOV_SAMPLED);
	assert_int_equal(gov_stats(g).samples, 2);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* Hysteresis: a window within the band of the cap leaves it; one outside
 * moves it. FIXED's window is max_ns whatever the halts. */
static void test_hysteresis(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_poll_params p;
	struct vsched_kvm_gov_config c = { .size = sizeof(c), .poll = &p,
					   .hysteresis_pct = 20 };
	struct vsched_kvm_gov *g;
	struct vsched_kvm_gov_stats st;

	(void)state;
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 100000, &p), 0);
	assert_int_equal(gov_new(k, 1, &c, &g), 0);
	assert_int_equal(vsched_kvm_gov_set_cap(g, 120000, 0), 0);
	assert_int_equal(k->sets, 1);
	/* 100 us against 120 us: 16.7% of the larger, inside 20%. */
	kvm_polled(&k->s[0], 5000, 10);
	assert_int_equal(vsched_kvm_gov_tick(g, 10 * SEC), VSCHED_KVM_GOV_SAMPLED);
	st = gov_stats(g);
	assert_int_equal(st.held_hysteresis, 1);
	assert_int_equal(st.window_ns, 100000);
	assert_int_equal(st.cap_ns, 120000);
	assert_int_equal(k->sets, 1);
	/* 100 us against 130 us: 23%, outside. */
	assert_int_equal(vsched_kvm_gov_set_cap(g, 130000, 10 * SEC), 0);
	kvm_polled(&k->s[0], 5000, 10);
	assert_int_equal(vsched_kvm_gov_tick(g, 20 * SEC), VSCHED_KVM_GOV_CHANGED);
	assert_int_equal(k->cap, 100000);
	assert_int_equal(gov_stats(g).cap_ns, 100000);
	/* Zero against non-zero always leaves the band. */
	assert_int_equal(vsched_kvm_gov_set_cap(g, 0, 20 * SEC), 0);
	kvm_polled(&k->s[0], 5000, 10);
	assert_int_equal(vsched_kvm_gov_tick(g, 30 * SEC), VSCHED_KVM_GOV_CHANGED);
	assert_int_equal(k->cap, 100000);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* The rate bound: no change sooner than min_change_ns after the last. */
static void test_rate_bound(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_poll_params p;
	struct vsched_kvm_gov_config c = { .size = sizeof(c), .poll = &p,
					   .interval_ns = 1000,
					   .min_change_ns = SEC };
	struct vsched_kvm_gov *g;
	struct vsched_kvm_gov_stats st;

	(void)state;
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 100000, &p), 0);
	assert_int_equal(gov_new(k, 1, &c, &g), 0);
	assert_int_equal(vsched_kvm_gov_set_cap(g, 0, 5 * SEC), 0);
	for (uint64_t t = 5 * SEC + 1000; t < 6 * SEC; t += SEC / 8) {
		kvm_polled(&k->s[0], 5000, 10);
		assert_int_equal(vsched_kvm_gov_tick(g, t), VSCHED_KVM_GOV_SAMPLED);
	}
	st = gov_stats(g);
	assert_int_equal(st.held_rate, 8);
	assert_int_equal(st.cap_ns, 0);
	assert_int_equal(k->sets, 1);
	kvm_polled(&k->s[0], 5000, 10);
	assert_int_equal(vsched_kvm_gov_tick(g, 6 * SEC), VSCHED_KVM_GOV_CHANGED);
	assert_int_equal(k->cap, 100000);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* A failed KVM_ENABLE_CAP is returned and counted; the cap stays. */
static void test_set_cap_fails(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	k->set_rc = -EINVAL;
	kvm_polled(&k->s[0], 5000, 100);
	assert_int_equal(vsched_kvm_gov_tick(g, 2 * SEC), -EINVAL);
	assert_int_equal(gov_stats(g).set_errors, 1);
	assert_int_equal(gov_stats(g).cap_ns, UINT64_MAX);
	assert_int_equal(vsched_kvm_gov_set_cap(g, 1ull << 32, 0), VSCHED_ERANGE);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* ---- attach errors ---- */

static void test_no_capability(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g = NULL;
	int rc;

	(void)state;
	k->check_rc = 0;
	rc = gov_new(k, 1, NULL, &g);
	assert_int_equal(rc, -EOPNOTSUPP);
	assert_null(g);
	assert_string_not_equal(vsched_strerror(rc), "unknown vsched error");
	k->check_rc = -ENOTTY;
	assert_int_equal(gov_new(k, 1, NULL, &g), -ENOTTY);
	fake_free(k);
}

static void test_no_stats_fd(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g = NULL;

	(void)state;
	k->stats_rc = -ENOTTY;
	assert_int_equal(gov_new(k, 1, NULL, &g), -ENOTTY);
	assert_null(g);
	fake_free(k);
}

/* Stats fds the VMM opened itself (KVM_GET_STATS_FD waits for a vCPU in
 * KVM_RUN): duplicated, KVM_GET_STATS_FD not called, the VMM's kept. */
static void test_given_stats_fds(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 2);
	int sfds[2] = { k->s[0].fd, k->s[1].fd }, bad[2] = { k->s[0].fd, -1 };
	struct vsched_kvm_gov_config c = { .size = sizeof(c), .stats_fds = sfds };
	struct vsched_kvm_gov *g = NULL;

	(void)state;
	k->stats_rc = -ENOTTY; /* KVM_GET_STATS_FD would fail */
	assert_int_equal(gov_new(k, 2, &c, &g), 0);
	kvm_polled(&k->s[1], 5000, 100);
	assert_int_equal(vsched_kvm_gov_tick(g, 2 * SEC), VSCHED_KVM_GOV_CHANGED);
	assert_int_equal(gov_stats(g).halts, 100);
	vsched_kvm_gov_destroy(g);
	assert_true(fcntl(sfds[0], F_GETFD) >= 0); /* still the VMM's */
	assert_true(fcntl(sfds[1], F_GETFD) >= 0);
	c.stats_fds = bad;
	assert_int_equal(gov_new(k, 2, &c, &g), -EBADF);
	fake_free(k);
}

static void test_no_halt_stats(void **state)
{
	static const struct fdesc none[] = { CNT("exits"), CNT("halt_wakeup") };
	struct fake_kvm *k = fake_new(none, 2, 1);
	struct vsched_kvm_gov *g = NULL;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), -ENODATA);
	fake_free(k);
}

static void test_bad_args(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov_ops ops = { f_check, f_set, f_stats_fd, f_pread,
					  NULL, k };
	struct vsched_kvm_gov_config c = { .size = sizeof(c), .ops = &ops };
	struct vsched_kvm_gov *g = NULL;
	struct vsched_poll_params p;

	(void)state;
	assert_int_equal(vsched_kvm_gov_create(-1, vcpu_fds, 1, NULL, &g), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_gov_create(3, NULL, 1, NULL, &g), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_gov_create(3, vcpu_fds, 0, NULL, &g), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_gov_create(3, vcpu_fds, 1, NULL, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_gov_create(3, vcpu_fds, 1, &c, &g), VSCHED_EINVAL);
	c.size = 4;
	assert_int_equal(vsched_kvm_gov_create(3, vcpu_fds, 1, &c, &g), VSCHED_EINVAL);
	c = (struct vsched_kvm_gov_config){ .size = sizeof(c), .hysteresis_pct = 101 };
	assert_int_equal(gov_new(k, 1, &c, &g), VSCHED_EINVAL);
	vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 100000, &p);
	p.policy = 77;
	c = (struct vsched_kvm_gov_config){ .size = sizeof(c), .poll = &p };
	assert_int_equal(gov_new(k, 1, &c, &g), VSCHED_EINVAL);
	assert_null(g);
	assert_int_equal(vsched_kvm_gov_tick(NULL, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_gov_set_cap(NULL, 0, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_gov_read_stats(NULL, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_gov_destroy(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_gov_stats_write(NULL, stdout, 0), VSCHED_EINVAL);
	fake_free(k);
}

/* ---- malformed stats fds: refused with -EBADMSG, never a crash ---- */

/* Attach on vCPU 0's stats fd after `mutate` changed its bytes. */
static int attach_mutated(void (*mutate)(struct synth *s))
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g = NULL;
	int rc;

	mutate(&k->s[0]);
	rc = gov_new(k, 1, NULL, &g);
	if (rc == 0)
		vsched_kvm_gov_destroy(g);
	else
		assert_null(g);
	fake_free(k);
	return rc;
}

static void pw32(struct synth *s, off_t at, uint32_t v)
{
	assert_int_equal(pwrite(s->fd, &v, 4, at), 4);
}

static uint32_t desc_at(unsigned i)
{
	return 24 + NAME_SIZE + i * (16 + NAME_SIZE);
}

static void m_none(struct synth *s) { (void)s; }
static void m_truncate_header(struct synth *s) { assert_int_equal(ftruncate(s->fd, 10), 0); }
static void m_name_size_zero(struct synth *s) { pw32(s, 4, 0); }
static void m_name_size_huge(struct synth *s) { pw32(s, 4, 0x7fffffff); }
static void m_num_desc_huge(struct synth *s) { pw32(s, 8, 0xffffffff); }
static void m_num_desc_zero(struct synth *s) { pw32(s, 8, 0); }
static void m_desc_offset_inside_header(struct synth *s) { pw32(s, 16, 8); }
static void m_desc_offset_past_end(struct synth *s) { pw32(s, 16, 0xfffffff0); }
static void m_data_offset_past_end(struct synth *s) { pw32(s, 20, 0xfffff000); }
static void m_truncate_descs(struct synth *s)
{
	assert_int_equal(ftruncate(s->fd, desc_at(5) + 20), 0);
}
static void m_truncate_data(struct synth *s)
{
	assert_int_equal(ftruncate(s->fd, s->data_offset + 16), 0);
}
static void m_id_no_nul(struct synth *s)
{
	char x[NAME_SIZE];

	memset(x, 'k', sizeof(x));
	assert_int_equal(pwrite(s->fd, x, sizeof(x), 24), (ssize_t)sizeof(x));
}
static void m_name_overflow(struct synth *s)
{
	char x[NAME_SIZE];

	memset(x, 'h', sizeof(x)); /* fills the field, no NUL */
	assert_int_equal(pwrite(s->fd, x, sizeof(x), desc_at(3) + 16),
			 (ssize_t)sizeof(x));
}
/* halt_poll_success_hist (descriptor 7) points far outside the data. */
static void m_desc_points_outside(struct synth *s) { pw32(s, desc_at(7) + 8, 0x7ffffff8); }
/* ... or just past the end of what the fd holds. */
static void m_desc_points_past_end(struct synth *s)
{
	pw32(s, desc_at(7) + 8, s->off[11] + 8);
}
static void m_desc_misaligned(struct synth *s) { pw32(s, desc_at(7) + 8, s->off[7] + 3); }

static void test_malformed(void **state)
{
	static const struct {
		const char *what;
		void (*mutate)(struct synth *s);
		int rc;
	} cases[] = {
		{ "intact", m_none, 0 },
		{ "header truncated", m_truncate_header, -EBADMSG },
		{ "name_size 0", m_name_size_zero, -EBADMSG },
		{ "name_size huge", m_name_size_huge, -EBADMSG },
		{ "num_desc huge", m_num_desc_huge, -EBADMSG },
		{ "num_desc 0", m_num_desc_zero, -EBADMSG },
		{ "desc_offset in the header", m_desc_offset_inside_header, -EBADMSG },
		{ "desc_offset past the end", m_desc_offset_past_end, -EBADMSG },
		{ "data_offset past the end", m_data_offset_past_end, -EBADMSG },
		{ "descriptors truncated", m_truncate_descs, -EBADMSG },
		{ "data truncated", m_truncate_data, -EBADMSG },
		{ "id without NUL", m_id_no_nul, -EBADMSG },
		{ "name overflows its field", m_name_overflow, -EBADMSG },
		{ "descriptor points outside", m_desc_points_outside, -EBADMSG },
		{ "descriptor points past the end", m_desc_points_past_end, -EBADMSG },
		{ "descriptor misaligned", m_desc_misaligned, -EBADMSG },
	};

	(void)state;
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = attach_mutated(cases[i].mutate);

		if (rc != cases[i].rc)
			fail_msg("%s: got %d (%s), want %d", cases[i].what, rc,
				 vsched_strerror(rc), cases[i].rc);
	}
}

/* Every prefix of a valid stats fd: refused, or (the whole file) taken. */
static void test_every_truncation(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	off_t len = lseek(k->s[0].fd, 0, SEEK_END);
	/* What the governor reads: up to the end of halt_wait_hist (the
	 * statistics after it are not read). */
	off_t need = k->s[0].data_offset + k->s[0].off[10];

	(void)state;
	for (off_t n = 0; n <= len; n++) {
		struct vsched_kvm_gov *g = NULL;
		int rc;

		k->read_limit = (size_t)n ? (size_t)n : 1;
		rc = gov_new(k, 1, NULL, &g);
		if (n >= need) {
			assert_int_equal(rc, 0);
			vsched_kvm_gov_destroy(g);
		} else if (rc != -EBADMSG) {
			fail_msg("a stats fd cut at %lld of %lld: %d", (long long)n,
				 (long long)len, rc);
		}
	}
	fake_free(k);
}

/* A stats fd that shrinks after attach, or counters that go backwards:
 * the tick reports it, nothing is decided from it. */
static void test_tick_read_errors(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	kvm_polled(&k->s[0], 5000, 100);
	assert_int_equal(vsched_kvm_gov_tick(g, 2 * SEC), VSCHED_KVM_GOV_CHANGED);
	/* Backwards: a counter lower than last time. */
	synth_add(&k->s[0], "halt_attempted_poll", 0, (uint64_t)-50);
	assert_int_equal(vsched_kvm_gov_tick(g, 4 * SEC), VSCHED_KVM_GOV_SAMPLED);
	assert_int_equal(gov_stats(g).read_errors, 1);
	assert_int_equal(gov_stats(g).decisions, 1);
	/* Truncated under us. */
	k->read_limit = k->s[0].data_offset + 8;
	assert_int_equal(vsched_kvm_gov_tick(g, 6 * SEC), -EBADMSG);
	assert_int_equal(gov_stats(g).read_errors, 2);
	assert_int_equal(gov_stats(g).decisions, 1);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* ---- stats and the thread ---- */

static void test_stats_write(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov *g;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	assert_int_equal(gov_new(k, 1, NULL, &g), 0);
	kvm_polled(&k->s[0], 5000, 100);
	vsched_kvm_gov_tick(g, 2 * SEC);
	f = open_memstream(&buf, &len);
	assert_int_equal(vsched_kvm_gov_stats_write(g, f, VSCHED_STATS_TEXT), 0);
	assert_int_equal(vsched_kvm_gov_stats_write(g, f, VSCHED_STATS_JSON), 0);
	assert_int_equal(vsched_kvm_gov_stats_write(g, f, 7), VSCHED_EINVAL);
	fclose(f);
	assert_non_null(strstr(buf, "kvm_gov.halts 100\n"));
	assert_non_null(strstr(buf, "\"decisions\":1,"));
	free(buf);
	vsched_kvm_gov_destroy(g);
	fake_free(k);
}

/* With `thread`, the governor ticks by itself; tick() is refused. */
static void test_thread(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov_config c = { .size = sizeof(c), .thread = true,
					   .interval_ns = 1000000 };
	struct vsched_kvm_gov *g;
	struct timespec ms = { 0, 1000000 };

	(void)state;
	kvm_polled(&k->s[0], 5000, 100); /* before attach: not counted */
	assert_int_equal(gov_new(k, 1, &c, &g), 0);
	assert_int_equal(vsched_kvm_gov_tick(g, 0), VSCHED_EINVAL);
	kvm_polled(&k->s[0], 5000, 100);
	for (unsigned i = 0; i < 30000 && !gov_stats(g).decisions; i++)
		nanosleep(&ms, NULL);
	assert_int_equal(gov_stats(g).decisions, 1);
	assert_int_equal(gov_stats(g).halts, 100);
	assert_int_equal(k->sets, 1);
	assert_int_equal(vsched_kvm_gov_destroy(g), 0);
	fake_free(k);
}

/* An interval near 2^64 ("tick once, then never": the config takes any
 * value) wrapped the thread's next wakeup into the past: it never waited,
 * and ticked at full CPU holding the governor's lock, which it releases
 * only inside its timed wait, so destroy (and read_stats) blocked for ever
 * (lib/host/kvmgov.c, gov_thread(); found by helper-review2). A destroy
 * that has not returned 5 s after the call is the failure: a hang guard,
 * a correct one returns at once. */
struct destroyer {
	struct vsched_kvm_gov *g;
	atomic_int done;
};

static void *destroy_gov(void *p)
{
	struct destroyer *d = p;

	vsched_kvm_gov_destroy(d->g);
	atomic_store(&d->done, 1);
	return NULL;
}

static void test_thread_far_interval(void **state)
{
	struct fake_kvm *k = fake_new(FULL, 1);
	struct vsched_kvm_gov_config c = { .size = sizeof(c), .thread = true,
					   .interval_ns = UINT64_MAX };
	struct destroyer d = { 0 };
	struct timespec ms = { 0, 1000000 };
	pthread_t th;

	(void)state;
	assert_int_equal(gov_new(k, 1, &c, &d.g), 0);
	assert_int_equal(pthread_create(&th, NULL, destroy_gov, &d), 0);
	for (unsigned i = 0; i < 5000 && !atomic_load(&d.done); i++)
		nanosleep(&ms, NULL);
	if (!atomic_load(&d.done)) {
		/* The spinning thread and the blocked destroy stay: the
		 * process ends with the test run. */
		pthread_detach(th);
		fail_msg("vsched_kvm_gov_destroy() never returned: the ticking "
			 "thread spins with the governor's lock held");
	}
	pthread_join(th, NULL);
	fake_free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_short_halts_open_cap),
		cmocka_unit_test(test_long_halts_close_cap),
		cmocka_unit_test(test_follows_load),
		cmocka_unit_test(test_reopens_from_zero),
		cmocka_unit_test(test_cap_is_largest_vcpu_window),
		cmocka_unit_test(test_sums_model),
		cmocka_unit_test(test_force_sums),
		cmocka_unit_test(test_wrong_shape_hist_is_missing),
		cmocka_unit_test(test_invalid_polls_ignored),
		cmocka_unit_test(test_halts_past_2_64),
		cmocka_unit_test(test_bucket_near_2_64),
		cmocka_unit_test(test_interval),
		cmocka_unit_test(test_hysteresis),
		cmocka_unit_test(test_rate_bound),
		cmocka_unit_test(test_set_cap_fails),
		cmocka_unit_test(test_no_capability),
		cmocka_unit_test(test_no_stats_fd),
		cmocka_unit_test(test_given_stats_fds),
		cmocka_unit_test(test_no_halt_stats),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_every_truncation),
		cmocka_unit_test(test_tick_read_errors),
		cmocka_unit_test(test_stats_write),
		cmocka_unit_test(test_thread),
		cmocka_unit_test(test_thread_far_interval),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
