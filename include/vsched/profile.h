/* SPDX-License-Identifier: MIT */
/**
 * @file profile.h
 * @brief Arch profiles: what a hypervisor on each arch of doc/porting.md
 * links in as defaults. The request table in the arch's real service order
 * (which passes vsched_request_finalize()), the guest timer semantics,
 * KVM's default poll window, and what the blocking/unblocking hooks are for.
 */
#ifndef VSCHED_PROFILE_H
#define VSCHED_PROFILE_H

#include <stdint.h>
#include <vsched/request.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct vsched_vm;

/** One request kind of an arch's default table. */
struct vsched_profile_kind {
	/** Kind number (0..63). */
	unsigned kind;
	/** KVM's name for it, without the KVM_REQ_ prefix. Required by
	 * vsched_profile_declare() (a kind without one is refused, as
	 * vsched_request_declare() refuses it); vsched_profile_find() skips
	 * a NULL one. */
	const char *name;
	/** Service order (lower first), as the arch's run loop checks it. */
	unsigned priority;
	/** enum vsched_request_flags. */
	unsigned flags;
	/** Kinds (VSCHED_KIND_BIT) its handler raises. */
	uint64_t may_raise;
};

/** An arch profile. */
struct vsched_profile {
	/** The arch's name: "x86_64", "aarch64", ... (doc/porting.md). */
	const char *arch;
	/** KVM's default halt_poll_ns for the arch. */
	uint64_t poll_max_ns;
	/** enum vsched_timer_semantics of the guest timer. */
	unsigned timer_semantics;
	/** The kind its guest timer posts. */
	unsigned timer_kind;
	/** Number of kinds in `kinds`. */
	unsigned nkinds;
	/** The request table, in service order. */
	const struct vsched_profile_kind *kinds;
	/** What the arch's `blocking` hook does (doc/porting.md). */
	const char *blocking;
	/** What the arch's `unblocking` hook does. */
	const char *unblocking;
};

/**
 * The profile of `arch` ("x86_64", "aarch64", ...: doc/porting.md), or, for
 * NULL, of the arch vsched was built for (x86_64's where that arch has
 * none: the generic backend). @return the profile, or NULL if unknown.
 * Any thread.
 */
VSCHED_API const struct vsched_profile *vsched_profile_get(const char *arch);

/**
 * Index in p->kinds of the kind named `name` (kinds without a name are
 * skipped).
 * @return the index, VSCHED_EINVAL (NULL, or a profile with kinds and no
 * table) or VSCHED_ERANGE (no such kind).
 * Context: any thread (profiles are constant).
 */
VSCHED_API int vsched_profile_find(const struct vsched_profile *p, const char *name);

/**
 * Declare every kind of the profile on a VM, all with `handler` (which gets
 * the kind number; NULL: flags only). The caller may declare its own kinds,
 * then calls vsched_request_finalize().
 * @return 0 or the first error of vsched_request_declare() (the kinds
 * declared before it stay declared); VSCHED_EINVAL for NULL (also a
 * profile with kinds and no table).
 * Context: the setup thread.
 */
VSCHED_API int vsched_profile_declare(struct vsched_vm *vm, const struct vsched_profile *p,
				      vsched_request_fn handler, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_PROFILE_H */
