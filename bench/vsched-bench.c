/* SPDX-License-Identifier: MIT */
/*
 * vsched-bench: microbenchmarks, each against a baseline measured in the
 * same run, reported as a ratio (median of the per-run ratios, min and max).
 *
 *   vsched-bench [--quick] [--json] [--runs N] [BENCH...options] [BENCH|all]
 *
 * One file per benchmark (bench/<name>.c, instr in request.c), each defining
 * one struct bench; the table below is the order they run and print in, and
 * the usage text. The shared statistics, JSON lines and helpers are bench.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static const struct bench *const benches[] = {
	&bench_request, &bench_wakeup, &bench_instr, &bench_overshoot,
	&bench_pmi,     &bench_idle,   &bench_hook,  &bench_scale,
	&bench_waiter,  &bench_timer,  &bench_policy, &bench_iothread,
	&bench_timedwait, &bench_fdsleep,
};
#define NBENCH (sizeof(benches) / sizeof(benches[0]))

static void usage(const char *prog, FILE *out)
{
	fprintf(out, "usage: %s [--help] [--quick] [--json] [--runs N]", prog);
	for (unsigned i = 0; i < NBENCH; i++)
		if (benches[i]->usage)
			fprintf(out, " %s", benches[i]->usage);
	fprintf(out, " [");
	for (unsigned i = 0; i < NBENCH; i++)
		fprintf(out, "%s|", benches[i]->name);
	fprintf(out, "all]\n");
	for (unsigned i = 0; i < NBENCH; i++)
		fprintf(out, "  %-10s %s%s\n", benches[i]->name, benches[i]->desc,
			benches[i]->in_all ? "" : " (not in all)");
}

/* A benchmark's own option at argv[i]: how many arguments it took, 0 if
 * none of them knows it. */
static int bench_option(int argc, char **argv, int i)
{
	for (unsigned k = 0; k < NBENCH; k++) {
		int n = benches[k]->option ? benches[k]->option(argc, argv, i) : 0;
		if (n)
			return n;
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *which = "all";
	bool named = false; /* a benchmark name was given ("all" is one) */
	for (int i = 1; i < argc; i++) {
		int n;
		if (!strcmp(argv[i], "--json"))
			opt_json = 1;
		else if (!strcmp(argv[i], "--quick"))
			opt_quick = 1;
		else if (!strcmp(argv[i], "--help")) {
			usage(argv[0], stdout);
			return 0;
		}
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			opt_runs = (int)opt_range("--runs", argv[++i], 1, MAX_RUNS);
		else if ((n = bench_option(argc, argv, i)))
			i += n - 1;
		else if (argv[i][0] != '-' && !named) {
			which = argv[i];
			named = true;
		}
		else if (argv[i][0] != '-') {
			fprintf(stderr, "vsched-bench: one benchmark a run (%s, then %s)\n",
				which, argv[i]);
			return 2;
		}
		else {
			usage(argv[0], stderr);
			return 2;
		}
	}
	unsigned ran = 0;
	for (unsigned i = 0; i < NBENCH; i++) {
		const struct bench *b = benches[i];
		if (!strcmp(which, b->name) || (b->in_all && !strcmp(which, "all"))) {
			int rc = b->run();
			if (rc)
				return rc;
			ran++;
		}
	}
	/* A name that is no benchmark (a typo) ran nothing: not a success. */
	if (!ran) {
		fprintf(stderr, "vsched-bench: no benchmark %s\n", which);
		usage(argv[0], stderr);
		return 2;
	}
	return 0;
}
