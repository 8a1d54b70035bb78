/* SPDX-License-Identifier: MIT */
/* Faults: allocation failure at every allocation site, a clock that goes
 * backwards, and a vCPU destroyed while another thread posts to it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common.h"

static long fail_at, nallocs;
static long outstanding;

static void *failing_alloc(size_t size, size_t align, void *ctx)
{
	void *p = NULL;
	(void)ctx;
	if (nallocs++ == fail_at)
		return NULL;
	if (posix_memalign(&p, align, size))
		return NULL;
	outstanding++;
	return p;
}

static void counting_free(void *p, size_t size, void *ctx)
{
	(void)size, (void)ctx;
	outstanding--;
	free(p);
}

static bool ring(void *a)
{
	(void)a;
	return false;
}

/* Build everything that allocates; fail cleanly wherever it fails. */
static int scenario(void)
{
	struct vsched_allocator al = { .alloc = failing_alloc, .free = counting_free };
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .alloc = &al };
	struct vsched_request_desc d = { .name = "t" };
	struct vsched_timer_desc td = { .size = sizeof(td), .kind = 1 };
	struct vsched_poll_params pp;
	struct vsched_vm *vm;
	struct vsched_vcpu *v[3];
	struct vsched_timer *t;
	struct vsched_waiter *w;
	struct vsched_timer_service *svc;
	int rc;

	rc = vsched_vm_create(&cfg, &vm);
	if (rc)
		return rc;
	assert_int_equal(vsched_request_declare(vm, 1, &d), 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	for (unsigned i = 0; i < 3; i++) {
		rc = vsched_vcpu_create(vm, i, NULL, &v[i]);
		if (rc)
			goto out;
	}
	rc = vsched_timer_create(v[0], &td, &t);
	if (rc)
		goto out;
	rc = vsched_waiter_create(vm, ring, NULL, &w);
	if (rc)
		goto out;
	vsched_waiter_destroy(w);
	rc = vsched_timer_service_create(vm, &svc);
	if (rc)
		goto out;
	vsched_timer_service_destroy(svc);
	vsched_poll_defaults(VSCHED_POLL_KVM, 1000, &pp);
	rc = vsched_vm_set_poll(vm, &pp);
	if (rc)
		goto out;
	/* Nothing on the run paths allocates. */
	long before = nallocs;
	vsched_post(v[1], 1);
	vsched_service(v[1]);
	vsched_vcpu_block(v[1], 0);
	vsched_timer_arm(t, 1);
	assert_int_equal(nallocs, before);
out:
	vsched_vm_destroy(vm);
	return rc;
}

static void test_alloc_failure_every_site(void **state)
{
	(void)state;
	long sites = 0;
	for (fail_at = 0;; fail_at++) {
		nallocs = 0;
		outstanding = 0;
		int rc = scenario();
		/* A clean error, and nothing left allocated. */
		assert_int_equal(outstanding, 0);
		if (rc == 0)
			break;
		assert_int_equal(rc, VSCHED_ENOMEM);
		sites++;
	}
	/* VM, vCPU table, policy, 3 vCPUs, timer, waiter, service, policy. */
	assert_true(sites >= 9);
	print_message("allocation sites failed one by one: %ld\n", sites);
}

static uint64_t backwards_now = 1000000;
static uint64_t backwards(void *c)
{
	(void)c;
	return backwards_now -= 1000; /* time runs backwards */
}

static void test_clock_backwards(void **state)
{
	struct fake_host h = { 0 };
	struct vsched_host_ops ops = fake_ops(&h);
	(void)state;
	ops.now_ns = backwards;
	struct vsched_vm *vm = make_vm(&ops, 5000);
	declare(vm, 1, "r", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	/* The deadline is never reached on a clock that goes back; the poll
	 * window neither: the fake wait times out, the block comes back. */
	h.on_wait = NULL;
	int rc = vsched_vcpu_block(v, backwards_now + 10);
	assert_true(rc == VSCHED_WAKE_DEADLINE || rc == VSCHED_WAKE_REQUEST);
	struct vsched_vcpu_stats s = stats_of(v);
	assert_true(s.halt.halt_wait_ns < 1000000000ull); /* no underflow */
	vsched_post(v, 1);
	assert_int_equal(vsched_service(v), 1);
	vsched_vm_destroy(vm);
}

struct racer {
	struct vsched_vcpu *v;
	atomic_int go, stop;
	atomic_long ok, shut;
};

static void *poster(void *arg)
{
	struct racer *r = arg;
	while (!atomic_load(&r->go))
		;
	while (!atomic_load(&r->stop)) {
		int rc = vsched_post(r->v, 1);
		if (rc == 0)
			r->ok++;
		else if (rc == VSCHED_ESHUTDOWN)
			r->shut++;
		else
			abort();
	}
	return NULL;
}

static void test_destroy_while_posting(void **state)
{
	struct racer r = { 0 };
	pthread_t t;
	(void)state;
	struct vsched_vm *vm = make_vm(NULL, 0);
	declare(vm, 1, "r", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	r.v = make_vcpu(vm, 0);
	pthread_create(&t, NULL, poster, &r);
	atomic_store(&r.go, 1);
	while (r.ok < 1000)
		;
	assert_int_equal(vsched_vcpu_destroy(r.v), 0);
	while (r.shut < 1000)
		;
	atomic_store(&r.stop, 1);
	pthread_join(t, NULL);
	/* Posts after the destroy failed cleanly; the memory stayed valid. */
	assert_true(r.shut >= 1000);
	assert_int_equal(vsched_vcpu_mode(r.v), VSCHED_MODE_DESTROYED);
	vsched_vm_destroy(vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alloc_failure_every_site),
		cmocka_unit_test(test_clock_backwards),
		cmocka_unit_test(test_destroy_while_posting),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
