/* SPDX-License-Identifier: MIT */
/*
 * Arch dispatcher: the only place that tests arch macros. Each backend
 * defines the same small contract and ends by including generic/fill.h,
 * which supplies what it leaves out:
 *
 *   vsched__relax()          spin-wait hint inside poll loops
 *   vsched__mb()             full (store-load) barrier
 *   vsched__mb_after_rmw()   full barrier following an atomic RMW; free where
 *                            RMWs are already full barriers (x86)
 *   vsched__timebase()       a cheap monotonic counter
 *   vsched__timebase_freq()  its frequency in Hz (0: calibrate against
 *                            CLOCK_MONOTONIC, see lib/timebase.c)
 *   vsched__idle_hint()      lower this hardware thread's priority while
 *                            idling (power's "or 1,1,1"; elsewhere relax)
 *   vsched__wait_event(p, v) optional: wait (bounded) until *p may differ
 *                            from v, with the CPU's wait-for-event; the
 *                            generic fill is a relax. VSCHED__HAVE_WFE says
 *                            the arch has a real one.
 *   VSCHED__ARCH_NAME        the backend's name
 *   VSCHED__ARCH_PROFILE     the arch profile it runs (below); the generic
 *                            fill is x86-64's
 *
 * VSCHED_ARCH_GENERIC (set by CMake for sanitizer builds, unknown processors
 * and on request) selects the C11-only backend.
 *
 * The arch profiles (include/vsched/profile.h) are data, not code: each
 * lib/arch/<arch>/profile.c is compiled on every build, whatever the target,
 * so that vsched_profile_get() answers for every arch. Their constants are
 * written there once; VSCHED__ARCH_POLL_MAX_NS, the default poll window of
 * a VM (lib/vm.c), reads the backend's profile.
 */
#ifndef VSCHED__ARCH_H
#define VSCHED__ARCH_H

#include <stdint.h>
#include <vsched/profile.h>
#include <vsched/timer.h>

/* The profiles, defined in lib/arch/<arch>/profile.c; lib/profile.c looks
 * them up by name. */
extern const struct vsched_profile vsched__profile_x86_64;
extern const struct vsched_profile vsched__profile_aarch64;
extern const struct vsched_profile vsched__profile_ppc64le;

/* One kind of a profile's request table, `id` being its place in the arch's
 * run-loop order. Its priority is 10 * id, which leaves the priorities
 * between two of the arch's kinds free for a VMM's own. */
#define VSCHED__PROFILE_KIND(id, name, raise) { (id), (name), (id) * 10, 0, (raise) }
#define VSCHED__PROFILE_NKINDS(a) (unsigned)(sizeof(a) / sizeof((a)[0]))

#define VSCHED__ARCH_DISPATCH 1

#if defined(VSCHED_ARCH_GENERIC)
#include "generic/arch.h"
#elif defined(__x86_64__)
#include "x86_64/arch.h"
#elif defined(__aarch64__)
#include "aarch64/arch.h"
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
#include "ppc64/arch.h"
#else
#error "vsched: unknown architecture; configure with -DVSCHED_ARCH_GENERIC=ON"
#endif

#undef VSCHED__ARCH_DISPATCH

/* KVM's default halt_poll_ns for the backend's arch: one load at VM
 * creation, from the one place the constant is written. */
#define VSCHED__ARCH_POLL_MAX_NS (VSCHED__ARCH_PROFILE.poll_max_ns)
#endif /* VSCHED__ARCH_H */
