/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#ifdef VSCHED_WITH_JEMALLOC
#include <jemalloc/jemalloc.h>

static void *default_alloc(size_t size, size_t align, void *ctx)
{
	(void)ctx;
	return mallocx(size, MALLOCX_ALIGN(align));
}

static void default_free(void *p, size_t size, void *ctx)
{
	(void)ctx;
	(void)size;
	dallocx(p, 0);
}
#else
static void *default_alloc(size_t size, size_t align, void *ctx)
{
	void *p = NULL;
	(void)ctx;
	return posix_memalign(&p, align, size) == 0 ? p : NULL;
}

static void default_free(void *p, size_t size, void *ctx)
{
	(void)ctx;
	(void)size;
	free(p);
}
#endif

static const struct vsched_allocator default_allocator = {
	.alloc = default_alloc,
	.free = default_free,
};

const struct vsched_allocator *vsched_default_allocator(void)
{
	return &default_allocator;
}

const struct vsched_allocator *vsched_vm_allocator(const struct vsched_vm *vm)
{
	return vm ? &vm->alloc : NULL;
}

void *vsched__alloc(const struct vsched_allocator *a, size_t size)
{
	void *p = a->alloc(size, VSCHED__CACHELINE, a->ctx);
	if (p)
		memset(p, 0, size);
	return p;
}

void vsched__free(const struct vsched_allocator *a, void *p, size_t size)
{
	if (p)
		a->free(p, size, a->ctx);
}
