/* SPDX-License-Identifier: MIT */
/*
 * Arch dispatcher: the only place that tests arch macros. Each backend
 * defines the same small contract:
 *
 *   vsched__relax()          spin-wait hint inside poll loops
 *   vsched__mb()             full (store-load) barrier
 *   vsched__mb_after_rmw()   full barrier following an atomic RMW; free where
 *                            RMWs are already full barriers (x86)
 *   VSCHED__ARCH_NAME        string for logs and tests
 *
 * VSCHED_ARCH_GENERIC (set by CMake for sanitizer builds, unknown processors
 * and on request) selects the C11-only backend.
 */
#ifndef VSCHED__ARCH_H
#define VSCHED__ARCH_H

#define VSCHED__ARCH_DISPATCH 1

#if defined(VSCHED_ARCH_GENERIC)
#include "generic/arch.h"
#elif defined(__x86_64__)
#include "x86_64/arch.h"
#else
#error "vsched: unknown architecture; configure with -DVSCHED_ARCH_GENERIC=ON"
#endif

#undef VSCHED__ARCH_DISPATCH
#endif /* VSCHED__ARCH_H */
