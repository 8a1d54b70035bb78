/* SPDX-License-Identifier: MIT */
/**
 * @file version.h
 * @brief Library version and the ABI rule.
 *
 * ABI rule: within one VSCHED_VERSION_MAJOR, a public function never changes
 * its signature or meaning, and enums only grow at the end. Every public
 * struct is one of three kinds:
 *
 * - **Extensible**: it starts with `size` (configs, parameters, descriptors,
 *   stats and results: vsched_vm_config, vsched_poll_params,
 *   vsched_timer_desc, vsched_vcpu_stats, vsched_block_result,
 *   vsched_kvm_config, vsched_kvm_stats ...). One rule for all of them, as
 *   Linux's copy_struct_from_user(): passed in, a struct shorter than its
 *   first layout is refused, a shorter one than the library's reads as if
 *   its missing members were zero, and a longer one is accepted only when
 *   every byte the library does not know is zero; read out, the members both
 *   sides know are written, a longer caller's tail is zeroed and `size` says
 *   how much was written. A `size` above 4096 (a page, as Linux's openat2
 *   and clone3) is garbage, an uninitialised struct: refused either way
 *   before a byte behind the caller's struct is read or written.
 * - **Frozen**: the callback tables vsched_host_ops, vsched_allocator and
 *   vsched_kvm_gov_ops and the request descriptor vsched_request_desc
 *   never change layout within a major version (a hypervisor declares
 *   them in static tables, so they carry no `size`); a new callback or
 *   field comes in a new extensible struct of its own. So do the other
 *   structs without `size`, which one side reads or writes whole:
 *   vsched_poll_state, vsched_hwthread and vsched_payload (the caller's
 *   memory), vsched_timer_stats and vsched_halt_stats (written whole by
 *   vsched_timer_read_stats() and vsched_waiter_stats()), vsched_kind_stats
 *   (an array in vsched_vcpu_stats), and the library's constant tables
 *   vsched_stat_desc, vsched_profile and vsched_profile_kind.
 * - **Hot layout**: the first two cache lines of every vCPU (struct
 *   vsched_vcpu_hot in <vsched/inline.h>: the pending word, the mode word
 *   and its encoding, the entry count, the kind-to-rank table), which the
 *   inline fast paths of a VSCHED_INLINE hypervisor read and write
 *   directly, never change offset, size or meaning within a major version;
 *   test/abi/check-abi.sh checks them with abidiff against a committed
 *   baseline, and the library checks its private struct against them when
 *   it compiles.
 * The shared library's SONAME carries the major version and its version
 * script exports only vsched_* symbols. Until 1.0 the API is not declared
 * stable and each 0.MINOR is an ABI of its own (the SONAME carries
 * 0.MINOR). Within one, test/abi/check-abi.sh compares the library with
 * an abidiff baseline: no export may be lost or changed incompatibly.
 * 0.2 changed the values of vsched's own error codes (<vsched/error.h>)
 * and of the KVM adapter's non-exit results (<vsched/kvm.h>).
 * 0.3 grew struct vsched_poll_params (sleep_cpu_ns, spin_pct and later
 * members), which vsched_poll_defaults() fills whole without a size from
 * its caller, so a binary built against 0.2 would have its struct
 * overrun: the SONAME moved to libvsched.so.0.3 so that such a binary
 * cannot load this library.
 */
#ifndef VSCHED_VERSION_H
#define VSCHED_VERSION_H

/** Major version: the ABI (the shared library's SONAME; 0.MINOR before 1.0). */
#define VSCHED_VERSION_MAJOR 0
/** Minor version (before 1.0, each minor is an ABI of its own). */
#define VSCHED_VERSION_MINOR 3
/** Patch version: fixes only. */
#define VSCHED_VERSION_PATCH 0

/** Marks an exported function (the library hides everything else). */
#if defined(__GNUC__)
#define VSCHED_API __attribute__((visibility("default")))
#else
#define VSCHED_API
#endif

#endif /* VSCHED_VERSION_H */
