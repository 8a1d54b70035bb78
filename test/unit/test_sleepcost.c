/* SPDX-License-Identifier: MIT */
/* What a settled class of timed waits costs in CPU samples (issue 23's
 * plain path, helper sleepcost): a class whose verdict (dear() in
 * lib/sleep.c: its early sleeps cost more than the budget lets them) has
 * stood for CPU_SAMPLE_STABLE samples in a row samples one of
 * CPU_SAMPLE_SETTLED (128) of its waits, not one of CPU_SAMPLE_FED (32),
 * and still samples. The thread's CPU is faked as in test_timedcpu.c, so
 * that the verdict is the test's and not the host's: this program defines
 * clock_gettime() and syscall(), which libvsched calls. A wait whose first
 * timed futex wait asks for earlier than its deadline charges the thread
 * EARLY_NS of CPU, one that asks for the deadline PLAIN_NS;
 * CLOCK_THREAD_CPUTIME_ID reads the charges and is counted (READS reads a
 * sample). Every other clock and the futex are the real ones. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/futex.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define EARLY_NS 40000u /* twice a plain wait's: dear at budget 100 */
#define PLAIN_NS 20000u

static uint64_t fake_cpu = 1000000000; /* 0 would read as "not sampled" */
static uint64_t wait_deadline; /* CLOCK_MONOTONIC ns of the wait under way */
static int first_ask;          /* the wait's first timed futex: -1 none, 0 plain, 1 early */
static unsigned cpu_reads;     /* CLOCK_THREAD_CPUTIME_ID reads */

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
	if (nr == SYS_futex && (a[1] & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET && a[3] &&
	    wait_deadline && first_ask < 0) {
		const struct timespec *ts = (const struct timespec *)a[3];
		uint64_t at = (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;

		first_ask = at < wait_deadline;
		fake_cpu += first_ask ? EARLY_NS : PLAIN_NS;
	}
	return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A class learns its means in about 2,048 waits (one in 4 sampled, 256 of
 * each kind), then samples one in 32 until 64 samples (2,048 waits) left
 * its verdict as it was: WARM covers both with room. Of COUNTED waits
 * after, a settled class samples 16 (32 reads); at one in 32 it would
 * sample 64 (128 reads). No poll window, and a sleep's CPU given (so that
 * no wait is short and the sleeper samples nothing of its own): every read
 * counted is the class's. */
#define WAIT_NS 500000u
/* Thread-CPU reads a sample: its start and its end (the sleeper times a
 * read, with one more, on its first CPU_READ_TIMED samples only). */
#define READS 2
#define WARM 5120
#define COUNTED 2048

static void test_settled_class_samples_less(void **state)
{
	struct vsched_poll_params pp;
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	unsigned early = 0;
	(void)state;

	vsched_poll_defaults(VSCHED_POLL_NONE, 0, &pp);
	pp.sleep_cpu_ns = 1000;
	assert_int_equal(vsched_vm_create(NULL, &vm), 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	assert_int_equal(vsched_vcpu_create(vm, 0, NULL, &v), 0);
	assert_int_equal(vsched_vcpu_set_poll(v, &pp), 0);
	for (unsigned i = 0; i < WARM + COUNTED; i++) {
		if (i == WARM)
			cpu_reads = 0;
		wait_deadline = mono_ns() + WAIT_NS;
		first_ask = -1;
		assert_int_equal(vsched_vcpu_block(v, wait_deadline), VSCHED_WAKE_DEADLINE);
		if (i >= WARM && first_ask == 1)
			early++;
	}
	wait_deadline = 0;
	unsigned reads = cpu_reads;

	vsched_vcpu_destroy(v);
	vsched_vm_destroy(vm);
	printf("settled dear class: %u thread-CPU reads, %u early waits, in %u waits "
	       "(after %u)\n", reads, early, COUNTED, WARM);
	/* Plain (its verdict), but for its early samples. */
	assert_true(early <= COUNTED / 64);
	/* Still sampled: at least half the settled rate ... */
	assert_true(reads >= COUNTED / 128 * READS / 2);
	/* ... and no more than twice it. */
	if (reads > COUNTED / 128 * READS * 2)
		fail_msg("%u thread-CPU reads in %u waits of a settled class: it samples "
			 "one in %u, not one in 128", reads, COUNTED,
			 reads ? COUNTED * READS / reads : 0);
	/* Its reads are no longer timed: two a sample, not three (48). */
	if (reads >= COUNTED / 128 * (READS + 1))
		fail_msg("%u thread-CPU reads in %u waits: a settled class still times "
			 "its reads (three a sample)", reads, COUNTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_settled_class_samples_less),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
