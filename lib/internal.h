/* SPDX-License-Identifier: MIT */
/* Private to lib/: object layouts and the declarations shared by its
 * sources. The mode word's protocol is lib/mode.h, the OS layer lib/os.h.
 * Internal non-static names are vsched__. */
#ifndef VSCHED__INTERNAL_H
#define VSCHED__INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/epoll.h>

#include <urcu/wfcqueue.h>

/* The library's own build of the inline fast paths (<vsched/inline.h>)
 * fires the `post` probe; defined below, once struct vsched_vcpu is. */
struct vsched_vcpu;
static inline void vsched__trace_post(struct vsched_vcpu *v, unsigned kind);
#define VSCHED__INLINE_POST_HOOK(v, kind) vsched__trace_post(v, kind)
#include <vsched/vsched.h>

#include "arch/arch.h"
#include "os.h"
#include "trace.h"

#define VSCHED__CACHELINE 64
#define VSCHED__ALIGNED __attribute__((aligned(VSCHED__CACHELINE)))
#define VSCHED__LIKELY(x) __builtin_expect(!!(x), 1)
#define VSCHED__UNLIKELY(x) __builtin_expect(!!(x), 0)
/* Classes of a timed sleep's time left whose lateness is learnt apart
 * (lib/sleep.c): below 8 us, then doublings up to 1 ms and beyond. */
#define VSCHED__LATE_CLASSES 9
/* A running median (lib/sleep.c, vsched__median_add()): ns (0: no sample
 * yet), its last step and that step's direction, samples (up to 255). */
struct vsched__median {
	uint32_t est, step;
	bool up;
	uint8_t n;
};
/* A mean of CPU samples (lib/sleep.c, mean_add()): ns (0: no
 * sample yet), the same in 1/256 ns (what it is kept in: a step of
 * 1/CPU_MEAN_N of a difference below CPU_MEAN_N ns is not lost) and
 * samples (up to CPU_MEAN_N, then an EWMA of 1/CPU_MEAN_N). */
struct vsched__mean {
	uint32_t est, fx;
	uint16_t n;
};
/* Timed sleeps of one mechanism and class of time left (lib/sleep.c): how
 * late the kernel wakes them; the thread CPU of a whole timed wait that
 * asked early (spins and re-sleeps included) and of one that asked for
 * its deadline; how far short of the lateness they aim (ns) and the mean
 * spin that left (ns a sleep); which kind the next sampled one is and
 * whether early ones are dearer (`dear`); its timed waits, counted to
 * sample them, the samples it started while it learnt (`tries`: a
 * waker may end every one of them), and the samples taken since it
 * learnt that left its verdict as it was (`stable`, up to
 * CPU_SAMPLE_STABLE: its sampling backs off). */
struct vsched__late {
	struct vsched__median late;
	struct vsched__mean cpu_early, cpu_plain;
	uint32_t keep, spin;
	uint16_t waits, tries, stable;
	bool probe_plain, dear;
};

/* A request flag's rules, in one place: every flag a kind may declare is
 * either one the inline post handles (NO_WAKEUP: the kick decision reads
 * it; RERAISE: only the table's validation reads it, a post ignores it)
 * or one that sends every post of the kind to the library (WAIT waits
 * for an acknowledgement, PAYLOAD queues a node): vsched__post_rank_of().
 * A new flag goes into exactly one of the two, or the assert fails. */
#define VSCHED__REQ_INLINE_FLAGS (VSCHED_REQ_NO_WAKEUP | VSCHED_REQ_RERAISE)
#define VSCHED__REQ_SLOW_FLAGS (VSCHED_REQ_WAIT | VSCHED_REQ_PAYLOAD)
#define VSCHED__REQ_FLAGS (VSCHED__REQ_INLINE_FLAGS | VSCHED__REQ_SLOW_FLAGS)
_Static_assert(!(VSCHED__REQ_INLINE_FLAGS & VSCHED__REQ_SLOW_FLAGS),
	       "a request flag is either inline or slow");

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

/* vsched_service()'s view of a rank: what its loop reads per pending
 * kind, in 32 bytes. `special`: a payload kind (the loop then reads the
 * full struct vsched__kind). */
struct vsched__disp {
	vsched_request_fn handler;
	void *arg;
	unsigned kind;
	unsigned special;
	uint64_t reserved;
};

struct vsched__table {
	bool finalized;
	unsigned nkinds;
	unsigned npayload;
	uint64_t declared; /* kind bits */
	int8_t rank_of[VSCHED_MAX_KINDS];
	struct vsched__kind by_kind[VSCHED_MAX_KINDS];
	struct vsched__kind by_rank[VSCHED_MAX_KINDS];
	struct vsched__disp disp[VSCHED_MAX_KINDS]; /* by rank */
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
	struct vsched__os_set os;   /* -1s until an fd is added */
	_Atomic bool use_evfd;      /* fds registered: sleep in epoll (fd_add) */
	_Atomic bool sleep_evfd;    /* this arm's sleep is epoll's: wake evfd */
	_Atomic uint32_t callouts;  /* wakers inside a callout (see below) */
	/* When the last waker that found it BLOCKED woke it (the VM's clock;
	 * 0: taken): the owner times its wakeup from it. A measurement, no
	 * part of the protocol: relaxed. */
	_Atomic uint64_t wake_stamp;
	_Atomic bool guest_poll_off;
	/* The owner is inside the engine (also where its word says
	 * OUTSIDE_GUEST: its hooks, the first look, the accounting). */
	_Atomic bool in_engine;
	/* Its own poll policy (NULL: its default, the VM's for a vCPU and
	 * the waiter profile for a waiter), RCU-protected as the VM's;
	 * own_gen is bumped by each vsched__sleeper_set_poll(). */
	struct vsched__poll_cfg *_Atomic own_poll;
	_Atomic uint64_t own_gen;
	/* Owner thread only. */
	unsigned nfds;              /* user fds registered */
	unsigned nlook;             /* of which not doorbells: the poll looks */
	unsigned nslots;            /* size of fd_of/tag_of, grown by fd_add */
	int *fd_of;                 /* user fds by slot, -1 when free */
	uint64_t *tag_of;
	uint8_t *bell_of;           /* VSCHED_FD_DOORBELL, by slot: BELL_* */
	int *rfd_of;                /* BELL_READ: vsched's own dup, read at a
				     * ring (the user's number may be closed
				     * and name another file); else -1 */
	uint32_t *ev_of;            /* the epoll events each slot was added with */
	struct epoll_event *ev;     /* nslots + 2 events, for one epoll_pwait */
	struct vsched_poll_state poll VSCHED__ALIGNED;
	uint64_t poll_gen;          /* the VM's generation of `params` */
	uint64_t own_gen_seen;      /* own_gen when `params` was taken */
	bool own_params;            /* `params` is the sleeper's own policy */
	bool waiter_profile;        /* set at creation: a waiter's default is
				     * vsched_poll_defaults_waiter(ADAPTIVE),
				     * not the VM's policy */
	/* The learnt lateness of timed sleeps (lib/sleep.c), by mechanism
	 * (LATE_FUTEX, LATE_EPOLL) and class of time left. */
	struct vsched__late late[2][VSCHED__LATE_CLASSES];
	uint64_t cpu0;              /* a CPU sample's start (its arm, or its plan), or 0 */
	uint64_t cpu_read;          /* what the read of cpu0 cost (vsched__sample_start()) */
	unsigned cpu_reads_timed;   /* of the samples that timed it, up to CPU_READ_TIMED */
	bool cpu_whole;             /* the sample counts only as a whole timed wait */
	bool tfd_looked;            /* a look was handed the fired timerfd (lib/fds.c) */
	uint64_t tfd_at;            /* the timerfd's expiry as last set */
	uint64_t kd_now, kd_dl, kd_len; /* injected clock: the last conversion */
	struct vsched__median cpu_med; /* measured CPU of a sleep */
	uint64_t wake_cost_ns;      /* measured latency of a woken sleep (EWMA) */
	unsigned sleeps;            /* sleeps armed and short waits: sampled */
	/* Host contention (lib/sleeper.h, CONTEND_*), as params.contention
	 * asks: the preemption back-off (no polling until `until`, VM clock;
	 * its length); the runnable-count sampler (`fd`: the process's
	 * /proc/loadavg fd while the params in force ask for the sampler,
	 * else -1; `pfd`: that fd once taken, -1: none or a read failed;
	 * `got`: pfd was taken; `busy`: the sample taken at `sampled` said
	 * more runnable tasks than CPUs). `ref`: this sleeper holds a
	 * reference to the process's fd (under lib/sleeper.c's load_lock:
	 * a set_poll may take it on another thread). */
	struct {
		uint64_t until, backoff, sampled;
		int fd, pfd;
		bool got, ref, busy;
	} ct;
	struct vsched_poll_params params; /* the policy in force */
	/* Owner-only, but read by a destroy that raced the owner out of its
	 * contract: relaxed atomics (plain moves), so that such a race costs
	 * the contention count one at most, never a data race. */
	_Atomic bool counted_runnable;
	/* The last halt, for the policy to learn at the next halt's start
	 * (lib/block.c, learn()): not between "a reason to run" and the
	 * return. */
	bool lesson_pending, lesson_valid;
	uint64_t lesson_window, lesson_halt_ns;
	uint64_t lesson_wake_ns;    /* its wakeup, timed (0: not timed) */
	/* Written by the owner, read anywhere. */
	struct {
		_Atomic uint64_t successful, attempted, invalid;
		_Atomic uint64_t success_ns, fail_ns, wait_ns, vetoed;
		_Atomic uint64_t skips, stores, spurious, fd_checks, contended;
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
	/* Waiters created on the VM and not destroyed (lib/waiter.c): the VM
	 * is not freed under them (vsched_vm_destroy()). */
	_Atomic unsigned nwaiters;
	/* payload_drop callbacks running (vsched__drain_payloads()): a
	 * vsched_vm_destroy() from one is refused, not a free under it. */
	_Atomic unsigned in_drop;
	struct vsched__table table;
};

struct vsched_vcpu {
	/* The hot layout, ABI: struct vsched_vcpu_hot (<vsched/inline.h>),
	 * whose inline code hypervisors compile in; checked below.
	 * Hot line: written by posters and by the vCPU. */
	_Atomic uint64_t pending VSCHED__ALIGNED; /* bit = rank */
	_Atomic uint32_t mode;
	uint32_t hot_reserved0;
	_Atomic uint64_t entries;   /* vCPU thread only (relaxed load + store) */
	/* Posters' read-mostly line: by kind, the rank an inline post sets,
	 * -1 for the slow path (undeclared, WAIT, PAYLOAD, destroyed). */
	_Atomic int8_t post_rank[VSCHED_MAX_KINDS] VSCHED__ALIGNED;

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
		/* Payload posts between their count-in and their bit
		 * (protocol.md "Destroy against a payload poster"). */
		_Atomic uint32_t payload_posts;
	} ps VSCHED__ALIGNED;

	/* Written by the vCPU's thread only (relaxed load + store). */
	struct vsched__sleeper sl;
	/* Inside vsched_service()'s pass: its handlers (and the timer
	 * filter's host callback) run. What a pass forbids is refused
	 * while it is set: a nested pass, destroying the VM, and
	 * destroying the vCPU from a thread other than the pass's. Set to
	 * the pass's thread's marker (lib/vcpu.c thread_marker()), NULL
	 * outside a pass. */
	_Atomic(const void *) in_service;
	/* Kinds (by rank) whose payload pass a handler ended by entering the
	 * guest, their bit set again for the rest: the next service of one
	 * finishes that service and is not counted again, and until then
	 * its pending bit is no post (stats.h `posted` stays the posts
	 * made). Written by the owner in its passes, read by the stats. */
	_Atomic uint64_t resumed;
	struct {
		_Atomic uint64_t cancelled_entries;
		_Atomic uint64_t serviced[VSCHED_MAX_KINDS];  /* by rank */
		_Atomic uint64_t cancelled[VSCHED_MAX_KINDS]; /* by rank */
		_Atomic uint64_t payloads[VSCHED_MAX_KINDS];  /* by rank */
	} vs VSCHED__ALIGNED;

	struct vsched__payload_queue queues[]; /* table.npayload of them */
};

#define VSCHED__HOT_SAME(m)                                                     \
	_Static_assert(offsetof(struct vsched_vcpu, m) ==                      \
			       offsetof(struct vsched_vcpu_hot, m) &&          \
		       sizeof(((struct vsched_vcpu *)0)->m) ==                 \
			       sizeof(((struct vsched_vcpu_hot *)0)->m),       \
		       "struct vsched_vcpu_hot: " #m)
VSCHED__HOT_SAME(pending);
VSCHED__HOT_SAME(mode);
VSCHED__HOT_SAME(entries);
VSCHED__HOT_SAME(post_rank);
_Static_assert(sizeof(_Atomic uint64_t) == 8 && _Alignof(_Atomic uint64_t) == 8 &&
		       sizeof(_Atomic uint32_t) == 4 && sizeof(_Atomic int8_t) == 1,
	       "atomics have the layout of their plain types");

static inline void vsched__trace_post(struct vsched_vcpu *v, unsigned kind)
{
	VSCHED__TRACE2(post, v->id, kind);
	(void)v, (void)kind;
}

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

void vsched__sleeper_init(struct vsched__sleeper *s, struct vsched_vm *vm,
			  _Atomic uint32_t *word);
void vsched__sleeper_fini(struct vsched__sleeper *s);
int vsched__sleeper_fd_add(struct vsched__sleeper *s, int fd, uint32_t events,
			   uint64_t tag);
int vsched__sleeper_fd_del(struct vsched__sleeper *s, int fd);
/* Give the sleeper its own poll policy (p NULL: its default again). Any
 * thread; the same RCU scheme as vsched__poll_install(). */
int vsched__sleeper_set_poll(struct vsched__sleeper *s,
			     const struct vsched_poll_params *p);

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
/* Leaving the sleeper's runnable count (destroy). */
void vsched__sleeper_retire(struct vsched__sleeper *s);

/* Timers (lib/timer.c). */
uint64_t vsched__vcpu_earliest(const struct vsched_vcpu *v);
bool vsched__timer_filter(struct vsched_vcpu *v, unsigned rank);
/* VM destroy: destroys the timer service still attached, forgets the list. */
void vsched__timers_free(struct vsched_vm *vm);
/* The VM's timer service's run() is active (lib/tservice.c). */
bool vsched__timers_service_running(struct vsched_vm *vm);
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
/* Check and copy a caller's parameters (lib/abi.h rule). cpu_budget_pct
 * above this (100x the incumbent's CPU) is refused. */
#define VSCHED__POLL_BUDGET_MAX 10000
bool vsched__poll_params_ok(const struct vsched_poll_params *p,
			    struct vsched_poll_params *n);

/* The rank an inline post of `kind` sets, or -1 when its posts must call
 * the library (undeclared, or a slow flag; lib/request.c). */
int8_t vsched__post_rank_of(const struct vsched__table *t, unsigned kind);

/* Hand every queued payload of the vCPU to the payload_drop callback. */
void vsched__drain_payloads(struct vsched_vcpu *v);
/* After DESTROYED is published: wait for the payload posts counted in. */
void vsched__payload_quiesce(struct vsched_vcpu *v);

/* The arch timebase's frequency in Hz (lib/timebase.c). Not built into the
 * library, which needs none: test_arch builds it to check the backends. */
uint64_t vsched__timebase_freq(void);

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

#endif /* VSCHED__INTERNAL_H */
