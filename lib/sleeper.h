/* SPDX-License-Identifier: MIT */
/*
 * The parts of a sleeper (struct vsched__sleeper, lib/internal.h) that the
 * engine's files share: the engine (lib/block.c), its OS sleeps
 * (lib/sleep.c), its fd wake sources (lib/fds.c), and its life and policy
 * in force (lib/sleeper.c). All run on the owner thread unless they say
 * otherwise.
 */
#ifndef VSCHED__SLEEPER_H
#define VSCHED__SLEEPER_H

#include "internal.h"

/* epoll data of the sleeper's own fds; a user fd is SLOT_USER + its slot. */
#define SLOT_EVFD VSCHED__OS_EVFD
#define SLOT_TFD VSCHED__OS_TFD
#define SLOT_USER VSCHED__OS_USER
#define FIRST_SLOTS 8 /* the fd tables grow from this, doubling */
#define TFD_UNKNOWN (VSCHED_DEADLINE_NONE - 1) /* fired or never set */

/* Timed sleeps' margins (lib/sleep.c): the futex's starts at Linux's
 * default 50 us timer slack plus a wakeup, the timerfd's at a wakeup. */
#define MARGIN_START 60000
#define MARGIN_START_FD 10000
#define MARGIN_MAX 100000

/* The CPU a sleep costs its thread, for the ADAPTIVE policy when its
 * sleep_cpu_ns is 0: thread CPU time read around one sleep in SLEEP_SAMPLE
 * of the first SLEEP_SAMPLE_EARLY sleeps, then one in SLEEP_SAMPLE_LATE
 * (two clock_gettime syscalls of ~2 us each: at 1 in 8 they were 0.45 us
 * a sleep, a sixth of what the sleep itself costs), only for a sleep that
 * a waker ended before any on-time spin could start, learnt as an EWMA
 * (1/8). */
#define SLEEP_SAMPLE 8
#define SLEEP_SAMPLE_EARLY 64
#define SLEEP_SAMPLE_LATE 128
static inline bool vsched__sleep_sampled(unsigned sleeps)
{
	return sleeps <= SLEEP_SAMPLE_EARLY ? !(sleeps % SLEEP_SAMPLE)
					    : !(sleeps % SLEEP_SAMPLE_LATE);
}

/*
 * Host contention (lib/block.c, poll_window()): the poll loop reads the
 * VM's clock on every iteration anyway, tens of ns apart; two consecutive
 * reads more than CONTEND_GAP_NS apart mean the polling thread lost its
 * CPU meanwhile for longer than an interrupt or a short task's wakeup: a
 * task that got a time slice (or, in a VM, the host ran something else on
 * its vCPU), so polling competes with runnable work. The poll stops there
 * (the halt sleeps) and the sleeper backs off: no polling for
 * CONTEND_MIN_NS, doubling on each new preemption up to CONTEND_MAX_NS.
 * Once the back-off has run out, the next window polls again (a probe); a
 * poll that runs CONTEND_CLEAN_NS or more without such a gap halves the
 * back-off (below CONTEND_MIN_NS: none). No syscall, no fd: a compare per
 * poll iteration. Measured on a loaded 2-core VM (load 4), a spinning
 * thread's gaps: ~1,500/s of 20-50 us (interrupts, short wakeups), ~110/s
 * over 100 us, nearly all of them 1 ms or more (other tasks' slices).
 */
#define CONTEND_GAP_NS 100000
#define CONTEND_CLEAN_NS 20000
#define CONTEND_MIN_NS 1000000
#define CONTEND_MAX_NS 64000000

/* lib/sleep.c: arm `blocked` for one sleep, publishing its wake mechanism
 * first. 0, or VSCHED_ESHUTDOWN (destroyed) / VSCHED_ESTATE (another
 * owner) with nothing written. */
int vsched__arm(struct vsched__sleeper *s, uint32_t blocked);
/* lib/sleep.c: sleep armed at `blocked` until a waker, the deadline (in
 * the VM's clock), a signal or an error. Returns 0 (woken: look again),
 * VSCHED_WAKE_DEADLINE, VSCHED_WAKE_SIGNAL, VSCHED_WAKE_FD (epoll: the
 * ready fds' tags in `res`) or a negative errno. */
int vsched__sleep_futex(struct vsched__sleeper *s, uint32_t blocked,
			uint64_t deadline);
int vsched__sleep_epoll(struct vsched__sleeper *s, uint32_t blocked,
			uint64_t deadline, struct vsched_block_result *res);
/* A sleep that a waker ended, armed at `start` (the VM's clock): learn
 * its wakeup's latency from the stamp the waker left (wake_stamp), if that
 * waker woke this sleep, as an EWMA (1/8) of samples up to WAKE_COST_MAX.
 * Returns the sample, or 0 for none. */
#define WAKE_COST_MAX 1000000
uint64_t vsched__learn_wake_cost(struct vsched__sleeper *s, uint64_t start);
/* A sampled sleep (`cpu0`: the thread's CPU before it) that a waker ended
 * before its deadline `eff`: learn its CPU. */
void vsched__learn_sleep_cpu(struct vsched__sleeper *s, uint64_t cpu0,
			     uint64_t eff);

/* lib/fds.c: the result's fd tags, the user slots, and a check of the fds
 * without sleeping (one epoll_pwait(0); counted by vsched__fd_check()).
 * Both return the number of ready user fds (doorbells not looked at). */
void vsched__add_tag(struct vsched_block_result *res, uint64_t tag);
void vsched__clear_tags(struct vsched_block_result *res);
bool vsched__user_slot(const struct vsched__sleeper *s, uint64_t slot);
unsigned vsched__collect_ready(struct vsched__sleeper *s,
			       struct vsched_block_result *res);
unsigned vsched__fd_check(struct vsched__sleeper *s,
			  struct vsched_block_result *res);
void vsched__free_fd_tables(struct vsched__sleeper *s);

/* lib/sleeper.c: take the policy in force when the VM's generation `vg`
 * or the sleeper's own `og` moved. */
void vsched__refresh_policy(struct vsched__sleeper *s, uint64_t vg, uint64_t og);
/* The previous halt's lesson, at this halt's start (`id`: the vCPU's, or
 * -1, for the trace). */
void vsched__learn(struct vsched__sleeper *s, int id);

#endif /* VSCHED__SLEEPER_H */
