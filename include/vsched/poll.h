/* SPDX-License-Identifier: MIT */
/**
 * @file poll.h
 * @brief Poll policies: how long a halted vCPU (or any waiter) polls before
 * it sleeps.
 *
 * A policy is a pure function of its parameters and a small per-waiter
 * state: vsched_poll_window() says how long to poll, vsched_poll_update()
 * learns from how the halt went. The block engine calls exactly these, and
 * so does the trace evaluator (`vsched-bench policy`), so what is measured
 * is what runs. doc/policies.md explains how to choose.
 */
#ifndef VSCHED_POLL_H
#define VSCHED_POLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_vm;

/** Policies (enums only grow at the end). */
enum vsched_poll_policy {
	/** Never poll. */
	VSCHED_POLL_NONE = 0,
	/** Always poll for max_ns. */
	VSCHED_POLL_FIXED = 1,
	/**
	 * Linux's halt polling: grow from grow_start_ns by x grow when a halt
	 * was shorter than max_ns but longer than the window; shrink (divide
	 * by shrink, or reset when shrink is 0; below grow_start_ns means 0)
	 * after a halt longer than max_ns or an invalid wakeup.
	 */
	VSCHED_POLL_KVM = 2,
	/**
	 * vsched's: keeps a decaying log2 histogram of halt lengths (about
	 * the last 64) and replays its incumbent, Linux's grow/shrink rule
	 * with the same parameters, on the same halts. Each halt it prices
	 * every candidate W on the histogram, CPU (poll time plus
	 * sleep_cpu_ns per sleep) and latency, and takes the W whose worse
	 * ratio to what the incumbent really cost is lowest, the CPU side
	 * scaled by cpu_budget_pct; while its own windows have cost more than
	 * the incumbent's on either side, it polls for the incumbent's
	 * window. At the default: no more CPU and no more latency than KVM's
	 * (or, for waiters, QEMU's) polling, and less where the history
	 * predicts the wakeups. With latency_weight non-zero it minimises CPU
	 * plus weighted latency instead. With no halt learnt yet it does not
	 * poll (doc/policies.md).
	 */
	VSCHED_POLL_ADAPTIVE = 3,
};

/**
 * Number of policies this header knows (policies are 0 up to it; added in
 * 0.3). A library newer than the header may know more:
 * vsched_poll_policy_name() is NULL past its last, and
 * vsched_poll_policy_parse() may return one at or past this count, so check
 * it before indexing an array of this size.
 */
#define VSCHED_POLL_NPOLICIES 4

/**
 * A policy's name, as command lines and reports spell it ("none", "fixed",
 * "kvm", "adaptive"): a static string.
 * @return the name, or NULL for a number that is no policy of this library
 * (so `for (p = 0; vsched_poll_policy_name(p); p++)` lists them all).
 * Context: any thread; no syscalls. Added in 0.3.
 */
VSCHED_API const char *vsched_poll_policy_name(unsigned policy);

/**
 * The policy named `name` (vsched_poll_policy_name()'s spelling, exact
 * case).
 * @return the enum vsched_poll_policy value (>= 0), or VSCHED_EINVAL (NULL,
 * or no policy of that name).
 * Context: any thread; no syscalls. Added in 0.3.
 */
VSCHED_API int vsched_poll_policy_parse(const char *name);

/** Policy parameters. vsched_poll_defaults() fills them; then adjust. */
struct vsched_poll_params {
	/** sizeof(struct vsched_poll_params). */
	size_t size;
	/** enum vsched_poll_policy. */
	unsigned policy;
	/** Longest window (FIXED: the window; KVM: halt_poll_ns). */
	uint64_t max_ns;
	/** KVM: growth factor (Linux default 2; 0 disables growth). */
	unsigned grow;
	/** KVM: shrink divisor (Linux >= 6.4 default 2; 0 resets to 0). */
	unsigned shrink;
	/** KVM: first non-zero window (Linux default 10 us). */
	uint64_t grow_start_ns;
	/**
	 * ADAPTIVE: latency a sleep adds to a wakeup, taken out of the length
	 * of slept halts and put back in the halts the replayed incumbent
	 * sees. 0 (the vCPU default): the block engine measures it per
	 * sleeper, from the post or kick (vsched_vcpu_kick(),
	 * vsched_waiter_kick(), a guest timer's expiry) that woke it to its
	 * running again (an EWMA from VSCHED_POLL_WAKE_COST_NS; wakes
	 * through a doorbell or other fd are not timed), and a replay without
	 * the engine takes VSCHED_POLL_WAKE_COST_NS. Since 0.3; 0.2's default
	 * was a fixed 50 us.
	 */
	uint64_t wake_cost_ns;
	/**
	 * ADAPTIVE: a fixed exchange rate instead of the budget: ns of poll
	 * CPU worth one ns of wakeup latency. Default 0: the policy uses
	 * cpu_budget_pct and prices nothing. Non-zero: it minimises poll CPU
	 * + sleep_cpu_ns per sleep + latency_weight x wake_cost_ns per sleep
	 * (polling continues while the expected remaining wait is below
	 * sleep_cpu_ns + latency_weight x wake_cost_ns). 4 is the rate KVM's
	 * defaults imply (a 200 us window against a ~50 us sleeping wakeup);
	 * the KVM halt-polling governor (<vsched/kvmgov.h>) uses it.
	 */
	unsigned latency_weight;
	/**
	 * ADAPTIVE: history decay, each halt weighs 1/2^decay_shift (default
	 * 6: about the last 64 halts; at most 15).
	 */
	unsigned decay_shift;
	/**
	 * CPU one sleep costs the sleeping thread (its futex or epoll round
	 * trip, being scheduled out and back in) beyond a polled wakeup: the
	 * ADAPTIVE policy prices sleeps with it, and every policy polls to a
	 * deadline no farther than cpu_budget_pct of it (spin_pct). 0 (the
	 * default): the block engine measures it per sleeper and per class
	 * of timed wait (thread CPU time across a sample of its sleeps, up to
	 * the wake or the timed wait's end, less the sample's own clock
	 * read) and a replay without the engine takes
	 * VSCHED_POLL_SLEEP_CPU_NS. Added in 0.3.
	 */
	uint64_t sleep_cpu_ns;
	/**
	 * Every policy: how a timed wait ends on time (block.h). A timed
	 * sleep asks the kernel to wake it early by the lateness its earlier
	 * sleeps measured and spins for the rest: spin_pct is the most of the
	 * time left that such a spin may take, and below 100 it takes no
	 * more than a sleep's CPU (a wakeup earlier than that sleeps again,
	 * to the deadline). Default 25: the median wakeup
	 * about 4 us after the deadline, with spins that cost at most a
	 * sixteenth of a sleep's CPU on average (later where wakeups scatter
	 * more than that buys), where early waits cost no more CPU than
	 * cpu_budget_pct of plain ones (measured per class of time left;
	 * else they sleep plain, late; and so do the unsampled waits of a
	 * class still measuring, unless cpu_budget_pct is above 100). 100: on
	 * time whatever it costs
	 * (the early wakeup aims before the deadline, and a deadline nearer
	 * than the kernel can wake is polled to). 0: never spin (late by the
	 * thread's timer slack and the wakeup). With any value but 0 a wait
	 * whose deadline is no farther than cpu_budget_pct of a sleep's CPU
	 * (measured, or sleep_cpu_ns), less a sixteenth, polls to it instead
	 * of sleeping (on the VM's default clock and wait or with fds,
	 * unless vetoed as a poll window is; block.h). At most 100. A struct
	 * whose size ends before it gets the default. Added in 0.3.
	 */
	unsigned spin_pct;
	/**
	 * ADAPTIVE, the one knob (with latency_weight 0): the poll CPU the
	 * policy may spend, in percent of what the incumbent would spend on
	 * the same halts. The incumbent is Linux's grow/shrink rule with this
	 * struct's max_ns, grow, shrink and grow_start_ns (KVM's halt polling
	 * at the vCPU defaults, QEMU's AioContext polling at the waiter
	 * defaults, vsched_poll_defaults_waiter()), replayed on the same
	 * halts: its CPU (polls plus sleep_cpu_ns per sleep) and latency. The
	 * policy takes the window whose worse ratio to the incumbent's (CPU
	 * over this share of the incumbent's, latency over the incumbent's)
	 * is lowest by its histogram, and polls for the incumbent's own
	 * window while what it really spent exceeds either by 1/32. Default
	 * 100: no more CPU and no more latency than the incumbent, and both
	 * lower where the history predicts the wakeups. Above 100 it buys
	 * latency with up to that much CPU. Below 100 it saves CPU at the
	 * price of latency (no check against the incumbent's), falling back
	 * to the least CPU by its histogram while it overspends; 0: the least
	 * CPU (polls only where that is cheaper than sleeping). At most
	 * 10000. Every policy's timed waits (spin_pct) spend up to this share
	 * of a plain sleep's CPU to end on time: at 100 they sleep early and
	 * spin only where that costs no more than sleeping to the deadline
	 * (within 1/16: early waits that cost more are slept plain; they
	 * return to early below 1/32 over), and poll to a deadline only
	 * where polling does. A struct whose size ends before it gets 100.
	 * Added in 0.3.
	 */
	unsigned cpu_budget_pct;
	/**
	 * Every policy, in the block engine only (a replay ignores it): the
	 * host-contention back-off (<vsched/block.h>), which stops and skips
	 * polls while the host has no CPU to spare for them. One of the
	 * VSCHED_CONTENTION_* values below. Default VSCHED_CONTENTION_OFF:
	 * no back-off, no syscall, no fd (block.h's over-commit veto is
	 * another check, always on). Taken, as the other fields, at a
	 * sleeper's next halt, so vsched_vm_set_poll(),
	 * vsched_vcpu_set_poll() and vsched_waiter_set_poll() turn it on and
	 * off at run time. Values above VSCHED_CONTENTION_SAMPLED are
	 * refused (VSCHED_EINVAL). A struct whose size ends before it reads
	 * VSCHED_CONTENTION_OFF. Added in 0.3.
	 */
	unsigned contention;
};

/** contention: off (the default). */
#define VSCHED_CONTENTION_OFF 0
/** contention: the poller's own preemption only (a gap in the poll loop's
 * clock reads); no syscall, no fd. */
#define VSCHED_CONTENTION_PREEMPT 1
/** contention: that and the host's runnable count, sampled from
 * /proc/loadavg (one pread at most once per ms per vCPU or waiter; one
 * process-wide fd, <vsched/block.h>). */
#define VSCHED_CONTENTION_SAMPLED 2

/** What ADAPTIVE takes for a sleeping wakeup's latency before the engine
 * has measured one, and in a replay whose wake_cost_ns is 0. */
#define VSCHED_POLL_WAKE_COST_NS 50000

/** What ADAPTIVE takes for a sleep's CPU before the engine has measured
 * one, and in a replay whose sleep_cpu_ns is 0. */
#define VSCHED_POLL_SLEEP_CPU_NS 5000

/** Number of log2 buckets the ADAPTIVE policy keeps (2^8 .. 2^21 ns). */
#define VSCHED_POLL_BUCKETS 14

/** Per-waiter policy state. Initialise with vsched_poll_init(). */
struct vsched_poll_state {
	/** Current window in ns (KVM: vcpu->halt_poll_ns). */
	uint64_t window_ns;
	/** ADAPTIVE: decayed halt counts per bucket (fixed point, 2^16). */
	uint32_t hist[VSCHED_POLL_BUCKETS];
	/** Halts seen. */
	uint64_t halts;
	/**
	 * ADAPTIVE (added in 0.3): its incumbent, Linux's grow/shrink rule
	 * with the same parameters, replayed on the same halts: the window
	 * that rule would poll for next.
	 */
	uint64_t inc_window_ns;
	/** ADAPTIVE: the CPU the incumbent would have spent (ns: polls, and
	 * sleep_cpu_ns a sleep), decayed as `hist`. */
	uint64_t inc_cpu;
	/** ADAPTIVE: the halts the incumbent would have slept through (2^16
	 * each), decayed as `hist`. */
	uint64_t inc_slept;
	/** ADAPTIVE: the same as inc_cpu, for the windows it did poll for. */
	uint64_t own_cpu;
	/** ADAPTIVE: the same as inc_slept, for the windows it did poll for. */
	uint64_t own_slept;
};

/**
 * Default parameters for a policy with an arch maximum `max_ns` (KVM's
 * halt_poll_ns: x86 200 us, arm64 500 us, power 10 us).
 * @return 0 or VSCHED_EINVAL (NULL, unknown policy). Any thread.
 */
VSCHED_API int vsched_poll_defaults(unsigned policy, uint64_t max_ns,
				    struct vsched_poll_params *out);

/** The window of QEMU's AioContext polling by default (an IOThread's
 * poll-max-ns, IOTHREAD_POLL_MAX_NS_DEFAULT: 32768 ns). */
#define VSCHED_POLL_WAITER_MAX_NS 32768

/**
 * Default parameters for a waiter (an I/O thread): `policy` with the cap
 * and the grow/shrink rule of QEMU's AioContext polling, the loop such a
 * thread replaces (util/aio-posix.c: poll-max-ns 32 us, grow x2 from
 * 4 us, reset after a block longer than the cap), and a fixed 10 us
 * sleeping wakeup (an I/O thread is mostly woken through a doorbell,
 * which the engine cannot time: an eventfd or futex wake of a thread that
 * slept briefly, measured 7-14 us on the machines here). ADAPTIVE
 * takes that rule as its incumbent (cpu_budget_pct). With
 * VSCHED_POLL_ADAPTIVE they are the policy of a waiter given none (until
 * 0.3 such a waiter followed its VM's policy, a vCPU's); change a field
 * and give them to a waiter (vsched_waiter_config.poll; doc/adopting.md)
 * to tune one.
 * @return 0 or VSCHED_EINVAL (NULL, unknown policy). Any thread. Added in
 * 0.3.
 */
VSCHED_API int vsched_poll_defaults_waiter(unsigned policy,
					   struct vsched_poll_params *out);

/** Reset a state. @return 0 or VSCHED_EINVAL. Any thread. */
VSCHED_API int vsched_poll_init(const struct vsched_poll_params *p,
				struct vsched_poll_state *s);

/**
 * The window to poll for in the next halt (0: sleep at once; also for a
 * NULL state or parameters that vsched_poll_init() refuses).
 * Context: the state's owner thread.
 */
VSCHED_API uint64_t vsched_poll_window(const struct vsched_poll_params *p,
				       const struct vsched_poll_state *s);

/**
 * Learn from a halt: it lasted `halt_ns` in all (poll plus sleep, as KVM
 * measures it), the poll window was `window_ns`, and `valid` is false when
 * the wakeup found nothing to do. ADAPTIVE learns no halt length from an
 * invalid wakeup but charges its CPU (the poll, or the window and a
 * sleep) to itself and to its incumbent, which shrinks, and chooses its
 * window again. @return 0 or VSCHED_EINVAL.
 * Context: the state's owner thread.
 */
VSCHED_API int vsched_poll_update(const struct vsched_poll_params *p,
				  struct vsched_poll_state *s,
				  uint64_t window_ns, uint64_t halt_ns,
				  bool valid);

/**
 * Set a VM's policy, the one its vCPUs follow (a waiter has its own, by
 * default the waiter profile: vsched_poll_defaults_waiter()). Takes effect
 * at each vCPU's next halt, while vCPUs run, poll and block; per-vCPU
 * state restarts. The old parameters are freed
 * after an RCU grace period.
 * @return 0, VSCHED_EINVAL (NULL, bad size or policy, or a field out of its
 * range: decay_shift above 15, spin_pct above 100, cpu_budget_pct above
 * 10000, contention above VSCHED_CONTENTION_SAMPLED) or VSCHED_ENOMEM.
 * Context: any thread, also a vCPU's own hooks and request handlers (a
 * halt in progress goes on with the policy it began with).
 * Syscalls (the grace period, liburcu-bp's synchronize_rcu): membarrier,
 * futex, sched_yield, and mmap/munmap on its first use in the thread;
 * allow them in a seccomp filter, or change policies before installing it.
 */
VSCHED_API int vsched_vm_set_poll(struct vsched_vm *vm,
				  const struct vsched_poll_params *p);

struct vsched_vcpu;

/**
 * Give one vCPU its own poll policy and window (`p` copied), or with `p`
 * NULL make it follow the VM's policy again. Takes effect at the vCPU's
 * next halt, also while it runs, polls or blocks now; its policy state
 * restarts (and does not restart when the VM's policy changes meanwhile).
 * The same RCU scheme as vsched_vm_set_poll(). The guest's poll control
 * (vsched_vcpu_set_guest_poll()) still vetoes polling on top of it.
 * @return 0, VSCHED_EINVAL (NULL vcpu, or `p` refused as by
 * vsched_vm_set_poll()), VSCHED_ENOMEM
 * or VSCHED_EDESTROYED. States: any but DESTROYED.
 * Context: any thread, also the vCPU's own hooks and request handlers (a
 * halt in progress goes on with the policy it began with).
 * Syscalls: as vsched_vm_set_poll() when it replaces a policy of the
 * vCPU's own (none when it only installs one).
 */
VSCHED_API int vsched_vcpu_set_poll(struct vsched_vcpu *vcpu,
				    const struct vsched_poll_params *p);

/**
 * Read a VM's current policy parameters into `out`, whose `size` the
 * caller sets (version.h's rule for structs read out).
 * @return 0 or VSCHED_EINVAL (NULL, or `size` too small). Any thread.
 */
VSCHED_API int vsched_vm_get_poll(struct vsched_vm *vm,
				  struct vsched_poll_params *out);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_POLL_H */
