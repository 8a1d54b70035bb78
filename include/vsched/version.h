/* SPDX-License-Identifier: MIT */
/**
 * @file version.h
 * @brief Library version and the ABI rule.
 *
 * ABI rule: within one VSCHED_VERSION_MAJOR, a public function never changes
 * its signature or meaning, enums only grow at the end, and structs passed by
 * the caller start with a `size` field so that new members can be appended.
 * The shared library's SONAME carries the major version and its version
 * script exports only vsched_* symbols. Until 1.0 the API is not declared
 * stable and each 0.MINOR is an ABI of its own (the SONAME carries
 * 0.MINOR); from 1.0 on, CI compares the library with an abidiff baseline.
 * 0.2 changed the values of vsched's own error codes (<vsched/error.h>)
 * and of the KVM adapter's non-exit results (<vsched/kvm.h>).
 */
#ifndef VSCHED_VERSION_H
#define VSCHED_VERSION_H

/** Major version: the ABI (the shared library's SONAME; 0.MINOR before 1.0). */
#define VSCHED_VERSION_MAJOR 0
/** Minor version: grows with compatible additions. */
#define VSCHED_VERSION_MINOR 2
/** Patch version: fixes only. */
#define VSCHED_VERSION_PATCH 0

/** Marks an exported function (the library hides everything else). */
#if defined(__GNUC__)
#define VSCHED_API __attribute__((visibility("default")))
#else
#define VSCHED_API
#endif

#endif /* VSCHED_VERSION_H */
