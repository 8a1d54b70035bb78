/* SPDX-License-Identifier: MIT */
/* Every public function on bad input: a documented negative errno, a text
 * from vsched_strerror(), no crash, and nothing already posted is lost. */
#include <stddef.h>
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

/* A VMM with no requests of its own: the empty table finalises, and its
 * vCPU services, enters, blocks to its deadline and wakes on a kick; a post
 * of any kind is refused, nothing crashes. */
static void test_empty_table(void **state)
{
	(void)state;
	struct vsched_vm *vm = make_vm(NULL, 0);
	struct vsched_vcpu *v;

	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	v = make_vcpu(vm, 0);
	assert_int_equal(vsched_service(v), 0);
	assert_int_equal(vsched_post(v, 0), VSCHED_ERANGE);
	assert_int_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(vsched_vcpu_exit(v), 0);
	assert_int_equal(vsched_vcpu_block(v, 0), VSCHED_WAKE_DEADLINE);
	assert_int_equal(vsched_vcpu_destroy(v), 0);
	assert_int_equal(vsched_vm_destroy(vm), 0);
}

/* Relative timeouts in the VM's own clock: callers never mix clocks or
 * guard against overflow themselves. */
static void test_deadline_in(void **state)
{
	(void)state;
	struct fake_host h = { .now = 1000 };
	struct vsched_host_ops ops = fake_ops(&h);
	struct vsched_vm *vm = make_vm(&ops, 0);

	assert_int_equal(vsched_now_ns(vm), 1000);
	assert_int_equal(vsched_deadline_in(vm, 0), 1000);
	assert_int_equal(vsched_deadline_in(vm, 5), 1005);
	assert_true(vsched_deadline_in(vm, VSCHED_DEADLINE_NONE) == VSCHED_DEADLINE_NONE);
	h.now = UINT64_MAX - 10;
	assert_true(vsched_deadline_in(vm, 10) == VSCHED_DEADLINE_NONE);
	assert_true(vsched_deadline_in(vm, 9) == UINT64_MAX - 1);
	assert_true(vsched_deadline_in(vm, UINT64_MAX / 2) == VSCHED_DEADLINE_NONE);
	assert_int_equal(vsched_now_ns(NULL), 0);
	assert_true(vsched_deadline_in(NULL, 5) == VSCHED_DEADLINE_NONE);
	vsched_vm_destroy(vm);
}

/* Extensible structs, one rule (lib/abi.h) for each struct a caller
 * passes in or reads out: a struct from a newer caller is accepted when
 * what this library does not know is zero and refused otherwise; one
 * shorter than the first layout is refused; an output struct longer than
 * ours gets a zeroed tail and `size` says how much was written. */
struct newer_vm_config {
	struct vsched_vm_config c;
	uint64_t unknown;
};
struct newer_poll_params {
	struct vsched_poll_params p;
	uint64_t unknown;
};
struct newer_timer_desc {
	struct vsched_timer_desc d;
	uint64_t unknown;
};
struct newer_vcpu_stats {
	struct vsched_vcpu_stats s;
	uint64_t unknown[3];
};

static void test_struct_growth(void **state)
{
	(void)state;
	struct newer_vm_config nc = { .c = { .size = sizeof(nc) } };
	struct newer_poll_params np = { .unknown = 0 };
	struct newer_timer_desc nt = { .d = { .size = sizeof(nt), .kind = 0 } };
	struct newer_vcpu_stats ns;
	struct vsched_vcpu_stats old = { .size = offsetof(struct vsched_vcpu_stats, kind) };
	struct vsched_poll_state ps;
	struct vsched_timer *t = NULL;
	struct vsched_vm *vm = NULL;
	struct vsched_vcpu *v;

	/* In: VM config. */
	nc.unknown = 1;
	assert_int_equal(vsched_vm_create(&nc.c, &vm), VSCHED_EINVAL);
	assert_null(vm);
	nc.unknown = 0;
	assert_int_equal(vsched_vm_create(&nc.c, &vm), 0);
	/* In: poll parameters, through the pure policy and the VM. */
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_KVM, 1000, &np.p), 0);
	np.p.size = sizeof(np);
	np.unknown = 1;
	assert_int_equal(vsched_poll_init(&np.p, &ps), VSCHED_EINVAL);
	assert_int_equal(vsched_vm_set_poll(vm, &np.p), VSCHED_EINVAL);
	np.unknown = 0;
	assert_int_equal(vsched_poll_init(&np.p, &ps), 0);
	assert_int_equal(vsched_vm_set_poll(vm, &np.p), 0);
	/* A size that cuts a field of the minimum in two. */
	np.p.size = offsetof(struct vsched_poll_params, decay_shift) + 2;
	assert_int_equal(vsched_poll_init(&np.p, &ps), VSCHED_EINVAL);
	/* A caller of 0.2, without sleep_cpu_ns: taken, the field as 0, and
	 * spin_pct (also added in 0.3) at its default, not 0. */
	np.p.size = offsetof(struct vsched_poll_params, sleep_cpu_ns);
	assert_int_equal(vsched_poll_init(&np.p, &ps), 0);
	assert_int_equal(vsched_vm_set_poll(vm, &np.p), 0);
	struct vsched_poll_params got = { .size = sizeof(got) };
	assert_int_equal(vsched_vm_get_poll(vm, &got), 0);
	assert_int_equal(got.sleep_cpu_ns, 0);
	assert_int_equal(got.spin_pct, 25);
	/* spin_pct is a percentage. */
	np.p.size = sizeof(np.p);
	np.p.spin_pct = 101;
	assert_int_equal(vsched_poll_init(&np.p, &ps), VSCHED_EINVAL);
	np.p.spin_pct = 100;
	assert_int_equal(vsched_poll_init(&np.p, &ps), 0);
	/* In: timer descriptor. */
	declare(vm, 0, "timer", 0, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	v = make_vcpu(vm, 0);
	nt.unknown = 1;
	assert_int_equal(vsched_timer_create(v, &nt.d, &t), VSCHED_EINVAL);
	nt.unknown = 0;
	assert_int_equal(vsched_timer_create(v, &nt.d, &t), 0);
	/* Out: stats, to a newer, an older and a too-short caller. */
	assert_int_equal(vsched_post(v, 0), 0);
	memset(&ns, 0xa5, sizeof(ns));
	ns.s.size = sizeof(ns);
	assert_int_equal(vsched_vcpu_read_stats(v, &ns.s), 0);
	assert_int_equal(ns.s.size, sizeof(ns.s));
	assert_int_equal(ns.s.kind[0].posted, 1);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(ns.unknown[i], 0);
	assert_int_equal(vsched_vcpu_read_stats(v, &old), 0);
	assert_int_equal(old.size, offsetof(struct vsched_vcpu_stats, kind));
	old.size = 2;
	assert_int_equal(vsched_vcpu_read_stats(v, &old), VSCHED_EINVAL);
	vsched_vm_destroy(vm);
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
	s.size = 2; /* too short to hold even its size: refused */
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
		cmocka_unit_test(test_empty_table),
		cmocka_unit_test(test_deadline_in),
		cmocka_unit_test(test_struct_growth),
		cmocka_unit_test(test_vm_bad_input),
		cmocka_unit_test(test_table_bad_input),
		cmocka_unit_test(test_vcpu_bad_input),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
