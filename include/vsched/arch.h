/* SPDX-License-Identifier: MIT */
/**
 * @file arch.h
 * @brief The arch layer: the few instructions vsched's protocol needs,
 * shared by the library and the inline fast paths of inline.h (not API).
 *
 * One header per arch under vsched/arch/, picked here by the compiler's
 * own macros, and vsched/arch/generic.h, which fills every primitive an
 * arch header leaves out (liburcu's urcu/arch.h model): a port writes
 * only what its processor does differently. This is the only place,
 * with lib/arch/, that tests an arch macro.
 */
#ifndef VSCHED_ARCH_H
#define VSCHED_ARCH_H

/** @cond VSCHED_INTERNAL (the arch primitives: not API) */
/*
 * The contract (each one `static inline`, names with two underscores):
 *
 *   vsched__relax()          spin-wait hint inside poll loops
 *   vsched__mb()             full (store-load) barrier
 *   vsched__mb_after_rmw()   full barrier following an atomic RMW; free
 *                            where RMWs are already full barriers (x86)
 *   VSCHED__MB_AFTER_RMW_ON(word)  the same after an RMW on *word (the
 *                            inline bodies; sanitizer builds RMW the word)
 *   vsched__timebase()       a cheap monotonic counter
 *   vsched__timebase_freq_hw()  its frequency in Hz as the arch states it
 *                            (0: calibrate against CLOCK_MONOTONIC,
 *                            lib/timebase.c)
 *   vsched__idle_hint()      lower this hardware thread's priority while
 *                            idling (power's "or 1,1,1"; elsewhere relax)
 *   vsched__wait_event(p, v) wait (bounded) until *p may differ from v, with
 *                            the CPU's wait-for-event (VSCHED__HAVE_WFE 1);
 *                            else a relax
 *   VSCHED__ARCH_NAME        the backend's name ("generic" for the fills)
 *   VSCHED__ARCH_PROFILE     the arch profile it runs (the library's
 *                            vsched__profile_<arch>; the fill is x86-64's)
 *
 * An arch header defines VSCHED__HAVE_<PRIMITIVE> 1 next to each primitive
 * it writes (RELAX, MB, MB_AFTER_RMW, TIMEBASE, TIMEBASE_FREQ, IDLE_HINT,
 * WFE). A few primitives call a library helper (x86's wait-for-event
 * detection, power's timebase frequency): those helpers are hidden symbols
 * of libvsched, so only the library may call these primitives; the inline
 * bodies use the fences only.
 *
 * VSCHED_ARCH_GENERIC (set by CMake for sanitizer builds, processors
 * outside the arch table, and on request) selects the fills alone.
 */
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define VSCHED__ARCH_LAYER 1
#if defined(VSCHED_ARCH_GENERIC)
/* the C11 fills below, nothing else */
#elif defined(__x86_64__)
#include <vsched/arch/x86_64.h>
#elif defined(__aarch64__)
#include <vsched/arch/aarch64.h>
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
#include <vsched/arch/ppc64le.h>
#elif defined(__s390x__)
#include <vsched/arch/s390x.h>
#endif
#include <vsched/arch/generic.h>
#undef VSCHED__ARCH_LAYER

#ifdef __cplusplus
}
#endif
/** @endcond */
#endif /* VSCHED_ARCH_H */
