/* SPDX-License-Identifier: MIT */
/**
 * @file kvmgov.h
 * @brief Halt-polling governor for VMMs whose vCPUs halt inside KVM
 * (libvsched-kvm, `vsched::kvm`).
 *
 * With an in-kernel irqchip (QEMU, Firecracker, Cloud Hypervisor, crosvm)
 * a halted vCPU waits inside KVM and vsched's block engine never runs.
 * The governor serves those VMMs through the two interfaces KVM gives
 * userspace:
 *
 * - it reads each vCPU's **binary stats fd** (KVM_GET_STATS_FD, Linux
 *   5.14+): the log2 histograms `halt_poll_success_hist`,
 *   `halt_poll_fail_hist` and `halt_wait_hist`, or, where a kernel lacks
 *   one of them, the sums `halt_poll_success_ns`, `halt_poll_fail_ns`,
 *   `halt_wait_ns`, `halt_successful_poll`, `halt_attempted_poll` (and
 *   `halt_poll_invalid`, `halt_wakeup` when present);
 * - it runs vsched's poll policy (<vsched/poll.h>: vsched_poll_update()
 *   and vsched_poll_window(), the pure functions the block engine runs) on
 *   the halts those stats describe, one policy state per vCPU;
 * - it sets **KVM_CAP_HALT_POLL** (Linux 5.8+) on the VM fd to the largest
 *   of the vCPUs' windows: the VM's maximum poll time, below which KVM's
 *   own per-vCPU grow/shrink still runs.
 *
 * **The model.** Per tick and vCPU, the change of each histogram since the
 * last tick. A halt in bucket i of `halt_poll_success_hist` (bucket i holds
 * [2^(i-1), 2^i) ns, 0 holds 0) ended while KVM polled: a halt of the
 * bucket's midpoint, 3 x 2^(i-2) ns (1 ns for bucket 1), learned as polled.
 * A halt in bucket j of `halt_wait_hist` slept: the bucket's midpoint plus
 * the failed poll that came before it, the tick's `halt_poll_fail_ns` (or
 * `halt_poll_fail_hist`'s midpoints) spread evenly over its sleeps, learned
 * as slept (the policy takes its wake_cost_ns back out). Polls that found
 * nothing to do (`halt_poll_invalid`) are taken out of the polled halts in
 * proportion. The sums model has two samples only: the mean polled halt
 * and the mean slept halt. Of the tick's halts at most `samples_per_tick`
 * are fed, in proportion and interleaved (each weighs 1/2^decay_shift of
 * the policy's history: with the defaults, 64 samples a tick and a decay
 * of 8, one tick's halts make up about a fifth of it). doc/adopting.md
 * explains what the governor can and cannot see.
 *
 * **Changing the cap.** A tick that finds halts takes a decision (unless
 * every one of them was an invalid poll, which says nothing): the
 * largest vCPU window (a vCPU whose stats fd failed to read counts with
 * its last window). It becomes the cap when it differs from the cap in
 * force by more than `hysteresis_pct` percent of the larger of the two (a
 * change between zero and non-zero always does), and no sooner than
 * `min_change_ns` after the previous change. Each decision fires the USDT
 * probe `vsched:kvm_gov_decision` (window ns, cap ns in force after it,
 * halts in the tick) and is counted in struct vsched_kvm_gov_stats.
 *
 * **Threads.** vsched_kvm_gov_tick() is called from the VMM's own loop
 * (any one thread at a time; it returns at once until the interval has
 * passed). With `thread` set in the config the governor ticks from a
 * thread of its own instead. The stats can be read from any thread.
 *
 * **Errors.** Besides VSCHED_EINVAL and VSCHED_ENOMEM, attach returns
 * -EOPNOTSUPP when KVM_CHECK_EXTENSION(KVM_CAP_HALT_POLL) says 0 (Linux
 * before 5.8), the errno of KVM_GET_STATS_FD when it fails (-ENOTTY or
 * -EINVAL: Linux before 5.14), -EBADMSG when a stats fd's contents are
 * malformed or truncated (a header, descriptor, name or value outside what
 * can be read, a name without its NUL), and -ENODATA when a vCPU's stats
 * have neither the histograms nor the sums. vsched_strerror() names each.
 */
#ifndef VSCHED_KVMGOV_H
#define VSCHED_KVMGOV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <vsched/poll.h>
#include <vsched/stats.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_kvm_gov;

/** The most halts a tick feeds each vCPU's policy (samples_per_tick). */
#define VSCHED_KVM_GOV_MAX_SAMPLES 4096

/**
 * How the governor reaches KVM (frozen layout, see version.h). NULL in the
 * config: the kernel (ioctl, pread, close). A test or a VMM with its own
 * KVM wrapper supplies its own; every member must be set. Each returns
 * what the syscall would, with a negative errno instead of -1. In tick(),
 * set_cap() and the governor's thread they run with the governor's lock
 * held: a call on the same governor from one of them is refused with
 * VSCHED_ESTATE (it would wait for that lock for ever); a call on another
 * governor is not. `close` also runs inside destroy(), and a call from it
 * is refused the same way (a destroy from it would free the governor
 * twice); no call on the governor may be made after destroy().
 */
struct vsched_kvm_gov_ops {
	/** KVM_CHECK_EXTENSION(KVM_CAP_HALT_POLL) on the VM fd: > 0 supported. */
	int (*check_cap)(void *ctx, int vm_fd);
	/** KVM_ENABLE_CAP(KVM_CAP_HALT_POLL, args[0] = max_ns) on the VM fd. */
	int (*set_cap)(void *ctx, int vm_fd, uint64_t max_ns);
	/** KVM_GET_STATS_FD on a vCPU fd: the new fd. */
	int (*stats_fd)(void *ctx, int vcpu_fd);
	/** pread(2) of a stats fd: bytes read (short at its end). */
	ssize_t (*pread)(void *ctx, int fd, void *buf, size_t len, uint64_t off);
	/** close(2) of a stats fd the governor opened. */
	void (*close)(void *ctx, int fd);
	/** Passed to each. */
	void *ctx;
};

/** Governor parameters. Zero-initialise, then set `size`. */
struct vsched_kvm_gov_config {
	/** sizeof(struct vsched_kvm_gov_config). */
	size_t size;
	/**
	 * The policy and its parameters (copied). NULL: VSCHED_POLL_ADAPTIVE
	 * with vsched_poll_defaults() for the arch's KVM window (x86 200 us),
	 * decay_shift 8 and latency_weight 4 (KVM's own rate: KVM's latency
	 * at less CPU). max_ns bounds the cap (at most UINT32_MAX).
	 */
	const struct vsched_poll_params *poll;
	/** Least time between two samples (0: 100 ms). */
	uint64_t interval_ns;
	/** Least time between two changes of the cap (0: 1 s). */
	uint64_t min_change_ns;
	/** Hysteresis band in percent of the larger value (0: 25; at most 100). */
	unsigned hysteresis_pct;
	/** Halts fed to the policy per vCPU and tick, at most (0: 64; at
	 * most VSCHED_KVM_GOV_MAX_SAMPLES, else VSCHED_EINVAL: a tick feeds
	 * them with the governor's lock held). */
	unsigned samples_per_tick;
	/** Use the sums model even where the histograms exist. */
	bool force_sums;
	/** Tick from a thread of the governor's own, every interval_ns
	 * (created with every signal blocked: none is delivered to it). */
	bool thread;
	/** NULL: the kernel. */
	const struct vsched_kvm_gov_ops *ops;
	/**
	 * The vCPUs' stats fds, one per vCPU fd, already opened by the VMM
	 * (the governor uses duplicates; the VMM keeps and closes its own).
	 * NULL: attach opens them with KVM_GET_STATS_FD, a vCPU ioctl, which
	 * waits while that vCPU is inside KVM_RUN (KVM_RUN holds the vCPU's
	 * mutex, and a vCPU halted in the kernel stays there): then attach
	 * before the vCPUs run, or pass them here.
	 */
	const int *stats_fds;
};

/** Which model a governor's vCPUs use (vsched_kvm_gov_stats::model). */
enum vsched_kvm_gov_model {
	/** Every vCPU has the three log2 histograms. */
	VSCHED_KVM_GOV_HIST = 0,
	/** At least one vCPU is modelled from the sums. */
	VSCHED_KVM_GOV_SUMS = 1,
};

/** What vsched_kvm_gov_tick() did (successes, so positive or 0). */
enum vsched_kvm_gov_tick_result {
	/** The interval has not passed: nothing read. */
	VSCHED_KVM_GOV_IDLE = 0,
	/** Stats read; no halts, or the cap stays. */
	VSCHED_KVM_GOV_SAMPLED = 1,
	/** Stats read and the cap changed. */
	VSCHED_KVM_GOV_CHANGED = 2,
};

/** The governor's own counters, inputs and decision. */
struct vsched_kvm_gov_stats {
	/** sizeof(struct vsched_kvm_gov_stats). */
	size_t size;
	/** vCPUs attached. */
	uint64_t vcpus;
	/** enum vsched_kvm_gov_model. */
	uint64_t model;
	/** Ticks that read the stats. */
	uint64_t samples;
	/** Ticks that found halts and took a decision. */
	uint64_t decisions;
	/** Changes of the cap (KVM_ENABLE_CAP succeeded): decisions', and
	 * vsched_kvm_gov_set_cap()'s, so it may exceed `decisions`. */
	uint64_t cap_changes;
	/** Decisions kept from the cap by the hysteresis band. */
	uint64_t held_hysteresis;
	/** Decisions kept from the cap by min_change_ns. */
	uint64_t held_rate;
	/** Failed reads of a stats fd, counters that went backwards, or a
	 * tick whose halts, or their ns, add up past 2^64 (no halt of that
	 * vCPU is taken). */
	uint64_t read_errors;
	/** KVM_ENABLE_CAP calls that failed. */
	uint64_t set_errors;
	/** The cap in force (ns); UINT64_MAX while KVM's default holds. */
	uint64_t cap_ns;
	/** The last decision's window (ns). */
	uint64_t window_ns;
	/** Inputs, summed over vCPUs and ticks: halts seen ... */
	uint64_t halts;
	/** ... of them ended while polling ... */
	uint64_t halts_polled;
	/** ... of them slept ... */
	uint64_t halts_slept;
	/** ... polls whose wakeup found nothing to do ... */
	uint64_t halts_invalid;
	/** ... polls that gave up (KVM's halt_attempted_poll is
	 * halts_polled + polls_failed). */
	uint64_t polls_failed;
	/** KVM's halt_poll_success_ns since attach. */
	uint64_t poll_success_ns;
	/** KVM's halt_poll_fail_ns since attach. */
	uint64_t poll_fail_ns;
	/** KVM's halt_wait_ns since attach. */
	uint64_t wait_ns;
	/** The last decision's halts (all vCPUs, that tick). */
	uint64_t last_halts;
};

/**
 * Attach a governor to VM fd `vm_fd` and its `nvcpus` vCPU fds: check
 * KVM_CAP_HALT_POLL, open each vCPU's stats fd (or duplicate the config's
 * `stats_fds`: KVM_GET_STATS_FD waits for a vCPU inside KVM_RUN) and parse
 * its descriptors (once), read the first values. Changes nothing in KVM: the cap stays
 * KVM's until the first decision. The fds stay the caller's; the stats
 * fds are the governor's. With `thread`, starts the ticking thread.
 * @return 0, VSCHED_EINVAL (a negative vm_fd, NULL, no vCPU or more than
 * 4096, bad config), -EBADF (a negative vCPU fd, also where `stats_fds`
 * would make it unused), VSCHED_ENOMEM, -EOPNOTSUPP, KVM_CHECK_EXTENSION's
 * negative errno, KVM_GET_STATS_FD's errno (or fcntl's, duplicating a
 * `stats_fds` entry), a failed pread's errno, -EBADMSG (a layout that does
 * not fit, a short read) or -ENODATA (a vCPU's stats have neither the
 * histograms nor the sums), or a negative errno from pthread_create.
 * Context: any thread.
 */
VSCHED_API int vsched_kvm_gov_create(int vm_fd, const int *vcpu_fds,
				     unsigned nvcpus,
				     const struct vsched_kvm_gov_config *cfg,
				     struct vsched_kvm_gov **out);

/**
 * Stop the thread (if any), close the stats fds, free the governor. The
 * cap stays as it was last set. @return 0, VSCHED_EINVAL or
 * VSCHED_ESTATE (from one of its ops, `close` included, or while its
 * destroy is under way, as from a close op of another governor that this
 * one's close destroys: refused, nothing freed).
 * Context: any thread but the governor's own; no other call on `gov`
 * running or made after it (a read_stats() racing it reads freed memory).
 */
VSCHED_API int vsched_kvm_gov_destroy(struct vsched_kvm_gov *gov);

/**
 * Sample and decide, if `interval_ns` has passed since the last sample
 * (`now_ns` on CLOCK_MONOTONIC, or any clock that the caller uses for
 * every call). @return enum vsched_kvm_gov_tick_result, VSCHED_EINVAL, or
 * the negative errno of a failed read (-EBADMSG for a short one) or of
 * KVM_ENABLE_CAP (also counted; the next tick tries again), or
 * VSCHED_ESTATE (from one of the governor's ops; on a governor with
 * `thread`, where tick() is never allowed, VSCHED_EINVAL comes first).
 * Context: one thread at a time (not with `thread` set).
 */
VSCHED_API int vsched_kvm_gov_tick(struct vsched_kvm_gov *gov, uint64_t now_ns);

/**
 * Set the cap now, bypassing the policy, the band and the rate bound (an
 * operator's override; the policy's next decision may move it again).
 * @return 0, VSCHED_EINVAL, VSCHED_ERANGE (above UINT32_MAX),
 * VSCHED_ESTATE (from one of the governor's ops) or KVM_ENABLE_CAP's
 * negative errno. Context: any thread, also with `thread` set (it waits
 * for a tick in progress).
 */
VSCHED_API int vsched_kvm_gov_set_cap(struct vsched_kvm_gov *gov,
				      uint64_t max_ns, uint64_t now_ns);

/**
 * Copy the governor's counters (the extensible-struct rule).
 * @return 0, VSCHED_EINVAL or VSCHED_ESTATE (from one of the governor's
 * ops). Context: any thread.
 */
VSCHED_API int vsched_kvm_gov_read_stats(const struct vsched_kvm_gov *gov,
					 struct vsched_kvm_gov_stats *out);

/**
 * Write the counters as `kvm_gov.name value` lines (VSCHED_STATS_TEXT) or
 * one JSON object (VSCHED_STATS_JSON), names as in struct
 * vsched_kvm_gov_stats. The stream is flushed, so that a failed write is
 * this call's error.
 * @return 0, VSCHED_EINVAL, VSCHED_ESTATE (from one of the governor's
 * ops), or -EIO when writing or flushing failed (or the stream's error
 * indicator was already set). Context: any thread.
 */
VSCHED_API int vsched_kvm_gov_stats_write(const struct vsched_kvm_gov *gov,
					  FILE *f, unsigned format);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_KVMGOV_H */
