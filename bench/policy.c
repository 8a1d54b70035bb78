/* SPDX-License-Identifier: MIT */
/*
 * policy: replays halt traces (bench/traces/, any --trace FILE, and trace
 * families generated here from fixed seeds) through every poll policy's
 * real code and through the frontier of fixed windows, with a cost model
 * calibrated in the same run; --live also runs them on real threads.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#include "arch/arch.h"

#define MAX_TRACES 64
#define GEN_HALTS 20000

struct trace {
	char name[128];
	uint64_t *d;
	size_t n;
};

static const char *trace_files[MAX_TRACES];
static int ntrace_files, opt_live, opt_files_only;
static const char *opt_family;
static double opt_wake_ns, opt_polled_ns, opt_sleep_cpu_ns;
static unsigned opt_weight = 4, opt_budget = 100;
static int opt_decay = -1;
static unsigned long long opt_seed;

/* The cost model's options, 1 ns to 1 s; a trace's halts, at most
 * HALT_NS_MAX (1,000 s: a halt plus any wakeup cost stays far below 2^64,
 * and the replay's sums stay exact). */
#define COST_NS_MAX 1000000000ull
#define HALT_NS_MAX 1000000000000ull

/* --trace FILE (up to MAX_TRACES; none: every .txt of bench/traces/),
 * --family PREFIX (only the generated traces whose name starts so, no
 * files), --files-only (no generated traces), --wake-ns N and --polled-ns N
 * and --sleep-cpu-ns N (the cost model, calibrated if not given),
 * --latency-weight N (the
 * adaptive policy's), --seed N (added to each generated trace's seed, to
 * draw other traces of the same families), --live. */
static int policy_option(int argc, char **argv, int i)
{
	if (!strcmp(argv[i], "--trace") && i + 1 < argc && ntrace_files < MAX_TRACES)
		trace_files[ntrace_files++] = argv[i + 1];
	else if (!strcmp(argv[i], "--wake-ns") && i + 1 < argc)
		opt_wake_ns = (double)opt_range(argv[i], argv[i + 1], 1, COST_NS_MAX);
	else if (!strcmp(argv[i], "--polled-ns") && i + 1 < argc)
		opt_polled_ns = (double)opt_range(argv[i], argv[i + 1], 1, COST_NS_MAX);
	else if (!strcmp(argv[i], "--sleep-cpu-ns") && i + 1 < argc)
		opt_sleep_cpu_ns = (double)opt_range(argv[i], argv[i + 1], 1, COST_NS_MAX);
	else if (!strcmp(argv[i], "--latency-weight") && i + 1 < argc)
		opt_weight = (unsigned)opt_num(argv[i], argv[i + 1], 1000000);
	else if (!strcmp(argv[i], "--budget") && i + 1 < argc)
		opt_budget = (unsigned)opt_num(argv[i], argv[i + 1], 10000);
	else if (!strcmp(argv[i], "--decay-shift") && i + 1 < argc)
		opt_decay = (int)opt_num(argv[i], argv[i + 1], 15);
	else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
		opt_seed = opt_num(argv[i], argv[i + 1], ULLONG_MAX);
	else if (!strcmp(argv[i], "--family") && i + 1 < argc)
		opt_family = argv[i + 1];
	else if (!strcmp(argv[i], "--files-only"))
		return opt_files_only = 1;
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

/* One trace file into t (one halt length in ns a line; blank lines and #
 * comments skipped): 0; -1 if it cannot be read or holds no halt; -2, said
 * on stderr with the file and line, if a line is no halt length. */
static int load_trace(const char *path, struct trace *t)
{
	FILE *f = fopen(path, "r");
	char *line = NULL;
	size_t cap = 1024, line_cap = 0;
	if (!f)
		return -1;
	const char *base = strrchr(path, '/');
	snprintf(t->name, sizeof(t->name), "%s", base ? base + 1 : path);
	char *dot = strrchr(t->name, '.');
	if (dot)
		*dot = 0;
	t->n = 0;
	t->d = malloc(cap * sizeof(*t->d));
	for (unsigned ln = 1; getline(&line, &line_cap, f) >= 0; ln++) {
		char *p = line, *end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '#' || *p == '\n' || (*p == '\r' && p[1] == '\n') || !*p)
			continue;
		/* Decimal digits, then nothing but blanks or a # comment:
		 * strtoull alone would take -1 for 2^64 - 1 ns, and skip a line
		 * that is no number or end one at its first non-digit. */
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		char *rest = end;
		while (*rest == ' ' || *rest == '\t' || *rest == '\r' || *rest == '\n')
			rest++;
		if (*p < '0' || *p > '9' || errno || v > HALT_NS_MAX ||
		    (*rest && *rest != '#')) {
			fprintf(stderr, "vsched-bench: policy: %s:%u: '%.*s' is not a halt "
				"length (a whole number of ns, 0 to %llu)\n", path, ln,
				(int)strcspn(p, "\r\n"), p, HALT_NS_MAX);
			free(line);
			fclose(f);
			free(t->d);
			t->d = NULL;
			return -2;
		}
		if (t->n == cap)
			t->d = realloc(t->d, (cap *= 2) * sizeof(*t->d));
		t->d[t->n++] = v;
	}
	free(line);
	fclose(f);
	if (!t->n) {
		free(t->d);
		t->d = NULL;
		return -1;
	}
	return 0;
}

/* ---- Generated trace families (deterministic: one seed per trace) ---- */

/* The halt families (gap kinds in bench.h), then io_families[] (waiter-style
 * traces: the live `iothread` bench's gaps, judged against QEMU's policy). */
static const struct gap_family gens[] = {
	{ "exp-2us", GAP_EXP, 2000, 0, 0, 0 },
	{ "exp-5us", GAP_EXP, 5000, 0, 0, 0 },
	{ "exp-12us", GAP_EXP, 12000, 0, 0, 0 },
	{ "exp-30us", GAP_EXP, 30000, 0, 0, 0 },
	{ "exp-80us", GAP_EXP, 80000, 0, 0, 0 },
	{ "exp-300us", GAP_EXP, 300000, 0, 0, 0 },
	{ "pareto-2us-a0.5", GAP_PARETO, 2000, 0.5, 0, 0 },
	{ "pareto-2us-a1.0", GAP_PARETO, 2000, 1.0, 0, 0 },
	{ "pareto-2us-a1.5", GAP_PARETO, 2000, 1.5, 0, 0 },
	{ "pareto-5us-a0.7", GAP_PARETO, 5000, 0.7, 0, 0 },
	{ "pareto-5us-a2.5", GAP_PARETO, 5000, 2.5, 0, 0 },
	{ "pareto-20us-a1.2", GAP_PARETO, 20000, 1.2, 0, 0 },
	{ "bimodal-30-3us-1ms", GAP_BIMODAL, 0.3, 3000, 500000, 2000000 },
	{ "bimodal-60-10us-300us", GAP_BIMODAL, 0.6, 10000, 200000, 400000 },
	{ "bimodal-90-3us-1ms", GAP_BIMODAL, 0.9, 3000, 500000, 2000000 },
	{ "periodic-8us", GAP_PERIODIC, 8000, 0, 0, 0 },
	{ "periodic-60us", GAP_PERIODIC, 60000, 0, 0, 0 },
	{ "periodic-150us", GAP_PERIODIC, 150000, 0, 0, 0 },
	{ "cycle-4x5us-1ms", GAP_CYCLE, 5000, 4, 1000000, 0 },
	{ "cycle-20x2us-250us", GAP_CYCLE, 2000, 20, 250000, 0 },
	{ "phase-5us-1ms-x500", GAP_PHASE, 5000, 1000000, 0, 500 },
	{ "phase-5us-1ms-x5000", GAP_PHASE, 5000, 1000000, 0, 5000 },
	{ "phase-12us-100us-x2000", GAP_PHASE, 12000, 100000, 0, 2000 },
	{ "phase-2us-30us-x200", GAP_PHASE, 2000, 30000, 0, 200 },
};
#define NGENS (sizeof(gens) / sizeof(gens[0]))

/* A waiter-style trace (an io_families[] member): judged against qemu. */
static bool waiter_style(const struct trace *t)
{
	return !strncmp(t->name, "io-", 3);
}

static void gen_trace(const struct gap_family *g, unsigned idx, struct trace *t)
{
	snprintf(t->name, sizeof(t->name), "%s", g->name);
	t->n = GEN_HALTS;
	t->d = malloc(t->n * sizeof(*t->d));
	gap_fill(g, 0x5eed0000ull + idx + opt_seed, t->d, t->n);
}

/* A policy replayed: vsched's (p, through the library's own code), or,
 * with `qemu` set, QEMU's AioContext rules (bench.h's qemu_poll, from q). */
struct pol {
	const char *name;
	struct vsched_poll_params p;
	bool qemu;
	struct qemu_poll q;
};

/* Per halt: mean, p50 and p99 latency; CPU (poll time, and the sleep's
 * CPU for each halt that slept) and the poll time alone; share polled. */
struct outcome {
	double mean_lat, p50_lat, p99_lat, cpu_per_halt, poll_per_halt, won;
};


/* Cost model: a halt whose wakeup comes D ns in is caught by polling when
 * D <= W (latency c_poll, CPU D), else it sleeps (CPU: W of polling wasted
 * and c_sleep for the sleep itself, the futex round trip and the two
 * context switches; latency c_wake) and the engine measures D + c_wake as
 * the halt. */
static struct outcome replay(const struct pol *pl, const struct trace *t,
			     double c_poll, double c_wake, double c_sleep)
{
	struct vsched_poll_state st;
	struct qemu_poll q = pl->q;
	struct outcome o = { 0 };
	uint64_t *lat = malloc(t->n * sizeof(*lat));
	double cpu = 0, poll = 0, latsum = 0;
	size_t won = 0;

	/* Refused parameters would replay as a window of 0 whatever the
	 * policy: run_policy() checked the options, so this cannot be. */
	if (vsched_poll_init(&pl->p, &st)) {
		fprintf(stderr, "vsched-bench: policy: the library refuses %s's parameters\n",
			pl->name);
		abort();
	}
	for (size_t i = 0; i < t->n; i++) {
		uint64_t d = t->d[i];
		uint64_t w = pl->qemu ? q.ns : vsched_poll_window(&pl->p, &st);
		uint64_t halt;
		if (d <= w) {
			lat[i] = (uint64_t)c_poll;
			cpu += (double)d;
			poll += (double)d;
			won++;
			halt = d;
		} else {
			lat[i] = (uint64_t)c_wake;
			cpu += (double)w + c_sleep;
			poll += (double)w;
			halt = d + (uint64_t)c_wake;
		}
		latsum += (double)lat[i];
		if (pl->qemu)
			qemu_poll_adjust(&q, halt); /* block_ns: poll plus sleep */
		else
			vsched_poll_update(&pl->p, &st, w, halt, true);
	}
	qsort(lat, t->n, sizeof(*lat), cmp_u64);
	o.mean_lat = latsum / (double)t->n;
	o.p50_lat = (double)lat[t->n / 2];
	o.p99_lat = (double)lat[p99_index(t->n)];
	o.cpu_per_halt = cpu / (double)t->n;
	o.poll_per_halt = poll / (double)t->n;
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
	uint64_t cap; /* the longest halt replayed: the time budget */
	_Atomic uint64_t t_post;
	atomic_int armed;
	atomic_int done;
	double lat_sum, poll_sum;
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
		const uint64_t gap = l->t->d[i] < l->cap ? l->t->d[i] : l->cap;
		uint64_t target = now_ns() + gap;
		if (gap > 200000) {
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

/* How many of t's halts --live replays in budget_s: the leading ones
 * that fit, each with 20 us of the loop's own; at least one, replayed at
 * most the budget long (live_waker()). */
static size_t live_halts(const struct trace *t, double budget_s)
{
	const uint64_t cap = (uint64_t)(budget_s * 1e9);
	double sum = 0;
	size_t n;

	for (n = 0; n < t->n; n++) {
		const double h = (double)(t->d[n] < cap ? t->d[n] : cap) + 20000;
		if (n && sum + h > budget_s * 1e9)
			break;
		sum += h;
	}
	return n;
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

	l.cap = (uint64_t)(budget_s * 1e9);
	l.n = live_halts(t, budget_s);
	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_A, &d) ||
	    vsched_request_finalize(vm, 0) || vsched_vcpu_create(vm, 0, NULL, &l.v))
		abort();
	l.lat = malloc(l.n * sizeof(*l.lat));
	pthread_create(&th, NULL, live_waker, &l);
	pin(0);
	struct qemu_poll q = pl->q;
	uint64_t q_set = UINT64_MAX;
	/* CPU: the vCPU thread's own, all of it (polls, sleeps, the loop). */
	const uint64_t cpu0 = thread_cpu_ns();
	for (size_t i = 0; i < l.n; i++) {
		struct vsched_block_result r = { .size = sizeof(r) };
		/* QEMU's rules on the engine: its window as this halt's fixed
		 * one, set only when it changed (before the waker is armed). */
		if (pl->qemu && q.ns != q_set) {
			struct vsched_poll_params fx;
			vsched_poll_defaults(q.ns ? VSCHED_POLL_FIXED : VSCHED_POLL_NONE,
					     q.ns, &fx);
			if (vsched_vcpu_set_poll(l.v, &fx))
				abort();
			q_set = q.ns;
		}
		atomic_store(&l.armed, (int)i + 1);
		while (vsched_vcpu_block_ex(l.v, VSCHED_DEADLINE_NONE, &r) !=
		       VSCHED_WAKE_REQUEST)
			;
		uint64_t t_run = now_ns();
		vsched_service(l.v);
		uint64_t tp = atomic_load(&l.t_post);
		l.lat[i] = t_run > tp ? t_run - tp : 0;
		l.lat_sum += (double)l.lat[i];
		l.poll_sum += (double)r.poll_ns;
		l.won += r.poll_won;
		if (pl->qemu)
			qemu_poll_adjust(&q, r.halt_ns);
	}
	pthread_join(th, NULL);
	vsched_vm_destroy(vm);
	o.mean_lat = l.lat_sum / (double)l.n;
	o.cpu_per_halt = (double)(thread_cpu_ns() - cpu0) / (double)l.n;
	o.poll_per_halt = l.poll_sum / (double)l.n;
	o.won = (double)l.won / (double)l.n;
	qsort(l.lat, l.n, sizeof(*l.lat), cmp_u64);
	o.p50_lat = (double)l.lat[l.n / 2];
	o.p99_lat = (double)l.lat[p99_index(l.n)];
	free(l.lat);
	return o;
}

/* One JSON line against the trace's incumbent `base` ("kvm" for halt
 * traces, "qemu" for waiter-style ones) whose value is b. */
static void emit(const char *trace, const char *pol, const char *metric,
		 const char *unit, double v, const char *base, double b)
{
	char m[256];
	snprintf(m, sizeof(m), "%.120s/%.60s/%.60s", trace, pol, metric);
	if (opt_json)
		json_line(&(struct json_line){ .bench = "policy", .metric = m, .unit = unit,
					       .baseline = base, .value = v,
					       .baseline_value = b,
					       .ratio = ratio_of(v, b),
					       .min = v, .max = v, .runs = 1, .prec = 2,
					       .ratio_prec = 3 });
}

/* The shipped traces' directory: VSCHED_TRACE_REL from this executable's
 * own directory (installed: BINDIR/../share/vsched/traces; a build tree
 * has a copy at the same place relative to bench/vsched-bench), into buf. */
static const char *trace_dir(char *buf, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n <= 0)
		return NULL;
	exe[n] = 0;
	slash = strrchr(exe, '/');
	if (!slash)
		return NULL;
	*slash = 0;
	if ((size_t)snprintf(buf, len, "%s/%s", exe, VSCHED_TRACE_REL) >= len)
		return NULL;
	return buf;
}

/* Every .txt of the shipped traces (bench/traces/ in the source), by name,
 * unless --trace gave files, then the generated families (unless --trace or
 * --files-only; --family PREFIX: only those, no files); loads them into
 * tr[] and returns how many loaded, or -1 (said) for a usage error: a file
 * with a line that is no halt length, a named file that cannot be
 * replayed, a --family that matches none or comes with --trace or
 * --files-only. */
static int load_traces(struct trace *tr)
{
	int ntr = 0, explicit_files = ntrace_files > 0;

	/* --family picks among the generated traces, which --trace and
	 * --files-only leave out: together they would replay nothing. */
	if (opt_family && (explicit_files || opt_files_only)) {
		fprintf(stderr, "vsched-bench: policy: --family selects generated traces; "
			"--%s replays none\n", explicit_files ? "trace" : "files-only");
		return -1;
	}
	if (!ntrace_files && !opt_family) {
		char tdir[PATH_MAX];
		const char *td = trace_dir(tdir, sizeof(tdir));
		DIR *dir = td ? opendir(td) : NULL;
		struct dirent *e;
		static char paths[MAX_TRACES][PATH_MAX + 320]; /* dir, '/', d_name */
		while (dir && (e = readdir(dir)) && ntrace_files < MAX_TRACES) {
			size_t len = strlen(e->d_name);
			if (len > 4 && !strcmp(e->d_name + len - 4, ".txt")) {
				snprintf(paths[ntrace_files], sizeof(paths[0]), "%s/%s",
					 td, e->d_name);
				trace_files[ntrace_files] = paths[ntrace_files];
				ntrace_files++;
			}
		}
		if (dir)
			closedir(dir);
		qsort(trace_files, ntrace_files, sizeof(trace_files[0]), cmp_path);
	}
	for (int i = 0; i < ntrace_files && !opt_family; i++) {
		int rc = load_trace(trace_files[i], &tr[ntr]);
		if (rc == -1)
			fprintf(stderr, "vsched-bench: policy: cannot read trace %s, or it "
				"holds no halt\n", trace_files[i]);
		/* A line that is no halt length (said), or a file the user
		 * named that cannot be replayed: a usage error. */
		if (rc == -2 || (rc == -1 && explicit_files)) {
			for (int j = 0; j < ntr; j++)
				free(tr[j].d);
			return -1;
		}
		if (rc == 0)
			ntr++;
	}
	for (unsigned g = 0; g < sizeof(gens) / sizeof(gens[0]) && !opt_files_only &&
			     !explicit_files && ntr < MAX_TRACES; g++)
		if (!opt_family || !strncmp(gens[g].name, opt_family, strlen(opt_family)))
			gen_trace(&gens[g], g, &tr[ntr++]);
	for (unsigned g = 0; g < n_io_families && !opt_files_only && !explicit_files &&
			     ntr < MAX_TRACES; g++)
		if (!opt_family ||
		    !strncmp(io_families[g].name, opt_family, strlen(opt_family)))
			gen_trace(&io_families[g], NGENS + g, &tr[ntr++]);
	if (opt_family && !ntr) {
		fprintf(stderr, "vsched-bench: policy: no generated trace starts with %s\n",
			opt_family);
		return -1;
	}
	return ntr;
}

/* The process's CPU time (both threads of a ping-pong), ns. */
static uint64_t process_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The cost model: the one-way wakeup latencies, polled and sleeping, and
 * the CPU one sleep costs (both sides of it: the sleeper's futex wait and
 * two context switches, the waker's futex wake): the --polled-ns,
 * --wake-ns and --sleep-cpu-ns figures, or else calibrated on this machine
 * in this run, as half a measured round trip and half the CPU of a
 * sleeping round trip (two sleeps). */
static void calibrate(double *c_poll, double *c_wake, double *c_sleep)
{
	*c_poll = opt_polled_ns;
	*c_wake = opt_wake_ns;
	*c_sleep = opt_sleep_cpu_ns;
	if (*c_poll <= 0 || *c_wake <= 0 || *c_sleep <= 0) {
		double a[3], b[3], c[3];
		const long nb = opt_quick ? 300 : 2000;
		for (int r = 0; r < 3; r++) {
			a[r] = vs_pingpong(opt_quick ? 5000 : 20000, 1000000000ull) / 2;
			uint64_t c0 = process_cpu_ns();
			b[r] = vs_pingpong(nb, 0) / 2;
			c[r] = (double)(process_cpu_ns() - c0) / (2.0 * (double)nb);
		}
		if (*c_poll <= 0)
			*c_poll = median(a, 3);
		if (*c_wake <= 0)
			*c_wake = median(b, 3);
		if (*c_sleep <= 0)
			*c_sleep = median(c, 3);
	}
	if (!opt_json)
		printf("policy: cost model: polled wakeup %.0f ns (%s), sleeping wakeup "
		       "%.0f ns (%s), a sleep's CPU %.0f ns (%s)%s\n", *c_poll,
		       opt_polled_ns > 0 ? "given" : "calibrated", *c_wake,
		       opt_wake_ns > 0 ? "given" : "calibrated", *c_sleep,
		       opt_sleep_cpu_ns > 0 ? "given" : "calibrated",
		       opt_polled_ns > 0 && opt_wake_ns > 0 && opt_sleep_cpu_ns > 0
			       ? ""
			       : "; calibrated: half the measured round trips, half a "
				 "sleeping round trip's CPU");
}

/* The policies replayed: the named ones, then the fixed windows between
 * none (0) and always-poll (200 us) that make up the frontier, then any
 * policy of the library's beyond ADAPTIVE at its defaults. Named by the
 * library (vsched_poll_policy_name()), except always-poll (FIXED at the
 * maximum) and qemu (QEMU's, not a vsched policy). */
enum { P_NONE, P_ALWAYS, P_KVM, P_KVM_RESET, P_ADAPTIVE, P_ADAPTIVE_DFLT, P_QEMU,
       P_KNOB0, P_FIXED0 = P_KNOB0 + 4, P_NEW0 = P_FIXED0 + 7,
       NPOL = P_NEW0 + VSCHED_POLL_NPOLICIES - 1 - VSCHED_POLL_ADAPTIVE };
static const uint64_t fixed_us[P_NEW0 - P_FIXED0] = { 1, 2, 5, 10, 20, 50, 100 };
/* The knob turned (cpu_budget_pct; the default, 100, is adaptive-dflt). */
static const unsigned knob_pct[P_FIXED0 - P_KNOB0] = { 0, 200, 400, 1000 };

/* The frontier in window order: 0, 1, 2, 5, 10, 20, 50, 100, 200 us. */
static const int frontier[] = { P_NONE,	     P_FIXED0,	   P_FIXED0 + 1,
				P_FIXED0 + 2, P_FIXED0 + 3, P_FIXED0 + 4,
				P_FIXED0 + 5, P_FIXED0 + 6, P_ALWAYS };
#define NFRONT ((int)(sizeof(frontier) / sizeof(frontier[0])))

/* The trace's incumbent: QEMU's policy for waiter-style traces, KVM's for
 * halt traces (issue 23). */
static int incumbent(const struct trace *t)
{
	return waiter_style(t) ? P_QEMU : P_KVM;
}

/* Ratios here are ratio_of()'s (bench.h), NAN where undefined. Every
 * comparison with NAN is false, as it was with the INFINITY this was: a
 * window whose ratio is undefined dominates nothing, and a goal of a ratio
 * at most x is not met. */

/* The fixed window > 5% better than policy k on both mean latency and CPU
 * (the one with the largest smaller margin), or -1; its ratios to k's. */
static int dominator(const struct outcome *o, int k, double *rl_out, double *rc_out)
{
	double best = 0;
	int dom = -1;
	for (int f = 0; f < NFRONT; f++) {
		const struct outcome *w = &o[frontier[f]];
		double rl = ratio_of(w->mean_lat, o[k].mean_lat);
		double rc = ratio_of(w->cpu_per_halt, o[k].cpu_per_halt);
		double margin = 1 - (rl > rc ? rl : rc);
		if (rl < 0.95 && rc < 0.95 && margin > best) {
			best = margin;
			dom = frontier[f];
			*rl_out = rl;
			*rc_out = rc;
		}
	}
	return dom;
}

/* One trace's verdict, against the trace's incumbent (kvm or qemu): issue
 * 18's goals for adaptive at a fixed rate, and issue 23's for the default
 * (CPU, polls and sleeps, and p50 latency within 1.05x of the incumbent's)
 * and for the knob (no fixed window 5% better on both than the default or
 * any budget replayed). */
struct verdict {
	int dominator;	  /* a fixed window > 5% better on both, or -1 */
	double dom_lat, dom_cpu; /* its ratios to adaptive's */
	double product;	  /* adaptive's latency x CPU over the incumbent's */
	bool product_ok;
	double dflt_p50, dflt_mean, dflt_cpu; /* adaptive-dflt over the incumbent */
	bool dflt_ok;
	int knob_dominated; /* how many of the default and the budgets are */
};

static struct verdict judge(const struct outcome *o, int inc)
{
	const struct outcome *ad = &o[P_ADAPTIVE], *kv = &o[inc];
	struct verdict v = { 0 };
	double rl, rc;

	v.dominator = dominator(o, P_ADAPTIVE, &v.dom_lat, &v.dom_cpu);
	double pa = ad->mean_lat * ad->cpu_per_halt, pk = kv->mean_lat * kv->cpu_per_halt;
	v.product = ratio_of(pa, pk);
	v.product_ok = pa <= pk * 1.001; /* equal within 0.1% counts as no worse */
	v.dflt_p50 = ratio_of(o[P_ADAPTIVE_DFLT].p50_lat, kv->p50_lat);
	v.dflt_mean = ratio_of(o[P_ADAPTIVE_DFLT].mean_lat, kv->mean_lat);
	v.dflt_cpu = ratio_of(o[P_ADAPTIVE_DFLT].cpu_per_halt, kv->cpu_per_halt);
	v.dflt_ok = v.dflt_p50 <= 1.05 && v.dflt_cpu <= 1.05;
	v.knob_dominated = dominator(o, P_ADAPTIVE_DFLT, &rl, &rc) >= 0;
	for (int k = P_KNOB0; k < P_FIXED0; k++)
		v.knob_dominated += dominator(o, k, &rl, &rc) >= 0;
	return v;
}

/* One trace's table (text) or lines (JSON), then its goals, checked and
 * printed, never rounded up. */
static struct verdict print_trace(const struct trace *t, const struct pol *pols,
				  const struct outcome *o)
{
	const int inc = incumbent(t);

	if (!opt_json)
		printf("\n%-22s %-14s %9s %9s %9s %10s %10s %6s\n", t->name, "policy",
		       "mean us", "p50 us", "p99 us", "CPU us/h", "poll us/h", "won %");
	for (int k = 0; k < NPOL; k++) {
		if (!opt_json)
			printf("%-22s %-14s %9.2f %9.2f %9.2f %10.2f %10.2f %6.1f\n", "",
			       pols[k].name, o[k].mean_lat / 1e3, o[k].p50_lat / 1e3,
			       o[k].p99_lat / 1e3, o[k].cpu_per_halt / 1e3,
			       o[k].poll_per_halt / 1e3, o[k].won * 100);
		emit(t->name, pols[k].name, "mean_latency", "ns", o[k].mean_lat,
		     pols[inc].name, o[inc].mean_lat);
		emit(t->name, pols[k].name, "p50_latency", "ns", o[k].p50_lat,
		     pols[inc].name, o[inc].p50_lat);
		emit(t->name, pols[k].name, "cpu_per_halt", "ns", o[k].cpu_per_halt,
		     pols[inc].name, o[inc].cpu_per_halt);
		emit(t->name, pols[k].name, "poll_cpu_per_halt", "ns",
		     o[k].poll_per_halt, pols[inc].name, o[inc].poll_per_halt);
	}
	const struct outcome *ad = &o[P_ADAPTIVE], *kv = &o[inc], *ap = &o[P_ALWAYS];
	struct verdict v = judge(o, inc);
	emit(t->name, pols[P_ADAPTIVE].name, "latency_x_cpu", "us^2",
	     ad->mean_lat * ad->cpu_per_halt / 1e6, pols[inc].name,
	     kv->mean_lat * kv->cpu_per_halt / 1e6);
	if (opt_json)
		return v;
	char r1[32], r2[32], r3[32];
	printf("%-22s goal: adaptive-dflt within 1.05x of %s on CPU (%s) and p50 "
	       "latency (%s; mean %s): %s\n", "", pols[inc].name,
	       rtxt(r1, sizeof(r1), v.dflt_cpu, 3, "x"),
	       rtxt(r2, sizeof(r2), v.dflt_p50, 3, "x"),
	       rtxt(r3, sizeof(r3), v.dflt_mean, 3, "x"), v.dflt_ok ? "met" : "MISSED");
	printf("%-22s goal: no fixed window 5%% better on both than the default or "
	       "a budget: %s\n", "", v.knob_dominated ? "MISSED" : "met");
	if (v.dominator < 0)
		printf("%-22s adaptive at weight %u: no fixed window 5%% better on both: "
		       "met\n", "", opt_weight);
	else
		printf("%-22s adaptive at weight %u: no fixed window 5%% better on both: "
		       "MISSED (%s: latency %.3fx, CPU %.3fx adaptive's)\n", "", opt_weight,
		       pols[v.dominator].name, v.dom_lat, v.dom_cpu);
	printf("%-22s adaptive at weight %u: latency x CPU at most %s's (%s): %s\n",
	       "", opt_weight, pols[inc].name, rtxt(r1, sizeof(r1), v.product, 3, "x"),
	       v.product_ok ? "met" : "MISSED");
	/* Only where polling every halt is worth its CPU by adaptive's own
	 * exchange rate (always-poll's J no worse than never polling's): where
	 * the halts outlast latency_weight x wake cost, J says sleep, and
	 * always-poll's latency is bought at a price the policy is told not to
	 * pay. */
	const struct outcome *no = &o[P_NONE];
	if (ap->won > 0.99 && ap->cpu_per_halt + opt_weight * ap->mean_lat <=
				      no->cpu_per_halt + opt_weight * no->mean_lat)
		printf("%-22s adaptive at weight %u: latency within 5%% of always-poll "
		       "(%.3fx): %s\n", "", opt_weight, ad->mean_lat / ap->mean_lat,
		       ad->mean_lat <= ap->mean_lat * 1.05 ? "met" : "MISSED");
	if (!strcmp(t->name, "heavy-tailed") || !strcmp(t->name, "slow"))
		printf("%-22s adaptive at weight %u: poll CPU at most half of kvm's "
		       "(%s): %s\n", "", opt_weight,
		       rtxt(r1, sizeof(r1), ratio_of(ad->poll_per_halt, kv->poll_per_halt), 3,
			    "x"),
		       ad->poll_per_halt <= kv->poll_per_halt * 0.5 ? "met" : "MISSED");
	return v;
}

/* The poll parameters a VM gets when it sets none (a vCPU's defaults). */
static void default_params(struct vsched_poll_params *out)
{
	struct vsched_vm *vm;
	if (vsched_vm_create(NULL, &vm))
		abort();
	out->size = sizeof(*out);
	if (vsched_vm_get_poll(vm, out))
		abort();
	vsched_vm_destroy(vm);
}

/* The policies replayed (the enum above) on a trace: adaptive's wake cost
 * `c_wake` and sleep CPU `c_sleep` as calibrated (the engine measures the
 * latter itself); adaptive-dflt and the budgets start from a vCPU's
 * defaults on halt traces and from a waiter's on waiter-style ones. */
static void setup_pols(struct pol *pols, const struct trace *t, double c_wake,
		       double c_sleep)
{
	const uint64_t max = 200000;
	static char names[NPOL][24];

	memset(pols, 0, NPOL * sizeof(*pols));
	for (int k = 0; k < NPOL; k++)
		pols[k].name = names[k];
	snprintf(names[P_NONE], sizeof(names[0]), "%s", vsched_poll_policy_name(VSCHED_POLL_NONE));
	snprintf(names[P_ALWAYS], sizeof(names[0]), "always-poll");
	snprintf(names[P_KVM], sizeof(names[0]), "%s", vsched_poll_policy_name(VSCHED_POLL_KVM));
	snprintf(names[P_KVM_RESET], sizeof(names[0]), "%s-reset",
		 vsched_poll_policy_name(VSCHED_POLL_KVM));
	snprintf(names[P_ADAPTIVE], sizeof(names[0]), "%s",
		 vsched_poll_policy_name(VSCHED_POLL_ADAPTIVE));
	snprintf(names[P_ADAPTIVE_DFLT], sizeof(names[0]), "%s-dflt",
		 vsched_poll_policy_name(VSCHED_POLL_ADAPTIVE));
	snprintf(names[P_QEMU], sizeof(names[0]), "qemu");
	vsched_poll_defaults(VSCHED_POLL_NONE, max, &pols[P_NONE].p);
	vsched_poll_defaults(VSCHED_POLL_FIXED, max, &pols[P_ALWAYS].p);
	vsched_poll_defaults(VSCHED_POLL_KVM, max, &pols[P_KVM].p);
	vsched_poll_defaults(VSCHED_POLL_KVM, max, &pols[P_KVM_RESET].p);
	pols[P_KVM_RESET].p.shrink = 0;
	vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, max, &pols[P_ADAPTIVE].p);
	pols[P_ADAPTIVE].p.wake_cost_ns = (uint64_t)c_wake;
	pols[P_ADAPTIVE].p.latency_weight = opt_weight;
	pols[P_ADAPTIVE].p.sleep_cpu_ns = (uint64_t)c_sleep;
	if (opt_decay >= 0)
		pols[P_ADAPTIVE].p.decay_shift = (unsigned)opt_decay;
	if (waiter_style(t))
		vsched_poll_defaults_waiter(VSCHED_POLL_ADAPTIVE, &pols[P_ADAPTIVE_DFLT].p);
	else
		default_params(&pols[P_ADAPTIVE_DFLT].p);
	/* The replay: what the engine measures when the defaults leave them
	 * 0, a sleep's CPU and (posts and kicks: a vCPU's wakes) the wakeup's
	 * latency. --live leaves them 0: the engine measures them itself. */
	if (!opt_live && !pols[P_ADAPTIVE_DFLT].p.sleep_cpu_ns)
		pols[P_ADAPTIVE_DFLT].p.sleep_cpu_ns = (uint64_t)c_sleep;
	if (!opt_live && !pols[P_ADAPTIVE_DFLT].p.wake_cost_ns)
		pols[P_ADAPTIVE_DFLT].p.wake_cost_ns = (uint64_t)c_wake;
	pols[P_ADAPTIVE_DFLT].p.cpu_budget_pct = opt_budget;
	for (int k = P_KNOB0; k < P_FIXED0; k++) {
		snprintf(names[k], sizeof(names[0]), "%s-b%u",
			 vsched_poll_policy_name(VSCHED_POLL_ADAPTIVE), knob_pct[k - P_KNOB0]);
		pols[k].p = pols[P_ADAPTIVE_DFLT].p;
		pols[k].p.cpu_budget_pct = knob_pct[k - P_KNOB0];
	}
	/* QEMU's window lives in the bench; its vsched params are unused */
	vsched_poll_defaults(VSCHED_POLL_NONE, 0, &pols[P_QEMU].p);
	pols[P_QEMU].qemu = true;
	pols[P_QEMU].q = (struct qemu_poll){ .max_ns = QEMU_POLL_MAX_NS };
	for (int k = P_FIXED0; k < P_NEW0; k++) {
		snprintf(names[k], sizeof(names[0]), "%s-%uus",
			 vsched_poll_policy_name(VSCHED_POLL_FIXED),
			 (unsigned)fixed_us[k - P_FIXED0]);
		vsched_poll_defaults(VSCHED_POLL_FIXED, fixed_us[k - P_FIXED0] * 1000,
				     &pols[k].p);
	}
	for (int k = P_NEW0; k < NPOL; k++) {
		unsigned policy = VSCHED_POLL_ADAPTIVE + 1 + (unsigned)(k - P_NEW0);
		snprintf(names[k], sizeof(names[0]), "%s", vsched_poll_policy_name(policy));
		vsched_poll_defaults(policy, max, &pols[k].p);
	}
}

static int run_policy(void)
{
	static struct trace tr[MAX_TRACES];
	static struct outcome res[MAX_TRACES][NPOL];
	struct verdict ver[MAX_TRACES];
	double c_poll, c_wake, c_sleep;
	struct pol pols[NPOL];
	struct vsched_poll_params chk;
	struct vsched_poll_state st;

	/* The options the replay's parameters take, checked by the library's
	 * own rule (vsched_poll_init() refuses what the engine would). */
	vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &chk);
	chk.latency_weight = opt_weight;
	chk.cpu_budget_pct = opt_budget;
	if (opt_decay >= 0)
		chk.decay_shift = (unsigned)opt_decay;
	if (vsched_poll_init(&chk, &st)) {
		fprintf(stderr, "policy: the library refuses these parameters: --decay-shift "
			"is 0-15, --budget 0-10000 (%% of the incumbent's CPU)\n");
		return 2;
	}
	int ntr = load_traces(tr);
	if (ntr < 0)
		return 2;
	if (!ntr) {
		fprintf(stderr, "no traces\n");
		return 1;
	}
	calibrate(&c_poll, &c_wake, &c_sleep);
	const double live_s = opt_quick ? 0.2 : 1.0;
	for (int i = 0; i < ntr; i++) {
		setup_pols(pols, &tr[i], c_wake, c_sleep);
		if (opt_live && !opt_json)
			printf("\n%s: --live replays the first %zu of %zu halts (%.1f s a "
			       "policy)\n", tr[i].name, live_halts(&tr[i], live_s), tr[i].n,
			       live_s);
		for (int k = 0; k < NPOL; k++)
			res[i][k] = opt_live ? live_run(&pols[k], &tr[i], live_s)
					     : replay(&pols[k], &tr[i], c_poll, c_wake, c_sleep);
		ver[i] = print_trace(&tr[i], pols, res[i]);
	}
	if (!opt_json) {
		int f_ok = 0, p_ok = 0, j_ok = 0, d_ok = 0, k_ok = 0;
		printf("\npolicy summary (lat: mean latency us; CPU: us per halt, polls and "
		       "sleeps; inc: the incumbent, qemu for waiter-style io-* traces, kvm for "
		       "halt traces; dflt: adaptive-dflt's CPU, p50 and mean latency over the "
		       "incumbent's; knob: fixed windows 5%% better on both than the default "
		       "or a budget; LxC, J, frontier: adaptive at weight %u against the "
		       "incumbent, issue 18's goals)\n", opt_weight);
		printf("%-22s %-4s %15s %15s %22s %4s %8s %7s %s\n", "trace", "inc",
		       "dflt lat/CPU", "inc lat/CPU", "dflt CPU/p50/mean", "knob", "LxC/inc",
		       "J/inc", "frontier");
		for (int i = 0; i < ntr; i++) {
			const int inc = incumbent(&tr[i]);
			const struct outcome *ad = &res[i][P_ADAPTIVE], *kv = &res[i][inc];
			const struct outcome *df = &res[i][P_ADAPTIVE_DFLT];
			const struct verdict *v = &ver[i];
			char fr[64] = "met";
			if (v->dominator >= 0)
				snprintf(fr, sizeof(fr), "MISSED %s %.2fx/%.2fx",
					 pols[v->dominator].name, v->dom_lat, v->dom_cpu);
			double ja = ad->cpu_per_halt + opt_weight * ad->mean_lat;
			double jk = kv->cpu_per_halt + opt_weight * kv->mean_lat;
			char r1[32], r2[32], r3[32], r4[32], r5[32];
			printf("%-22s %-4s %6.2f/%7.2f %6.2f/%7.2f %6s/%6s/%7s%s %4d "
			       "%7s%s %6s%s %s\n",
			       tr[i].name, pols[inc].name, df->mean_lat / 1e3,
			       df->cpu_per_halt / 1e3, kv->mean_lat / 1e3,
			       kv->cpu_per_halt / 1e3, rtxt(r1, sizeof(r1), v->dflt_cpu, 2, ""),
			       rtxt(r2, sizeof(r2), v->dflt_p50, 2, ""),
			       rtxt(r3, sizeof(r3), v->dflt_mean, 2, "x"),
			       v->dflt_ok ? " " : "!",
			       v->knob_dominated, rtxt(r4, sizeof(r4), v->product, 3, ""),
			       v->product_ok ? " " : "!", rtxt(r5, sizeof(r5), ratio_of(ja, jk), 3, ""),
			       ja <= jk * 1.001 ? " " : "!",
			       fr);
			j_ok += ja <= jk * 1.001;
			f_ok += v->dominator < 0;
			p_ok += v->product_ok;
			d_ok += v->dflt_ok;
			k_ok += !v->knob_dominated;
		}
		printf("policy goals: adaptive-dflt within 1.05x of the incumbent on CPU and "
		       "p50 latency on %d of %d traces; no fixed window 5%% better on both "
		       "than the default or a budget on %d of %d; at weight %u: frontier "
		       "met on %d of %d, latency x CPU <= the incumbent's on %d of %d, J <= "
		       "the incumbent's on %d of %d\n", d_ok, ntr, k_ok, ntr, opt_weight, f_ok,
		       ntr, p_ok, ntr, j_ok, ntr);
	}
	for (int i = 0; i < ntr; i++)
		free(tr[i].d);
	return 0;
}

const struct bench bench_policy = {
	.name = "policy",
	.desc = "halt and waiter traces replayed through every poll policy",
	.run = run_policy,
	.in_all = true,
	.usage = "[--trace FILE] [--family PREFIX] [--files-only] [--wake-ns N] "
		 "[--polled-ns N] [--sleep-cpu-ns N] [--budget N] [--latency-weight N] "
		 "[--decay-shift N] [--seed N] [--live]",
	.option = policy_option,
};
