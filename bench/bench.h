/* SPDX-License-Identifier: MIT */
/*
 * What every benchmark of vsched-bench shares: the registration entry, the
 * command-line options, the statistics and their text/JSON lines, the clock,
 * pinning, futex helpers and a small VM. Single-threaded setup code: the
 * options are set once by main() before any benchmark runs, then only read.
 */
#ifndef VSCHED_BENCH_H
#define VSCHED_BENCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <vsched/vsched.h>

#define MAX_RUNS 64
#define NOINLINE __attribute__((noinline, noclone))

/* The one request kind of make_vm()'s VMs. */
enum { K_A = 1 };

/*
 * One benchmark. vsched-bench.c lists them in the order they run (and
 * print); the usage text is generated from the list.
 */
struct bench {
	const char *name;
	const char *desc;  /* one line for the usage text */
	int (*run)(void);  /* the process's exit status: 0 on success */
	bool in_all;       /* run by `all` (the default) */
	/* Options of this benchmark only, or NULL. option() is given argv at
	 * an argument no shared option took; it returns how many arguments
	 * it consumed, 0 if the argument is not its own. */
	const char *usage;
	int (*option)(int argc, char **argv, int i);
};

extern const struct bench bench_request, bench_wakeup, bench_instr, bench_overshoot,
	bench_pmi, bench_idle, bench_hook, bench_scale, bench_waiter, bench_timer,
	bench_policy, bench_iothread, bench_timedwait, bench_fdsleep;

/* --json, --quick, --runs N (1..MAX_RUNS, default 5). */
extern int opt_json, opt_quick, opt_runs;

/* CLOCK_MONOTONIC and this thread's CPU time, in ns; its voluntary
 * context switches (getrusage: its sleeps). */
uint64_t now_ns(void);
uint64_t thread_cpu_ns(void);
uint64_t thread_nvcsw(void);

/* The consumer of a doorbell eventfd `efd` (doc/adopting.md's I/O
 * thread): with `cfg`, a waiter of its own VM with efd as its
 * VSCHED_FD_DOORBELL (w, vm); without, an epoll set holding efd (ep, else
 * -1). Aborts on failure. close() frees either, not efd. */
struct doorbell_consumer {
	struct vsched_vm *vm;
	struct vsched_waiter *w;
	int ep;
};
void doorbell_consumer_open(struct doorbell_consumer *c,
			    const struct vsched_waiter_config *cfg, int efd);
void doorbell_consumer_close(struct doorbell_consumer *c);

/* A whole-number option's value, s, in 0..max: anything else (empty, not
 * decimal digits, negative, above max) ends the program with status 2 and
 * a message that names the option. */
unsigned long long opt_num(const char *opt, const char *s, unsigned long long max);
/* opt_num() with a least value too. */
unsigned long long opt_range(const char *opt, const char *s, unsigned long long min,
			      unsigned long long max);

/* qsort comparator of uint64_t. */
int cmp_u64(const void *a, const void *b);

/* v over its baseline b, per the ratio convention (json_line below): 1 when
 * both are 0; NAN (undefined) when only b is. */
double ratio_of(double v, double b);

/* A ratio for the text output, into buf: r with prec decimals and the
 * suffix, or n/a if it is undefined (NAN). Returns buf. */
const char *rtxt(char *buf, size_t len, double r, int prec, const char *suffix);

/* Index of the 99th percentile of n >= 1 sorted samples, by nearest rank
 * (n * 99 / 100 would be the maximum of 100 samples). */
size_t p99_index(size_t n);

/* Median of n <= MAX_RUNS values (v is left unsorted). NAN values (runs
 * whose ratio is undefined) are left out; NAN when all of them are. */
double median(double *v, int n);

/*
 * One metric of n runs against its baseline measured in the same runs:
 * median value, median baseline, median of the per-run ratios, min and max
 * of the value; a text line, or a JSON line with --json. A run whose
 * baseline is 0 under a value that is not has no ratio and is left out of
 * the median of ratios (median()); if no run has one, the ratio is
 * undefined (NAN: null, n/a).
 */
void report(const char *bench, const char *metric, const char *unit,
	    const char *baseline, double *val, double *base, int n);

/*
 * One JSON line of the shape test/bench/check-json.sh checks, for the
 * benchmarks that compute their own figures: values and min/max with
 * `prec` decimals, the ratio with `ratio_prec`. The ratio convention of
 * every benchmark: value over baseline; 1 when both are 0; NAN when only
 * the baseline is 0 (undefined), printed as null (n/a in text), never a
 * large stand-in (1e9 was) that reads as a measured ratio. check-json.sh
 * accepts a null ratio only where baseline_value is 0.
 */
struct json_line {
	const char *bench, *metric, *unit, *baseline;
	double value, baseline_value, ratio, min, max;
	int runs, prec, ratio_prec;
};
void json_line(const struct json_line *l);

/* Pin the calling thread to CPU `cpu` modulo the online CPUs. */
void pin(int cpu);

/* FUTEX_WAIT_PRIVATE while *w == val; FUTEX_WAKE_PRIVATE of one waiter. */
void fwait(_Atomic uint32_t *w, uint32_t val);
void fwake(_Atomic uint32_t *w);

/* A finalized VM with request kind K_A (handler fn, may be NULL), a fixed
 * poll window of poll_ns (no polling if 0) and nvcpus vCPUs in v[].
 * Aborts on failure. */
struct vsched_vm *make_vm(uint64_t poll_ns, struct vsched_vcpu **v, unsigned nvcpus,
			  vsched_request_fn fn);

/*
 * wakeup.c's two-vCPU ping-pong, which idle and policy reuse: vs_peer() is
 * the second vCPU's thread (pinned to CPU 1): it waits for K_A, services it
 * and posts K_A back to v[0], p->iters times. vs_pingpong() runs `iters`
 * round trips from the calling thread (pinned to CPU 0) with a poll window
 * of poll_ns and returns the mean ns per round trip.
 */
struct pp {
	long iters;
	int futex; /* raw baseline kind */
	long peer_sleeps; /* the peer thread's voluntary context switches */
	struct vsched_vcpu *v[2];
	_Alignas(64) _Atomic uint32_t a;
	_Alignas(64) _Atomic uint32_t b;
};
void *vs_peer(void *arg);
double vs_pingpong(long iters, uint64_t poll_ns);

/*
 * Seeded gap families (gaps.c): one kind and its parameters (ns, shapes,
 * fractions).
 * GAP_EXP      exponential, mean a
 * GAP_PARETO   Pareto, x_m a, alpha b, capped at c (0: 10 s)
 * GAP_BIMODAL  fraction a exp(mean b), the rest uniform in [c, d]
 * GAP_PERIODIC a +- 5% (a steady timer or IPI ping-pong)
 * GAP_CYCLE    a repeating pattern: b gaps of a, then one of c
 * GAP_PHASE    blocks of d gaps, alternating exp(mean a) and exp(mean b)
 */
enum gap_kind { GAP_EXP, GAP_PARETO, GAP_BIMODAL, GAP_PERIODIC, GAP_CYCLE,
		GAP_PHASE };
struct gap_family {
	const char *name;
	enum gap_kind kind;
	double a, b, c, d;
};
/* The I/O thread's seven families (issue 23), replayed by `policy` too. */
extern const struct gap_family io_families[];
extern const unsigned n_io_families;
/* n gaps of family g from `seed` (deterministic), each at least 100 ns. */
void gap_fill(const struct gap_family *g, uint64_t seed, uint64_t *out, size_t n);
/* splitmix64: a uniform in (0, 1), advancing *s. */
double gap_u01(uint64_t *s);

/*
 * QEMU's stock AioContext adaptive polling (util/aio-posix.c,
 * adjust_polling_time(); re-implemented here, not copied): one window
 * `ns`, learnt from block_ns, the whole aio_poll() from before its poll to
 * after its wait. A block no longer than the window changes nothing; one
 * longer than max_ns shrinks it (divide by `shrink`, 0: reset to 0); one
 * shorter than max_ns grows it while below max_ns (0 -> 4 us, else x grow,
 * 0 meaning 2), capped at max_ns. QEMU's defaults: max 32768 ns (an
 * IOThread's poll-max-ns, IOTHREAD_POLL_MAX_NS_DEFAULT in QEMU's
 * iothread.h: 4 -> 8 -> 16 -> 32 -> 32.768 us), grow 0, shrink 0.
 */
struct qemu_poll {
	uint64_t ns, max_ns;
	unsigned grow, shrink;
};
#define QEMU_POLL_MAX_NS 32768
#define QEMU_POLL_START_NS 4000
static inline void qemu_poll_adjust(struct qemu_poll *q, uint64_t block_ns)
{
	if (block_ns <= q->ns)
		return; /* the sweet spot */
	if (block_ns > q->max_ns) {
		q->ns = q->shrink ? q->ns / q->shrink : 0;
	} else if (q->ns < q->max_ns && block_ns < q->max_ns) {
		q->ns = q->ns ? q->ns * (q->grow ? q->grow : 2) : QEMU_POLL_START_NS;
		if (q->ns > q->max_ns)
			q->ns = q->max_ns;
	}
}

/*
 * Syscall counts of the calling thread (syscount.c): the bench binary
 * interposes the libc wrappers the library and the benchmarks wait and
 * notify with (epoll_wait, epoll_pwait, read, write, timerfd_settime,
 * clock_nanosleep, and syscall() for futexes), so a count is a count of
 * what was really called, in vsched or in a baseline.
 */
uint64_t syscalls_now(void);

#endif
