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
/* bell_of[slot]: not a doorbell; a doorbell read when it rings (a pipe);
 * an eventfd doorbell, held edge-triggered and never read (each write
 * rings once: no read syscall a ring). */
#define BELL_NONE 0
#define BELL_READ 1
#define BELL_EDGE 2
#define FIRST_SLOTS 8 /* the fd tables grow from this, doubling */
#define TFD_UNKNOWN (VSCHED_DEADLINE_NONE - 1) /* fired or never set */

/* Timed sleeps (lib/sleep.c): the kernel's lateness, learnt per mechanism
 * and class of time left, starts at LATE_START (the futex: Linux's
 * default 50 us timer slack plus a wakeup) or LATE_START_EPOLL (the
 * timerfd: a wakeup) until a first sample, and samples are capped at
 * LATE_MAX (the use of a larger slack: a thread that has one sleeps that
 * much later rather than spin for it). A sleep asks to be woken early by
 * it less OVERSHOOT_NS (more where the spins would cost over a sixteenth
 * of a sleep) and spins for the rest: the median wakeup then comes about
 * OVERSHOOT_NS after the deadline. spin_pct 100 aims at the deadline
 * itself, MARGIN_PAD before the estimate. */
#define LATE_FUTEX 0
#define LATE_EPOLL 1
#define LATE_START 60000
#define LATE_START_EPOLL 10000
#define LATE_MAX 200000
#define OVERSHOOT_NS 4000
#define MARGIN_PAD 2000
/* A running median's smallest step (vsched__median_add()). */
#define LATE_STEP 1000
/* Whether a class's early sleeps pay (lib/sleep.c, dear()): the thread
 * CPU of whole timed waits of each kind, early and plain in turn,
 * CPU_MEAN_N of each before it is judged (one wait's CPU is bimodal here,
 * 5 or 17 us at 500 us: with 64 the verdict on a 10-15% difference came
 * out wrong in about one bench run in three); sampled in one of
 * CPU_SAMPLE_HUNGRY of the class's timed waits until then (for
 * CPU_SAMPLE_TRIES samples started at most) and one of CPU_SAMPLE_FED
 * after, until CPU_SAMPLE_STABLE samples in a row have left its verdict
 * as it was; then one of CPU_SAMPLE_SETTLED, back to CPU_SAMPLE_FED when
 * the verdict changes (a settled class still measures each kind once in
 * 2 * CPU_SAMPLE_SETTLED of its waits, so that a change of the host's
 * costs still turns it). Two thread-CPU clock syscalls a sample (three
 * on a sleeper's first CPU_READ_TIMED): ~0.7 us a wait, then ~0.09 us,
 * then ~0.02 us, here. Early ones become dear above
 * DEAR_ABOVE/32 of the budget (cpu_budget_pct of the plain ones' CPU),
 * and pay again at DEAR_BELOW/32 of it: the budget itself (at 34/32 and
 * 33/32 a class of 100 us waits on this host settled early at 1.05-1.08x
 * its plain ones' CPU, and cost 1.13x clock_nanosleep's). */
#define CPU_MEAN_N 256
#define CPU_SAMPLE_HUNGRY 4
#define CPU_SAMPLE_FED 32
#define CPU_SAMPLE_STABLE 64
#define CPU_SAMPLE_SETTLED 128
#define CPU_SAMPLE_TRIES (3 * CPU_MEAN_N) /* started at the learning rate, at most */
#define DEAR_ABOVE 33
#define DEAR_BELOW 32

/* The CPU a sleep costs its thread, when the params' sleep_cpu_ns is 0
 * (the ADAPTIVE policy's price of a sleep; every policy's limit of a short
 * wait, block.c's short_wait()): thread CPU time read at the arm of one
 * sleep in SLEEP_SAMPLE of the first SLEEP_SAMPLE_EARLY (sleeps and short
 * waits, of which a sampled one sleeps), then one in SLEEP_SAMPLE_LATE
 * (three clock_gettime syscalls of ~1.4 us each here, the cost of one
 * taken off the sample: vsched__sample_start()), read again when a waker
 * woke it or a timed wait reached its deadline (spins included), and
 * dropped when it sleeps again: a waker's wake or a plain timed wait
 * teach the sleeper's cost (a running median, so that a signal handler
 * run inside one sleep does not make every later wait poll), a timed wait
 * its class's (early or plain, in turn; lib/sleep.c). A class's timed
 * waits are sampled more often while it learns (CPU_SAMPLE_HUNGRY). */
#define SLEEP_SAMPLE 8
#define SLEEP_SAMPLE_EARLY 64
#define SLEEP_SAMPLE_LATE 128
static inline bool vsched__sleep_sampled(unsigned sleeps)
{
	return sleeps <= SLEEP_SAMPLE_EARLY ? !(sleeps % SLEEP_SAMPLE)
					    : !(sleeps % SLEEP_SAMPLE_LATE);
}

/*
 * Host contention (lib/block.c): two signals, one back-off state per
 * sleeper; while either says "contended" the sleeper does not poll (a
 * poll under way stops and the halt sleeps), and it returns to its policy
 * when both have cleared. Each skipped or cut poll is counted in
 * halt_poll_contended (a skipped one as a veto too). The policy still
 * learns every halt. The params in force choose (their `contention`,
 * <vsched/poll.h>): VSCHED_CONTENTION_OFF (the default) neither,
 * VSCHED_CONTENTION_PREEMPT signal 2 only, VSCHED_CONTENTION_SAMPLED
 * both; a change of params starts the back-off afresh.
 *
 * 1. The host's runnable count, sampled: one pread of /proc/loadavg (its
 *    4th field, nr_running() now; ~2 us) at most once per
 *    CONTEND_SAMPLE_NS of the VM's clock per sleeper, and only where a
 *    halt spends time anyway: in a poll that has run VSCHED_FD_CHECK_NS/8
 *    (a poll won before that makes no syscall), or at the start of a halt
 *    that the last sample kept from polling (it would sleep). More
 *    runnable tasks than the VM's CPUs (online CPUs; the sampler counts
 *    itself) means one is waiting for a CPU: contended until a sample says
 *    otherwise. This is KVM's single_task_running() made host-wide and
 *    sampled. Blind spots: tasks waiting only on CPUs the poller cannot
 *    use (pinning, cpusets) count against it, a poller alone on its CPU
 *    beside an idle one is not seen; CPU quotas (cgroup cpu.max) are not
 *    seen; in a guest, the host's load is not seen (signal 2 sees it);
 *    a load that comes and goes within CONTEND_SAMPLE_NS is sampled, not
 *    followed. One fd per process (lib/sleeper.c) while a sleeper that
 *    asked for it lives.
 * 2. Its own preemption, for free: the poll loop reads the VM's clock on
 *    every iteration anyway, tens of ns apart; two consecutive reads more
 *    than CONTEND_GAP_NS apart mean the polling thread lost its CPU for
 *    longer than an interrupt or a short task's wakeup (another task's
 *    time slice, or in a VM the host's). The poll stops and the sleeper
 *    backs off: no polling for CONTEND_MIN_NS, doubling per preemption up
 *    to CONTEND_MAX_NS; once it has run out the next window polls again (a
 *    probe), and a poll of CONTEND_CLEAN_NS or more without such a gap
 *    halves it (below CONTEND_MIN_NS: none). No syscall: about 4 instructions
 *    per poll iteration while it is on (callgrind, a fake clock: 23.4 ->
 *    27.5 per iteration), none while it is off (the check is skipped for
 *    the halt: 26.3 a iteration, fake clock included); a sample is
 *    ~1,400 more. Blind spot: a poller that wakes preempts a CPU hog at once
 *    (CFS/EEVDF wakeup preemption) and polls its short windows to the end:
 *    it steals the hog's CPU without ever being preempted itself (signal
 *    1 sees that). Measured on a loaded 2-core VM (load 4), a spinning
 *    thread's gaps: ~1,500/s of 20-50 us (interrupts, short wakeups),
 *    ~110/s over 100 us, nearly all of them 1 ms or more.
 */
#define CONTEND_SAMPLE_NS 1000000
#define CONTEND_GAP_NS 100000
#define CONTEND_CLEAN_NS 20000
#define CONTEND_MIN_NS 1000000
#define CONTEND_MAX_NS 64000000

/* lib/sleep.c: arm `blocked` for one sleep, publishing its wake mechanism
 * first. 0, or VSCHED_EDESTROYED (destroyed) / VSCHED_ESTATE (another
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
/* lib/sleep.c: start a CPU sample: the thread's CPU in s->cpu0. What one
 * read costs (a syscall, ~1.4 us here), which a sample includes once (its
 * two reads each count part of theirs), is s->cpu_read: the least of the
 * differences of two reads in a row that the sleeper's first
 * CPU_READ_TIMED samples took, one read fewer a sample after them. */
#define CPU_READ_TIMED 16
void vsched__sample_start(struct vsched__sleeper *s);
/* The CPU the thread spent since vsched__sample_start(), less cpu_read,
 * ending the sample (0: none). */
uint64_t vsched__sample_cpu(struct vsched__sleeper *s);
/* The same, for a sleep that a waker ended, or a timed wait that asked
 * for its deadline and reached it: the sleeper's cost of a sleep learns
 * it (cpu_med). Returns it (0: none). A timed wait that asked early goes
 * to its class only (lib/sleep.c). */
uint64_t vsched__learn_sleep_cpu(struct vsched__sleeper *s);
/* lib/sleep.c: add a sample to a running median: capped at LATE_MAX, the
 * first taken as it is and the smaller of the first two kept, then a step
 * toward each sample that doubles while they stay on one side and falls
 * back to LATE_STEP when they cross (or tie), at most a quarter of the
 * estimate (an outlier moves it that much at most, once). */
void vsched__median_add(struct vsched__median *m, uint64_t x);
/* lib/sleep.c: the CPU a plain sleep of `left` ns costs: the params',
 * or that its class measured, or the sleeper's. Owner thread. */
uint64_t vsched__plain_cost(const struct vsched__sleeper *s, uint64_t left);
/* lib/sleep.c: the lateness, plus a margin, that a timed sleep of `left`
 * ns is planned with. Owner thread. */
uint64_t vsched__late_for(const struct vsched__sleeper *s, uint64_t left);
/* The CPU one sleep costs this sleeper's thread as measured (cpu_med),
 * VSCHED_POLL_SLEEP_CPU_NS before a sample; the params' when given. */
static inline uint64_t vsched__measured_sleep_cpu(const struct vsched__sleeper *s)
{
	return s->cpu_med.est ? s->cpu_med.est : VSCHED_POLL_SLEEP_CPU_NS;
}
static inline uint64_t vsched__sleep_cost(const struct vsched__sleeper *s)
{
	return s->params.sleep_cpu_ns ? s->params.sleep_cpu_ns
				      : vsched__measured_sleep_cpu(s);
}

/* lib/fds.c: the result's fd tags, the user slots, and a check of the fds
 * without sleeping (one epoll_pwait(0); counted by vsched__fd_check()),
 * which consumes stale edge-triggered rings (its comment says where it may
 * run). Both return the number of ready user fds (doorbells never). */
void vsched__add_tag(struct vsched_block_result *res, uint64_t tag);
void vsched__clear_tags(struct vsched_block_result *res);
static inline bool vsched__user_slot(const struct vsched__sleeper *s,
				     uint64_t slot)
{
	return slot >= SLOT_USER && slot - SLOT_USER < s->nslots &&
	       s->fd_of[slot - SLOT_USER] >= 0;
}
/* A registered fd's event that its owner is told of (its tag in the
 * result): any event of a plain fd, and a doorbell's that hung up (either
 * side: EPOLLRDHUP, which fd_add asks for) or is in error (it would ring
 * on: its owner fd_dels it). A doorbell's ring is never reported. */
static inline bool vsched__reported(const struct vsched__sleeper *s,
				    uint64_t slot, uint32_t events)
{
	return !s->bell_of[slot - SLOT_USER] ||
	       (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP));
}
unsigned vsched__collect_ready(struct vsched__sleeper *s,
			       struct vsched_block_result *res);
unsigned vsched__fd_check(struct vsched__sleeper *s,
			  struct vsched_block_result *res);
void vsched__free_fd_tables(struct vsched__sleeper *s);

/* lib/sleeper.c: one sample of the host's runnable count (a pread of
 * ct.fd, which must be >= 0): more runnable tasks than CPUs? */
bool vsched__host_busy(struct vsched__sleeper *s);

/* lib/sleeper.c: take the policy in force when the VM's generation `vg`
 * or the sleeper's own `og` moved. */
void vsched__refresh_policy(struct vsched__sleeper *s, uint64_t vg, uint64_t og);
/* The previous halt's lesson, at this halt's start (`id`: the vCPU's, or
 * -1, for the trace). */
void vsched__learn(struct vsched__sleeper *s, int id);

#endif /* VSCHED__SLEEPER_H */
