/* SPDX-License-Identifier: MIT */
/* The sleep paths (lib/sleep.c, fds.c, os.c, waiter.c, block.c's
 * arm_and_sleep() and poll_window()) under odd hosts, from a third
 * adversarial review (session "sleepreview"). Each test names the defect
 * it reproduces; it fails before the fix its comment names (a diff in the
 * review's report) and passes after. Tests that show a hang bound
 * themselves (a post after a guard, then a reason check); none asserts
 * how long anything took. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

enum { K_REQ = 1 };

/* Every timerfd_settime the process makes (libvsched's go through the PLT
 * to this one): with `tfd_errno` set, an arming (not a disarm) fails with
 * it, as a seccomp filter's SECCOMP_RET_ERRNO would make it (or a timerfd
 * number closed under the library: EBADF). */
static atomic_int tfd_errno;
static atomic_uint tfd_failed;

int timerfd_settime(int fd, int flags, const struct itimerspec *its,
		    struct itimerspec *old)
{
	static int (*real)(int, int, const struct itimerspec *, struct itimerspec *);

	if (!real)
		real = (int (*)(int, int, const struct itimerspec *, struct itimerspec *))dlsym(
			RTLD_NEXT, "timerfd_settime");
	int e = atomic_load(&tfd_errno);
	if (e && (its->it_value.tv_sec || its->it_value.tv_nsec)) {
		atomic_fetch_add(&tfd_failed, 1);
		errno = e;
		return -1;
	}
	return real(fd, flags, its, old);
}

/* Every epoll_pwait the process makes: with `look_hook` set, a look (a
 * timeout of 0) calls it first, once, on the looking thread. */
static void (*look_hook)(void);

int epoll_pwait(int epfd, struct epoll_event *ev, int n, int timeout,
		const sigset_t *mask)
{
	static int (*real)(int, struct epoll_event *, int, int, const sigset_t *);
	void (*hook)(void) = look_hook;

	if (!real)
		real = (int (*)(int, struct epoll_event *, int, int, const sigset_t *))dlsym(
			RTLD_NEXT, "epoll_pwait");
	if (hook && timeout == 0) {
		look_hook = NULL;
		hook();
	}
	return real(epfd, ev, n, timeout, mask);
}

/* A vCPU on the real clock and futex that never polls. */
static struct vsched_vcpu *quiet_vcpu(struct vsched_vm **vm)
{
	struct vsched_poll_params pp;

	vsched_poll_defaults(VSCHED_POLL_NONE, 0, &pp);
	return vm_req_vcpu(NULL, &pp, K_REQ, vm);
}

/* Post K_REQ to `v` after `ms` (a hang guard: it ends a block that would
 * otherwise go on; the test then checks the reason). */
struct guard {
	struct vsched_vcpu *v;
	unsigned ms;
	atomic_int stop, posted;
	pthread_t t;
};

static void *guard_thread(void *p)
{
	struct guard *g = p;

	for (unsigned i = 0; i < g->ms && !atomic_load(&g->stop); i++)
		usleep(1000);
	if (!atomic_load(&g->stop)) {
		atomic_store(&g->posted, 1);
		assert_int_equal(vsched_post(g->v, K_REQ), 0);
	}
	return NULL;
}

static void guard_start(struct guard *g, struct vsched_vcpu *v, unsigned ms)
{
	g->v = v;
	g->ms = ms;
	atomic_store(&g->stop, 0);
	atomic_store(&g->posted, 0);
	assert_int_equal(pthread_create(&g->t, NULL, guard_thread, g), 0);
}

static void guard_stop(struct guard *g)
{
	atomic_store(&g->stop, 1);
	pthread_join(g->t, NULL);
}

/* --- 1. DEFECT: a timerfd that cannot be armed: the timed wait hangs ---
 *
 * With fds registered a timed sleep ends by its timerfd, which
 * lib/sleep.c timer_at() arms with lib/os.c vsched__os_timer_at(); that
 * ignores what timerfd_settime() returns. Where it fails (a seccomp
 * filter of the vCPU thread that answers it with an errno, as the code
 * expects of futex and epoll_pwait: "EPERM or ENOSYS from a seccomp
 * filter ... report it"; or the timerfd's number closed under the
 * library: EBADF) the timerfd is never armed, and the sleep, armed
 * BLOCKED, waits in epoll_pwait for a post or an fd: past its deadline,
 * for ever when none comes. The same error from the futex or from
 * epoll_pwait is returned at once (test_wait_error_is_reported). Here
 * timerfd_settime fails with EPERM; a guard posts after 15 s (10 s is
 * the deadline: far enough that it cannot pass before the sleep arms its
 * timerfd, which a 20 ms one did under valgrind in CI, so the block
 * returned DEADLINE with no timerfd call; the failing call returns at
 * once, so the test stays short). Before the fix: VSCHED_WAKE_REQUEST,
 * from the guard.
 * Fix 01-timerfd-error: the error goes back to the sleep, which leaves
 * BLOCKED and returns it (a waker that won meanwhile: 0, look again). */
static void test_timerfd_error_reported(void **state)
{
	struct vsched_vm *vm;
	struct vsched_vcpu *v = quiet_vcpu(&vm);
	struct guard g;
	int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	(void)state;

	assert_true(efd >= 0);
	assert_int_equal(vsched_vcpu_fd_add(v, efd, EPOLLIN, 1), 0);
	atomic_store(&tfd_failed, 0);
	atomic_store(&tfd_errno, EPERM);
	guard_start(&g, v, 15000);
	int rc = vsched_vcpu_block(v, vsched_deadline_in(vm, 10000000000ull));
	guard_stop(&g);
	atomic_store(&tfd_errno, 0);
	int mode = vsched_vcpu_mode(v);
	bool by_guard = atomic_load(&g.posted);
	int rc2 = 0, rc3 = 0, served = 0;
	if (rc != VSCHED_WAKE_REQUEST)
		vsched_service(v);
	else
		served = vsched_service(v);
	/* Nothing was lost, and the next waits work. */
	if (!by_guard) {
		assert_int_equal(vsched_post(v, K_REQ), 0);
		rc2 = vsched_vcpu_block(v, vsched_deadline_in(vm, 10000000000ull));
		served = vsched_service(v);
		rc3 = vsched_vcpu_block(v, vsched_deadline_in(vm, 2000000));
	}
	printf("timerfd_settime failing (%u calls): block %d%s\n", atomic_load(&tfd_failed), rc,
	       by_guard ? " (ended by the 2 s guard's post)" : "");
	vsched_vm_destroy(vm);
	close(efd);
	assert_true(atomic_load(&tfd_failed) >= 1);
	if (by_guard)
		fail_msg("a 10 s wait ran past its deadline until the guard's post (block %d)", rc);
	assert_int_equal(rc, -EPERM);
	assert_int_equal(mode, VSCHED_MODE_OUTSIDE_GUEST);
	assert_int_equal(rc2, VSCHED_WAKE_REQUEST);
	assert_int_equal(served, 1);
	assert_int_equal(rc3, VSCHED_WAKE_DEADLINE);
}

/* --- 2. DEFECT: SA_RESTART decides SIGNAL on one path of three ---------
 *
 * block.h: "A signal that interrupts the sleep (a handler installed
 * without SA_RESTART) always returns VSCHED_WAKE_SIGNAL". With
 * SA_RESTART (what glibc's signal() installs) Linux restarts an untimed
 * FUTEX_WAIT (-ERESTARTSYS) but turns a timed one into EINTR when a
 * handler runs (-ERESTART_RESTARTBLOCK), and never restarts
 * epoll_pwait (signal(7)). So the same handler's signal returns
 * VSCHED_WAKE_SIGNAL from a vCPU with an fd registered or a deadline,
 * and is swallowed by one with neither, whose sleep goes on (measured
 * for all eight combinations of SA_RESTART, fds and deadline: only
 * SA_RESTART + futex + no deadline swallows it). A VMM that kicks its
 * vCPU threads with such a signal sees its kick only on some of them.
 * Here: a handler with SA_RESTART, a vCPU on the futex with no
 * deadline; the signal is sent every 2 ms until the block returns (the
 * first may land before the futex wait, interrupting nothing), at most
 * 500 times, then a post ends it. Before the fix: VSCHED_WAKE_REQUEST
 * after 500 signals. Fix 02-signal-restart: the untimed kernel futex
 * sleep gets a timeout the kernel never reaches, so that a handler
 * interrupts it as it does the other two (a custom `wait` still gets
 * VSCHED_DEADLINE_NONE); block.h and protocol.md say that SA_RESTART
 * does not matter. */
static atomic_int sr_hits;
static void sr_handler(int sig)
{
	(void)sig;
	atomic_fetch_add(&sr_hits, 1);
}

struct blocker {
	struct vsched_vcpu *v;
	uint64_t deadline;
	int rc;
	atomic_int done;
};

static void *blocker_thread(void *p)
{
	struct blocker *b = p;

	b->rc = vsched_vcpu_block(b->v, b->deadline);
	atomic_store(&b->done, 1);
	return NULL;
}

/* Block `v` on another thread until `deadline`, with SIGUSR2 (handler
 * with SA_RESTART) sent every 2 ms once it is BLOCKED, up to 500 times;
 * then a post. Returns the block's reason; *sent: the signals sent. */
static int block_under_restart_signal(struct vsched_vcpu *v, uint64_t deadline, int *sent)
{
	struct sigaction sa = { .sa_handler = sr_handler, .sa_flags = SA_RESTART }, old;
	struct blocker b = { .v = v, .deadline = deadline };
	pthread_t t;
	int i;

	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGUSR2, &sa, &old), 0);
	assert_int_equal(pthread_create(&t, NULL, blocker_thread, &b), 0);
	for (i = 0; i < 5000 && vsched_vcpu_mode(v) != VSCHED_MODE_BLOCKED; i++)
		usleep(1000);
	assert_int_equal(vsched_vcpu_mode(v), VSCHED_MODE_BLOCKED);
	for (i = 0; i < 500 && !atomic_load(&b.done); i++) {
		pthread_kill(t, SIGUSR2);
		usleep(2000);
	}
	*sent = i;
	if (!atomic_load(&b.done))
		assert_int_equal(vsched_post(v, K_REQ), 0);
	pthread_join(t, NULL);
	sigaction(SIGUSR2, &old, NULL);
	return b.rc;
}

static void test_sa_restart_signal_every_path(void **state)
{
	(void)state;
	/* The untimed futex sleep (the defect), then the two paths that
	 * already returned SIGNAL, pinned: a timed futex sleep, an epoll
	 * sleep. */
	for (int c = 0; c < 3; c++) {
		struct vsched_vm *vm;
		struct vsched_vcpu *v = quiet_vcpu(&vm);
		int efd = -1, sent;
		uint64_t dl = VSCHED_DEADLINE_NONE;

		if (c == 1)
			dl = vsched_deadline_in(vm, 60ull * 1000000000ull);
		if (c == 2) {
			efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
			assert_int_equal(vsched_vcpu_fd_add(v, efd, EPOLLIN, 1), 0);
		}
		atomic_store(&sr_hits, 0);
		int rc = block_under_restart_signal(v, dl, &sent);
		printf("SA_RESTART, %s: block %d after %d signals (%d handled)\n",
		       c == 0 ? "futex, no deadline" : c == 1 ? "futex, 60 s deadline"
							  : "epoll, no deadline",
		       rc, sent, atomic_load(&sr_hits));
		int mode = vsched_vcpu_mode(v);
		vsched_vm_destroy(vm);
		if (efd >= 0)
			close(efd);
		assert_true(atomic_load(&sr_hits) >= 1);
		if (rc != VSCHED_WAKE_SIGNAL)
			fail_msg("%s: a handled SA_RESTART signal was swallowed (%d signals, "
				 "block %d)",
				 c == 0 ? "futex, no deadline" : c == 1 ? "futex, timed" : "epoll",
				 sent, rc);
		assert_int_equal(mode, VSCHED_MODE_OUTSIDE_GUEST);
	}
}

/* --- 3. DEFECT: a clock that steps back stretches the poll window -----
 *
 * lib/block.c poll_window() polls until the VM's clock reaches the
 * window's end (`now < end`: continue), and looks at the fds, a guest
 * timer's deadline and the host's load only when it reaches next_look.
 * A clock that stands still ends the window after STILL_PASSES (65,536)
 * passes (test_poll_on_standing_clock); one that steps back by X (an
 * injected guest clock set back: a migration, a wall clock) and runs on
 * keeps the poll going for X more, at 100% of a CPU, with no fd look
 * and no timer check: a 100 us window polls for 1,000 s. Only a post or
 * the vCPU's event (read every pass) ends it. Here the VM's clock runs
 * 100 ns a read and steps back 1,000 s at the 50th read of a 100 us FIXED
 * window; the clock itself posts (a guard, from inside the poll) at the
 * 1,000,000th read, far more than the window's 1,000. The fake wait
 * posts too: a block that slept returns REQUEST with one wait. Before
 * the fix: no wait, the guard's post, 10^6 reads. Fix
 * 03-poll-clock-back: a read below the last takes the window's end and
 * its next look back by the step (the poll keeps what is left of its
 * window; the deadlines stay in the VM's clock), so the window ends
 * about 1,000 reads in and the halt sleeps (test_contend's
 * test_only_gaps_inside_the_poll, a 1 ms step back in a 50 ms window
 * that the poll wins, still passes). */
static struct fake_host back_h;
static uint64_t back_reads;
static bool back_guard;

static void back_clock(struct fake_host *h)
{
	back_reads++;
	h->now += 100;
	if (back_reads == 50)
		h->now -= 1000ull * 1000000000ull;
	if (back_reads == 1000000) {
		back_guard = true;
		assert_int_equal(vsched_post(h->vcpu, K_REQ), 0);
	}
}

static int back_wait(struct fake_host *h, uint32_t *word, uint32_t expected, uint64_t dl)
{
	(void)word, (void)expected, (void)dl;
	assert_int_equal(vsched_post(h->vcpu, K_REQ), 0);
	return 0;
}

static void test_poll_on_clock_stepping_back(void **state)
{
	struct vsched_poll_params pp;
	struct vsched_vm *vm;
	(void)state;

	memset(&back_h, 0, sizeof(back_h));
	back_h.now = 2000ull * 1000000000ull;
	back_h.on_clock = back_clock;
	back_h.on_wait = back_wait;
	back_reads = 0;
	back_guard = false;
	struct vsched_host_ops ops = fake_ops(&back_h);
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 100000, &pp), 0);
	back_h.vcpu = vm_req_vcpu(&ops, &pp, K_REQ, &vm);
	struct vsched_block_result res = { .size = sizeof(res) };
	int rc = vsched_vcpu_block_ex(back_h.vcpu, VSCHED_DEADLINE_NONE, &res);
	printf("clock stepped back 1000 s in a 100 us window: block %d, %llu clock reads, "
	       "%u waits%s\n",
	       rc, (unsigned long long)back_reads, back_h.waits,
	       back_guard ? " (ended by the guard's post)" : "");
	vsched_vm_destroy(vm);
	assert_int_equal(rc, VSCHED_WAKE_REQUEST);
	assert_false(res.vetoed);
	assert_int_equal(res.window_ns, 100000);
	if (back_guard)
		fail_msg("the 100 us poll ran on for %llu clock reads after the clock stepped back",
			 (unsigned long long)back_reads);
	assert_int_equal(back_h.waits, 1);
}

/* --- 4. DEFECT: a vCPU's fd tables change under its own look -----------
 *
 * block.h: vsched_vcpu_fd_add() and _fd_del() return "VSCHED_ESTATE (the
 * vCPU is inside vsched_vcpu_block(): this is not its thread)". Their
 * check is the mode word alone (lib/fds.c, vsched__vcpu_allowed()),
 * which says OUTSIDE_GUEST for much of a block: its first look and
 * check-once, the `blocking` and `unblocking` hooks, the look at the
 * deadline after a wake with nothing to do, the sorting of a sleep's
 * events after a waker moved the word. A waiter refuses its fd calls
 * there (its in_engine flag, test_waiter_fds_from_hook); a vCPU accepts
 * them, and an fd_add that grows the tables (the 9th fd) frees the
 * event array that the look in progress hands the kernel: the kernel
 * writes the ready fd's event into freed memory, and the look reads the
 * new, zeroed array: the ready fd is not reported. Here a vCPU with 8
 * fds, one of them ready, blocks with a deadline already past (a
 * check-once, block.h: "returns VSCHED_WAKE_FD with the tags when any
 * registered fd is ready"); its look lets another thread fd_add a 9th.
 * The VM's allocator keeps what is freed until the test ends (so that
 * the kernel's write lands in memory nobody else uses). Before the fix:
 * fd_add 0, block VSCHED_WAKE_DEADLINE. Fix 04-vcpu-fds-in-engine: the
 * vCPU's fd_add and fd_del refuse while its in_engine flag is set, as
 * the waiter's do (a relaxed load: it orders nothing; a call from
 * another thread that passes the check just before the block sets the
 * flag is still the caller's race, block.h's context rule). */
struct quarantine {
	void *p[64];
	unsigned n;
};

static void *q_alloc(size_t size, size_t align, void *ctx)
{
	void *p = NULL;
	(void)ctx;
	return posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) ? NULL
															: p;
}

static void q_free(void *p, size_t size, void *ctx)
{
	struct quarantine *q = ctx;
	(void)size;
	if (p && q->n < 64)
		q->p[q->n++] = p; /* freed at the test's end */
	else
		free(p);
}

static struct vsched_vcpu *fa_v;
static int fa_fd, fa_rc;

static void *fa_thread(void *p)
{
	(void)p;
	fa_rc = vsched_vcpu_fd_add(fa_v, fa_fd, EPOLLIN, 9);
	return NULL;
}

static void fa_from_another_thread(void)
{
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, fa_thread, NULL), 0);
	pthread_join(t, NULL);
}

static void test_fd_add_inside_block_refused(void **state)
{
	struct quarantine q = { .n = 0 };
	struct vsched_allocator al = { .alloc = q_alloc, .free = q_free, .ctx = &q };
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .alloc = &al };
	struct vsched_block_result res = { .size = sizeof(res) };
	struct vsched_vm *vm;
	int efd[9];
	(void)state;

	assert_int_equal(vsched_vm_create(&cfg, &vm), 0);
	declare(vm, K_REQ, "req", 1, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 0);
	for (int i = 0; i < 9; i++) {
		efd[i] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		assert_true(efd[i] >= 0);
		if (i < 8)
			assert_int_equal(vsched_vcpu_fd_add(v, efd[i], EPOLLIN, (uint64_t)i), 0);
	}
	assert_int_equal(eventfd_write(efd[3], 1), 0); /* ready: tag 3 */
	fa_v = v;
	fa_fd = efd[8];
	fa_rc = 1;
	look_hook = fa_from_another_thread;
	int rc = vsched_vcpu_block_ex(v, 0, &res); /* a check-once */
	look_hook = NULL;
	printf("fd_add from another thread during the check-once's look: %d; the block: %d "
	       "(%u tags%s)\n",
	       fa_rc, rc, res.nready, res.nready ? "" : ", the ready fd lost");
	vsched_vm_destroy(vm);
	for (unsigned i = 0; i < q.n; i++)
		free(q.p[i]);
	for (int i = 0; i < 9; i++)
		close(efd[i]);
	assert_int_equal(fa_rc, VSCHED_ESTATE);
	assert_int_equal(rc, VSCHED_WAKE_FD);
	assert_int_equal(res.nready, 1);
	assert_int_equal(res.tags[0], 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_timerfd_error_reported),
		cmocka_unit_test(test_sa_restart_signal_every_path),
		cmocka_unit_test(test_poll_on_clock_stepping_back),
		cmocka_unit_test(test_fd_add_inside_block_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
