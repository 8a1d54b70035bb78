/* SPDX-License-Identifier: MIT */
/* One test body for every arch backend (native, generic, and the cross
 * builds under qemu-user): the arch contract of <vsched/arch.h> and
 * lib/arch/arch.h, and the arch profiles' request tables. */
#include <string.h>
#include <time.h>

#include "common.h"

#include "arch/arch.h"

uint64_t vsched__timebase_freq(void);

static void test_timebase(void **state)
{
	(void)state;
	print_message("backend %s, wait-for-event %s\n", VSCHED__ARCH_NAME,
		      VSCHED__HAVE_WFE ? "available" : "none");
	/* Monotonic. */
	uint64_t prev = vsched__timebase();
	for (int i = 0; i < 100000; i++) {
		uint64_t t = vsched__timebase();
		assert_true(t >= prev);
		prev = t;
	}
	/* Its frequency is the timebase's, in Hz: over 100 ms of the clock,
	 * with each timebase read bracketed by two clock reads, the ticks
	 * counted bound the true rate from both sides, whatever the load
	 * (a preempted read only widens the bounds). Asserted with a factor
	 * of 2 around those bounds: a wrong unit or scale fails it, the
	 * library's own calibration error (a bracket of 20 ms) cannot, and
	 * no speed of this machine enters it. */
	uint64_t f = vsched__timebase_freq();
	assert_true(f > 0);
	uint64_t a0 = mono(), t0 = vsched__timebase(), b0 = mono(), a1;
	do
		a1 = mono();
	while (a1 - a0 < 100000000);
	uint64_t t1 = vsched__timebase(), b1 = mono();
	double lo = (double)(t1 - t0) * 1e9 / (double)(b1 - a0);
	double hi = (double)(t1 - t0) * 1e9 / (double)(a1 - b0);
	print_message("timebase %llu Hz, measured %.0f-%.0f Hz\n",
		      (unsigned long long)f, lo, hi);
	assert_true((double)f > lo / 2 && (double)f < hi * 2);
}

static void test_relax_and_wait_return(void **state)
{
	static volatile uint64_t word = 7;
	(void)state;
	for (int i = 0; i < 1000; i++) {
		vsched__relax();
		vsched__idle_hint();
		vsched__mb();
		vsched__mb_after_rmw();
	}
	vsched__relax(); /* restores the hardware-thread priority on power */
	/* A changed value returns at once; an unchanged one returns too
	 * (event stream, umwait deadline, or a plain relax): the loop ending
	 * is the check (a wait that never returns fails by ctest's timeout;
	 * no bound on its time, which would measure this machine). */
	for (int i = 0; i < 100; i++) {
		vsched__wait_event((const void *)&word, 8);
		vsched__wait_event((const void *)&word, 7);
	}
}

static void test_profiles_validate(void **state)
{
#define NAME(name) #name,
	const char *arches[] = { VSCHED__ARCH_PROFILES(NAME) };
#undef NAME
	(void)state;
	for (unsigned i = 0; i < sizeof(arches) / sizeof(arches[0]); i++) {
		const struct vsched_profile *p = vsched_profile_get(arches[i]);
		assert_non_null(p);
		assert_string_equal(p->arch, arches[i]);
		assert_true(p->nkinds > 3);
		struct vsched_vm *vm = make_vm(NULL, 0);
		assert_int_equal(vsched_profile_declare(vm, p, NULL, NULL), 0);
		/* The arch's real order passes the table validation. */
		assert_int_equal(vsched_request_finalize(vm, 0), 0);
		vsched_vm_destroy(vm);
		print_message("%s: %u kinds, poll max %llu ns\n", p->arch, p->nkinds,
			      (unsigned long long)p->poll_max_ns);
	}
	/* This build's own arch. */
	assert_non_null(vsched_profile_get(NULL));
	assert_null(vsched_profile_get("vax"));
	/* x86: PMU and PMI before NMI, so no late raise. */
	const struct vsched_profile *x = vsched_profile_get("x86_64");
	int pmi = vsched_profile_find(x, "PMI"), nmi = vsched_profile_find(x, "NMI");
	assert_true(pmi >= 0 && nmi >= 0);
	assert_true(x->kinds[pmi].priority < x->kinds[nmi].priority);
	assert_true(x->kinds[pmi].may_raise & VSCHED_KIND_BIT(x->kinds[nmi].kind));
	assert_int_equal(x->poll_max_ns, 200000);
	assert_int_equal(vsched_profile_get("aarch64")->poll_max_ns, 500000);
	assert_int_equal(vsched_profile_get("ppc64le")->poll_max_ns, 10000);
	/* s390x: the clock comparator is a level; a delivered SET PREFIX
	 * raises the prefix refresh, served later in the same pass. */
	const struct vsched_profile *z = vsched_profile_get("s390x");
	int sp = vsched_profile_find(z, "SET_PREFIX");
	int rp = vsched_profile_find(z, "REFRESH_GUEST_PREFIX");
	assert_true(sp >= 0 && rp >= 0);
	assert_true(z->kinds[sp].priority < z->kinds[rp].priority);
	assert_true(z->kinds[sp].may_raise & VSCHED_KIND_BIT(z->kinds[rp].kind));
	assert_int_equal(z->poll_max_ns, 50000);
	assert_int_equal(z->timer_semantics, VSCHED_TIMER_LEVEL);
	assert_string_equal(z->kinds[z->timer_kind].name, "EXT_CLOCK_COMP");
	/* A VM's default poll window is the target's profile's (vm.h,
	 * profile.h: vsched_profile_get(NULL)), read from the one place it is
	 * written, whatever the backend: a generic build for arm64 (a
	 * sanitizer build) took x86-64's 200 us, which only the generic
	 * backend's fences run. */
	struct vsched_vm_config cfg = { .size = sizeof(cfg) };
	struct vsched_poll_params pp = { .size = sizeof(pp) };
	struct vsched_vm *vm = NULL;
	assert_int_equal(vsched_vm_create(&cfg, &vm), 0);
	assert_int_equal(vsched_vm_get_poll(vm, &pp), 0);
	assert_int_equal(pp.max_ns, vsched_profile_get(NULL)->poll_max_ns);
	if (strcmp(VSCHED__ARCH_NAME, "generic"))
		assert_string_equal(vsched_profile_get(NULL)->arch, VSCHED__ARCH_NAME);
	vsched_vm_destroy(vm);
	assert_int_equal(vsched_profile_find(NULL, "x"), VSCHED_EINVAL);
	assert_int_equal(vsched_profile_find(x, "nope"), VSCHED_ERANGE);
	assert_int_equal(vsched_profile_declare(NULL, x, NULL, NULL), VSCHED_EINVAL);
}

static void test_hwthread_fast_path(void **state)
{
	struct vsched_hwthread t = { 0 };
	(void)state;
	/* Woken from a shallow idle that never left the kernel state: skip. */
	assert_int_equal(vsched_hwthread_wakeup(&t), 1);
	/* Idle, then woken: store and barrier. */
	assert_int_equal(vsched_hwthread_enter(&t, VSCHED_HWTHREAD_IN_IDLE), 0);
	assert_int_equal(vsched_hwthread_state(&t), VSCHED_HWTHREAD_IN_IDLE);
	assert_int_equal(vsched_hwthread_wakeup(&t), 0);
	assert_int_equal(vsched_hwthread_state(&t), VSCHED_HWTHREAD_IN_KERNEL);
	assert_int_equal(vsched_hwthread_wakeup(&t), 1);
	assert_int_equal(vsched_hwthread_enter(&t, VSCHED_HWTHREAD_IN_GUEST), 0);
	assert_int_equal(vsched_hwthread_wakeup(&t), 0);
	assert_int_equal(t.skips, 2);
	assert_int_equal(t.stores, 2);
	assert_int_equal(vsched_hwthread_enter(&t, 7), VSCHED_EINVAL);
	assert_int_equal(vsched_hwthread_enter(NULL, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_hwthread_wakeup(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_hwthread_state(NULL), VSCHED_EINVAL);
	/* A word that holds no state reads as an error, not as a state. */
	t.state = 7;
	assert_int_equal(vsched_hwthread_state(&t), VSCHED_EINVAL);
	assert_int_equal(vsched_hwthread_wakeup(&t), 0);
	assert_int_equal(vsched_hwthread_state(&t), VSCHED_HWTHREAD_IN_KERNEL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timebase),
		cmocka_unit_test(test_relax_and_wait_return),
		cmocka_unit_test(test_profiles_validate),
		cmocka_unit_test(test_hwthread_fast_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
