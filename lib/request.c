/* SPDX-License-Identifier: MIT */
#include <sched.h>
#include <string.h>

#include "mode.h"


/* A kind's name is printed by the stats writers, as a JSON key and inside
 * `name{kind=NAME} value` lines: an identifier, [A-Za-z0-9_.-], needs no
 * escaping in either. */
static bool name_ok(const char *n)
{
	static const char ident[] = "abcdefghijklmnopqrstuvwxyz"
				    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-";

	return n && n[0] && !n[strspn(n, ident)];
}

/* A declared kind already has this name, as the stats writers would print
 * it (copied up to 31 characters): the JSON keys and the `{kind=NAME}`
 * labels of two kinds would be one. vm->lock held. */
static bool name_taken(const struct vsched__table *t, const char *n)
{
	for (uint64_t d = t->declared; d; d &= d - 1) {
		const struct vsched__kind *k = &t->by_kind[__builtin_ctzll(d)];
		if (!strncmp(k->name, n, sizeof(k->name) - 1))
			return true;
	}
	return false;
}

int vsched_request_declare(struct vsched_vm *vm, unsigned kind,
			   const struct vsched_request_desc *d)
{
	struct vsched__table *t;
	struct vsched__kind *k;
	int rc = 0;

	if (!vm || !d || !name_ok(d->name) || (d->flags & ~VSCHED__REQ_FLAGS))
		return VSCHED_EINVAL;
	if ((d->flags & VSCHED_REQ_PAYLOAD) && !d->handler)
		return VSCHED_EINVAL;
	if (kind >= VSCHED_MAX_KINDS)
		return VSCHED_ERANGE;
	t = &vm->table;
	pthread_mutex_lock(&vm->lock);
	if (t->finalized) {
		rc = VSCHED_EFINAL;
	} else if ((t->declared & VSCHED_KIND_BIT(kind)) ||
		   name_taken(t, d->name)) {
		rc = VSCHED_EEXIST;
	} else {
		k = &t->by_kind[kind];
		memset(k, 0, sizeof(*k));
		strncpy(k->name, d->name, sizeof(k->name) - 1);
		k->kind = kind;
		k->priority = d->priority;
		k->flags = d->flags;
		k->handler = d->handler;
		k->arg = d->arg;
		k->may_raise = d->may_raise;
		k->payload_slot = -1;
		t->declared |= VSCHED_KIND_BIT(kind);
		t->nkinds++;
	}
	pthread_mutex_unlock(&vm->lock);
	return rc;
}

static int table_fail(struct vsched__table *t, int err, unsigned k, unsigned r)
{
	t->err = err;
	t->err_kind = k;
	t->err_raised = r;
	return err;
}

/* A kind's may-raise set without its own bit when VSCHED_REQ_RERAISE
 * declares the self-edge: the one edge a pass leaves to the next call. */
static uint64_t may_raise_others(const struct vsched__kind *k)
{
	uint64_t self = k->flags & VSCHED_REQ_RERAISE ? VSCHED_KIND_BIT(k->kind) : 0;

	return k->may_raise & ~self;
}

/* Depth-first search for a cycle in the may-raise graph. colour: 0 white,
 * 1 on the current path, 2 done. Returns 1 and the closing edge on a cycle. */
static int find_cycle(const struct vsched__table *t, unsigned u, uint8_t *colour,
		      unsigned *from, unsigned *to)
{
	uint64_t next = may_raise_others(&t->by_kind[u]);

	colour[u] = 1;
	while (next) {
		unsigned v = (unsigned)__builtin_ctzll(next);
		next &= next - 1;
		if (colour[v] == 1) {
			*from = u;
			*to = v;
			return 1;
		}
		if (colour[v] == 0 && find_cycle(t, v, colour, from, to))
			return 1;
	}
	colour[u] = 2;
	return 0;
}

/* Service order: priority, then kind number. */
static int kind_before(const struct vsched__kind *a, const struct vsched__kind *b)
{
	return a->priority != b->priority ? a->priority < b->priority
					  : a->kind < b->kind;
}

static int finalize_locked(struct vsched__table *t, unsigned flags)
{
	uint8_t colour[VSCHED_MAX_KINDS] = { 0 };
	unsigned order[VSCHED_MAX_KINDS], n = 0, from, to;
	uint64_t d;

	if (t->finalized)
		return VSCHED_EFINAL;
	/* An empty table is valid: a VMM with no requests of its own still
	 * blocks, waits on fds and kicks through vsched. */
	if (flags & ~(unsigned)VSCHED_FINALIZE_ALLOW_LATE_RAISE)
		return table_fail(t, VSCHED_EINVAL, 0, 0);

	for (d = t->declared; d; d &= d - 1) {
		unsigned k = (unsigned)__builtin_ctzll(d);
		uint64_t undeclared = t->by_kind[k].may_raise & ~t->declared;
		if (undeclared)
			return table_fail(t, VSCHED_ERANGE, k,
					  (unsigned)__builtin_ctzll(undeclared));
	}
	for (d = t->declared; d; d &= d - 1) {
		unsigned k = (unsigned)__builtin_ctzll(d);
		if (!colour[k] && find_cycle(t, k, colour, &from, &to))
			return table_fail(t, VSCHED_ECYCLE, from, to);
	}

	/* Insertion sort into service order (at most 64 kinds). */
	for (d = t->declared; d; d &= d - 1) {
		unsigned k = (unsigned)__builtin_ctzll(d), i = n++;
		while (i > 0 && kind_before(&t->by_kind[k], &t->by_kind[order[i - 1]])) {
			order[i] = order[i - 1];
			i--;
		}
		order[i] = k;
	}
	for (unsigned r = 0; r < n; r++)
		t->rank_of[order[r]] = (int8_t)r;

	if (!(flags & VSCHED_FINALIZE_ALLOW_LATE_RAISE)) {
		for (unsigned r = 0; r < n; r++) {
			uint64_t m = may_raise_others(&t->by_kind[order[r]]);
			for (; m; m &= m - 1) {
				unsigned raised = (unsigned)__builtin_ctzll(m);
				if ((unsigned)t->rank_of[raised] <= r) {
					memset(t->rank_of, -1, sizeof(t->rank_of));
					return table_fail(t, VSCHED_EORDER,
							  order[r], raised);
				}
			}
		}
	}

	t->npayload = 0;
	for (unsigned r = 0; r < n; r++) {
		t->by_rank[r] = t->by_kind[order[r]];
		if (t->by_rank[r].flags & VSCHED_REQ_PAYLOAD)
			t->by_rank[r].payload_slot = (int)t->npayload++;
		t->disp[r] = (struct vsched__disp){
			.handler = t->by_rank[r].handler,
			.arg = t->by_rank[r].arg,
			.kind = t->by_rank[r].kind,
			.special = t->by_rank[r].payload_slot >= 0,
		};
	}
	t->err = 0;
	/* Release: a lock-free reader (vsched_broadcast()) that sees it
	 * sees the ranks above. */
	__atomic_store_n(&t->finalized, true, __ATOMIC_RELEASE);
	return 0;
}

int vsched_request_finalize(struct vsched_vm *vm, unsigned flags)
{
	int rc;

	if (!vm)
		return VSCHED_EINVAL;
	pthread_mutex_lock(&vm->lock);
	rc = finalize_locked(&vm->table, flags);
	pthread_mutex_unlock(&vm->lock);
	return rc;
}

/* Any thread, while the setup thread may declare and finalize: both read
 * the table under the VM's lock (whose object is not const). */
int vsched_request_table_error(const struct vsched_vm *vm, unsigned *kind,
			       unsigned *raised)
{
	pthread_mutex_t *lock;
	unsigned k, r;
	int err;

	if (!vm)
		return VSCHED_EINVAL;
	lock = (pthread_mutex_t *)&vm->lock;
	pthread_mutex_lock(lock);
	err = vm->table.err;
	k = vm->table.err_kind;
	r = vm->table.err_raised;
	pthread_mutex_unlock(lock);
	if (kind)
		*kind = k;
	if (raised)
		*raised = r;
	return err;
}

/* A declared kind's name is never written again: it may be used after
 * the lock is dropped. */
const char *vsched_request_name(const struct vsched_vm *vm, unsigned kind)
{
	pthread_mutex_t *lock;
	const char *name = NULL;

	if (!vm || kind >= VSCHED_MAX_KINDS)
		return NULL;
	lock = (pthread_mutex_t *)&vm->lock;
	pthread_mutex_lock(lock);
	if (vm->table.declared & VSCHED_KIND_BIT(kind))
		name = vm->table.by_kind[kind].name;
	pthread_mutex_unlock(lock);
	return name;
}

int8_t vsched__post_rank_of(const struct vsched__table *t, unsigned kind)
{
	int r = t->rank_of[kind];

	if (!((t->declared >> kind) & 1) ||
	    (t->by_rank[r].flags & VSCHED__REQ_SLOW_FLAGS))
		return -1;
	return (int8_t)r;
}

/*
 * Hand every payload queued on a destroyed vCPU to payload_drop: its
 * destroy's, after every payload post counted in has left
 * (vsched__payload_quiesce()), so that every node queued is linked and a
 * non-blocking dequeue finds them all; or the VM's destroy, with no other
 * thread inside a call. One consumer either way.
 */
void vsched__drain_payloads(struct vsched_vcpu *v)
{
	const struct vsched__table *t = &v->vm->table;
	const struct vsched_host_ops *ops = &v->vm->ops;

	for (unsigned r = 0; r < t->nkinds; r++) {
		const struct vsched__kind *k = &t->by_rank[r];
		struct vsched__payload_queue *q;
		struct cds_wfcq_node *n;

		if (k->payload_slot < 0)
			continue;
		q = &v->queues[k->payload_slot];
		for (;;) {
			n = __cds_wfcq_dequeue_nonblocking(&q->head, &q->tail);
			if (!n || n == CDS_WFCQ_WOULDBLOCK)
				break;
			VSCHED__TSAN_ACQUIRE(n);
			if (ops->payload_drop) {
				atomic_fetch_add_explicit(&v->vm->in_drop, 1,
							  memory_order_relaxed);
				ops->payload_drop(v, k->kind,
						  (struct vsched_payload *)n,
						  ops->ctx);
				atomic_fetch_sub_explicit(&v->vm->in_drop, 1,
							  memory_order_relaxed);
			}
		}
	}
}

/*
 * protocol.md "Destroy against a payload poster". A payload post counts
 * itself in before it queues and out after its bit, and re-reads the word
 * in between (DESTROYED: refused, nothing queued); destroy publishes
 * DESTROYED, then waits for the count to drain before it drains the
 * queues. A Dekker pair, as the waker's callout (mode.h): either the post
 * sees DESTROYED, or destroy sees it counted and waits until its node is
 * linked. The count is on the posters' own line. test/model/payload.pml.
 */
static inline bool payload_begin(struct vsched_vcpu *v)
{
	atomic_fetch_add_explicit(&v->ps.payload_posts, 1, memory_order_seq_cst);
	vsched__mb_after_rmw(); /* as vsched__callout_begin() */
	if (vsched__mode_of(atomic_load_explicit(&v->mode, memory_order_seq_cst)) ==
	    VSCHED_MODE_DESTROYED) {
		atomic_fetch_sub_explicit(&v->ps.payload_posts, 1, memory_order_release);
		return false;
	}
	return true;
}

static inline void payload_end(struct vsched_vcpu *v)
{
	VSCHED__TSAN_RELEASE(&v->ps.payload_posts); /* destroy's wait, for TSan */
	atomic_fetch_sub_explicit(&v->ps.payload_posts, 1, memory_order_release);
}

void vsched__payload_quiesce(struct vsched_vcpu *v)
{
	while (atomic_load_explicit(&v->ps.payload_posts, memory_order_seq_cst))
		sched_yield();
	VSCHED__TSAN_ACQUIRE(&v->ps.payload_posts);
}

/* A post that set its bit and then read DESTROYED: refused, and the bit it
 * set taken back, so that the dead vCPU's pending word counts only posts
 * that were accepted (a post that coalesced onto it before the destroy
 * was counted as coalesced). A bit that was set already is left. */
static int refuse_dead(struct vsched_vcpu *v, uint64_t bit, int coalesced)
{
	if (!coalesced)
		atomic_fetch_and_explicit(&v->pending, ~bit, memory_order_relaxed);
	return VSCHED_EDESTROYED;
}

/* Set the bit of rank r, barrier, read the mode, decide. *seen gets the mode
 * word the decision was made on. */
static inline __attribute__((always_inline)) int
post_rank(struct vsched_vcpu *v, unsigned r, unsigned flags,
		     struct vsched_payload *payload, uint32_t *seen)
{
	const uint64_t bit = UINT64_C(1) << r;
	uint64_t old;
	uint32_t m;

	if (VSCHED__UNLIKELY(vsched__mode_of(atomic_load_explicit(
				     &v->mode, memory_order_relaxed)) ==
			     VSCHED_MODE_DESTROYED))
		return VSCHED_EDESTROYED;
	if (payload) {
		struct vsched__payload_queue *q =
			&v->queues[v->vm->table.by_rank[r].payload_slot];
		struct cds_wfcq_node *n = (struct cds_wfcq_node *)payload;
		/* The node queued last, posted again: its re-init would cut
		 * the queue behind it (request.h). The one re-post a load
		 * can see; a node queued further up is not. */
		if (VSCHED__UNLIKELY(__atomic_load_n(&q->tail.p, __ATOMIC_RELAXED) == n))
			return VSCHED_EINVAL;
		if (!payload_begin(v))
			return VSCHED_EDESTROYED;
		cds_wfcq_node_init(n);
		VSCHED__TSAN_RELEASE(n);
		cds_wfcq_enqueue(&q->head, &q->tail, n);
	}
	/* Dekker, poster side: the inline post's own sequence. */
	old = vsched__post_bit(vsched__hot(v), bit, &m);
	/* Destroyed meanwhile: refused as the inline post is, unless a
	 * payload is queued already (its destroy drains it once this post
	 * has counted itself out: payload_drop hands it back). */
	if (VSCHED__UNLIKELY(vsched__mode_of(m) == VSCHED_MODE_DESTROYED) && !payload)
		return refuse_dead(v, bit, old != 0);
	VSCHED__TRACE2(post, v->id, v->vm->table.by_rank[r].kind);
	if (old & bit)
		vsched__count_shared(&v->ps.coalesced[r]);
	/* The common case, a vCPU outside the guest or polling, needs
	 * nothing: decide out of line only for IN_GUEST and BLOCKED. */
	if (VSCHED__UNLIKELY(vsched__mode_of(m) == VSCHED_MODE_IN_GUEST ||
			     vsched__mode_of(m) == VSCHED_MODE_BLOCKED))
		vsched__kick_decide(v, &v->sl, NULL, m, flags | VSCHED__KD_POST);
	if (payload)
		payload_end(v);
	*seen = m;
	return 0;
}

static int lookup(const struct vsched_vm *vm, unsigned kind, unsigned *rank)
{
	int r;

	if (VSCHED__UNLIKELY(kind >= VSCHED_MAX_KINDS))
		return VSCHED_ERANGE;
	r = vm->table.rank_of[kind];
	if (VSCHED__UNLIKELY(r < 0))
		return VSCHED_ERANGE;
	*rank = (unsigned)r;
	return 0;
}

static inline __attribute__((always_inline)) int
post_common(struct vsched_vcpu *v, unsigned kind,
		       struct vsched_payload *payload)
{
	unsigned r, flags;
	uint32_t seen;
	int rc;

	if (VSCHED__UNLIKELY(!v))
		return VSCHED_EINVAL;
	rc = lookup(v->vm, kind, &r);
	if (rc)
		return rc;
	flags = v->vm->table.by_rank[r].flags;
	if (!(flags & VSCHED_REQ_PAYLOAD) != !payload)
		return VSCHED_EINVAL;
	rc = post_rank(v, r, flags, payload, &seen);
	if (rc == 0 && (flags & VSCHED_REQ_WAIT))
		vsched__mode_wait_ack(v, seen);
	return rc;
}

/* The fast path is inline (vsched__post_fast(), <vsched/inline.h>), for
 * hypervisors that opt in and for this exported function alike. */
int vsched_post(struct vsched_vcpu *v, unsigned kind)
{
	if (VSCHED__UNLIKELY(!v))
		return VSCHED_EINVAL;
	return vsched__post_fast(v, kind);
}

/* Whatever the inline post does not do itself: the kind is out of range,
 * undeclared, WAIT or PAYLOAD, or the vCPU is destroyed (post_rank -1). */
int vsched__post_slow(struct vsched_vcpu *v, unsigned kind)
{
	return post_common(v, kind, NULL);
}

/* The inline post set the bit of `kind` and read `m` after the barrier:
 * count a coalesced post, kick or wake. (The table is frozen: its rank is
 * the one the post set even if the vCPU was destroyed since.) */
int vsched__post_finish(struct vsched_vcpu *v, unsigned kind, uint32_t m,
			int coalesced)
{
	unsigned r = (unsigned)v->vm->table.rank_of[kind];

	/* A destroy won the word before our bit was seen: refused, as the
	 * slow path would. */
	if (VSCHED__UNLIKELY(vsched__mode_of(m) == VSCHED_MODE_DESTROYED))
		return refuse_dead(v, UINT64_C(1) << r, coalesced);
	if (coalesced)
		vsched__count_shared(&v->ps.coalesced[r]);
	if (vsched__mode_of(m) == VSCHED_MODE_IN_GUEST ||
	    vsched__mode_of(m) == VSCHED_MODE_BLOCKED)
		vsched__kick_decide(v, &v->sl, NULL, m,
				    v->vm->table.by_rank[r].flags | VSCHED__KD_POST);
	return 0;
}

int vsched_post_payload(struct vsched_vcpu *v, unsigned kind,
			struct vsched_payload *payload)
{
	if (!payload)
		return VSCHED_EINVAL;
	return post_common(v, kind, payload);
}

int vsched_broadcast(struct vsched_vm *vm, const uint64_t *set, unsigned nbits,
		     unsigned kind)
{
	unsigned r, flags;
	int rc, posted = 0;

	if (!vm)
		return VSCHED_EINVAL;
	/* Before finalisation the ranks are being written (a declared kind
	 * has none yet): not ERANGE, which says "not declared". Acquire:
	 * pairs with finalize's release. */
	if (!__atomic_load_n(&vm->table.finalized, __ATOMIC_ACQUIRE))
		return VSCHED_ENOTFINAL;
	rc = lookup(vm, kind, &r);
	if (rc)
		return rc;
	flags = vm->table.by_rank[r].flags;
	if (flags & VSCHED_REQ_PAYLOAD)
		return VSCHED_EINVAL;

	/* In chunks of 64: post and kick all, then wait for each ack, so the
	 * kicked vCPUs exit in parallel. */
	for (unsigned base = 0; base < vm->max_vcpus; base += 64) {
		struct vsched_vcpu *targets[64];
		uint32_t seen[64];
		unsigned cnt = 0;

		for (unsigned i = base; i < base + 64 && i < vm->max_vcpus; i++) {
			struct vsched_vcpu *v;

			if (set && (i >= nbits || !((set[i / 64] >> (i % 64)) & 1)))
				continue;
			v = atomic_load_explicit(&vm->vcpus[i],
						 memory_order_acquire);
			if (!v || post_rank(v, r, flags, NULL, &seen[cnt]) != 0)
				continue;
			posted++;
			targets[cnt++] = v;
		}
		if (flags & VSCHED_REQ_WAIT)
			for (unsigned j = 0; j < cnt; j++)
				vsched__mode_wait_ack(targets[j], seen[j]);
	}
	return posted;
}
