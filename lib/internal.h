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

#include <sys/epoll.h>

#include <urcu/wfcqueue.h>


#include <vsched/vsched.h>

#include "arch/arch.h"
#include "trace.h"

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

/* A VM's poll policy, published with RCU (liburcu-bp) so that it can be
 * replaced while vCPUs block; readers copy it out in a short section. */
struct vsched__poll_cfg {
	struct vsched_poll_params p;
	uint64_t gen;
};

/* The block/poll engine's per-waiter state, shared by vCPUs and generic
 * waiters. Owner-thread fields are written only by the thread that blocks;
 * the counters are read by any thread. */
struct vsched__sleeper {
	/* Read-mostly: posters read these on every kick decision, so they
	 * must not share a line with what the owner writes per halt. */
	struct vsched_vm *vm VSCHED__ALIGNED;
	_Atomic uint32_t *word;     /* the mode word (futex) */
	int epfd, evfd, tfd;        /* -1 until an fd is added */
	_Atomic bool use_evfd;      /* wake through evfd instead of futex */
	_Atomic uint32_t callouts;  /* wakers inside a callout (see below) */
	_Atomic bool guest_poll_off;
	/* Its own poll policy (NULL: the VM's), RCU-protected as the VM's;
	 * own_gen is bumped by each vsched__sleeper_set_poll(). */
	struct vsched__poll_cfg *_Atomic own_poll;
	_Atomic uint64_t own_gen;
	/* Owner thread only. */
	unsigned nfds;              /* user fds registered */
	unsigned nslots;            /* size of fd_of/tag_of, grown by fd_add */
	int *fd_of;                 /* user fds by slot, -1 when free */
	uint64_t *tag_of;
	struct epoll_event *ev;     /* nslots + 2 events, for one epoll_pwait */
	struct vsched_poll_state poll VSCHED__ALIGNED;
	uint64_t poll_gen;          /* the VM's generation of `params` */
	uint64_t own_gen_seen;      /* own_gen when `params` was taken */
	bool own_params;            /* `params` is the sleeper's own policy */
	uint64_t wake_margin_ns;    /* learnt wakeup latency of timed sleeps */
	struct vsched_poll_params params; /* the policy in force */
	bool counted_runnable;
	/* Written by the owner, read anywhere. */
	struct {
		_Atomic uint64_t successful, attempted, invalid;
		_Atomic uint64_t success_ns, fail_ns, wait_ns, vetoed;
		_Atomic uint64_t skips, stores, spurious, fd_checks;
		_Atomic uint64_t hist_success[VSCHED_HIST_BUCKETS];
		_Atomic uint64_t hist_fail[VSCHED_HIST_BUCKETS];
		_Atomic uint64_t hist_wait[VSCHED_HIST_BUCKETS];
	} hs;
};

#define VSCHED__MAX_TIMERS 8

struct vsched_vm {
	struct vsched_host_ops ops; /* defaults filled in */
	struct vsched_timer *_Atomic timers;            /* all, newest first */
	struct vsched_timer_service *_Atomic tsvc;
	struct vsched_allocator alloc;
	struct vsched__poll_cfg *_Atomic poll; /* RCU-protected */
	_Atomic uint64_t poll_gen;             /* bumped by each install */
	unsigned ncpus;
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
	struct vsched_timer *timers[VSCHED__MAX_TIMERS];
	unsigned ntimers;           /* under vm->lock */
	_Atomic unsigned ntimers_pub;
	uint64_t timer_ranks;       /* ranks with a timer */

	/* Written by posters (relaxed RMWs). */
	struct {
		_Atomic uint64_t kicks_sent;     /* by posts */
		_Atomic uint64_t wakeups;        /* by posts */
		_Atomic uint64_t event_kicks;    /* by vsched_vcpu_kick() */
		_Atomic uint64_t event_wakeups;  /* by kicks, timer re-arms */
		_Atomic uint64_t coalesced[VSCHED_MAX_KINDS]; /* by rank */
	} ps VSCHED__ALIGNED;

	/* Written by the vCPU's thread only (relaxed load + store). */
	struct vsched__sleeper sl;
	struct {
		_Atomic uint64_t entries;
		_Atomic uint64_t cancelled_entries;
		_Atomic uint64_t serviced[VSCHED_MAX_KINDS];  /* by rank */
		_Atomic uint64_t cancelled[VSCHED_MAX_KINDS]; /* by rank */
		_Atomic uint64_t payloads[VSCHED_MAX_KINDS];  /* by rank */
	} vs VSCHED__ALIGNED;

	struct vsched__payload_queue queues[]; /* table.npayload of them */
};

/* Single-writer counter increment: readers on other threads see whole
 * values, and the owner pays no locked instruction. */
static inline void vsched__count_n(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

static inline void vsched__count(_Atomic uint64_t *c)
{
	vsched__count_n(c, 1);
}

static inline void vsched__count_shared(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

/* Wake a sleeper whose word a poster has just moved out of BLOCKED. */
void vsched__wake_sleeper(struct vsched__sleeper *s);

/* The kick decision on a mode word `m` read after the post's barrier:
 * kick an IN_GUEST vCPU (v non-NULL), wake a BLOCKED sleeper. Returns 1 if it
 * kicked or woke. A vCPU's kick or wakeup is counted in its ps counters: as
 * a post's when `flags` has VSCHED__KD_POST, else as an event's (`wakeups`
 * is then unused); a generic waiter's (v NULL) wakeup in `wakeups`. */
#define VSCHED__KD_POST 0x80000000u
int vsched__kick_decide(struct vsched_vcpu *v, struct vsched__sleeper *s,
			_Atomic uint64_t *wakeups, uint32_t m, unsigned flags);

void vsched__sleeper_init(struct vsched__sleeper *s, struct vsched_vm *vm,
			  _Atomic uint32_t *word);
void vsched__sleeper_fini(struct vsched__sleeper *s);
int vsched__sleeper_fd_add(struct vsched__sleeper *s, int fd, uint32_t events,
			   uint64_t tag);
int vsched__sleeper_fd_del(struct vsched__sleeper *s, int fd);
/* Give the sleeper its own poll policy (p NULL: the VM's again). Any
 * thread; the same RCU scheme as vsched__poll_install(). */
int vsched__sleeper_set_poll(struct vsched__sleeper *s,
			     const struct vsched_poll_params *p);

/* Read the calling thread's timer slack once (prctl), for the precise
 * futex sleep (lib/block.c). */
void vsched__thread_slack_init(void);

/* A generic waiter's side of the engine (lib/waiter.c). */
struct vsched__wait_hooks {
	vsched_cond_fn cond;
	void *arg;
	void (*before_sleep)(struct vsched_waiter *w, void *hook_arg);
	void (*after_sleep)(struct vsched_waiter *w, void *hook_arg);
	void *hook_arg;
	struct vsched_waiter *w;
};
int vsched__run_engine(struct vsched__sleeper *s,
		       const struct vsched__wait_hooks *h, uint64_t deadline,
		       struct vsched_block_result *res);
/* The caller's result checked (lib/abi.h rule) and copied in, for the
 * engine to fill; vsched__result_out() copies it back. */
int vsched__result_in(struct vsched_block_result *ours,
		      const struct vsched_block_result *theirs);
void vsched__result_out(struct vsched_block_result *theirs,
			const struct vsched_block_result *ours);
void vsched__halt_stats(const struct vsched__sleeper *s,
			struct vsched_halt_stats *out);
/* Leaving the sleeper's runnable count (destroy). */
void vsched__sleeper_retire(struct vsched__sleeper *s);
/* After the sleeper's word says DESTROYED: wait until no waker can still be
 * writing its eventfd (an RCU grace period), so that it can be closed. */
void vsched__sleeper_quiesce(struct vsched__sleeper *s);

/* Timers (lib/timer.c). */
uint64_t vsched__vcpu_earliest(const struct vsched_vcpu *v);
bool vsched__timer_filter(struct vsched_vcpu *v, unsigned rank);
/* VM destroy: destroys the timer service still attached, forgets the list. */
void vsched__timers_free(struct vsched_vm *vm);
/* vCPU destroy, vm->lock held: its timers leave the VM's list. */
void vsched__timers_unlink(struct vsched_vcpu *v);
/* Freeing a vCPU: its timers go with it. */
void vsched__timers_fini(struct vsched_vcpu *v);

/* Poll policy plumbing (lib/poll.c). */
int vsched__poll_install(struct vsched_vm *vm,
			 const struct vsched_poll_params *p);
void vsched__poll_release(struct vsched_vm *vm);
/* The policy on parameters already in our layout (the engine's copy): the
 * public vsched_poll_window()/update() check and copy the caller's first. */
uint64_t vsched__poll_window(const struct vsched_poll_params *p,
			     const struct vsched_poll_state *s);
void vsched__poll_update(const struct vsched_poll_params *p,
			 struct vsched_poll_state *s, uint64_t window_ns,
			 uint64_t halt_ns, bool valid);
void vsched__poll_read(struct vsched_vm *vm, struct vsched__poll_cfg *out);
/* Check and copy a caller's parameters (lib/abi.h rule). */
bool vsched__poll_params_ok(const struct vsched_poll_params *p,
			    struct vsched_poll_params *n);

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

/* Hand every queued payload of the vCPU to the payload_drop callback. */
void vsched__drain_payloads(struct vsched_vcpu *v);

/* Default host operations (futex and CLOCK_MONOTONIC). */
int vsched__futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline_ns,
		       void *ctx);
void vsched__futex_wake(uint32_t *word, void *ctx);
uint64_t vsched__clock_now(void *ctx);
/* The arch timebase's frequency in Hz (lib/timebase.c). */
uint64_t vsched__timebase_freq(void);

/* Arm a timerfd at an absolute CLOCK_MONOTONIC deadline (NONE disarms). */
void vsched__timerfd_at(int fd, uint64_t deadline_ns);
/* A deadline in the VM's clock as a CLOCK_MONOTONIC one (lib/futex.c). */
uint64_t vsched__kernel_deadline(const struct vsched_host_ops *ops,
				 uint64_t deadline);

/* liburcu is not built with ThreadSanitizer: annotate its hand-offs. */
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define VSCHED__TSAN_RELEASE(p) __tsan_release(p)
#define VSCHED__TSAN_ACQUIRE(p) __tsan_acquire(p)
#else
#define VSCHED__TSAN_RELEASE(p) do { } while (0)
#define VSCHED__TSAN_ACQUIRE(p) do { } while (0)
#endif

void *vsched__alloc(const struct vsched_allocator *a, size_t size);
void vsched__free(const struct vsched_allocator *a, void *p, size_t size);

/*
 * A waker's callout: what a poster does after it won the mode word and
 * that touches state vsched_vcpu_destroy() tears down or hands back to the
 * VMM (the kick eventfd write, the `kick` and `wake` host callbacks). The
 * waker counts itself in, then re-reads the word and skips the callout once
 * it says DESTROYED; destroy publishes DESTROYED, then waits for the count
 * to drain (vsched__sleeper_quiesce()). Both sides are seq_cst, a Dekker
 * pair: either the waker sees DESTROYED, or destroy sees it counted and
 * waits. test/model/sleeper.pml, variants NO_GRACE_PERIOD (destroy does not
 * wait) and NO_DESTROYED_CHECK (the waker does not re-read).
 */
static inline bool vsched__callout_begin(struct vsched__sleeper *s)
{
	atomic_fetch_add_explicit(&s->callouts, 1, memory_order_seq_cst);
	if (vsched__mode_of(atomic_load_explicit(s->word, memory_order_seq_cst)) ==
	    VSCHED_MODE_DESTROYED) {
		atomic_fetch_sub_explicit(&s->callouts, 1, memory_order_release);
		return false;
	}
	return true;
}

static inline void vsched__callout_end(struct vsched__sleeper *s)
{
	VSCHED__TSAN_RELEASE(s); /* destroy's wait, for TSan */
	atomic_fetch_sub_explicit(&s->callouts, 1, memory_order_release);
}

#endif /* VSCHED__INTERNAL_H */
