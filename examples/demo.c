/* SPDX-License-Identifier: MIT */
/*
 * vsched-demo: two simulated vCPU threads and an interrupt source, run once
 * with KVM's request order (PMI serviced before NMI, and the PMI handler
 * raises NMI) and once with the naive order (NMI first), printing what each
 * costs in cancelled guest entries. The reference VMM replaces this demo.
 *
 * usage: vsched-demo [seconds per run]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <vsched/vsched.h>

enum { K_PMI = 0, K_NMI = 1, K_IRQ = 2 };

struct vcpu {
	struct vsched_vcpu *v;
	atomic_int kicked;
	atomic_int stop;
	uint64_t guest_runs;
};

struct irq {
	struct vsched_payload node;
	unsigned vector;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_pmi(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		   void *arg)
{
	(void)k, (void)p, (void)arg;
	/* A PMI handler that injects an NMI, as x86 KVM's does. */
	vsched_post(v, K_NMI);
}

static void on_nmi(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		   void *arg)
{
	(void)v, (void)k, (void)p, (void)arg;
}

static void on_irq(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		   void *arg)
{
	(void)v, (void)k, (void)arg;
	free(p); /* the node is the first member of struct irq */
}

static void drop_irq(struct vsched_vcpu *v, unsigned k, struct vsched_payload *p,
		     void *ctx)
{
	(void)v, (void)k, (void)ctx;
	free(p);
}

static void kick(struct vsched_vcpu *v, void *ctx)
{
	(void)ctx;
	atomic_store(&((struct vcpu *)vsched_vcpu_user(v))->kicked, 1);
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *c = arg;
	while (!atomic_load(&c->stop)) {
		vsched_service(c->v);
		if (vsched_vcpu_enter(c->v) != 0)
			continue; /* cancelled: service again */
		/* "Guest": 5 us, or until kicked. A PMI fires in the guest
		 * every few runs. */
		uint64_t end = now_ns() + 5000;
		while (!atomic_load(&c->kicked) && now_ns() < end)
			;
		atomic_store(&c->kicked, 0);
		vsched_vcpu_exit(c->v);
		if (++c->guest_runs % 4 == 0)
			vsched_post(c->v, K_PMI);
		if (c->guest_runs % 16 == 0)
			vsched_vcpu_block(c->v, now_ns() + 50000);
	}
	vsched_service(c->v);
	return NULL;
}

static int run(int naive, double seconds)
{
	struct vsched_host_ops ops = { .kick = kick, .payload_drop = drop_irq };
	/* Default poll policy: vsched's adaptive one, x86 maximum 200 us. */
	struct vsched_vm_config cfg = { .size = sizeof(cfg), .ops = &ops };
	struct vsched_request_desc pmi = { .name = "PMI", .priority = 1,
					   .handler = on_pmi,
					   .may_raise = VSCHED_KIND_BIT(K_NMI) };
	struct vsched_request_desc nmi = { .name = "NMI", .priority = 2,
					   .handler = on_nmi };
	struct vsched_request_desc irq = { .name = "IRQ", .priority = 3,
					   .flags = VSCHED_REQ_PAYLOAD,
					   .handler = on_irq };
	struct vcpu c[2] = { 0 };
	pthread_t t[2];
	struct vsched_vm *vm;
	unsigned bad_kind, bad_raised;
	int rc;

	if (naive)
		nmi.priority = 0; /* NMI serviced before PMI */
	if ((rc = vsched_vm_create(&cfg, &vm)) ||
	    (rc = vsched_request_declare(vm, K_PMI, &pmi)) ||
	    (rc = vsched_request_declare(vm, K_NMI, &nmi)) ||
	    (rc = vsched_request_declare(vm, K_IRQ, &irq))) {
		fprintf(stderr, "setup: %s\n", vsched_strerror(rc));
		return 1;
	}
	rc = vsched_request_finalize(vm, 0);
	if (rc) {
		vsched_request_table_error(vm, &bad_kind, &bad_raised);
		printf("%-9s table rejected: %s (%s may raise %s)\n",
		       naive ? "naive" : "validated", vsched_strerror(rc),
		       vsched_request_name(vm, bad_kind),
		       vsched_request_name(vm, bad_raised));
		/* Accept it anyway, to measure what it costs. */
		rc = vsched_request_finalize(vm, VSCHED_FINALIZE_ALLOW_LATE_RAISE);
		if (rc)
			return 1;
	}
	for (int i = 0; i < 2; i++) {
		vsched_vcpu_create(vm, (unsigned)i, &c[i], &c[i].v);
		pthread_create(&t[i], NULL, vcpu_thread, &c[i]);
	}
	/* This thread is an interrupt source: an IRQ every ~20 us. */
	uint64_t end = now_ns() + (uint64_t)(seconds * 1e9), n = 0;
	while (now_ns() < end) {
		struct irq *q = malloc(sizeof(*q));
		q->vector = 32 + (unsigned)(n % 200);
		if (vsched_post_payload(c[n % 2].v, K_IRQ, &q->node))
			free(q);
		n++;
		uint64_t gap = now_ns() + 20000;
		while (now_ns() < gap)
			;
	}
	for (int i = 0; i < 2; i++) {
		atomic_store(&c[i].stop, 1);
		pthread_join(t[i], NULL);
	}

	printf("%-9s %-5s %10s %10s %10s %10s %10s %10s\n",
	       naive ? "naive" : "validated", "vCPU", "entries", "cancelled",
	       "kicks", "avoided", "wakeups", "irqs");
	for (int i = 0; i < 2; i++) {
		struct vsched_vcpu_stats s = { .size = sizeof(s) };
		vsched_vcpu_read_stats(c[i].v, &s);
		printf("%-9s %-5d %10llu %10llu %10llu %10llu %10llu %10llu\n", "", i,
		       (unsigned long long)s.entries,
		       (unsigned long long)s.cancelled_entries,
		       (unsigned long long)s.kicks_sent,
		       (unsigned long long)s.kicks_avoided,
		       (unsigned long long)s.wakeups,
		       (unsigned long long)s.kind[K_IRQ].payloads_delivered);
	}
	vsched_vm_destroy(vm);
	return 0;
}

int main(int argc, char **argv)
{
	double seconds = argc > 1 ? atof(argv[1]) : 1.0;
	printf("vsched demo: 2 vCPU threads, PMI handler raises NMI, IRQs every 20 us\n\n");
	if (run(0, seconds) || run(1, seconds))
		return 1;
	printf("\nThe validated order services the NMI raised by the PMI handler in\n"
	       "the same pass; the naive order finds it only at the commit and\n"
	       "cancels the entry.\n");
	return 0;
}
