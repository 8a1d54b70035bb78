/* SPDX-License-Identifier: MIT */
/**
 * @file request.h
 * @brief Per-vCPU requests, serviced in a fixed priority order.
 *
 * A VM declares up to 64 request kinds. Each kind has a priority (the
 * service order: lower first), flags, a handler and the set of kinds its
 * handler may raise. vsched_request_finalize() checks that no handler may
 * raise a kind that is serviced before its own (such a request would only be
 * seen by the final pre-entry check, after the entry was committed, and the
 * entry would have to be cancelled), and that the may-raise relation has no
 * cycle. After finalisation the table is immutable and shared by all vCPUs.
 *
 * Ordering (the contract with vsched_service() and vsched_vcpu_enter()):
 * everything a poster wrote before vsched_post() is visible to the handler
 * that services the request. vsched_post() sets the request bit, issues a
 * full barrier and reads the vCPU's mode; vsched_vcpu_enter() and
 * vsched_vcpu_block() write the mode, issue a full barrier and read the
 * requests. This Dekker pair guarantees that a posted request is either seen
 * by the vCPU before it enters or sleeps, or the poster kicks or wakes it.
 */
#ifndef VSCHED_REQUEST_H
#define VSCHED_REQUEST_H

#include <stdint.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_vm;
struct vsched_vcpu;

/** Number of request kinds a VM can declare; kinds are 0..63. */
#define VSCHED_MAX_KINDS 64

/** Bit for kind `k` in a may-raise set. */
#define VSCHED_KIND_BIT(k) (UINT64_C(1) << (k))

/** Request flags (struct vsched_request_desc::flags). */
enum vsched_request_flags {
	/** Kick a vCPU that is in the guest, but do not wake a blocked one:
	 * a vCPU asleep in vsched_vcpu_block() sees it at its next wakeup.
	 * One that polls, or blocks while it is pending, returns
	 * VSCHED_WAKE_REQUEST as for any request. */
	VSCHED_REQ_NO_WAKEUP = 1u << 0,
	/**
	 * The poster returns only once every target has acknowledged: it has
	 * left guest mode since the post (and so will service the request
	 * before it runs guest code again), or was not in guest mode. A
	 * vCPU's own thread posting one to itself between its
	 * vsched_vcpu_enter() and vsched_vcpu_exit() waits for itself and
	 * never returns: post it after the exit (from a handler, say). The
	 * same holds for a WAIT post to another vCPU: two vCPU threads that
	 * each post one to the other between their enter and exit wait for
	 * each other forever. Call vsched_vcpu_exit() as soon as the guest
	 * exits, before handling the exit (KVM leaves guest mode before its
	 * exit handlers run); vsched_kvm_run() does.
	 */
	VSCHED_REQ_WAIT = 1u << 1,
	/**
	 * The request carries payloads (vsched_post_payload()): each is
	 * delivered exactly once, in post order, one handler call each.
	 */
	VSCHED_REQ_PAYLOAD = 1u << 2,
	/**
	 * The handler may post its own kind again to its own vCPU: KVM's
	 * "not done, again at the next entry attempt" (arm64's KVM_REQ_SLEEP
	 * when a signal is pending, x86's KVM_REQ_HV_STIMER for a timer
	 * that expired as it started). The kind's own bit in `may_raise` is
	 * then accepted, neither a cycle nor an order violation; without
	 * this flag it is VSCHED_ECYCLE. A pass does not service a kind
	 * twice: the re-raised request waits for the next
	 * vsched_service(), and an entry committed while it is pending is
	 * cancelled, once per re-raise (a handler that always re-raises
	 * never lets its vCPU enter). Added in 0.3.
	 */
	VSCHED_REQ_RERAISE = 1u << 3,
};

/**
 * Intrusive payload node: embed it in your own struct and recover that with
 * container_of in the handler. vsched never allocates payloads. Its content
 * is private to vsched between the post and the delivery.
 */
struct vsched_payload {
	/** vsched's link; do not touch between post and delivery. */
	struct vsched_payload *reserved_next;
};

/**
 * A request handler. Runs on the vCPU's thread inside vsched_service().
 * `payload` is NULL for kinds without VSCHED_REQ_PAYLOAD. A handler may post
 * requests (to this or other vCPUs), but only of the kinds declared in its
 * may-raise set when the target is this vCPU. vsched_request_finalize()
 * checks the declarations; the post itself does not (it does not know
 * that a handler is posting, and the inline post must stay a few
 * instructions): a handler that raises an undeclared kind on its own vCPU
 * is accepted, and two that raise each other so cancel every entry.
 * Arming a timer of its own vCPU (vsched_timer_arm()) with a deadline
 * already passed, or over an old deadline that passed unposted, or
 * raising a LEVEL timer's line (vsched_timer_set_ctl()), posts the
 * timer's kind: a raise like any other, to be listed in `may_raise`.
 * Inside a handler, vsched_vcpu_block() works (a wait-in-request, as
 * arm64's KVM_REQ_SLEEP); what would break the pass is refused with
 * VSCHED_ESTATE: vsched_service() with a request pending (a nested pass;
 * with none pending, its inline fast path returns 0 and runs nothing) and
 * vsched_vm_destroy() (destroy the VM once vsched_service() returned).
 * vsched_vcpu_destroy() of this vCPU (a hot-unplug request) ends the pass
 * after this handler. vsched_vcpu_enter() from a handler is cancelled
 * when a later kind is pending (the pass goes on); otherwise it returns 0
 * (its inline fast path cannot tell), and the pass then stops:
 * vsched_service() returns VSCHED_ESTATE, with the later kinds and the
 * kind's remaining payloads pending. So it does after a handler that
 * entered and exited (ran the guest, as vsched_kvm_run() from a handler
 * does): the pass knows it by the committed-entry count. A handler must
 * return: one that longjmps out leaves the pass marked, and the vCPU's
 * service and its VM's destroy are refused from then on. From a handler
 * that the KVM adapter's own service runs (in vsched_kvm_pre_run() or
 * vsched_kvm_halt()), vsched_kvm_pre_run(), vsched_kvm_post_run(),
 * vsched_kvm_run(), vsched_kvm_halt() and vsched_kvm_detach() are refused
 * with VSCHED_ESTATE (vsched_kvm_queue_irq() and the adapter's other
 * calls work there); vsched_kvm_halt() from a handler of the VMM's own
 * vsched_service() returns VSCHED_ESTATE when a request ends its block
 * (it services the request itself).
 */
typedef void (*vsched_request_fn)(struct vsched_vcpu *vcpu, unsigned kind,
				  struct vsched_payload *payload, void *arg);

/** One request kind. */
struct vsched_request_desc {
	/** Name for stats and error messages (copied, up to 31 chars): an
	 * identifier of letters, digits, '_', '.' and '-', as the stats
	 * writers print it unescaped (else VSCHED_EINVAL), and unique in
	 * the VM within those 31 chars, as the writers key each kind's
	 * values by it (else VSCHED_EEXIST). */
	const char *name;
	/** Service order: lower is serviced first; ties go by kind number. */
	unsigned priority;
	/** enum vsched_request_flags. */
	unsigned flags;
	/** Handler; NULL means the request is only a flag, cleared on service. */
	vsched_request_fn handler;
	/** Passed to the handler. */
	void *arg;
	/** Kinds (VSCHED_KIND_BIT) that the handler may post to its own vCPU. */
	uint64_t may_raise;
};

/** vsched_request_finalize() flags. */
enum vsched_finalize_flags {
	/**
	 * Accept a table whose handlers may raise earlier kinds (cycles are
	 * still rejected). Each violation then costs cancelled entries at run
	 * time; this exists to measure that cost, not for production.
	 */
	VSCHED_FINALIZE_ALLOW_LATE_RAISE = 1u << 0,
};

/**
 * Declare request kind `kind` (0..63).
 * @return 0, VSCHED_EINVAL (NULL vm/desc, unknown flags, a name that is
 * empty or not an identifier (see the descriptor's `name`), a
 * VSCHED_REQ_PAYLOAD kind without a handler),
 * VSCHED_ERANGE (kind >= 64), VSCHED_EEXIST (declared twice, or a
 * declared kind has the same name) or
 * VSCHED_EFINAL (table already finalised).
 * Context: the thread that set the VM up, before vsched_request_finalize().
 */
VSCHED_API int vsched_request_declare(struct vsched_vm *vm, unsigned kind,
				      const struct vsched_request_desc *desc);

/**
 * Check and freeze the table.
 * @return 0; VSCHED_ECYCLE when the may-raise relation has a cycle (a
 * kind's own bit is one, unless the kind has VSCHED_REQ_RERAISE);
 * VSCHED_EORDER when a handler may raise a kind serviced no later than its
 * own (kinds of one priority are serviced in kind order); VSCHED_ERANGE
 * when a may-raise set names an undeclared kind;
 * VSCHED_EINVAL (NULL vm, unknown flags); VSCHED_EFINAL (finalised
 * already). A table with no kind declared is valid: the VM's vCPUs still
 * block, wait on fds, run timers and take kicks, and every post is
 * refused with VSCHED_ERANGE. On failure the table stays open and
 * vsched_request_table_error() names the offending pair: declaring the
 * missing kind fixes VSCHED_ERANGE, VSCHED_FINALIZE_ALLOW_LATE_RAISE
 * accepts VSCHED_EORDER; a declared kind cannot be changed, so a cycle
 * needs a new VM.
 * Context: the setup thread. Implies a full barrier: vCPUs created after it
 * see the frozen table.
 */
VSCHED_API int vsched_request_finalize(struct vsched_vm *vm, unsigned flags);

/**
 * Why the last vsched_request_finalize() failed.
 * @param vm     the VM.
 * @param kind   receives the kind whose handler is at fault (may be NULL).
 * @param raised receives the kind it may raise (may be NULL).
 * @return the error of the last vsched_request_finalize() that checked the
 * table (VSCHED_ECYCLE, VSCHED_EORDER, VSCHED_ERANGE, VSCHED_EINVAL for
 * unknown flags), 0 once one succeeded or if none was called (a call
 * refused with VSCHED_EFINAL is not recorded), or VSCHED_EINVAL for a NULL
 * vm. `kind` and `raised` mean something only with a non-zero return.
 * Context: any thread.
 */
VSCHED_API int vsched_request_table_error(const struct vsched_vm *vm,
					  unsigned *kind, unsigned *raised);

/** Name of a declared kind, or NULL. Context: any thread. */
VSCHED_API const char *vsched_request_name(const struct vsched_vm *vm,
					   unsigned kind);

#ifndef VSCHED_INLINE /* <vsched/inline.h> defines it inline */
/**
 * Post a request to a vCPU: one atomic RMW sets the bit of `kind`, then a
 * full barrier and the kick decision on the vCPU's mode: IN_GUEST is kicked
 * (once: the first poster to move it to EXITING_GUEST calls the kick
 * callback), BLOCKED is woken (unless VSCHED_REQ_NO_WAKEUP), POLLING and
 * OUTSIDE_GUEST need nothing. With VSCHED_REQ_WAIT it then waits for the
 * acknowledgement. Posting a kind that is already pending coalesces with it.
 * A kind that a timer of the vCPU posts (<vsched/timer.h>) is serviced as
 * that timer's expiry: its cancellation policy may drop the post.
 * @return 0; VSCHED_EINVAL (NULL vcpu, or a payload kind: use
 * vsched_post_payload()); VSCHED_ERANGE (kind not declared);
 * VSCHED_EDESTROYED (vCPU destroyed: nothing was posted).
 * Context: any thread, including handlers. Pairs with vsched_service().
 */
VSCHED_API int vsched_post(struct vsched_vcpu *vcpu, unsigned kind);
#endif

/**
 * Post a payload of a VSCHED_REQ_PAYLOAD kind. On success the node belongs to
 * vsched until it is handed to the handler (or to the `payload_drop` host
 * callback if the vCPU is destroyed first); on failure it stays the caller's.
 * Payloads of one kind are delivered in the order their posts took effect.
 * A node is posted once until it is delivered or dropped: a node still
 * queued (on this vCPU or another) that is posted again cuts its queue,
 * so that other payloads are lost or delivered twice. The re-post of the
 * node at the tail of this vCPU's queue of this kind (queued last and not
 * delivered yet) is refused (VSCHED_EINVAL, nothing queued); a node
 * queued further up, or on another queue, cannot be seen without a field
 * of its own.
 * @return as vsched_post(); VSCHED_EINVAL also for a NULL payload, a kind
 * without VSCHED_REQ_PAYLOAD, or the node at the tail of that queue.
 * Context: any thread. Wait-free unless WAIT.
 */
VSCHED_API int vsched_post_payload(struct vsched_vcpu *vcpu, unsigned kind,
				   struct vsched_payload *payload);

#ifndef VSCHED_INLINE /* <vsched/inline.h> defines it inline */
/**
 * Service pending requests in priority order, in one pass: each pending
 * kind's bit is cleared, then its handler runs (once, or once per payload).
 * A handler that raises a later kind sees it serviced in the same pass; a
 * kind that becomes pending behind the pass (an earlier kind posted by
 * another thread) waits for the next call, and so does a payload queued
 * after its kind's turn began (a pass delivers the payloads queued then:
 * posters that queue faster than the handler runs cannot hold the thread
 * in one call). With nothing pending this is one
 * load.
 * @return the number of kinds serviced (>= 0), VSCHED_EINVAL,
 * VSCHED_EDESTROYED or VSCHED_ESTATE (work pending and the vCPU in guest
 * mode, or inside vsched_vcpu_block(): another thread, or a hook of the
 * block's own; or, with work pending, a handler's nested call; or a
 * handler of this pass entered the guest, which ends it: the later kinds
 * stay pending and the word says IN_GUEST).
 * States: OUTSIDE_GUEST; with nothing pending it returns 0
 * in any state (one load: nothing done, nothing refused).
 * Context: the vCPU's own thread only, outside guest mode. Acquire: pairs with
 * the release in vsched_post().
 */
VSCHED_API int vsched_service(struct vsched_vcpu *vcpu);
#endif

/**
 * Post `kind` to a set of vCPUs. When the kind has VSCHED_REQ_WAIT, all
 * targets are posted and kicked first, then the call waits until each has
 * acknowledged (like KVM's make_all_cpus_request with KVM_REQUEST_WAIT).
 * @param vm    the VM.
 * @param set   bitmap of vCPU ids (bit i of set[i / 64]), or NULL for all.
 * @param nbits number of bits in `set` (ignored when set is NULL).
 * @param kind  the request kind (not a payload kind).
 * @return the number of vCPUs posted to (destroyed ones are skipped),
 * VSCHED_EINVAL (NULL vm, payload kind), VSCHED_ENOTFINAL (the table is
 * not finalised) or VSCHED_ERANGE (the kind is not declared).
 * Context: any thread. A vCPU thread may include itself outside guest mode
 * (after its vsched_vcpu_exit(), e.g. from a handler): it acknowledges at
 * once. Between its vsched_vcpu_enter() and vsched_vcpu_exit() a WAIT
 * broadcast that includes itself never returns.
 */
VSCHED_API int vsched_broadcast(struct vsched_vm *vm, const uint64_t *set,
				unsigned nbits, unsigned kind);

#ifdef __cplusplus
}
#endif
/* The inline fast paths (and, with VSCHED_INLINE, these functions). */
#include <vsched/inline.h>
#endif /* VSCHED_REQUEST_H */
