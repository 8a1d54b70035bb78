/* SPDX-License-Identifier: MIT */
/*
 * One test body for every variant of the hot paths: built once as is (the
 * exported functions) and once with -DVSCHED_INLINE (the static inline
 * ones of <vsched/inline.h>, compiled into this program), as test_hotpath
 * and test_hotpath_inline. Post, service, enter and exit, their slow
 * paths (kick, coalescing, cancelled entry, WAIT, payload kinds, errors,
 * destroy) and the hot layout that the inline code reads.
 */
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "common.h"

#ifdef VSCHED_INLINE
#define VARIANT "inline"
#else
#define VARIANT "exported"
#endif

enum { K_REQ = 1, K_LATE = 2, K_WAIT = 3, K_PAY = 4, K_UNDECLARED = 9 };

/* The post and the entry as a function each, for test/tools/check-fences.sh
 * (in test_hotpath_inline they hold the inline code and its fences). */
__attribute__((noinline)) int hot_post(struct vsched_vcpu *v, unsigned kind);
__attribute__((noinline)) int hot_enter(struct vsched_vcpu *v);

__attribute__((noinline)) int hot_post(struct vsched_vcpu *v, unsigned kind)
{
	return vsched_post(v, kind);
}

__attribute__((noinline)) int hot_enter(struct vsched_vcpu *v)
{
	return vsched_vcpu_enter(v);
}

static unsigned handled;

static void count_handler(struct vsched_vcpu *v, unsigned k,
			  struct vsched_payload *p, void *arg)
{
	(void)v, (void)k, (void)p, (void)arg;
	handled++;
}

static struct vsched_vm *vm_hot(const struct vsched_host_ops *ops)
{
	struct vsched_vm *vm = make_vm(ops, 0);

	/* Priorities put K_LATE before K_REQ: ranks differ from kinds. */
	declare(vm, K_REQ, "req", 5, 0, count_handler, NULL, 0);
	declare(vm, K_LATE, "late", 1, 0, count_handler, NULL, 0);
	declare(vm, K_WAIT, "wait", 7, VSCHED_REQ_WAIT, NULL, NULL, 0);
	declare(vm, K_PAY, "pay", 8, VSCHED_REQ_PAYLOAD, count_handler, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	return vm;
}

static const struct vsched_vcpu_hot *hot(struct vsched_vcpu *v)
{
	return (const struct vsched_vcpu_hot *)(void *)v;
}

static void test_post_service_outside(void **state)
{
	struct fake_host h = { 0 };
	struct vsched_host_ops ops = fake_ops(&h);
	struct vsched_vm *vm = vm_hot(&ops);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	(void)state;

	handled = 0;
	assert_int_equal(vsched_service(v), 0);
	assert_int_equal(hot_post(v, K_REQ), 0);
	/* K_REQ has rank 1 (K_LATE is serviced first): bit 1. */
	assert_int_equal(hot(v)->post_rank[K_REQ], 1);
	assert_int_equal(hot(v)->post_rank[K_LATE], 0);
	assert_true(hot(v)->pending == UINT64_C(2));
	assert_int_equal(vsched_post(v, K_REQ), 0); /* coalesces */
	assert_int_equal(vsched_post(v, K_LATE), 0);
	assert_int_equal(h.kicks, 0);
	assert_int_equal(h.wakes, 0);
	assert_int_equal(vsched_service(v), 2);
	assert_int_equal(handled, 2);
	assert_int_equal(vsched_service(v), 0);
	struct vsched_vcpu_stats s = stats_of(v);
	assert_int_equal(s.kind[K_REQ].coalesced, 1);
	assert_int_equal(s.kind[K_REQ].posted, 2);
	assert_int_equal(s.kind[K_REQ].serviced, 1);
	assert_int_equal(s.kicks_sent, 0);
	vsched_vm_destroy(vm);
}

static void test_enter_exit(void **state)
{
	struct fake_host h = { 0 };
	struct vsched_host_ops ops = fake_ops(&h);
	struct vsched_vm *vm = vm_hot(&ops);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	(void)state;

	for (int i = 0; i < 3; i++) {
		assert_int_equal(hot_enter(v), 0);
		assert_int_equal(vsched_vcpu_mode(v), VSCHED_MODE_IN_GUEST);
		assert_int_equal(hot(v)->mode & 7, VSCHED_MODE_IN_GUEST);
		assert_int_equal(vsched_vcpu_enter(v), VSCHED_ESTATE);
		assert_int_equal(vsched_service(v), 0); /* nothing pending */
		assert_int_equal(vsched_vcpu_exit(v), 0);
		assert_int_equal(vsched_vcpu_mode(v), VSCHED_MODE_OUTSIDE_GUEST);
		assert_int_equal(vsched_vcpu_exit(v), VSCHED_ESTATE);
	}
	/* The generation counts entries; the counter is the hot one. */
	assert_int_equal(hot(v)->mode >> 4, 3);
	assert_true(hot(v)->entries == 3);
	assert_int_equal(stats_of(v).entries, 3);
	vsched_vm_destroy(vm);
}

static void test_kick_and_cancel(void **state)
{
	struct fake_host h = { 0 };
	struct vsched_host_ops ops = fake_ops(&h);
	struct vsched_vm *vm = vm_hot(&ops);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	(void)state;

	handled = 0;
	assert_int_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(vsched_post(v, K_REQ), 0);
	assert_int_equal(h.kicks, 1);
	assert_int_equal(vsched_vcpu_mode(v), VSCHED_MODE_EXITING_GUEST);
	assert_int_equal(vsched_post(v, K_LATE), 0); /* already exiting */
	assert_int_equal(h.kicks, 1);
	assert_int_equal(vsched_service(v), VSCHED_ESTATE);
	assert_int_equal(vsched_vcpu_exit(v), 0);
	/* Pending at the commit: the entry is cancelled. */
	assert_int_equal(vsched_vcpu_enter(v), VSCHED_ENTRY_CANCELLED);
	assert_int_equal(vsched_vcpu_mode(v), VSCHED_MODE_OUTSIDE_GUEST);
	assert_int_equal(vsched_service(v), 2);
	assert_int_equal(handled, 2);
	assert_int_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(vsched_vcpu_exit(v), 0);
	struct vsched_vcpu_stats s = stats_of(v);
	assert_int_equal(s.kicks_sent, 1);
	assert_int_equal(s.entries, 2);
	assert_int_equal(s.cancelled_entries, 1);
	vsched_vm_destroy(vm);
}

static void test_slow_kinds_and_errors(void **state)
{
	struct fake_host h = { 0 };
	struct vsched_host_ops ops = fake_ops(&h);
	struct vsched_vm *vm = vm_hot(&ops);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	struct vsched_payload p;
	(void)state;

	handled = 0;
	assert_int_equal(hot(v)->post_rank[K_WAIT], -1);
	assert_int_equal(hot(v)->post_rank[K_PAY], -1);
	assert_int_equal(hot(v)->post_rank[K_UNDECLARED], -1);
	assert_int_equal(vsched_post(v, K_UNDECLARED), VSCHED_ERANGE);
	assert_int_equal(vsched_post(v, 64), VSCHED_ERANGE);
	assert_int_equal(vsched_post(v, 1000), VSCHED_ERANGE);
	assert_int_equal(vsched_post(v, K_PAY), VSCHED_EINVAL);
	/* WAIT to a vCPU outside the guest: acknowledged at once. */
	assert_int_equal(vsched_post(v, K_WAIT), 0);
	assert_int_equal(vsched_post_payload(v, K_PAY, &p), 0);
	assert_int_equal(vsched_service(v), 2);
	assert_int_equal(handled, 1);

	assert_int_equal(vsched_vcpu_destroy(v), 0);
	assert_int_equal(hot(v)->post_rank[K_REQ], -1);
	assert_int_equal(vsched_post(v, K_REQ), VSCHED_EDESTROYED);
	assert_int_equal(vsched_post(v, K_WAIT), VSCHED_EDESTROYED);
	assert_true(hot(v)->pending == 0);
	assert_int_equal(vsched_vcpu_enter(v), VSCHED_EDESTROYED);
	assert_int_equal(vsched_vcpu_exit(v), VSCHED_EDESTROYED);
	assert_int_equal(vsched_service(v), 0);
	vsched_vm_destroy(vm);
}

/* A WAIT poster sleeps on the mode word until the exit releases it (the
 * exit's ACK_WAITERS slow path), with the default futex host. */
static void *wait_poster(void *arg)
{
	return (void *)(intptr_t)vsched_post(arg, K_WAIT);
}

static void test_exit_releases_wait_poster(void **state)
{
	struct vsched_vm *vm = vm_hot(NULL);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	pthread_t t;
	void *rc;
	(void)state;

	assert_int_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(pthread_create(&t, NULL, wait_poster, v), 0);
	while (!__atomic_load_n(&hot(v)->pending, __ATOMIC_RELAXED))
		sched_yield();
	/* Give the poster time to spin out and sleep (ACK_WAITERS). */
	for (int i = 0; i < 100 && !(__atomic_load_n(&hot(v)->mode,
						     __ATOMIC_RELAXED) & 8); i++)
		usleep(1000);
	assert_int_equal(vsched_vcpu_exit(v), 0);
	assert_int_equal(pthread_join(t, &rc), 0);
	assert_int_equal((int)(intptr_t)rc, 0);
	assert_int_equal(vsched_service(v), 1);
	vsched_vm_destroy(vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_post_service_outside),
		cmocka_unit_test(test_enter_exit),
		cmocka_unit_test(test_kick_and_cancel),
		cmocka_unit_test(test_slow_kinds_and_errors),
		cmocka_unit_test(test_exit_releases_wait_poster),
	};
	return cmocka_run_group_tests_name("hotpath (" VARIANT ")", tests, NULL, NULL);
}
