/* SPDX-License-Identifier: MIT */
/**
 * @file alloc.h
 * @brief Allocator hook. vsched allocates when objects are created (VM,
 * vCPU, waiter, timer, timer service), when a poll policy is set and when
 * an fd is added; the post, service, entry, kick and block paths never
 * allocate.
 */
#ifndef VSCHED_ALLOC_H
#define VSCHED_ALLOC_H

#include <stddef.h>
#include <vsched/version.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * A hypervisor's own allocator. `alloc` returns zeroed or unzeroed memory of
 * at least `size` bytes aligned to `align` (a power of two, at least the
 * cache-line size vsched uses, 64), or NULL on failure; `free` gets back the
 * same pointer and size.
 */
struct vsched_allocator {
	/** Allocate `size` bytes aligned to `align`; NULL on failure. */
	void *(*alloc)(size_t size, size_t align, void *ctx);
	/** Free what `alloc` returned, with its size. */
	void (*free)(void *ptr, size_t size, void *ctx);
	/** Passed to both. */
	void *ctx;
};

/**
 * The default allocator: jemalloc's mallocx/dallocx when vsched was built
 * with VSCHED_WITH_JEMALLOC, otherwise posix_memalign/free.
 * Context: any thread.
 */
VSCHED_API const struct vsched_allocator *vsched_default_allocator(void);

struct vsched_vm;

/**
 * The allocator a VM was created with (its config's, or the default), for
 * adapters and extensions that allocate on the VM's behalf: they take
 * memory where vsched itself does. NULL for NULL.
 * Context: any thread, while the VM exists.
 */
VSCHED_API const struct vsched_allocator *vsched_vm_allocator(const struct vsched_vm *vm);

#ifdef __cplusplus
}
#endif
#endif /* VSCHED_ALLOC_H */
