/* SPDX-License-Identifier: MIT */
/* Payload requests: exactly once, FIFO per poster, under concurrent posters;
 * payloads of a destroyed vCPU handed back through payload_drop. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common.h"

#define POSTERS 4
#define PER_POSTER 20000

enum { K_IRQ = 4, K_OTHER = 9 };

struct irq {
	struct vsched_payload node;
	unsigned poster, seq;
	int delivered;
};

struct ctx {
	struct vsched_vcpu *vcpu;
	struct irq *irqs; /* POSTERS * PER_POSTER */
	unsigned next_seq[POSTERS];
	atomic_uint delivered;
	int order_errors, dup_errors;
};

static void on_irq(struct vsched_vcpu *v, unsigned kind,
		   struct vsched_payload *p, void *arg)
{
	struct ctx *c = arg;
	struct irq *q = (struct irq *)((char *)p - offsetof(struct irq, node));
	(void)v;
	assert_int_equal(kind, K_IRQ);
	if (q->delivered++)
		c->dup_errors++;
	if (q->seq != c->next_seq[q->poster])
		c->order_errors++;
	c->next_seq[q->poster] = q->seq + 1;
	atomic_fetch_add(&c->delivered, 1);
}

struct poster_arg {
	struct ctx *c;
	unsigned id;
};

static void *poster(void *arg)
{
	struct poster_arg *pa = arg;
	for (unsigned i = 0; i < PER_POSTER; i++) {
		struct irq *q = &pa->c->irqs[pa->id * PER_POSTER + i];
		q->poster = pa->id;
		q->seq = i;
		if (vsched_post_payload(pa->c->vcpu, K_IRQ, &q->node) != 0)
			abort();
		if ((i & 7) == 0 && vsched_post(pa->c->vcpu, K_OTHER) != 0)
			abort();
	}
	return NULL;
}

static void test_payload_exactly_once_fifo(void **state)
{
	struct ctx c = { 0 };
	pthread_t t[POSTERS];
	struct poster_arg pa[POSTERS];
	(void)state;

	c.irqs = calloc(POSTERS * PER_POSTER, sizeof(*c.irqs));
	assert_non_null(c.irqs);
	struct vsched_vm *vm = make_vm(NULL, 0);
	declare(vm, K_IRQ, "irq", 1, VSCHED_REQ_PAYLOAD, on_irq, &c, 0);
	declare(vm, K_OTHER, "other", 2, 0, NULL, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	c.vcpu = make_vcpu(vm, 0);

	for (unsigned i = 0; i < POSTERS; i++) {
		pa[i].c = &c;
		pa[i].id = i;
		assert_int_equal(pthread_create(&t[i], NULL, poster, &pa[i]), 0);
	}
	/* This thread is the vCPU: service until every payload arrived. */
	while (atomic_load(&c.delivered) < POSTERS * PER_POSTER)
		assert_true(vsched_service(c.vcpu) >= 0);
	for (unsigned i = 0; i < POSTERS; i++)
		pthread_join(t[i], NULL);
	vsched_service(c.vcpu);

	assert_int_equal(c.dup_errors, 0);
	assert_int_equal(c.order_errors, 0);
	for (unsigned i = 0; i < POSTERS * PER_POSTER; i++)
		assert_int_equal(c.irqs[i].delivered, 1);
	struct vsched_vcpu_stats s = stats_of(c.vcpu);
	assert_int_equal(s.kind[K_IRQ].payloads_delivered, POSTERS * PER_POSTER);
	assert_int_equal(s.kind[K_IRQ].serviced + s.kind[K_IRQ].coalesced,
			 POSTERS * PER_POSTER);
	assert_int_equal(s.kind[K_OTHER].serviced + s.kind[K_OTHER].coalesced,
			 POSTERS * (PER_POSTER / 8));
	vsched_vm_destroy(vm);
	free(c.irqs);
}

static unsigned dropped;
static void drop(struct vsched_vcpu *v, unsigned kind, struct vsched_payload *p,
		 void *ctx)
{
	(void)v;
	(void)ctx;
	(void)p;
	assert_int_equal(kind, K_IRQ);
	dropped++;
}

static void test_destroy_drops_payloads(void **state)
{
	struct ctx c = { 0 };
	struct irq q[3] = { 0 };
	struct vsched_host_ops ops = { .payload_drop = drop };
	(void)state;
	struct vsched_vm *vm = make_vm(&ops, 0);
	declare(vm, K_IRQ, "irq", 1, VSCHED_REQ_PAYLOAD, on_irq, &c, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 0);

	assert_int_equal(vsched_post_payload(v, K_IRQ, &q[0].node), 0);
	assert_int_equal(vsched_post_payload(v, K_IRQ, &q[1].node), 0);
	dropped = 0;
	assert_int_equal(vsched_vcpu_destroy(v), 0);
	assert_int_equal(dropped, 2);
	/* Posting to it now fails and leaves the payload with the caller. */
	assert_int_equal(vsched_post_payload(v, K_IRQ, &q[2].node), VSCHED_EDESTROYED);
	assert_int_equal(vsched_post(v, K_IRQ), VSCHED_EINVAL);
	assert_int_equal(vsched_vcpu_mode(v), VSCHED_MODE_DESTROYED);
	/* The id can be reused; the stale handle still answers safely. */
	struct vsched_vcpu *v2 = make_vcpu(vm, 0);
	assert_ptr_not_equal(v, v2);
	assert_int_equal(vsched_post_payload(v, K_IRQ, &q[2].node), VSCHED_EDESTROYED);
	assert_int_equal(vsched_post_payload(v2, K_IRQ, &q[2].node), 0);
	vsched_vm_destroy(vm);
	assert_int_equal(dropped, 3); /* the VM hands back v2's too */
	assert_int_equal(c.delivered, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_payload_exactly_once_fifo),
		cmocka_unit_test(test_destroy_drops_payloads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
