/* SPDX-License-Identifier: MIT */
/**
 * @file kvm.h
 * @brief Host adapter for Linux KVM (libvsched-kvm, `vsched::kvm`).
 *
 * Attaches a vsched vCPU to a KVM vCPU fd and its mapped `struct kvm_run`,
 * and supplies the three things every userspace VMM writes and gets subtly
 * wrong:
 *
 * - **The kick.** vsched_kvm_kick() stores `kvm_run->immediate_exit = 1`
 *   and then signals the vCPU thread. The vCPU side clears immediate_exit
 *   *before* vsched_vcpu_enter() publishes IN_GUEST, so a kick that lands
 *   anywhere between the last request check and the guest entry inside
 *   KVM_RUN either finds immediate_exit set at KVM_RUN's entry or
 *   interrupts the guest with the signal. Clearing it after the check, or
 *   relying on the signal alone, loses kicks (test/model/kvm.pml has both
 *   broken variants).
 * - **Injection with a userspace interrupt controller** (x86). Request
 *   handlers queue vectors with vsched_kvm_queue_irq(); the entry injects
 *   the highest one with KVM_INTERRUPT when the guest can take it (at most
 *   one per KVM_RUN: a second would replace the first, and kvm_run's
 *   readiness fields are stale until KVM_RUN has run), and otherwise asks
 *   for an interrupt-window exit. NMIs go through KVM_NMI.
 * - **Halts.** vsched_kvm_halt() turns KVM_EXIT_HLT into the block engine:
 *   it polls and sleeps until an interrupt is owed to the guest, never
 *   sleeping while one is still queued (e.g. a kick that came while the
 *   guest had IF=0).
 *
 * The hypervisor's `kick` host callback calls vsched_kvm_kick() for its
 * vCPU. One thread per vCPU, as KVM requires.
 *
 * **A VMM that owns its KVM_RUN loop** (QEMU's kvm_cpu_exec, kvmtool's
 * kvm_cpu__start) keeps it and brackets its ioctl:
 *
 * @code
 *   while (!my_exit_requested) {              // the flag has_event reports
 *           rc = vsched_kvm_pre_run(kv);      // service, inject, clear
 *           if (rc == VSCHED_KVM_CANCELLED)   //   immediate_exit, commit
 *                   continue;
 *           if (rc < 0)
 *                   break;
 *           my_pre_run_steps();               // nothing that can block
 *           if (my_exit_requested)            // pre_run serviced it: do not
 *                   ret = -1, errno = EINTR;  //   enter (QEMU's kick_self)
 *           else
 *                   ret = ioctl(vcpu_fd, KVM_RUN, 0);
 *           rc = vsched_kvm_post_run(kv, ret < 0 ? -errno : 0);
 *           my_post_run_steps();
 *           if (rc == KVM_EXIT_HLT)
 *                   rc = vsched_kvm_halt(kv, deadline);
 *           else if (rc >= 0 && rc != VSCHED_KVM_KICKED)
 *                   my_handle_exit(rc);
 *           if (rc < 0)
 *                   break;
 *   }
 * @endcode
 *
 * **An exit request** (QEMU's cpu->exit_request, a stop): the poster sets
 * the VMM's flag, which the `has_event` host callback reports, then posts
 * a request kind (or calls vsched_vcpu_kick()). Each part is needed:
 * vsched_kvm_halt() services requests and blocks again unless an
 * interrupt is owed, so a request alone leaves a halted vCPU halted (until
 * the deadline; with VSCHED_DEADLINE_NONE for ever), while has_event ends
 * the halt (VSCHED_WAKE_EVENT); a kick alone is lost on a vCPU about to
 * enter (vsched_vcpu_kick() pairs with a block's re-check, not with an
 * entry), while the post cancels an entry being committed
 * (VSCHED_KVM_CANCELLED) or kicks one that was. And since pre_run's
 * service can take that request and then commit, the loop looks at the
 * flag after pre_run too, and then does not enter: post_run with -EINTR
 * (VSCHED_KVM_KICKED).
 *
 * vsched_kvm_run() is pre_run, KVM_RUN and post_run with no steps
 * between. Between pre_run and KVM_RUN the vCPU is IN_GUEST for vsched: a
 * poster kicks instead of waking, so the VMM's steps there must not wait
 * for anything a poster provides.
 *
 * **The kick signal** is the VMM's choice (`signo`, SIGUSR1 by default,
 * QEMU's SIG_IPI). vsched installs no process-wide handler behind the
 * VMM's back: attach refuses a signal whose action is still the default or
 * ignore, or whose handler is one-shot (SA_RESETHAND: the second kick
 * would take the default action) (VSCHED_ENOHANDLER). Install your own
 * handler (without SA_RESTART or SA_RESETHAND), or call
 * vsched_kvm_signal_install(). The signal must be
 * deliverable while KVM_RUN runs: unblocked on the vCPU thread, or
 * unblocked for KVM_RUN by KVM_SET_SIGNAL_MASK as QEMU does.
 */
#ifndef VSCHED_KVM_H
#define VSCHED_KVM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kvm_run;
struct vsched_vcpu;
struct vsched_kvm_vcpu;

/** Attach parameters. Zero-initialise, then set `size`. */
struct vsched_kvm_config {
	/** sizeof(struct vsched_kvm_config). */
	size_t size;
	/**
	 * The kick signal. 0 selects SIGUSR1. It must have a handler when
	 * attach runs (see above); vsched installs none itself.
	 */
	int signo;
	/** Use the in-kernel irqchip: no KVM_INTERRUPT, no window requests. */
	bool kernel_irqchip;
};

/**
 * What vsched_kvm_run(), pre_run and post_run return besides 0 and a KVM
 * exit reason: successes, so positive, above every KVM_EXIT_* value, and
 * never mistaken for an error (changed in 0.2: they were negative).
 */
enum vsched_kvm_run_result {
	/** KVM_RUN returned EINTR: a kick (or another signal) interrupted it. */
	VSCHED_KVM_KICKED = 0x10000,
	/** The entry was cancelled by a request that arrived at commit. */
	VSCHED_KVM_CANCELLED = 0x10001,
};

/** Adapter counters (this vCPU). */
struct vsched_kvm_stats {
	/** sizeof(struct vsched_kvm_stats). */
	size_t size;
	/** KVM_RUN calls. */
	uint64_t runs;
	/** KVM_RUN returns by EINTR (kicks). */
	uint64_t kicked_exits;
	/** KVM_INTERRUPT injections. */
	uint64_t irqs_injected;
	/** KVM_NMI injections. */
	uint64_t nmis_injected;
	/** Entries that asked for an interrupt-window exit. */
	uint64_t window_requests;
	/** Halts that did not sleep because an interrupt was already owed. */
	uint64_t halts_skipped;
	/** Halts handled. */
	uint64_t halts;
};

/**
 * Install a kick signal handler that does nothing (no SA_RESTART) for
 * `signo`, process-wide, for a VMM that has none of its own for its kick
 * signal. Replaces whatever handler `signo` had. @return 0,
 * VSCHED_EINVAL (bad signal: not 1..NSIG-1, or SIGKILL, SIGSTOP, a fault
 * signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE), SIGTRAP, SIGSYS, or one the
 * process is sent with a meaning: SIGABRT, SIGXCPU, SIGXFSZ) or a negative
 * errno from sigaction.
 * Context: any thread, before attach.
 */
VSCHED_API int vsched_kvm_signal_install(int signo);

/**
 * Attach a vsched vCPU to KVM vCPU `vcpu_fd` and its mapping `run`.
 * The kick signals the thread that last called vsched_kvm_pre_run() (the
 * one in KVM_RUN), the attaching thread until then: attach may run on a
 * setup thread. It signals it by kernel thread id (tgkill): a kick that
 * comes late, after that thread ended, fails with nothing signalled, so a
 * thread that ran the vCPU may be joined while the vCPU lives on. The
 * adapter is allocated with the VM's allocator. One adapter per vCPU: a
 * second attach of the same vCPU is not detected, and its kicks would
 * signal the wrong thread.
 * @return 0, VSCHED_EINVAL (NULL, a negative vcpu_fd, bad size, bad
 * signal: as vsched_kvm_signal_install()), VSCHED_ENOHANDLER
 * (the signal has no handler, or a one-shot SA_RESETHAND one),
 * VSCHED_EDESTROYED (the vCPU is destroyed), VSCHED_ESTATE (the vCPU is
 * in the guest, POLLING or BLOCKED: its mode word, so not from the block's
 * hooks, where the word says OUTSIDE_GUEST) or VSCHED_ENOMEM.
 * States: the vCPU OUTSIDE_GUEST.
 * Context: any thread, before the vCPU runs.
 */
VSCHED_API int vsched_kvm_attach(struct vsched_vcpu *vcpu, int vcpu_fd,
				 struct kvm_run *run,
				 const struct vsched_kvm_config *cfg,
				 struct vsched_kvm_vcpu **out);

/**
 * Free the adapter. The order at teardown is: the vCPU thread leaves its
 * run loop; vsched_vcpu_destroy() (from that thread or another one); then
 * this. Destroy waits for any kick callback in flight and none runs after
 * it, so the adapter is no longer used. (A kick signals a kernel thread
 * id: one sent after its thread ended finds no thread.) vsched_vm_destroy()
 * destroys the vCPU too: detaching after it is valid (the adapter keeps its
 * own copy of the VM's allocator, whose functions and ctx must still work).
 * @return 0, VSCHED_EINVAL, or VSCHED_ESTATE (the vCPU's thread is between
 * vsched_kvm_pre_run() and its vsched_kvm_post_run(), or inside
 * vsched_kvm_halt(), a request handler's call included: refused, nothing
 * freed). States: no pre_run without its post_run, no halt running.
 * Context: any thread, after that destroy.
 */
VSCHED_API int vsched_kvm_detach(struct vsched_kvm_vcpu *kv);

/**
 * The kick: make KVM_RUN return now or at its next entry. Stores
 * immediate_exit, then signals the vCPU thread. Call it from the `kick`
 * host callback (vsched calls that at most once per guest entry).
 * @return 0 or VSCHED_EINVAL. Context: any thread; async-signal-safe.
 */
VSCHED_API int vsched_kvm_kick(struct vsched_kvm_vcpu *kv);

/**
 * Everything before KVM_RUN, in the one order that loses no kick: service
 * requests, inject what is owed (userspace irqchip), clear immediate_exit,
 * then commit to entry (vsched_vcpu_enter() publishes IN_GUEST, full
 * barrier, re-checks requests).
 * @return 0: issue KVM_RUN now, then call vsched_kvm_post_run();
 * VSCHED_KVM_CANCELLED: a request came at commit, do not run, call again;
 * VSCHED_ESTATE after a 0 with no post_run yet, or from a request handler
 * that pre_run's or vsched_kvm_halt()'s service runs; or a negative error
 * (then no post_run). States: between entries (every pre_run that
 * returned 0 followed by its post_run), outside a halt.
 * Context: the vCPU's own thread.
 */
VSCHED_API int vsched_kvm_pre_run(struct vsched_kvm_vcpu *kv);

/**
 * Everything after KVM_RUN: leave guest mode (vsched_vcpu_exit()), mark
 * kvm_run's injection fields fresh, count a kicked exit.
 * @param kv the adapter.
 * @param run_ret what KVM_RUN gave: 0, or the negative errno it failed with.
 * @return the exit reason (>= 0, KVM_EXIT_*; KVM_EXIT_HLT means call
 * vsched_kvm_halt()), VSCHED_KVM_KICKED for -EINTR, `run_ret` for another
 * error, VSCHED_ESTATE without a successful pre_run (also from a request
 * handler inside pre_run: the guest is not entered yet), or VSCHED_EINVAL
 * (NULL, or a `run_ret` that is neither 0 nor a negative errno,
 * -4095..-1: the entry stays open; or an exit reason of 0x10000 or more,
 * which no KVM gives: `run` is not the vCPU's kvm_run mapping; the entry
 * is closed).
 * States: after a pre_run that returned 0.
 * Context: the vCPU's own thread, right after KVM_RUN.
 */
VSCHED_API int vsched_kvm_post_run(struct vsched_kvm_vcpu *kv, int run_ret);

/**
 * One guest entry: vsched_kvm_pre_run(), KVM_RUN, vsched_kvm_post_run().
 * @return a KVM exit reason (>= 0, KVM_EXIT_*), VSCHED_KVM_KICKED,
 * VSCHED_KVM_CANCELLED (call again), or a negative errno from KVM_RUN or
 * vsched. Context: the vCPU's own thread.
 */
VSCHED_API int vsched_kvm_run(struct vsched_kvm_vcpu *kv);

/**
 * Queue external interrupt `vector` (32..255) for injection at the next
 * entry (userspace irqchip). Idempotent while queued, like an IRR bit.
 * @return 0, VSCHED_EINVAL (NULL, or an adapter attached with
 * kernel_irqchip: KVM's irqchip takes interrupts by KVM_IRQ_LINE or
 * KVM_SIGNAL_MSI, and nothing here would inject the vector) or
 * VSCHED_ERANGE (bad vector).
 * Context: the vCPU's thread (a request handler).
 */
VSCHED_API int vsched_kvm_queue_irq(struct vsched_kvm_vcpu *kv, unsigned vector);

/**
 * Take back a queued vector that has not been injected yet, as a device
 * deasserts its line: a guest timer re-armed while its interrupt waited for
 * IF=1 must not deliver the old expiry.
 * @return 1 when it was queued, 0 when not, VSCHED_EINVAL or VSCHED_ERANGE.
 * Context: the vCPU's thread.
 */
VSCHED_API int vsched_kvm_retract_irq(struct vsched_kvm_vcpu *kv,
				      unsigned vector);

/**
 * Inject an NMI now (KVM_NMI; delivered at the next entry).
 * @return 0, VSCHED_EINVAL or a negative errno from KVM.
 * Context: the vCPU's thread (a request handler).
 */
VSCHED_API int vsched_kvm_queue_nmi(struct vsched_kvm_vcpu *kv);

/**
 * Whether the guest is owed an interrupt. vCPU thread.
 * @return true when an interrupt is queued and not yet injected, or an NMI
 * was queued since the last entry; false otherwise and for NULL.
 */
VSCHED_API bool vsched_kvm_irq_owed(const struct vsched_kvm_vcpu *kv);

/**
 * Handle KVM_EXIT_HLT: return at once when an interrupt or NMI is owed
 * (vsched_kvm_irq_owed()), else block (poll, then sleep) and service
 * requests until one is, until a wake source other than a request fires, or
 * until
 * `deadline_ns` (VSCHED_DEADLINE_NONE: none) passes.
 * The `halts` counter counts a halt once it is handled: skipped, or once
 * its first block ran (not one the block refused).
 * @return enum vsched_wake_reason of the last wakeup (0 when nothing was
 * blocked on), VSCHED_ESTATE between a successful vsched_kvm_pre_run()
 * and its vsched_kvm_post_run() or from a request handler that pre_run's
 * or a halt's service runs, or a negative error.
 * States: between entries, as vsched_kvm_pre_run().
 * Context: the vCPU's own thread.
 */
VSCHED_API int vsched_kvm_halt(struct vsched_kvm_vcpu *kv, uint64_t deadline_ns);

/** Copy the adapter's counters. @return 0 or VSCHED_EINVAL.
 * Context: any thread (each counter is read whole). */
VSCHED_API int vsched_kvm_read_stats(const struct vsched_kvm_vcpu *kv,
				     struct vsched_kvm_stats *out);

/** The attached vsched vCPU. @return the vCPU, NULL for NULL.
 * Context: any thread. */
VSCHED_API struct vsched_vcpu *vsched_kvm_vcpu(const struct vsched_kvm_vcpu *kv);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_KVM_H */
