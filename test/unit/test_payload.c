/* SPDX-License-Identifier: MIT */
/* Payload requests: exactly once, FIFO per poster, under concurrent posters;
 * payloads of a destroyed vCPU handed back through payload_drop. */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <urcu/wfcqueue.h>

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

/* A handler that queues the next payload of its kind as it runs: a poster
 * that keeps up with the handler. */
static struct irq chain[8];
static unsigned chained;

static void on_chain(struct vsched_vcpu *v, unsigned kind,
		     struct vsched_payload *p, void *arg)
{
	(void)p;
	(void)arg;
	if (++chained < 8)
		assert_int_equal(vsched_post_payload(v, kind, &chain[chained].node), 0);
}

/* A pass delivers the payloads queued when its kind's turn came; one
 * queued meanwhile waits for the next call (its bit is set again), in
 * order, none lost. Found by an outside trial: posters faster than the
 * handler held one vsched_service() call for 5.8 s. */
static void test_pass_delivers_what_was_queued(void **state)
{
	(void)state;
	struct vsched_vm *vm = make_vm(NULL, 0);
	declare(vm, K_IRQ, "irq", 1, VSCHED_REQ_PAYLOAD, on_chain, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	struct vsched_vcpu *v = make_vcpu(vm, 0);

	chained = 0;
	assert_int_equal(vsched_post_payload(v, K_IRQ, &chain[0].node), 0);
	for (unsigned call = 1; call <= 8; call++) {
		assert_int_equal(vsched_service(v), 1);
		assert_int_equal(chained, call); /* one payload a call */
	}
	assert_int_equal(vsched_service(v), 0); /* the chain ended: nothing left */
	assert_int_equal(vsched_vm_destroy(vm), 0);
}

/*
 * liburcu's enqueue, interposed (the library calls it through the PLT): at
 * `pause_at` it stops once, as a preempted poster would, until released.
 * PAUSE_BEFORE: the post has counted itself in and passed its DESTROYED
 * check, nothing is queued yet. PAUSE_LINK: the node is the queue's tail,
 * not yet linked, so every node queued after it is behind a gap a
 * non-blocking dequeue stops at. PAUSE_LINKED: queued and linked, its bit
 * not set yet.
 */
enum { PAUSE_NONE, PAUSE_BEFORE, PAUSE_LINK, PAUSE_LINKED };
static atomic_int pause_at, paused, released;

static void maybe_pause(int where)
{
	int w = where;
	if (!atomic_compare_exchange_strong(&pause_at, &w, PAUSE_NONE))
		return;
	atomic_store(&paused, 1);
	while (!atomic_load(&released))
		usleep(100);
}

bool cds_wfcq_enqueue(cds_wfcq_head_ptr_t head, struct cds_wfcq_tail *tail,
		      struct cds_wfcq_node *node)
{
	struct cds_wfcq_node *old;

	maybe_pause(PAUSE_BEFORE);
	node->next = NULL;
	old = __atomic_exchange_n(&tail->p, node, __ATOMIC_SEQ_CST);
	maybe_pause(PAUSE_LINK);
	__atomic_store_n(&old->next, node, __ATOMIC_RELEASE);
	maybe_pause(PAUSE_LINKED);
	return old != &head._h->node;
}

/* liburcu's non-blocking dequeue, interposed: armed, its next call first
 * posts `dq_node` (a poster landing just before the dequeue). */
static atomic_int post_on_dequeue;
static struct vsched_vcpu *dq_vcpu;
static struct irq dq_node;

struct cds_wfcq_node *__cds_wfcq_dequeue_nonblocking(cds_wfcq_head_ptr_t head,
						     struct cds_wfcq_tail *tail)
{
	static struct cds_wfcq_node *(*real)(cds_wfcq_head_ptr_t, struct cds_wfcq_tail *);
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "__cds_wfcq_dequeue_nonblocking");
	if (atomic_exchange(&post_on_dequeue, 0))
		assert_int_equal(vsched_post_payload(dq_vcpu, K_IRQ, &dq_node.node), 0);
	return real(head, tail);
}

struct late_post {
	struct vsched_vcpu *v;
	struct irq *q;
	int rc;
};

static void *late_poster(void *arg)
{
	struct late_post *lp = arg;
	lp->rc = vsched_post_payload(lp->v, K_IRQ, &lp->q->node);
	return NULL;
}

/* lp's post on a thread of its own, returned paused at `where`. */
static void start_paused_poster(struct late_post *lp, int where, pthread_t *b)
{
	atomic_store(&paused, 0);
	atomic_store(&released, 0);
	atomic_store(&pause_at, where);
	assert_int_equal(pthread_create(b, NULL, late_poster, lp), 0);
	while (!atomic_load(&paused))
		usleep(100);
}

struct destroy_call {
	struct vsched_vcpu *v;
	int rc;
	atomic_int returned;
	unsigned dropped_at_return;
};

static void *destroyer(void *arg)
{
	struct destroy_call *d = arg;
	d->rc = vsched_vcpu_destroy(d->v);
	d->dropped_at_return = dropped;
	atomic_store(&d->returned, 1);
	return NULL;
}

/* A poster paused at `where` inside its enqueue (counted in: it passed
 * the destroy check), `extra` payloads posted behind it, then a destroy on
 * another thread: the destroy does not return while the poster is paused,
 * and when it returns every accepted payload has gone to payload_drop;
 * the paused post returns 0 and hands back nothing more. */
static void destroy_against_paused_poster(int where, unsigned extra)
{
	struct irq q[9] = { 0 };
	struct vsched_host_ops ops = { .payload_drop = drop };
	struct late_post lp = { 0 };
	struct destroy_call d = { 0 };
	pthread_t b, t;
	struct vsched_vm *vm = make_vm(&ops, 0);
	declare(vm, K_IRQ, "irq", 1, VSCHED_REQ_PAYLOAD, on_irq, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	lp.v = d.v = make_vcpu(vm, 0);
	lp.q = &q[0];
	dropped = 0;
	start_paused_poster(&lp, where, &b);
	for (unsigned i = 1; i <= extra; i++)
		assert_int_equal(vsched_post_payload(lp.v, K_IRQ, &q[i].node), 0);
	assert_int_equal(pthread_create(&t, NULL, destroyer, &d), 0);
	usleep(20000);
	/* Not a timing claim: it cannot return while the poster is paused. */
	assert_int_equal(atomic_load(&d.returned), 0);
	atomic_store(&released, 1);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(d.rc, 0);
	assert_int_equal(d.dropped_at_return, extra + 1);
	assert_int_equal(pthread_join(b, NULL), 0);
	assert_int_equal(lp.rc, 0);
	assert_int_equal(dropped, extra + 1);
	vsched_vm_destroy(vm);
	assert_int_equal(dropped, extra + 1); /* nothing left for the VM */
}

/* Paused between its tail exchange and its link, with payloads queued
 * behind the gap. Found by an outside trial: the destroy's drain stopped
 * at the gap and returned, and the payloads behind it stayed until the
 * VM's destroy. */
static void test_destroy_drains_past_a_midway_enqueue(void **state)
{
	(void)state;
	destroy_against_paused_poster(PAUSE_LINK, 8);
}

/* Paused before anything is queued (its check passed). Before: the
 * destroy's drain found nothing and returned, and the payload queued after
 * it stayed on the dead vCPU until the VM's destroy. */
static void test_late_payload_post_handed_back(void **state)
{
	(void)state;
	destroy_against_paused_poster(PAUSE_BEFORE, 0);
}

static unsigned repost_calls;
static void on_repost(struct vsched_vcpu *v, unsigned kind,
		      struct vsched_payload *p, void *arg)
{
	(void)arg;
	if (p == &dq_node.node && ++repost_calls < 50)
		assert_int_equal(vsched_post_payload(v, kind, p), 0); /* again */
}

/* A pass that finds its kind's queue empty when it begins delivers
 * nothing. A review found the bound lost there: the queue's own node, the
 * tail of an empty queue, is never dequeued, so a payload queued right
 * after the tail was read (here: by the interposed dequeue) made the pass
 * run until its handler stopped re-posting. The state (the bit set, the
 * queue empty) is that of a poster whose node an earlier pass delivered
 * before the poster set its bit. */
static void test_pass_from_empty_queue_bounded(void **state)
{
	struct irq q[2] = { 0 };
	struct late_post lp = { 0 };
	pthread_t b;
	(void)state;
	struct vsched_vm *vm = make_vm(NULL, 0);
	declare(vm, K_IRQ, "irq", 1, VSCHED_REQ_PAYLOAD, on_repost, NULL, 0);
	assert_int_equal(vsched_request_finalize(vm, 0), 0);
	lp.v = dq_vcpu = make_vcpu(vm, 0);
	lp.q = &q[0];
	start_paused_poster(&lp, PAUSE_LINKED, &b);
	/* Another payload sets the bit; the pass delivers both. */
	assert_int_equal(vsched_post_payload(lp.v, K_IRQ, &q[1].node), 0);
	assert_int_equal(vsched_service(lp.v), 1);
	atomic_store(&released, 1);
	assert_int_equal(pthread_join(b, NULL), 0);
	assert_int_equal(lp.rc, 0); /* its bit is set now, its node gone */

	repost_calls = 0;
	atomic_store(&post_on_dequeue, 1);
	assert_int_equal(vsched_service(lp.v), 1); /* the kind, with nothing to give */
	assert_true(repost_calls <= 1);
	atomic_store(&post_on_dequeue, 0);
	assert_int_equal(vsched_vm_destroy(vm), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_payload_exactly_once_fifo),
		cmocka_unit_test(test_destroy_drops_payloads),
		cmocka_unit_test(test_pass_delivers_what_was_queued),
		cmocka_unit_test(test_pass_from_empty_queue_bounded),
		cmocka_unit_test(test_destroy_drains_past_a_midway_enqueue),
		cmocka_unit_test(test_late_payload_post_handed_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
