/* SPDX-License-Identifier: MIT */
/*
 * policy: replays halt traces (bench/traces/ and any --trace FILE) through
 * every poll policy's real code, with a cost model calibrated in the same
 * run; --live also runs them on real threads.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#include "arch/arch.h"

#define MAX_TRACES 32

struct trace {
	char name[128];
	uint64_t *d;
	size_t n;
};

static const char *trace_files[MAX_TRACES];
static int ntrace_files, opt_live;
static double opt_wake_ns, opt_polled_ns;
static unsigned opt_weight = 4;

/* --trace FILE (up to MAX_TRACES; none: every .txt of bench/traces/),
 * --wake-ns N and --polled-ns N (the cost model, calibrated if not given),
 * --latency-weight N (the adaptive policy's), --live. */
static int policy_option(int argc, char **argv, int i)
{
	if (!strcmp(argv[i], "--trace") && i + 1 < argc && ntrace_files < MAX_TRACES)
		trace_files[ntrace_files++] = argv[i + 1];
	else if (!strcmp(argv[i], "--wake-ns") && i + 1 < argc)
		opt_wake_ns = atof(argv[i + 1]);
	else if (!strcmp(argv[i], "--polled-ns") && i + 1 < argc)
		opt_polled_ns = atof(argv[i + 1]);
	else if (!strcmp(argv[i], "--latency-weight") && i + 1 < argc)
		opt_weight = (unsigned)atoi(argv[i + 1]);
	else if (!strcmp(argv[i], "--live"))
		return opt_live = 1;
	else
		return 0;
	return 2;
}

/* qsort comparator of trace_files[] entries: by path. */
static int cmp_path(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int load_trace(const char *path, struct trace *t)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t cap = 1024;
	if (!f)
		return -1;
	const char *base = strrchr(path, '/');
	snprintf(t->name, sizeof(t->name), "%s", base ? base + 1 : path);
	char *dot = strrchr(t->name, '.');
	if (dot)
		*dot = 0;
	t->n = 0;
	t->d = malloc(cap * sizeof(*t->d));
	while (fgets(line, sizeof(line), f)) {
		char *p = line, *end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || !*p)
			continue;
		unsigned long long v = strtoull(p, &end, 10);
		if (end == p)
			continue;
		if (t->n == cap)
			t->d = realloc(t->d, (cap *= 2) * sizeof(*t->d));
		t->d[t->n++] = v;
	}
	fclose(f);
	return t->n ? 0 : -1;
}

struct pol {
	const char *name;
	struct vsched_poll_params p;
};

struct outcome {
	double mean_lat, p99_lat, cpu_per_halt, won;
};


/* Cost model: a halt whose wakeup comes D ns in is caught by polling when
 * D <= W (latency c_poll, poll CPU D), else it sleeps (poll CPU W wasted,
 * latency c_wake) and the engine measures D + c_wake as the halt. */
static struct outcome replay(const struct pol *pl, const struct trace *t,
			     double c_poll, double c_wake)
{
	struct vsched_poll_state st;
	struct outcome o = { 0 };
	uint64_t *lat = malloc(t->n * sizeof(*lat));
	double cpu = 0, latsum = 0;
	size_t won = 0;

	vsched_poll_init(&pl->p, &st);
	for (size_t i = 0; i < t->n; i++) {
		uint64_t d = t->d[i], w = vsched_poll_window(&pl->p, &st);
		uint64_t halt;
		if (d <= w) {
			lat[i] = (uint64_t)c_poll;
			cpu += (double)d;
			won++;
			halt = d;
		} else {
			lat[i] = (uint64_t)c_wake;
			cpu += (double)w;
			halt = d + (uint64_t)c_wake;
		}
		latsum += (double)lat[i];
		vsched_poll_update(&pl->p, &st, w, halt, true);
	}
	qsort(lat, t->n, sizeof(*lat), cmp_u64);
	o.mean_lat = latsum / (double)t->n;
	o.p99_lat = (double)lat[(t->n * 99) / 100];
	o.cpu_per_halt = cpu / (double)t->n;
	o.won = (double)won / (double)t->n;
	free(lat);
	return o;
}

/* --live: a waker thread posts D ns after the vCPU thread blocked; the
 * latency is from the post to the vCPU running again. */
struct live {
	struct vsched_vcpu *v;
	const struct trace *t;
	size_t n;
	_Atomic uint64_t t_post;
	atomic_int armed;
	atomic_int done;
	double lat_sum, cpu_sum;
	size_t won, halts;
	uint64_t *lat;
};

static void *live_waker(void *arg)
{
	struct live *l = arg;
	pin(1);
	for (size_t i = 0; i < l->n; i++) {
		while (atomic_load(&l->armed) != (int)i + 1)
			vsched__relax();
		uint64_t target = now_ns() + l->t->d[i];
		if (l->t->d[i] > 200000) {
			struct timespec ts = { .tv_sec = (time_t)((target - 100000) / 1000000000ull),
					       .tv_nsec = (long)((target - 100000) % 1000000000ull) };
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		}
		while (now_ns() < target)
			vsched__relax();
		atomic_store(&l->t_post, now_ns());
		vsched_post(l->v, K_A);
	}
	return NULL;
}

static struct outcome live_run(const struct pol *pl, const struct trace *t,
			       double budget_s)
{
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .poll = &pl->p };
	struct vsched_request_desc d = { .name = "a" };
	struct vsched_vm *vm;
	struct live l = { .t = t };
	struct outcome o = { 0 };
	pthread_t th;
	double sum = 0;

	/* as many halts as fit the time budget */
	for (l.n = 0; l.n < t->n && sum < budget_s * 1e9; l.n++)
		sum += (double)t->d[l.n] + 20000;
	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_A, &d) ||
	    vsched_request_finalize(vm, 0) || vsched_vcpu_create(vm, 0, NULL, &l.v))
		abort();
	l.lat = malloc(l.n * sizeof(*l.lat));
	pthread_create(&th, NULL, live_waker, &l);
	pin(0);
	for (size_t i = 0; i < l.n; i++) {
		struct vsched_block_result r = { .size = sizeof(r) };
		atomic_store(&l.armed, (int)i + 1);
		while (vsched_vcpu_block_ex(l.v, VSCHED_DEADLINE_NONE, &r) !=
		       VSCHED_WAKE_REQUEST)
			;
		uint64_t t_run = now_ns();
		vsched_service(l.v);
		uint64_t tp = atomic_load(&l.t_post);
		l.lat[i] = t_run > tp ? t_run - tp : 0;
		l.lat_sum += (double)l.lat[i];
		l.cpu_sum += (double)r.poll_ns;
		l.won += r.poll_won;
	}
	pthread_join(th, NULL);
	vsched_vm_destroy(vm);
	o.mean_lat = l.lat_sum / (double)l.n;
	o.cpu_per_halt = l.cpu_sum / (double)l.n;
	o.won = (double)l.won / (double)l.n;
	qsort(l.lat, l.n, sizeof(*l.lat), cmp_u64);
	o.p99_lat = (double)l.lat[(l.n * 99) / 100];
	free(l.lat);
	return o;
}

static void emit(const char *trace, const char *pol, const char *metric,
		 const char *unit, double v, double kvm)
{
	char m[256];
	snprintf(m, sizeof(m), "%s/%s/%s", trace, pol, metric);
	if (opt_json)
		json_line(&(struct json_line){ .bench = "policy", .metric = m, .unit = unit,
					       .baseline = "kvm", .value = v,
					       .baseline_value = kvm,
					       .ratio = kvm > 0 ? v / kvm : (v > 0 ? 1e9 : 1.0),
					       .min = v, .max = v, .runs = 1, .prec = 2,
					       .ratio_prec = 3 });
}

/* Every .txt of bench/traces/, by name, unless --trace gave files; loads
 * them into tr[] and returns how many loaded. */
static int load_traces(struct trace *tr)
{
	int ntr = 0;

	if (!ntrace_files) {
		DIR *dir = opendir(VSCHED_TRACE_DIR);
		struct dirent *e;
		static char paths[MAX_TRACES][512];
		while (dir && (e = readdir(dir)) && ntrace_files < MAX_TRACES) {
			size_t len = strlen(e->d_name);
			if (len > 4 && !strcmp(e->d_name + len - 4, ".txt")) {
				snprintf(paths[ntrace_files], sizeof(paths[0]), "%s/%s",
					 VSCHED_TRACE_DIR, e->d_name);
				trace_files[ntrace_files] = paths[ntrace_files];
				ntrace_files++;
			}
		}
		if (dir)
			closedir(dir);
		qsort(trace_files, ntrace_files, sizeof(trace_files[0]), cmp_path);
	}
	for (int i = 0; i < ntrace_files; i++) {
		if (load_trace(trace_files[i], &tr[ntr]) == 0)
			ntr++;
		else
			fprintf(stderr, "cannot read trace %s\n", trace_files[i]);
	}
	return ntr;
}

/* The cost model's one-way wakeup latencies, polled and sleeping: the
 * --polled-ns and --wake-ns figures, or else calibrated on this machine in
 * this run as half a measured round trip. */
static void calibrate(double *c_poll, double *c_wake)
{
	*c_poll = opt_polled_ns;
	*c_wake = opt_wake_ns;
	if (*c_poll <= 0 || *c_wake <= 0) {
		double a[3], b[3];
		for (int r = 0; r < 3; r++) {
			a[r] = vs_pingpong(opt_quick ? 5000 : 20000, 1000000000ull) / 2;
			b[r] = vs_pingpong(opt_quick ? 300 : 2000, 0) / 2;
		}
		if (*c_poll <= 0)
			*c_poll = median(a, 3);
		if (*c_wake <= 0)
			*c_wake = median(b, 3);
	}
	if (!opt_json)
		printf("policy: cost model: polled wakeup %.0f ns, sleeping wakeup %.0f ns "
		       "(calibrated: half the measured round trips)\n", *c_poll, *c_wake);
}

/* One trace's table (text) or lines (JSON), then its goals, checked and
 * printed, never rounded up. Returns 1 if adaptive was worse than kvm on
 * latency and CPU at once. */
static int print_trace(const struct trace *t, const struct pol *pols,
		       const struct outcome *o)
{
	if (!opt_json)
		printf("\n%-14s %-12s %12s %12s %14s %8s\n", t->name, "policy",
		       "mean lat us", "p99 lat us", "poll CPU us/halt",
		       "won %");
	for (int k = 0; k < 5; k++) {
		if (!opt_json)
			printf("%-14s %-12s %12.2f %12.2f %14.2f %8.1f\n", "", pols[k].name,
			       o[k].mean_lat / 1e3, o[k].p99_lat / 1e3,
			       o[k].cpu_per_halt / 1e3, o[k].won * 100);
		emit(t->name, pols[k].name, "mean_latency", "ns", o[k].mean_lat,
		     o[2].mean_lat);
		emit(t->name, pols[k].name, "poll_cpu_per_halt", "ns",
		     o[k].cpu_per_halt, o[2].cpu_per_halt);
	}
	const struct outcome *ad = &o[4], *kv = &o[2], *ap = &o[1];
	bool dominated = ad->mean_lat > kv->mean_lat * 1.001 &&
			 ad->cpu_per_halt > kv->cpu_per_halt * 1.001;
	bool fast = ap->won > 0.99;
	bool slowish = !strcmp(t->name, "heavy-tailed") || !strcmp(t->name, "slow");
	if (!opt_json) {
		printf("%-14s goal: adaptive not worse than kvm on both: %s\n", "",
		       dominated ? "MISSED" : "met");
		if (fast)
			printf("%-14s goal: adaptive latency within 5%% of always-poll "
			       "(%.3fx): %s\n", "", ad->mean_lat / ap->mean_lat,
			       ad->mean_lat <= ap->mean_lat * 1.05 ? "met" : "MISSED");
		if (slowish)
			printf("%-14s goal: adaptive poll CPU at most half of kvm's "
			       "(%.3fx): %s\n", "",
			       kv->cpu_per_halt > 0 ? ad->cpu_per_halt / kv->cpu_per_halt : 0,
			       ad->cpu_per_halt <= kv->cpu_per_halt * 0.5 ? "met" : "MISSED");
	}
	return dominated;
}

static int run_policy(void)
{
	struct trace tr[MAX_TRACES];
	int ntr = load_traces(tr);
	double c_poll, c_wake;

	if (!ntr) {
		fprintf(stderr, "no traces\n");
		return 1;
	}
	calibrate(&c_poll, &c_wake);

	const uint64_t max = 200000;
	struct pol pols[5];
	const char *names[5] = { "none", "always-poll", "kvm", "kvm-reset", "adaptive" };
	for (int k = 0; k < 5; k++)
		pols[k].name = names[k];
	vsched_poll_defaults(VSCHED_POLL_NONE, max, &pols[0].p);
	vsched_poll_defaults(VSCHED_POLL_FIXED, max, &pols[1].p);
	vsched_poll_defaults(VSCHED_POLL_KVM, max, &pols[2].p);
	vsched_poll_defaults(VSCHED_POLL_KVM, max, &pols[3].p);
	pols[3].p.shrink = 0;
	vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, max, &pols[4].p);
	pols[4].p.wake_cost_ns = (uint64_t)c_wake;
	pols[4].p.latency_weight = opt_weight;

	int misses = 0;
	for (int i = 0; i < ntr; i++) {
		struct outcome o[5];
		for (int k = 0; k < 5; k++)
			o[k] = opt_live ? live_run(&pols[k], &tr[i], opt_quick ? 0.2 : 1.0)
					: replay(&pols[k], &tr[i], c_poll, c_wake);
		misses += print_trace(&tr[i], pols, o);
		free(tr[i].d);
	}
	return 0;
}

const struct bench bench_policy = {
	.name = "policy",
	.desc = "halt traces replayed through every poll policy",
	.run = run_policy,
	.in_all = true,
	.usage = "[--trace FILE] [--wake-ns N] [--polled-ns N] [--latency-weight N] "
		 "[--live]",
	.option = policy_option,
};
