/* SPDX-License-Identifier: MIT */
/* Poll policies: pure functions of (params, state). */
#include <string.h>

#include "abi.h"
#include "internal.h"

#define HIST_ONE (1u << 16)
/* Costs (a wakeup, a sleep's CPU, one halt's CPU in the sums) count up to
 * 2^32 ns, 4.3 s: the decayed sums stay below 2^32 x 2^16 x 2^15. */
#define COST_MAX (UINT64_C(1) << 32)
/* ADAPTIVE against its incumbent prices its candidates on one halt in
 * this many (lib/poll.c, adaptive_choose_budget()). */
#define CHOOSE_EVERY 16
#define CHOOSE_EARLY 64
#define BUCKET0_SHIFT 8 /* bucket 0: [0, 512); bucket i: [2^(8+i), 2^(9+i)) */

/* One policy: its name (the command lines' and the benches') and its three
 * steps, each a pure function of (params, state). init() fixes the state
 * after it was zeroed, window() is the window to poll for in the next halt,
 * update() learns from a halt. Indexed by enum vsched_poll_policy; the rows
 * are at the end of the policies' code. Adding a policy: a row, its steps,
 * VSCHED_POLL_NPOLICIES and test_poll (CONTRIBUTING.md). */
struct policy {
	const char *name;
	void (*init)(const struct vsched_poll_params *p,
		     struct vsched_poll_state *s);
	uint64_t (*window)(const struct vsched_poll_params *p,
			   const struct vsched_poll_state *s);
	void (*update)(const struct vsched_poll_params *p,
		       struct vsched_poll_state *s, uint64_t window_ns,
		       uint64_t halt_ns, bool valid);
};

static const struct policy policies[VSCHED_POLL_NPOLICIES];

int vsched_poll_defaults(unsigned policy, uint64_t max_ns,
			 struct vsched_poll_params *out)
{
	if (!out || policy >= VSCHED_POLL_NPOLICIES)
		return VSCHED_EINVAL;
	memset(out, 0, sizeof(*out));
	out->size = sizeof(*out);
	out->policy = policy;
	out->max_ns = policy == VSCHED_POLL_NONE ? 0 : max_ns;
	out->grow = 2;
	out->shrink = 2;
	out->grow_start_ns = 10000;
	out->wake_cost_ns = 0; /* measured by the engine */
	out->latency_weight = 0;
	out->decay_shift = 6;
	out->spin_pct = 25;
	out->cpu_budget_pct = 100;
	return 0;
}

int vsched_poll_defaults_waiter(unsigned policy, struct vsched_poll_params *out)
{
	int rc = vsched_poll_defaults(policy, VSCHED_POLL_WAITER_MAX_NS, out);
	if (rc)
		return rc;
	out->grow_start_ns = 4000;
	out->shrink = 0;
	out->wake_cost_ns = 10000;
	return 0;
}

/* The caller's parameters in our layout (the extensible-struct rule,
 * lib/abi.h), checked. */
bool vsched__poll_params_ok(const struct vsched_poll_params *p,
			    struct vsched_poll_params *n)
{
	if (!p || vsched__struct_in(n, sizeof(*n), p,
				    VSCHED__SIZE_TO(struct vsched_poll_params,
						    decay_shift)))
		return false;
	/* A struct of the first layout (no spin_pct, no budget: its size ends
	 * before them) gets the defaults, not 0. */
	if (p->size < VSCHED__SIZE_TO(struct vsched_poll_params, spin_pct))
		n->spin_pct = 25;
	if (p->size < VSCHED__SIZE_TO(struct vsched_poll_params, cpu_budget_pct))
		n->cpu_budget_pct = 100;
	return n->policy < VSCHED_POLL_NPOLICIES && n->decay_shift < 16 &&
	       n->spin_pct <= 100 && n->cpu_budget_pct <= VSCHED__POLL_BUDGET_MAX &&
	       n->contention <= VSCHED_CONTENTION_SAMPLED;
}

int vsched_poll_init(const struct vsched_poll_params *caller,
		     struct vsched_poll_state *s)
{
	struct vsched_poll_params n;

	if (!vsched__poll_params_ok(caller, &n) || !s)
		return VSCHED_EINVAL;
	memset(s, 0, sizeof(*s));
	policies[n.policy].init(&n, s);
	return 0;
}

uint64_t vsched_poll_window(const struct vsched_poll_params *caller,
			    const struct vsched_poll_state *s)
{
	struct vsched_poll_params n;

	if (!vsched__poll_params_ok(caller, &n) || !s)
		return 0;
	return vsched__poll_window(&n, s);
}

uint64_t vsched__poll_window(const struct vsched_poll_params *p,
			     const struct vsched_poll_state *s)
{
	if (p->policy >= VSCHED_POLL_NPOLICIES)
		return 0;
	return policies[p->policy].window(p, s);
}

/* Linux's grow_halt_poll_ns() and shrink_halt_poll_ns(): the window after
 * `w` grows or shrinks (the caller caps a grown one at max_ns). */
static uint64_t kvm_grown(const struct vsched_poll_params *p, uint64_t w)
{
	uint64_t val;
	if (!p->grow)
		return w;
	if (__builtin_mul_overflow(w, (uint64_t)p->grow, &val))
		val = UINT64_MAX; /* saturates; capped at max_ns after */
	return val < p->grow_start_ns ? p->grow_start_ns : val;
}

static uint64_t kvm_shrunk(const struct vsched_poll_params *p, uint64_t w)
{
	uint64_t val = p->shrink ? w / p->shrink : 0;
	return val < p->grow_start_ns ? 0 : val;
}

/* Linux's rule after a halt of halt_ns (poll plus sleep, as KVM measures
 * it) in window *w. */
static void kvm_step(const struct vsched_poll_params *p, uint64_t *w,
		     uint64_t halt_ns, bool valid)
{
	/* Linux clamps the window to the maximum before each halt. */
	if (*w > p->max_ns)
		*w = p->max_ns;
	if (!valid)
		*w = kvm_shrunk(p, *w);
	else if (!p->max_ns)
		*w = 0;
	else if (halt_ns <= *w)
		; /* polling covered it */
	else if (*w && halt_ns > p->max_ns)
		*w = kvm_shrunk(p, *w); /* long halt */
	else if (*w < p->max_ns && halt_ns < p->max_ns)
		*w = kvm_grown(p, *w); /* short halt, window too small */
}

static void kvm_update(const struct vsched_poll_params *p,
		       struct vsched_poll_state *s, uint64_t halt_ns, bool valid)
{
	kvm_step(p, &s->window_ns, halt_ns, valid);
}

/* The wakeup's latency: the parameter, or the default where none was
 * measured (the engine puts its measurement in the copy it passes). */
static uint64_t wake_cost(const struct vsched_poll_params *p)
{
	const uint64_t wc = p->wake_cost_ns ? p->wake_cost_ns : VSCHED_POLL_WAKE_COST_NS;
	return wc < COST_MAX ? wc : COST_MAX;
}

/* A sleep's CPU: the parameter, or the default where none was measured. */
static uint64_t sleep_cpu(const struct vsched_poll_params *p)
{
	const uint64_t sc = p->sleep_cpu_ns ? p->sleep_cpu_ns : VSCHED_POLL_SLEEP_CPU_NS;
	return sc < COST_MAX ? sc : COST_MAX;
}

static unsigned bucket_of(uint64_t ns)
{
	unsigned b;
	if (ns < (1u << (BUCKET0_SHIFT + 1)))
		return 0;
	b = 63u - (unsigned)__builtin_clzll(ns) - BUCKET0_SHIFT;
	return b < VSCHED_POLL_BUCKETS ? b : VSCHED_POLL_BUCKETS - 1;
}

/* One candidate window of the ADAPTIVE policy, with what the histogram
 * expects of it (in histogram units: halts x 2^16): the poll CPU it spends,
 * the weight of the halts it sleeps through, its cost J and its latency x
 * CPU. */
struct adaptive_cand {
	uint64_t w, cpu, slept, j, prod;
};

/*
 * With a fixed exchange rate (latency_weight non-zero), choose the window in
 * two steps.
 *
 * 1. Its expected cost per halt,
 *      J(W) = sum over halts of: D      if D <= W (polled: CPU D, no sleep)
 *                                W + B  if D >  W (poll wasted, then a sleep)
 *    with B = latency_weight x wake_cost_ns, the poll CPU one avoided sleep
 *    is worth. This is ski rental with a known distribution: keep polling
 *    while the expected remaining wait is below B. Candidates are 0 and each
 *    bucket's midpoint and upper edge up to max_ns; a bucket counts as
 *    covered by W when its upper edge is <= W, its halts taken at 3/4 of the
 *    edge; the last bucket is open-ended and never covered.
 *
 * 2. J is flat near its minimum, and a few dozen halts cannot tell apart
 *    windows whose J differs by a small fraction of B. Among the windows
 *    within B/16 per halt of the best J, take the one with the lowest
 *    expected latency x poll CPU, the scale-free measure (a polled wakeup's
 *    latency taken as 1/32 of a sleeping one's). Products within 1/8 of the
 *    lowest count as equal: then the window in force stays (mixing windows
 *    raises the product of the means), or else the largest is taken (what
 *    kvm would poll: a window beyond every halt seen costs nothing by the
 *    histogram, and the rare halt it catches is worth a whole sleep).
 *
 * O(buckets), no division: every candidate shares the same total.
 */
static uint64_t adaptive_choose_rate(const struct vsched_poll_params *p,
				     const struct vsched_poll_state *s, uint64_t total)
{
	struct adaptive_cand c[2 * VSCHED_POLL_BUCKETS];
	uint64_t below_cost = 0, above, jmax, low = UINT64_MAX;
	unsigned n = 0, best = 0, pick = 0;
	/* B, a sleep's cost: its CPU plus its weighted latency. Clamped so
	 * that the sums below cannot overflow (2^31 x 2^32); saturating, as
	 * a product that wraps would make sleeping look free. */
	const uint64_t sc = sleep_cpu(p);
	const uint64_t wc = wake_cost(p);
	const uint64_t wl = p->latency_weight > UINT64_MAX / wc
				    ? UINT64_MAX
				    : (uint64_t)p->latency_weight * wc;
	const uint64_t b = wl > UINT64_MAX - sc ? UINT64_MAX : wl + sc;
	const uint64_t lc = b < (UINT64_C(1) << 31) ? b : (UINT64_C(1) << 31);

	if (!total)
		return 0; /* no halt learnt: nothing says polling pays */
	above = total;
	/* W = 0: every halt sleeps. */
	c[n++] = (struct adaptive_cand){ 0, 0, total, 0, 0 };
	for (unsigned i = 0; i + 1 < VSCHED_POLL_BUCKETS; i++) {
		uint64_t edge = UINT64_C(1) << (BUCKET0_SHIFT + 1 + i);
		uint64_t lo = i ? edge / 2 : 0, mid = lo + (edge - lo) / 2;
		uint64_t half = s->hist[i] / 2;
		if (mid > p->max_ns)
			break;
		/* Half-way into bucket i: taking its halts as spread evenly,
		 * half of them are covered, at 3/4 of the way in on average. */
		c[n++] = (struct adaptive_cand){
			mid, below_cost + half * (lo + (mid - lo) / 2) + (above - half) * mid,
			above - half, 0, 0
		};
		if (edge > p->max_ns)
			break;
		/* All of bucket i covered, its halts at 3/4 of the edge. */
		below_cost += (uint64_t)s->hist[i] * (edge / 4 * 3);
		above -= s->hist[i];
		c[n++] = (struct adaptive_cand){ edge, below_cost + above * edge, above, 0, 0 };
	}
	for (unsigned i = 0; i < n; i++) {
		c[i].j = c[i].cpu + c[i].slept * lc;
		if (c[i].j < c[best].j)
			best = i;
	}
	/* The band, never above never polling (c[0]: every halt sleeps). */
	jmax = c[best].j + (lc >> 4) * total;
	if (jmax > c[0].j)
		jmax = c[0].j;
	/* Latency x CPU of the windows within the band (the others: out),
	 * both scaled by the decay (total is about 2^(16 + decay_shift)): at
	 * most 2^17 x 2^38. The window in force leaves the band only at
	 * B/16 + B/32 per halt above the best J (hysteresis: an estimate from
	 * 64 halts crosses the edge on noise, and a window that comes and
	 * goes mixes two windows' products). */
	for (unsigned i = 0; i < n; i++) {
		uint64_t edge = jmax + (c[i].w == s->window_ns ? (lc >> 5) * total : 0);
		if (edge > c[0].j)
			edge = c[0].j;
		c[i].prod = c[i].j > edge ? UINT64_MAX
					  : ((c[i].slept + (total >> 5)) >> p->decay_shift) *
						    (c[i].cpu >> p->decay_shift);
		if (c[i].prod < low)
			low = c[i].prod;
	}
	low += low >> 3;
	for (unsigned i = 0; i < n; i++) {
		if (c[i].prod > low)
			continue;
		if (c[i].w == s->window_ns)
			return c[i].w; /* the window in force stays */
		pick = i; /* the largest so far */
	}
	return c[pick].w;
}

/* ---- ADAPTIVE against the incumbent (latency_weight 0) ---- */

/* The histogram seen as a distribution: a bucket's halts spread evenly over
 * it (bucket 0: [0, 512), bucket i: [2^(8+i), 2^(9+i))); the last bucket
 * is open-ended and never covered. Its prefix sums, built as
 * adaptive_choose_budget() walks up its candidates: w[i], the weight of
 * the buckets below i, and c[i], the poll CPU they take (the sum of their
 * lengths), in histogram units (halts x 2^16): at most 2^31 x 2^21 at
 * decay_shift 15. */
struct hist_sums {
	uint64_t w[VSCHED_POLL_BUCKETS], c[VSCHED_POLL_BUCKETS];
};

/* The weight of the halts that end by x, and the poll CPU they take. O(1);
 * hs holds the sums up to x's bucket. */
static void cover(const struct vsched_poll_state *s, const struct hist_sums *hs,
		  uint64_t x, uint64_t *weight, uint64_t *cpu)
{
	unsigned i = bucket_of(x);
	if (i + 1 >= VSCHED_POLL_BUCKETS) { /* every finite bucket */
		*weight = hs->w[VSCHED_POLL_BUCKETS - 1];
		*cpu = hs->c[VSCHED_POLL_BUCKETS - 1];
		return;
	}
	/* bucket i spans 2^(8+i) ns (bucket 0: 2^9), so the share is a shift */
	const unsigned width = BUCKET0_SHIFT + (i ? i : 1);
	uint64_t lo = i ? UINT64_C(1) << width : 0;
	uint64_t part = ((uint64_t)s->hist[i] * (x - lo)) >> width;
	*weight = hs->w[i] + part;
	*cpu = hs->c[i] + part * (lo + (x - lo) / 2);
}

/* What window w costs over the histogram, given the weight of the halts
 * that end by w and the poll CPU they take (cover()): CPU (polls, and sc
 * per sleep) and latency (a polled wakeup taken as 1/32 of a sleeping one,
 * in units of the polled one: total + 31 x slept). */
struct budget_cost {
	double cpu, lat;
};

/* A sum of the histogram's (below 2^63: its counts are 32-bit) as a
 * double: the same value as (double)x, in one conversion instruction where
 * the unsigned one takes a test and a branch (x86-64). */
static inline double hdbl(uint64_t x)
{
	return (double)(int64_t)x;
}

/* `wsc`: the window plus a sleep's CPU, (double)w + (double)sc. */
static struct budget_cost window_cost(uint64_t total, uint64_t covered,
				      uint64_t cpu, double wsc)
{
	double slept = hdbl(total - covered);
	return (struct budget_cost){ hdbl(cpu) + slept * wsc,
				     hdbl(total) + 31.0 * slept };
}

/*
 * Choose the window against the incumbent, Linux's grow/shrink rule with
 * p's max_ns, grow, shrink and grow_start_ns, replayed on the same halts
 * (adaptive_update(): its window, the CPU it would have spent and the
 * halts it would have slept through, decayed as the histogram).
 *
 * Of the candidates (0, each bucket's midpoint and upper edge up to
 * max_ns, and max_ns), priced on the histogram, take the one whose worse
 * ratio to the incumbent, max(CPU / (budget x the incumbent's CPU),
 * latency / the incumbent's latency), is lowest. A score at most 1
 * dominates the incumbent (at the default budget). Scores within 1/64 of
 * the lowest count as equal, and then the better other side wins, then
 * the larger window (a window beyond every halt seen costs nothing more by
 * the histogram, and the rare halt it catches is worth a whole sleep). The
 * window in force stays while its score is within 1/32 of the lowest: an
 * estimate from 64 halts crosses a threshold on noise, and alternating
 * windows mixes their costs.
 *
 * The estimate is checked against what happened: while this policy's own
 * windows have cost more, over the same halts, than the incumbent's on
 * either side (by 1/32 of it: CPU against the budget, latency against the
 * incumbent's), it polls for the incumbent's window, so that it makes the
 * very choices the incumbent would until the sums agree again. Below a
 * budget of 100 (less CPU than the incumbent's) that cannot help, and a
 * CPU over the budget falls back to the least CPU by the histogram. The log2
 * buckets cannot place a halt inside its bucket (halts of 150 us and of
 * 250 us look alike, and only one of them fits a 200 us window), so an
 * estimate may promise what the halts do not give; the realized sums say
 * so within a few dozen halts. Budget 0: the least CPU, by the histogram.
 */
/* The candidates of adaptive_choose_budget(), priced as its walk finds
 * them: each one's window, CPU (cost), score against the incumbent and the
 * other side's ratio, and the best score so far. */
struct budget_pick {
	uint64_t total;
	double per_cap, per_lat;
	bool least; /* budget 0: the score is the CPU */
	unsigned n, best;
	uint64_t cand[2 * VSCHED_POLL_BUCKETS + 2];
	double cost[2 * VSCHED_POLL_BUCKETS + 2];
	double score[2 * VSCHED_POLL_BUCKETS + 2], other[2 * VSCHED_POLL_BUCKETS + 2];
};

/* Price window w (`wsc`: w plus a sleep's CPU, as doubles), which covers
 * `covered` of the histogram at poll CPU `cpu` (cover()). */
static inline void price(struct budget_pick *b, uint64_t w, double wsc,
			 uint64_t covered, uint64_t cpu)
{
	const unsigned i = b->n++;
	struct budget_cost c = window_cost(b->total, covered, cpu, wsc);
	double rc = c.cpu * b->per_cap, rl = c.lat * b->per_lat;

	b->cand[i] = w;
	b->cost[i] = c.cpu;
	if (b->least) {
		b->score[i] = c.cpu;
		b->other[i] = c.lat;
	} else {
		b->score[i] = rc > rl ? rc : rl;
		b->other[i] = rc > rl ? rl : rc;
	}
	if (b->score[i] < b->score[b->best])
		b->best = i;
}

static uint64_t adaptive_choose_budget(const struct vsched_poll_params *p,
				       const struct vsched_poll_state *s, uint64_t total)
{
	const uint64_t sc = sleep_cpu(p);
	const uint64_t follow = s->inc_window_ns < p->max_ns ? s->inc_window_ns : p->max_ns;
	uint64_t wsum = 0, csum = 0;
	unsigned pick;
	struct hist_sums hs;
	struct budget_pick b;

	if (!total)
		return 0; /* no halt learnt: nothing says polling pays */
	/* The incumbent's realized cost, in histogram units (its sums decay
	 * as the histogram's, one halt weighing 2^16 there). */
	const double inc_cpu = (double)s->inc_cpu * HIST_ONE;
	const double inc_lat = (double)total + 31.0 * (double)s->inc_slept;
	const double cap = inc_cpu * (double)p->cpu_budget_pct / 100.0;
	const double own_cpu = (double)s->own_cpu * HIST_ONE;
	if (p->cpu_budget_pct >= 100 &&
	    (own_cpu > cap + cap / 32 ||
	     (double)total + 31.0 * (double)s->own_slept > inc_lat + inc_lat / 32))
		return follow;
	/* The estimate moves by 1/64 of a halt a halt: priced on every halt
	 * of the first CHOOSE_EARLY (a new sleeper finds its window at once),
	 * then every CHOOSE_EVERY halts (the check above runs on every one). */
	if (s->halts > CHOOSE_EARLY && s->halts % CHOOSE_EVERY)
		return s->window_ns;
	b.total = total;
	b.per_cap = 1.0 / (cap > 0 ? cap : 1.0);
	b.per_lat = 1.0 / inc_lat;
	b.least = !p->cpu_budget_pct;
	b.n = b.best = 0;
	/* The candidates, priced in one walk up the buckets that builds the
	 * prefix sums as it goes: what cover() finds at a bucket's upper edge
	 * is the sums above it, and at its midpoint half the bucket's halts
	 * (its share there is exactly hist/2), at a quarter of the way in. */
	const double scd = (double)sc;
	hs.w[0] = hs.c[0] = 0;
	price(&b, 0, 0.0 + scd, 0, 0);
	for (unsigned i = 0; i + 1 < VSCHED_POLL_BUCKETS; i++) {
		const uint64_t hi = UINT64_C(1) << (BUCKET0_SHIFT + 1 + i);
		const uint64_t lo = i ? hi / 2 : 0, mid = lo + (hi - lo) / 2;
		const uint64_t h = s->hist[i];
		if (mid >= p->max_ns)
			break;
		price(&b, mid, hdbl(mid) + scd, wsum + (h >> 1),
		      csum + (h >> 1) * (lo + (mid - lo) / 2));
		wsum += h;
		csum += h * mid;
		hs.w[i + 1] = wsum;
		hs.c[i + 1] = csum;
		if (hi >= p->max_ns)
			break;
		price(&b, hi, hdbl(hi) + scd, wsum, csum);
	}
	if (p->max_ns) { /* its bucket's sums are in: the walk stopped there */
		uint64_t covered, cpu;
		cover(s, &hs, p->max_ns, &covered, &cpu);
		price(&b, p->max_ns, (double)p->max_ns + scd, covered, cpu);
	}
	if (p->cpu_budget_pct && p->cpu_budget_pct < 100 && own_cpu > cap + cap / 32) {
		/* Below the incumbent's CPU, following it cannot help: the
		 * least CPU by the histogram instead. */
		unsigned lo = 0;
		for (unsigned i = 1; i < b.n; i++)
			if (b.cost[i] < b.cost[lo])
				lo = i;
		return b.cand[lo];
	}
	pick = b.best;
	for (unsigned i = 0; i < b.n; i++) {
		if (b.cand[i] == s->window_ns &&
		    b.score[i] <= b.score[b.best] + b.score[b.best] / 32)
			return b.cand[i]; /* the window in force stays */
		if (b.score[i] <= b.score[b.best] + b.score[b.best] / 64 &&
		    b.other[i] <= b.other[pick])
			pick = i; /* better on the other side, or as good and larger */
	}
	return b.cand[pick];
}

/* `total`: the histogram's sum, which its update took. */
static uint64_t adaptive_choose(const struct vsched_poll_params *p,
				const struct vsched_poll_state *s, uint64_t total)
{
	return p->latency_weight ? adaptive_choose_rate(p, s, total)
				 : adaptive_choose_budget(p, s, total);
}

/* One halt: learnt (a valid wakeup: the histogram and both sides'
 * sleeps), and charged (every halt: both sides' CPU; an invalid wakeup,
 * one that found nothing to do, costs what it polled or slept as any other
 * but says nothing of when the next wake comes and had no latency to
 * judge), then the window chosen again, so that a burst of invalid
 * wakeups is not polled through at a window the charges no longer pay
 * for. */
static void adaptive_update(const struct vsched_poll_params *p,
			    struct vsched_poll_state *s, uint64_t window_ns,
			    uint64_t halt_ns, bool valid)
{
	uint64_t d = halt_ns;
	/* A halt that outlived the window slept, and its length includes the
	 * wakeup latency: take that out, but keep it beyond the window. */
	if (d > window_ns) {
		d = d > wake_cost(p) ? d - wake_cost(p) : 0;
		if (d <= window_ns)
			d = window_ns + 1;
	}
	/* Decay and sum in one pass (the sum is the choice's, below), then
	 * count this halt; an invalid one only sums. */
	const unsigned shift = p->decay_shift;
	uint64_t total = 0;
	if (valid) {
		total = HIST_ONE;
#pragma GCC unroll 16
		for (unsigned i = 0; i < VSCHED_POLL_BUCKETS; i++) {
			const uint32_t h = s->hist[i] - (s->hist[i] >> shift);
			s->hist[i] = h;
			total += h;
		}
		s->hist[bucket_of(d)] += HIST_ONE;
	} else {
		for (unsigned i = 0; i < VSCHED_POLL_BUCKETS; i++)
			total += s->hist[i];
	}
	/* This halt under this policy's window and under the incumbent's:
	 * CPU (a poll to the wake, or the window and a sleep) and sleeps. */
	const uint64_t sc = sleep_cpu(p);
	const uint64_t wk = s->inc_window_ns < p->max_ns ? s->inc_window_ns : p->max_ns;
	const bool won = halt_ns <= window_ns, kwon = d <= wk;
	/* (window and wake as long as they are: sums capped at COST_MAX) */
	const uint64_t own = won ? halt_ns : window_ns > COST_MAX ? COST_MAX : window_ns + sc;
	const uint64_t inc = kwon ? d : wk > COST_MAX ? COST_MAX : wk + sc;
	s->own_cpu += (own < COST_MAX ? own : COST_MAX) - (s->own_cpu >> p->decay_shift);
	s->inc_cpu += (inc < COST_MAX ? inc : COST_MAX) - (s->inc_cpu >> p->decay_shift);
	if (valid) {
		s->own_slept += (won ? 0 : HIST_ONE) - (s->own_slept >> p->decay_shift);
		s->inc_slept += (kwon ? 0 : HIST_ONE) - (s->inc_slept >> p->decay_shift);
	}
	/* The incumbent shrinks on an invalid wakeup, as KVM does. */
	kvm_step(p, &s->inc_window_ns,
		 kwon ? d : d > UINT64_MAX - wake_cost(p) ? UINT64_MAX : d + wake_cost(p), valid);
	s->window_ns = adaptive_choose(p, s, total);
}

/* The steps of the table's rows (the KVM and ADAPTIVE ones are above). */

/* KVM and ADAPTIVE start at 0, as Linux does: ADAPTIVE until a halt shows
 * that polling pays (the slept halts it learns from have their wakeup
 * taken out). */
static void init_zero(const struct vsched_poll_params *p,
		      struct vsched_poll_state *s)
{
	(void)p;
	(void)s;
}

/* FIXED polls max_ns from the first halt on. */
static void init_max(const struct vsched_poll_params *p,
		     struct vsched_poll_state *s)
{
	s->window_ns = p->max_ns;
}

static uint64_t window_zero(const struct vsched_poll_params *p,
			    const struct vsched_poll_state *s)
{
	(void)p;
	(void)s;
	return 0;
}

static uint64_t window_max(const struct vsched_poll_params *p,
			   const struct vsched_poll_state *s)
{
	(void)s;
	return p->max_ns;
}

/* The learnt window, capped at max_ns (which may have been lowered). */
static uint64_t window_learnt(const struct vsched_poll_params *p,
			      const struct vsched_poll_state *s)
{
	return s->window_ns < p->max_ns ? s->window_ns : p->max_ns;
}

static void update_none(const struct vsched_poll_params *p,
			struct vsched_poll_state *s, uint64_t window_ns,
			uint64_t halt_ns, bool valid)
{
	(void)p;
	(void)s;
	(void)window_ns;
	(void)halt_ns;
	(void)valid;
}

static void update_kvm(const struct vsched_poll_params *p,
		       struct vsched_poll_state *s, uint64_t window_ns,
		       uint64_t halt_ns, bool valid)
{
	(void)window_ns;
	kvm_update(p, s, halt_ns, valid);
}

/* The policies, by enum vsched_poll_policy. */
static const struct policy policies[VSCHED_POLL_NPOLICIES] = {
	[VSCHED_POLL_NONE] = { "none", init_zero, window_zero, update_none },
	[VSCHED_POLL_FIXED] = { "fixed", init_max, window_max, update_none },
	[VSCHED_POLL_KVM] = { "kvm", init_zero, window_learnt, update_kvm },
	[VSCHED_POLL_ADAPTIVE] = { "adaptive", init_zero, window_learnt,
				   adaptive_update },
};
/* A policy added to the enum gets a row: the count follows the last one. */
_Static_assert(VSCHED_POLL_ADAPTIVE + 1 == VSCHED_POLL_NPOLICIES,
	       "VSCHED_POLL_NPOLICIES is not the number of policies");

const char *vsched_poll_policy_name(unsigned policy)
{
	return policy < VSCHED_POLL_NPOLICIES ? policies[policy].name : NULL;
}

int vsched_poll_policy_parse(const char *name)
{
	if (!name)
		return VSCHED_EINVAL;
	for (unsigned i = 0; i < VSCHED_POLL_NPOLICIES; i++)
		if (strcmp(name, policies[i].name) == 0)
			return (int)i;
	return VSCHED_EINVAL;
}

int vsched_poll_update(const struct vsched_poll_params *caller,
		       struct vsched_poll_state *s, uint64_t window_ns,
		       uint64_t halt_ns, bool valid)
{
	struct vsched_poll_params n;

	if (!vsched__poll_params_ok(caller, &n) || !s)
		return VSCHED_EINVAL;
	vsched__poll_update(&n, s, window_ns, halt_ns, valid);
	return 0;
}

void vsched__poll_update(const struct vsched_poll_params *p,
			 struct vsched_poll_state *s, uint64_t window_ns,
			 uint64_t halt_ns, bool valid)
{
	s->halts++;
	if (p->policy < VSCHED_POLL_NPOLICIES)
		policies[p->policy].update(p, s, window_ns, halt_ns, valid);
}

/* ------------------------------------------------------------------ */
/* The VM's policy, published with RCU (liburcu-bp: threads register
 * themselves on first use, so a hypervisor's own liburcu flavour is never
 * disturbed). Readers copy the parameters out in a short read-side section
 * and run the policy on their copy. */

#include <urcu/urcu-bp.h>

int vsched__poll_install(struct vsched_vm *vm, const struct vsched_poll_params *p)
{
	struct vsched__poll_cfg *cfg, *old;
	struct vsched_poll_params n;

	if (!vsched__poll_params_ok(p, &n))
		return VSCHED_EINVAL;
	cfg = vsched__alloc(&vm->alloc, sizeof(*cfg));
	if (!cfg)
		return VSCHED_ENOMEM;
	cfg->p = n;
	pthread_mutex_lock(&vm->lock);
	cfg->gen = atomic_load(&vm->poll_gen) + 1;
	old = atomic_exchange_explicit(&vm->poll, cfg, memory_order_seq_cst);
	/* After the pointer: a reader that sees the new generation finds the
	 * new parameters behind the pointer. */
	atomic_store_explicit(&vm->poll_gen, cfg->gen, memory_order_release);
	pthread_mutex_unlock(&vm->lock);
	if (old) {
		urcu_bp_synchronize_rcu();
		VSCHED__TSAN_ACQUIRE(old); /* the readers' releases, for TSan */
		vsched__free(&vm->alloc, old, sizeof(*old));
	}
	return 0;
}

void vsched__poll_release(struct vsched_vm *vm)
{
	struct vsched__poll_cfg *cfg = atomic_exchange(&vm->poll, NULL);
	vsched__free(&vm->alloc, cfg, sizeof(*cfg));
}

void vsched__poll_read(struct vsched_vm *vm, struct vsched__poll_cfg *out)
{
	struct vsched__poll_cfg *cfg;

	urcu_bp_read_lock();
	cfg = atomic_load_explicit(&vm->poll, memory_order_acquire);
	*out = *cfg;
	VSCHED__TSAN_RELEASE(cfg);
	urcu_bp_read_unlock();
}

int vsched_thread_init(void)
{
	urcu_bp_register_thread();
	return 0;
}

int vsched_vm_set_poll(struct vsched_vm *vm, const struct vsched_poll_params *p)
{
	if (!vm)
		return VSCHED_EINVAL;
	return vsched__poll_install(vm, p);
}

int vsched_vm_get_poll(struct vsched_vm *vm, struct vsched_poll_params *out)
{
	struct vsched__poll_cfg cfg;

	if (!vm || !out)
		return VSCHED_EINVAL;
	vsched__poll_read(vm, &cfg);
	return vsched__struct_out(out, &cfg.p, sizeof(cfg.p));
}
