/* SPDX-License-Identifier: MIT */
/* Faults: allocation failure at every allocation site, a clock that goes
 * backwards, a vCPU destroyed while another thread posts to it, and one
 * destroyed while a poster is preempted in the middle of its wakeup. */
#define _GNU_SOURCE
#include <dirent.h>
#include <endian.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

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
#define NFDS 9
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
	int efd[NFDS];
	int rc;

	for (int i = 0; i < NFDS; i++)
		efd[i] = -1;
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
	/* The fd tables (five arrays, allocated by an fd_add that finds no
	 * free slot): nine fds, so that they are allocated (8 slots, the
	 * library's FIRST_SLOTS) and grown once. A failed fd_add leaves the
	 * fds registered before it as they were. */
	for (int i = 0; i < NFDS; i++) {
		efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		assert_true(efd[i] >= 0);
		rc = vsched_vcpu_fd_add(v[2], efd[i], EPOLLIN, (uint64_t)i);
		if (rc)
			goto out;
	}
	/* Nothing on the run paths allocates. */
	long before = nallocs;
	vsched_post(v[1], 1);
	vsched_service(v[1]);
	vsched_vcpu_block(v[1], 0);
	vsched_timer_arm(t, 1);
	vsched_vcpu_block(v[2], 0); /* a check-once of the fds */
	assert_int_equal(nallocs, before);
out:
	vsched_vm_destroy(vm);
	for (int i = 0; i < NFDS; i++)
		if (efd[i] >= 0)
			close(efd[i]);
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
	/* VM, vCPU table, policy, 3 vCPUs, timer, waiter, service, policy,
	 * and the fd tables' five arrays twice (the first fd_add, then the
	 * growth). */
	assert_true(sites >= 19);
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
		else if (rc == VSCHED_EDESTROYED)
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


/* --- destroy against a poster in mid-wake (issue 14, 4) ---
 * A poster wins BLOCKED -> OUTSIDE_GUEST and is preempted just before its
 * write to the vCPU's kick eventfd. The preemption is made deterministic
 * with a per-thread seccomp filter that traps exactly that write (SIGSYS):
 * the handler holds the poster there, then performs the write itself. If
 * vsched_vcpu_destroy() may close the eventfd meanwhile, the VMM reuses the
 * number (here: a memfd dup'ed onto it) and the late write lands in it. */

static int kick_evfd = -1;
static atomic_int in_wake, may_proceed, destroyed;

static void hold_the_write(int sig, siginfo_t *si, void *uc)
{
	uint64_t one = 1;
	struct iovec iov = { &one, sizeof(one) };
	(void)sig, (void)si, (void)uc;
	atomic_store(&in_wake, 1);
	while (!atomic_load(&may_proceed))
		sched_yield();
	/* The write the poster was about to make (writev is not trapped). */
	if (writev(kick_evfd, &iov, 1) < 0)
		(void)0; /* EBADF when the fd is gone: what the poster would get */
}

static int trap_kick_write(void)
{
	const unsigned lo = offsetof(struct seccomp_data, args[0]) +
			    (__BYTE_ORDER == __LITTLE_ENDIAN ? 0 : 4);
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_write, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, lo),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)kick_evfd, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
		return -1;
	/* This thread only (no TSYNC). */
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog);
}

static void *mid_wake_poster(void *arg)
{
	if (trap_kick_write())
		abort();
	if (vsched_post(arg, 1) != 0)
		abort();
	return NULL;
}

static void *blocker(void *arg)
{
	int rc = vsched_vcpu_block(arg, VSCHED_DEADLINE_NONE);
	if (rc != VSCHED_WAKE_REQUEST && rc != VSCHED_WAKE_FD)
		abort();
	return NULL;
}

static void *destroyer(void *arg)
{
	if (vsched_vcpu_destroy(arg) != 0)
		abort();
	atomic_store(&destroyed, 1);
	return NULL;
}

/* Eventfds of this process, as a bitmap of fd numbers below 1024. */
static void eventfds(unsigned char *map)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[64], link[64];
	memset(map, 0, 1024);
	assert_non_null(d);
	while ((e = readdir(d))) {
		int fd = atoi(e->d_name);
		ssize_t n;
		if (e->d_name[0] == '.' || fd >= 1024)
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		n = readlink(path, link, sizeof(link) - 1);
		if (n > 0) {
			link[n] = 0;
			map[fd] = strcmp(link, "anon_inode:[eventfd]") == 0;
		}
	}
	closedir(d);
}

static void test_destroy_against_mid_wake_poster(void **state)
{
	struct sigaction sa = { .sa_sigaction = hold_the_write, .sa_flags = SA_SIGINFO };
	unsigned char before[1024], after[1024];
	pthread_t vt, pt, dt;
	int p[2], reused = 0;
	struct stat st = { 0 };
	(void)state;
	const char *emu = getenv("VSCHED_UNDER_EMULATOR");
	if (getenv("VSCHED_UNDER_VALGRIND") || (emu && *emu == '1')) {
		skip();
		return;
	}
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGSYS, &sa, NULL), 0);
	struct vsched_vm *vm = make_vm(NULL, 0);
	declare(vm, 1, "r", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	assert_int_equal(pipe(p), 0);
	eventfds(before);
	assert_int_equal(vsched_vcpu_fd_add(v, p[0], EPOLLIN, 1), 0);
	eventfds(after);
	for (int fd = 0; fd < 1024; fd++)
		if (after[fd] && !before[fd])
			kick_evfd = fd;
	assert_true(kick_evfd >= 0);

	/* The vCPU sleeps in epoll_pwait; the poster wins the CAS and is
	 * held just before its eventfd write. */
	pthread_create(&vt, NULL, blocker, v);
	for (int i = 0; i < 100000 && vsched_vcpu_mode(v) != VSCHED_MODE_BLOCKED; i++)
		usleep(100);
	assert_int_equal(vsched_vcpu_mode(v), VSCHED_MODE_BLOCKED);
	pthread_create(&pt, NULL, mid_wake_poster, v);
	for (int i = 0; i < 100000 && !atomic_load(&in_wake); i++)
		usleep(100);
	assert_int_equal(atomic_load(&in_wake), 1);
	/* The vCPU's own thread leaves (its fd became ready) and stops using
	 * the vCPU: now destroying it is allowed. */
	assert_int_equal(write(p[1], "x", 1), 1);
	pthread_join(vt, NULL);
	pthread_create(&dt, NULL, destroyer, v);
	/* Give destroy a second; it must not finish while the poster is
	 * still inside its wakeup. */
	for (int i = 0; i < 1000 && !atomic_load(&destroyed); i++)
		usleep(1000);
	int early = atomic_load(&destroyed);
	if (early) {
		/* The VMM opens something and gets the freed number. */
		int mfd = memfd_create("unrelated", 0);
		assert_true(mfd >= 0);
		assert_int_equal(dup2(mfd, kick_evfd), kick_evfd);
		close(mfd);
		reused = 1;
	}
	atomic_store(&may_proceed, 1);
	pthread_join(pt, NULL);
	pthread_join(dt, NULL);
	if (reused) {
		assert_int_equal(fstat(kick_evfd, &st), 0);
		close(kick_evfd);
	}
	close(p[0]);
	close(p[1]);
	vsched_vm_destroy(vm);
	if (early)
		fail_msg("vsched_vcpu_destroy() returned while a poster was in mid-wake; "
			 "%lld bytes landed in the file that reused fd %d",
			 (long long)st.st_size, kick_evfd);
}

/* The kick callback is the VMM's: once vsched_vcpu_destroy() has returned,
 * the VMM may tear down what its kick uses (the KVM adapter, the kvm_run
 * mapping), so no kick may still be running or start later. A poster that
 * won IN_GUEST -> EXITING_GUEST is held inside the callback; destroy must
 * not return before the callback has. */
static atomic_int kick_entered, kick_release, kick_done, destroy_returned;
static atomic_int kick_ran_after_destroy;

static void held_kick(struct vsched_vcpu *v, void *ctx)
{
	(void)v, (void)ctx;
	if (atomic_load(&destroy_returned))
		atomic_store(&kick_ran_after_destroy, 1);
	atomic_store(&kick_entered, 1);
	while (!atomic_load(&kick_release))
		usleep(1000);
	if (atomic_load(&destroy_returned))
		atomic_store(&kick_ran_after_destroy, 1);
	atomic_store(&kick_done, 1);
}

static void *kick_poster(void *arg)
{
	vsched_post(arg, 0);
	return NULL;
}

static void *kick_destroyer(void *arg)
{
	vsched_vcpu_destroy(arg);
	atomic_store(&destroy_returned, 1);
	return NULL;
}

static void test_destroy_waits_for_kick_callback(void **state)
{
	(void)state;
	struct vsched_host_ops ops = { .kick = held_kick };
	struct vsched_vm *vm = make_vm(&ops, 0);
	struct vsched_vcpu *v;
	pthread_t p, d;
	bool returned_early;

	declare(vm, 0, "a", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	v = make_vcpu(vm, 0);
	assert_int_equal(vsched_vcpu_enter(v), 0);
	assert_int_equal(pthread_create(&p, NULL, kick_poster, v), 0);
	while (!atomic_load(&kick_entered))
		usleep(100);
	/* The guest exits (the vCPU thread stops using the vCPU) while the
	 * kick is still running; then the VMM destroys. */
	assert_int_equal(vsched_vcpu_exit(v), 0);
	assert_int_equal(pthread_create(&d, NULL, kick_destroyer, v), 0);
	usleep(200000);
	returned_early = atomic_load(&destroy_returned);
	if (returned_early)
		print_message("vsched_vcpu_destroy() returned while the kick "
			      "callback was still running\n");
	atomic_store(&kick_release, 1);
	pthread_join(p, NULL);
	pthread_join(d, NULL);
	assert_false(returned_early);
	assert_true(atomic_load(&kick_done));
	assert_false(atomic_load(&kick_ran_after_destroy));
	vsched_vm_destroy(vm);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_alloc_failure_every_site),
		cmocka_unit_test(test_clock_backwards),
		cmocka_unit_test(test_destroy_while_posting),
		cmocka_unit_test(test_destroy_against_mid_wake_poster),
		cmocka_unit_test(test_destroy_waits_for_kick_callback),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
