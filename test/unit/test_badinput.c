/* SPDX-License-Identifier: MIT */
/* Every public function on bad input: a documented negative errno, a text
 * from vsched_strerror(), no crash, and nothing already posted is lost. */
#include "common.h"

enum { K_A = 1, K_P = 2 };

static unsigned handled;
static void count(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		  void *arg)
{
	(void)v;
	(void)k;
	(void)p;
	(void)arg;
	handled++;
}

static void *no_alloc(size_t size, size_t align, void *ctx)
{
	(void)size;
	(void)align;
	(void)ctx;
	return NULL;
}

static void no_free(void *p, size_t size, void *ctx)
{
	(void)p;
	(void)size;
	(void)ctx;
}

static void test_errors_have_text(void **state)
{
	(void)state;
	const int codes[] = { VSCHED_EINVAL, VSCHED_ERANGE, VSCHED_ENOMEM,
			      VSCHED_EEXIST, VSCHED_EBUSY, VSCHED_ENOTFINAL,
			      VSCHED_ELOOP, VSCHED_EORDER, VSCHED_ESHUTDOWN,
			      VSCHED_ESTATE, VSCHED_ENOSPC, VSCHED_ENOHANDLER,
			      VSCHED_ECLOCK };
	for (unsigned i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
		assert_true(codes[i] < 0);
		assert_string_not_equal(vsched_strerror(codes[i]),
					"unknown vsched error");
		for (unsigned j = 0; j < i; j++)
			assert_int_not_equal(codes[i], codes[j]);
	}
	assert_string_equal(vsched_strerror(0), "success");
	assert_string_equal(vsched_strerror(-99999), "unknown vsched error");
	assert_non_null(vsched_default_allocator());
}

/* One rule: vsched's own conditions lie below every kernel errno, so an
 * errno passed through from a syscall (epoll_ctl's EPERM, a closed fd's
 * EBADF) reads as what the kernel meant, never as a vsched condition. */
static void test_errors_one_range(void **state)
{
	(void)state;
	const int own[] = { VSCHED_EBUSY, VSCHED_ENOTFINAL, VSCHED_ELOOP,
			    VSCHED_EORDER, VSCHED_ESHUTDOWN, VSCHED_ESTATE,
			    VSCHED_ENOSPC, VSCHED_ENOHANDLER, VSCHED_ECLOCK };
	const int kernel[] = { -EPERM, -EBADF, -EBUSY, -ENOSPC, -EBADFD,
			       -EDEADLK, -ELOOP, -ESHUTDOWN };

	for (unsigned i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		assert_true(own[i] < -4095);
		assert_true(vsched_is_own_error(own[i]));
	}
	for (unsigned i = 0; i < sizeof(kernel) / sizeof(kernel[0]); i++) {
		assert_false(vsched_is_own_error(kernel[i]));
		for (unsigned j = 0; j < sizeof(own) / sizeof(own[0]); j++)
			assert_string_not_equal(vsched_strerror(kernel[i]),
						vsched_strerror(own[j]));
	}
	assert_string_not_equal(vsched_strerror(-EBADF), "unknown vsched error");
	assert_false(vsched_is_own_error(VSCHED_EINVAL));
	assert_false(vsched_is_own_error(0));
}

static void test_vm_bad_input(void **state)
{
	struct vsched_vm *vm = (void *)1;
	struct vsched_vm_config cfg = { .size = sizeof(cfg) };
	struct vsched_allocator broken = { .alloc = no_alloc };
	struct vsched_allocator oom = { .alloc = no_alloc, .free = no_free };
	(void)state;

	assert_int_equal(vsched_vm_create(NULL, NULL), VSCHED_EINVAL);
	cfg.size = 3;
	assert_int_equal(vsched_vm_create(&cfg, &vm), VSCHED_EINVAL);
	assert_null(vm);
	cfg.size = sizeof(cfg) + 8;
	assert_int_equal(vsched_vm_create(&cfg, &vm), VSCHED_EINVAL);
	cfg.size = sizeof(cfg);
	cfg.max_vcpus = 100000;
	assert_int_equal(vsched_vm_create(&cfg, &vm), VSCHED_EINVAL);
	cfg.max_vcpus = 0;
	cfg.alloc = &broken;
	assert_int_equal(vsched_vm_create(&cfg, &vm), VSCHED_EINVAL);
	cfg.alloc = &oom;
	assert_int_equal(vsched_vm_create(&cfg, &vm), VSCHED_ENOMEM);
	assert_int_equal(vsched_vm_destroy(NULL), VSCHED_EINVAL);
	assert_null(vsched_vm_user(NULL));
	cfg.alloc = NULL;
	cfg.user = &cfg;
	assert_int_equal(vsched_vm_create(&cfg, &vm), 0);
	assert_ptr_equal(vsched_vm_user(vm), &cfg);
	vsched_vm_destroy(vm);
}

static void test_table_bad_input(void **state)
{
	struct vsched_request_desc d = { .name = "a" };
	(void)state;
	struct vsched_vm *vm = make_vm(NULL, 0);

	assert_int_equal(vsched_request_declare(NULL, 0, &d), VSCHED_EINVAL);
	assert_int_equal(vsched_request_declare(vm, 0, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_request_declare(vm, 64, &d), VSCHED_ERANGE);
	d.name = NULL;
	assert_int_equal(vsched_request_declare(vm, 0, &d), VSCHED_EINVAL);
	d.name = "";
	assert_int_equal(vsched_request_declare(vm, 0, &d), VSCHED_EINVAL);
	d.name = "a";
	d.flags = 1u << 20;
	assert_int_equal(vsched_request_declare(vm, 0, &d), VSCHED_EINVAL);
	d.flags = VSCHED_REQ_PAYLOAD; /* payload kinds need a handler */
	assert_int_equal(vsched_request_declare(vm, 0, &d), VSCHED_EINVAL);
	d.flags = 0;
	assert_int_equal(vsched_request_finalize(vm, 0), VSCHED_EINVAL); /* empty */
	assert_int_equal(vsched_request_declare(vm, K_A, &d), 0);
	assert_int_equal(vsched_request_declare(vm, K_A, &d), VSCHED_EEXIST);
	assert_int_equal(vsched_request_finalize(NULL, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_request_finalize(vm, 1u << 9), VSCHED_EINVAL);
	assert_int_equal(vsched_request_table_error(NULL, NULL, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	assert_int_equal(vsched_request_finalize(vm, 0), VSCHED_EBUSY);
	assert_int_equal(vsched_request_declare(vm, 5, &d), VSCHED_EBUSY);
	assert_null(vsched_request_name(NULL, K_A));
	assert_null(vsched_request_name(vm, 64));
	assert_null(vsched_request_name(vm, 5));
	vsched_vm_destroy(vm);
}

static struct vsched_vm *setup(void)
{
	struct vsched_vm *vm = make_vm(NULL, 0);
	declare(vm, K_A, "a", 1, 0, count, NULL, 0);
	declare(vm, K_P, "p", 2, VSCHED_REQ_PAYLOAD, count, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	return vm;
}

static void test_vcpu_bad_input(void **state)
{
	struct vsched_vcpu *v = (void *)1;
	struct vsched_vcpu_stats s = { .size = 8 };
	(void)state;

	struct vsched_vm *open = make_vm(NULL, 0);
	assert_int_equal(vsched_vcpu_create(open, 0, NULL, &v), VSCHED_ENOTFINAL);
	assert_null(v);
	vsched_vm_destroy(open);

	struct vsched_vm *vm = setup();
	assert_int_equal(vsched_vcpu_create(NULL, 0, NULL, &v), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_create(vm, 0, NULL, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_create(vm, 256, NULL, &v), VSCHED_ENOSPC);
	assert_int_equal(vsched_vcpu_create(vm, 3, &s, &v), 0);
	struct vsched_vcpu *dup = NULL;
	assert_int_equal(vsched_vcpu_create(vm, 3, NULL, &dup), VSCHED_EEXIST);
	assert_ptr_equal(vsched_vcpu_user(v), &s);
	assert_ptr_equal(vsched_vcpu_vm(v), vm);
	assert_int_equal(vsched_vcpu_id(v), 3);
	assert_null(vsched_vcpu_user(NULL));
	assert_null(vsched_vcpu_vm(NULL));
	assert_int_equal(vsched_vcpu_id(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_mode(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_read_stats(NULL, &s), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_read_stats(v, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_read_stats(v, &s), VSCHED_EINVAL);

	/* Something posted first must survive every bad call below. */
	handled = 0;
	assert_int_equal(vsched_post(v, K_A), 0);

	assert_int_equal(vsched_post(NULL, K_A), VSCHED_EINVAL);
	assert_int_equal(vsched_post(v, 64), VSCHED_ERANGE);
	assert_int_equal(vsched_post(v, 7), VSCHED_ERANGE);
	assert_int_equal(vsched_post(v, K_P), VSCHED_EINVAL);
	assert_int_equal(vsched_post_payload(v, K_P, NULL), VSCHED_EINVAL);
	struct vsched_payload pl;
	assert_int_equal(vsched_post_payload(v, K_A, &pl), VSCHED_EINVAL);
	assert_int_equal(vsched_post_payload(NULL, K_P, &pl), VSCHED_EINVAL);
	assert_int_equal(vsched_broadcast(NULL, NULL, 0, K_A), VSCHED_EINVAL);
	assert_int_equal(vsched_broadcast(vm, NULL, 0, 64), VSCHED_ERANGE);
	assert_int_equal(vsched_broadcast(vm, NULL, 0, 9), VSCHED_ERANGE);
	assert_int_equal(vsched_broadcast(vm, NULL, 0, K_P), VSCHED_EINVAL);
	assert_int_equal(vsched_service(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_enter(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_exit(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_exit(v), VSCHED_ESTATE);
	assert_int_equal(vsched_vcpu_block(NULL, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_destroy(NULL), VSCHED_EINVAL);
	/* Entry is cancelled (not an error) while K_A is pending. */
	assert_int_equal(vsched_vcpu_enter(v), VSCHED_ENTRY_CANCELLED);

	assert_int_equal(vsched_service(v), 1);
	assert_int_equal(handled, 1);

	/* Wrong mode: enter twice, block or service while in the guest. */
	assert_int_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(vsched_vcpu_enter(v), VSCHED_ESTATE);
	assert_int_equal(vsched_vcpu_block(v, 0), VSCHED_ESTATE);
	assert_int_equal(vsched_post(v, K_A), 0);
	assert_int_equal(vsched_service(v), VSCHED_ESTATE);
	assert_int_equal(vsched_vcpu_exit(v), 0);
	assert_int_equal(vsched_service(v), 1);
	assert_int_equal(handled, 2);

	/* Destroyed vCPU. */
	assert_int_equal(vsched_vcpu_destroy(v), 0);
	assert_int_equal(vsched_vcpu_destroy(v), VSCHED_ESHUTDOWN);
	assert_int_equal(vsched_post(v, K_A), VSCHED_ESHUTDOWN);
	assert_int_equal(vsched_vcpu_enter(v), VSCHED_ESHUTDOWN);
	assert_int_equal(vsched_vcpu_exit(v), VSCHED_ESHUTDOWN);
	assert_int_equal(vsched_vcpu_block(v, 0), VSCHED_ESHUTDOWN);
	assert_int_equal(vsched_broadcast(vm, NULL, 0, K_A), 0); /* skipped */
	s.size = sizeof(s);
	assert_int_equal(vsched_vcpu_read_stats(v, &s), 0); /* still readable */
	assert_int_equal(s.kind[K_A].serviced, 2);
	vsched_vm_destroy(vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errors_have_text),
		cmocka_unit_test(test_errors_one_range),
		cmocka_unit_test(test_vm_bad_input),
		cmocka_unit_test(test_table_bad_input),
		cmocka_unit_test(test_vcpu_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
