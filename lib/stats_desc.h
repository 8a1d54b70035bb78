/* SPDX-License-Identifier: MIT */
/*
 * The per-vCPU statistics, one row each, as KVM's STATS_DESC tables: the
 * struct reader (vsched_vcpu_read_stats), the descriptor API
 * (vsched_vcpu_stat_descs/values), the waiters' halt reader and, through the
 * descriptors, the text/JSON writer (lib/stats_write.c) are all expanded
 * from VSCHED__STATS below; lib/stats.c checks every row at compile time.
 *
 * Row order is the descriptor order, part of the ABI: new rows only at the
 * end. Columns of X(name, shape, unit, field, from, counter):
 *   name     the stable public name (KVM's where KVM has one);
 *   shape    ONE (one value), KIND (VSCHED_MAX_KINDS values, by request
 *            kind number, in struct vsched_kind_stats) or HIST
 *            (VSCHED_HIST_BUCKETS log2 buckets);
 *   unit     count or ns;
 *   field    its member of struct vsched_vcpu_stats (the first one for KIND);
 *   from     where the value comes from:
 *              VCPU     a counter of struct vsched_vcpu;
 *              SLEEPER  a counter of the vCPU's struct vsched__sleeper
 *                       (waiters have the same ones);
 *              RANK     a counter array of struct vsched_vcpu indexed by
 *                       rank (the service order), stored by kind number;
 *              DERIVED  computed by vsched_vcpu_read_stats() from the others;
 *   counter  the counter's member in that struct (- for DERIVED).
 */
#ifndef VSCHED__STATS_DESC_H
#define VSCHED__STATS_DESC_H

#include <vsched/stats.h>

#define VSCHED__STATS(X)                                                                                   \
	X(entries,                ONE,  count, entries,                     VCPU,    entries)              \
	X(cancelled_entries,      ONE,  count, cancelled_entries,           VCPU,    vs.cancelled_entries) \
	X(kicks_sent,             ONE,  count, kicks_sent,                  VCPU,    ps.kicks_sent)        \
	X(kicks_avoided,          ONE,  count, kicks_avoided,               DERIVED, -)                    \
	X(halt_wakeup,            ONE,  count, halt.halt_wakeup,            DERIVED, -)                    \
	X(spurious_wakeups,       ONE,  count, spurious_wakeups,            SLEEPER, hs.spurious)          \
	X(halt_successful_poll,   ONE,  count, halt.halt_successful_poll,   SLEEPER, hs.successful)        \
	X(halt_attempted_poll,    ONE,  count, halt.halt_attempted_poll,    SLEEPER, hs.attempted)         \
	X(halt_poll_invalid,      ONE,  count, halt.halt_poll_invalid,      SLEEPER, hs.invalid)           \
	X(halt_poll_success_ns,   ONE,  ns,    halt.halt_poll_success_ns,   SLEEPER, hs.success_ns)        \
	X(halt_poll_fail_ns,      ONE,  ns,    halt.halt_poll_fail_ns,      SLEEPER, hs.fail_ns)           \
	X(halt_wait_ns,           ONE,  ns,    halt.halt_wait_ns,           SLEEPER, hs.wait_ns)           \
	X(halt_poll_vetoed,       ONE,  count, halt.halt_poll_vetoed,       SLEEPER, hs.vetoed)            \
	X(idle_fastpath_skips,    ONE,  count, halt.idle_fastpath_skips,    SLEEPER, hs.skips)             \
	X(idle_fastpath_stores,   ONE,  count, halt.idle_fastpath_stores,   SLEEPER, hs.stores)            \
	X(posted,                 KIND, count, kind[0].posted,              DERIVED, -)                    \
	X(serviced,               KIND, count, kind[0].serviced,            RANK,    vs.serviced)          \
	X(coalesced,              KIND, count, kind[0].coalesced,           RANK,    ps.coalesced)         \
	X(kind_cancelled_entries, KIND, count, kind[0].cancelled_entries,   RANK,    vs.cancelled)         \
	X(payloads_delivered,     KIND, count, kind[0].payloads_delivered,  RANK,    vs.payloads)          \
	X(halt_poll_success_hist, HIST, ns,    halt.halt_poll_success_hist, SLEEPER, hs.hist_success)      \
	X(halt_poll_fail_hist,    HIST, ns,    halt.halt_poll_fail_hist,    SLEEPER, hs.hist_fail)         \
	X(halt_wait_hist,         HIST, ns,    halt.halt_wait_hist,         SLEEPER, hs.hist_wait)         \
	X(wakeups,                ONE,  count, wakeups,                     VCPU,    ps.wakeups)           \
	X(event_kicks,            ONE,  count, event_kicks,                 VCPU,    ps.event_kicks)       \
	X(event_wakeups,          ONE,  count, event_wakeups,               VCPU,    ps.event_wakeups)     \
	X(halt_poll_fd_checks,    ONE,  count, halt_poll_fd_checks,         SLEEPER, hs.fd_checks)         \
	X(halt_poll_contended,    ONE,  count, halt_poll_contended,         SLEEPER, hs.contended)

/* What each shape means for the descriptor and the snapshot struct. */
#define VSCHED__STAT_SIZE_ONE 1
#define VSCHED__STAT_SIZE_KIND VSCHED_MAX_KINDS
#define VSCHED__STAT_SIZE_HIST VSCHED_HIST_BUCKETS
#define VSCHED__STAT_TYPE_ONE VSCHED_STAT_COUNTER
#define VSCHED__STAT_TYPE_KIND VSCHED_STAT_COUNTER
#define VSCHED__STAT_TYPE_HIST VSCHED_STAT_LOG2_HIST
#define VSCHED__STAT_PER_KIND_ONE 0
#define VSCHED__STAT_PER_KIND_KIND 1
#define VSCHED__STAT_PER_KIND_HIST 0
/* Bytes between two values of one statistic in struct vsched_vcpu_stats. */
#define VSCHED__STAT_STRIDE_ONE sizeof(uint64_t)
#define VSCHED__STAT_STRIDE_KIND sizeof(struct vsched_kind_stats)
#define VSCHED__STAT_STRIDE_HIST sizeof(uint64_t)

/* Each statistic's first index in the values array (VSCHED__SV_<name>), and
 * the array's length: the values are laid out in row order. */
enum {
#define VSCHED__SV(name, shape, unit, field, from, counter)                   \
	VSCHED__SV_##name,                                                    \
	VSCHED__SV_##name##_last = VSCHED__SV_##name + VSCHED__STAT_SIZE_##shape - 1,
	VSCHED__STATS(VSCHED__SV)
#undef VSCHED__SV
	VSCHED__STAT_NVALUES
};

struct vsched__sleeper;

/* The SLEEPER rows that are members of struct vsched_halt_stats, read from
 * `s` (a vCPU's or a generic waiter's) into `out`, whose `halt_wakeup` is
 * set to 0 for the caller to fill (vCPUs and waiters count wakeups apart).
 * Any thread; each counter is read atomically (relaxed), the set is not one
 * atomic snapshot. */
void vsched__sleeper_halt_stats(const struct vsched__sleeper *s,
				struct vsched_halt_stats *out);

/* All the SLEEPER rows (those above and spurious_wakeups,
 * halt_poll_fd_checks, halt_poll_contended) of `s` into `out`, zeroed
 * first; halt.halt_wakeup is 0, as above. For a waiter's counters. */
void vsched__sleeper_rows(const struct vsched__sleeper *s,
			  struct vsched_vcpu_stats *out);

#endif /* VSCHED__STATS_DESC_H */
