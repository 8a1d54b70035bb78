/* SPDX-License-Identifier: MIT */
/* Poll policies as pure functions: the kvm policy reproduces Linux's
 * grow/shrink sequence; adaptive follows the halt distribution. */
#include <limits.h>

#include "common.h"

/* lib/poll.c's cadence: past a sleeper's first 64 halts ADAPTIVE prices
 * its candidates on one halt in this many (doc/policies.md). */
#define CHOOSE_EVERY 16

static uint64_t halt(const struct vsched_poll_params *p,
		     struct vsched_poll_state *s, uint64_t halt_ns, bool valid)
{
	uint64_t w = vsched_poll_window(p, s);
	assert_int_equal(vsched_poll_update(p, s, w, halt_ns, valid), 0);
	return vsched_poll_window(p, s);
}

/* A halt whose wakeup comes `d` ns in, as the engine reports it: polled
 * when the window covers it, else slept, and the sleep adds wake_cost. */
static uint64_t wake_at(const struct vsched_poll_params *p,
			struct vsched_poll_state *s, uint64_t d)
{
	const uint64_t wc = p->wake_cost_ns ? p->wake_cost_ns : VSCHED_POLL_WAKE_COST_NS;
	uint64_t w = vsched_poll_window(p, s);
	assert_int_equal(vsched_poll_update(p, s, w, d <= w ? d : d + wc, true), 0);
	return vsched_poll_window(p, s);
}

static void test_kvm_sequence(void **state)
{
	struct vsched_poll_params p;
	struct vsched_poll_state s;
	(void)state;

	/* Linux >= 6.4 defaults: max 200 us, grow x2 from 10 us, shrink /2. */
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_KVM, 200000, &p), 0);
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	assert_int_equal(vsched_poll_window(&p, &s), 0);
	/* Short halts grow it: 0 -> grow_start -> x2 ... */
	assert_int_equal(halt(&p, &s, 5000, true), 10000);
	assert_int_equal(halt(&p, &s, 15000, true), 20000);
	/* A halt the window covered changes nothing. */
	assert_int_equal(halt(&p, &s, 15000, true), 20000);
	assert_int_equal(halt(&p, &s, 30000, true), 40000);
	assert_int_equal(halt(&p, &s, 50000, true), 80000);
	assert_int_equal(halt(&p, &s, 90000, true), 160000);
	/* Grows past the maximum, and is clamped to it at the next halt. */
	assert_int_equal(s.window_ns, 160000);
	assert_int_equal(halt(&p, &s, 170000, true), 200000);
	assert_int_equal(s.window_ns, 320000);
	/* A halt longer than the maximum shrinks: 200 -> 100 -> 50 -> 25 ->
	 * 12.5 -> below grow_start: 0. */
	assert_int_equal(halt(&p, &s, 300000, true), 100000);
	assert_int_equal(halt(&p, &s, 300000, true), 50000);
	assert_int_equal(halt(&p, &s, 300000, true), 25000);
	assert_int_equal(halt(&p, &s, 300000, true), 12500);
	assert_int_equal(halt(&p, &s, 300000, true), 0);
	/* With no window, a long halt leaves it at 0. */
	assert_int_equal(halt(&p, &s, 300000, true), 0);
	/* An invalid wakeup shrinks even when short. */
	assert_int_equal(halt(&p, &s, 1000, true), 10000);
	assert_int_equal(halt(&p, &s, 1000, true), 10000);
	assert_int_equal(halt(&p, &s, 1000, false), 0);

	/* shrink = 0 (Linux before 6.4): a long halt resets to 0. */
	p.shrink = 0;
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	assert_int_equal(halt(&p, &s, 5000, true), 10000);
	assert_int_equal(halt(&p, &s, 15000, true), 20000);
	assert_int_equal(halt(&p, &s, 500000, true), 0);

	/* max 0 turns polling off. */
	p.max_ns = 0;
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	assert_int_equal(halt(&p, &s, 5000, true), 0);
}

static void test_none_fixed(void **state)
{
	struct vsched_poll_params p;
	struct vsched_poll_state s;
	(void)state;
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_NONE, 200000, &p), 0);
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	assert_int_equal(halt(&p, &s, 5000, true), 0);
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_FIXED, 50000, &p), 0);
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	assert_int_equal(vsched_poll_window(&p, &s), 50000);
	assert_int_equal(halt(&p, &s, 900000, true), 50000);
}

static void test_adaptive_follows_distribution(void **state)
{
	struct vsched_poll_params p;
	struct vsched_poll_state s;
	(void)state;
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &p), 0);
	/* The knob turned to KVM's rate (a sleep worth 4 x its 50 us wakeup),
	 * its CPU all but free: the latency-buying objective. */
	p.latency_weight = 4;
	p.sleep_cpu_ns = 1;
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	/* No poll before it has data. */
	assert_int_equal(vsched_poll_window(&p, &s), 0);
	/* Fast wakeups: the window covers them. No longer halt has been seen,
	 * so every window from theirs up costs the same by the histogram, and
	 * it keeps the largest, as kvm would (it started at the maximum). */
	for (int i = 0; i < 200; i++)
		wake_at(&p, &s, 5000);
	uint64_t w = vsched_poll_window(&p, &s);
	assert_true(w >= 131072 && w <= 200000);
	/* Slow wakeups (2 ms, well past the maximum): stop polling. */
	for (int i = 0; i < 200; i++)
		wake_at(&p, &s, 2000000);
	assert_int_equal(vsched_poll_window(&p, &s), 0);
	/* Back to fast: it comes back, learning from the slept halts with
	 * the wakeup cost taken out; the slow halts it still remembers make
	 * larger windows dearer, so it covers the fast ones and not much
	 * more. */
	for (int i = 0; i < 400; i++)
		wake_at(&p, &s, 5000);
	w = vsched_poll_window(&p, &s);
	assert_true(w >= 5000 && w <= 16384);
	/* Bimodal 3 us / 2 ms: cover the fast mode only. */
	for (int i = 0; i < 400; i++)
		wake_at(&p, &s, i % 2 ? 3000 : 2000000);
	w = vsched_poll_window(&p, &s);
	assert_true(w >= 3000 && w <= 8192);
	/* If an avoided sleep were worth (almost) nothing, never poll (the
	 * budget 0: the least CPU). */
	p.latency_weight = 0;
	p.cpu_budget_pct = 0;
	/* (past its first 64 halts the budget rule prices its candidates on
	 * one halt in CHOOSE_EVERY: these loops run that many halts of the
	 * same bimodal mix, so that one pricing sees the new params) */
	for (int i = 0; i < CHOOSE_EVERY; i++)
		w = halt(&p, &s, i % 2 ? 3000 : 2000000, true);
	assert_int_equal(w, 0);
	/* A sleep's CPU taken as 5 us before the engine has measured one:
	 * polling the 3 us half saves 2 us a halt there and wastes the window
	 * on every 2 ms halt, so the least CPU is sleeping. */
	p.sleep_cpu_ns = 0;
	for (int i = 0; i < CHOOSE_EVERY; i++)
		w = halt(&p, &s, i % 2 ? 3000 : 2000000, true);
	assert_int_equal(w, 0);
	/* With sleeps of 20 us it polls the fast half. */
	p.sleep_cpu_ns = 20000;
	for (int i = 0; i < CHOOSE_EVERY; i++)
		w = halt(&p, &s, i % 2 ? 3000 : 2000000, true);
	assert_true(w >= 3000 && w <= 8192);
}

/* xorshift64, and a geometric delay in steps of `step` ns with mean about
 * `mean` ns: memoryless like an exponential, in integers. */
static uint64_t rng_state = 88172645463325252ull;

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 32);
}

static uint64_t geometric(uint64_t mean, uint64_t step)
{
	uint64_t k = 1, q = (step << 32) / (mean + step);
	while (rnd() >= q)
		k++;
	return k * step;
}

/* Where J (poll CPU + weighted latency) is flat, adaptive takes the window
 * with the lower latency x CPU, and between equals the larger one
 * (doc/policies.md). Wake cost 12 us, weight 4: a sleep is worth 48 us. */
static void test_adaptive_flat_objective(void **state)
{
	struct vsched_poll_params p;
	struct vsched_poll_state s;
	unsigned slept = 0;
	uint64_t wsum = 0;
	(void)state;
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &p), 0);
	p.wake_cost_ns = 12000;
	p.latency_weight = 4;
	p.sleep_cpu_ns = 1;
	/* Exponential, mean 30 us: the hazard (1/30 us) stays above 1/48 us,
	 * so J says poll through everything. Halts beyond 131 us are about 1
	 * in 80, too rare for the histogram to see their bucket as more than
	 * noise; the window still covers them (the old choice, the smallest
	 * window covering what was seen, slept through 4.6% of the halts). */
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	for (int i = 0; i < 20000; i++) {
		uint64_t d = geometric(30000, 500);
		slept += d > vsched_poll_window(&p, &s);
		wake_at(&p, &s, d);
	}
	assert_true(slept <= 200); /* <= 1% */
	/* Bimodal, 60% exponential at 5 us, 40% 1-3 ms: J is lowest near
	 * 12 us and within 1/16 of a sleep of it from about 6 us; the smaller
	 * windows poll less for a few more sleeps (lower latency x CPU). */
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	for (int i = 0; i < 20000; i++) {
		uint64_t d = rnd() % 10 < 6 ? geometric(5000, 250)
					    : 1000000 + rnd() % 2000000;
		wsum += vsched_poll_window(&p, &s);
		wake_at(&p, &s, d);
	}
	assert_true(wsum / 20000 >= 4096 && wsum / 20000 <= 10000);
}

/* The budget 0 is CPU-neutral: over any distribution of halts its poll
 * CPU plus its sleeps' CPU is no more than a plain sleeper's (every halt a
 * sleep), and it polls wherever that is cheaper. Each halt is charged as
 * the engine charges it: polled to its wake (d <= W) or W of polling plus
 * one sleep of `sc` CPU. */
static void test_adaptive_cpu_neutral(void **state)
{
	static const struct { uint64_t mean, step, sc; bool polls; } fam[] = {
		{ 2000, 100, 20000, true },    /* short, dear sleeps: poll */
		{ 5000, 250, 20000, true },
		{ 50000, 2500, 5000, false },  /* long, cheap sleeps: sleep */
		{ 10000, 500, 30000, true },   /* the loaded host's 30 us sleeps */
		{ 300000, 10000, 30000, false },
	};
	(void)state;
	for (size_t f = 0; f < sizeof(fam) / sizeof(fam[0]); f++) {
		struct vsched_poll_params p;
		struct vsched_poll_state s;
		uint64_t cpu = 0, never = 0, polled = 0;
		assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &p), 0);
		assert_int_equal(p.latency_weight, 0);
		assert_int_equal(p.cpu_budget_pct, 100);
		p.cpu_budget_pct = 0;
		p.sleep_cpu_ns = fam[f].sc;
		assert_int_equal(vsched_poll_init(&p, &s), 0);
		for (int i = 0; i < 20000; i++) {
			uint64_t d = geometric(fam[f].mean, fam[f].step);
			uint64_t w = vsched_poll_window(&p, &s);
			cpu += d <= w ? d : w + fam[f].sc;
			polled += d <= w;
			never += fam[f].sc;
			wake_at(&p, &s, d);
		}
		print_message("mean %llu us, sleep %llu us: CPU %.3fx never polling, "
			      "%llu of 20000 polled\n",
			      (unsigned long long)fam[f].mean / 1000,
			      (unsigned long long)fam[f].sc / 1000,
			      (double)cpu / (double)never, (unsigned long long)polled);
		/* The histogram's estimate, not an oracle: within 2%. */
		assert_true(cpu <= never + never / 50);
		if (fam[f].polls)
			assert_true(polled > 20000 / 4 && cpu < never - never / 10);
		else
			assert_true(polled < 20000 / 20);
	}
}

/* One replay of n halts drawn by `draw` through policy p, charged as in
 * test_adaptive_cpu_neutral; slept counts the halts that slept (each one a
 * sleeping wakeup's latency). */
struct replayed {
	uint64_t cpu, slept;
};

static struct replayed replay_family(const struct vsched_poll_params *p, int fam,
				     uint64_t seed)
{
	struct vsched_poll_state s;
	struct replayed r = { 0, 0 };
	rng_state = seed;
	assert_int_equal(vsched_poll_init(p, &s), 0);
	for (int i = 0; i < 20000; i++) {
		uint64_t d;
		switch (fam) {
		case 0: /* bimodal: 3 us, or 1-3 ms */
			d = rnd() % 10 < 7 ? geometric(3000, 100) : 1000000 + rnd() % 2000000;
			break;
		case 1: /* cycles: four 5 us halts, then one of 1 ms */
			d = i % 5 == 4 ? 1000000 : 5000;
			break;
		case 2: /* periodic 60 us, +- 5% */
			d = 57000 + rnd() % 6000;
			break;
		case 3: /* exponential, mean 30 us */
			d = geometric(30000, 500);
			break;
		default: /* exponential, mean 300 us */
			d = geometric(300000, 5000);
			break;
		}
		uint64_t w = vsched_poll_window(p, &s);
		r.cpu += d <= w ? d : w + p->sleep_cpu_ns;
		r.slept += d > w;
		assert_int_equal(vsched_poll_update(p, &s, w, d <= w ? d : d + p->wake_cost_ns,
						    true), 0);
	}
	return r;
}

/* The default (budget 100) against its incumbent, KVM's grow/shrink with
 * the same parameters, on the same halts (issue 23): CPU (polls and
 * sleeps) within 5% of KVM's and p50 latency no worse on every family, and fewer sleeps where the history predicts the wakeups (the
 * bimodal and cyclic families, where KVM's window resets after each long
 * halt), with less CPU too on the bimodal one. The wakeup 12 us, a sleep's CPU 5 us; fixed seeds, no clock. */
static void test_adaptive_dominates_incumbent(void **state)
{
	(void)state;
	for (int fam = 0; fam < 5; fam++) {
		struct vsched_poll_params a, k;
		assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &a), 0);
		assert_int_equal(vsched_poll_defaults(VSCHED_POLL_KVM, 200000, &k), 0);
		a.wake_cost_ns = k.wake_cost_ns = 12000;
		a.sleep_cpu_ns = k.sleep_cpu_ns = 5000;
		struct replayed ra = replay_family(&a, fam, 0x5eed + (uint64_t)fam);
		struct replayed rk = replay_family(&k, fam, 0x5eed + (uint64_t)fam);
		print_message("family %d: CPU %.3fx kvm's, sleeps %llu against %llu\n", fam,
			      (double)ra.cpu / (double)rk.cpu, (unsigned long long)ra.slept,
			      (unsigned long long)rk.slept);
		assert_true(ra.cpu <= rk.cpu + rk.cpu / 20);
		/* p50 latency: a sleeping wakeup's only where most halts slept */
		assert_true(ra.slept <= 10000 || rk.slept > 10000);
		/* and the mean, within 10% of KVM's sleeps (exponential 300 us
		 * is memoryless: 5.3% more sleeps for half KVM's CPU) */
		assert_true(ra.slept <= rk.slept + rk.slept / 10 + 20);
		if (fam <= 1) /* predictable: at least 10% fewer sleeps */
			assert_true(ra.slept < rk.slept - rk.slept / 10);
		if (fam == 0) /* and, on bimodal, at least 5% less CPU */
			assert_true(ra.cpu < rk.cpu - rk.cpu / 20);
		/* Budget 50 and 0 spend less: never more than the default,
		 * and at most 80% of KVM's (the least CPU the histogram
		 * finds, where half of KVM's is out of reach). */
		a.cpu_budget_pct = 50;
		struct replayed r50 = replay_family(&a, fam, 0x5eed + (uint64_t)fam);
		a.cpu_budget_pct = 0;
		struct replayed r0 = replay_family(&a, fam, 0x5eed + (uint64_t)fam);
		print_message("  budget 50: CPU %.3fx kvm's; budget 0: %.3fx\n",
			      (double)r50.cpu / (double)rk.cpu, (double)r0.cpu / (double)rk.cpu);
		assert_true(r50.cpu <= ra.cpu + ra.cpu / 50 && r50.cpu <= rk.cpu / 5 * 4);
		assert_true(r0.cpu <= ra.cpu + ra.cpu / 50);
	}
}

/* Invalid wakeups (a wake that found nothing to do) are charged: what
 * they polled, or their window and a sleep, counts in the policy's CPU
 * and in its incumbent's, and the window is chosen again after each. Short
 * halts (Pareto from 2 us, alpha 2) teach a window; every 200 halts a burst
 * of 50 invalid wakeups ~300 us in follows, which KVM shrinks through and
 * which a window kept from the short halts polls in vain. Charged as the
 * replay charges (test_adaptive_cpu_neutral): CPU at most 1.25x KVM's
 * (1.13x; f1898c2, which polled the bursts at the learnt window and
 * charged them nowhere: 4.03x), and the valid halts slept through within
 * 10% of KVM's. Wake 12 us, sleep CPU 5 us, max 500 us. */
static void test_adaptive_invalid_charged(void **state)
{
	struct vsched_poll_params pol[2];
	uint64_t cpu[2], slept[2];
	(void)state;
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 500000, &pol[0]), 0);
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_KVM, 500000, &pol[1]), 0);
	for (int k = 0; k < 2; k++) {
		struct vsched_poll_state s;
		pol[k].wake_cost_ns = 12000;
		pol[k].sleep_cpu_ns = 5000;
		assert_int_equal(vsched_poll_init(&pol[k], &s), 0);
		rng_state = 0x5eed0042;
		cpu[k] = slept[k] = 0;
		for (int i = 0; i < 20000; i++) {
			const bool valid = i % 200 >= 50;
			uint64_t d;
			if (valid) { /* 2 us / sqrt(u), u in (0, 1]: Pareto, alpha 2 */
				double u = ((double)rnd() + 1.0) / 4294967296.0, r = 1.0;
				for (int n = 0; n < 40; n++) /* Newton: r -> sqrt(u) */
					r = (r + u / r) / 2;
				d = (uint64_t)(2000.0 / r);
			} else {
				d = geometric(300000, 5000);
			}
			uint64_t w = vsched_poll_window(&pol[k], &s);
			cpu[k] += d <= w ? d : w + 5000;
			slept[k] += valid && d > w;
			assert_int_equal(vsched_poll_update(&pol[k], &s, w,
							    d <= w ? d : d + 12000, valid),
					 0);
		}
	}
	print_message("CPU %.3fx kvm's; valid halts slept %llu against %llu\n",
		      (double)cpu[0] / (double)cpu[1], (unsigned long long)slept[0],
		      (unsigned long long)slept[1]);
	assert_true(cpu[0] <= cpu[1] + cpu[1] / 4);
	assert_true(slept[0] <= slept[1] + slept[1] / 10 + 20);
}

/* The default (budget 100) prices its candidates in one walk up the
 * buckets that builds the histogram's prefix sums as it goes, and max_ns,
 * the last candidate, from the sums where the walk stopped. Wherever max_ns
 * lies (below the first midpoint, between a bucket's start and midpoint, at
 * a midpoint, between a midpoint and the edge, at an edge), halts at 95% of
 * it fall in its own bucket, where no smaller candidate covers any of them
 * by the histogram: with sleeps far dearer than polls on every side, the
 * window is max_ns. Past every finite bucket (10 s), 1 ms halts are
 * covered. */
static void test_adaptive_max_anywhere(void **state)
{
	static const uint64_t max[] = { 200, 20000, 24576, 30000, 32768, 10000000000ull };
	(void)state;
	for (size_t i = 0; i < sizeof(max) / sizeof(max[0]); i++) {
		struct vsched_poll_params p;
		struct vsched_poll_state s;
		const bool huge = max[i] > 2000000;
		const uint64_t d = huge ? 1000000 : max[i] - max[i] / 20;
		assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, max[i], &p), 0);
		p.wake_cost_ns = 12000;
		p.sleep_cpu_ns = 100000000; /* 100 ms: any poll is cheaper */
		assert_int_equal(vsched_poll_init(&p, &s), 0);
		for (int k = 0; k < 400; k++)
			wake_at(&p, &s, d);
		uint64_t w = vsched_poll_window(&p, &s);
		print_message("max_ns %llu, halts of %llu ns: window %llu\n",
			      (unsigned long long)max[i], (unsigned long long)d,
			      (unsigned long long)w);
		if (huge)
			assert_true(w >= d && w <= max[i]);
		else
			assert_int_equal(w, max[i]);
	}
}

/* Review (issue 18): latency_weight x wake_cost_ns wrapped before it was
 * clamped, so a huge (accepted) sleep cost read as a free sleep and the
 * policy stopped polling: weight 2^31 x 2^33 ns is 0 mod 2^64. */
static void test_adaptive_huge_sleep_cost(void **state)
{
	struct vsched_poll_params p;
	struct vsched_poll_state s;
	(void)state;
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 200000, &p), 0);
	p.latency_weight = 1u << 31;
	p.wake_cost_ns = UINT64_C(1) << 33;
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	for (int i = 0; i < 200; i++)
		assert_int_equal(vsched_poll_update(&p, &s, vsched_poll_window(&p, &s),
						    5000, true), 0);
	/* Every halt is 5 us and a sleep costs more than anything: poll. */
	assert_true(vsched_poll_window(&p, &s) >= 5000);
}

/* The kvm policy's growth saturates (issue 22): a huge grow factor and
 * maximum wrapped the window (10 us x 2^32 x 2^32) to a small value. */
static void test_kvm_grow_saturates(void **state)
{
	struct vsched_poll_params p;
	struct vsched_poll_state s;
	uint64_t prev = 0, w;
	(void)state;
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_KVM, UINT64_MAX - 1, &p), 0);
	p.grow = UINT32_MAX;
	assert_int_equal(vsched_poll_init(&p, &s), 0);
	for (int i = 0; i < 4; i++) {
		/* Just longer than the window, shorter than the maximum: grow. */
		w = vsched_poll_window(&p, &s);
		w = halt(&p, &s, w < p.max_ns - 1 ? w + 1 : w, true);
		assert_true(w >= prev);
		prev = w;
	}
	assert_true(prev > UINT64_C(1) << 62);
}

static void test_poll_bad_input(void **state)
{
	struct vsched_poll_params p;
	struct vsched_poll_state s;
	(void)state;
	assert_int_equal(vsched_poll_defaults(99, 1, &p), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_defaults(0, 1, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_KVM, 1000, &p), 0);
	assert_int_equal(vsched_poll_init(NULL, &s), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_init(&p, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_update(NULL, &s, 0, 0, true), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_window(NULL, &s), 0);
	p.size = 3;
	assert_int_equal(vsched_poll_init(&p, &s), VSCHED_EINVAL);
	p.size = sizeof(p);
	p.policy = 7;
	assert_int_equal(vsched_poll_init(&p, &s), VSCHED_EINVAL);

	struct vsched_vm *vm = make_vm(NULL, 0);
	assert_int_equal(vsched_vm_set_poll(NULL, &p), VSCHED_EINVAL);
	assert_int_equal(vsched_vm_set_poll(vm, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vm_set_poll(vm, &p), VSCHED_EINVAL);
	assert_int_equal(vsched_vm_get_poll(NULL, &p), VSCHED_EINVAL);
	assert_int_equal(vsched_vm_get_poll(vm, NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_vm_get_poll(vm, &p), 0);
	assert_int_equal(p.policy, VSCHED_POLL_NONE); /* unchanged */
	vsched_poll_defaults(VSCHED_POLL_KVM, 123000, &p);
	assert_int_equal(vsched_vm_set_poll(vm, &p), 0);
	memset(&p, 0, sizeof(p));
	assert_int_equal(vsched_vm_get_poll(vm, &p), VSCHED_EINVAL); /* no size */
	p.size = sizeof(p);
	assert_int_equal(vsched_vm_get_poll(vm, &p), 0);
	assert_int_equal(p.policy, VSCHED_POLL_KVM);
	assert_int_equal(p.max_ns, 123000);
	vsched_vm_destroy(vm);
}

/* The names: every policy's round trip, the command lines' spellings, and
 * refusals; and every policy has all its steps (a row of poll.c's table
 * left out would crash here). */
static void test_policy_names(void **state)
{
	static const char *const spelled[] = { "none", "fixed", "kvm", "adaptive" };
	struct vsched_poll_params p;
	struct vsched_poll_state s;
	unsigned n = 0;
	(void)state;

	for (unsigned i = 0; i < VSCHED_POLL_NPOLICIES; i++) {
		const char *name = vsched_poll_policy_name(i);
		assert_non_null(name);
		assert_true(name[0] != '\0');
		assert_int_equal(vsched_poll_policy_parse(name), (int)i);
		assert_int_equal(vsched_poll_defaults(i, 20000, &p), 0);
		assert_int_equal(vsched_poll_init(&p, &s), 0);
		assert_true(vsched_poll_window(&p, &s) <= p.max_ns);
		assert_int_equal(vsched_poll_update(&p, &s, vsched_poll_window(&p, &s),
						    5000, true), 0);
		assert_int_equal(s.halts, 1);
	}
	/* The iteration the header promises ends at the count. */
	while (vsched_poll_policy_name(n))
		n++;
	assert_int_equal(n, VSCHED_POLL_NPOLICIES);
	/* The spellings vsched-vmm --poll and the benches have always used. */
	assert_int_equal(vsched_poll_policy_parse(spelled[0]), VSCHED_POLL_NONE);
	assert_int_equal(vsched_poll_policy_parse(spelled[1]), VSCHED_POLL_FIXED);
	assert_int_equal(vsched_poll_policy_parse(spelled[2]), VSCHED_POLL_KVM);
	assert_int_equal(vsched_poll_policy_parse(spelled[3]), VSCHED_POLL_ADAPTIVE);

	assert_null(vsched_poll_policy_name(VSCHED_POLL_NPOLICIES));
	assert_null(vsched_poll_policy_name(UINT_MAX));
	assert_int_equal(vsched_poll_policy_parse(NULL), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_policy_parse(""), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_policy_parse("KVM"), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_policy_parse("kvm "), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_policy_parse("adapt"), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_policy_parse("always-poll"), VSCHED_EINVAL);
	/* The count is the first number that is no policy. */
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_NPOLICIES, 20000, &p),
			 VSCHED_EINVAL);
	assert_int_equal(vsched_poll_defaults(VSCHED_POLL_ADAPTIVE, 20000, &p), 0);
	p.policy = VSCHED_POLL_NPOLICIES;
	assert_int_equal(vsched_poll_init(&p, &s), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_update(&p, &s, 0, 1000, true), VSCHED_EINVAL);
	assert_int_equal(vsched_poll_window(&p, &s), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kvm_sequence),
		cmocka_unit_test(test_none_fixed),
		cmocka_unit_test(test_adaptive_follows_distribution),
		cmocka_unit_test(test_adaptive_flat_objective),
		cmocka_unit_test(test_adaptive_huge_sleep_cost),
		cmocka_unit_test(test_kvm_grow_saturates),
		cmocka_unit_test(test_adaptive_cpu_neutral),
		cmocka_unit_test(test_adaptive_dominates_incumbent),
		cmocka_unit_test(test_adaptive_invalid_charged),
		cmocka_unit_test(test_adaptive_max_anywhere),
		cmocka_unit_test(test_poll_bad_input),
		cmocka_unit_test(test_policy_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
