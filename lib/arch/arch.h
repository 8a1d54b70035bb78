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
 *   VSCHED__ARCH_NAME, VSCHED__ARCH_POLL_MAX_NS (KVM's halt_poll_ns default)
 *
 * VSCHED_ARCH_GENERIC (set by CMake for sanitizer builds, unknown processors
 * and on request) selects the C11-only backend.
 */
#ifndef VSCHED__ARCH_H
#define VSCHED__ARCH_H

#include <stdint.h>

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
#endif /* VSCHED__ARCH_H */
