/* SPDX-License-Identifier: MIT */
/* A vCPU's life (create, destroy) and its thread's side of the request
 * queues: vsched_service() hands pending kinds to their handlers in rank
 * order, the payload queues drain. The mode word is lib/mode.c's. */
#include "mode.h"
#include "contract.h"

int vsched_vcpu_create(struct vsched_vm *vm, unsigned id, void *user,
		       struct vsched_vcpu **out)
{
	struct vsched_vcpu *v, *expected = NULL;
	size_t size;
	int rc = 0;

	if (!vm || !out)
		return VSCHED_EINVAL;
	*out = NULL;
	if (id >= vm->max_vcpus)
		return VSCHED_ELIMIT;
	pthread_mutex_lock(&vm->lock);
	if (!vm->table.finalized) {
		rc = VSCHED_ENOTFINAL;
		goto out;
	}
	if (atomic_load_explicit(&vm->vcpus[id], memory_order_relaxed)) {
		rc = VSCHED_EEXIST;
		goto out;
	}
	size = sizeof(*v) + vm->table.npayload * sizeof(v->queues[0]);
	v = vsched__alloc(&vm->alloc, size);
	if (!v) {
		rc = VSCHED_ENOMEM;
		goto out;
	}
	v->vm = vm;
	v->user = user;
	v->id = id;
	v->alloc_size = size;
	for (unsigned i = 0; i < vm->table.npayload; i++)
		__cds_wfcq_init(&v->queues[i].head, &v->queues[i].tail);
	atomic_init(&v->mode, VSCHED_MODE_OUTSIDE_GUEST);
	for (unsigned k = 0; k < VSCHED_MAX_KINDS; k++)
		atomic_init(&v->post_rank[k], vsched__post_rank_of(&vm->table, k));
	vsched__sleeper_init(&v->sl, vm, &v->mode);
	atomic_compare_exchange_strong_explicit(&vm->vcpus[id], &expected, v,
						memory_order_release,
						memory_order_relaxed);
	*out = v;
out:
	pthread_mutex_unlock(&vm->lock);
	return rc;
}

/* A marker of the calling thread: the address of a thread-local byte,
 * distinct for every live thread. */
static const void *thread_marker(void)
{
	static __thread char marker;

	return &marker;
}

int vsched_vcpu_destroy(struct vsched_vcpu *v)
{
	struct vsched_vm *vm;
	struct vsched_vcpu *self;
	uint32_t m;
	int rc;

	if (!v)
		return VSCHED_EINVAL;
	vm = v->vm;
	pthread_mutex_lock(&vm->lock);
	/* Only from OUTSIDE_GUEST (lib/contract.h), and with a CAS from the
	 * word seen there: a vCPU in the guest or inside vsched_vcpu_block()
	 * is still its thread's, and its thread's next exchange (the exit)
	 * would overwrite DESTROYED. A sleeper that raced the CAS fails its
	 * arm's CAS on DESTROYED and returns VSCHED_EDESTROYED (protocol.md
	 * "Destroy against a sleeper"). */
	m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	if (atomic_load_explicit(&v->sl.in_engine, memory_order_relaxed)) {
		pthread_mutex_unlock(&vm->lock);
		return VSCHED_ESTATE; /* inside vsched_vcpu_block() (a hook) */
	}
	/* Inside a service pass on another thread (its own handler may
	 * destroy it: a hot-unplug request): the pass would go on with a
	 * destroyed vCPU's handlers, and its payloads drained under it. A
	 * check, as above: it catches the VMM that did not stop the vCPU's
	 * thread first. */
	const void *pass = atomic_load_explicit(&v->in_service, memory_order_relaxed);
	if (pass && pass != thread_marker()) {
		pthread_mutex_unlock(&vm->lock);
		return VSCHED_ESTATE;
	}
	do {
		if ((rc = vsched__allowed(VSCHED__C_VCPU_DESTROY, m))) {
			pthread_mutex_unlock(&vm->lock);
			return rc;
		}
	} while (!atomic_compare_exchange_weak_explicit(
		&v->mode, &m, vsched__mode_with(m, VSCHED_MODE_DESTROYED),
		memory_order_seq_cst, memory_order_relaxed));
	/* From here posts fail with VSCHED_EDESTROYED. A payload post that
	 * counted itself in before this CAS may still be queueing its
	 * payload: the drain below waits for it (vsched__payload_quiesce()). */
	/* Inline posts take the slow path, which says VSCHED_EDESTROYED. */
	for (unsigned k = 0; k < VSCHED_MAX_KINDS; k++)
		atomic_store_explicit(&v->post_rank[k], -1, memory_order_relaxed);
	vsched__timers_unlink(v);
	self = v;
	atomic_compare_exchange_strong(&vm->vcpus[v->id], &self, NULL);
	v->next_dead = vm->graveyard;
	vm->graveyard = v;
	pthread_mutex_unlock(&vm->lock);
	vsched__sleeper_retire(&v->sl);
	/* A poster that won the word just before it said DESTROYED may still
	 * be about to write the kick eventfd or call the kick or wake
	 * callback: wait for those callouts (internal.h) before the eventfd
	 * is closed and before returning, so that no write lands in a reused
	 * fd number and no callback runs after destroy returned. */
	vsched__sleeper_quiesce(&v->sl);
	vsched__sleeper_fini(&v->sl);
	vsched__payload_quiesce(v);
	vsched__drain_payloads(v);
	return 0;
}

void *vsched_vcpu_user(const struct vsched_vcpu *v)
{
	return v ? v->user : NULL;
}

struct vsched_vm *vsched_vcpu_vm(const struct vsched_vcpu *v)
{
	return v ? v->vm : NULL;
}

int vsched_vcpu_id(const struct vsched_vcpu *v)
{
	return v ? (int)v->id : VSCHED_EINVAL;
}

/* A handler left the pass's state: it destroyed its vCPU, entered the
 * guest, or entered and exited (a whole guest run, as vsched_kvm_run()
 * makes: the word is OUTSIDE_GUEST again, but the committed-entry count
 * the pass began with, `e0`, moved). One more load of the hot line the
 * pass writes anyway. Returns the mode, IN_GUEST for an entry since made
 * and closed. */
static uint32_t after_handler(struct vsched_vcpu *v, uint64_t e0)
{
	uint32_t m = vsched__mode_of(atomic_load_explicit(&v->mode, memory_order_relaxed));

	if (m == VSCHED_MODE_OUTSIDE_GUEST &&
	    atomic_load_explicit(&v->entries, memory_order_relaxed) != e0)
		return VSCHED_MODE_IN_GUEST;
	return m;
}

static void deliver_payloads(struct vsched_vcpu *v, unsigned r,
			     const struct vsched__kind *k, uint64_t e0)
{
	struct vsched__payload_queue *q = &v->queues[k->payload_slot];
	unsigned m;
	/* The pass delivers what was queued when it began, up to the tail
	 * seen now: posters that keep queueing faster than the handler runs
	 * cannot hold the thread in one call (an outside trial's 5.8 s
	 * pass). A payload queued after this load was queued after the bit
	 * was cleared, and its poster sets the bit again after queueing: the
	 * next call delivers it. */
	struct cds_wfcq_node *last = __atomic_load_n(&q->tail.p, __ATOMIC_ACQUIRE);

	/* Empty then (the tail is the queue's own node, which no dequeue
	 * returns, so it could never end the pass): the bit was a poster's
	 * whose node an earlier pass delivered, or one that queues now and
	 * will set it again. */
	if (last == &q->head.node)
		return;

	for (;;) {
		/* Single consumer (this thread). WOULDBLOCK means a poster is
		 * between its enqueue and its bit: it sets the bit after, so
		 * the next service delivers the rest in order. */
		struct cds_wfcq_node *n =
			__cds_wfcq_dequeue_nonblocking(&q->head, &q->tail);
		if (!n || n == CDS_WFCQ_WOULDBLOCK)
			return;
		const bool end = n == last; /* before the handler may reuse it */
		VSCHED__TSAN_ACQUIRE(n);
		vsched__count(&v->vs.payloads[r]);
		k->handler(v, k->kind, (struct vsched_payload *)n, k->arg);
		if (end)
			return;
		/* A handler that destroyed its vCPU or entered the guest ends
		 * the pass here too (the service's check after each kind,
		 * for each payload): destroyed, the drain handed the rest to
		 * payload_drop; in the guest (or back from it), the rest
		 * stays queued and the bit this pass took is set again for
		 * the call after the exit (a review found two more payloads
		 * delivered in guest mode). */
		m = after_handler(v, e0);
		if (VSCHED__UNLIKELY(m != VSCHED_MODE_OUTSIDE_GUEST)) {
			/* The next call services the kind again with no post
			 * behind it, and finishes this service: not counted
			 * again (v->resumed). A poster that set the bit
			 * meanwhile has its own service coming. */
			if (m != VSCHED_MODE_DESTROYED &&
			    !(atomic_fetch_or_explicit(&v->pending, UINT64_C(1) << r,
						       memory_order_relaxed) &
			      (UINT64_C(1) << r)))
				atomic_store_explicit(&v->resumed,
						      atomic_load_explicit(&v->resumed,
									   memory_order_relaxed) |
							      (UINT64_C(1) << r),
						      memory_order_relaxed);
			return;
		}
	}
}

/* With nothing pending this is one load, inline
 * (vsched__service_fast(), <vsched/inline.h>). */
int vsched_service(struct vsched_vcpu *v)
{
	if (VSCHED__UNLIKELY(!v))
		return VSCHED_EINVAL;
	return vsched__service_fast(v);
}

/* A payload kind, or a timer's rank (its expiry may be stale). */
static __attribute__((noinline)) void service_special(struct vsched_vcpu *v,
						      unsigned r, uint64_t e0)
{
	const struct vsched__kind *k = &v->vm->table.by_rank[r];

	if (k->payload_slot >= 0)
		deliver_payloads(v, r, k, e0);
	else if (((v->timer_ranks >> r) & 1) && !vsched__timer_filter(v, r))
		; /* a stale timer expiry, cancelled by its policy */
	else if (k->handler)
		k->handler(v, k->kind, NULL, k->arg);
}

/* Called with requests pending: in guest mode, destroyed, or the pass. */
int vsched__service_slow(struct vsched_vcpu *v)
{
	const struct vsched__disp *d;
	uint64_t w, e0;
	uint32_t m;
	int n = 0;

	w = atomic_load_explicit(&v->pending, memory_order_relaxed);
	if (!w)
		return 0;
	m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	/* Only OUTSIDE_GUEST (lib/contract.h): POLLING or BLOCKED is the
	 * vCPU's thread inside vsched_vcpu_block(), so this is another
	 * thread, which must not run the vCPU's handlers. */
	if (VSCHED__UNLIKELY((n = vsched__allowed(VSCHED__C_SERVICE, m))))
		return n;
	/* Nor from the engine's own hooks (the blocking hook runs with the
	 * word still OUTSIDE_GUEST): handlers inside a block. */
	if (VSCHED__UNLIKELY(atomic_load_explicit(&v->sl.in_engine, memory_order_relaxed)))
		return VSCHED_ESTATE;
	/* Nor from a handler of a pass (a nested pass would run earlier
	 * kinds inside a later kind's handler and take the payload pass's
	 * bound). The owner's flag, relaxed: another thread's pass during
	 * one is the contract's misuse, which this may or may not catch. */
	if (VSCHED__UNLIKELY(atomic_load_explicit(&v->in_service, memory_order_relaxed)))
		return VSCHED_ESTATE;
	atomic_store_explicit(&v->in_service, thread_marker(), memory_order_relaxed);
	e0 = atomic_load_explicit(&v->entries, memory_order_relaxed);
	d = v->vm->table.disp;
	/* One pass in rank order: after servicing rank r, look only at ranks
	 * above r. A handler that raises a later kind is serviced in this
	 * pass; anything that appears below r waits for the next call (and
	 * cancels the entry if it is still pending at the commit). */
	do {
		unsigned r = (unsigned)__builtin_ctzll(w);
		const struct vsched__disp *k = &d[r];

		/* Acquire: pairs with the poster's release of the bit. */
		atomic_fetch_and_explicit(&v->pending, ~(UINT64_C(1) << r),
					  memory_order_acquire);
		const uint64_t resumed = atomic_load_explicit(&v->resumed, memory_order_relaxed);
		if (VSCHED__UNLIKELY(resumed & (UINT64_C(1) << r))) /* counted already */
			atomic_store_explicit(&v->resumed, resumed & ~(UINT64_C(1) << r),
					      memory_order_relaxed);
		else
			vsched__count(&v->vs.serviced[r]);
		n++;
		if (VSCHED__UNLIKELY(k->special | ((v->timer_ranks >> r) & 1)))
			service_special(v, r, e0);
		else if (k->handler)
			k->handler(v, k->kind, NULL, k->arg);
		/* A handler that destroyed its vCPU (hot-unplug) ends the
		 * pass: no handler runs on a destroyed vCPU. One that
		 * entered the guest (vsched_vcpu_enter() from a handler
		 * returns 0: its inline fast path cannot know) ends it too,
		 * refused after the fact: the later handlers would run in
		 * guest mode. So does one that entered and exited (ran the
		 * guest inside the pass). The word stays as the handler left
		 * it (the caller exits), the later kinds pending. */
		m = after_handler(v, e0);
		if (VSCHED__UNLIKELY(m != VSCHED_MODE_OUTSIDE_GUEST)) {
			if (m != VSCHED_MODE_DESTROYED)
				n = VSCHED_ESTATE;
			break;
		}
		/* The ranks above r (none after 63). */
		w = atomic_load_explicit(&v->pending, memory_order_relaxed) &
		    (~UINT64_C(1) << r);
	} while (w);
	atomic_store_explicit(&v->in_service, NULL, memory_order_relaxed);
	return n;
}
