/* SPDX-License-Identifier: MIT */
/* Timed waits choose by CPU (issue 23): a class of timed waits whose early
 * sleeps (asked of the kernel early, ended by a spin) cost the thread more
 * CPU than cpu_budget_pct of its plain ones (asked for the deadline) sleeps
 * plain; one whose early sleeps cost what plain ones do keeps them; a larger
 * budget buys them back. The thread's CPU is faked, so that the verdict is
 * the test's and not the host's: this program defines clock_gettime(),
 * timerfd_settime() and syscall(), which libvsched calls. A wait whose
 * first kernel sleep (a timerfd set, a timed futex wait) asks for earlier
 * than its deadline charges the thread `early_ns` of CPU, one that asks for
 * the deadline `plain_ns`, and its other sleeps nothing (an early wakeup
 * too early to spin sleeps again: under valgrind often);
 * CLOCK_THREAD_CPUTIME_ID reads the charges. Every other clock, the timerfd
 * and the futex are the real ones.
 *
 * Two more from a review (helper-23, of 68d51da and a3fbceb), each failing
 * on a3fbceb: one early wait of 200 us (a signal handler) while a class
 * learns must not make it plain; and a class whose timed waits a waker
 * always ends (it never finishes a sample) must not sample one wait in 4
 * for ever (counted: the thread-CPU clock reads). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static uint64_t fake_cpu = 1000000000; /* 0 would read as "not sampled" */
static uint64_t early_ns, plain_ns;
static uint64_t wait_deadline; /* CLOCK_MONOTONIC ns of the wait under way */
static int first_ask;          /* the wait's first timerfd: -1 none, 0 plain, 1 early */
static unsigned cpu_reads;     /* CLOCK_THREAD_CPUTIME_ID reads */
/* The first `outliers` sampled early waits from wait `outlier_at` on are
 * charged `outlier_ns` more each (reads_at_wait: the reads before the
 * wait began). */
static unsigned wait_index, outlier_at, reads_at_wait, outliers;
static uint64_t outlier_ns;
/* A timed futex wait of `waker_vcpu` first posts `waker_kind` to it
 * (and counts it in waker_posts). */
static struct vsched_vcpu *waker_vcpu;
static unsigned waker_kind, waker_posts;

int clock_gettime(clockid_t id, struct timespec *ts)
{
	static int (*real)(clockid_t, struct timespec *);

	if (id == CLOCK_THREAD_CPUTIME_ID) {
		cpu_reads++;
		ts->tv_sec = (time_t)(fake_cpu / 1000000000u);
		ts->tv_nsec = (long)(fake_cpu % 1000000000u);
		return 0;
	}
	if (!real)
		real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
	return real(id, ts);
}

/* A kernel sleep asked to end at `ts` during a wait: the wait's first
 * is charged. */
static void charge(const struct timespec *ts)
{
	uint64_t at = (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;

	if (at && wait_deadline && first_ask < 0) {
		first_ask = at < wait_deadline;
		fake_cpu += first_ask ? early_ns : plain_ns;
		if (first_ask && outliers && wait_index >= outlier_at &&
		    cpu_reads > reads_at_wait) {
			fake_cpu += outlier_ns;
			outliers--;
		}
	}
}

int timerfd_settime(int fd, int flags, const struct itimerspec *new,
		    struct itimerspec *old)
{
	charge(&new->it_value);
	return (int)syscall(SYS_timerfd_settime, fd, flags, new, old);
}

/* libvsched's futex calls pass six arguments (lib/os.c): a timed
 * FUTEX_WAIT_BITSET's fourth is its absolute deadline. */
long syscall(long nr, ...)
{
	static long (*real)(long, ...);
	long a[6];
	va_list ap;

	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (!real)
		real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
	if (nr == SYS_futex && (a[1] & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET && a[3]) {
		charge((const struct timespec *)a[3]);
		if (waker_vcpu) { /* out of BLOCKED: the wait returns at once */
			assert_int_equal(vsched_post(waker_vcpu, waker_kind), 0);
			waker_posts++;
		}
	}
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* `n` timed waits of 1 ms on a fresh vCPU, with one silent eventfd (`fd`:
 * the epoll path and its timerfd) or none (the futex), early sleeps
 * costing `e` us and plain ones `p` us at a CPU budget of `budget`.
 * Returns how many of the last `last` waits asked the kernel early. */
static unsigned early_waits(bool fd, unsigned e, unsigned p, unsigned budget,
			    unsigned n, unsigned last)
{
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	struct vsched_poll_params pp = { .size = sizeof(pp) };
	int efd = eventfd(0, EFD_NONBLOCK);
	unsigned early = 0;

	assert_true(efd >= 0);
	assert_int_equal(vsched_vm_create(NULL, &vm), 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	assert_int_equal(vsched_vcpu_create(vm, 0, NULL, &v), 0);
	if (fd)
		assert_int_equal(vsched_vcpu_fd_add(v, efd, EPOLLIN, 1), 0);
	assert_int_equal(vsched_vm_get_poll(vm, &pp), 0);
	pp.cpu_budget_pct = budget;
	assert_int_equal(vsched_vcpu_set_poll(v, &pp), 0);
	early_ns = e * 1000ull;
	plain_ns = p * 1000ull;
	for (unsigned i = 0; i < n; i++) {
		wait_deadline = mono_ns() + 1000000;
		first_ask = -1;
		wait_index = i;
		reads_at_wait = cpu_reads;
		assert_int_equal(vsched_vcpu_block(v, wait_deadline), VSCHED_WAKE_DEADLINE);
		if (i >= n - last && first_ask == 1)
			early++;
	}
	wait_deadline = 0;
	vsched_vcpu_destroy(v);
	vsched_vm_destroy(vm);
	close(efd);
	return early;
}

/* Under valgrind the verdicts are not judged (the waits still run, for
 * memcheck): the CPU is faked, but whether a 1 ms wait's first sleep is
 * early depends on the host's lateness, and valgrind's stalls pass
 * deadlines before any sleep (helper-90: 21-26 of 200 early in the dear
 * class, 152 of 200 in the cheap one). Natively, and under ASan, TSan and
 * qemu-user, they are. */
static bool judged(void)
{
	if (getenv("VSCHED_UNDER_VALGRIND")) {
		printf("(verdict not judged under valgrind)\n");
		return false;
	}
	return true;
}

/* 256 samples of each kind at one wait in 4 take 2048 waits; the next 200
 * are judged. A dear class still samples an early wait now and then (one
 * in 64 of its waits), a cheap one a plain wait. */
#define WAITS 2248
#define JUDGED 200

static void test_dear_early_sleeps_go_plain(void **state)
{
	(void)state;
	/* Early sleeps at twice a plain one's CPU, budget 100: plain, on
	 * either path. */
	for (int fd = 1; fd >= 0; fd--) {
		/* The fewest of up to 3 measures: a loaded host's stalls can
		 * only add early waits here (a deadline passed before any
		 * sleep is no sample of either kind); a class that a wrong
		 * verdict keeps early is early in each. */
		unsigned early = JUDGED;

		for (int i = 0; i < 3 && early > JUDGED / 10; i++) {
			unsigned e = early_waits(fd, 40, 20, 100, WAITS, JUDGED);

			early = e < early ? e : early;
		}
		printf("%s, dear, budget 100: %u of %u waits early\n",
		       fd ? "epoll" : "futex", early, JUDGED);
		if (judged())
			assert_true(early <= JUDGED / 10);
	}
}

/* The most of up to 3 measures of early_waits(): the verdict is the
 * test's (the CPU is faked), but the lateness its sleeps aim by is the
 * host's. On a loaded host the wakeups scatter, the spins cost more than
 * their share and the class aims later (learn_late()'s keep), down to the
 * deadline itself, which counts as plain here (136 of 200 early under two
 * CPU hogs). A class that a wrong verdict makes plain is plain in each. */
static unsigned early_waits_max(bool fd, unsigned e, unsigned p, unsigned budget,
				unsigned n, unsigned last, unsigned want)
{
	unsigned best = 0;

	for (int i = 0; i < 3 && best < want; i++) {
		unsigned early = early_waits(fd, e, p, budget, n, last);

		best = early > best ? early : best;
	}
	return best;
}

static void test_cheap_early_sleeps_stay(void **state)
{
	(void)state;
	/* Early sleeps at a plain one's CPU: early. */
	unsigned early = early_waits_max(true, 20, 20, 100, WAITS, JUDGED, JUDGED * 8 / 10);

	printf("cheap, budget 100: %u of %u waits early\n", early, JUDGED);
	if (judged())
		assert_true(early >= JUDGED * 8 / 10);
}

static void test_budget_buys_early_sleeps(void **state)
{
	(void)state;
	/* Twice a plain one's CPU again, within a budget of 300: early. */
	unsigned early = early_waits_max(true, 40, 20, 300, WAITS, JUDGED, JUDGED * 8 / 10);

	printf("dear, budget 300: %u of %u waits early\n", early, JUDGED);
	if (judged())
		assert_true(early >= JUDGED * 8 / 10);
}

/* While a class learns (256 samples of each kind, one wait in 4 sampled:
 * 2,048 waits), its unsampled waits bet on no CPU they have not measured:
 * plain at a budget of 100, early only at a budget over 100. Of its first
 * 1,024 waits, about 128 are early samples; before, every unsampled wait
 * slept early too (1,024 of 1,024). */
#define LEARNING 1024

static void test_learning_bets_no_cpu(void **state)
{
	(void)state;
	for (int fd = 1; fd >= 0; fd--) {
		unsigned early = early_waits(fd, 40, 20, 100, LEARNING, LEARNING);

		printf("%s, learning, budget 100: %u of %u waits early\n",
		       fd ? "epoll" : "futex", early, LEARNING);
		if (judged()) {
			assert_true(early >= LEARNING / 16); /* its early samples */
			assert_true(early <= LEARNING / 4);
		}
	}
	unsigned early = early_waits_max(true, 40, 20, 300, LEARNING, LEARNING,
					 LEARNING * 3 / 4);

	printf("epoll, learning, budget 300: %u of %u waits early\n", early, LEARNING);
	if (judged())
		assert_true(early >= LEARNING * 3 / 4);
}

/* Two early waits of 200 us (a signal handler run inside each) among a
 * learning class's first ones of 20 us: capped at 4x the mean from the
 * 5th sample, they do not lift the mean of 256 past the budget's tolerance
 * (uncapped: 14%, and the class went plain for thousands of waits: with
 * one such wait among 64, 4 of 200 early on a3fbceb). */
static void test_one_outlier_while_learning(void **state)
{
	(void)state;
	unsigned early = 0;
	bool injected = true;

	outlier_at = 40; /* about the 10th early sample */
	outlier_ns = 180000;
	for (int i = 0; i < 3 && early < JUDGED * 8 / 10; i++) { /* early_waits_max() */
		outliers = 2;
		unsigned e = early_waits(true, 20, 20, 100, WAITS, JUDGED);

		injected = injected && !outliers;
		early = e > early ? e : early;
	}

	outliers = 0;
	printf("two 200 us early waits while learning: %u of %u waits early\n", early,
	       JUDGED);
	assert_true(injected);
	if (judged())
		assert_true(early >= JUDGED * 8 / 10);
}

/* Timed futex waits that a post made inside each wait ends: the class
 * never finishes a sample (only a wait that reaches its deadline does).
 * It samples at the learning rate for CPU_SAMPLE_TRIES (768) samples
 * started, 3072 waits, then one wait in 32 (2 reads a dropped sample: 64
 * reads in 1024 waits); a3fbceb sampled one in 4 for ever (768 reads). No poll window, and a sleep's CPU
 * given (so that no wait is short and the sleeper samples nothing of its
 * own): every read counted is the class's. */
static void test_woken_timed_waits_sample_rate(void **state)
{
	enum { WARM = 4096, COUNTED = 1024 };
	struct vsched_poll_params pp;
	struct vsched_vm *vm;
	(void)state;

	vsched_poll_defaults(VSCHED_POLL_NONE, 0, &pp);
	pp.sleep_cpu_ns = 1000;
	struct vsched_vcpu *v = vm_req_vcpu(NULL, &pp, 1, &vm);

	waker_vcpu = v;
	waker_kind = 1;
	for (unsigned i = 0, late = 0; i < WARM + COUNTED; i++) {
		if (i == WARM)
			cpu_reads = 0;
		unsigned posts = waker_posts;
		int rc = vsched_vcpu_block(v, mono_ns() + 10000000);
		/* A thread preempted for the 10 ms before its futex wait (a
		 * loaded host) finds its deadline passed and never sleeps:
		 * no post, VSCHED_WAKE_DEADLINE. Not a woken wait: again. */
		if (rc == VSCHED_WAKE_DEADLINE && waker_posts == posts && ++late < 16) {
			i--;
			continue;
		}
		assert_int_equal(rc, VSCHED_WAKE_REQUEST);
		assert_int_equal(vsched_service(v), 1);
	}
	waker_vcpu = NULL;
	unsigned reads = cpu_reads;

	vsched_vm_destroy(vm);
	printf("%u thread-CPU reads in %u woken timed waits (after %u)\n", reads, COUNTED,
	       WARM);
	if (reads > COUNTED / 8)
		fail_msg("%u thread-CPU reads in %u waits: the class samples one in 4 "
			 "for ever", reads, COUNTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dear_early_sleeps_go_plain),
		cmocka_unit_test(test_cheap_early_sleeps_stay),
		cmocka_unit_test(test_budget_buys_early_sleeps),
		cmocka_unit_test(test_one_outlier_while_learning),
		cmocka_unit_test(test_learning_bets_no_cpu),
		cmocka_unit_test(test_woken_timed_waits_sample_rate),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
