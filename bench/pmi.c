/* SPDX-License-Identifier: MIT */
/*
 * pmi: a PMU thread raises PMIs whose handler raises an NMI, with the naive
 * order (NMI serviced first) and KVM's order (a handler's request is
 * serviced earlier than itself): cancelled entries per 10 s.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

#include "arch/arch.h"

enum { K_PMI = 0, K_NMI = 1 };

struct pmi_vcpu {
	struct vsched_vcpu *v;
	atomic_int kicked, stop;
};

static void pmi_handler(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p, void *a)
{
	(void)k, (void)p, (void)a;
	vsched_post(v, K_NMI); /* inject the NMI the PMI asks for */
}

static void pmi_kick(struct vsched_vcpu *v, void *ctx)
{
	(void)ctx;
	atomic_store(&((struct pmi_vcpu *)vsched_vcpu_user(v))->kicked, 1);
}

static void *pmi_vcpu_thread(void *arg)
{
	struct pmi_vcpu *c = arg;
	pin(0);
	while (!atomic_load(&c->stop)) {
		vsched_service(c->v);
		if (vsched_vcpu_enter(c->v) != 0)
			continue;
		uint64_t end = now_ns() + 2000; /* 2 us of guest, or a kick */
		while (!atomic_load(&c->kicked) && now_ns() < end)
			;
		atomic_store(&c->kicked, 0);
		vsched_vcpu_exit(c->v);
	}
	return NULL;
}

/* Returns cancelled entries per 10 s; *pmis gets PMIs posted per 10 s. */
static double pmi_run(int naive, double seconds, double *pmis)
{
	struct vsched_host_ops ops = { .kick = pmi_kick };
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops };
	struct vsched_request_desc pmi = { .name = "PMI", .priority = 1,
					   .handler = pmi_handler,
					   .may_raise = VSCHED_KIND_BIT(K_NMI) };
	struct vsched_request_desc nmi = { .name = "NMI", .priority = naive ? 0 : 2 };
	struct pmi_vcpu c = { 0 };
	struct vsched_vm *vm;
	pthread_t t;
	uint64_t n = 0;

	if (vsched_vm_create(&cfg, &vm) || vsched_request_declare(vm, K_PMI, &pmi) ||
	    vsched_request_declare(vm, K_NMI, &nmi) ||
	    vsched_request_finalize(vm, naive ? VSCHED_FINALIZE_ALLOW_LATE_RAISE : 0) ||
	    vsched_vcpu_create(vm, 0, &c, &c.v))
		abort();
	pthread_create(&t, NULL, pmi_vcpu_thread, &c);
	pin(1);
	uint64_t t0 = now_ns(), end = t0 + (uint64_t)(seconds * 1e9), next = t0;
	while (now_ns() < end) {
		next += 50000; /* a PMI every 50 us */
		while (now_ns() < next)
			vsched__relax();
		vsched_post(c.v, K_PMI);
		n++;
	}
	double el = (double)(now_ns() - t0) / 1e9;
	atomic_store(&c.stop, 1);
	pthread_join(t, NULL);
	struct vsched_vcpu_stats st = { .size = sizeof(st) };
	vsched_vcpu_read_stats(c.v, &st);
	vsched_vm_destroy(vm);
	*pmis = (double)n / el * 10;
	return (double)st.cancelled_entries / el * 10;
}

static int run_pmi(void)
{
	double a[MAX_RUNS], b[MAX_RUNS], pm;
	double secs = opt_quick ? 0.3 : 2.0;
	for (int r = 0; r < opt_runs; r++) {
		a[r] = pmi_run(0, secs, &pm);
		b[r] = pmi_run(1, secs, &pm);
	}
	report("pmi", "cancelled_entries_per_10s", "count", "naive_order_nmi_first", a, b,
	       opt_runs);
	if (!opt_json) {
		double ma = median(a, opt_runs), mb = median(b, opt_runs);
		printf("pmi      %.0f PMIs per 10 s; validated order cuts cancelled entries by "
		       "%.2f%% (goal >= 99%%: %s)\n", pm, mb > 0 ? (1 - ma / mb) * 100 : 0,
		       mb > 0 && ma <= 0.01 * mb ? "met" : "MISSED");
	}
	return 0;
}

const struct bench bench_pmi = {
	.name = "pmi",
	.desc = "cancelled entries per 10 s, naive order against KVM's",
	.run = run_pmi,
	.in_all = true,
};
