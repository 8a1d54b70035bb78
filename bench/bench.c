/* SPDX-License-Identifier: MIT */
/* The helpers every benchmark shares (bench.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

int opt_json, opt_quick, opt_runs = 5;

uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t thread_nvcsw(void)
{
	struct rusage ru;
	getrusage(RUSAGE_THREAD, &ru);
	return (uint64_t)ru.ru_nvcsw;
}

void doorbell_consumer_open(struct doorbell_consumer *c,
			    const struct vsched_waiter_config *cfg, int efd)
{
	struct epoll_event ev = { .events = EPOLLIN };

	*c = (struct doorbell_consumer){ .ep = -1 };
	if (cfg) {
		if (vsched_vm_create(NULL, &c->vm) || vsched_request_finalize(c->vm, 0) ||
		    vsched_waiter_create_ex(c->vm, cfg, &c->w) ||
		    vsched_waiter_fd_add(c->w, efd, EPOLLIN | VSCHED_FD_DOORBELL, 0))
			abort();
		return;
	}
	c->ep = epoll_create1(EPOLL_CLOEXEC);
	if (c->ep < 0 || epoll_ctl(c->ep, EPOLL_CTL_ADD, efd, &ev))
		abort();
}

void doorbell_consumer_close(struct doorbell_consumer *c)
{
	if (c->w) {
		vsched_waiter_destroy(c->w);
		vsched_vm_destroy(c->vm);
	} else {
		close(c->ep);
	}
}

unsigned long long opt_range(const char *opt, const char *s, unsigned long long min,
			      unsigned long long max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	/* strtoull takes "-1" for 2^64 - 1: digits only */
	if (*s < '0' || *s > '9' || *end || errno || v < min || v > max) {
		fprintf(stderr, "vsched-bench: %s takes a whole number %llu-%llu, not '%s'\n",
			opt, min, max, s);
		exit(2);
	}
	return v;
}

unsigned long long opt_num(const char *opt, const char *s, unsigned long long max)
{
	return opt_range(opt, s, 0, max);
}

int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double ratio_of(double v, double b)
{
	return b > 0 ? v / b : v > 0 ? NAN : 1.0;
}

const char *rtxt(char *buf, size_t len, double r, int prec, const char *suffix)
{
	if (isnan(r))
		snprintf(buf, len, "n/a");
	else
		snprintf(buf, len, "%.*f%s", prec, r, suffix);
	return buf;
}

size_t p99_index(size_t n)
{
	return (n * 99 + 99) / 100 - 1;
}

double median(double *v, int n)
{
	double t[MAX_RUNS];
	int m = 0;
	/* An undefined ratio (NAN: a run against a baseline of 0) is left
	 * out; none defined, none is. */
	for (int i = 0; i < n; i++)
		if (!isnan(v[i]))
			t[m++] = v[i];
	if (!m)
		return NAN;
	n = m;
	qsort(t, n, sizeof(*t), cmp_d);
	return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

/* s as the inside of a JSON string: quotes, backslashes and control
 * characters escaped (a trace's name is its file's). */
static void json_str(const char *s)
{
	for (; *s; s++) {
		const unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
}

void json_line(const struct json_line *l)
{
	char ratio[64];

	if (isnan(l->ratio))
		snprintf(ratio, sizeof(ratio), "null");
	else
		snprintf(ratio, sizeof(ratio), "%.*f", l->ratio_prec, l->ratio);
	printf("{\"bench\": \"");
	json_str(l->bench);
	printf("\", \"metric\": \"");
	json_str(l->metric);
	printf("\", \"unit\": \"");
	json_str(l->unit);
	printf("\", \"value\": %.*f, \"baseline\": \"", l->prec, l->value);
	json_str(l->baseline);
	printf("\", \"baseline_value\": %.*f, \"ratio\": %s, \"runs\": %d, "
	       "\"min\": %.*f, \"max\": %.*f}\n",
	       l->prec, l->baseline_value, ratio, l->runs, l->prec, l->min, l->prec, l->max);
}

void report(const char *bench, const char *metric, const char *unit,
	    const char *baseline, double *val, double *base, int n)
{
	double rt[MAX_RUNS], lo = val[0], hi = val[0];
	for (int i = 0; i < n; i++) {
		rt[i] = ratio_of(val[i], base[i]);
		lo = val[i] < lo ? val[i] : lo;
		hi = val[i] > hi ? val[i] : hi;
	}
	double mv = median(val, n), mb = median(base, n), mr = median(rt, n);
	/* A ratio below 0.01 (pmi's cut) gets the digits that show it. */
	const int rp = mr > 0 && mr < 0.01 ? 6 : 3;
	if (opt_json)
		json_line(&(struct json_line){ .bench = bench, .metric = metric, .unit = unit,
					       .baseline = baseline, .value = mv,
					       .baseline_value = mb, .ratio = mr, .min = lo,
					       .max = hi, .runs = n, .prec = 2,
					       .ratio_prec = rp });
	else if (isnan(mr))
		printf("%-8s %-28s %9.2f %-3s  vs %-26s %9.2f  ratio n/a  "
		       "(runs %d, min %.2f, max %.2f)\n",
		       bench, metric, mv, unit, baseline, mb, n, lo, hi);
	else
		printf("%-8s %-28s %9.2f %-3s  vs %-26s %9.2f  ratio %.*f  "
		       "(runs %d, min %.2f, max %.2f)\n",
		       bench, metric, mv, unit, baseline, mb, rp, mr, n, lo, hi);
	fflush(stdout);
}

void pin(int cpu)
{
	cpu_set_t s;
	CPU_ZERO(&s);
	CPU_SET(cpu % (int)sysconf(_SC_NPROCESSORS_ONLN), &s);
	pthread_setaffinity_np(pthread_self(), sizeof(s), &s);
}

void fwait(_Atomic uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

void fwake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

struct vsched_vm *make_vm(uint64_t poll_ns, struct vsched_vcpu **v, unsigned nvcpus,
			  vsched_request_fn fn)
{
	struct vsched_vm_config cfg = { .size = sizeof(cfg) };
	struct vsched_poll_params pp;
	vsched_poll_defaults(poll_ns ? VSCHED_POLL_FIXED : VSCHED_POLL_NONE, poll_ns,
			     &pp);
	cfg.poll = &pp;
	struct vsched_request_desc d = { .name = "a", .handler = fn };
	struct vsched_vm *vm;
	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_A, &d) ||
	    vsched_request_finalize(vm, 0))
		abort();
	for (unsigned i = 0; i < nvcpus; i++)
		if (vsched_vcpu_create(vm, i, NULL, &v[i]))
			abort();
	return vm;
}
