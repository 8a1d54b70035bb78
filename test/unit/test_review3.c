/* SPDX-License-Identifier: MIT */
/*
 * Reproducers of what a third adversarial review (2026-12-02) found in the
 * fixes merged as 3ce33ab..a9ecb46. Each test names its defect and failed
 * on a9ecb46.
 * No /dev/kvm is needed: as in test_kvm.c, the vCPU fd is /dev/null and
 * kvm_run is plain memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef VSCHED_TEST_KVM
#include <linux/kvm.h>
#include <vsched/kvm.h>
#endif

#include "common.h"

#ifdef VSCHED_TEST_KVM
/*
 * DEFECT R1 (lib/host/kvm.c): the kick signals the pthread_t that last
 * called vsched_kvm_pre_run() (3ce33ab). A kick is decided by the CAS
 * IN_GUEST -> EXITING and sent later, by the kick host callback; in
 * between, the vCPU thread may leave KVM_RUN (post_run), end and be
 * joined, while the vCPU lives on to be run by another thread (what
 * kvm.h now allows: "the thread that last called vsched_kvm_pre_run()").
 * glibc hands the joined thread's pthread_t (its cached stack) to the next
 * thread created, so the late kick lands in an unrelated thread: with the
 * handler vsched_kvm_signal_install() puts in (no SA_RESTART), its next
 * blocking syscall fails with EINTR. kvm.h only tells a VMM to destroy the
 * vCPU before joining its thread, which a VMM that keeps the vCPU cannot
 * do. Here the kick callback is held between the CAS and
 * vsched_kvm_kick() (a preemption there), the vCPU thread ends and is
 * joined, an unrelated thread is started, and the kick is let go.
 * Fix (/tmp/review3-fixes/01-kvm-kick-tid.diff): record the kernel thread
 * id (gettid()) in pre_run and signal it with tgkill(): a dead thread's id
 * gives ESRCH, and ids are not handed out again until the pid space wraps.
 */
static struct vsched_kvm_vcpu *r1_kv;
static _Atomic int r1_in_kick, r1_go, r1_kicked, r1_entered, r1_leave, r1_stop;
static _Atomic int r1_b_ready, r1_b_pending;

static void r1_kick(struct vsched_vcpu *v, void *ctx)
{
	(void)v, (void)ctx;
	atomic_store(&r1_in_kick, 1);
	while (!atomic_load(&r1_go))
		sched_yield();
	vsched_kvm_kick(r1_kv);
	atomic_store(&r1_kicked, 1);
}

static void r1_nop(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		   void *arg)
{
	(void)v, (void)k, (void)p, (void)arg;
}

static void *r1_vcpu_thread(void *arg)
{
	(void)arg;
	assert_int_equal(vsched_kvm_pre_run(r1_kv), 0);
	atomic_store(&r1_entered, 1);
	while (!atomic_load(&r1_leave))
		sched_yield();
	/* KVM_RUN returned (an exit of its own): leave, end the thread. */
	assert_true(vsched_kvm_post_run(r1_kv, 0) >= 0);
	return NULL;
}

static void *r1_poster(void *arg)
{
	vsched_post(arg, 3);
	return NULL;
}

/* Some other thread of the VMM (an I/O thread, a new vCPU thread not yet
 * entered): the kick signal blocked, so that one sent to it stays pending
 * where the test can see it. */
static void *r1_other(void *arg)
{
	sigset_t s, p;

	(void)arg;
	sigemptyset(&s);
	sigaddset(&s, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &s, NULL);
	atomic_store(&r1_b_ready, 1);
	while (!atomic_load(&r1_stop))
		sched_yield();
	sigpending(&p);
	atomic_store(&r1_b_pending, sigismember(&p, SIGUSR2));
	return NULL; /* a thread-directed pending signal dies with it */
}

static void test_kvm_late_kick_hits_a_reused_pthread(void **state)
{
	struct vsched_host_ops ops = { .kick = r1_kick };
	struct vsched_kvm_config c = { .size = sizeof(c), .signo = SIGUSR2 };
	struct sigaction old;
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	struct kvm_run *run;
	pthread_t a, b, p;
	int fd;

	(void)state;
	vm = make_vm(&ops, 0);
	declare(vm, 3, "ipi", 1, 0, r1_nop, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	v = make_vcpu(vm, 0);
	run = calloc(1, 4096);
	assert_non_null(run);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(sigaction(SIGUSR2, NULL, &old), 0);
	assert_int_equal(vsched_kvm_signal_install(SIGUSR2), 0);
	/* Set up here; run on thread a. */
	assert_int_equal(vsched_kvm_attach(v, fd, run, &c, &r1_kv), 0);
	assert_int_equal(pthread_create(&a, NULL, r1_vcpu_thread, NULL), 0);
	while (!atomic_load(&r1_entered))
		sched_yield();
	/* A post: its CAS wins IN_GUEST -> EXITING, its kick is held. */
	assert_int_equal(pthread_create(&p, NULL, r1_poster, v), 0);
	while (!atomic_load(&r1_in_kick))
		sched_yield();
	/* The vCPU thread leaves the guest and ends; the VMM joins it. */
	atomic_store(&r1_leave, 1);
	assert_int_equal(pthread_join(a, NULL), 0);
	assert_int_equal(vsched_vcpu_mode(v), VSCHED_MODE_OUTSIDE_GUEST);
	/* Another thread starts (glibc gives it a's stack and pthread_t). */
	assert_int_equal(pthread_create(&b, NULL, r1_other, NULL), 0);
	while (!atomic_load(&r1_b_ready))
		sched_yield();
	print_message("pthread_t reused: %s\n", pthread_equal(a, b) ? "yes" : "no");
	/* The held kick goes out now. */
	atomic_store(&r1_go, 1);
	assert_int_equal(pthread_join(p, NULL), 0);
	assert_true(atomic_load(&r1_kicked));
	atomic_store(&r1_stop, 1);
	assert_int_equal(pthread_join(b, NULL), 0);

	assert_int_equal(vsched_vcpu_destroy(v), 0);
	assert_int_equal(vsched_kvm_detach(r1_kv), 0);
	assert_int_equal(vsched_vm_destroy(vm), 0);
	close(fd);
	free(run);
	sigaction(SIGUSR2, &old, NULL);
	/* The kick of an entry that had ended reached a thread that never
	 * ran the vCPU. */
	assert_false(atomic_load(&r1_b_pending));
}
#endif

int main(void)
{
#ifdef VSCHED_TEST_KVM
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kvm_late_kick_hits_a_reused_pthread),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
#else
	return 77; /* no libvsched-kvm in this build: skipped */
#endif
}
