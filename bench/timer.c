/* SPDX-License-Identifier: MIT */
/*
 * timer: a tickless guest that re-arms its timer before the pending expiry
 * is delivered with probability p (invisibly to vsched, as a nested guest's
 * decrementer), through KEEP, CANCEL and ADAPTIVE with a state-read cost R
 * and a spurious-exit cost S: spurious deliveries, reads and total cost.
 * Deterministic (fake clock).
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

struct tsim {
	uint64_t now, guest_deadline, read_cost;
	uint64_t reads;
};

static uint64_t tsim_now(void *ctx)
{
	return ((struct tsim *)ctx)->now;
}

static int tsim_read(struct vsched_vcpu *v, struct vsched_timer *t, uint64_t *d,
		     void *ctx)
{
	struct tsim *s = ctx;
	(void)v, (void)t;
	s->now += s->read_cost; /* the hypercall takes this long */
	s->reads++;
	*d = s->guest_deadline;
	return 0;
}

static unsigned tsim_delivered;
static void tsim_handler(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
			 void *a)
{
	(void)v, (void)k, (void)p, (void)a;
	tsim_delivered++;
}

struct tresult {
	uint64_t spurious, reads;
	double cost_ns, read_ns;
};

/* n expiries; the guest re-arms before delivery with probability p (p2
 * after half of them). Cost: every delivered expiry is an exit (S), reads
 * cost R. Spurious deliveries are reported to vsched, as a hypervisor that
 * sees the guest return at once would. */
static struct tresult timer_trace(unsigned cancel, unsigned n, double p, double p2,
				  uint64_t r_ns, uint64_t s_ns)
{
	struct tsim sim = { .now = 1000000, .read_cost = r_ns };
	struct vsched_host_ops ops = { .now_ns = tsim_now, .timer_read = tsim_read,
				       .ctx = &sim };
	struct vsched_poll_params pp;
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops, .poll = &pp };
	struct vsched_request_desc d = { .name = "dec", .handler = tsim_handler };
	struct vsched_timer_desc td = { .size = sizeof(td), .name = "dec", .kind = 0,
					.semantics = VSCHED_TIMER_DECREMENTER,
					.cancel = cancel };
	struct vsched_vm *vm;
	struct vsched_vcpu *v;
	struct vsched_timer *t;
	struct tresult res = { 0 };
	uint64_t seed = 0x9e3779b97f4a7c15ull;

	vsched_poll_defaults(VSCHED_POLL_NONE, 0, &pp);
	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, 0, &d) ||
	    vsched_request_finalize(vm, 0) || vsched_vcpu_create(vm, 0, NULL, &v) ||
	    vsched_timer_create(v, &td, &t))
		abort();
	for (unsigned i = 0; i < n; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		double pi = i < n / 2 ? p : p2;
		bool stale = (double)(seed % 1000000) / 1e6 < pi;
		sim.now += 1000000;
		sim.guest_deadline = sim.now;
		vsched_timer_arm(t, sim.now); /* expires: posted */
		if (stale)
			sim.guest_deadline = sim.now + 500000; /* re-armed unseen */
		unsigned before = tsim_delivered;
		vsched_service(v);
		if (tsim_delivered > before) {
			res.cost_ns += (double)s_ns; /* the exit it causes */
			if (stale) {
				res.spurious++;
				vsched_timer_report_spurious(t, s_ns);
			}
		}
		/* The guest re-armed: its real deadline, seen or not. */
		if (stale)
			vsched_timer_arm(t, sim.guest_deadline);
	}
	res.reads = sim.reads;
	res.read_ns = (double)sim.reads * (double)r_ns;
	res.cost_ns += res.read_ns;
	vsched_vm_destroy(vm);
	return res;
}

/* The policies the goals compare. */
enum {
	KEEP = VSCHED_CANCEL_KEEP,
	CANCEL = VSCHED_CANCEL_CANCEL,
	ADAPTIVE = VSCHED_CANCEL_ADAPTIVE
};

static int run_timer(void)
{
	static const struct {
		const char *name;
		double p, p2;
		uint64_t r, s;
	} tr[] = {
		{ "tickless-70pct-cheap-read", 0.7, 0.7, 50, 10000 },
		{ "tickless-30pct-cheap-read", 0.3, 0.3, 50, 10000 },
		{ "rarely-stale", 0.02, 0.02, 50, 10000 },
		{ "expensive-read", 0.3, 0.3, 20000, 10000 },
		{ "expensive-read-mostly-stale", 0.9, 0.9, 5000, 10000 },
		{ "phase-5pct-then-80pct", 0.05, 0.8, 3000, 10000 },
	};
	const unsigned n = opt_quick ? 2000 : 20000;

	for (unsigned i = 0; i < sizeof(tr) / sizeof(tr[0]); i++) {
		/* Every policy of the library, by enum vsched_timer_cancel. */
		struct tresult r[VSCHED_CANCEL_NPOLICIES];
		for (unsigned k = 0; k < VSCHED_CANCEL_NPOLICIES; k++)
			r[k] = timer_trace(k, n, tr[i].p, tr[i].p2, tr[i].r, tr[i].s);
		if (!opt_json)
			printf("\n%-28s (stale %.0f%%%s, read %llu ns, spurious exit %llu ns, %u expiries)\n"
			       "%-10s %12s %10s %16s\n",
			       tr[i].name, tr[i].p * 100, tr[i].p2 != tr[i].p ? " then 80%" : "",
			       (unsigned long long)tr[i].r, (unsigned long long)tr[i].s, n,
			       "policy", "spurious", "reads", "total cost ms");
		for (unsigned k = 0; k < VSCHED_CANCEL_NPOLICIES; k++) {
			const char *pol = vsched_cancel_policy_name(k);
			if (!opt_json)
				printf("%-10s %12llu %10llu %16.3f\n", pol,
				       (unsigned long long)r[k].spurious,
				       (unsigned long long)r[k].reads, r[k].cost_ns / 1e6);
			else {
				char m[128];
				snprintf(m, sizeof(m), "%s/%s/total_cost", tr[i].name, pol);
				json_line(&(struct json_line){
					.bench = "timer", .metric = m, .unit = "ns",
					.baseline = vsched_cancel_policy_name(KEEP),
					.value = r[k].cost_ns, .baseline_value = r[KEEP].cost_ns,
					.ratio = r[k].cost_ns / r[KEEP].cost_ns, .min = r[k].cost_ns,
					.max = r[k].cost_ns, .runs = 1, .prec = 0,
					.ratio_prec = 4 });
			}
		}
		if (opt_json)
			continue;
		double best = r[KEEP].cost_ns < r[CANCEL].cost_ns ? r[KEEP].cost_ns
								    : r[CANCEL].cost_ns;
		double cut = r[KEEP].spurious ? 1.0 - (double)r[CANCEL].spurious /
							      (double)r[KEEP].spurious
					      : 1.0;
		printf("goal: cancel cuts spurious exits >= 70%% vs keep: %.1f%%: %s\n", cut * 100,
		       cut >= 0.70 ? "met" : "MISSED");
		/* CANCEL reads every expiry once and KEEP pays an exit for
		 * each, so the share of keep's run is R/S by construction: a
		 * check of the trace's parameters, said so; the share of
		 * cancel's own cost moves with the stale share. */
		if (tr[i].r < 1000)
			printf("goal: cancel's reads add < 1%% to the cost (of keep's run: R/S by "
			       "construction, not a measurement): "
			       "%.3f%% (%.3f%% of cancel's own): %s\n",
			       r[CANCEL].read_ns / r[KEEP].cost_ns * 100,
			       r[CANCEL].read_ns / r[CANCEL].cost_ns * 100,
			       r[CANCEL].read_ns < 0.01 * r[KEEP].cost_ns ? "met" : "MISSED");
		printf("goal: adaptive within 5%% of the better static policy: %.3fx: %s\n",
		       r[ADAPTIVE].cost_ns / best,
		       r[ADAPTIVE].cost_ns <= 1.05 * best ? "met" : "MISSED");
	}
	return 0;
}

const struct bench bench_timer = {
	.name = "timer",
	.desc = "expiry cancellation on reprogramming traces (fake clock)",
	.run = run_timer,
	.in_all = true,
};
