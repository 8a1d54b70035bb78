/* SPDX-License-Identifier: MIT */
/* Private to lib/: object layouts and the mode-word helpers shared by the
 * request, vCPU and block sources. Internal non-static names are vsched__. */
#ifndef VSCHED__INTERNAL_H
#define VSCHED__INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <urcu/wfcqueue.h>

#include <vsched/vsched.h>

#include "arch/arch.h"

#define VSCHED__CACHELINE 64
#define VSCHED__ALIGNED __attribute__((aligned(VSCHED__CACHELINE)))
#define VSCHED__LIKELY(x) __builtin_expect(!!(x), 1)
#define VSCHED__UNLIKELY(x) __builtin_expect(!!(x), 0)

/*
 * The mode word (32 bits, so that it is also the futex word):
 *   bits 0-2  enum vsched_mode
 *   bit  3    ACK_WAITERS: a WAIT poster sleeps on this word until the vCPU
 *             leaves guest mode
 *   bits 4-31 entry generation, incremented by every vsched_vcpu_enter();
 *             a WAIT poster that saw IN_GUEST at generation g is
 *             acknowledged once the word shows another generation or a
 *             mode outside the guest.
 * Only the vCPU's own thread changes the generation. Posters change the word
 * only with a CAS from IN_GUEST (to EXITING_GUEST), from BLOCKED (to
 * OUTSIDE_GUEST, the wakeup) or to set ACK_WAITERS while in guest mode, so
 * every transition the vCPU makes out of those states is an exchange.
 */
#define VSCHED__MODE_MASK 0x7u
#define VSCHED__ACK_WAITERS 0x8u
#define VSCHED__GEN_ONE 0x10u
#define VSCHED__GEN_MASK (~0xfu)

static inline unsigned vsched__mode_of(uint32_t m)
{
	return m & VSCHED__MODE_MASK;
}

static inline bool vsched__in_guest(uint32_t m)
{
	unsigned mode = vsched__mode_of(m);
	return mode == VSCHED_MODE_IN_GUEST || mode == VSCHED_MODE_EXITING_GUEST;
}

/* One declared kind. After finalisation, the table is indexed by rank (the
 * service order) and a pending word's bit r is the kind of rank r. */
struct vsched__kind {
	char name[32];
	unsigned kind;
	unsigned priority;
	unsigned flags;
	vsched_request_fn handler;
	void *arg;
	uint64_t may_raise; /* kind bits */
	int payload_slot;   /* index into vcpu->queues, or -1 */
};

struct vsched__table {
	bool finalized;
	unsigned nkinds;
	unsigned npayload;
	uint64_t declared; /* kind bits */
	int8_t rank_of[VSCHED_MAX_KINDS];
	struct vsched__kind by_kind[VSCHED_MAX_KINDS];
	struct vsched__kind by_rank[VSCHED_MAX_KINDS];
	int err;
	unsigned err_kind, err_raised;
};

struct vsched__payload_queue {
	struct __cds_wfcq_head head;
	struct cds_wfcq_tail tail;
} VSCHED__ALIGNED;

struct vsched_vm {
	struct vsched_host_ops ops; /* defaults filled in */
	struct vsched_allocator alloc;
	uint64_t poll_ns;
	void *user;
	unsigned max_vcpus;
	pthread_mutex_t lock; /* table declaration, vCPU create/destroy */
	struct vsched_vcpu *_Atomic *vcpus;
	struct vsched_vcpu *graveyard;
	struct vsched__table table;
};

struct vsched_vcpu {
	/* Hot line: written by posters and by the vCPU. */
	_Atomic uint64_t pending VSCHED__ALIGNED; /* bit = rank */
	_Atomic uint32_t mode;

	/* Read-mostly line: stays shared in every poster's cache. */
	struct vsched_vm *vm VSCHED__ALIGNED;
	void *user;
	unsigned id;
	size_t alloc_size;
	struct vsched_vcpu *next_dead;

	/* Written by posters (relaxed RMWs). */
	struct {
		_Atomic uint64_t kicks_sent;
		_Atomic uint64_t wakeups;
		_Atomic uint64_t coalesced[VSCHED_MAX_KINDS]; /* by rank */
	} ps VSCHED__ALIGNED;

	/* Written by the vCPU's thread only (relaxed load + store). */
	struct {
		_Atomic uint64_t entries;
		_Atomic uint64_t cancelled_entries;
		_Atomic uint64_t spurious_wakeups;
		_Atomic uint64_t serviced[VSCHED_MAX_KINDS];  /* by rank */
		_Atomic uint64_t cancelled[VSCHED_MAX_KINDS]; /* by rank */
		_Atomic uint64_t payloads[VSCHED_MAX_KINDS];  /* by rank */
	} vs VSCHED__ALIGNED;

	struct vsched__payload_queue queues[]; /* table.npayload of them */
};

/* Single-writer counter increment: readers on other threads see whole
 * values, and the owner pays no locked instruction. */
static inline void vsched__count(_Atomic uint64_t *c)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static inline void vsched__count_shared(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Move the vCPU out of IN_GUEST/EXITING/BLOCKED/POLLING into `mode`,
 * keeping the generation, and release WAIT posters. Returns the old word. */
static inline uint32_t vsched__mode_leave(struct vsched_vcpu *v, unsigned mode)
{
	uint32_t m = atomic_load_explicit(&v->mode, memory_order_relaxed);
	uint32_t old = atomic_exchange_explicit(
		&v->mode, (m & VSCHED__GEN_MASK) | mode, memory_order_seq_cst);
	if (old & VSCHED__ACK_WAITERS)
		v->vm->ops.wake((uint32_t *)&v->mode, v->vm->ops.ctx);
	return old;
}

/* Hand every queued payload of rank `rank` to the payload_drop callback. */
void vsched__drain_payloads(struct vsched_vcpu *v);

/* Default host operations (futex and CLOCK_MONOTONIC). */
int vsched__futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns,
		       void *ctx);
void vsched__futex_wake(uint32_t *word, void *ctx);
uint64_t vsched__clock_now(void *ctx);

void *vsched__alloc(const struct vsched_allocator *a, size_t size);
void vsched__free(const struct vsched_allocator *a, void *p, size_t size);

#endif /* VSCHED__INTERNAL_H */
