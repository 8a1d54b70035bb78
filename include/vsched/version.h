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
 * stable; from 1.0 on, CI compares the library with an abidiff baseline.
 */
#ifndef VSCHED_VERSION_H
#define VSCHED_VERSION_H

/** Major version: the ABI (the shared library's SONAME). */
#define VSCHED_VERSION_MAJOR 0
/** Minor version: grows with compatible additions. */
#define VSCHED_VERSION_MINOR 1
/** Patch version: fixes only. */
#define VSCHED_VERSION_PATCH 0

/** Marks an exported function (the library hides everything else). */
#if defined(__GNUC__)
#define VSCHED_API __attribute__((visibility("default")))
#else
#define VSCHED_API
#endif

#endif /* VSCHED_VERSION_H */
