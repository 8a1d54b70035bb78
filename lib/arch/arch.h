/* SPDX-License-Identifier: MIT */
/*
 * The library's side of the arch layer. The instructions (fences, relax,
 * timebase, idle hint, wait-for-event) are in the installed layer,
 * <vsched/arch.h>: one header per arch under include/vsched/arch/, picked
 * by compiler macros, with generic fills for every primitive; the inline
 * fast paths of <vsched/inline.h> use the same fences. What stays here is
 * the library's own: the profiles, and lib/arch/<arch>/arch.c where an
 * arch needs a helper (x86's wait-for-event detection, power's timebase
 * frequency from glibc).
 *
 * The arch profiles (include/vsched/profile.h) are data, not code: each
 * lib/arch/<arch>/profile.c is compiled on every build, whatever the target,
 * so that vsched_profile_get() answers for every arch. Their constants are
 * written there once; VSCHED__ARCH_POLL_MAX_NS, the default poll window of
 * a VM (lib/vm.c), reads the target's profile, vsched_profile_get(NULL):
 * not the backend's VSCHED__ARCH_PROFILE, which a generic build of another
 * arch (a sanitizer build) takes from x86-64.
 */
#ifndef VSCHED__ARCH_H
#define VSCHED__ARCH_H

#include <stdint.h>
#include <vsched/arch.h>
#include <vsched/profile.h>
#include <vsched/timer.h>

/* The library is built for an arch of the CMake arch table, or on the fills
 * alone on purpose. */
#if VSCHED__ARCH_IS_GENERIC && !defined(VSCHED_ARCH_GENERIC)
#error "vsched: no <vsched/arch/> header for this processor; configure with -DVSCHED_ARCH_GENERIC=ON"
#endif

/* Every arch profile, by name (vsched__profile_<name>, defined in
 * lib/arch/<arch>/profile.c); lib/profile.c looks them up in this order. */
#define VSCHED__ARCH_PROFILES(X) X(x86_64) X(aarch64) X(ppc64le) X(s390x)

#define VSCHED__PROFILE_EXTERN(name) extern const struct vsched_profile vsched__profile_##name;
VSCHED__ARCH_PROFILES(VSCHED__PROFILE_EXTERN)
#undef VSCHED__PROFILE_EXTERN

/* One kind of a profile's request table, `id` being its place in the arch's
 * run-loop order. Its priority is 10 * id, which leaves the priorities
 * between two of the arch's kinds free for a VMM's own. */
#define VSCHED__PROFILE_KIND(id, name, raise) { (id), (name), (id) * 10, 0, (raise) }
/* One whose handler raises its own kind again (KVM's "not done, again at
 * the next entry attempt"): VSCHED_REQ_RERAISE and its own bit. */
#define VSCHED__PROFILE_KIND_RERAISE(id, name, raise)                           \
	{ (id), (name), (id) * 10, VSCHED_REQ_RERAISE, (raise) | VSCHED_KIND_BIT(id) }
#define VSCHED__PROFILE_NKINDS(a) (unsigned)(sizeof(a) / sizeof((a)[0]))

/* KVM's default halt_poll_ns for the target's arch: one lookup at VM
 * creation, from the one place the constant is written (the profile that
 * vsched_profile_get(NULL) returns, as vm.h promises). */
#define VSCHED__ARCH_POLL_MAX_NS (vsched_profile_get(NULL)->poll_max_ns)
#endif /* VSCHED__ARCH_H */
