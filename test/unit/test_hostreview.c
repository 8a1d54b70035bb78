/* SPDX-License-Identifier: MIT */
/*
 * Reproducers of the defects an adversarial review of the host adapter
 * (libvsched-kvm), the statistics and the arch profiles found
 * (2026-12-02). Each test names its defect; each failed on 291e993 and
 * passes with the fix in 3ce33ab. The last section is session 26's misuse
 * hunt on the adapter: each of its tests failed on 3643e24.
 * No /dev/kvm is needed: as in test_kvm.c, the vCPU fd is /dev/null (every
 * KVM ioctl fails with ENOTTY) and kvm_run is plain memory.
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
#include <sys/wait.h>
#include <unistd.h>

#ifdef VSCHED_TEST_KVM
#include <linux/kvm.h>
#include <vsched/kvm.h>
#endif

#include "common.h"

/* ---- the statistics ---- */

static void count(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		  void *arg)
{
	(void)v, (void)k, (void)p, (void)arg;
}

/*
 * DEFECT H1 (lib/stats_write.c): vsched_vcpu_stats_write() says "-EIO when
 * writing failed", but it only looks at ferror() after fprintf() into the
 * caller's buffered stream: a snapshot smaller than the stream's buffer
 * (every snapshot of a fresh vCPU: about 1 KB against 4 KB) has not been
 * written yet, so a write that fails (a full disk: /dev/full) returns 0 and
 * the snapshot is lost silently. Fix: fflush(f) before the error check.
 */
static void test_stats_write_reports_write_error(void **state)
{
	struct vsched_vm *vm = make_vm(NULL, 0);
	struct vsched_vcpu *v;
	FILE *f;

	(void)state;
	declare(vm, 0, "irq", 0, 0, count, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	v = make_vcpu(vm, 0);
	f = fopen("/dev/full", "w");
	if (!f) {
		vsched_vm_destroy(vm);
		skip();
	}
	assert_int_equal(vsched_vcpu_stats_write(v, f, VSCHED_STATS_TEXT), -EIO);
	clearerr(f);
	assert_int_equal(vsched_vcpu_stats_write(v, f, VSCHED_STATS_JSON), -EIO);
	fclose(f);
	vsched_vm_destroy(vm);
}

/* The keys of the flat JSON object that starts at `s` ("{...}"), into
 * keys[]: returns how many, after checking that none occurs twice. */
static unsigned distinct_keys(const char *s, char keys[][64], unsigned max)
{
	unsigned n = 0;

	for (const char *p = strchr(s, '"'); p && *p != '}'; ) {
		const char *e = strchr(p + 1, '"');

		assert_non_null(e);
		assert_true(n < max && (size_t)(e - p - 1) < 64);
		memcpy(keys[n], p + 1, (size_t)(e - p - 1));
		keys[n][e - p - 1] = '\0';
		for (unsigned i = 0; i < n; i++)
			if (!strcmp(keys[i], keys[n]))
				fail_msg("JSON key \"%s\" twice in %s", keys[n], s);
		n++;
		p = strpbrk(e + 1, "\"}");
	}
	return n;
}

/*
 * DEFECT H2 (lib/request.c, lib/stats_write.c): the stats writers name a
 * per-kind value by the kind's name, but vsched_request_declare() accepts
 * two kinds of the same name (also two long names that differ only after
 * the 31 characters it keeps). The JSON object then has the same key
 * twice ({"serviced": {"irq": 3, "irq": 5}}): a JSON reader keeps one of
 * them (Python's json, jq: the last), so a kind's counts are lost, and the
 * text lines of the two kinds cannot be told apart. Fixed in 3ce33ab:
 * declare refuses a name already declared, after truncation, with
 * VSCHED_EEXIST (keying such a kind `name#K` in the writers was the other
 * way). The test accepts either
 * way of making the output unambiguous: the declare refused, or keys that
 * differ.
 */
static void dup_names_case(const char *a, const char *b)
{
	struct vsched_request_desc d0 = { .name = a, .priority = 0, .handler = count };
	struct vsched_request_desc d1 = { .name = b, .priority = 1, .handler = count };
	struct vsched_vm *vm = make_vm(NULL, 0);
	struct vsched_vcpu *v;
	char *buf = NULL, keys[8][64];
	size_t len = 0;
	FILE *f;
	int rc;

	assert_int_equal(vsched_request_declare(vm, 0, &d0), 0);
	rc = vsched_request_declare(vm, 1, &d1);
	if (rc == VSCHED_EEXIST) { /* refused: the names stay unique */
		vsched_vm_destroy(vm);
		return;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	v = make_vcpu(vm, 0);
	assert_int_equal(vsched_post(v, 0), 0);
	assert_true(vsched_service(v) >= 0);
	assert_int_equal(vsched_post(v, 1), 0);
	assert_true(vsched_service(v) >= 0);
	f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(vsched_vcpu_stats_write(v, f, VSCHED_STATS_JSON), 0);
	fclose(f);
	/* "serviced": {...}: one key per kind serviced, all different. */
	{
		char *s = strstr(buf, "\"serviced\": {");
		char *e;

		assert_non_null(s);
		s += strlen("\"serviced\": ");
		e = strchr(s, '}');
		assert_non_null(e);
		e[1] = '\0';
		assert_int_equal(distinct_keys(s, keys, 8), 2);
	}
	free(buf);
	vsched_vm_destroy(vm);
}

static void test_stats_kind_names_unambiguous(void **state)
{
	(void)state;
	dup_names_case("irq", "irq");
	/* 40 characters each, the same first 31. */
	dup_names_case("timer_interrupt_of_the_local_apic_0000",
		       "timer_interrupt_of_the_local_apic_1111");
}

/* ---- the arch profiles ---- */

/*
 * DEFECT H3 (lib/profile.c): struct vsched_profile is public and
 * vsched_profile_find()/vsched_profile_declare() take any profile, but a
 * profile whose table is NULL (nkinds > 0), or one of whose kinds has no
 * name, crashes vsched_profile_find() (strcmp on NULL) and
 * vsched_profile_declare() (a NULL table) instead of returning
 * VSCHED_EINVAL ("bad input gets a negative errno-style code, never a
 * crash"). Fix: both refuse it (VSCHED_EINVAL), and find skips a kind
 * without a name. Run in a child, which the crash kills.
 */
static int profile_child(void)
{
	static const struct vsched_profile_kind kinds[] = {
		{ 0, NULL, 0, 0, 0 },
		{ 1, "EVENT", 10, 0, 0 },
	};
	const struct vsched_profile nulltab = { .arch = "mine", .nkinds = 2 };
	const struct vsched_profile noname = { .arch = "mine", .nkinds = 2,
					       .kinds = kinds };
	struct vsched_vm *vm = make_vm(NULL, 0);

	if (vsched_profile_find(&nulltab, "EVENT") != VSCHED_EINVAL)
		return 1;
	if (vsched_profile_find(&noname, "EVENT") != 1)
		return 2;
	if (vsched_profile_declare(vm, &nulltab, NULL, NULL) != VSCHED_EINVAL)
		return 3;
	vsched_vm_destroy(vm);
	return 0;
}

/* Run body() in a child and check that it exited with 0: a crash (a fault
 * signal, at its default action there) fails the test instead of ending
 * the test program. */
static void in_child(int (*body)(void))
{
	int status;
	pid_t pid;

	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* cmocka's own handler would carry on with the next test in
		 * the child: the crash must end it. */
		signal(SIGSEGV, SIG_DFL);
		signal(SIGBUS, SIG_DFL);
		signal(SIGILL, SIG_DFL);
		_exit(body());
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status)); /* not killed by a fault */
	assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_profile_caller_table_checked(void **state)
{
	(void)state;
	in_child(profile_child);
}

#ifdef VSCHED_TEST_KVM
/* ---- the KVM adapter ---- */

struct kfix {
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	struct kvm_run *run;
	struct vsched_kvm_vcpu *kv;
	int fd;
};

static void kfix_up(struct kfix *f, bool kernel_irqchip)
{
	struct vsched_kvm_config c = { .size = sizeof(c),
				       .kernel_irqchip = kernel_irqchip };

	f->vm = make_vm(NULL, 0);
	declare(f->vm, 3, "ipi", 1, 0, count, NULL, 0);
	assert_int_equal(vsched_request_finalize(f->vm, 0), 0);
	f->v = make_vcpu(f->vm, 0);
	f->run = calloc(1, 4096);
	assert_non_null(f->run);
	f->fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_true(f->fd >= 0);
	assert_int_equal(vsched_kvm_signal_install(SIGUSR1), 0);
	assert_int_equal(vsched_kvm_attach(f->v, f->fd, f->run, &c, &f->kv), 0);
}

/* The documented teardown order: vCPU destroy, then detach. */
static void kfix_down(struct kfix *f)
{
	assert_int_equal(vsched_vcpu_destroy(f->v), 0);
	assert_int_equal(vsched_kvm_detach(f->kv), 0);
	vsched_vm_destroy(f->vm);
	close(f->fd);
	free(f->run);
}

/*
 * DEFECT H4 (lib/host/kvm.c): vsched_kvm_halt() between a successful
 * vsched_kvm_pre_run() and its vsched_kvm_post_run() (the vCPU is IN_GUEST:
 * KVM_RUN has not returned, so there was no KVM_EXIT_HLT) is not refused
 * when an interrupt is owed: it returns 0, a success, and counts a halt and
 * a skipped halt that never happened. With nothing owed the same call
 * comes back VSCHED_ESTATE from vsched_vcpu_block(), but still counted as a
 * halt. Fix: refuse it with VSCHED_ESTATE, counting nothing, as pre_run and
 * post_run refuse their own out-of-order calls.
 */
static void test_kvm_halt_inside_run_refused(void **state)
{
	struct vsched_kvm_stats st = { .size = sizeof(st) };
	struct kfix f;

	(void)state;
	kfix_up(&f, false);
	assert_int_equal(vsched_kvm_pre_run(f.kv), 0);
	assert_int_equal(vsched_vcpu_mode(f.v), VSCHED_MODE_IN_GUEST);
	assert_int_equal(vsched_kvm_halt(f.kv, VSCHED_DEADLINE_NONE), VSCHED_ESTATE);
	assert_int_equal(vsched_kvm_queue_irq(f.kv, 0x40), 0);
	assert_int_equal(vsched_kvm_halt(f.kv, VSCHED_DEADLINE_NONE), VSCHED_ESTATE);
	assert_int_equal(vsched_kvm_read_stats(f.kv, &st), 0);
	assert_int_equal(st.halts, 0);
	assert_int_equal(st.halts_skipped, 0);
	/* Nothing changed: the entry ends normally and the vector is owed. */
	f.run->exit_reason = KVM_EXIT_HLT;
	assert_int_equal(vsched_kvm_post_run(f.kv, 0), KVM_EXIT_HLT);
	assert_true(vsched_kvm_irq_owed(f.kv));
	kfix_down(&f);
}

/*
 * DEFECT H5 (lib/host/kvm.c): on an adapter attached with kernel_irqchip
 * (KVM's in-kernel irqchip: the adapter never issues KVM_INTERRUPT, nor
 * asks for a window), vsched_kvm_queue_irq() accepts a vector and returns
 * 0, but nothing ever injects it: the interrupt is lost without a word,
 * and from then on vsched_kvm_irq_owed() stays true, so every
 * vsched_kvm_halt() returns 0 at once (counted as a skipped halt) instead
 * of blocking: a halted vCPU spins through its run loop. The header calls
 * the queue the userspace irqchip's. Fix: refuse it (VSCHED_EINVAL) on
 * such an adapter.
 */
static void test_kvm_queue_irq_kernel_irqchip_refused(void **state)
{
	struct vsched_kvm_stats st = { .size = sizeof(st) };
	struct kfix f;
	uint64_t now;

	(void)state;
	kfix_up(&f, true);
	assert_int_equal(vsched_kvm_queue_irq(f.kv, 0x40), VSCHED_EINVAL);
	assert_false(vsched_kvm_irq_owed(f.kv));
	/* So a halt blocks (here to a deadline 2 ms away, nothing posted):
	 * the wake reason says it did, not the time it took. */
	now = vsched_now_ns(f.vm);
	assert_int_equal(vsched_kvm_halt(f.kv, now + 2000000), VSCHED_WAKE_DEADLINE);
	assert_int_equal(vsched_kvm_read_stats(f.kv, &st), 0);
	assert_int_equal(st.halts_skipped, 0);
	kfix_down(&f);
}

/*
 * DEFECT H6 (lib/host/kvm.c): vsched_kvm_post_run(kv, run_ret) trusts
 * run_ret ("0, or the negative errno it failed with"): a positive value
 * (the ioctl's raw return taken for a reason) is treated as a success and
 * the stale kvm_run->exit_reason comes back as if KVM had exited; a value
 * below -4095 (not an errno) is returned as the call's own result, which
 * vsched_strerror() calls "unknown vsched error" or, for the right value,
 * explains as one of vsched's own conditions (VSCHED_ESTATE, a call not
 * valid in the vCPU's current mode) though the vCPU did leave guest mode.
 * Bad input must be refused with VSCHED_EINVAL and change nothing. Fix:
 * refuse a run_ret outside 0 and -4095..-1, before the entry is closed.
 */
static void test_kvm_post_run_bad_run_ret(void **state)
{
	struct kfix f;

	(void)state;
	kfix_up(&f, false);
	assert_int_equal(vsched_kvm_pre_run(f.kv), 0);
	f.run->exit_reason = KVM_EXIT_IO;
	assert_int_equal(vsched_kvm_post_run(f.kv, 1), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_post_run(f.kv, VSCHED_ESTATE), VSCHED_EINVAL);
	assert_int_equal(vsched_kvm_post_run(f.kv, -4096), VSCHED_EINVAL);
	/* Refused calls changed nothing: the entry is still open. */
	assert_int_equal(vsched_vcpu_mode(f.v), VSCHED_MODE_IN_GUEST);
	assert_int_equal(vsched_kvm_post_run(f.kv, 0), KVM_EXIT_IO);
	assert_int_equal(vsched_vcpu_mode(f.v), VSCHED_MODE_OUTSIDE_GUEST);
	kfix_down(&f);
}

/*
 * DEFECT H7 (lib/host/kvm.c): vsched_kvm_read_stats() is documented for
 * any thread ("each counter is read whole"), but the adapter's counters
 * are plain uint64_t incremented by the vCPU thread (kv->st.runs++) and
 * copied with memcpy by the reader: a data race, undefined behaviour in
 * C11. The core's counters are relaxed atomics for this reason
 * (lib/internal.h). Only ThreadSanitizer can see it, and only where the
 * copy is instrumented: clang's TSan reports it (exit 66) in
 *   clang -fsanitize=thread -g -O1 -DVSCHED_TEST_KVM -Iinclude -Ilib \
 *     -Itest/unit test/unit/test_hostreview.c lib/host/kvm.c -Lbuild \
 *     -lvsched -lcmocka -Wl,-rpath,$PWD/build -o thr && ./thr
 * while GCC 12's (CI's build-tsan) expands struct_out's memcpy inline
 * (rep movsq) without instrumenting it and stays silent; the other builds
 * cannot see a race. Fix: single-writer relaxed atomic increments and
 * per-counter relaxed loads.
 */
struct reader {
	struct vsched_kvm_vcpu *kv;
	_Atomic bool stop;
	_Atomic uint64_t reads;
	uint64_t last_runs;
	bool backwards;
};

static void *stats_reader(void *arg)
{
	struct reader *r = arg;

	while (!atomic_load(&r->stop)) {
		struct vsched_kvm_stats st = { .size = sizeof(st) };

		if (vsched_kvm_read_stats(r->kv, &st) != 0)
			break;
		if (st.runs < r->last_runs)
			r->backwards = true;
		r->last_runs = st.runs;
		atomic_fetch_add_explicit(&r->reads, 1, memory_order_relaxed);
	}
	return NULL;
}

static void test_kvm_read_stats_from_another_thread(void **state)
{
	struct vsched_kvm_stats st = { .size = sizeof(st) };
	struct reader r = { 0 };
	struct kfix f;
	pthread_t t;
	uint64_t n;

	(void)state;
	kfix_up(&f, false);
	r.kv = f.kv;
	assert_int_equal(pthread_create(&t, NULL, stats_reader, &r), 0);
	/* Entries while the reader reads: at least 20,000, and on until it
	 * has made 100 reads (counted with relaxed atomics, so that no
	 * synchronisation of the test's own orders the two threads), at most
	 * 5,000,000 (a reader never scheduled still ends the test). */
	for (n = 0; n < 20000 || (atomic_load_explicit(&r.reads, memory_order_relaxed) < 100 &&
				  n < 5000000); n++) {
		assert_int_equal(vsched_kvm_pre_run(f.kv), 0);
		assert_int_equal(vsched_kvm_post_run(f.kv, -EINTR), VSCHED_KVM_KICKED);
	}
	atomic_store(&r.stop, true);
	pthread_join(t, NULL);
	assert_false(r.backwards);
	assert_int_equal(vsched_kvm_read_stats(f.kv, &st), 0);
	assert_int_equal(st.runs, n);
	assert_int_equal(st.kicked_exits, n);
	kfix_down(&f);
}
/*
 * DEFECT H8 (lib/host/kvm.c): the adapter keeps a pointer to the VM's
 * allocator (kv->alloc = vsched_vm_allocator(vm), which is &vm->alloc,
 * inside the VM), and vsched_kvm_detach() calls kv->alloc->free. Detach is
 * documented "after that destroy", the vCPU's; vsched_vm_destroy()
 * destroys every vCPU and frees the VM, so a VMM that tears down with
 * vm_destroy and then detaches (the natural order when the VM owns its
 * vCPUs) reads freed memory and calls a function pointer from it: a
 * use-after-free, here a crash (the VM's allocator poisons what it frees).
 * Fix: the adapter keeps its own copy of the allocator. Run in a child.
 */
static size_t h8_allocs, h8_frees;

static void *h8_alloc(size_t size, size_t align, void *ctx)
{
	void *p = NULL;

	(void)ctx;
	h8_allocs++;
	return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

static void h8_free(void *p, size_t size, void *ctx)
{
	(void)ctx;
	h8_frees++;
	/* What a freed VM looks like to a late reader (volatile: a memset
	 * before free() is a dead store the compiler drops). */
	for (volatile unsigned char *b = p; size--; b++)
		*b = 0xa5;
	free(p);
}

static int detach_child(void)
{
	struct vsched_allocator a = { h8_alloc, h8_free, NULL };
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .alloc = &a };
	struct vsched_kvm_vcpu *kv = NULL;
	struct vsched_vm *vm = NULL;
	struct vsched_vcpu *v = NULL;
	struct kvm_run *run = calloc(1, 4096);
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (!run || fd < 0 || vsched_vm_create(&cfg, &vm) ||
	    vsched_request_finalize(vm, 0) || vsched_vcpu_create(vm, 0, NULL, &v) ||
	    vsched_kvm_signal_install(SIGUSR1) ||
	    vsched_kvm_attach(v, fd, run, NULL, &kv))
		return 10;
	vsched_vm_destroy(vm); /* destroys the vCPU, frees the VM */
	if (vsched_kvm_detach(kv) != 0)
		return 11;
	if (h8_allocs != h8_frees) /* the adapter went back to its allocator */
		return 12;
	close(fd);
	free(run);
	return 0;
}

static void test_kvm_detach_after_vm_destroy(void **state)
{
	(void)state;
	in_child(detach_child);
}
/*
 * DEFECT H9 (lib/host/kvm.c): the kick signals the thread that called
 * vsched_kvm_attach() (kv->thread = pthread_self() there), not the thread
 * inside KVM_RUN. A VMM that sets its vCPUs up on one thread and runs each
 * on its own (the usual shape: create and attach at machine setup, then
 * start the vCPU threads) is refused nothing and loses kicks: the signal
 * interrupts the setup thread, and a guest that spins inside KVM_RUN runs
 * on with the request pending until its next exit (immediate_exit helps
 * only at the next entry). Here the signal runs the handler on the kicker
 * itself. The header asks for attach on the vCPU's thread, but nothing
 * checks it. Fix: vsched_kvm_pre_run() records the calling thread before
 * it commits, so the kick goes to the thread that entered (by kernel
 * thread id since 2e815e8: DEFECT R1 below).
 */
static _Atomic(pthread_t) h9_handled_on;
static _Atomic bool h9_handled;

static void h9_handler(int sig)
{
	(void)sig;
	atomic_store(&h9_handled_on, pthread_self());
	atomic_store(&h9_handled, true);
}

struct h9 {
	struct kfix *f;
	_Atomic bool entered;
	int pre, post;
};

static void *h9_vcpu_thread(void *arg)
{
	struct h9 *h = arg;
	sigset_t block, old;

	/* The kick signal blocked except while waiting for it: a kick that
	 * comes before the wait stays pending, none is lost by the test. */
	sigemptyset(&block);
	sigaddset(&block, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	h->pre = vsched_kvm_pre_run(h->f->kv);
	atomic_store(&h->entered, true);
	while (!atomic_load(&h9_handled))
		sigsuspend(&old);
	h->post = vsched_kvm_post_run(h->f->kv, -EINTR);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return NULL;
}

static void test_kvm_kick_signals_the_entering_thread(void **state)
{
	struct vsched_kvm_config c = { .size = sizeof(c), .signo = SIGUSR2 };
	struct sigaction sa, old;
	struct h9 h = { 0 };
	struct kfix f;
	pthread_t t;
	bool on_vcpu;

	(void)state;
	kfix_up(&f, false); /* attached on this thread, with SIGUSR1 */
	assert_int_equal(vsched_kvm_detach(f.kv), 0);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = h9_handler;
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
	/* Set up here, as a VMM's main thread does; run on another. */
	assert_int_equal(vsched_kvm_attach(f.v, f.fd, f.run, &c, &f.kv), 0);
	h.f = &f;
	atomic_store(&h9_handled, false);
	assert_int_equal(pthread_create(&t, NULL, h9_vcpu_thread, &h), 0);
	while (!atomic_load(&h.entered))
		usleep(100);
	assert_int_equal(h.pre, 0);
	/* What the kick host callback does for a post while IN_GUEST. */
	assert_int_equal(vsched_kvm_kick(f.kv), 0);
	/* Wherever the signal went, its handler runs (on this thread at the
	 * latest when it next enters the kernel or, under qemu-user, the
	 * emulator's next check; on the vCPU thread in its sigsuspend). */
	while (!atomic_load(&h9_handled))
		sched_yield();
	on_vcpu = pthread_equal(atomic_load(&h9_handled_on), t);
	if (!on_vcpu) /* the vCPU thread still waits: end its wait */
		pthread_kill(t, SIGUSR2);
	pthread_join(t, NULL);
	sigaction(SIGUSR2, &old, NULL);
	assert_int_equal(h.post, VSCHED_KVM_KICKED);
	assert_true(on_vcpu);
	assert_true(pthread_equal(atomic_load(&h9_handled_on), t));
	kfix_down(&f);
}
/*
 * DEFECT H10 (lib/host/kvm.c): vsched_kvm_signal_install() and attach take
 * any signal but 0, SIGKILL and SIGSTOP as the kick signal, fault signals
 * included. vsched_kvm_signal_install(SIGSEGV) replaces the process's
 * SIGSEGV action with an empty handler that returns: every later invalid
 * access re-executes the faulting instruction and the process spins
 * forever instead of crashing (the same for SIGBUS, SIGILL, SIGFPE; SIGTRAP
 * and SIGSYS are a debugger's and seccomp's). With attach, the kick then
 * runs the VMM's crash handler. Such a signal is a "bad signal": refuse it
 * with VSCHED_EINVAL and leave its action alone. DEFECT F6 (session 26's
 * hunt): so are the signals the process is sent with a meaning, SIGABRT
 * (abort()), SIGXCPU and SIGXFSZ (its limits: with the kick's empty
 * handler a limit passed unnoticed); they were accepted until 42fcc26.
 */
static void test_kvm_fault_signal_refused(void **state)
{
	static const int faults[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP,
				      SIGSYS,  SIGABRT, SIGXCPU, SIGXFSZ };
	struct sigaction before, after;
	struct kfix f;

	(void)state;
	kfix_up(&f, false);
	for (unsigned i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		struct vsched_kvm_config c = { .size = sizeof(c), .signo = faults[i] };
		struct vsched_kvm_vcpu *kv = NULL;
		int rc;

		assert_int_equal(sigaction(faults[i], NULL, &before), 0);
		rc = vsched_kvm_signal_install(faults[i]);
		assert_int_equal(sigaction(faults[i], NULL, &after), 0);
		/* Put back what was there (cmocka's crash handler) first. */
		sigaction(faults[i], &before, NULL);
		assert_int_equal(rc, VSCHED_EINVAL);
		assert_true(after.sa_handler == before.sa_handler);
		/* The VMM's own handler of a fault signal: not a kick either. */
		assert_int_equal(vsched_kvm_attach(f.v, f.fd, f.run, &c, &kv), VSCHED_EINVAL);
		assert_null(kv);
	}
	kfix_down(&f);
}
/*
 * DEFECT R1 (lib/host/kvm.c; a review of 3ce33ab): the kick signals the
 * pthread_t that last called vsched_kvm_pre_run() (3ce33ab). A kick is decided by the CAS
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
 * Fixed in 2e815e8: record the kernel thread
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

/* ---- session 26's misuse hunt on the adapter (fixed in session 27) ---- */

/*
 * DEFECT F1: vsched_kvm_detach() between vsched_kvm_pre_run() and its
 * vsched_kvm_post_run() (KVM_RUN not yet returned) returned 0 and freed
 * the adapter, which post_run then read and wrote. F8: a halt its block
 * refused (a destroyed vCPU) still counted in `halts`. F9: post_run passed
 * on any exit reason, one of 0x10000 or more too, which the caller takes
 * for VSCHED_KVM_KICKED or (above INT_MAX) an errno.
 */
static void test_kvm_detach_in_run_refused(void **state)
{
	struct vsched_kvm_stats st = { .size = sizeof(st) };
	struct kfix f;

	(void)state;
	kfix_up(&f, false);
	assert_int_equal(vsched_kvm_pre_run(f.kv), 0);
	assert_int_equal(vsched_kvm_detach(f.kv), VSCHED_ESTATE);
	f.run->exit_reason = VSCHED_KVM_KICKED;
	assert_int_equal(vsched_kvm_post_run(f.kv, 0), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_mode(f.v), VSCHED_MODE_OUTSIDE_GUEST);
	assert_int_equal(vsched_kvm_pre_run(f.kv), 0);
	f.run->exit_reason = 0xffffffffu;
	assert_int_equal(vsched_kvm_post_run(f.kv, 0), VSCHED_EINVAL);
	f.run->exit_reason = KVM_EXIT_HLT;
	assert_int_equal(vsched_kvm_pre_run(f.kv), 0);
	assert_int_equal(vsched_kvm_post_run(f.kv, 0), KVM_EXIT_HLT);
	/* F8: the block refuses a destroyed vCPU: no halt handled. */
	assert_int_equal(vsched_vcpu_destroy(f.v), 0);
	assert_int_equal(vsched_kvm_halt(f.kv, VSCHED_DEADLINE_NONE), VSCHED_EDESTROYED);
	assert_int_equal(vsched_kvm_read_stats(f.kv, &st), 0);
	assert_int_equal(st.halts, 0);
	assert_int_equal(vsched_kvm_detach(f.kv), 0);
	vsched_vm_destroy(f.vm);
	close(f.fd);
	free(f.run);
}

/*
 * DEFECT F2: vsched_kvm_detach() from another thread while the vCPU's
 * thread sleeps in vsched_kvm_halt() returned 0 and freed the adapter;
 * the halt's wakeup then read it (irq_owed) and counted in it. Refused
 * now, nothing freed; the halt ends as it would have.
 */
struct f2_halt {
	struct vsched_kvm_vcpu *kv;
	_Atomic int rc;
};

static void *f2_halter(void *arg)
{
	struct f2_halt *h = arg;

	atomic_store(&h->rc, vsched_kvm_halt(h->kv, VSCHED_DEADLINE_NONE));
	return NULL;
}

static void f2_queue(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		     void *arg)
{
	(void)v, (void)k, (void)p;
	assert_int_equal(vsched_kvm_queue_irq(*(struct vsched_kvm_vcpu **)arg, 0x40), 0);
}

static void test_kvm_detach_in_halt_refused(void **state)
{
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	struct vsched_kvm_vcpu *kv;
	struct kvm_run *run = calloc(1, 4096);
	struct f2_halt h = { .rc = 12345 };
	pthread_t t;
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC), m;

	(void)state;
	assert_non_null(run);
	assert_true(fd >= 0);
	vm = make_vm(NULL, 0);
	declare(vm, 3, "ipi", 1, 0, f2_queue, &kv, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	v = make_vcpu(vm, 0);
	assert_int_equal(vsched_kvm_signal_install(SIGUSR1), 0);
	assert_int_equal(vsched_kvm_attach(v, fd, run, NULL, &kv), 0);
	h.kv = kv;
	assert_int_equal(pthread_create(&t, NULL, f2_halter, &h), 0);
	do { /* inside the halt's block: polling, then asleep */
		sched_yield();
		m = vsched_vcpu_mode(v);
	} while (m != VSCHED_MODE_POLLING && m != VSCHED_MODE_BLOCKED);
	assert_int_equal(vsched_kvm_detach(kv), VSCHED_ESTATE);
	assert_int_equal(vsched_post(v, 3), 0); /* the IPI ends the halt */
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(atomic_load(&h.rc), VSCHED_WAKE_REQUEST);
	assert_int_equal(vsched_vcpu_destroy(v), 0);
	assert_int_equal(vsched_kvm_detach(kv), 0);
	vsched_vm_destroy(vm);
	close(fd);
	free(run);
}

/*
 * DEFECT F4: vsched_kvm_attach() looked at no state of the vCPU: it
 * attached a destroyed vCPU (nothing will run it) and one in the guest
 * (its kicks then went to the attaching thread), returning 0. Now
 * VSCHED_EDESTROYED and VSCHED_ESTATE, nothing allocated. (A second
 * attach of a vCPU in the right state is not detected: kvm.h.)
 */
static void test_kvm_attach_checks_the_vcpu(void **state)
{
	struct vsched_kvm_vcpu *kv = NULL;
	struct kfix f;

	(void)state;
	kfix_up(&f, false);
	assert_int_equal(vsched_kvm_pre_run(f.kv), 0);
	assert_int_equal(vsched_kvm_attach(f.v, f.fd, f.run, NULL, &kv), VSCHED_ESTATE);
	assert_null(kv);
	assert_int_equal(vsched_kvm_post_run(f.kv, -EINTR), VSCHED_KVM_KICKED);
	assert_int_equal(vsched_vcpu_destroy(f.v), 0);
	assert_int_equal(vsched_kvm_attach(f.v, f.fd, f.run, NULL, &kv), VSCHED_EDESTROYED);
	assert_null(kv);
	assert_int_equal(vsched_kvm_detach(f.kv), 0);
	vsched_vm_destroy(f.vm);
	close(f.fd);
	free(f.run);
}

/*
 * DEFECT F7: the thread id the kick signals was cached per thread and
 * survived fork(): in the child, the forking thread's copy attached and
 * ran with the parent's id, and every kick's tgkill(child pid, parent's
 * id) found no thread: a vCPU in KVM_RUN was never kicked. The child
 * here attaches on the thread that forked (its parent attached first, so
 * the id was cached) and kicks itself: the kick must arrive.
 */
static _Atomic int f7_got;

static void f7_handler(int sig)
{
	(void)sig;
	atomic_store(&f7_got, 1);
}

static void test_kvm_kick_after_fork(void **state)
{
	struct kfix f;
	pid_t pid;
	int status;

	(void)state;
	kfix_up(&f, false); /* caches this thread's id */
	assert_int_equal(vsched_kvm_pre_run(f.kv), 0);
	assert_int_equal(vsched_kvm_post_run(f.kv, -EINTR), VSCHED_KVM_KICKED);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct sigaction sa = { .sa_handler = f7_handler };
		struct vsched_kvm_config c = { .size = sizeof(c), .signo = SIGUSR2 };
		struct vsched_vm *vm = make_vm(NULL, 0);
		struct vsched_vcpu *v;
		struct vsched_kvm_vcpu *kv;

		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR2, &sa, NULL);
		declare(vm, 3, "ipi", 1, 0, count, NULL, 0);
		if (vsched_request_finalize(vm, 0) ||
		    vsched_vcpu_create(vm, 0, NULL, &v) ||
		    vsched_kvm_attach(v, f.fd, f.run, &c, &kv))
			_exit(2);
		vsched_kvm_kick(kv); /* tgkill to this thread: delivered now */
		_exit(atomic_load(&f7_got) ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	kfix_down(&f);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/*
 * DEFECT F10 (adapter side): the adapter's calls from a request handler
 * that its own service runs. From pre_run's service, vsched_kvm_run()
 * entered the guest inside the handler (pre_run's nested service had
 * nothing pending, the enter succeeded), vsched_kvm_halt() ran, and
 * vsched_kvm_detach() freed the adapter under pre_run. Each is refused
 * now with VSCHED_ESTATE, and the outer pre_run goes on. So is
 * vsched_kvm_post_run() (session 27's review: it was accepted, closed
 * no entry, left the adapter idle, and the real post_run was refused
 * while detach freed the adapter with the guest entered).
 */
static struct vsched_kvm_vcpu *f10_kv;
static int f10_run, f10_halt, f10_detach, f10_post;

static void f10_handler(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
			void *arg)
{
	(void)v, (void)k, (void)p, (void)arg;
	assert_int_equal(vsched_kvm_queue_irq(f10_kv, 0x40), 0); /* no sleep */
	f10_run = vsched_kvm_run(f10_kv);
	f10_halt = vsched_kvm_halt(f10_kv, VSCHED_DEADLINE_NONE);
	f10_detach = vsched_kvm_detach(f10_kv);
	f10_post = vsched_kvm_post_run(f10_kv, 0);
}

static void test_kvm_calls_from_own_handler_refused(void **state)
{
	struct vsched_vm *vm = make_vm(NULL, 0);
	struct vsched_vcpu *v;
	struct kvm_run *run = calloc(1, 4096);
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	(void)state;
	assert_non_null(run);
	assert_true(fd >= 0);
	declare(vm, 3, "ipi", 1, 0, f10_handler, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	v = make_vcpu(vm, 0);
	assert_int_equal(vsched_kvm_signal_install(SIGUSR1), 0);
	assert_int_equal(vsched_kvm_attach(v, fd, run, NULL, &f10_kv), 0);
	f10_run = f10_halt = f10_detach = f10_post = 12345;
	assert_int_equal(vsched_post(v, 3), 0);
	assert_int_equal(vsched_kvm_pre_run(f10_kv), 0);
	assert_int_equal(f10_run, VSCHED_ESTATE);
	assert_int_equal(f10_halt, VSCHED_ESTATE);
	assert_int_equal(f10_detach, VSCHED_ESTATE);
	assert_int_equal(f10_post, VSCHED_ESTATE);
	assert_int_equal(vsched_vcpu_mode(v), VSCHED_MODE_IN_GUEST);
	assert_int_equal(vsched_kvm_detach(f10_kv), VSCHED_ESTATE);
	assert_int_equal(vsched_kvm_post_run(f10_kv, -EINTR), VSCHED_KVM_KICKED);
	assert_int_equal(vsched_vcpu_destroy(v), 0);
	assert_int_equal(vsched_kvm_detach(f10_kv), 0);
	vsched_vm_destroy(vm);
	close(fd);
	free(run);
}
#endif /* VSCHED_TEST_KVM */

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stats_write_reports_write_error),
		cmocka_unit_test(test_stats_kind_names_unambiguous),
		cmocka_unit_test(test_profile_caller_table_checked),
#ifdef VSCHED_TEST_KVM
		cmocka_unit_test(test_kvm_halt_inside_run_refused),
		cmocka_unit_test(test_kvm_queue_irq_kernel_irqchip_refused),
		cmocka_unit_test(test_kvm_post_run_bad_run_ret),
		cmocka_unit_test(test_kvm_read_stats_from_another_thread),
		cmocka_unit_test(test_kvm_detach_after_vm_destroy),
		cmocka_unit_test(test_kvm_kick_signals_the_entering_thread),
		cmocka_unit_test(test_kvm_fault_signal_refused),
		cmocka_unit_test(test_kvm_late_kick_hits_a_reused_pthread),
		cmocka_unit_test(test_kvm_detach_in_run_refused),
		cmocka_unit_test(test_kvm_detach_in_halt_refused),
		cmocka_unit_test(test_kvm_attach_checks_the_vcpu),
		cmocka_unit_test(test_kvm_kick_after_fork),
		cmocka_unit_test(test_kvm_calls_from_own_handler_refused),
#endif
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
