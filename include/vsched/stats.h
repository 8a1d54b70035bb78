/* SPDX-License-Identifier: MIT */
/**
 * @file stats.h
 * @brief Per-vCPU counters, readable from any thread while the vCPU runs.
 */
#ifndef VSCHED_STATS_H
#define VSCHED_STATS_H

#include <stdint.h>
#include <stdio.h>
#include <vsched/request.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_vcpu;

/** Counters of one request kind on one vCPU. */
struct vsched_kind_stats {
	/** Posts accepted: serviced + coalesced + (1 if pending now).
	 * Derived from those, read at two moments: a read while the vCPU
	 * services this kind may count its request both pending and
	 * serviced, one more than a later read (vsched_vcpu_read_stats()). */
	uint64_t posted;
	/** Times the kind was found pending and serviced (a payload pass
	 * that a handler ended by entering the guest, and the call that
	 * delivers the rest, count once). */
	uint64_t serviced;
	/** Posts that found the kind already pending and merged with it. */
	uint64_t coalesced;
	/** Entries cancelled at commit because this kind was pending. */
	uint64_t cancelled_entries;
	/** Payloads handed to the handler. */
	uint64_t payloads_delivered;
};

/** Buckets of the log2 histograms (bucket i: [2^(i-1), 2^i) ns; 0: 0; the
 * last, 31, also counts everything longer: [2^30, 2^64) ns). */
#define VSCHED_HIST_BUCKETS 32

/** Halt and poll counters, with KVM's names and meaning. */
struct vsched_halt_stats {
	/** Halts where polling was attempted and a wake ended it: the vCPU
	 * never slept (a deadline reached while polling is not one). */
	uint64_t halt_successful_poll;
	/** Halts where polling was attempted. */
	uint64_t halt_attempted_poll;
	/** Successful polls whose wakeup found nothing to do. */
	uint64_t halt_poll_invalid;
	/** Wakeups of the sleeping vCPU by another thread, whatever the
	 * source (as KVM's): for a vCPU, wakeups + event_wakeups of
	 * struct vsched_vcpu_stats; for a waiter, kicks that woke it. */
	uint64_t halt_wakeup;
	/** Time spent in successful polls. */
	uint64_t halt_poll_success_ns;
	/** Time spent in failed polls (before sleeping, or to the deadline). */
	uint64_t halt_poll_fail_ns;
	/** Time spent asleep: from the poll's end (the halt's start when it
	 *  did not poll), as KVM's. */
	uint64_t halt_wait_ns;
	/** Halts where a veto (arch, guest, contention) prevented polling. */
	uint64_t halt_poll_vetoed;
	/** Returns from sleep that skipped the store and barrier because a
	 * poster had already moved the word back to running. */
	uint64_t idle_fastpath_skips;
	/** Returns from sleep that had to store and fence. */
	uint64_t idle_fastpath_stores;
	/** log2 histogram of successful poll durations. */
	uint64_t halt_poll_success_hist[VSCHED_HIST_BUCKETS];
	/** log2 histogram of failed poll durations. */
	uint64_t halt_poll_fail_hist[VSCHED_HIST_BUCKETS];
	/** log2 histogram of sleep durations. */
	uint64_t halt_wait_hist[VSCHED_HIST_BUCKETS];
};

/** A snapshot of a vCPU's counters. Zero-initialise, then set `size`. */
struct vsched_vcpu_stats {
	/** sizeof(struct vsched_vcpu_stats). */
	size_t size;
	/** Committed guest entries. */
	uint64_t entries;
	/** Cancelled guest entries (each counted once here). */
	uint64_t cancelled_entries;
	/** Posts that kicked a vCPU out of the guest (posts only: see
	 * event_kicks). */
	uint64_t kicks_sent;
	/**
	 * Posts that needed no kick and no wakeup: all posts minus kicks_sent
	 * minus wakeups, deduced at snapshot time so that posting pays for
	 * no counter on its common path.
	 */
	uint64_t kicks_avoided;
	/** Posts that woke a BLOCKED vCPU (posts only: see event_wakeups). */
	uint64_t wakeups;
	/** Sleeps that returned with no request and before the deadline:
	 * a spurious kernel return, or a kick or timer re-arm that left
	 * nothing to do. */
	uint64_t spurious_wakeups;
	/** Per kind, indexed by kind number. */
	struct vsched_kind_stats kind[VSCHED_MAX_KINDS];
	/** Halt/poll counters. */
	struct vsched_halt_stats halt;
	/** vsched_vcpu_kick() calls that kicked the vCPU out of the guest. */
	uint64_t event_kicks;
	/** Wakeups of a BLOCKED vCPU that were not posts: vsched_vcpu_kick()
	 * and timer re-arms (so that it re-evaluates its deadline). */
	uint64_t event_wakeups;
	/** Non-blocking checks of the registered fds: while polling (their
	 * time is part of the poll time above), before polling and after a
	 * wakeup that found nothing to do (block.h's fd_checks). */
	uint64_t halt_poll_fd_checks;
	/** Halts whose polling the host-contention back-off skipped (also
	 * counted in halt_poll_vetoed) or stopped: a sample found more
	 * runnable tasks than CPUs on the host, or the poll loop found its
	 * thread preempted (<vsched/block.h>). Added in 0.3. */
	uint64_t halt_poll_contended;
};

/**
 * Copy a vCPU's counters. Each counter is read atomically; the set is not a
 * single atomic snapshot while posts are in flight, and is exact once the
 * vCPU and its posters are quiescent. The derived values (a kind's
 * `posted`, `kicks_avoided`) are computed from counters read at different
 * moments: while the vCPU services, a read may count a request as both
 * pending and serviced, so a kind's `posted` can be up to one more than a
 * later read returns. `kicks_avoided`, derived from those, can be more
 * than a later read by as many, plus the posts still in flight that
 * kicked or woke the vCPU (one per posting thread): the read is made
 * again, up to 4 times, while those two counters move under it, and
 * under a storm of kicks that outlasts 4 reads it can be more by the
 * kicks made during the last one. The counters themselves never go
 * back.
 * @return 0, VSCHED_EINVAL (NULL, size too small or over 4096). Works on destroyed
 * vCPUs until vsched_vm_destroy(). Context: any thread.
 */
VSCHED_API int vsched_vcpu_read_stats(const struct vsched_vcpu *vcpu,
				 struct vsched_vcpu_stats *out);

/** Kinds of statistic (as KVM's binary stats). */
enum vsched_stat_type {
	/** A monotonic count (the derived `posted` may read one too many
	 * while the vCPU services, `kicks_avoided` a few while posts kick
	 * or wake it: see vsched_vcpu_read_stats()). */
	VSCHED_STAT_COUNTER = 0,
	/** A log2 histogram: value i counts samples in [2^(i-1), 2^i) (the
	 * last value: from 2^(VSCHED_HIST_BUCKETS-2) up). */
	VSCHED_STAT_LOG2_HIST = 1,
};

/** Describes one statistic of the values array. */
struct vsched_stat_desc {
	/** Stable name (KVM's where KVM has one). */
	const char *name;
	/** enum vsched_stat_type. */
	unsigned type;
	/** "count" or "ns". */
	const char *unit;
	/** Index of its first value in the values array. */
	unsigned offset;
	/** Number of values: 1, VSCHED_HIST_BUCKETS, or VSCHED_MAX_KINDS. */
	unsigned size;
	/** 1 when the values are indexed by request kind number. */
	unsigned per_kind;
};

/**
 * The descriptors of the per-vCPU statistics, fixed for a library version
 * (new ones only at the end).
 * @param descs   receives the table (static storage).
 * @param count   receives the number of descriptors.
 * @param nvalues receives the length of the values array they describe.
 * @return 0 or VSCHED_EINVAL. Any thread.
 */
VSCHED_API int vsched_vcpu_stat_descs(const struct vsched_stat_desc **descs,
				      unsigned *count, unsigned *nvalues);

/**
 * Read a vCPU's statistics into `values`, laid out by the descriptors.
 * @return 0, VSCHED_EINVAL (NULL, nvalues too small). Any thread.
 */
VSCHED_API int vsched_vcpu_stat_values(const struct vsched_vcpu *vcpu,
				       uint64_t *values, unsigned nvalues);

/** Output formats of vsched_vcpu_stats_write(). */
enum vsched_stats_format {
	/** One `vcpuN.name value` line per single-valued statistic (zero
	 * included), and one `vcpuN.name{kind=K} value` or
	 * `vcpuN.name{log2=i} value` line per non-zero kind or bucket. */
	VSCHED_STATS_TEXT = 0,
	/** One JSON object. */
	VSCHED_STATS_JSON = 1,
};

/**
 * Write a snapshot of a vCPU's statistics as text or JSON. Per-kind
 * values are named by the request kind's name; zero histogram buckets and
 * kinds are skipped.
 * `format` is an enum vsched_stats_format: VSCHED_STATS_TEXT or
 * VSCHED_STATS_JSON. The stream is flushed, so that a failed write is this
 * call's error.
 * @return 0, VSCHED_EINVAL, or -EIO when writing or flushing failed (or the
 * stream's error indicator was already set). Any thread.
 */
VSCHED_API int vsched_vcpu_stats_write(const struct vsched_vcpu *vcpu, FILE *f,
				       unsigned format);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_STATS_H */
