/* SPDX-License-Identifier: MIT */
/*
 * Seeded gap generators (bench.h): the halt-trace families of `policy` and
 * the message-gap families of `iothread` (whose seven families `policy`
 * also replays as waiter-style traces, so both judge the same shapes).
 */
#include <math.h>
#include <stdio.h>

#include "bench.h"

/* splitmix64: a uniform in (0, 1). */
double gap_u01(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static double gap_exp(uint64_t *s, double mean)
{
	return -mean * log(gap_u01(s));
}

/* Pareto with scale xm and shape alpha, capped at `cap`. */
static double gap_pareto(uint64_t *s, double xm, double alpha, double cap)
{
	double v = xm / pow(gap_u01(s), 1.0 / alpha);
	return v < cap ? v : cap;
}

/*
 * The I/O thread's families (issue 23): gaps between a consumer's last
 * message and the producer's next one.
 */
const struct gap_family io_families[] = {
	{ "io-exp-5us", GAP_EXP, 5000, 0, 0, 0 },
	{ "io-exp-50us", GAP_EXP, 50000, 0, 0, 0 },
	{ "io-exp-500us", GAP_EXP, 500000, 0, 0, 0 },
	/* half exp(mean 2 us), half 2 ms +- 10% */
	{ "io-bimodal-2us-2ms", GAP_BIMODAL, 0.5, 2000, 1800000, 2200000 },
	/* x_m 10 us, alpha 1.2 (mean 60 us before the cap), capped at 5 ms */
	{ "io-pareto-10us-a1.2", GAP_PARETO, 10000, 1.2, 5000000, 0 },
	{ "io-periodic-100us", GAP_PERIODIC, 100000, 0, 0, 0 },
	/* 100 gaps of exp(mean 10 us), then 100 of exp(mean 1 ms), in turn:
	 * shifts both ways, each phase long enough to learn */
	{ "io-phase-10us-1ms", GAP_PHASE, 10000, 1000000, 0, 100 },
};
const unsigned n_io_families = sizeof(io_families) / sizeof(io_families[0]);

void gap_fill(const struct gap_family *g, uint64_t seed, uint64_t *out, size_t n)
{
	uint64_t s = seed;

	for (size_t i = 0; i < n; i++) {
		double v;
		switch (g->kind) {
		case GAP_EXP:
			v = gap_exp(&s, g->a);
			break;
		case GAP_PARETO:
			v = gap_pareto(&s, g->a, g->b, g->c > 0 ? g->c : 1e10);
			break;
		case GAP_BIMODAL:
			v = gap_u01(&s) < g->a ? gap_exp(&s, g->b)
					       : g->c + (g->d - g->c) * gap_u01(&s);
			break;
		case GAP_PERIODIC:
			v = g->a * (0.95 + 0.1 * gap_u01(&s));
			break;
		case GAP_CYCLE:
			v = i % ((size_t)g->b + 1) == (size_t)g->b ? g->c : g->a;
			v *= 0.95 + 0.1 * gap_u01(&s);
			break;
		default: /* GAP_PHASE */
			v = gap_exp(&s, (i / (size_t)g->d) % 2 ? g->b : g->a);
			break;
		}
		out[i] = v < 100 ? 100 : (uint64_t)v;
	}
}
