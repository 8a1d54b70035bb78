/* SPDX-License-Identifier: MIT */
/*
 * The KVM adapter's own logic, without /dev/kvm: the vCPU fd is /dev/null
 * (every KVM ioctl fails with ENOTTY) and kvm_run is plain memory, so the
 * ordering of the kick, the injection decisions, the halt's "owed" rule
 * and the error paths are checked everywhere. Real guests: vsched-vmm's
 * tests (labels kvm, kvm-tcg).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vsched/kvm.h>

#include "common.h"

/* A negative errno from the kernel (not one of vsched's own codes). */
static bool is_errno(int rc)
{
	return rc == -ENOTTY || rc == -ENOSYS;
}

struct fixture {
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	struct kvm_run *run;
	struct vsched_kvm_vcpu *kv;
	int fd;
	unsigned ipis;
};

static void on_ipi(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		   void *arg)
{
	struct fixture *f = arg;

	(void)v, (void)k, (void)p;
	f->ipis++;
	assert_int_equal(vsched_kvm_queue_irq(f->kv, 0x40), 0);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	f->vm = make_vm(NULL, 0);
	declare(f->vm, 3, "ipi", 1, 0, on_ipi, f, 0);
	assert_int_equal(vsched_request_finalize(f->vm, 0), 0);
	f->v = make_vcpu(f->vm, 0);
	f->run = calloc(1, 4096);
	f->fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(f->fd >= 0);
	assert_int_equal(vsched_kvm_signal_install(SIGUSR1), 0);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, f->run, NULL, &f->kv), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	vsched_vm_destroy(f->vm); /* destroys the vCPU: then detach (kvm.h) */
	vsched_kvm_detach(f->kv);
	close(f->fd);
	free(f->run);
	free(f);
	return 0;
}

static void test_bad_input(void **state)
{
	struct fixture *f = *state;
	struct vsched_kvm_vcpu *kv = NULL;
	struct vsched_kvm_config small = { .size = 1 };
	struct vsched_kvm_config kill = { .size = sizeof(kill), .signo = SIGKILL };
	struct vsched_kvm_stats st = { .size = 0 };

	assert_int_equal(vsched_kvm_attach(NULL, f->fd, f->run, NULL, &kv), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_attach(f->v, -1, f->run, NULL, &kv), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, NULL, NULL, &kv), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, f->run, NULL, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, f->run, &small, &kv), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, f->run, &kill, &kv), VSCHED_EINVAL);
	assert_null(kv);
	assert_int_equal(vsched_kvm_detach(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_kick(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_run(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_halt(NULL, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_queue_irq(NULL, 0x40), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_queue_irq(f->kv, 31), VSCHED_ERANGE);
	assert_int_equal(vsched_kvm_queue_irq(f->kv, 256), VSCHED_ERANGE);
	assert_int_equal(vsched_kvm_retract_irq(NULL, 0x40), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_retract_irq(f->kv, 7), VSCHED_ERANGE);
	assert_int_equal(vsched_kvm_queue_nmi(NULL), VSCHED_EINVAL);
	assert_false(vsched_kvm_irq_owed(NULL));
	assert_int_equal(vsched_kvm_read_stats(f->kv, &st), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_read_stats(NULL, &st), VSCHED_EINVAL);
	assert_null(vsched_kvm_vcpu(NULL));
	assert_ptr_equal(vsched_kvm_vcpu(f->kv), f->v);
	/* An ioctl KVM refuses comes back as its errno (ENOTTY; qemu-user
	 * says ENOSYS), nothing counted. */
	assert_true(is_errno(vsched_kvm_queue_nmi(f->kv)));
	assert_false(vsched_kvm_irq_owed(f->kv));
}

/* The IRR: idempotent while queued, taken back once, owed while queued. */
static void test_irr(void **state)
{
	struct fixture *f = *state;

	assert_false(vsched_kvm_irq_owed(f->kv));
	assert_int_equal(vsched_kvm_queue_irq(f->kv, 0x41), 0);
	assert_int_equal(vsched_kvm_queue_irq(f->kv, 0x41), 0);
	assert_true(vsched_kvm_irq_owed(f->kv));
	assert_int_equal(vsched_kvm_retract_irq(f->kv, 0x40), 0);
	assert_int_equal(vsched_kvm_retract_irq(f->kv, 0x41), 1);
	assert_int_equal(vsched_kvm_retract_irq(f->kv, 0x41), 0);
	assert_false(vsched_kvm_irq_owed(f->kv));
}

/* The kick signal is the VMM's: attach installs no handler and refuses a
 * signal whose action would end the process or ignore the kick; with one
 * installed (the VMM's own, or vsched_kvm_signal_install()) it attaches,
 * and the adapter comes from the VM's allocator. */
static size_t counted_allocs, counted_frees;

static void *counted_alloc(size_t size, size_t align, void *ctx)
{
	void *p = NULL;

	(void)ctx;
	counted_allocs++;
	return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

static void counted_free(void *p, size_t size, void *ctx)
{
	(void)size, (void)ctx;
	counted_frees++;
	free(p);
}

static void own_handler(int sig)
{
	(void)sig;
}

static void test_signal_is_the_vmms(void **state)
{
	struct fixture *f = *state;
	struct vsched_allocator a = { counted_alloc, counted_free, NULL };
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .alloc = &a };
	struct vsched_kvm_config k = { .size = sizeof(k), .signo = SIGUSR2 };
	struct sigaction sa, old;
	struct vsched_kvm_vcpu *kv = NULL;
	struct vsched_vm *vm;
	struct vsched_vcpu *v;

	(void)f;
	assert_int_equal(sigaction(SIGUSR2, NULL, &old), 0);
	signal(SIGUSR2, SIG_DFL);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, f->run, &k, &kv), VSCHED_ENOHANDLER);
	assert_null(kv);
	assert_int_equal(sigaction(SIGUSR2, NULL, &sa), 0);
	assert_true(sa.sa_handler == SIG_DFL); /* nothing installed behind our back */
	signal(SIGUSR2, SIG_IGN);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, f->run, &k, &kv), VSCHED_ENOHANDLER);
	/* SA_SIGINFO with a NULL sa_sigaction is the default action to the
	 * kernel: the first kick would end the process (issue 22). */
	memset(&sa, 0, sizeof(sa));
	sa.sa_flags = SA_SIGINFO;
	sa.sa_sigaction = NULL;
	assert_int_equal(sigaction(SIGUSR2, &sa, NULL), 0);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, f->run, &k, &kv), VSCHED_ENOHANDLER);
	assert_null(kv);
	/* A one-shot handler: the first kick resets the action to the
	 * default, and the second would end the process. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = own_handler;
	sa.sa_flags = SA_RESETHAND;
	assert_int_equal(sigaction(SIGUSR2, &sa, NULL), 0);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, f->run, &k, &kv), VSCHED_ENOHANDLER);
	assert_null(kv);
	assert_string_not_equal(vsched_strerror(VSCHED_ENOHANDLER), "unknown vsched error");
	assert_true(vsched_is_own_error(VSCHED_ENOHANDLER));
	assert_int_equal(vsched_kvm_signal_install(SIGKILL), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_signal_install(0), VSCHED_EINVAL);

	/* The VMM's own handler is kept as it is. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = own_handler;
	assert_int_equal(sigaction(SIGUSR2, &sa, NULL), 0);
	assert_int_equal(vsched_vm_create(&cfg, &vm), 0);
	declare(vm, 0, "any", 0, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	assert_int_equal(vsched_vcpu_create(vm, 0, NULL, &v), 0);
	counted_allocs = counted_frees = 0;
	assert_int_equal(vsched_kvm_attach(v, f->fd, f->run, &k, &kv), 0);
	assert_int_equal(counted_allocs, 1);
	assert_int_equal(sigaction(SIGUSR2, NULL, &sa), 0);
	assert_ptr_equal(sa.sa_handler, own_handler);
	assert_int_equal(vsched_kvm_detach(kv), 0);
	assert_int_equal(counted_frees, 1);
	vsched_vm_destroy(vm);
	sigaction(SIGUSR2, &old, NULL);
}

/* The split: pre_run commits (IN_GUEST, immediate_exit cleared), a second
 * pre_run or a post_run without pre_run is refused, post_run leaves guest
 * mode and maps EINTR to a kick and an exit reason through. */
static void test_pre_post_run(void **state)
{
	struct fixture *f = *state;
	struct vsched_kvm_stats st = { .size = sizeof(st) };

	assert_int_equal(vsched_kvm_pre_run(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_post_run(NULL, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_post_run(f->kv, 0), VSCHED_ESTATE);
	f->run->immediate_exit = 1;
	assert_int_equal(vsched_kvm_pre_run(f->kv), 0);
	assert_int_equal(f->run->immediate_exit, 0);
	assert_int_equal(vsched_vcpu_mode(f->v), VSCHED_MODE_IN_GUEST);
	assert_int_equal(vsched_kvm_pre_run(f->kv), VSCHED_ESTATE);
	/* A post while "in KVM_RUN" kicks (the host callback, which would
	 * call vsched_kvm_kick(): immediate_exit, then the signal). */
	assert_int_equal(vsched_post(f->v, 3), 0);
	assert_int_equal(vsched_kvm_kick(f->kv), 0);
	assert_int_equal(f->run->immediate_exit, 1);
	assert_int_equal(vsched_kvm_post_run(f->kv, -EINTR), VSCHED_KVM_KICKED);
	assert_int_equal(vsched_vcpu_mode(f->v), VSCHED_MODE_OUTSIDE_GUEST);
	assert_int_equal(vsched_kvm_post_run(f->kv, 0), VSCHED_ESTATE);
	/* The next entry services the IPI first. */
	assert_int_equal(vsched_kvm_pre_run(f->kv), 0);
	assert_int_equal(f->ipis, 1);
	f->run->exit_reason = KVM_EXIT_HLT;
	assert_int_equal(vsched_kvm_post_run(f->kv, 0), KVM_EXIT_HLT);
	assert_int_equal(vsched_kvm_pre_run(f->kv), 0);
	assert_int_equal(vsched_kvm_post_run(f->kv, -EFAULT), -EFAULT);
	assert_int_equal(vsched_kvm_read_stats(f->kv, &st), 0);
	assert_int_equal(st.runs, 3);
	assert_int_equal(st.kicked_exits, 1);
	assert_true(VSCHED_KVM_KICKED > 0 && VSCHED_KVM_CANCELLED > 0);
}

/* The kick stores immediate_exit (and signals the thread, whose handler
 * the fixture installed, so the process survives it). */
static void test_kick_sets_immediate_exit(void **state)
{
	struct fixture *f = *state;
	struct sigaction sa;

	f->run->immediate_exit = 0;
	assert_int_equal(vsched_kvm_kick(f->kv), 0);
	assert_int_equal(f->run->immediate_exit, 1);
	assert_int_equal(sigaction(SIGUSR1, NULL, &sa), 0);
	assert_true(sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
	assert_false(sa.sa_flags & SA_RESTART); /* KVM_RUN must see EINTR */
}

/* One entry: the request is serviced, its vector is offered to KVM only
 * when the guest can take it, immediate_exit is cleared before the commit,
 * and a failing KVM_RUN leaves the vCPU outside guest mode. A failed
 * KVM_INTERRUPT keeps the vector owed. */
static void test_run_paths(void **state)
{
	struct fixture *f = *state;
	struct vsched_kvm_stats st = { .size = sizeof(st) };

	/* Guest cannot take interrupts: ask for the window. */
	f->run->ready_for_interrupt_injection = 0;
	f->run->if_flag = 0;
	f->run->immediate_exit = 1; /* a stale kick from the last entry */
	assert_int_equal(vsched_post(f->v, 3), 0);
	assert_true(is_errno(vsched_kvm_run(f->kv))); /* KVM_RUN on /dev/null */
	assert_int_equal(f->ipis, 1);
	assert_int_equal(f->run->immediate_exit, 0);
	assert_int_equal(f->run->request_interrupt_window, 1);
	assert_true(vsched_kvm_irq_owed(f->kv));
	assert_int_equal(vsched_vcpu_mode(f->v), VSCHED_MODE_OUTSIDE_GUEST);

	/* Guest can take it: KVM_INTERRUPT is tried; it fails here, and the
	 * vector stays owed rather than lost. */
	f->run->ready_for_interrupt_injection = 1;
	f->run->if_flag = 1;
	assert_true(is_errno(vsched_kvm_run(f->kv)));
	assert_true(vsched_kvm_irq_owed(f->kv));
	assert_int_equal(vsched_kvm_read_stats(f->kv, &st), 0);
	assert_int_equal(st.size, sizeof(st));
	assert_int_equal(st.irqs_injected, 0);
	assert_int_equal(st.runs, 1);
	assert_true(st.window_requests >= 1);
	assert_int_equal(vsched_vcpu_mode(f->v), VSCHED_MODE_OUTSIDE_GUEST);
}

/* A halt never sleeps while an interrupt is owed (e.g. one that waited
 * for IF=1 when the guest halted). */
static void test_halt_owed_does_not_sleep(void **state)
{
	struct fixture *f = *state;
	struct vsched_kvm_stats st = { .size = sizeof(st) };

	assert_int_equal(vsched_kvm_queue_irq(f->kv, 0x40), 0);
	assert_int_equal(vsched_kvm_halt(f->kv, VSCHED_DEADLINE_NONE), 0);
	assert_int_equal(vsched_kvm_read_stats(f->kv, &st), 0);
	assert_int_equal(st.halts, 1);
	assert_int_equal(st.halts_skipped, 1);
}

/* A halt with nothing owed blocks; a posted IPI wakes it and its handler
 * makes the vector owed, which ends the halt. */
static void *post_later(void *arg)
{
	struct fixture *f = arg;

	usleep(20000);
	vsched_post(f->v, 3);
	return NULL;
}

static void test_halt_until_owed(void **state)
{
	struct fixture *f = *state;
	pthread_t t;
	int rc;

	assert_false(vsched_kvm_irq_owed(f->kv));
	assert_int_equal(pthread_create(&t, NULL, post_later, f), 0);
	rc = vsched_kvm_halt(f->kv, VSCHED_DEADLINE_NONE);
	pthread_join(t, NULL);
	assert_int_equal(rc, VSCHED_WAKE_REQUEST);
	assert_int_equal(f->ipis, 1);
	assert_true(vsched_kvm_irq_owed(f->kv));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
		cmocka_unit_test_setup_teardown(test_irr, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kick_sets_immediate_exit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_signal_is_the_vmms, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pre_post_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_paths, setup, teardown),
		cmocka_unit_test_setup_teardown(test_halt_owed_does_not_sleep, setup, teardown),
		cmocka_unit_test_setup_teardown(test_halt_until_owed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
